// fuse_qlinear_conv_add: a QLinearConv whose codes only a com.wpk QLinearAdd reads (a quantized
// residual block's last convolution and its shortcut) becomes one com.wpk QLinearConvAdd
// (graph/fused_ops.hpp): the convolution's codes, rounded and saturated as it would store them,
// are added to the shortcut's before they are stored, so they are neither written nor read
// back. It runs after the layout pass, which gives the convolution the NHWC input oneDNN's
// integer convolutions read.
#include <cstring>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

// a and b are the same value, or initializers of one element with the same dtype and bytes.
bool same_scalar(const Graph& g, ValueId a, ValueId b) {
  if (a == b) return true;
  const Tensor* x = g.initializer(a);
  const Tensor* y = g.initializer(b);
  return x && y && x->dtype() == y->dtype() && x->numel() == 1 && y->numel() == 1 &&
         std::memcmp(x->raw(), y->raw(), x->nbytes()) == 0;
}

enum AddInput : std::size_t { A = 0, AScale, AZero, B, BScale, BZero, YScale, YZero };

// The fused op for the QLinearAdd `add` when its operand at `side` (A or B) is the codes of a
// QLinearConv that nothing else reads.
std::optional<Node> fuse(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, const Node& add,
                         std::size_t side) {
  const ValueId codes = add.inputs[side], residual = add.inputs[side == A ? B : A];
  const Node* conv = index.producer(codes);
  if (!is_onnx_op(conv, "QLinearConv") || conv->inputs.size() < 8 || conv->outputs.size() != 1 ||
      index.sole_reader(codes) != &add)
    return std::nullopt;
  // The add reads the codes at the scale and zero point the conv writes them with.
  if (!same_scalar(g, conv->inputs[6], add.inputs[side + 1]) || !same_scalar(g, conv->inputs[7], add.inputs[side + 2]))
    return std::nullopt;
  const DType out = g.value(add.outputs[0]).dtype;
  if (residual == kNoValue || codes == residual || g.value(residual).dtype != out || !shapes.same_shape(residual, codes))
    return std::nullopt;
  Node fused = *conv;
  fused.op_type = "QLinearConvAdd";
  fused.domain = kWpkDomain;
  fused.inputs.resize(kQLinearConvAddResidual, kNoValue);  // an absent bias stays absent
  const std::size_t r = side == A ? B : A;
  fused.inputs.insert(fused.inputs.end(),
                      {add.inputs[r], add.inputs[r + 1], add.inputs[r + 2], add.inputs[YScale], add.inputs[YZero]});
  fused.outputs = add.outputs;
  return fused;
}

}  // namespace

bool fuse_qlinear_conv_add(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& add = g.nodes()[i];
    if (add.domain != kWpkDomain || add.op_type != "QLinearAdd" || add.inputs.size() != 8 || add.outputs.size() != 1)
      return;
    for (std::size_t side : {A, B}) {
      auto fused = fuse(g, index, shapes, add, side);
      if (!fused) continue;
      const std::vector<int> matched = {index.producer_index(add.inputs[side]), static_cast<int>(i)};
      if (!rewriter.available(matched)) return;
      rewriter.replace(matched, {std::move(*fused)});
      return;
    }
  });
}

}  // namespace wpk::passes
