#include "backends/generated/pool_expr.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>

#include "backends/generated/conv_expr.hpp"
#include "backends/generated/kernel_support.hpp"
#include "backends/reference/conv_pool.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

// Windows past this many taps are left to the other backends: a hostile kernel_shape must not
// become a reduction of billions of steps in generated code.
constexpr std::int64_t kMaxTaps = std::int64_t{1} << 20;
// Nor may a hostile model's static dims or pads size the tables built at load: rows and columns
// in and out (the per-row and per-column tap counts) and an average's output positions (its
// divisors).
constexpr std::int64_t kMaxSide = std::int64_t{1} << 20;
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 24;

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// How many taps k in [0, kernel) put start + k * dilation in [lo, hi), by arithmetic (a kernel
// may be far wider than the input).
std::int64_t taps_within(std::int64_t start, std::int64_t dilation, std::int64_t kernel, std::int64_t lo, std::int64_t hi) {
  const std::int64_t first = std::max<std::int64_t>(0, -floor_div(start - lo, dilation));
  const std::int64_t last = std::min<std::int64_t>(kernel - 1, floor_div(hi - 1 - start, dilation));
  return std::max<std::int64_t>(0, last - first + 1);
}

class PoolKernel : public CompiledKernel {
 public:
  PoolKernel(std::string name, const Schedule& schedule, CpuTarget target, PoolSpec spec, std::string recipe)
      : CompiledKernel(std::move(name), schedule, target, std::move(recipe)), spec_(std::move(spec)) {}

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    const Tensor& x = ctx.input(0);
    check_f32(ctx, x, "the input");
    if (x.rank() != 4 || x.dim(1) != spec_.h || x.dim(2) != spec_.w || x.dim(3) != spec_.c)
      ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " is not the [N, " +
                                               std::to_string(spec_.h) + ", " + std::to_string(spec_.w) + ", " +
                                               std::to_string(spec_.c) + "] the kernel was generated for");
    std::int64_t batch = x.dim(0);
    Tensor& y = ctx.allocate_output(0, DType::Float32, {batch, spec_.oh, spec_.ow, spec_.c});
    if (y.numel() == 0) return;
    std::vector<float*> args = {const_cast<float*>(x.data<float>())};
    if (!spec_.max) args.push_back(const_cast<float*>(spec_.inverse_counts.data()));
    args.push_back(y.data<float>());
    code(args.data(), &batch, omp_get_max_threads());
  }

 private:
  PoolSpec spec_;
};

std::string recipe(const PoolSpec& s, const MatMulConfig& c, int lanes, CpuTarget target) {
  // The divisors are an argument of the kernel, not part of its source.
  return RecipeText()
      .add("kind", "pool")
      .add("op", s.op)
      .add_window(s)
      .add("config", c.text())
      .add("lanes", lanes)
      .add("target", target_name(target))
      .text();
}

}  // namespace

