#include "graph/shape_limits.hpp"

#include <string>

namespace wpk {
namespace {

// The input holding a shape given as data, or -1.
int shape_operand(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return -1;
  if (n.op_type == "Reshape" || n.op_type == "Expand" || n.op_type == "Tile") return 1;
  if (n.op_type == "ConstantOfShape") return 0;
  if (n.op_type == "Resize") return 3;
  return -1;
}

void check_value(const Graph& g, ValueId v, const ShapeLimits& limits, const std::string& where) {
  if (v == kNoValue || !g.value(v).dims) return;
  const DimList& dims = *g.value(v).dims;
  check_rank(dims.size(), limits, where);
  Shape known;  // symbolic and unknown dims are checked at run time
  for (const Dim& d : dims)
    if (d.is_static()) known.push_back(d.value);
  const bool all_known = known.size() == dims.size();
  check_elements(known, limits, where, all_known && dtype_is_storable(g.value(v).dtype) ? g.value(v).dtype : DType::Undefined);
}

}  // namespace

void check_shape_limits(const Graph& g, const ShapeLimits& limits) {
  for (ValueId v : g.inputs()) check_value(g, v, limits, "input '" + g.value(v).name + "': ");
  for (const Node& n : g.nodes()) {
    const std::string label = "node '" + n.name + "' (" + n.op_type + "): ";
    const int s = shape_operand(n);
    if (s >= 0 && s < static_cast<int>(n.inputs.size()) && n.inputs[s] != kNoValue) {
      const auto& dims = g.value(n.inputs[s]).dims;
      if (dims && dims->size() == 1 && (*dims)[0].is_static())
        check_rank(static_cast<std::size_t>((*dims)[0].value), limits, label + "the shape it is given: ");
    }
    for (std::size_t o = 0; o < n.outputs.size(); ++o)
      check_value(g, n.outputs[o], limits, label + "output " + std::to_string(o) + ": ");
  }
}

}  // namespace wpk
