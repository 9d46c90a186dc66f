#include "backends/cuda/generated_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/cuda/support.hpp"
#include "codegen/loop_ir.hpp"
#include "graph/fused_ops.hpp"
#include "wpk/error.hpp"

namespace wpk::cuda {

using namespace codegen;

ConvGeometry conv_geometry(const Node& n, const Graph& graph) {
  ConvGeometry g;
  g.x = static_shape(graph, n.inputs[0]);
  g.w = static_shape(graph, n.inputs[1]);
  g.y = static_shape(graph, n.outputs[0]);
  g.groups = n.attr_int("group", 1);
  const std::size_t spatial = g.x.size() - 2;
  g.pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  g.pads.resize(spatial);
  g.strides = n.attr_ints("strides", std::vector<std::int64_t>(spatial, 1));
  g.dilations = n.attr_ints("dilations", std::vector<std::int64_t>(spatial, 1));
  return g;
}

ConvEpilogue conv_epilogue(const Node& n) {
  const bool fused = n.op_type == "FusedConv";
  ConvEpilogue e;
  e.bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
  e.residual = fused && n.inputs.size() > 3 && n.inputs[3] != kNoValue;
  e.activation = fused ? n.attr_string("activation", "") : "";
  e.params = n.attr_floats("activation_params");
  return e;
}

std::string conv_signature(const ConvGeometry& g, const ConvEpilogue& e) {
  std::string s = "conv";
  for (const Shape* sh : {&g.x, &g.w})
    for (std::int64_t d : *sh) s += "_" + std::to_string(d);
  for (const auto* v : {&g.pads, &g.strides, &g.dilations})
    for (std::int64_t d : *v) s += "_" + std::to_string(d);
  s += "_g" + std::to_string(g.groups) + (e.bias ? "b" : "") + (e.residual ? "z" : "") + e.activation;
  for (float p : e.params) s += "_" + std::to_string(p);
  return s;
}

namespace {

std::int64_t power_of_two_cover(std::int64_t extent) {
  std::int64_t p = 1;
  while (p < extent) p *= 2;
  return p;
}

// The tiles a schedule really has (clipped to the extents): rows (output channels, or a
// product's rows) by columns, each thread regs_r x regs_c of them.
struct Tiles {
  std::int64_t tile_r, tile_c, regs_r, regs_c, threads_r, threads_c;
  std::int64_t threads_y = 1;  // a convolution's output rows per block, a thread each
  std::int64_t threads() const { return threads_r * threads_c * threads_y; }
};
Tiles clipped_tiles(std::int64_t rows, std::int64_t cols, std::int64_t threads_r, std::int64_t regs_r, std::int64_t threads_c,
                    std::int64_t regs_c) {
  Tiles t;
  t.tile_r = std::min(threads_r * regs_r, rows);
  t.tile_c = std::min(threads_c * regs_c, cols);
  t.regs_r = std::min(regs_r, t.tile_r);
  t.regs_c = std::min(regs_c, t.tile_c);
  t.threads_r = (t.tile_r + t.regs_r - 1) / t.regs_r;
  t.threads_c = (t.tile_c + t.regs_c - 1) / t.regs_c;
  return t;
}

// A warp's loop iteration: the x (column) threads vary fastest, then the y (output row) threads;
// a line per distinct row the warp holds for the row operand, the column span of each output row
// for the other.
search::GpuLoop tile_loop(const Tiles& t, double steps, std::int64_t column_stride) {
  const std::int64_t lanes_c = std::min<std::int64_t>(t.threads_c, 32);
  const std::int64_t lanes_y = std::max<std::int64_t>(1, std::min<std::int64_t>(t.threads_y, 32 / lanes_c));
  const std::int64_t lanes_r = std::max<std::int64_t>(1, std::min<std::int64_t>(t.threads_r, 32 / (lanes_c * lanes_y)));
  const double span = static_cast<double>(lanes_c * t.regs_c * column_stride) * 4.0;
  search::GpuLoop loop;
  loop.steps = steps;
  loop.fma = static_cast<double>(t.regs_r * t.regs_c);
  loop.cache_lines = static_cast<double>(t.regs_r * lanes_r) +
                     static_cast<double>(t.regs_c * lanes_y) * std::max(1.0, std::ceil(span / 128.0));
  return loop;
}

bool tiles_worth_trying(std::int64_t rows, std::int64_t cols, std::int64_t threads_r, std::int64_t regs_r, std::int64_t threads_c,
                        std::int64_t regs_c) {
  if (threads_r * regs_r > power_of_two_cover(rows) || threads_c * regs_c > power_of_two_cover(cols)) return false;
  const std::int64_t threads = threads_r * threads_c;
  const std::int64_t most = std::min<std::int64_t>(32, power_of_two_cover(rows) * power_of_two_cover(cols) / (regs_r * regs_c));
  return threads <= kMaxCudaThreads && threads >= most && regs_r * regs_c <= 32;
}

Tiles conv_tiles(const ConvGeometry& g, const CudaConvConfig& c) {
  Tiles t = clipped_tiles(g.w[0] / g.groups, g.y[3], c.threads_oc, c.regs_oc, c.threads_x, c.regs_x);
  t.threads_y = std::min(c.threads_y, g.y[2]);
  return t;
}

Tiles product_tiles(const ProductGeometry& g, const CudaProductConfig& c) {
  return clipped_tiles(g.m, g.n, c.threads_m, c.regs_m, c.threads_n, c.regs_n);
}

}  // namespace

std::string CudaConvConfig::describe() const {
  return "threads_oc=" + std::to_string(threads_oc) + ",regs_oc=" + std::to_string(regs_oc) +
         ",threads_x=" + std::to_string(threads_x) + ",regs_x=" + std::to_string(regs_x) + ",stage_ic=" + std::to_string(stage_ic) +
         ",threads_y=" + std::to_string(threads_y);
}

std::vector<search::Knob> cuda_conv_knobs() {
  return {{"threads_oc", {1, 2, 4, 8, 16, 32, 64}},
          {"regs_oc", {1, 2, 4, 8}},
          {"threads_x", {1, 2, 4, 8, 16, 32}},
          {"regs_x", {1, 2, 4}},
          {"stage_ic", {0, 1, 2, 4, 8, 16}},
          {"threads_y", {1, 2, 4, 8}}};
}

CudaConvConfig conv_config_at(const search::Space& space, const search::Point& p) {
  return {space.value(p, 0), space.value(p, 1), space.value(p, 2), space.value(p, 3), space.value(p, 4), space.value(p, 5)};
}

namespace {

// A staging step no longer than the reduction (a longer one would print the same kernel again).
bool stage_worth_trying(std::int64_t step, std::int64_t extent) { return step == 0 || step <= power_of_two_cover(extent); }

// The staged copy's share of a thread's reduction step: the block's tiles (floats) copied once per
// `steps` steps, a warp's part of them as cache lines plus the indexing of each element, and the
// tile reads from shared memory (mostly broadcasts, about four a cycle). Fitted to staged
// convolutions timed on an H200 (tests/unit/backends/data/gpu_conv_staged_trials_h200.txt).
void add_staging(search::GpuLoop& loop, const Tiles& t, std::int64_t shared_bytes, double steps, double stages) {
  const double warps = std::ceil(static_cast<double>(t.threads()) / 32.0);
  const double rounds = static_cast<double>(shared_bytes) / 4.0 / 32.0 / warps / steps;  // a warp's copy rounds per step
  constexpr double kIssuePerRound = 16;  // the element's index arithmetic and the shared store
  loop.cache_lines = rounds * (1 + kIssuePerRound);
  loop.shared_loads = 0.25 * static_cast<double>(t.regs_r + t.regs_c);
  loop.stages = stages;
}

}  // namespace

std::int64_t conv_shared_bytes(const ConvGeometry& g, const CudaConvConfig& c) {
  if (c.stage_ic == 0) return 0;
  const Tiles t = conv_tiles(g, c);
  const std::int64_t step = std::min(c.stage_ic, g.w[1]), kh = g.w[2], kw = g.w[3];
  const std::int64_t rows = g.strides[0] * (t.threads_y - 1) + (kh - 1) * g.dilations[0] + 1;
  const std::int64_t cols = g.strides[1] * (t.threads_c * t.regs_c - 1) + g.dilations[1] * (kw - 1) + 1;
  return 4 * step * (rows * cols + t.threads_r * t.regs_r * kh * kw);
}

bool cuda_conv_config_valid(const ConvGeometry& g, const CudaConvConfig& c) {
  return tiles_worth_trying(g.w[0] / g.groups, g.y[3], c.threads_oc, c.regs_oc, c.threads_x, c.regs_x) &&
         c.threads_y >= 1 && c.threads_y <= power_of_two_cover(g.y[2]) && conv_tiles(g, c).threads() <= kMaxCudaThreads &&
         stage_worth_trying(c.stage_ic, g.w[1]) && conv_shared_bytes(g, c) <= codegen::kMaxSharedBytes;
}

search::GpuLoop conv_loop(const ConvGeometry& g, const CudaConvConfig& c) {
  const Tiles t = conv_tiles(g, c);
  search::GpuLoop loop = tile_loop(t, static_cast<double>(g.w[1] * g.w[2] * g.w[3]), g.strides[1]);
  if (c.stage_ic > 0)
    add_staging(loop, t, conv_shared_bytes(g, c), static_cast<double>(std::min(c.stage_ic, g.w[1]) * g.w[2] * g.w[3]),
                std::ceil(static_cast<double>(g.w[1]) / static_cast<double>(std::min(c.stage_ic, g.w[1]))));
  return loop;
}

search::GpuLaunch conv_launch(const ConvGeometry& g, const CudaConvConfig& c, int registers) {
  const Tiles t = conv_tiles(g, c);
  search::GpuLaunch l;
  l.threads = t.threads();
  l.blocks = g.y[0] * g.groups * ((g.w[0] / g.groups + t.tile_r - 1) / t.tile_r) * ((g.y[2] + t.threads_y - 1) / t.threads_y) *
             ((g.y[3] + t.tile_c - 1) / t.tile_c);
  l.registers = registers;
  l.shared_bytes = conv_shared_bytes(g, c);
  return l;
}

namespace {
int estimated_registers(std::int64_t regs_r, std::int64_t regs_c) { return static_cast<int>(24 + regs_r * regs_c + regs_r + regs_c); }
}  // namespace

int estimated_conv_registers(const CudaConvConfig& c) { return estimated_registers(c.regs_oc, c.regs_x); }
int estimated_product_registers(const CudaProductConfig& c) { return estimated_registers(c.regs_m, c.regs_n); }

double predict_conv_seconds(const search::GpuSpec& gpu, const ConvGeometry& g, const CudaConvConfig& c, int registers) {
  return search::predict_gpu_seconds(gpu, conv_launch(g, c, registers), conv_loop(g, c));
}

namespace {

// The depthwise convolution `dw` with its bias and activation as an element-wise compute of its
// output, viewed as a convolution's input [N, 1, C, H, W]: each element sums its KH x KW taps,
// written out.
Compute depthwise_producer(const ConvGeometry& dw, const ConvEpilogue& e) {
  const std::int64_t n = dw.x[0], ch = dw.x[1], oh = dw.y[2], ow = dw.y[3], kh = dw.w[2], kw = dw.w[3];
  Var pn = var("dn", n), pg = var("dg", 1), pc = var("dc", ch), py = var("dy", oh), px = var("dx", ow);
  Buffer xin = buffer("dw_x", {n, ch, dw.x[2], dw.x[3]}), wd = buffer("dw_w", {ch, kh, kw});
  std::vector<Buffer> inputs = {xin, wd};
  Expr sum = constant(0.0f);
  if (e.bias) {
    inputs.push_back(buffer("dw_bias", {ch}));
    sum = load(inputs.back(), {pc});
  }
  for (std::int64_t ky = 0; ky < kh; ++ky)
    for (std::int64_t kx = 0; kx < kw; ++kx) {
      const Affine iy = Affine(py) * dw.strides[0] + (ky * dw.dilations[0] - dw.pads[0]);
      const Affine ix = Affine(px) * dw.strides[1] + (kx * dw.dilations[1] - dw.pads[1]);
      sum = sum + load_or_zero(xin, {pn, pc, iy, ix}) * load(wd, {pc, ky, kx});
    }
  return compute("depthwise", buffer("x", {n, 1, ch, oh, ow}), {pn, pg, pc, py, px}, {},
                 activation_expr(e.activation, e.params, sum), nullptr, inputs);
}

PrintedCudaKernel conv_kernel_with(const ConvGeometry& g, const CudaConvConfig& c, bool bias, bool residual,
                                   const std::string& activation, const std::vector<float>& params, const Compute* producer,
                                   const std::string& symbol_prefix) {
  const std::int64_t n = g.x[0], groups = g.groups, icg = g.x[1] / groups, h = g.x[2], w = g.x[3];
  const std::int64_t ocg = g.w[0] / groups, kh = g.w[2], kw = g.w[3], oh = g.y[2], ow = g.y[3];
  Var vn = var("n", n), vg = var("g", groups), oc = var("oc", ocg), oy = var("oy", oh), ox = var("ox", ow);
  Var ic = var("ic", icg), ky = var("ky", kh), kx = var("kx", kw);
  // The channel dims split by group: the same bytes as [N, C, H, W] and [O, C / groups, KH, KW].
  Buffer x = buffer("x", {n, groups, icg, h, w}), wt = buffer("w", {groups, ocg, icg, kh, kw});
  const Affine iy = Affine(oy) * g.strides[0] + Affine(ky) * g.dilations[0] - g.pads[0];
  const Affine ix = Affine(ox) * g.strides[1] + Affine(kx) * g.dilations[1] - g.pads[1];
  std::vector<Buffer> inputs = {x, wt};
  Expr epilogue = acc();
  if (bias) {
    inputs.push_back(buffer("bias", {groups, ocg}));
    epilogue = epilogue + load(inputs.back(), {vg, oc});
  }
  if (residual) {
    inputs.push_back(buffer("z", {n, groups, ocg, oh, ow}));
    epilogue = epilogue + load(inputs.back(), {vn, vg, oc, oy, ox});
  }
  epilogue = activation_expr(activation, params, epilogue);
  const Compute conv = compute("conv", buffer("y", {n, groups, ocg, oh, ow}), {vn, vg, oc, oy, ox}, {ic, ky, kx},
                               load_or_zero(x, {vn, vg, ic, iy, ix}) * load(wt, {vg, oc, ic, ky, kx}), epilogue, inputs);
  Schedule s(conv);
  const Tiles t = conv_tiles(g, c);
  const auto [oc_o, oc_i] = s.split(oc, t.tile_r);
  const auto [oc_t, oc_r] = s.split(oc_i, t.regs_r);
  const auto [ox_o, ox_i] = s.split(ox, t.tile_c);
  const auto [ox_t, ox_r] = s.split(ox_i, t.regs_c);
  const auto [oy_o, oy_t] = s.split(oy, t.threads_y);
  if (c.stage_ic > 0) {
    const auto [ic_o, ic_i] = s.split(ic, std::min(c.stage_ic, icg));
    s.reorder({vn, vg, oc_o, oy_o, ox_o, oc_t, oy_t, ox_t, ic_o, ic_i, ky, kx, oc_r, ox_r});
    if (producer) s.stage_shared(x, ic_o, *producer);
    else s.stage_shared(x, ic_o);
    s.stage_shared(wt, ic_o);
  } else if (producer) {
    throw std::invalid_argument("a depth-first convolution needs stage_ic: its input exists only in shared memory");
  } else {
    s.reorder({vn, vg, oc_o, oy_o, ox_o, oc_t, oy_t, ox_t, ic, ky, kx, oc_r, ox_r});
  }
  for (const Var& b : {vn, vg, oc_o, oy_o, ox_o}) s.bind_block(b);
  s.bind_thread(oc_t);
  s.bind_thread(oy_t);
  s.bind_thread(ox_t);
  s.unroll(oc_r);
  s.unroll(ox_r);
  std::string symbol = symbol_prefix;
  for (std::int64_t d : {n, g.x[1], h, w, g.w[0], kh, kw, g.strides[0], groups}) symbol += "_" + std::to_string(d);
  symbol += "_" + std::to_string(c.threads_oc) + "x" + std::to_string(c.regs_oc) + "x" + std::to_string(c.threads_x) + "x" +
            std::to_string(c.regs_x) + (c.stage_ic ? "_s" + std::to_string(c.stage_ic) : "") +
            (t.threads_y > 1 ? "_y" + std::to_string(t.threads_y) : "");
  return print_cuda(lower(s), symbol, "cuda backend");
}

}  // namespace

PrintedCudaKernel conv_kernel(const ConvGeometry& g, const CudaConvConfig& c, bool bias, bool residual,
                              const std::string& activation, const std::vector<float>& params) {
  return conv_kernel_with(g, c, bias, residual, activation, params, nullptr, "wpk_conv");
}

bool depth_first_pair(const ConvGeometry& dw, const ConvEpilogue& dw_epilogue, const ConvGeometry& pw) {
  return dw.groups == dw.x[1] && dw.w[0] == dw.x[1] && !dw_epilogue.residual && activation_expressible(dw_epilogue.activation) &&
         pw.groups == 1 && pw.x == dw.y;
}

PrintedCudaKernel depth_first_conv_kernel(const ConvGeometry& dw, const ConvEpilogue& dw_epilogue, const ConvGeometry& pw,
                                          const CudaConvConfig& c, bool bias, bool residual, const std::string& activation,
                                          const std::vector<float>& params) {
  if (!depth_first_pair(dw, dw_epilogue, pw))
    throw std::invalid_argument("not a depthwise convolution read by a convolution of one group");
  const Compute producer = depthwise_producer(dw, dw_epilogue);
  std::string prefix = "wpk_dwconv_" + std::to_string(dw.w[2]) + "x" + std::to_string(dw.w[3]) + "s" + std::to_string(dw.strides[0]);
  return conv_kernel_with(pw, c, bias, residual, activation, params, &producer, prefix);
}

std::vector<DepthFirstNodes> depth_first_groups(const Graph& body) {
  const auto is_conv = [](const Node& n) {
    return (n.op_type == "Conv" && n.domain.empty()) || (n.op_type == "FusedConv" && n.domain == kWpkDomain);
  };
  std::map<ValueId, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < body.nodes().size(); ++i)
    for (ValueId v : body.nodes()[i].inputs) readers[v].push_back(i);
  std::vector<DepthFirstNodes> groups;
  std::vector<bool> taken(body.nodes().size(), false);  // a one-channel conv can look like either member
  for (std::size_t i = 0; i < body.nodes().size(); ++i) {
    const Node& dw = body.nodes()[i];
    if (taken[i] || !is_conv(dw) || dw.outputs.size() != 1) continue;
    const ValueId d = dw.outputs[0];
    const auto r = readers.find(d);
    if (r == readers.end() || r->second.size() != 1) continue;
    if (std::find(body.outputs().begin(), body.outputs().end(), d) != body.outputs().end()) continue;
    const std::size_t reader = r->second[0];
    const Node& pw = body.nodes()[reader];
    if (taken[reader] || !is_conv(pw) || pw.inputs[0] != d || std::count(pw.inputs.begin(), pw.inputs.end(), d) != 1) continue;
    const ConvGeometry dg = conv_geometry(dw, body), pg = conv_geometry(pw, body);
    if (dg.x.size() != 4 || pg.x.size() != 4 || !depth_first_pair(dg, conv_epilogue(dw), pg)) continue;
    groups.push_back({i, reader});
    taken[i] = taken[reader] = true;
  }
  return groups;
}

