// The CUDA backend's element-wise kernels: ONNX element-wise ops with numpy broadcasting, and
// chains and trees of them grouped into one kernel.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/support.hpp"
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


namespace {

float constant_scalar(const Graph& g, ValueId v, float fallback) {
  if (v == kNoValue) return fallback;
  const Tensor* t = g.initializer(v);
  if (!t || t->numel() != 1) throw Error(ErrorCode::Unsupported, "CUDA: a bound that is not a constant scalar");
  return t->data<float>()[0];
}

}  // namespace

Expr elementwise_expr(const Node& n, const Graph& g, const std::vector<Expr>& v) {
  const std::string& op = n.op_type;
  if (op == "Add") return v[0] + v[1];
  if (op == "Sub") return v[0] - v[1];
  if (op == "Mul") return v[0] * v[1];
  if (op == "Div") return v[0] / v[1];
  if (op == "Max") return max(v[0], v[1]);
  if (op == "Min") return min(v[0], v[1]);
  if (op == "Relu") return relu(v[0]);
  if (op == "Sigmoid") return sigmoid(v[0]);
  if (op == "Tanh") return unary(Op::Tanh, v[0]);
  if (op == "Abs") return unary(Op::Abs, v[0]);
  if (op == "Neg") return unary(Op::Neg, v[0]);
  if (op == "Sqrt") return unary(Op::Sqrt, v[0]);
  if (op == "Exp") return exp(v[0]);
  if (op == "LeakyRelu") return activation_expr("LeakyRelu", {n.attr_float("alpha", 0.01f)}, v[0]);
  if (op == "HardSigmoid") return activation_expr("HardSigmoid", {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)}, v[0]);
  if (op == "HardSwish") return activation_expr("HardSwish", {}, v[0]);
  if (op == "Clip") {
    float lo, hi;
    if (g.opset() < 11) {
      lo = n.attr_float("min", -3.402823466e38f), hi = n.attr_float("max", 3.402823466e38f);
    } else {
      lo = constant_scalar(g, n.inputs.size() > 1 ? n.inputs[1] : kNoValue, -3.402823466e38f);
      hi = constant_scalar(g, n.inputs.size() > 2 ? n.inputs[2] : kNoValue, 3.402823466e38f);
    }
    return min(max(v[0], constant(lo)), constant(hi));
  }
  throw Error(ErrorCode::Unsupported, "CUDA: no generated form of " + op);
}

std::vector<std::size_t> elementwise_operands(const Node& n) {
  const bool binary = n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div" ||
                      n.op_type == "Max" || n.op_type == "Min";
  return binary ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{0};
}

std::string elementwise_kernel_name(const std::string& op) {
  std::string name;
  for (char c : op) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::vector<std::size_t> elementwise_group_roots(const Graph& body) {
  const auto& nodes = body.nodes();
  std::map<ValueId, std::vector<std::size_t>> readers;  // node indices, once per input slot
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) readers[v].push_back(i);
  std::set<ValueId> outputs(body.outputs().begin(), body.outputs().end());
  std::vector<std::size_t> root(nodes.size());
  // Readers come later in the body's order: walking it backwards, a node's reader has its root.
  for (std::size_t i = nodes.size(); i-- > 0;) {
    root[i] = i;
    const Node& n = nodes[i];
    if (!is_elementwise_op(n) || n.outputs.size() != 1 || outputs.count(n.outputs[0])) continue;
    const auto it = readers.find(n.outputs[0]);
    if (it == readers.end() || it->second.size() != 1) continue;
    const std::size_t r = it->second[0];
    const Node& reader = nodes[r];
    if (r <= i || !is_elementwise_op(reader) || static_shape(body, n.outputs[0]) != static_shape(body, reader.outputs[0])) continue;
    const std::vector<std::size_t> read = elementwise_operands(reader);
    bool operand = false;
    for (std::size_t k : read) operand = operand || reader.inputs[k] == n.outputs[0];
    if (operand) root[i] = root[r];
  }
  return root;
}

ElementwiseGroup elementwise_group_kernel(const Graph& body, const std::vector<std::size_t>& roots, std::size_t root) {
  const auto& nodes = body.nodes();
  std::map<ValueId, std::size_t> made_by;  // values the group computes inside, by node
  std::vector<std::size_t> members;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (roots[i] == root) {
      members.push_back(i);
      made_by[nodes[i].outputs[0]] = i;
    }
  ElementwiseGroup group;
  std::vector<Shape> shapes;
  for (std::size_t i : members)
    for (std::size_t k : elementwise_operands(nodes[i])) {
      const ValueId v = nodes[i].inputs[k];
      if ((made_by.count(v) && made_by[v] != root) ||
          std::find(group.inputs.begin(), group.inputs.end(), v) != group.inputs.end())
        continue;
      group.inputs.push_back(v);
      shapes.push_back(static_shape(body, v));
    }
  std::string name;
  for (std::size_t m = 0; m < members.size() && m < 4; ++m) name += (m ? "_" : "") + elementwise_kernel_name(nodes[members[m]].op_type);
  if (members.size() > 4) name += "_and" + std::to_string(members.size() - 4);
  const Node& last = nodes[root];
  group.printed = elementwise_kernel(name, static_shape(body, last.outputs[0]), shapes, [&](const std::vector<Expr>& loaded) {
    std::function<Expr(ValueId)> value = [&](ValueId v) -> Expr {
      const auto made = made_by.find(v);
      if (made == made_by.end() || made->second == root)
        return loaded[static_cast<std::size_t>(std::find(group.inputs.begin(), group.inputs.end(), v) - group.inputs.begin())];
      const Node& n = nodes[made->second];
      std::vector<Expr> args;
      for (std::size_t k : elementwise_operands(n)) args.push_back(value(n.inputs[k]));
      return elementwise_expr(n, body, args);
    };
    std::vector<Expr> args;
    for (std::size_t k : elementwise_operands(last)) args.push_back(value(last.inputs[k]));
    return elementwise_expr(last, body, args);
  });
  return group;
}

}  // namespace wpk::cuda
