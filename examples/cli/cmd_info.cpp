// wpk info MODEL [--optimized [--batch B] [--dim NAME=SIZE] [--inputs DIR] [--dot FILE] [--svg FILE] [--disable PASS,...]]:
// inputs and outputs with shapes and dtypes, op histogram, unsupported ops. --optimized adds the
// graph the Session runs: every node with its backend and layout (fused com.wpk ops marked), the
// layout reorders a run makes, and the memory plan of one run (random inputs, or --inputs DIR's
// input_<i>.pb) next to one
// allocation per intermediate. --dot / --svg (which imply --optimized) draw that graph.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli.hpp"

namespace wpk::cli {
namespace {
void print_values(const char* title, const Graph& g, const std::vector<ValueId>& ids) {
  std::printf("%s:\n", title);
  for (ValueId v : ids) {
    const ValueInfo& info = g.value(v);
    std::printf("  %-24s %-8s %s\n", info.name.c_str(), dtype_name(info.dtype),
                info.dims ? dims_to_string(*info.dims).c_str() : "(shape unknown)");
  }
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void print_optimized(const std::string& path, const Args& args, SessionOptions options) {
  Graph graph = load(path);
  fix_dims_for_device(options, graph, args);
  Session session(std::move(graph), options);
  std::string passes;
  for (const std::string& name : Optimizer(options.optimizer).pass_names()) passes += (passes.empty() ? "" : ", ") + name;
  std::printf("optimizer passes (switch off with --disable NAME): %s\n", passes.c_str());
  const TensorMap inputs = command_inputs(session, args);
  // What a long-lived process runs: with the kernels compiled after load.
  const BackgroundCompilation compiled_later = session.wait_for_background_compilation();
  if (compiled_later.kernels > 0)
    std::printf("compiled after load: %d of %d generated kernels in %.1f s\n", compiled_later.ready,
                compiled_later.kernels, compiled_later.seconds);
  RunProfile run;
  with_inputs_hint(args, [&] { session.run(inputs, &run); });  // plans memory (and backends) for these shapes
  const PlanSummary plan = session.describe();
  int fused = 0, transposes = 0, inside = 0, inside_steps = 0;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    fused += plan.steps[i].domain == "com.wpk";
    const int r = i < run.steps.size() ? run.steps[i].reorders : 0;
    const bool transpose = plan.steps[i].op == "Transpose";
    transposes += transpose ? r : 0;
    inside += transpose ? 0 : r;
    inside_steps += !transpose && r > 0;
  }
  std::printf("optimized graph: %zu nodes, %d fused (com.wpk, marked *; the model ops each merged node stands for under "
              "\"fused group\")\n", plan.steps.size(), fused);
  std::printf("layout reorders per run: %d (%d Transpose nodes, %d inside %d kernels that work in another layout, "
              "marked layout>inner)\n",
              transposes + inside, transposes, inside, inside_steps);
  int width = 4;  // the node column fits the longest name
  for (const StepSummary& s : plan.steps) width = std::max(width, static_cast<int>(s.node.size()));
  std::printf("  %-4s %-*s %-26s %-24s %-13s %s\n", "#", width, "node", " op", "backend", "layout", "fused group");
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const StepSummary& s = plan.steps[i];
    const std::string& layout = i < run.steps.size() ? run.steps[i].layout : s.layout;
    // The run's backend also names the kernel that ran ("cpu:any_concat", "onednn:stream"),
    // and a configuration on fewer threads than the session's says so.
    std::string backend = i < run.steps.size() ? run.steps[i].backend : s.backend;
    if (s.threads > 0 && s.threads < session.threads()) backend += " threads=" + std::to_string(s.threads);
    std::string group;  // what a fused node stands for: "= Conv+BatchNormalization+Relu"
    for (const std::string& op : s.fused_from) group += (group.empty() ? "= " : "+") + op;
    std::printf("  %-4zu %-*s %-26s %-24s %-13s %s\n", i, width, s.node.c_str(),
                ((s.domain == "com.wpk" ? "*" : " ") + s.op).c_str(), backend.c_str(), layout.c_str(), group.c_str());
  }
  if (args.has("--dot") || args.has("--svg"))
    write_graph_picture(optimized_graph_dot(session, plan, run), args.get("--dot", ""), args.get("--svg", ""));
  if (plan.memory_planned)
    std::printf("memory: arena %.2f MiB planned, %.2f MiB as one allocation per intermediate (%.0f%%)\n",
                mib(plan.arena_bytes), mib(plan.naive_bytes),
                plan.naive_bytes ? 100.0 * static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.naive_bytes) : 0.0);
}
}  // namespace

int cmd_info(const Args& args) {
  const SessionOptions options = base_options(args);  // rejects an unknown --disable name, --optimized or not
  const Graph g = load(args.positional[0]);
  std::printf("model %s  opset %lld  %zu nodes  %zu initializers\n", args.positional[0].c_str(),
              static_cast<long long>(g.opset()), g.nodes().size(), g.initializers().size());
  print_values("inputs", g, g.inputs());
  print_values("outputs", g, g.outputs());
  std::map<std::string, int> histogram;
  for (const Node& n : g.nodes()) ++histogram[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
  std::printf("ops:\n");
  for (const auto& kv : histogram) std::printf("  %-24s %d\n", kv.first.c_str(), kv.second);
  const auto unsupported = find_unsupported(g);
  std::map<std::string, std::string> by_op;
  for (const auto& u : unsupported) by_op.emplace(u.op_type, u.reason);
  std::printf("unsupported ops: %s\n", by_op.empty() ? "none" : "");
  for (const auto& kv : by_op) std::printf("  %-24s %s\n", kv.first.c_str(), kv.second.c_str());
  const bool optimized = args.has("--optimized") || args.has("--dot") || args.has("--svg");
  if (optimized && !by_op.empty() && (args.has("--dot") || args.has("--svg")))
    throw Error(ErrorCode::Unsupported, "cannot draw the optimized graph of a model with unsupported ops");
  if (optimized && by_op.empty()) print_optimized(args.positional[0], args, options);
  return 0;
}

}  // namespace wpk::cli
