#include "runtime/group_parts_backend.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "backends/composite_kernel.hpp"
#include "graph/elementwise_chain.hpp"
#include "graph/fused_ops.hpp"
#include "graph/group_parts.hpp"
#include "runtime/candidate_cost.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/workload.hpp"

namespace wpk {
namespace {

// The parts' input shapes from the group's: its inputs by position; a value between the parts
// with its dims in the parts graph where they are numbers, else an element-wise step's the
// broadcast of its inputs', else (a conv group's NHWC image) a symbolic dim taken from the
// group's first input.
std::vector<InputShapes> part_shapes(const Graph& parts, const std::vector<ValueId>& group_inputs, const InputShapes& shapes) {
  std::map<ValueId, std::optional<Shape>> between;
  std::vector<InputShapes> out;
  for (const Node& n : parts.nodes()) {
    InputShapes s;
    for (ValueId v : n.inputs) {
      if (const auto known = between.find(v); known != between.end()) {
        s.push_back(known->second);
        continue;
      }
      const auto at = std::find(group_inputs.begin(), group_inputs.end(), v);
      const std::size_t i = static_cast<std::size_t>(at - group_inputs.begin());
      s.push_back(v != kNoValue && at != group_inputs.end() && i < shapes.size() ? shapes[i] : std::nullopt);
    }
    const ValueId o = n.outputs.at(0);
    std::optional<Shape> shape;
    if (const auto& dims = parts.value(o).dims) {
      shape = Shape{};
      for (std::size_t d = 0; d < dims->size() && shape; ++d) {
        const bool from_input = !(*dims)[d].is_static() && !shapes.empty() && shapes[0] && d < shapes[0]->size();
        if (!(*dims)[d].is_static() && n.domain.empty() && chain_op(n.op_type)) shape.reset();
        else shape->push_back((*dims)[d].is_static() ? (*dims)[d].value : from_input ? (*shapes[0])[d] : 1);
      }
    }
    if (!shape && n.domain.empty() && chain_op(n.op_type) && !s.empty() && s[0]) {
      shape = s[0];
      if (s.size() > 1) shape = s[1] ? broadcast_shape({*shape, *s[1]}) : std::nullopt;
    }
    between[o] = shape;
    out.push_back(std::move(s));
  }
  return out;
}

int machine_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

GroupPartsBackend::GroupPartsBackend(std::vector<const Backend*> backends, std::vector<std::string> disabled, int threads,
                                     const CostCalibration* calibration)
    : backends_(std::move(backends)), disabled_(std::move(disabled)), threads_(threads), calibration_(calibration) {}

std::vector<const Backend*> GroupPartsBackend::part_backends() const {
  std::vector<const Backend*> out;
  for (const Backend* b : backends_.empty() ? registered_backends() : backends_)
    if (b->name() != name() && b->name() != "control" && b->name() != "reference" && !b->generates_code() &&
        !listed(disabled_, b->name()))
      out.push_back(b);
  return out;
}

std::vector<GroupPartsBackend::Choice> GroupPartsBackend::ranked(const Node& part, const Graph& parts, const InputShapes& shapes,
                                                                 int threads, std::string& why) const {
  std::vector<Choice> out;
  for (const Backend* b : part_backends()) {
    if (std::string reason = b->why_unsupported(part, parts); !reason.empty()) {
      why = reason;
      continue;
    }
    std::vector<std::string> configs = b->configs(part, parts);
    if (configs.empty()) configs = {""};
    for (const std::string& c : configs) {
      const KernelProfile profile = candidate_profile(*b, c, part, parts, shapes, threads);
      if (kernel_disabled(disabled_, *b, profile.name)) continue;
      const std::string identity = candidate_identity(*b, c);
      out.push_back({b, c, identity + (profile.name.empty() ? "" : ":" + profile.name),
                     predicted_seconds_on_best_threads(*b, profile, identity, part, shapes, threads, calibration_)});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Choice& a, const Choice& b) { return a.seconds < b.seconds; });
  // A chain's step that only the reference runs ran there before the chain was formed: it may
  // again (a conv group's parts never need it).
  if (out.empty() && part.domain.empty() && chain_op(part.op_type))
    for (const Backend* b : backends_.empty() ? registered_backends() : backends_)
      if (b->name() == "reference" && !listed(disabled_, b->name()) && b->why_unsupported(part, parts).empty()) {
        const KernelProfile profile = candidate_profile(*b, "", part, parts, shapes, threads);
        const std::string identity = candidate_identity(*b, "");
        out.push_back({b, "", identity, predicted_seconds_on_best_threads(*b, profile, identity, part, shapes, threads, calibration_)});
      }
  if (out.empty() && why.empty()) why = "no backend but the reference runs " + part.op_type;
  return out;
}

std::string GroupPartsBackend::why_unsupported(const Node& node, const Graph& graph) const {
  if (!is_group(node)) return "the parts backend runs the optimizer's depth-first groups only";
  try {
    const Graph parts = group_graph(node, graph);
    for (const Node& part : parts.nodes()) {
      std::string why;
      if (ranked(part, parts, *shapes_with_symbolic_dims_as(part, parts, 1), 1, why).empty())
        return "its part " + part.op_type + ": " + why;
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::optional<KernelProfile> GroupPartsBackend::describe(const Node& node, const Graph& graph, const std::string& /*config*/,
                                                         const InputShapes& shapes, int threads) const {
  if (!is_group(node)) return std::nullopt;
  try {
    std::vector<ValueId> inputs;
    const Graph parts = group_graph(node, graph, &inputs);
    const std::vector<InputShapes> each = part_shapes(parts, inputs, shapes);
    KernelProfile p;
    for (std::size_t i = 0; i < parts.nodes().size(); ++i) {
      std::string why;
      const std::vector<Choice> choices = ranked(parts.nodes()[i], parts, each[i], threads, why);
      if (choices.empty()) return std::nullopt;
      p.predicted_seconds += choices.front().seconds;
      p.name += (p.name.empty() ? "" : "+") + choices.front().label;
    }
    return p;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::unique_ptr<Kernel> GroupPartsBackend::prepare(const Node& node, const Graph& graph) const {
  if (!is_group(node)) throw Error(ErrorCode::Unsupported, node_label(node) + why_unsupported(node, graph));
  std::vector<ValueId> inputs;
  Graph parts = group_graph(node, graph, &inputs);
  const int threads = threads_ > 0 ? threads_ : machine_threads();
  std::vector<CompositeKernel::Alternatives> kernels;
  const Backend* last = nullptr;  // the backend of the last part's kernel, and its config
  std::string last_config;
  const Backend* reference = nullptr;
  for (const Backend* b : backends_.empty() ? registered_backends() : backends_)
    if (b->name() == "reference" && !listed(disabled_, b->name())) reference = b;
  KernelProfile profile;
  for (const Node& part : parts.nodes()) {
    std::string why;
    const std::size_t had = kernels.size();
    const InputShapes shapes = *shapes_with_symbolic_dims_as(part, parts, 1);
    for (const Choice& c : ranked(part, parts, shapes, threads, why)) {
      try {
        std::unique_ptr<Kernel> k = c.backend->prepare(part, parts, c.config);
        const std::string kernel_name = k->profile().name;
        if (kernel_disabled(disabled_, *c.backend, kernel_name)) continue;
        profile.predicted_seconds += c.seconds;
        profile.name += (profile.name.empty() ? "" : "+") + candidate_identity(*c.backend, c.config) +
                        (kernel_name.empty() ? "" : ":" + kernel_name);
        // A kernel packing none of the part's inputs may decline a shape (Kernel::runs): the
        // reference's then runs it. One that packs weights keeps the only copy of them.
        bool owns_any = false;
        for (std::size_t j = 0; j < part.inputs.size(); ++j) owns_any = owns_any || k->owns_input(j);
        kernels.emplace_back();
        kernels.back().push_back(std::move(k));
        if (!owns_any && reference) kernels.back().push_back(reference->prepare(part, parts));
        last = c.backend;
        last_config = c.config;
        break;
      } catch (const Error& e) {
        why = e.what();
      }
    }
    if (kernels.size() == had)
      throw Error(ErrorCode::Unsupported, node_label(node) + "no kernel for its part " + part.op_type + ": " + why);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accumulates_[node.name] = last->accumulates_into_residual(parts.nodes().back(), last_config);
  }
  return std::make_unique<CompositeKernel>(std::move(parts), std::move(inputs), std::move(kernels), profile);
}

bool GroupPartsBackend::accumulates_into_residual(const Node& node, const std::string& /*config*/) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = accumulates_.find(node.name);
  return it != accumulates_.end() && it->second && fused_residual_input(node) >= 0;
}

}  // namespace wpk
