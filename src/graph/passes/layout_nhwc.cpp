// Moves the convolutional part of a graph to NHWC ("channels last"): the layout in which
// oneDNN's fastest fp32 convolutions read and write activations, so no reorder runs between
// convolutions. Convolutions become com.wpk FusedConv with channels_last = 1 (QLinearConv keeps
// its op and gets the attribute); pooling ops and
// inference BatchNormalization get the same attribute; layout-agnostic elementwise ops and channel Concats whose inputs are all NHWC
// join the region. Transposes convert at the region's edges only (one per value), and dead-code
// elimination drops the ones nobody reads.
#include <map>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

const std::vector<std::int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<std::int64_t> kToNchw = {0, 3, 1, 2};

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool is_conv(const Node& n, const Graph& g) {
  const bool conv = (is_onnx(n) && n.op_type == "Conv") || (n.domain == kWpkDomain && n.op_type == "FusedConv");
  if (!conv || n.inputs.size() < 2) return false;
  const Tensor* w = g.initializer(n.inputs[1]);
  return w && w->rank() == 4;
}

// QLinearConv with constant 4-D weights (its input 3): oneDNN's integer convolutions read NHWC.
bool is_qlinear_conv(const Node& n, const Graph& g) {
  if (!is_onnx(n) || n.op_type != "QLinearConv" || n.inputs.size() < 8) return false;
  const Tensor* w = g.initializer(n.inputs[3]);
  return w && w->rank() == 4;
}

// Pad of a 4-D tensor whose pads are constant (attribute before opset 11, input after): its
// pads are permuted with the layout (DenseNet's transitions pad before average pooling).
std::optional<std::vector<std::int64_t>> constant_pads(const Node& n, const Graph& g) {
  auto pads = constant_pad_amounts(n, g);
  return pads && pads->size() == 8 ? pads : std::nullopt;
}

std::vector<std::int64_t> nhwc_pads(const std::vector<std::int64_t>& p) {
  return {p[0], p[2], p[3], p[1], p[4], p[6], p[7], p[5]};
}

bool is_pool(const Node& n) {
  if (!is_onnx(n)) return false;
  if (n.op_type == "GlobalAveragePool" || n.op_type == "AveragePool") return true;
  return n.op_type == "MaxPool" && (n.outputs.size() < 2 || n.outputs[1] == kNoValue);
}

// Ops whose result does not depend on the layout of their (same-layout) activation inputs.
bool is_elementwise(const Node& n) {
  static const char* unary[] = {"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu",
                                "Neg", "Abs", "Exp", "Sqrt", "Erf",
                                // with scalar scale and zero point (a per-axis one is not a scalar
                                // constant, which keeps the node out of the region)
                                "QuantizeLinear", "DequantizeLinear"};
  static const char* binary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  if (n.domain == kWpkDomain && (n.op_type == "Gelu" || n.op_type == "QLinearAdd")) return true;
  if (!is_onnx(n)) return false;
  for (const char* u : unary)
    if (n.op_type == u) return true;
  for (const char* b : binary)
    if (n.op_type == b) return true;
  return false;
}

// Inputs that carry activations (and so follow the layout); the rest are parameters.
std::vector<std::size_t> activation_inputs(const Node& n) {
  if (n.inputs.empty()) return {};
  if (n.op_type == "FusedConv") return n.inputs.size() > 3 ? std::vector<std::size_t>{0, 3} : std::vector<std::size_t>{0};
  if (n.op_type == "Conv" || n.op_type == "QLinearConv" || is_pool(n) || n.op_type == "Clip" || n.op_type == "LeakyRelu" ||
      n.op_type == "BatchNormalization" || n.op_type == "FusedBatchNorm" || n.op_type == "Pad")
    return {0};
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < n.inputs.size(); ++i) all.push_back(i);
  return all;
}

bool is_scalar_constant(const Graph& g, ValueId v) {
  const Tensor* t = g.initializer(v);
  return t && t->numel() == 1;
}

std::optional<DimList> permuted(const std::optional<DimList>& dims, const std::vector<std::int64_t>& perm) {
  if (!dims || dims->size() != 4) return std::nullopt;
  DimList out;
  for (auto p : perm) out.push_back((*dims)[static_cast<std::size_t>(p)]);
  return out;
}

class LayoutRewriter {
 public:
  explicit LayoutRewriter(Graph& g) : g_(g) {}

