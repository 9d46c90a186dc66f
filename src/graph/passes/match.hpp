#pragma once
// Helpers the fusion passes share: who writes and who reads each value, small float constants,
// the activations FusedConv/FusedMatMul absorb, and swapping a matched group of nodes for its
// replacement.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/pass.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {

// Writer and readers of every value, to walk a pattern backwards and forwards. It describes the
// graph as it was built: any edit of the node list makes it stale.
class GraphIndex {
 public:
  explicit GraphIndex(const Graph& g);
  // The node writing v and its index; nullptr / -1 for inputs, initializers and omitted values.
  const Node* producer(ValueId v) const;
  int producer_index(ValueId v) const;
  // The only node reading v, when v is also not a graph output: only then may a fusion make v
  // disappear. nullptr / -1 otherwise (a node reading v twice counts as two readers).
  const Node* sole_reader(ValueId v) const;
  int sole_reader_index(ValueId v) const;
  const std::vector<int>& readers(ValueId v) const;

 private:
  const Graph& g_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> is_output_;
};

// True for a node of the default ONNX domain with this op type (a null node is no match).
bool is_onnx_op(const Node* n, const char* op_type);
// For a two-input node reading v: the other input; kNoValue when v is not one of them.
ValueId other_input(const Node& n, ValueId v);

// Inference BatchNormalization (ONNX, or com.wpk FusedBatchNorm): X, scale, B, mean and var
// with the four parameters initializers, no training mode, no running-statistics outputs.
bool is_inference_batchnorm(const Node& n, const Graph& g);
// The amounts of an ONNX Pad ([x1_begin, x2_begin, ..., x1_end, ...]): its `pads` attribute
// (opset < 11) or its constant int64 `pads` input; nullopt when they are not known at load.
std::optional<std::vector<std::int64_t>> constant_pad_amounts(const Node& n, const Graph& g);

// The elements of an int32/int64 tensor of rank 0 or 1, or of such an initializer (nullopt for
// anything else: another dtype or rank, an omitted input, a value computed at run time).
std::optional<std::vector<std::int64_t>> int_values(const Tensor& t);
std::optional<std::vector<std::int64_t>> constant_int_values(const Graph& g, ValueId v);

// A float32 initializer, or nullptr.
const Tensor* float_constant(const Graph& g, ValueId v);
// The value of a one-element float32 initializer that broadcasts against an operand of rank
// `other_rank` without changing its shape: rank 0 always, rank r > 0 only when r <= other_rank
// (pass -1 when the operand's rank is unknown).
std::optional<float> scalar_constant(const Graph& g, ValueId v, int other_rank = -1);

// An activation that FusedConv/FusedMatMul can absorb (graph/fused_ops.hpp), applied to v by its
// sole reader: Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, com.wpk Gelu (as
// "Gelu", or "GeluTanh" when approximate = "tanh"), and
// SiLU written as Mul(v, Sigmoid(v)).
struct ActivationMatch {
  std::string name;           // the `activation` attribute
  std::vector<float> params;  // the `activation_params` attribute
  std::vector<int> nodes;     // indices of the matched nodes
  ValueId output = kNoValue;
};
std::optional<ActivationMatch> match_activation(const Graph& g, const GraphIndex& index, ValueId v);

// What may follow a convolution or matrix product elementwise, in the order the fused ops apply
// it (graph/fused_ops.hpp): [Add(bias-like constant)] -> [Add(residual, same shape)] ->
// [activation]. Each step is taken only when its input has no other reader.
struct Epilogue {
  ValueId bias = kNoValue;  // the constant added first, when `is_bias` accepted it
  ValueId residual = kNoValue;
  ActivationMatch activation;
  std::vector<int> nodes;  // absorbed nodes
  ValueId output = kNoValue;
};
// `is_bias(t)` says whether the constant `t` is a bias the fused op can take; null when the
// product already has one.
Epilogue match_epilogue(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, ValueId product,
                        const std::function<bool(const Tensor&)>& is_bias);

// A value name not yet in the graph, made from `base`.
std::string unique_name(const Graph& g, const std::string& base);
// Adds `t` as an initializer under a fresh name made from `base`.
ValueId add_constant(Graph& g, const std::string& base, Tensor t);
// A constant matrix [R, C] of any dtype as [C, R], in long-lived storage (core/page_memory.hpp).
Tensor transposed_matrix(const Tensor& t);

// Collects the rewrites a pass finds in one scan of the graph and applies them together, so the
// GraphIndex they were matched on stays valid during the scan. Each rewrite replaces its matched
// nodes by its replacement, put where the last matched node was: right when the group's output
// is written by that node, as every input of the group is computed before it and every reader
// of the output comes after it. Rewrites may not share nodes.
class Rewriter {
 public:
  // False when one of `nodes` belongs to a rewrite already taken in this scan.
  bool available(const std::vector<int>& nodes) const;
  void replace(std::vector<int> matched, std::vector<Node> replacement);
  // Applies and forgets the rewrites; true when there was one.
  bool apply(Graph& g);

 private:
  struct Rewrite {
    std::vector<int> matched;
    std::vector<Node> replacement;
  };
  std::vector<Rewrite> rewrites_;
  std::vector<int> claimed_;  // sorted indices of matched nodes
};

// What the passes read of a graph: who writes and reads each value, and the static shapes.
struct GraphAnalyses {
  explicit GraphAnalyses(const Graph& g);
  const Graph* graph;
  std::size_t nodes, values, initializers;  // the graph's sizes when analysed
  GraphIndex index;
  StaticShapes shapes;
};

// g's analyses from ctx when they were made for g as it is, else made now and kept there. A pass
// that returns false must leave the graph as it found it; one that returns true drops them
// (the optimizer does too), and so does every rewrite below.
std::shared_ptr<const GraphAnalyses> analyses_of(const Graph& g, const PassContext& ctx);

// The loop every fusion pass runs: scan(i, index, shapes, rewriter) is called for each node with
// indexes of the current graph and proposes rewrites; they are applied together, and the scan
// repeats on the rewritten graph until it proposes nothing. True when anything changed.
template <typename Scan>
bool rewrite_to_fixed_point(Graph& g, const PassContext& ctx, Scan&& scan) {
  bool changed = false;
  while (true) {
    const std::shared_ptr<const GraphAnalyses> a = analyses_of(g, ctx);
    Rewriter rewriter;
    for (std::size_t i = 0; i < g.nodes().size(); ++i) scan(i, a->index, a->shapes, rewriter);
    if (!rewriter.apply(g)) return changed;
    ctx.analyses.reset();
    changed = true;
  }
}

}  // namespace wpk::passes
