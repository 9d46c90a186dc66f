#include "runtime/execution_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "runtime/logging.hpp"
#include "wpk/session.hpp"

namespace wpk {

std::string why_unsupported(const Node& node, const Graph& graph) {
  std::string why;
  for (const Backend* b : registered_backends()) {
    why = b->why_unsupported(node, graph);
    if (why.empty()) return "";
  }
  return why;
}

std::vector<UnsupportedNode> find_unsupported(const Graph& graph) {
  std::vector<UnsupportedNode> out;
  for (const Node& n : graph.nodes()) {
    std::string why = why_unsupported(n, graph);
    if (!why.empty()) out.push_back({n.name, n.op_type, why});
  }
  return out;
}

std::string node_layout(const Node& node) {
  if (node.attr_int("channels_last", 0) == 1) return "NHWC";
  static const std::set<std::string> sensitive = {
      "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv", "MaxPool", "AveragePool", "LpPool",
      "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN",
      "DepthToSpace", "SpaceToDepth", "MaxRoiPool", "RoiAlign", "MaxUnpool"};
  return sensitive.count(node.op_type) ? "NCHW" : "-";
}

std::string qualified_op(const Node& node) {
  if (node.domain.empty() || node.domain == "ai.onnx") return node.op_type;
  return node.domain + "." + node.op_type;
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

std::vector<std::string> resolve_disabled_kernels(const std::vector<std::string>& configured,
                                                  const std::vector<const Backend*>& backends) {
  std::vector<std::string> all = configured;
  if (const char* env = std::getenv("WPK_DISABLE_KERNELS")) {
    std::string item;
    for (const char* c = env;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!item.empty()) all.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else if (*c != ' ') {
        item += *c;
      }
    }
  }
  for (const std::string& entry : all) {
    const std::size_t colon = entry.find(':');
    const std::string backend = entry.substr(0, colon);
    const auto found = std::find_if(backends.begin(), backends.end(), [&](const Backend* b) { return b->name() == backend; });
    if (found == backends.end()) {
      std::vector<std::string> names;
      for (const Backend* b : backends) names.push_back(b->name());
      throw Error(ErrorCode::InvalidArgument, "disabled kernel '" + entry + "' names no backend (there are " + join(names) +
                                                  "; from SessionOptions::disabled_kernels or WPK_DISABLE_KERNELS)");
    }
    if (colon == std::string::npos) continue;
    const std::vector<std::string> kernels = (*found)->kernel_names();
    if (std::find(kernels.begin(), kernels.end(), entry.substr(colon + 1)) == kernels.end())
      throw Error(ErrorCode::InvalidArgument,
                  "disabled kernel '" + entry + "' names no kernel of " + backend +
                      (kernels.empty() ? " (it has none of its own to leave out)" : " (it has " + join(kernels) + ")"));
  }
  return all;
}

namespace {

bool listed(const std::vector<std::string>& disabled, const std::string& name) {
  return std::find(disabled.begin(), disabled.end(), name) != disabled.end();
}

}  // namespace

ExecutionPlan::ExecutionPlan(const Graph& graph, const std::vector<const Backend*>& backends) {
  prepare_steps(graph, backends, nullptr, {}, false);
}

ExecutionPlan::ExecutionPlan(Graph& graph, const std::vector<const Backend*>& backends, bool release_owned_constants,
                             const std::vector<std::string>& disabled, bool every_config) {
  prepare_steps(graph, backends, release_owned_constants ? &graph : nullptr, disabled, every_config);
}

void ExecutionPlan::prepare_steps(const Graph& graph, const std::vector<const Backend*>& backends, Graph* release_from,
                                  const std::vector<std::string>& disabled, bool every_config) {
  // Readers of each constant not yet known to own it; 0 means it can go.
  std::vector<int> unowned_readers(graph.values().size(), 0);
  released_.assign(graph.values().size(), false);
  for (const Node& n : graph.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue && graph.is_initializer(v)) ++unowned_readers[static_cast<std::size_t>(v)];
  std::vector<std::string> problems;
  std::set<std::string> seen_ops;
  const auto& nodes = graph.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    PlanStep step{i, {}, {}, node_layout(n)};
    std::string why;
    for (const Backend* b : backends) {
      if (listed(disabled, b->name())) {
        if (why.empty()) why = "every backend that could run it is disabled (disabled_kernels)";
        continue;
      }
      const std::string reason = b->why_unsupported(n, graph);
      if (!reason.empty()) {
        why = reason;  // the last backend's reason: the reference backend names op and opset
        continue;
      }
      std::vector<std::string> configs = b->configs(n, graph);
      if (configs.empty()) configs = {""};
      if (!every_config) configs.resize(1);
      for (std::size_t c = 0; c < configs.size(); ++c) {
        try {
          std::unique_ptr<Kernel> kernel = b->prepare(n, graph, configs[c]);
          const std::string kernel_name = kernel->profile().name;
          if (!kernel_name.empty() && listed(disabled, b->name() + ":" + kernel_name)) {
            why = b->name() + ":" + kernel_name + " is disabled";
            continue;
          }
          step.candidates.push_back({b, std::move(kernel), configs[c], c == 0});
        } catch (const Error& e) {
          // A backend that accepted the node but cannot prepare it is skipped, not fatal, when
          // another backend can run the node.
          logger().debug("{}backend {} failed to prepare: {}", node_label(n), b->name(), e.what());
          const std::string msg = e.what(), label = node_label(n);
          why = msg.rfind(label, 0) == 0 ? msg.substr(label.size()) : msg;
        }
      }
    }
    if (step.candidates.empty()) {
      if (seen_ops.insert(n.op_type).second) problems.push_back(node_label(n) + why);
      continue;
    }
    steps_.push_back(std::move(step));
    if (release_from) release_if_owned(*release_from, steps_.size() - 1, unowned_readers);
  }
  if (!problems.empty()) {
    std::string msg = problems.front();
    if (!disabled.empty()) msg += " (candidates left out by disabled_kernels: " + join(disabled) + ")";
    if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more unsupported op types)";
    throw Error(ErrorCode::Unsupported, msg);
  }
  compute_lifetimes(graph);
}