  bool run() {
    std::vector<Node> old = std::move(g_.mutable_nodes());
    g_.mutable_nodes().clear();
    bool changed = false;
    for (Node& n : old) {
      if (joins_region(n)) {
        to_nhwc_node(n);
        changed = true;
      } else {
        g_.mutable_nodes().push_back(std::move(n));
      }
    }
    return changed;
  }

 private:
  bool joins_region(const Node& n) const {
    if (is_conv(n, g_) || is_qlinear_conv(n, g_)) return true;
    const bool pool = is_pool(n) || is_inference_batchnorm(n, g_) || constant_pads(n, g_);
    const bool concat = is_onnx(n) && n.op_type == "Concat" &&
                        (n.attr_int("axis", 0) == 1 || n.attr_int("axis", 0) == -3);
    if (!pool && !concat && !is_elementwise(n)) return false;
    bool any_nhwc = false;
    for (std::size_t i : activation_inputs(n)) {
      const ValueId v = n.inputs[i];
      if (v == kNoValue) continue;
      if (nhwc_of_.count(v)) any_nhwc = true;
      else if (pool || concat || !is_scalar_constant(g_, v)) return false;
    }
    return any_nhwc;
  }

  ValueId nhwc_input(ValueId v) {
    auto it = nhwc_of_.find(v);
    if (it != nhwc_of_.end()) return it->second;
    const ValueInfo info = g_.value(v);
    const ValueId t = g_.add_value({unique_name(info.name + "__nhwc"), info.dtype, permuted(info.dims, kToNhwc)});
    emit_transpose(v, t, kToNhwc);
    nhwc_of_[v] = t;
    return t;
  }

  void to_nhwc_node(Node& n) {
    if (n.op_type == "Conv") {
      n.op_type = "FusedConv";
      n.domain = kWpkDomain;
    }
    for (std::size_t i : activation_inputs(n))
      if (n.inputs[i] != kNoValue && !is_scalar_constant(g_, n.inputs[i])) n.inputs[i] = nhwc_input(n.inputs[i]);
    if (n.op_type == "FusedConv" || n.op_type == "QLinearConv" || is_pool(n) || n.op_type == "BatchNormalization" || n.op_type == "FusedBatchNorm")
      n.attributes.insert_or_assign("channels_last", Attribute(std::int64_t{1}));
    if (n.op_type == "Concat") n.attributes.insert_or_assign("axis", Attribute(std::int64_t{3}));
    if (n.op_type == "Pad") {
      const std::vector<std::int64_t> pads = nhwc_pads(*constant_pads(n, g_));
      if (n.has_attr("pads")) {
        n.attributes.insert_or_assign("pads", Attribute(pads));
      } else {
        const std::string name = unique_name(g_.value(n.inputs[1]).name + "__nhwc");
        n.inputs[1] = g_.add_initializer(name, Tensor::from_vector(pads, {8}));
      }
    }
    std::vector<std::pair<ValueId, ValueId>> outs;
    for (ValueId& o : n.outputs) {
      if (o == kNoValue) continue;
      const ValueInfo info = g_.value(o);
      const ValueId t = g_.add_value({unique_name(info.name + "__nhwc"), info.dtype, permuted(info.dims, kToNhwc)});
      outs.emplace_back(o, t);
      o = t;
    }
    g_.mutable_nodes().push_back(std::move(n));
    for (const auto& [plain, nhwc] : outs) {
      emit_transpose(nhwc, plain, kToNchw);  // for readers outside the region; dropped when unused
      nhwc_of_[plain] = nhwc;
    }
  }

  void emit_transpose(ValueId from, ValueId to, const std::vector<std::int64_t>& perm) {
    Node t;
    t.op_type = "Transpose";
    t.name = g_.value(to).name + "__transpose";
    t.inputs = {from};
    t.outputs = {to};
    t.attributes.emplace("perm", Attribute(perm));
    g_.mutable_nodes().push_back(std::move(t));
  }

  std::string unique_name(const std::string& base) const {
    std::string name = base;
    for (int i = 1; g_.find_value(name) != kNoValue; ++i) name = base + std::to_string(i);
    return name;
  }

  Graph& g_;
  std::map<ValueId, ValueId> nhwc_of_;  // plain value -> its NHWC twin
};

}  // namespace

bool assign_nhwc_layout(Graph& g, const PassContext&) {
  for (const Node& n : g.nodes())
    if (n.attr_int("channels_last", 0) == 1) return false;  // already applied
  // Back-transposes that no reader outside the region needs are left to dead-code elimination.
  return LayoutRewriter(g).run();
}

}  // namespace wpk::passes
