// Replaces shape computations whose result is fixed before run time by constants: Shape of a
// value with static dims, and Gather/Concat/Unsqueeze/Slice/Cast of such shapes (BERT's
// Shape(x)[2] / heads, for one). Dims come from a static propagation (static_shapes.hpp), so a
// value with a symbolic batch still folds the dims that do not depend on it. Constant folding then
// evaluates the arithmetic that follows (768 / 12 -> 64).
//
// A Reshape target that still holds the symbolic batch becomes a constant too where the batch
// sits at the same position in the input: Reshape's 0 copies that input dim. BERT's head split
// target Concat(Shape(x)[0], 128, 12, 64) turns into [0, 128, 12, 64], and the Shape, Gather,
// Unsqueeze and Concat nodes computing it die.
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// The value as a constant tensor when its dims and every element are known.
std::optional<Tensor> known_value(const StaticShapes& shapes, ValueId v) {
  const DimList* dims = shapes.dims(v);
  const IntData* data = shapes.data(v);
  const DType dtype = shapes.data_dtype(v);
  if (!dims || !data || !all_static(*dims) || dims->size() > 1) return std::nullopt;
  if (dtype != DType::Int64 && dtype != DType::Int32) return std::nullopt;
  Shape shape;
  for (const Dim& d : *dims) shape.push_back(d.value);
  if (shape_numel(shape) != static_cast<std::int64_t>(data->size())) return std::nullopt;
  std::vector<std::int64_t> values;
  for (const IntElem& e : *data) {
    if (!e.value) return std::nullopt;
    values.push_back(*e.value);
  }
  if (dtype == DType::Int64) return Tensor::from_vector(values, shape);
  return Tensor::from_vector(std::vector<std::int32_t>(values.begin(), values.end()), shape);
}

// The constant equivalent of a Reshape's computed target, or nothing.
std::optional<Tensor> constant_target(const Graph& g, const StaticShapes& shapes, const Node& n) {
  if (n.op_type != "Reshape" || !n.domain.empty() || n.inputs.size() != 2 || g.is_initializer(n.inputs[1]) ||
      n.attr_int("allowzero", 0) != 0)
    return std::nullopt;
  const IntData* target = shapes.data(n.inputs[1]);
  const DimList* in = shapes.dims(n.inputs[0]);
  const DimList* target_dims = shapes.dims(n.inputs[1]);
  if (!target || !target_dims || target_dims->size() != 1 || !(*target_dims)[0].is_static() ||
      (*target_dims)[0].value != static_cast<std::int64_t>(target->size()))
    return std::nullopt;  // the data must be the whole target
  std::vector<std::int64_t> values;
  for (std::size_t i = 0; i < target->size(); ++i) {
    const IntElem& e = (*target)[i];
    if (e.value)
      values.push_back(*e.value);
    else if (!e.symbol.empty() && in && i < in->size() && same_dim((*in)[i], Dim(e.symbol)))
      values.push_back(0);
    else
      return std::nullopt;
  }
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())});
}

}  // namespace

bool fold_shape_subgraphs(Graph& g, const PassContext& ctx) {
  const std::shared_ptr<const GraphAnalyses> analyses = analyses_of(g, ctx);
  const StaticShapes& shapes = analyses->shapes;
  bool changed = false;
  auto& nodes = g.mutable_nodes();
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (Node& n : nodes) {
    // Nodes on constants alone are constant folding's; graph outputs stay computed by a node.
    bool reads_runtime_value = false;
    for (ValueId v : n.inputs) reads_runtime_value |= v != kNoValue && !g.is_initializer(v);
    std::optional<Tensor> value;
    if (reads_runtime_value && n.outputs.size() == 1 && !is_graph_output(g, n.outputs[0]))
      value = known_value(shapes, n.outputs[0]);
    if (!value) {
      if (auto target = constant_target(g, shapes, n)) {
        n.inputs[1] = g.add_initializer(unique_name(g, n.name + "_target"), std::move(*target));
        changed = true;
      }
      kept.push_back(std::move(n));
      continue;
    }
    g.set_initializer(n.outputs[0], std::move(*value));
    changed = true;
  }
  nodes = std::move(kept);
  return changed;
}

}  // namespace wpk::passes
