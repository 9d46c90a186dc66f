// mark_bf16_compute (passes/pass.hpp): the nodes whose kernels may compute in bfloat16 under
// SessionOptions::precision = BF16: the float32 convolutions and matrix products with constant
// weights, where the bf16 dot-product instructions double the work per instruction, and fused
// attention's two products. Everything else (norms, softmax, elementwise) keeps float32. keep_bf16_between_products then makes the values
// that pass only between such nodes bfloat16, so they are rounded once, where they are written.
#include <algorithm>
#include <vector>

#include "graph/fused_ops.hpp"
#include "graph/passes/pass.hpp"

namespace wpk::passes {

void clear_compute_precision(Graph& g) {
  for (Node& n : g.mutable_nodes()) n.attributes.erase("compute_precision");
}

int mark_bf16_compute(Graph& g) {
  int marked = 0;
  for (Node& n : g.mutable_nodes()) {
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    const bool wpk_op = n.domain == kWpkDomain;
    if (wpk_op && n.op_type == "Attention" && !n.outputs.empty() && g.value(n.outputs[0]).dtype == DType::Float32) {
      n.attributes.insert_or_assign("compute_precision", Attribute(std::string("bf16")));
      ++marked;
      continue;
    }
    const bool product = (onnx && (n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm")) ||
                         (wpk_op && (n.op_type == "FusedConv" || n.op_type == "FusedMatMul" ||
                                     n.op_type == "DepthwisePointwiseConv" || n.op_type == "ScaledPointwiseConv"));
    // Constant weights (input 1; the scaled conv's input 2): a product of two activations
    // outside fused attention stays float32.
    const std::size_t weights = wpk_op && n.op_type == "ScaledPointwiseConv" ? 2 : 1;
    if (!product || n.inputs.size() <= weights || n.outputs.empty() || !g.initializer(n.inputs[weights]) ||
        g.value(n.outputs[0]).dtype != DType::Float32)
      continue;
    n.attributes.insert_or_assign("compute_precision", Attribute(std::string("bf16")));
    ++marked;
  }
  return marked;
}

namespace {

// The values keep_bf16_between_products would make bf16 with `marked` nodes (see pass.hpp).
std::vector<bool> bf16_values(const Graph& g, const std::vector<bool>& marked) {
  const std::vector<Node>& nodes = g.nodes();
  // Per value: whether every read is a marked node's input 0 or residual, and how many there are.
  std::vector<bool> only_products(g.values().size(), true);
  std::vector<int> readers(g.values().size(), 0);
  for (std::size_t n = 0; n < nodes.size(); ++n)
    for (std::size_t i = 0; i < nodes[n].inputs.size(); ++i) {
      const ValueId v = nodes[n].inputs[i];
      if (v == kNoValue) continue;
      ++readers[static_cast<std::size_t>(v)];
      const bool residual = has_fused_residual(nodes[n]) && i == 3;
      if (!marked[n] || (i != 0 && !residual)) only_products[static_cast<std::size_t>(v)] = false;
    }
  for (ValueId v : g.outputs()) only_products[static_cast<std::size_t>(v)] = false;
  std::vector<bool> keep(g.values().size(), false);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (!marked[n] || nodes[n].outputs.empty() || nodes[n].outputs[0] == kNoValue) continue;
    const auto y = static_cast<std::size_t>(nodes[n].outputs[0]);
    keep[y] = readers[y] > 0 && only_products[y] && g.values()[y].dtype == DType::Float32;
  }
  // A residual and the output it is added into share a dtype (the kernel copies the one into the
  // other, then adds the sums): where one stays float32 so does the other, until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (!marked[n] || !has_fused_residual(nodes[n])) continue;
      const auto z = static_cast<std::size_t>(nodes[n].inputs[3]), y = static_cast<std::size_t>(nodes[n].outputs[0]);
      if (keep[z] == keep[y]) continue;
      keep[z] = keep[y] = false;
      changed = true;
    }
  }
  return keep;
}

void set_dtypes(Graph& g, const std::vector<bool>& values, DType dtype) {
  for (std::size_t v = 0; v < values.size(); ++v)
    if (values[v]) g.mutable_value(static_cast<ValueId>(v)).dtype = dtype;
}

}  // namespace

int keep_bf16_between_products(Graph& g, const std::function<bool(const Node&)>& takes_bf16) {
  const std::vector<Node>& nodes = g.nodes();
  std::vector<bool> marked(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    marked[i] = nodes[i].attr_string("compute_precision", "") == "bf16" && takes_bf16(nodes[i]);
  // Asked again once the values are bf16: a node its backend no longer takes so (a bf16 operand
  // it does not read in bf16) leaves the set, and the values are worked out again without it.
  for (;;) {
    const std::vector<bool> keep = bf16_values(g, marked);
    set_dtypes(g, keep, DType::BFloat16);
    bool dropped = false;
    for (std::size_t n = 0; n < nodes.size(); ++n)
      if (marked[n] && has_bf16_activations(nodes[n], g) && !takes_bf16(nodes[n])) {
        marked[n] = false;
        dropped = true;
      }
    if (!dropped) return static_cast<int>(std::count(keep.begin(), keep.end(), true));
    set_dtypes(g, keep, DType::Float32);
  }
}

}  // namespace wpk::passes
