#include "backends/generated/row_ops.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "backends/generated/kernel_support.hpp"
#include "backends/op_support.hpp"
#include "codegen/loop_ir.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

// The row's values in partial results of `width` lanes: lane l sums (or maximises) x[i, s * width
// + l] over the steps s, the lanes past the row's end reading `outside`.
struct Partial {
  Var step, lane;
  Affine column;
};
Partial partial(const std::string& tag, std::int64_t width, std::int64_t steps) {
  Partial p{var("s" + tag, steps), var("l" + tag, width), {}};
  p.column = Affine(p.step) * width + Affine(p.lane);
  return p;
}

// The row's max; its exponentials after subtracting it, kept on the thread's stack when the row
// fits there (each computed once), else computed again for the quotients; their sum's inverse.
std::vector<Compute> softmax_computes(std::int64_t n, std::int64_t width) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::int64_t steps = (n + width - 1) / width;
  Var i = dynamic_var("i"), j = var("j", n), je = var("je", n), r1 = var("r1", width), r2 = var("r2", width);
  Buffer x = buffer("x", {kDynamic, n}), y = buffer("y", {kDynamic, n});
  Buffer part_max = buffer("part_max", {kDynamic, width}), row_max = buffer("row_max", {kDynamic});
  Buffer exps = buffer("exps", {kDynamic, n});
  Buffer part_sum = buffer("part_sum", {kDynamic, width}), inv_sum = buffer("inv_sum", {kDynamic});
  const Partial m = partial("m", width, steps), e = partial("e", width, steps);
  std::vector<Compute> out = {
      compute("part_max", part_max, {i, m.lane}, {m.step}, load_or(x, {i, m.column}, -inf), nullptr, {x}, Reducer::Max),
      compute("row_max", row_max, {i}, {r1}, load(part_max, {i, r1}), nullptr, {part_max}, Reducer::Max)};
  const Expr inverse = constant(1.0f) / acc();
  if (n <= kMaxLocalFloats) {
    out.push_back(compute("exps", exps, {i, je}, {}, exp(load(x, {i, je}) - load(row_max, {i})), nullptr, {x, row_max}));
    out.push_back(compute("part_sum", part_sum, {i, e.lane}, {e.step}, load_or_zero(exps, {i, e.column}), nullptr, {exps}));
    out.push_back(compute("inv_sum", inv_sum, {i}, {r2}, load(part_sum, {i, r2}), inverse, {part_sum}));
    out.push_back(compute("softmax", y, {i, j}, {}, load(exps, {i, j}) * load(inv_sum, {i}), nullptr, {exps, inv_sum}));
    return out;
  }
  // exp(-inf - max) is 0: the lanes past the row add nothing to the sum.
  out.push_back(compute("part_sum", part_sum, {i, e.lane}, {e.step}, exp(load_or(x, {i, e.column}, -inf) - load(row_max, {i})),
                        nullptr, {x, row_max}));
  out.push_back(compute("inv_sum", inv_sum, {i}, {r2}, load(part_sum, {i, r2}), inverse, {part_sum}));
  out.push_back(compute("softmax", y, {i, j}, {}, exp(load(x, {i, j}) - load(row_max, {i})) * load(inv_sum, {i}), nullptr,
                        {x, row_max, inv_sum}));
  return out;
}

