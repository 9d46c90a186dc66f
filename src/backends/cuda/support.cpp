#include "backends/cuda/support.hpp"

#include <algorithm>
#include <set>

#include "backends/cuda/generated_kernels.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::cuda {
namespace {

bool static_float(const Graph& g, ValueId v) {
  if (v == kNoValue) return true;
  const ValueInfo& info = g.value(v);
  if (info.dtype != DType::Float32 || !info.dims) return false;
  return std::all_of(info.dims->begin(), info.dims->end(), [](const Dim& d) { return d.is_static(); });
}

std::size_t rank(const Graph& g, ValueId v) { return g.value(v).dims->size(); }

bool all_ones(const std::vector<std::int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 1; });
}

std::string why_window_op(const Node& n, const Graph& g) {
  if (rank(g, n.inputs[0]) != 4) return "only 2-D windows (4-D NCHW tensors)";
  if (n.attr_int("channels_last", 0) != 0) return "channels-last layout";
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return "auto_pad " + pad;
  const std::vector<std::int64_t> pads = n.attr_ints("pads");
  for (std::size_t d = 0; d < pads.size() / 2; ++d)
    if (pads[d] != pads[d + pads.size() / 2]) return "padded unevenly (cuDNN pads both sides alike)";
  return "";
}

std::string why_conv(const Node& n, const Graph& g) {
  if (std::string why = why_window_op(n, g); !why.empty()) return why;
  if (n.inputs.size() < 2 || !static_float(g, n.inputs[1])) return "weights must be float32 of a static shape";
  if (!activation_expressible(n.attr_string("activation", ""))) return "activation " + n.attr_string("activation", "");
  if (n.attr_string("compute_precision", "fp32") != "fp32") return "bf16 compute";
  return "";
}

std::string why_product(const Node& n, const Graph& g) {
  const std::size_t ra = rank(g, n.inputs[0]), rb = rank(g, n.inputs[1]);
  if (n.op_type == "Gemm") return ra == 2 && rb == 2 ? "" : "Gemm of other than 2-D operands";
  if (ra < 2 || rb < 2) return "products of 1-D operands";
  if (rb != 2 && ra != rb) return "batched products whose batch dims differ in rank";
  if (rb != 2) {
    const DimList& a = *g.value(n.inputs[0]).dims;
    const DimList& b = *g.value(n.inputs[1]).dims;
    for (std::size_t d = 0; d + 2 < ra; ++d)
      if (a[d].value != b[d].value) return "batched products that broadcast a batch dim";
  }
  if (!activation_expressible(n.attr_string("activation", ""))) return "activation " + n.attr_string("activation", "");
  if (n.attr_string("compute_precision", "fp32") != "fp32") return "bf16 compute";
  return "";
}

std::string why_pool(const Node& n, const Graph& g) {
  if (std::string why = why_window_op(n, g); !why.empty()) return why;
  if (n.op_type == "GlobalAveragePool") return "";
  if (n.attr_int("ceil_mode", 0) != 0) return "ceil_mode";
  if (!all_ones(n.attr_ints("dilations"))) return "dilated windows";
  if (n.attr_int("storage_order", 0) != 0) return "storage_order";
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return "MaxPool's Indices output";
  return "";
}

std::string why_attention(const Node& n, const Graph& g) {
  if (n.inputs.size() < 3) return "Attention without Q, K and V";
  const std::size_t r = rank(g, n.inputs[0]);
  if (r != 3 && r != 4) return "Attention operands of rank other than 3 or 4";
  for (std::size_t i = 1; i < 3; ++i)
    if (rank(g, n.inputs[i]) != r) return "Attention operands of different ranks";
  if (!n.has_attr("scale")) return "Attention without its scale";
  const std::vector<std::int64_t> flags = n.attr_ints("interleaved_heads", {0, 0, 0, 0});
  if (r == 3 && std::any_of(flags.begin(), flags.end(), [](std::int64_t f) { return f != 0; })) return "interleaved rank-3 operands";
  // The kernel walks every operand with Q's images and heads: no broadcast batch or head dims.
  auto batch_dims = [&](ValueId v, bool interleaved) {
    const DimList& d = *g.value(v).dims;
    if (d.size() == 3) return std::vector<std::int64_t>{d[0].value};
    return std::vector<std::int64_t>{d[0].value, interleaved ? d[2].value : d[1].value};
  };
  const auto q = batch_dims(n.inputs[0], flags.size() == 4 && flags[0]);
  for (std::size_t i = 1; i < 3; ++i)
    if (batch_dims(n.inputs[i], flags.size() == 4 && flags[i]) != q) return "Attention whose K or V broadcast batch or head dims";
  if (batch_dims(n.outputs[0], flags.size() == 4 && flags[3]) != q) return "Attention whose output's batch or head dims differ from Q's";
  return "";
}

}  // namespace

