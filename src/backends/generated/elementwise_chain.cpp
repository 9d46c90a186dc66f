#include "backends/generated/elementwise_chain.hpp"

#include <omp.h>

#include <algorithm>
#include <map>

#include "backends/generated/epilogue.hpp"
#include "backends/generated/kernel_support.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

// The output's dims as the kernel walks them: size-1 dims dropped, and neighbours merged where
// every input either has both or broadcasts along both, so each input is row-major over the
// dims it has. present[j][i]: input i has dim j.
struct Walk {
  std::vector<std::int64_t> dims;
  std::vector<std::vector<bool>> present;
};

Walk walk_of(const ElementwiseChainSpec& s) {
  const std::size_t rank = s.output.size();
  Walk w;
  for (std::size_t d = 0; d < rank; ++d) {
    if (s.output[d] == 1) continue;
    std::vector<bool> has;
    for (const Shape& in : s.inputs) {
      const std::size_t lead = rank - in.size();
      has.push_back(d >= lead && in[d - lead] == s.output[d]);
    }
    if (!w.dims.empty() && w.present.back() == has) {
      w.dims.back() *= s.output[d];
      continue;
    }
    w.dims.push_back(s.output[d]);
    w.present.push_back(std::move(has));
  }
  if (w.dims.empty()) {  // a single element
    w.dims.push_back(1);
    w.present.emplace_back(s.inputs.size(), true);
  }
  return w;
}

Op op_of(const std::string& onnx) {
  static const std::map<std::string, Op> ops = {
      {"Add", Op::Add},     {"Sub", Op::Sub},         {"Mul", Op::Mul},   {"Div", Op::Div},   {"Max", Op::Max},
      {"Min", Op::Min},     {"Relu", Op::Relu},       {"Sigmoid", Op::Sigmoid}, {"Tanh", Op::Tanh}, {"Exp", Op::Exp},
      {"Sqrt", Op::Sqrt},   {"Neg", Op::Neg},         {"Abs", Op::Abs},   {"Erf", Op::Erf}};
  const auto it = ops.find(onnx);
  if (it == ops.end()) throw std::invalid_argument("no generated form of " + onnx);
  return it->second;
}

Compute chain_compute(const ElementwiseChainSpec& s) {
  const Walk w = walk_of(s);
  std::vector<Var> axes;
  for (std::size_t j = 0; j < w.dims.size(); ++j) axes.push_back(var("d" + std::to_string(j), w.dims[j]));
  std::vector<Buffer> inputs;
  std::vector<Expr> values;
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    std::vector<std::int64_t> dims;
    std::vector<Affine> index;
    for (std::size_t j = 0; j < w.dims.size(); ++j)
      if (w.present[j][i]) {
        dims.push_back(w.dims[j]);
        index.emplace_back(axes[j]);
      }
    if (dims.empty()) {  // one value for every point
      dims.push_back(1);
      index.emplace_back(0);
    }
    inputs.push_back(buffer("x" + std::to_string(i), dims));
    values.push_back(load(inputs.back(), index));
  }
  for (const ChainStep& step : s.steps) {
    const Op op = op_of(step.op);
    const Expr a = values[static_cast<std::size_t>(step.first)];
    values.push_back(is_unary(op) ? unary(op, a) : binary(op, a, values[static_cast<std::size_t>(step.second)]));
  }
  return compute("elementwise_chain", buffer("y", w.dims), axes, {}, values.back(), nullptr, inputs);
}

