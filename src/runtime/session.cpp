#include "wpk/session.hpp"

#include <chrono>
#include <unordered_map>

#include "runtime/execution_plan.hpp"
#include "runtime/input_check.hpp"
#include "runtime/logging.hpp"
#include "wpk/optimizer.hpp"

namespace wpk {

struct Session::Impl {
  Graph graph;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::unique_ptr<ExecutionPlan> plan;
};

namespace {

bool shares_bytes(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void run_step(const Graph& g, const PlanStep& step, std::vector<Tensor>& slots) {
  const Node& node = g.nodes()[step.node_index];
  std::vector<const Tensor*> ins;
  ins.reserve(node.inputs.size());
  for (ValueId v : node.inputs) {
    if (v == kNoValue) {
      ins.push_back(nullptr);
      continue;
    }
    const Tensor* init = g.initializer(v);
    ins.push_back(init ? init : &slots[v]);
    if (!init && slots[v].empty())
      throw Error(ErrorCode::Internal, node_label(node) + "input '" + g.value(v).name + "' was never computed");
  }
  KernelContext ctx(node, std::move(ins));
  try {
    step.kernel->run(ctx);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::InvalidArgument, node_label(node) + "out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Internal, node_label(node) + e.what());
  }
  for (std::size_t o = 0; o < node.outputs.size(); ++o) {
    const ValueId v = node.outputs[o];
    if (v == kNoValue) continue;
    if (ctx.outputs()[o].empty())
      throw Error(ErrorCode::Internal, node_label(node) + "kernel produced no output " + std::to_string(o));
    slots[v] = std::move(ctx.outputs()[o]);
  }
  for (ValueId v : step.release_after) slots[v] = Tensor();
}

}  // namespace

Session::Session(Graph graph, SessionOptions options) : impl_(std::make_unique<Impl>()) {
  apply_log_level(options);
  const auto t0 = std::chrono::steady_clock::now();
  check_graph_interface(graph);
  impl_->graph = Optimizer(options.optimizer).optimize(std::move(graph));
  const Graph& g = impl_->graph;
  for (ValueId v : g.inputs()) impl_->inputs.push_back(g.value(v));
  for (ValueId v : g.outputs()) impl_->outputs.push_back(g.value(v));
  impl_->plan = std::make_unique<ExecutionPlan>(g, registered_backends());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  logger().debug("session ready: {} nodes, {} steps, {:.1f} ms", g.nodes().size(), impl_->plan->steps().size(), ms);
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->outputs; }
const Graph& Session::graph() const { return impl_->graph; }

TensorMap Session::run(const TensorMap& inputs) const {
  const Graph& g = impl_->graph;
  check_run_inputs(g, inputs);
  std::vector<Tensor> slots(g.values().size());
  for (ValueId v : g.inputs()) slots[v] = inputs.at(g.value(v).name);
  for (const PlanStep& step : impl_->plan->steps()) run_step(g, step, slots);

  TensorMap out;
  for (ValueId v : g.outputs()) {
    const Tensor* init = g.initializer(v);
    Tensor t = init ? *init : slots[v];
    // Returned tensors own their memory: never hand out the caller's input bytes or the
    // session's weights, which a caller could then overwrite.
    bool aliased = init != nullptr || t.is_borrowed();
    for (const auto& kv : inputs) aliased = aliased || shares_bytes(t, kv.second);
    for (const auto& kv : g.initializers()) aliased = aliased || shares_bytes(t, kv.second);
    out[g.value(v).name] = aliased ? t.clone() : std::move(t);
  }
  return out;
}

}  // namespace wpk
