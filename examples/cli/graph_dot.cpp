// `wpk info MODEL --optimized --dot FILE | --svg FILE`: the optimized graph as Graphviz draws it.
// One box per step: op (fused groups with the model ops they stand for), the candidate that ran
// it with its configuration and kernel, and its layout; boxes are coloured by backend and a step
// that reorders its data says how often. Edges carry the value's name and shape; weights are left
// out (they would double the picture).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "cli.hpp"

namespace wpk::cli {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const char* colour_of(const std::string& backend) {
  const std::string family = backend.substr(0, backend.find_first_of("(:"));
  if (family == "gen") return "#c6e5b3";
  if (family == "onednn") return "#b3d1f0";
  if (family == "cpu") return "#f5d7a3";
  if (family == "reference") return "#e0e0e0";
  return "#ffffff";
}

std::string shape_text(const ValueInfo& v, const std::map<std::string, Shape>& seen) {
  if (const auto it = seen.find(v.name); it != seen.end()) return shape_to_string(it->second);
  return v.dims ? dims_to_string(*v.dims) : "?";
}

}  // namespace

std::string optimized_graph_dot(const Session& session, const PlanSummary& plan, const RunProfile& run) {
  const Graph& g = session.graph();
  std::map<std::string, const Node*> by_name;
  for (const Node& n : g.nodes()) by_name.emplace(n.name, &n);
  // Shapes of this run: each step's first output.
  std::map<std::string, Shape> seen;
  for (std::size_t i = 0; i < plan.steps.size() && i < run.steps.size(); ++i)
    if (const auto it = by_name.find(plan.steps[i].node); it != by_name.end() && !it->second->outputs.empty())
      seen[g.value(it->second->outputs[0]).name] = run.steps[i].output_shape;

  std::ostringstream dot;
  dot << "digraph wpk {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\"];\n";
  std::map<ValueId, std::string> producer;  // value -> the DOT node that makes it
  for (ValueId v : g.inputs()) {
    const std::string id = "in_" + std::to_string(v);
    dot << "  " << id << " [shape=ellipse, fillcolor=\"#ffffff\", label=\"" << escape(g.value(v).name) << "\"];\n";
    producer[v] = id;
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const StepSummary& s = plan.steps[i];
    const auto it = by_name.find(s.node);
    if (it == by_name.end()) continue;
    const Node& n = *it->second;
    const std::string backend = i < run.steps.size() ? run.steps[i].backend : s.backend;
    const std::string layout = i < run.steps.size() ? run.steps[i].layout : s.layout;
    std::string label = s.op + "  (" + s.node + ")";
    if (!s.fused_from.empty()) {
      std::string group;
      for (const std::string& op : s.fused_from) group += (group.empty() ? "= " : "+") + op;
      label += "\n" + group;
    }
    label += "\n" + backend;
    if (s.threads > 0 && s.threads < session.threads()) label += "  threads=" + std::to_string(s.threads);
    if (layout != "-") label += "\nlayout " + layout;
    const int reorders = i < run.steps.size() ? run.steps[i].reorders : 0;
    if (reorders > 0) label += "  reorders " + std::to_string(reorders);
    const std::string id = "s" + std::to_string(i);
    dot << "  " << id << " [fillcolor=\"" << colour_of(backend) << "\"" << (reorders > 0 ? ", color=\"#c03030\", penwidth=2" : "")
        << ", label=\"" << escape(label) << "\"];\n";
    for (ValueId in : n.inputs) {
      if (in == kNoValue || g.is_initializer(in)) continue;
      const auto p = producer.find(in);
      if (p == producer.end()) continue;
      const ValueInfo& v = g.value(in);
      dot << "  " << p->second << " -> " << id << " [label=\"" << escape(v.name + " " + shape_text(v, seen)) << "\"];\n";
    }
    for (ValueId out : n.outputs) producer[out] = id;
  }
  for (ValueId v : g.outputs()) {
    const std::string id = "out_" + std::to_string(v);
    const ValueInfo& info = g.value(v);
    dot << "  " << id << " [shape=ellipse, fillcolor=\"#ffffff\", label=\"" << escape(info.name) << "\"];\n";
    if (const auto p = producer.find(v); p != producer.end())
      dot << "  " << p->second << " -> " << id << " [label=\"" << escape(shape_text(info, seen)) << "\"];\n";
  }
  dot << "  legend [shape=plaintext, style=\"\", label=\"gen: generated   onednn   cpu: wpk's own   reference: Eigen   "
         "red border: reorders its layout\"];\n}\n";
  return dot.str();
}

void write_graph_picture(const std::string& dot, const std::string& dot_path, const std::string& svg_path) {
  if (!dot_path.empty()) {
    std::ofstream out(dot_path);
    if (!(out << dot)) throw Error(ErrorCode::Io, "cannot write '" + dot_path + "'");
  }
  if (svg_path.empty()) return;
  if (std::system("command -v dot >/dev/null 2>&1") != 0)
    throw Error(ErrorCode::Unsupported, "--svg needs Graphviz's dot (apt-get install graphviz); --dot FILE writes the graph without it");
  const std::string tmp = svg_path + ".dot.tmp";
  {
    std::ofstream out(tmp);
    if (!(out << dot)) throw Error(ErrorCode::Io, "cannot write '" + tmp + "'");
  }
  std::string quoted_svg = "'", quoted_tmp = "'";
  for (char c : svg_path) quoted_svg += c == '\'' ? std::string("'\\''") : std::string(1, c);
  for (char c : tmp) quoted_tmp += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const int rc = std::system(("dot -Tsvg " + quoted_tmp + "' -o " + quoted_svg + "'").c_str());
  std::remove(tmp.c_str());
  if (rc != 0) throw Error(ErrorCode::Io, "Graphviz's dot could not write '" + svg_path + "'");
}

}  // namespace wpk::cli
