#include "backends/reference/reference_backend.hpp"

#include <set>

#include "backends/reference/registry.hpp"

namespace wpk::reference {

void OpTable::add(const std::string& op_type, OpEntry entry) { entries_[op_type] = entry; }

const OpEntry* OpTable::find(const std::string& op_type) const {
  auto it = entries_.find(op_type);
  return it == entries_.end() ? nullptr : &it->second;
}

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_elementwise(t);
    register_binary(t);
    register_conv_pool(t);
    register_linalg(t);
    register_normalization(t);
    register_reduce(t);
    register_shape_ops(t);
    register_index_ops(t);
    register_misc(t);
    register_fused(t);
    return t;
  }();
  return table;
}

namespace {
class FunctionKernel : public Kernel {
 public:
  FunctionKernel(KernelFn fn, std::int64_t opset, KernelProfile profile, bool multithreaded)
      : fn_(fn), opset_(opset), profile_(std::move(profile)), multithreaded_(multithreaded) {}
  void run(KernelContext& ctx) const override {
    ctx.set_opset(opset_);
    fn_(ctx);
  }
  KernelProfile profile() const override { return profile_; }
  bool multithreaded() const override { return multithreaded_; }

 private:
  KernelFn fn_;
  std::int64_t opset_;
  KernelProfile profile_;
  bool multithreaded_;
};

// The ops the given registrations add (table_key's form).
std::set<std::string> ops_of(std::initializer_list<void (*)(OpTable&)> registrations) {
  OpTable t;
  for (const auto add : registrations) add(t);
  std::set<std::string> keys;
  for (const auto& kv : t.entries()) keys.insert(kv.first);
  return keys;
}

// Whether the node's kernel may start threads: Eigen's products (MatMul, Conv, and the fused
// and recurrent ops built on them) do with OpenMP; the elementwise, reduction, shape and index
// ops never do.
bool may_start_threads(const Node& node) {
  static const std::set<std::string> calling_thread_only =
      ops_of({register_elementwise, register_binary, register_reduce, register_shape_ops, register_index_ops});
  return calling_thread_only.count(table_key(node)) == 0;
}
}  // namespace

KernelProfile reference_profile() {
  KernelProfile p;
  p.vector_bits = 32;
  p.efficiency = 0.004;
  p.multithreaded = false;
  return p;
}

KernelProfile reference_profile(const Node& node) {
  static const std::set<std::string> elementwise = ops_of({register_elementwise, register_binary});
  KernelProfile p = reference_profile();
  // A few nanoseconds an element: a scalar loop with its broadcast index walk.
  if (elementwise.count(table_key(node))) p.efficiency = 0.03;
  return p;
}

KernelProfile ReferenceBackend::undescribed_profile(const Node& node) const { return reference_profile(node); }

std::string table_key(const Node& node) {
  if (node.domain.empty() || node.domain == "ai.onnx") return node.op_type;
  return node.domain + ":" + node.op_type;
}

std::string ReferenceBackend::why_unsupported(const Node& node, const Graph& graph) const {
  const OpEntry* e = op_table().find(table_key(node));
  if (!e) {
    if (!node.domain.empty() && node.domain != "ai.onnx")
      return "unsupported op " + node.domain + "." + node.op_type + " (domain " + node.domain + ")";
    return "unsupported op " + node.op_type + " (opset " + std::to_string(graph.opset()) + ")";
  }
  const bool onnx_op = node.domain.empty() || node.domain == "ai.onnx";
  if (onnx_op && graph.opset() < e->since_opset)
    return "unsupported op " + node.op_type + " (opset " + std::to_string(graph.opset()) + "; wpk implements it from opset " +
           std::to_string(e->since_opset) + ")";
  const int n_in = static_cast<int>(node.inputs.size());
  if (n_in < e->min_inputs || (e->max_inputs >= 0 && n_in > e->max_inputs))
    return node.op_type + " takes " + std::to_string(e->min_inputs) + ".." +
           (e->max_inputs < 0 ? std::string("n") : std::to_string(e->max_inputs)) + " inputs, node has " +
           std::to_string(n_in);
  return "";
}

std::unique_ptr<Kernel> ReferenceBackend::prepare(const Node& node, const Graph& graph) const {
  std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  return std::make_unique<FunctionKernel>(op_table().find(table_key(node))->fn, graph.opset(), reference_profile(node),
                                          may_start_threads(node));
}

}  // namespace wpk::reference