// The mean, then the squared deviations from it: over the whole vectors of the row in partial
// results, over the columns past them (the row's tail, which would add (0 - mean)^2 if read as
// 0) one by one.
std::vector<Compute> layernorm_computes(const RowOpSpec& s, std::int64_t width) {
  const std::int64_t n = s.n, whole = n / width, rest = n % width;
  Var i = dynamic_var("i"), j = var("j", n), r1 = var("r1", width);
  Buffer x = buffer("x", {kDynamic, n}), scale = buffer("scale", {n}), bias = buffer("bias", {n});
  Buffer part_sum = buffer("part_sum", {kDynamic, width}), mean = buffer("mean", {kDynamic});
  Buffer part_sq = buffer("part_sq", {kDynamic, width}), tail_sq = buffer("tail_sq", {kDynamic});
  Buffer inv_std = buffer("inv_std", {kDynamic});
  const Partial sum = partial("m", width, (n + width - 1) / width);
  std::vector<Compute> out = {
      compute("part_sum", part_sum, {i, sum.lane}, {sum.step}, load_or_zero(x, {i, sum.column}), nullptr, {x}),
      compute("mean", mean, {i}, {r1}, load(part_sum, {i, r1}), acc() * constant(1.0f / static_cast<float>(n)), {part_sum})};
  auto square = [](const Expr& d) { return d * d; };
  Expr sum_of_squares;
  std::vector<Buffer> squares_read;
  if (whole > 0) {
    const Partial dev = partial("v", width, whole);
    out.push_back(compute("part_sq", part_sq, {i, dev.lane}, {dev.step}, square(load(x, {i, dev.column}) - load(mean, {i})),
                          nullptr, {x, mean}));
    squares_read.push_back(part_sq);
  }
  if (rest > 0) {
    Var t = var("t", rest);
    out.push_back(compute("tail_sq", tail_sq, {i}, {t}, square(load(x, {i, Affine(t) + whole * width}) - load(mean, {i})),
                          nullptr, {x, mean}));
    squares_read.push_back(tail_sq);
  }
  const Expr variance_scale = constant(1.0f / static_cast<float>(n)), eps = constant(s.epsilon);
  if (whole > 0) {
    Var r2 = var("r2", width);
    const Expr total = rest > 0 ? acc() + load(tail_sq, {i}) : acc();
    out.push_back(compute("inv_std", inv_std, {i}, {r2}, load(part_sq, {i, r2}),
                          constant(1.0f) / unary(Op::Sqrt, total * variance_scale + eps), squares_read));
  } else {
    out.push_back(compute("inv_std", inv_std, {i}, {}, constant(1.0f) / unary(Op::Sqrt, load(tail_sq, {i}) * variance_scale + eps),
                          nullptr, squares_read));
  }
  Expr y = (load(x, {i, j}) - load(mean, {i})) * load(inv_std, {i}) * load(scale, {j});
  std::vector<Buffer> inputs = {x, mean, inv_std, scale};
  if (s.bias) {
    y = y + load(bias, {j});
    inputs.push_back(bias);
  }
  out.push_back(compute("layernorm", buffer("y", {kDynamic, n}), {i, j}, {}, y, nullptr, inputs));
  return out;
}

class RowOpKernel : public CompiledKernel {
 public:
  RowOpKernel(std::string name, std::vector<Schedule> stages, CpuTarget target, RowOpSpec spec, std::string recipe)
      : CompiledKernel(std::move(name), std::move(stages), target, std::move(recipe)), spec_(spec) {}

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    const Tensor& x = spec_.softmax ? ctx.input(0) : layernorm_input(ctx, spec_.n);
    check_f32(ctx, x, "the input");
    if (x.rank() < 1 || x.shape().back() != spec_.n)
      ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " does not have rows of the " +
                                               std::to_string(spec_.n) + " floats the kernel was generated for");
    std::int64_t rows = x.numel() / spec_.n;
    Tensor& y = ctx.allocate_output(0, DType::Float32, x.shape());
    if (rows == 0) return;
    std::vector<float*> args = {const_cast<float*>(x.data<float>())};
    if (!spec_.softmax) {
      args.push_back(const_cast<float*>(channel_input(ctx, 1, spec_.n, "scale")));
      if (spec_.bias) args.push_back(const_cast<float*>(channel_input(ctx, 2, spec_.n, "bias")));
    }
    args.push_back(y.data<float>());
    code(args.data(), &rows, omp_get_max_threads());
  }

 private:
  RowOpSpec spec_;
};

