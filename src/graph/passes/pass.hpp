#pragma once
// Optimizer passes: each rewrites a Graph into an equivalent one and says whether it changed
// anything. Passes live one per file; the table in runtime/optimizer.cpp orders them.
#include <functional>
#include <memory>
#include <vector>

#include "wpk/graph.hpp"

namespace wpk::passes {

// The most bytes one node's folded outputs may take (the optimizer's folding_budget bounds all
// of them): a ConstantOfShape or Expand of a small input can yield a large tensor that is
// cheaper to compute at run time than to keep resident.
constexpr std::int64_t kMaxFoldedNodeBytes = std::int64_t(16) << 20;

struct GraphAnalyses;  // graph/passes/match.hpp

struct PassContext {
  // Runs one node on constant inputs (the runtime supplies the reference backend, which refuses
  // outputs past kMaxFoldedNodeBytes or the folding budget before allocating them); returns its
  // outputs, or throws Error when the node cannot be evaluated.
  std::function<std::vector<Tensor>(const Node&, const std::vector<const Tensor*>&, std::int64_t opset)> evaluate;
  // The graph's index and static shapes as the passes so far left it (analyses_of in match.hpp):
  // computed once, not once per pass, while passes find nothing to change.
  mutable std::shared_ptr<const GraphAnalyses> analyses;
};

// Replaces every read of value `from` by `to` in nodes and graph outputs.
void replace_uses(Graph& g, ValueId from, ValueId to);
// How many nodes read each value, and whether it is a graph output.
std::vector<int> count_uses(const Graph& g);
bool is_graph_output(const Graph& g, ValueId v);

bool remove_identity(Graph& g, const PassContext& ctx);   // remove_identity.cpp
bool eliminate_dead_code(Graph& g, const PassContext& ctx);  // dead_code.cpp
bool fold_constants(Graph& g, const PassContext& ctx);    // constant_folding.cpp
bool fold_captured_constants(Graph& g, const PassContext& ctx);  // fold_captured_constants.cpp
bool fold_shape_subgraphs(Graph& g, const PassContext& ctx);  // fold_shape_subgraphs.cpp
bool cancel_transposes(Graph& g, const PassContext& ctx);     // cancel_transposes.cpp
bool fold_batchnorm(Graph& g, const PassContext& ctx);        // fold_batchnorm.cpp
bool fold_pad(Graph& g, const PassContext& ctx);              // fold_pad.cpp
bool fold_qdq(Graph& g, const PassContext& ctx);              // fold_qdq.cpp
// Not in the pass table: the session runs it after the passes when SessionOptions::precision is
// BF16 on a CPU that computes in bf16. Marks float32 convolutions and matrix products with
// constant weights, and fused attention, compute_precision = "bf16" (graph/fused_ops.hpp);
// returns how many.
int mark_bf16_compute(Graph& g);                                // mark_bf16_compute.cpp
// Also after the passes, under BF16: makes bfloat16 each float32 value written by a marked node
// and read only by marked nodes, as input 0 or as a fused residual whose node's output is kept
// too (a residual stream stays in one dtype), where `takes_bf16` says the kernels of both ends
// read and write bfloat16 (Backend::takes_bf16_activations); returns how many values. Not graph
// outputs: those keep the model's dtype. A node its backend declines once its values are bf16
// is left out, and the values are worked out again without it.
int keep_bf16_between_products(Graph& g, const std::function<bool(const Node&)>& takes_bf16);  // mark_bf16_compute.cpp
// Removes compute_precision wherever a model file set it: only the session's options decide.
void clear_compute_precision(Graph& g);                         // mark_bf16_compute.cpp
bool fuse_matmul_integer(Graph& g, const PassContext& ctx);   // fuse_matmul_integer.cpp
bool fuse_layernorm(Graph& g, const PassContext& ctx);        // fuse_layernorm.cpp
bool fuse_gelu(Graph& g, const PassContext& ctx);             // fuse_gelu.cpp
bool fuse_attention(Graph& g, const PassContext& ctx);        // fuse_attention.cpp
bool read_attention_heads_in_place(Graph& g, const PassContext& ctx);  // attention_heads.cpp
bool fuse_conv_epilogue(Graph& g, const PassContext& ctx);    // fuse_conv_epilogue.cpp
bool fuse_matmul_epilogue(Graph& g, const PassContext& ctx);  // fuse_matmul_epilogue.cpp
bool fuse_batchnorm_relu(Graph& g, const PassContext& ctx);   // fuse_batchnorm_relu.cpp
bool assign_nhwc_layout(Graph& g, const PassContext& ctx);    // layout_nhwc.cpp
bool fuse_concat_batchnorm(Graph& g, const PassContext& ctx);  // fuse_concat_batchnorm.cpp
bool fuse_qlinear_conv_add(Graph& g, const PassContext& ctx);  // fuse_qlinear_conv_add.cpp
bool split_conv_over_concat(Graph& g, const PassContext& ctx);  // split_conv_over_concat.cpp
bool fuse_depthwise_pointwise(Graph& g, const PassContext& ctx);  // fuse_depthwise_pointwise.cpp
bool fuse_scaled_pointwise(Graph& g, const PassContext& ctx);     // fuse_scaled_pointwise.cpp
bool fuse_elementwise_chains(Graph& g, const PassContext& ctx);   // fuse_elementwise_chains.cpp

}  // namespace wpk::passes
