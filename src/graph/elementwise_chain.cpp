#include "graph/elementwise_chain.hpp"

#include <algorithm>
#include <array>

#include "wpk/error.hpp"

namespace wpk {
namespace {

constexpr std::array<const char*, 6> kBinary = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
constexpr std::array<const char*, 8> kUnary = {"Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Neg", "Abs", "Erf"};

template <std::size_t N>
bool listed(const std::array<const char*, N>& list, const std::string& op) {
  return std::any_of(list.begin(), list.end(), [&](const char* o) { return op == o; });
}

}  // namespace

bool chain_op_unary(const std::string& op_type) { return listed(kUnary, op_type); }
bool chain_op(const std::string& op_type) { return listed(kBinary, op_type) || chain_op_unary(op_type); }

std::optional<Shape> broadcast_shape(const std::vector<Shape>& shapes) {
  Shape out;
  for (const Shape& in : shapes) {
    if (in.size() > out.size()) out.insert(out.begin(), in.size() - out.size(), 1);
    for (std::size_t d = 0; d < in.size(); ++d) {
      std::int64_t& o = out[out.size() - in.size() + d];
      if (o == 1) o = in[d];
      else if (in[d] != o && in[d] != 1) return std::nullopt;
    }
  }
  return out;
}

std::vector<ChainStep> chain_steps(const Node& chain) {
  const std::string where = "node '" + chain.name + "' (ElementwiseChain): ";
  const Attribute* ops_attr = chain.find_attr("ops");
  if (!ops_attr || ops_attr->kind() != Attribute::Kind::Strings)
    throw Error(ErrorCode::InvalidModel, where + "needs its steps' op types (strings attribute ops)");
  const std::vector<std::string>& ops = ops_attr->strings();
  const std::vector<std::int64_t> operands = chain.attr_ints("operands", {});
  if (ops.empty()) throw Error(ErrorCode::InvalidModel, where + "has no steps (attribute ops)");
  if (operands.size() != 2 * ops.size())
    throw Error(ErrorCode::InvalidModel, where + "needs two operands a step, got " + std::to_string(operands.size()) +
                                             " for " + std::to_string(ops.size()) + " steps");
  const auto inputs = static_cast<std::int64_t>(chain.inputs.size());
  std::vector<ChainStep> steps;
  for (std::size_t s = 0; s < ops.size(); ++s) {
    ChainStep step{ops[s], operands[2 * s], operands[2 * s + 1]};
    const std::string at = where + "step " + std::to_string(s) + " (" + step.op + "): ";
    if (!chain_op(step.op)) throw Error(ErrorCode::InvalidModel, at + "is not an op a chain holds");
    const std::int64_t known = inputs + static_cast<std::int64_t>(s);  // values that exist before the step
    const bool unary = chain_op_unary(step.op);
    if (step.first < 0 || step.first >= known || (unary ? step.second != -1 : step.second < 0 || step.second >= known))
      throw Error(ErrorCode::InvalidModel, at + "reads a value that is not an input or an earlier step's");
    for (std::int64_t v : {step.first, step.second})
      if (v >= 0 && v < inputs && chain.inputs[static_cast<std::size_t>(v)] == kNoValue)
        throw Error(ErrorCode::InvalidModel, at + "reads input " + std::to_string(v) + ", which is missing");
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace wpk