std::optional<PoolSpec> pool_spec(const Node& node, const Graph& graph, std::string& why) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  const bool global = node.op_type == "GlobalAveragePool";
  if (!onnx || (node.op_type != "MaxPool" && node.op_type != "AveragePool" && !global)) {
    why = "the gen backend does not write " + node.op_type;
    return std::nullopt;
  }
  if (node.attr_int("channels_last", 0) != 1) {
    why = "generated pools read NHWC (channels_last) activations only";
    return std::nullopt;
  }
  if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) {
    why = "generated pools write no Indices output";
    return std::nullopt;
  }
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (!is_float32(graph, node.inputs[0]) || !x.dims || x.dims->size() != 4) {
    why = "generated pools take a float32 NHWC input of rank 4";
    return std::nullopt;
  }
  for (std::size_t d = 1; d < 4; ++d)
    if (!(*x.dims)[d].is_static() || (*x.dims)[d].value < 1) {
      why = "generated pools need the input's rows, columns and channels at load";
      return std::nullopt;
    }
  if ((*x.dims)[1].value > kMaxSide || (*x.dims)[2].value > kMaxSide) {
    why = "generated pools take images of at most 2^20 rows and columns";
    return std::nullopt;
  }
  PoolSpec s;
  s.max = node.op_type == "MaxPool";
  s.op = s.max ? "maxpool_nhwc" : global ? "global_avgpool_nhwc" : "avgpool_nhwc";
  s.h = (*x.dims)[1].value;
  s.w = (*x.dims)[2].value;
  s.c = (*x.dims)[3].value;
  std::int64_t pad_bottom = 0, pad_right = 0;
  if (global) {
    s.kh = s.h;
    s.kw = s.w;
    s.oh = s.ow = 1;
  } else {
    // The window as the reference backend reads the attributes, so both agree on every shape.
    KernelContext ctx(node, {});
    reference::Window win;
    try {
      win = reference::conv_window(ctx, {1, s.c, s.h, s.w}, {}, node.attr_int("ceil_mode", 0) != 0);
    } catch (const Error& e) {
      why = e.what();
      return std::nullopt;
    }
    if (win.nd != 2) {
      why = "generated pools are 2-D";
      return std::nullopt;
    }
    s.kh = win.kernel[1];
    s.kw = win.kernel[2];
    s.sh = win.stride[1];
    s.sw = win.stride[2];
    s.dh = win.dilation[1];
    s.dw = win.dilation[2];
    s.pad_top = win.pad_begin[1];
    s.pad_left = win.pad_begin[2];
    pad_bottom = win.pad_end[1];
    pad_right = win.pad_end[2];
    s.oh = win.out[1];
    s.ow = win.out[2];
    if (std::max(s.pad_top, pad_bottom) >= (s.kh - 1) * s.dh + 1 || std::max(s.pad_left, pad_right) >= (s.kw - 1) * s.dw + 1) {
      why = "pads must be smaller than the (dilated) kernel";
      return std::nullopt;
    }
  }
  if (s.oh > kMaxSide || s.ow > kMaxSide) {
    why = "generated pools write outputs of at most 2^20 rows and columns";
    return std::nullopt;
  }
  if (s.kh > kMaxTaps / s.kw) {
    why = "generated pools take windows of at most 2^20 taps";
    return std::nullopt;
  }
  if (!s.max && s.oh > kMaxPositions / s.ow) {
    why = "generated average pools take outputs of at most 2^24 positions an image";
    return std::nullopt;
  }
  std::vector<std::int64_t> inside_h(static_cast<std::size_t>(s.oh)), inside_w(static_cast<std::size_t>(s.ow)),
      padded_h(inside_h.size()), padded_w(inside_w.size());
  for (std::int64_t y = 0; y < s.oh; ++y) {
    const std::int64_t start = y * s.sh - s.pad_top;
    inside_h[static_cast<std::size_t>(y)] = taps_within(start, s.dh, s.kh, 0, s.h);
    padded_h[static_cast<std::size_t>(y)] = taps_within(start, s.dh, s.kh, -s.pad_top, s.h + pad_bottom);
  }
  for (std::int64_t x = 0; x < s.ow; ++x) {
    const std::int64_t start = x * s.sw - s.pad_left;
    inside_w[static_cast<std::size_t>(x)] = taps_within(start, s.dw, s.kw, 0, s.w);
    padded_w[static_cast<std::size_t>(x)] = taps_within(start, s.dw, s.kw, -s.pad_left, s.w + pad_right);
  }
  if (s.max) {
    // A window wholly in the padding would be -inf here; the reference decides what it is.
    if (std::count(inside_h.begin(), inside_h.end(), 0) || std::count(inside_w.begin(), inside_w.end(), 0)) {
      why = "a window lies wholly in the padding";
      return std::nullopt;
    }
    return s;
  }
  const bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  const std::vector<std::int64_t>& count_h = include_pad ? padded_h : inside_h;
  const std::vector<std::int64_t>& count_w = include_pad ? padded_w : inside_w;
  s.inverse_counts.resize(static_cast<std::size_t>(s.oh * s.ow));
  for (std::size_t y = 0; y < count_h.size(); ++y)
    for (std::size_t x = 0; x < count_w.size(); ++x) {
      const std::int64_t count = count_h[y] * count_w[x];
      // An empty window averages to 0, as the reference has it.
      s.inverse_counts[y * count_w.size() + x] = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
    }
  return s;
}

Compute pool_compute(const PoolSpec& s) {
  Var n = dynamic_var("n"), y = var("y", s.oh), x = var("x", s.ow), c = var("c", s.c), ky = var("ky", s.kh), kx = var("kx", s.kw);
  Buffer in = buffer("x", {kDynamic, s.h, s.w, s.c});
  const Affine iy = Affine(y) * s.sh + Affine(ky) * s.dh - s.pad_top, ix = Affine(x) * s.sw + Affine(kx) * s.dw - s.pad_left;
  const Buffer out = buffer("y", {kDynamic, s.oh, s.ow, s.c});
  if (s.max)
    return compute("maxpool", out, {n, y, x, c}, {ky, kx}, load_or(in, {n, iy, ix, c}, -std::numeric_limits<float>::infinity()),
                   nullptr, {in}, Reducer::Max);
  const Buffer inverse = buffer("inverse_count", {s.oh, s.ow});
  return compute("avgpool", out, {n, y, x, c}, {ky, kx}, load_or_zero(in, {n, iy, ix, c}), acc() * load(inverse, {y, x}),
                 {in, inverse});
}

std::vector<MatMulConfig> pool_configs(const PoolSpec& spec, int vector_registers, int lanes) {
  std::vector<MatMulConfig> out;
  const std::int64_t channel_vectors = (spec.c + lanes - 1) / lanes;
  for (bool cols : {false, true})
    for (int rows : {4, 2, 1, 8})
      for (int vectors : {2, 1, 4})
        // One accumulator a vector of the tile, and a register for the loaded value; a tile
        // wider than the output only repeats a narrower one.
        if (rows * vectors + 1 <= vector_registers && (rows == 1 || rows <= spec.ow) &&
            (vectors == 1 || vectors <= channel_vectors))
          out.push_back({rows, vectors, cols});
  return out;
}

std::unique_ptr<Kernel> make_pool(const PoolSpec& spec, const MatMulConfig& config) {
  const CpuTarget target = widest_target();
  const int lanes = vector_lanes(target);
  return std::make_unique<PoolKernel>(kernel_name(spec.op, config, target), window_schedule(pool_compute(spec), config, lanes),
                                      target, spec, recipe(spec, config, lanes, target));
}

}  // namespace wpk::gen
