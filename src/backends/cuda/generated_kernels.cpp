#include "backends/cuda/generated_kernels.hpp"

#include <algorithm>

#include "codegen/loop_ir.hpp"
#include "wpk/error.hpp"

namespace wpk::cuda {

using namespace codegen;

namespace {

constexpr std::int64_t kThreadsPerBlock = 256;

// Output dims with each operand's (1 where it broadcasts), after dropping size-1 output dims and
// merging neighbours that every operand treats alike.
struct Collapsed {
  std::vector<std::int64_t> out;
  std::vector<std::vector<std::int64_t>> operands;
};

Collapsed collapse(const Shape& out, const std::vector<Shape>& operands) {
  Collapsed c;
  c.operands.resize(operands.size());
  std::vector<bool> last_pattern;
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::vector<bool> pattern;  // true: the operand broadcasts along d
    for (const Shape& s : operands) {
      const std::size_t lead = out.size() - s.size();
      const bool broadcast = d < lead || s[d - lead] == 1;
      if (!broadcast && s[d - lead] != out[d])
        throw Error(ErrorCode::InvalidArgument, "operand " + shape_to_string(s) + " does not broadcast to " + shape_to_string(out));
      pattern.push_back(broadcast);
    }
    if (!c.out.empty() && pattern == last_pattern) {
      c.out.back() *= out[d];
      for (std::size_t i = 0; i < operands.size(); ++i)
        if (!pattern[i]) c.operands[i].back() *= out[d];
      continue;
    }
    c.out.push_back(out[d]);
    for (std::size_t i = 0; i < operands.size(); ++i) c.operands[i].push_back(pattern[i] ? 1 : out[d]);
    last_pattern = pattern;
  }
  if (c.out.empty()) {
    c.out = {1};
    for (auto& o : c.operands) o = {1};
  }
  return c;
}

}  // namespace

PrintedCudaKernel elementwise_kernel(const std::string& name, const Shape& out, const std::vector<Shape>& operands,
                                     const ElementwiseBody& body) {
  const Collapsed c = collapse(out, operands);
  std::vector<Var> axes;
  for (std::size_t d = 0; d < c.out.size(); ++d) axes.push_back(var("d" + std::to_string(d), c.out[d]));
  std::vector<Buffer> buffers;
  std::vector<Expr> loads;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    buffers.push_back(buffer("x" + std::to_string(i), c.operands[i]));
    std::vector<Affine> index;
    for (std::size_t d = 0; d < c.out.size(); ++d) index.push_back(c.operands[i][d] == 1 ? Affine(0) : Affine(axes[d]));
    loads.push_back(load(buffers.back(), index));
  }
  const Compute compute_def = compute(name, buffer("y", c.out), axes, {}, body(loads), nullptr, buffers);
  Schedule s(compute_def);
  const auto [rows, lanes] = s.split(axes.back(), std::min(kThreadsPerBlock, c.out.back()));
  for (std::size_t d = 0; d + 1 < axes.size(); ++d) s.bind_block(axes[d]);
  s.bind_block(rows);
  s.bind_thread(lanes);
  std::string symbol = "wpk_" + name;
  for (std::int64_t d : c.out) symbol += "_" + std::to_string(d);
  return print_cuda(lower(s), symbol, "cuda backend");
}

bool activation_expressible(const std::string& a) {
  return a.empty() || a == "Relu" || a == "Sigmoid" || a == "Tanh" || a == "SiLU" || a == "GeluTanh" || a == "HardSwish" ||
         a == "Clip" || a == "LeakyRelu" || a == "HardSigmoid";
}

Expr activation_expr(const std::string& a, const std::vector<float>& p, Expr x) {
  auto params = [&](std::size_t n) {
    if (p.size() != n)
      throw Error(ErrorCode::InvalidModel, "activation " + a + " takes " + std::to_string(n) + " activation_params, got " +
                                               std::to_string(p.size()));
  };
  auto clamp01 = [](Expr v) { return min(max(v, constant(0.0f)), constant(1.0f)); };
  if (a.empty()) return x;
  if (a == "Relu") return relu(x);
  if (a == "Sigmoid") return sigmoid(x);
  if (a == "Tanh") return unary(Op::Tanh, x);
  if (a == "SiLU") return x * sigmoid(x);
  if (a == "HardSwish") return x * clamp01(x / constant(6.0f) + constant(0.5f));
  if (a == "GeluTanh") {
    const Expr inner = constant(0.7978845608f) * (x + constant(0.044715f) * x * x * x);
    return constant(0.5f) * x * (constant(1.0f) + unary(Op::Tanh, inner));
  }
  if (a == "Clip") {
    params(2);
    return min(max(x, constant(p[0])), constant(p[1]));
  }
  if (a == "LeakyRelu") {
    params(1);
    return relu(x) - constant(p[0]) * relu(unary(Op::Neg, x));
  }
  if (a == "HardSigmoid") {
    params(2);
    return clamp01(constant(p[0]) * x + constant(p[1]));
  }
  throw Error(ErrorCode::Unsupported, "the CUDA backend has no generated form of activation '" + a + "'");
}

}  // namespace wpk::cuda
