// Layer normalization written out op by op, as older exporters do:
//   m = ReduceMean(x, last axis); d = Sub(x, m); v = ReduceMean(Pow(d, 2), last axis)
//   y = Div(d, Sqrt(Add(v, eps))) [* scale] [+ bias]
// becomes one LayerNormalization(x, scale, bias, axis=-1, epsilon=eps): one kernel instead of
// nine passes over memory. LayerNormalization is an opset-17 op; for older models the same
// kernel runs as com.wpk LayerNormalization.
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// A ReduceMean over only the last axis of its rank-`rank` input, keeping dims.
bool mean_over_last_axis(const Graph& g, const Node& n, int rank) {
  if (!is_onnx_op(&n, "ReduceMean") || n.attr_int("keepdims", 1) != 1 || rank < 1) return false;
  std::vector<std::int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {  // opset 18: axes as an input
    const Tensor* t = g.initializer(n.inputs[1]);
    if (!t || t->dtype() != DType::Int64) return false;
    axes.assign(t->data<std::int64_t>(), t->data<std::int64_t>() + t->numel());
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

struct LayerNormMatch {
  std::vector<int> nodes;
  float epsilon = 0;
  ValueId scale = kNoValue, bias = kNoValue, output = kNoValue;
};

// The sole reader of v if it is `op`; -1 otherwise.
int next(const Graph& g, const GraphIndex& index, ValueId v, const char* op) {
  const int i = index.sole_reader_index(v);
  return i >= 0 && is_onnx_op(&g.nodes()[i], op) ? i : -1;
}

// The optional "* scale" or "+ bias" after `v`: a float32 [D] constant.
int affine_step(const Graph& g, const GraphIndex& index, ValueId v, const char* op, std::int64_t d, ValueId& param) {
  const int i = next(g, index, v, op);
  if (i < 0) return -1;
  param = other_input(g.nodes()[i], v);
  const Tensor* t = float_constant(g, param);
  return t && t->rank() == 1 && t->numel() == d ? i : -1;
}

std::optional<LayerNormMatch> match_layernorm(const Graph& g, const GraphIndex& index, const StaticShapes& shapes,
                                              int mean_at) {
  const Node& mean = g.nodes()[mean_at];
  const ValueId x = mean.inputs[0];
  const DimList* xd = shapes.dims(x);
  const int rank = shapes.rank(x);
  if (!xd || rank < 1 || !xd->back().is_static() || !mean_over_last_axis(g, mean, rank)) return std::nullopt;
  const std::int64_t d = xd->back().value;
  const int sub = next(g, index, mean.outputs[0], "Sub");
  if (sub < 0 || g.nodes()[sub].inputs[0] != x) return std::nullopt;
  const ValueId centered = g.nodes()[sub].outputs[0];
  // `centered` feeds the variance and the division, nothing else.
  const auto& readers = index.readers(centered);
  if (readers.size() != 2 || is_graph_output(g, centered)) return std::nullopt;
  const int pow = is_onnx_op(&g.nodes()[readers[0]], "Pow") ? readers[0] : readers[1];
  const int div = pow == readers[0] ? readers[1] : readers[0];
  const Node& pn = g.nodes()[pow];
  const auto two = scalar_constant(g, pn.inputs.size() == 2 ? pn.inputs[1] : kNoValue, rank);
  if (!is_onnx_op(&pn, "Pow") || pn.inputs[0] != centered || !two || *two != 2.0f) return std::nullopt;
  const int var = next(g, index, pn.outputs[0], "ReduceMean");
  if (var < 0 || !mean_over_last_axis(g, g.nodes()[var], rank)) return std::nullopt;
  const int add = next(g, index, g.nodes()[var].outputs[0], "Add");
  if (add < 0) return std::nullopt;
  const auto eps = scalar_constant(g, other_input(g.nodes()[add], g.nodes()[var].outputs[0]), rank);
  const int sqrt = eps ? next(g, index, g.nodes()[add].outputs[0], "Sqrt") : -1;
  if (sqrt < 0 || next(g, index, g.nodes()[sqrt].outputs[0], "Div") != div) return std::nullopt;
  const Node& dn = g.nodes()[div];
  if (dn.inputs[0] != centered || dn.inputs[1] != g.nodes()[sqrt].outputs[0]) return std::nullopt;

  LayerNormMatch m;
  m.nodes = {mean_at, sub, pow, var, add, sqrt, div};
  m.epsilon = *eps;
  m.output = dn.outputs[0];
  if (const int mul = affine_step(g, index, m.output, "Mul", d, m.scale); mul >= 0) {
    m.nodes.push_back(mul);
    m.output = g.nodes()[mul].outputs[0];
  } else {
    m.scale = kNoValue;
  }
  if (const int bias = affine_step(g, index, m.output, "Add", d, m.bias); bias >= 0) {
    m.nodes.push_back(bias);
    m.output = g.nodes()[bias].outputs[0];
  } else {
    m.bias = kNoValue;
  }
  return m;
}

}  // namespace

bool fuse_layernorm(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    if (!is_onnx_op(&g.nodes()[i], "ReduceMean")) return;
    const auto m = match_layernorm(g, index, shapes, static_cast<int>(i));
    if (!m || !rewriter.available(m->nodes)) return;
    const ValueId x = g.nodes()[i].inputs[0];
    Node ln;
    ln.name = g.nodes()[i].name + "_layernorm";
    ln.op_type = "LayerNormalization";
    ln.domain = g.opset() >= 17 ? "" : kWpkDomain;
    ValueId scale = m->scale;
    if (scale == kNoValue) {
      const std::int64_t d = shapes.dims(x)->back().value;
      scale = add_constant(g, ln.name + "_scale", Tensor::from_vector(std::vector<float>(d, 1.0f), {d}));
    }
    ln.inputs = {x, scale};
    if (m->bias != kNoValue) ln.inputs.push_back(m->bias);
    ln.outputs = {m->output};
    ln.attributes = {{"axis", Attribute(std::int64_t{-1})}, {"epsilon", Attribute(m->epsilon)}};
    rewriter.replace(m->nodes, {std::move(ln)});
  });
}

}  // namespace wpk::passes
