#include "graph/group_parts.hpp"

#include <algorithm>

#include "graph/elementwise_chain.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk {
namespace {

std::string label(const Node& n) { return "node '" + n.name + "' (" + n.op_type + "): "; }

Node part(const Node& group, const char* suffix, const char* op_type, const char* domain) {
  Node n;
  n.name = group.name + suffix;
  n.op_type = op_type;
  n.domain = domain;
  return n;
}

std::vector<Node> split_depthwise_pointwise(const Node& pair, ValueId between) {
  const std::vector<ValueId>& in = pair.inputs;
  auto input = [&](std::size_t i) { return i < in.size() ? in[i] : kNoValue; };
  Node dw = part(pair, "/depthwise", "FusedConv", kWpkDomain);
  dw.inputs = {input(0), input(1), input(2)};
  dw.outputs = {between};
  dw.attributes = pair.attributes;
  dw.attributes.erase("pointwise_activation");
  dw.attributes.erase("pointwise_activation_params");
  Node pw = part(pair, "/pointwise", "FusedConv", kWpkDomain);
  pw.inputs = {between, input(3), input(4)};
  if (input(kDepthwisePointwiseResidual) != kNoValue) pw.inputs.push_back(input(kDepthwisePointwiseResidual));
  pw.outputs = pair.outputs;
  pw.attributes.insert_or_assign("channels_last", Attribute(std::int64_t{1}));
  if (const Attribute* a = pair.find_attr("pointwise_activation")) pw.attributes.insert_or_assign("activation", *a);
  if (const Attribute* a = pair.find_attr("pointwise_activation_params")) pw.attributes.insert_or_assign("activation_params", *a);
  if (const Attribute* a = pair.find_attr("compute_precision")) pw.attributes.insert_or_assign("compute_precision", *a);
  return {std::move(dw), std::move(pw)};
}

std::vector<Node> split_scaled_pointwise(const Node& group, ValueId between) {
  const std::vector<ValueId>& in = group.inputs;
  auto input = [&](std::size_t i) { return i < in.size() ? in[i] : kNoValue; };
  Node mul = part(group, "/scale", "Mul", "");
  mul.inputs = {input(0), input(1)};
  mul.outputs = {between};
  Node conv = part(group, "/pointwise", "FusedConv", kWpkDomain);
  conv.inputs = {between, input(2), input(3)};
  if (input(kScaledPointwiseResidual) != kNoValue) conv.inputs.push_back(input(kScaledPointwiseResidual));
  conv.outputs = group.outputs;
  conv.attributes = group.attributes;
  return {std::move(mul), std::move(conv)};
}

std::vector<Node> split_chain(const Node& chain, const std::vector<ValueId>& between) {
  const std::vector<ChainStep> steps = chain_steps(chain);
  const auto inputs = static_cast<std::int64_t>(chain.inputs.size());
  auto value = [&](std::int64_t v) {
    return v < inputs ? chain.inputs[static_cast<std::size_t>(v)] : between[static_cast<std::size_t>(v - inputs)];
  };
  std::vector<Node> parts;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    Node n;
    n.name = chain.name + "/" + std::to_string(s) + "_" + steps[s].op;
    n.op_type = steps[s].op;
    n.inputs = {value(steps[s].first)};
    if (steps[s].second >= 0) n.inputs.push_back(value(steps[s].second));
    n.outputs = {s + 1 == steps.size() ? chain.outputs.at(0) : between[s]};
    parts.push_back(std::move(n));
  }
  return parts;
}

bool is_chain(const Node& node) { return node.domain == kWpkDomain && node.op_type == "ElementwiseChain"; }

}  // namespace

bool is_group(const Node& node) {
  return node.domain == kWpkDomain &&
         (node.op_type == "DepthwisePointwiseConv" || node.op_type == "ScaledPointwiseConv" || is_chain(node));
}

std::size_t group_part_count(const Node& group) { return is_chain(group) ? chain_steps(group).size() : 2; }

std::vector<Node> split_group(const Node& group, const std::vector<ValueId>& between) {
  if (between.size() + 1 != group_part_count(group))
    throw Error(ErrorCode::Internal, label(group) + "split with " + std::to_string(between.size()) + " values between its parts");
  if (is_chain(group)) return split_chain(group, between);
  // Inputs that are not optional: DepthwisePointwiseConv's X, W_dw, B_dw, W_pw;
  // ScaledPointwiseConv's X, S, W.
  const std::size_t required = group.op_type == "DepthwisePointwiseConv" ? 4 : 3;
  for (std::size_t i = 0; i < required; ++i)
    if (i >= group.inputs.size() || group.inputs[i] == kNoValue)
      throw Error(ErrorCode::InvalidModel, label(group) + "input " + std::to_string(i) + " is missing");
  if (group.domain == kWpkDomain && group.op_type == "DepthwisePointwiseConv") return split_depthwise_pointwise(group, between[0]);
  if (group.domain == kWpkDomain && group.op_type == "ScaledPointwiseConv") return split_scaled_pointwise(group, between[0]);
  throw Error(ErrorCode::Internal, label(group) + "is not a group of wpk's optimizer");
}

bool pointwise_conv_attributes(const Node& conv) {
  auto all = [](const std::vector<std::int64_t>& v, std::int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](std::int64_t e) { return e == x; });
  };
  return conv.attr_int("group", 1) == 1 && all(conv.attr_ints("strides", {1, 1}), 1) &&
         all(conv.attr_ints("pads", {0, 0, 0, 0}), 0) && all(conv.attr_ints("dilations", {1, 1}), 1);
}

Graph group_graph(const Node& group, const Graph& graph, std::vector<ValueId>* group_inputs) {
  Graph sub;
  sub.set_opset(graph.opset());
  sub.set_name(group.name);
  std::vector<ValueId> inputs;
  for (ValueId v : group.inputs) {
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
  if (group_inputs) *group_inputs = inputs;
  std::vector<ValueId> between;
  for (std::size_t i = 0; i + 1 < group_part_count(group); ++i) {
    ValueInfo info;
    info.name = group.name + "/between" + (i ? std::to_string(i) : std::string());
    info.dtype = DType::Float32;
    between.push_back(sub.add_value(info));
  }
  const ValueId out = sub.add_value(graph.value(group.outputs.at(0)));
  Node group_here = group;
  group_here.inputs = inputs;
  group_here.outputs = {out};
  for (Node& n : split_group(group_here, between)) sub.mutable_nodes().push_back(std::move(n));
  sub.mutable_outputs().push_back(out);
  const passes::StaticShapes shapes(sub);
  for (ValueId v : between) {
    const DimList* dims = shapes.dims(v);
    // The conv groups' parts read NHWC images; a chain's steps take any shape they broadcast to.
    if (!dims || (!is_chain(group) && dims->size() != 4))
      throw Error(ErrorCode::InvalidModel, label(group) + "its input's dims make no input for its next part");
    sub.mutable_value(v).dims = *dims;
  }
  return sub;
}

}  // namespace wpk