class ElementwiseChainKernel : public CompiledKernel {
 public:
  ElementwiseChainKernel(std::string name, const Schedule& schedule, CpuTarget target, ElementwiseChainSpec spec,
                         std::string recipe)
      : CompiledKernel(std::move(name), schedule, target, std::move(recipe)), spec_(std::move(spec)) {}

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    std::vector<float*> args;
    for (std::size_t i = 0; i < spec_.inputs.size(); ++i) {
      const Tensor& x = ctx.input(i);
      check_f32(ctx, x, "an input");
      if (x.shape() != spec_.inputs[i])
        ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " " + shape_to_string(x.shape()) + " is not the " +
                                                 shape_to_string(spec_.inputs[i]) + " the kernel was generated for");
      args.push_back(const_cast<float*>(x.data<float>()));
    }
    Tensor& y = ctx.allocate_output(0, DType::Float32, spec_.output);
    if (y.numel() == 0) return;
    args.push_back(y.data<float>());
    code(args.data(), nullptr, omp_get_max_threads());
  }

 private:
  ElementwiseChainSpec spec_;
};

std::string recipe(const ElementwiseChainSpec& s, const std::string& config, int lanes, CpuTarget target) {
  RecipeText r;
  r.add("kind", "elementwise_chain").add("output", shape_to_string(s.output));
  for (std::size_t i = 0; i < s.inputs.size(); ++i) r.add(("input" + std::to_string(i)).c_str(), shape_to_string(s.inputs[i]));
  for (const ChainStep& step : s.steps)
    r.add("step", step.op + " " + std::to_string(step.first) + " " + std::to_string(step.second));
  return r.add("config", config).add("lanes", lanes).add("target", target_name(target)).text();
}

}  // namespace

std::optional<ElementwiseChainSpec> elementwise_chain_spec(const Node& node, const Graph& graph, std::string& why) {
  if (node.domain != "com.wpk" || node.op_type != "ElementwiseChain") {
    why = "not an ElementwiseChain";
    return std::nullopt;
  }
  ElementwiseChainSpec spec;
  try {
    spec.steps = chain_steps(node);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  auto static_shape = [&](ValueId v) -> std::optional<Shape> {
    if (v == kNoValue || !is_float32(graph, v) || !graph.value(v).dims) return std::nullopt;
    Shape s;
    for (const Dim& d : *graph.value(v).dims) {
      if (!d.is_static()) return std::nullopt;
      s.push_back(d.value);
    }
    return s;
  };
  for (ValueId v : node.inputs) {
    std::optional<Shape> s = static_shape(v);
    if (!s) {
      why = "the chain's inputs must be float32 of static shapes";
      return std::nullopt;
    }
    spec.inputs.push_back(std::move(*s));
  }
  // The output is the broadcast of every input (the steps only broadcast).
  const std::optional<Shape> out = broadcast_shape(spec.inputs);
  if (!out) {
    why = "the chain's inputs do not broadcast";
    return std::nullopt;
  }
  spec.output = *out;
  return spec;
}

std::vector<std::string> elementwise_chain_configs() { return {"vectors=1", "vectors=2", "vectors=4"}; }

Schedule elementwise_chain_schedule(const ElementwiseChainSpec& spec, const std::string& config, int lanes) {
  const std::optional<int> vectors = vectors_config(config);
  if (!vectors) throw std::invalid_argument("no elementwise chain configuration '" + config + "'");
  Schedule s(chain_compute(spec));
  const std::vector<Var> axes = s.compute().axes;
  const Var last = axes.back();
  const auto [outer, inner] = s.split(last, std::min<std::int64_t>(std::int64_t{*vectors} * lanes, last->extent));
  s.vectorize(inner);
  s.parallel(axes.size() > 1 ? axes.front() : outer);
  return s;
}

std::string elementwise_chain_kernel_name(const std::string& config, CpuTarget target) {
  const std::optional<int> vectors = vectors_config(config);
  return std::string("f32_elementwise_chain__") + target_name(target) + "_v" + std::to_string(vectors ? *vectors : 0);
}

std::unique_ptr<Kernel> make_elementwise_chain(const ElementwiseChainSpec& spec, const std::string& config) {
  const CpuTarget target = widest_target();
  const int lanes = vector_lanes(target);
  return std::make_unique<ElementwiseChainKernel>(elementwise_chain_kernel_name(config, target),
                                                  elementwise_chain_schedule(spec, config, lanes), target, spec,
                                                  recipe(spec, config, lanes, target));
}

}  // namespace wpk::gen