namespace {

PrintedCudaKernel row_kernel(const Compute& c, const Var& r, const std::string& symbol) {
  Schedule s(c);
  const auto [ro, ri] = s.split(r, std::min<std::int64_t>(128, r->extent));
  s.bind_block(ro);
  s.bind_thread(ri);
  return print_cuda(lower(s), symbol, "cuda backend");
}

}  // namespace

std::int64_t row_parts(std::int64_t cols) {
  std::int64_t parts = 1;
  for (std::int64_t p = 2; p <= 64 && p * p <= 2 * cols; p *= 2)
    if (cols % p == 0) parts = p;
  return parts;
}

PrintedCudaKernel row_partial_sums_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts, bool centred) {
  if (parts < 1 || cols % parts != 0) throw std::invalid_argument("row parts must divide the columns");
  Var r = var("r", rows), j = var("j", parts), i = var("i", cols / parts);
  Buffer x = buffer("x", {rows, cols}), mean = buffer("mean", {rows});
  Expr term = load(x, {r, Affine(i) * parts + j});
  std::vector<Buffer> inputs = {x};
  if (centred) {
    term = term - load(mean, {r});
    term = term * term;
    inputs.push_back(mean);
  }
  const Compute c = compute(centred ? "row_square_parts" : "row_parts", buffer("partial", {rows, parts}), {r, j}, {i}, term, acc(),
                            inputs);
  // Rows share a block when they have few parts (a thread each with one part), so that a block
  // still has a hundred or so threads.
  Schedule s(c);
  const auto [ro, ri] = s.split(r, std::min(rows, std::max<std::int64_t>(1, 128 / parts)));
  s.bind_block(ro);
  s.bind_thread(ri);
  s.bind_thread(j);
  return print_cuda(lower(s), std::string("wpk_row_") + (centred ? "square_" : "") + "parts_" + std::to_string(rows) + "_" +
                                  std::to_string(cols) + "_" + std::to_string(parts),
                    "cuda backend");
}