void ExecutionPlan::release_if_owned(Graph& graph, std::size_t s, std::vector<int>& unowned_readers) {
  const auto& nodes = graph.nodes();
  const Node& n = nodes[steps_[s].node_index];
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (v == kNoValue || !graph.is_initializer(v)) continue;
    int& left = unowned_readers[static_cast<std::size_t>(v)];
    if (!steps_[s].candidates.front().kernel->owns_input(i)) {
      left = -1;  // a reader needs the loaded tensor: keep it for good
      continue;
    }
    if (left <= 0 || --left > 0) continue;
    bool is_output = false;
    for (ValueId o : graph.outputs()) is_output |= o == v;
    if (is_output) continue;
    released_bytes_ += graph.initializer(v)->nbytes();
    graph.erase_initializer(v);
    released_[static_cast<std::size_t>(v)] = true;
    for (PlanStep& step : steps_)
      for (ValueId in : nodes[step.node_index].inputs)
        if (in == v) step.candidates.resize(1);
  }
}

void ExecutionPlan::compute_lifetimes(const Graph& graph) {
  const std::size_t n_values = graph.values().size();
  const int end = static_cast<int>(steps_.size());
  producer_.assign(n_values, -1);
  last_reader_.assign(n_values, -1);
  is_output_.assign(n_values, false);
  for (ValueId v : graph.outputs()) is_output_[static_cast<std::size_t>(v)] = true;
  const auto& nodes = graph.nodes();
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const Node& n = nodes[steps_[s].node_index];
    for (ValueId v : n.inputs)
      if (v != kNoValue) last_reader_[static_cast<std::size_t>(v)] = static_cast<int>(s);
    for (ValueId v : n.outputs)
      if (v != kNoValue) producer_[static_cast<std::size_t>(v)] = static_cast<int>(s);
  }
  for (std::size_t v = 0; v < n_values; ++v) {
    if (is_output_[v]) last_reader_[v] = end;
    else if (last_reader_[v] < 0) last_reader_[v] = producer_[v];  // nobody reads it: dies at birth
  }
  // A value is released after its last reader, unless the caller reads it (graph output) or the
  // graph owns it (initializer).
  for (std::size_t v = 0; v < n_values; ++v) {
    const int last = last_reader_[v];
    if (last >= 0 && last < end && !graph.is_initializer(static_cast<ValueId>(v)))
      steps_[static_cast<std::size_t>(last)].release_after.push_back(static_cast<ValueId>(v));
  }
}

}  // namespace wpk