bool is_view_op(const Node& n) {
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return n.domain.empty() && ops.count(n.op_type) != 0;
}

Shape static_shape(const Graph& g, ValueId v) {
  Shape s;
  for (const Dim& d : *g.value(v).dims) s.push_back(d.value);
  return s;
}

bool is_elementwise_op(const Node& n) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Sigmoid", "Tanh", "Abs",
                                            "Neg", "Sqrt", "Exp", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish"};
  return n.domain.empty() && ops.count(n.op_type) != 0;
}

std::string why_cuda_cannot_run(const Node& n, const Graph& g) {
  for (ValueId v : n.inputs)
    if (!static_float(g, v) && !(is_view_op(n) && v != n.inputs[0] && g.is_initializer(v)))
      return "a value that is not float32 of a static shape";
  for (ValueId v : n.outputs)
    if (!static_float(g, v)) return "a value that is not float32 of a static shape";
  if (n.outputs.empty() || (n.outputs.size() > 1 && n.op_type != "MaxPool"))
    return "more than one output";
  const bool onnx = n.domain.empty(), wpk_op = n.domain == kWpkDomain;
  if (wpk_op && n.op_type == "FusedConv") return why_conv(n, g);
  if (wpk_op && n.op_type == "FusedMatMul") return why_product(n, g);
  if (wpk_op && n.op_type == "Attention") return why_attention(n, g);
  if (!onnx) return "op " + n.domain + "." + n.op_type;
  if (n.op_type == "Conv") return why_conv(n, g);
  if (n.op_type == "Gemm" || n.op_type == "MatMul") return why_product(n, g);
  if (n.op_type == "MaxPool" || n.op_type == "AveragePool" || n.op_type == "GlobalAveragePool") return why_pool(n, g);
  if (is_view_op(n)) {
    if (n.op_type == "Reshape" && !g.is_initializer(n.inputs[1])) return "a Reshape whose shape is not a constant";
    if (n.op_type == "Unsqueeze" || n.op_type == "Squeeze")
      if (n.inputs.size() > 1 && !g.is_initializer(n.inputs[1])) return "axes that are not a constant";
    return "";
  }
  if (is_elementwise_op(n)) {
    if (n.op_type == "Clip")
      for (std::size_t i = 1; i < n.inputs.size(); ++i)
        if (n.inputs[i] != kNoValue && !g.is_initializer(n.inputs[i])) return "Clip bounds that are not constants";
    if ((n.op_type == "Max" || n.op_type == "Min") && n.inputs.size() != 2) return n.op_type + " of other than 2 inputs";
    return "";
  }
  if (n.op_type == "Transpose") return "";
  if (n.op_type == "LayerNormalization") {
    if (n.outputs.size() > 1) return "LayerNormalization's Mean and InvStdDev outputs";
    // The kernel reads Scale and B as one value per normalised element.
    const DimList& x = *g.value(n.inputs[0]).dims;
    std::int64_t axis = n.attr_int("axis", -1);
    if (axis < 0) axis += static_cast<std::int64_t>(x.size());
    std::int64_t cols = 1;
    for (std::size_t d = static_cast<std::size_t>(std::max<std::int64_t>(0, axis)); d < x.size(); ++d) cols *= x[d].value;
    for (std::size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
      if (n.inputs[i] == kNoValue) continue;
      std::int64_t numel = 1;
      for (const Dim& d : *g.value(n.inputs[i]).dims) numel *= d.value;
      if (numel != cols) return "LayerNormalization whose Scale or B broadcast";
    }
    return "";
  }
  if (n.op_type == "Softmax") {
    const std::int64_t r = static_cast<std::int64_t>(rank(g, n.inputs[0]));
    const std::int64_t axis = n.attr_int("axis", g.opset() < 13 ? 1 : -1);
    return g.opset() < 13 || axis == -1 || axis == r - 1 ? "" : "Softmax over other than the last axis";
  }
  return "op " + n.op_type;
}

}  // namespace wpk::cuda