PrintedCudaKernel row_mean_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts) {
  Var r = var("r", rows), j = var("j", parts);
  Buffer partial = buffer("partial", {rows, parts});
  const Compute c = compute("row_mean", buffer("mean", {rows}), {r}, {j}, load(partial, {r, j}),
                            acc() * constant(1.0f / static_cast<float>(cols)), {partial});
  return row_kernel(c, r, "wpk_row_mean_" + std::to_string(rows) + "_" + std::to_string(cols) + "_" + std::to_string(parts));
}

PrintedCudaKernel row_rstd_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts, float epsilon) {
  Var r = var("r", rows), j = var("j", parts);
  Buffer partial = buffer("partial", {rows, parts});
  const Compute c = compute("row_rstd", buffer("rstd", {rows}), {r}, {j}, load(partial, {r, j}),
                            constant(1.0f) / unary(Op::Sqrt, acc() * constant(1.0f / static_cast<float>(cols)) + constant(epsilon)),
                            {partial});
  return row_kernel(c, r, "wpk_row_rstd_" + std::to_string(rows) + "_" + std::to_string(cols) + "_" + std::to_string(parts));
}

std::vector<search::Knob> cuda_product_knobs() {
  return {{"threads_m", {1, 2, 4, 8, 16, 32}},
          {"regs_m", {1, 2, 4, 8}},
          {"threads_n", {4, 8, 16, 32, 64}},
          {"regs_n", {1, 2, 4}},
          {"stage_k", {0, 4, 8, 16, 32}}};
}