std::string recipe(const RowOpSpec& s, const std::string& config, int lanes, CpuTarget target) {
  RecipeText r;
  r.add("kind", s.softmax ? "softmax" : "layernorm").add("n", s.n);
  if (!s.softmax) {
    char eps[32];
    std::snprintf(eps, sizeof eps, "%a", static_cast<double>(s.epsilon));
    r.add("epsilon", std::string(eps)).add("bias", s.bias);
  }
  return r.add("config", config).add("lanes", lanes).add("target", target_name(target)).text();
}

}  // namespace

std::optional<RowOpSpec> row_op_spec(const Node& node, const Graph& graph, std::string& why) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  RowOpSpec s;
  s.softmax = node.op_type == "Softmax";
  if (!(s.softmax && onnx) && node.op_type != "LayerNormalization") {
    why = "the gen backend does not write " + node.op_type;
    return std::nullopt;
  }
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (!is_float32(graph, node.inputs[0]) || !x.dims || x.dims->empty() || !x.dims->back().is_static() ||
      x.dims->back().value < 1) {
    why = "generated row ops take a float32 input of known rank whose last dim is known at load";
    return std::nullopt;
  }
  const std::int64_t rank = static_cast<std::int64_t>(x.dims->size());
  s.n = x.dims->back().value;
  if (s.softmax) {
    // Before opset 13 Softmax flattens at `axis` (default 1): the last axis only then.
    const std::int64_t axis = node.attr_int("axis", graph.opset() >= 13 ? -1 : 1);
    if (axis != -1 && axis != rank - 1) {
      why = "generated softmax runs over the last axis only";
      return std::nullopt;
    }
    return s;
  }
  why = constant_layernorm_unsupported(node, graph);
  if (!why.empty()) return std::nullopt;
  if (graph.initializer(node.inputs[1])->numel() != s.n) {
    why = "the scale's length is not the row's";
    return std::nullopt;
  }
  s.epsilon = node.attr_float("epsilon", 1e-5f);
  s.bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
  return s;
}

std::vector<std::string> row_op_configs() { return {"vectors=2", "vectors=1", "vectors=4"}; }

std::vector<Schedule> row_op_stages(const RowOpSpec& spec, const std::string& config, int lanes) {
  const std::optional<int> vectors = vectors_config(config);
  if (!vectors) throw std::invalid_argument("no row op configuration '" + config + "'");
  const std::int64_t width = std::int64_t{*vectors} * lanes;
  std::vector<Schedule> stages;
  for (const Compute& c : spec.softmax ? softmax_computes(spec.n, width) : layernorm_computes(spec, width)) {
    Schedule s(c);
    s.parallel(c.axes[0]);
    if (c.reduce.empty() && c.axes.size() == 2) {  // element-wise rows: in vectors, the last one masked
      const auto [outer, inner] = s.split(c.axes[1], std::min<std::int64_t>(width, spec.n));
      s.vectorize(inner);
    } else if (c.axes.size() == 2) {  // partial results: the lanes in registers over the steps
      s.reorder({c.axes[0], c.reduce[0], c.axes[1]});
      s.vectorize(c.axes[1]);
    }
    stages.push_back(std::move(s));
  }
  return stages;
}

std::string row_op_kernel_name(const RowOpSpec& spec, const std::string& config, CpuTarget target) {
  const std::optional<int> vectors = vectors_config(config);
  return std::string("f32_") + (spec.softmax ? "softmax" : "layernorm") + "__" + target_name(target) + "_v" +
         std::to_string(vectors ? *vectors : 0);
}

std::unique_ptr<Kernel> make_row_op(const RowOpSpec& spec, const std::string& config) {
  const CpuTarget target = widest_target();
  const int lanes = vector_lanes(target);
  return std::make_unique<RowOpKernel>(row_op_kernel_name(spec, config, target), row_op_stages(spec, config, lanes), target,
                                       spec, recipe(spec, config, lanes, target));
}

}  // namespace wpk::gen
