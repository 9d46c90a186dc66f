#include "backends/generated/epilogue.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "graph/fused_ops.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

constexpr const char* kResidualName = "z";

std::size_t expected_params(const std::string& activation) {
  if (activation == "Clip" || activation == "HardSigmoid") return 2;
  if (activation == "LeakyRelu") return 1;
  return 0;
}

// Operands in the order that keeps a NaN input NaN: the DSL's max(a, b) and min(a, b) return b
// when either is NaN, as the reference backend's clamp and ReLU keep it.
Expr clamp(Expr x, float lo, float hi) { return min(constant(hi), max(constant(lo), std::move(x))); }

}  // namespace

bool read_activation(const Node& node, Epilogue& e, std::string& why) {
  e.activation = node.attr_string("activation", "");
  e.params = node.attr_floats("activation_params");
  static const char* known[] = {"", "Relu", "Sigmoid", "Tanh", "SiLU", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu", "GeluTanh"};
  if (std::find(std::begin(known), std::end(known), e.activation) == std::end(known)) {
    why = "activation " + e.activation + " is not written by the gen backend";
    return false;
  }
  if (e.params.size() != expected_params(e.activation)) {
    why = "activation " + e.activation + " takes " + std::to_string(expected_params(e.activation)) +
          " activation_params, got " + std::to_string(e.params.size());
    return false;
  }
  return true;
}

bool read_conv_epilogue(const Node& node, const Graph& graph, std::int64_t channels, Epilogue& e, std::string& why) {
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const auto bias = static_dims(graph, node.inputs[2]);
    if (!bias || bias->size() != 1 || (*bias)[0] != channels || !is_float32(graph, node.inputs[2])) {
      why = "generated convs take a bias of shape [C_out]";
      return false;
    }
    e.bias = true;
  }
  e.residual = has_fused_residual(node);
  return node.domain != kWpkDomain || read_activation(node, e, why);
}

Expr activation_of(const Epilogue& e, Expr x) {
  const std::string& act = e.activation;
  const std::vector<float>& p = e.params;
  if (act.empty()) return x;
  if (act == "Relu") return max(constant(0.0f), x);
  if (act == "Sigmoid") return sigmoid(x);
  if (act == "Tanh") return unary(Op::Tanh, x);
  if (act == "SiLU") return x * sigmoid(x);
  if (act == "Clip") return clamp(x, p[0], p[1]);
  if (act == "LeakyRelu") return max(constant(0.0f), x) + constant(p[0]) * min(constant(0.0f), x);
  if (act == "HardSigmoid") return clamp(constant(p[0]) * x + constant(p[1]), 0.0f, 1.0f);
  if (act == "HardSwish") return x * clamp(x / constant(6.0f) + constant(0.5f), 0.0f, 1.0f);
  // Gelu and GeluTanh in the reference backend's order of operations (Gelu's division by sqrt(2)
  // a multiplication: a division costs an epilogue as much as its erf).
  if (act == "Gelu")
    return x * (constant(1.0f) + unary(Op::Erf, x * constant(static_cast<float>(1.0 / std::sqrt(2.0))))) * constant(0.5f);
  const Expr inner = constant(0.7978845608028654f) * (x + constant(0.044715f) * (x * (x * x)));
  return x * (constant(1.0f) + unary(Op::Tanh, inner)) * constant(0.5f);
}

Buffer residual_input(const Compute& c) {
  for (const Buffer& b : c.inputs)
    if (b->name == kResidualName) return b;
  throw std::invalid_argument(c.name + ": no residual input");
}

Expr epilogue_expr(const Epilogue& e, const Var& column, const std::vector<Var>& output_axes,
                  const std::vector<std::int64_t>& output_dims, std::vector<Buffer>& inputs) {
  Expr sum = acc();
  if (e.bias) {
    inputs.push_back(buffer("bias", {output_dims.back()}));
    sum = sum + load(inputs.back(), {column});
  }
  if (e.residual) {
    inputs.push_back(buffer(kResidualName, output_dims));
    sum = sum + load(inputs.back(), std::vector<Affine>(output_axes.begin(), output_axes.end()));
  }
  Expr out = activation_of(e, sum);
  return out->op == Op::Acc ? nullptr : out;
}

std::optional<std::vector<std::int64_t>> static_dims(const Graph& graph, ValueId v) {
  const ValueInfo& info = graph.value(v);
  if (!info.dims) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const Dim& d : *info.dims) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

bool is_float32(const Graph& graph, ValueId v) {
  const DType t = graph.value(v).dtype;
  return t == DType::Float32 || t == DType::Undefined;
}

}  // namespace wpk::gen