CudaProductConfig product_config_at(const search::Space& space, const search::Point& p) {
  return {space.value(p, 0), space.value(p, 1), space.value(p, 2), space.value(p, 3), space.value(p, 4)};
}

std::int64_t product_shared_bytes(const ProductGeometry& g, const CudaProductConfig& c) {
  if (c.stage_k == 0) return 0;
  const Tiles t = product_tiles(g, c);
  return 4 * std::min(c.stage_k, g.k) * (t.threads_r * t.regs_r + t.threads_c * t.regs_c);
}

bool cuda_product_config_valid(const ProductGeometry& g, const CudaProductConfig& c) {
  return tiles_worth_trying(g.m, g.n, c.threads_m, c.regs_m, c.threads_n, c.regs_n) && stage_worth_trying(c.stage_k, g.k) &&
         product_shared_bytes(g, c) <= codegen::kMaxSharedBytes;
}

search::GpuLoop product_loop(const ProductGeometry& g, const CudaProductConfig& c) {
  const Tiles t = product_tiles(g, c);
  search::GpuLoop loop = tile_loop(t, static_cast<double>(g.k), 1);
  if (c.stage_k > 0)
    add_staging(loop, t, product_shared_bytes(g, c), static_cast<double>(std::min(c.stage_k, g.k)),
                std::ceil(static_cast<double>(g.k) / static_cast<double>(std::min(c.stage_k, g.k))));
  return loop;
}

