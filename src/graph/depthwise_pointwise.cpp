#include "graph/depthwise_pointwise.hpp"

#include <algorithm>

#include "graph/fused_ops.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk {

DepthwisePointwiseParts split_depthwise_pointwise(const Node& pair, ValueId between) {
  const std::vector<ValueId>& in = pair.inputs;
  auto input = [&](std::size_t i) { return i < in.size() ? in[i] : kNoValue; };
  DepthwisePointwiseParts parts;
  Node& dw = parts.depthwise;
  dw.name = pair.name + "/depthwise";
  dw.op_type = "FusedConv";
  dw.domain = kWpkDomain;
  dw.inputs = {input(0), input(1), input(2)};
  dw.outputs = {between};
  dw.attributes = pair.attributes;
  dw.attributes.erase("pointwise_activation");
  dw.attributes.erase("pointwise_activation_params");
  Node& pw = parts.pointwise;
  pw.name = pair.name + "/pointwise";
  pw.op_type = "FusedConv";
  pw.domain = kWpkDomain;
  pw.inputs = {between, input(3), input(4)};
  if (input(5) != kNoValue) pw.inputs.push_back(input(5));
  pw.outputs = pair.outputs;
  pw.attributes.insert_or_assign("channels_last", Attribute(std::int64_t{1}));
  if (const Attribute* a = pair.find_attr("pointwise_activation")) pw.attributes.insert_or_assign("activation", *a);
  if (const Attribute* a = pair.find_attr("pointwise_activation_params")) pw.attributes.insert_or_assign("activation_params", *a);
  if (const Attribute* a = pair.find_attr("compute_precision")) pw.attributes.insert_or_assign("compute_precision", *a);
  return parts;
}

bool pointwise_conv_attributes(const Node& conv) {
  auto all = [](const std::vector<std::int64_t>& v, std::int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](std::int64_t e) { return e == x; });
  };
  return conv.attr_int("group", 1) == 1 && all(conv.attr_ints("strides", {1, 1}), 1) &&
         all(conv.attr_ints("pads", {0, 0, 0, 0}), 0) && all(conv.attr_ints("dilations", {1, 1}), 1);
}

Graph depthwise_pointwise_graph(const Node& pair, const Graph& graph, std::vector<ValueId>* pair_inputs) {
  Graph sub;
  sub.set_opset(graph.opset());
  sub.set_name(pair.name);
  std::vector<ValueId> inputs;
  for (ValueId v : pair.inputs) {
    const std::string& name = v == kNoValue ? std::string() : graph.value(v).name;
    if (v == kNoValue || sub.find_value(name) != kNoValue) {  // omitted, or read twice
      inputs.push_back(v == kNoValue ? kNoValue : sub.find_value(name));
      continue;
    }
    if (const Tensor* t = graph.initializer(v)) {
      inputs.push_back(sub.add_initializer(name, *t));
      continue;
    }
    inputs.push_back(sub.add_value(graph.value(v)));
    sub.mutable_inputs().push_back(inputs.back());
  }
  if (pair_inputs) *pair_inputs = inputs;
  ValueInfo between_info;
  between_info.name = pair.name + "/depthwise_output";
  between_info.dtype = DType::Float32;
  const ValueId between = sub.add_value(between_info);
  const ValueId out = sub.add_value(graph.value(pair.outputs.at(0)));
  Node pair_here = pair;
  pair_here.inputs = inputs;
  pair_here.outputs = {out};
  DepthwisePointwiseParts parts = split_depthwise_pointwise(pair_here, between);
  sub.mutable_nodes().push_back(parts.depthwise);
  sub.mutable_nodes().push_back(parts.pointwise);
  sub.mutable_outputs().push_back(out);
  const passes::StaticShapes shapes(sub);
  const DimList* dims = shapes.dims(between);
  if (!dims || dims->size() != 4)
    throw Error(ErrorCode::InvalidModel, "node '" + pair.name + "' (DepthwisePointwiseConv): its input's dims make no depthwise output");
  sub.mutable_value(between).dims = *dims;
  return sub;
}

}  // namespace wpk