search::GpuLaunch product_launch(const ProductGeometry& g, const CudaProductConfig& c, int registers) {
  const Tiles t = product_tiles(g, c);
  search::GpuLaunch l;
  l.threads = t.threads_r * t.threads_c;
  l.blocks = g.batch * ((g.m + t.tile_r - 1) / t.tile_r) * ((g.n + t.tile_c - 1) / t.tile_c);
  l.registers = registers;
  l.shared_bytes = product_shared_bytes(g, c);
  return l;
}

PrintedCudaKernel product_kernel(const ProductGeometry& g, const CudaProductConfig& c, bool bias, bool residual,
                                 const std::string& activation, const std::vector<float>& params) {
  Var b = var("b", g.batch), i = var("i", g.m), j = var("j", g.n), k = var("k", g.k);
  Buffer a = buffer("a", {g.batch, g.m, g.k});
  Buffer bm = g.b_batched ? buffer("bm", {g.batch, g.k, g.n}) : buffer("bm", {g.k, g.n});
  std::vector<Buffer> inputs = {a, bm};
  Expr epilogue = acc();
  if (bias) {
    inputs.push_back(buffer("bias", {g.n}));
    epilogue = epilogue + load(inputs.back(), {j});
  }
  if (residual) {
    inputs.push_back(buffer("z", {g.batch, g.m, g.n}));
    epilogue = epilogue + load(inputs.back(), {b, i, j});
  }
  epilogue = activation_expr(activation, params, epilogue);
  const Expr b_value = g.b_batched ? load(bm, {b, k, j}) : load(bm, {k, j});
  const Compute product = compute("matmul", buffer("y", {g.batch, g.m, g.n}), {b, i, j}, {k}, load(a, {b, i, k}) * b_value,
                                  epilogue, inputs);
  const Tiles t = product_tiles(g, c);
  Schedule s(product);
  const auto [io, i_rest] = s.split(i, t.tile_r);
  const auto [it, ir] = s.split(i_rest, t.regs_r);
  const auto [jo, j_rest] = s.split(j, t.tile_c);
  const auto [jt, jr] = s.split(j_rest, t.regs_c);
  if (c.stage_k > 0) {
    const auto [ko, ki] = s.split(k, std::min(c.stage_k, g.k));
    s.reorder({b, io, jo, it, jt, ko, ki, ir, jr});
    s.stage_shared(a, ko);
    s.stage_shared(bm, ko);
  } else {
    s.reorder({b, io, jo, it, jt, k, ir, jr});
  }
  for (const Var& v : {b, io, jo}) s.bind_block(v);
  s.bind_thread(it);
  s.bind_thread(jt);
  s.unroll(ir);
  s.unroll(jr);
  std::string symbol = "wpk_matmul_" + std::to_string(g.batch) + "_" + std::to_string(g.m) + "_" + std::to_string(g.n) + "_" +
                       std::to_string(g.k) + "_" + std::to_string(c.threads_m) + "x" + std::to_string(c.regs_m) + "x" +
                       std::to_string(c.threads_n) + "x" + std::to_string(c.regs_n) +
                       (c.stage_k ? "_s" + std::to_string(c.stage_k) : "");
  return print_cuda(lower(s), symbol, "cuda backend");
}

bool activation_expressible(const std::string& a) {
  return a.empty() || a == "Relu" || a == "Sigmoid" || a == "Tanh" || a == "SiLU" || a == "Gelu" || a == "GeluTanh" || a == "HardSwish" ||
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
  if (a == "Gelu") return constant(0.5f) * x * (constant(1.0f) + unary(Op::Erf, x * constant(0.70710678118654752f)));
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
