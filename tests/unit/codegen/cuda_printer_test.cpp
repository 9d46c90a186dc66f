// Printed CUDA kernels: checked against the interpreter by host emulation (cuda_emulation.hpp)
// at tile edges, and compiled by NVRTC for sm_80 and sm_90 within each architecture's limits.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "codegen/cuda_printer.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#include "cuda_emulation.hpp"

namespace wpk::codegen::test {
namespace {

struct Case {
  std::string name;
  Compute c;
  std::shared_ptr<Schedule> schedule;
};

// C = relu(A B + bias): blocks of (ti * ri) x (tj * rj) outputs, threads of ri x rj registers;
// with kt, A and B are staged in shared memory kt steps of k at a time.
Case product_case(std::int64_t m, std::int64_t n, std::int64_t kk, std::int64_t ti, std::int64_t ri, std::int64_t tj,
                  std::int64_t rj, std::int64_t kt = 0) {
  Var i = var("i", m), j = var("j", n), k = var("k", kk);
  Buffer a = buffer("a", {m, kk}), b = buffer("b", {kk, n}), bias = buffer("bias", {n});
  Case c{"matmul_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk),
         compute("matmul", buffer("c", {m, n}), {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), relu(acc() + load(bias, {j})),
                 {a, b, bias}),
         nullptr};
  auto s = std::make_shared<Schedule>(c.c);
  const auto [io, i_rest] = s->split(i, std::min(ti * ri, m));
  const auto [it, ir] = s->split(i_rest, std::min(ri, i_rest->extent));
  const auto [jo, j_rest] = s->split(j, std::min(tj * rj, n));
  const auto [jt, jr] = s->split(j_rest, std::min(rj, j_rest->extent));
  if (kt) {
    c.name += "_staged" + std::to_string(kt);
    const auto [ko, ki] = s->split(k, kt);
    s->reorder({io, jo, it, jt, ko, ki, ir, jr});
    s->stage_shared(a, ko);
    s->stage_shared(b, ko);
  } else {
    s->reorder({io, jo, it, jt, k, ir, jr});
  }
  s->bind_block(io);
  s->bind_block(jo);
  s->bind_thread(it);
  s->bind_thread(jt);
  s->unroll(ir);
  s->unroll(jr);
  c.schedule = s;
  return c;
}

// out = sigmoid(x * scale[q]) + tanh(y[r]) - |x| / 3, broadcasts over rows and columns.
Case elementwise_case(std::int64_t rows, std::int64_t cols, std::int64_t threads) {
  Var r = var("r", rows), q = var("q", cols);
  Buffer x = buffer("x", {rows, cols}), scale = buffer("scale", {1, cols}), y = buffer("y", {rows, 1});
  Expr value = sigmoid(load(x, {r, q}) * load(scale, {0, q})) + unary(Op::Tanh, load(y, {r, 0})) -
               unary(Op::Abs, load(x, {r, q})) / constant(3.0f);
  Case c{"chain_" + std::to_string(rows) + "x" + std::to_string(cols),
         compute("chain", buffer("out", {rows, cols}), {r, q}, {}, value, nullptr, {x, scale, y}), nullptr};
  auto s = std::make_shared<Schedule>(c.c);
  const auto [qo, qi] = s->split(q, std::min(threads, cols));
  s->bind_block(r);
  s->bind_block(qo);
  s->bind_thread(qi);
  c.schedule = s;
  return c;
}

// NCHW convolution, 3x3, pads 1: a block per (image, output channel), a thread per pixel.
Case conv_case(std::int64_t stride, bool depthwise) {
  const std::int64_t batch = 2, ch = 5, h = 7, w = 6, oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  Var n = var("n", batch), o = var("o", ch), y = var("y", oh), x = var("x", ow), ky = var("ky", 3), kx = var("kx", 3);
  Buffer in = buffer("in", {batch, ch, h, w});
  const Affine iy = Affine(y) * stride + Affine(ky) - 1, ix = Affine(x) * stride + Affine(kx) - 1;
  Case c;
  c.name = std::string(depthwise ? "depthwise" : "conv") + "_s" + std::to_string(stride);
  if (depthwise) {
    Buffer wt = buffer("w", {ch, 1, 3, 3});
    c.c = compute("depthwise", buffer("out", {batch, ch, oh, ow}), {n, o, y, x}, {ky, kx},
                  load_or_zero(in, {n, o, iy, ix}) * load(wt, {o, 0, ky, kx}), nullptr, {in, wt});
  } else {
    Var ic = var("ic", ch);
    Buffer wt = buffer("w", {ch, ch, 3, 3});
    c.c = compute("conv", buffer("out", {batch, ch, oh, ow}), {n, o, y, x}, {ic, ky, kx},
                  load_or_zero(in, {n, ic, iy, ix}) * load(wt, {o, ic, ky, kx}), nullptr, {in, wt});
  }
  auto s = std::make_shared<Schedule>(c.c);
  s->bind_block(n);
  s->bind_block(o);
  s->bind_thread(y);
  s->bind_thread(x);
  c.schedule = s;
  return c;
}

// NCHW convolution of 6 to 7 channels, 3x3, pads 1, with bias: a block per (image, tile of 4
// output channels, output row, tile of 4 columns), a thread per (channel, column) pair of 2 x 2
// registers; the input and weights staged in shared memory `ic_step` input channels at a time.
Case staged_conv_case(std::int64_t stride, std::int64_t ic_step) {
  const std::int64_t batch = 2, ci = 6, co = 7, h = 7, w = 9, oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  Var n = var("n", batch), o = var("o", co), y = var("y", oh), x = var("x", ow);
  Var ic = var("ic", ci), ky = var("ky", 3), kx = var("kx", 3);
  Buffer in = buffer("in", {batch, ci, h, w}), wt = buffer("w", {co, ci, 3, 3}), bias = buffer("bias", {co});
  const Affine iy = Affine(y) * stride + Affine(ky) - 1, ix = Affine(x) * stride + Affine(kx) - 1;
  Case c{"staged_conv_s" + std::to_string(stride) + "_ic" + std::to_string(ic_step),
         compute("conv", buffer("out", {batch, co, oh, ow}), {n, o, y, x}, {ic, ky, kx},
                 load_or_zero(in, {n, ic, iy, ix}) * load(wt, {o, ic, ky, kx}), acc() + load(bias, {o}), {in, wt, bias}),
         nullptr};
  auto s = std::make_shared<Schedule>(c.c);
  const auto [oo, o_rest] = s->split(o, 4);
  const auto [ot, orr] = s->split(o_rest, 2);
  const auto [xo, x_rest] = s->split(x, 4);
  const auto [xt, xr] = s->split(x_rest, 2);
  const auto [ico, ici] = s->split(ic, ic_step);
  s->reorder({n, oo, y, xo, ot, xt, ico, ici, ky, kx, orr, xr});
  for (const Var& v : {n, oo, y, xo}) s->bind_block(v);
  s->bind_thread(ot);
  s->bind_thread(xt);
  s->unroll(orr);
  s->unroll(xr);
  s->stage_shared(in, ico);
  s->stage_shared(wt, ico);
  c.schedule = s;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& shape : std::vector<std::array<std::int64_t, 3>>{{13, 37, 19}, {32, 64, 16}, {1, 5, 3}}) {
    all.push_back(product_case(shape[0], shape[1], shape[2], 4, 2, 8, 2));
    all.push_back(product_case(shape[0], shape[1], shape[2], 4, 2, 8, 2, std::min<std::int64_t>(8, shape[2])));
  }
  all.push_back(product_case(13, 37, 19, 3, 3, 5, 2, 5));  // tiles that split unevenly everywhere
  for (std::int64_t stride : {1, 2})
    for (std::int64_t step : {1, 4}) all.push_back(staged_conv_case(stride, step));
  all.push_back(elementwise_case(7, 45, 32));
  all.push_back(elementwise_case(3, 1000, 256));
  for (std::int64_t stride : {1, 2})
    for (bool dw : {false, true}) all.push_back(conv_case(stride, dw));
  return all;
}

TEST_CASE("printed CUDA kernels match the interpreter under host emulation, remainders included", "[codegen][cuda]") {
  for (const Case& c : cases()) {
    INFO(c.name << ": " << c.schedule->describe());
    const PrintedCudaKernel printed = print_cuda(lower(*c.schedule), "wpk_" + c.name, "codegen tests");
    CHECK(printed.source.rfind("// Generated by wpk codegen tests", 0) == 0);
    CHECK(printed.threads <= kMaxCudaThreads);
    std::string why;
    const auto kernel = build_emulated(printed, c.name, &why);
    INFO(why);
    REQUIRE(kernel);
    Values v;
    std::uint32_t seed = 3;
    for (const Buffer& b : c.c.inputs) v[b.get()] = random_values(numel(b), seed++);
    bool guards = false;
    const std::vector<float> got = run(kernel, c.c, v, 1, &guards);
    CHECK(guards);
    CHECK_FALSE(emulation_diverged(*kernel));
    const std::vector<float> want = interpret(c.c, v);
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i])))) ++bad;
    CHECK(bad == 0);
  }
}

TEST_CASE("a staged kernel copies its tiles between barriers, and the emulation catches threads that miss one", "[codegen][cuda]") {
  const Case staged = product_case(13, 37, 19, 4, 2, 8, 2, 8);
  const LoweredKernel lowered = lower(*staged.schedule);
  REQUIRE(lowered.shared.size() == 2);
  CHECK(lowered.shared[0]->dims == std::vector<std::int64_t>{8, 8});   // rows of A the block holds x k steps
  CHECK(lowered.shared[1]->dims == std::vector<std::int64_t>{8, 16});  // k steps x columns of B
  const std::string ir = dump(lowered.body);
  INFO(ir);
  CHECK(ir.find("barrier") != std::string::npos);
  CHECK(ir.find("shared t0_a[8][8]") != std::string::npos);
  const PrintedCudaKernel printed = print_cuda(lowered, "wpk_staged", "codegen tests");
  CHECK(printed.source.find("__shared__ float s_t0_a[64];") != std::string::npos);
  CHECK(printed.source.find("__syncthreads();") != std::string::npos);
  CHECK_THROWS_WITH(print_cpp(lowered, CpuTarget::Scalar, "k", "tests"), Catch::Contains("bound to CUDA") || Catch::Contains("barrier"));

  PrintedCudaKernel divergent;
  divergent.symbol = "wpk_divergent";
  divergent.threads = 4;
  divergent.args = 1;
  divergent.source = "extern \"C\" __global__ void wpk_divergent(float* a0) {\n"
                     "  if (threadIdx.x == 0) __syncthreads();\n  a0[threadIdx.x] = 1.0f;\n}\n";
  std::string why;
  const auto kernel = build_emulated(divergent, "divergent", &why);
  INFO(why);
  REQUIRE(kernel);
  std::vector<float> out(4, 0.0f);
  float* args[] = {out.data()};
  reinterpret_cast<void (*)(float* const*, const std::int64_t*, int)>(kernel->entry)(args, nullptr, 1);
  CHECK(emulation_diverged(*kernel));
  CHECK(std::isnan(out[0]));

  Var i = var("i", 4), k = var("k", 4);
  Buffer a = buffer("a", {4, 4});
  Schedule epilogue_read(compute("red", buffer("o", {4}), {i}, {k}, load(a, {i, k}), acc() + load(a, {i, 0}), {a}));
  epilogue_read.stage_shared(a, k);
  CHECK_THROWS_WITH(lower(epilogue_read), Catch::Contains("epilogue"));
  Schedule not_reduction(compute("red", buffer("o", {4}), {i}, {k}, load(a, {i, k}), nullptr, {a}));
  const auto [io, ii] = not_reduction.split(i, 2);
  not_reduction.bind_thread(ii);
  not_reduction.stage_shared(a, io);  // a CPU thread may stage at a spatial loop; a CUDA block not
  CHECK_THROWS_WITH(lower(not_reduction), Catch::Contains("a CUDA block stages at a reduction loop"));
  Var big_i = var("i", 128), big_k = var("k", 128);
  Buffer big = buffer("a", {128, 128});
  Schedule too_big(compute("red", buffer("o", {128}), {big_i}, {big_k}, load(big, {big_i, big_k}), nullptr, {big}));
  const auto [bo, bi] = too_big.split(big_k, 128);
  (void)bi;
  too_big.bind_thread(big_i);
  too_big.stage_shared(big, bo);
  CHECK_THROWS_WITH(lower(too_big), Catch::Contains("shared memory"));
}

// A depth-first group: a 3x3 depthwise convolution (pads 1, bias, ReLU) computed tile by tile
// in shared memory by the pointwise convolution that reads it, never stored.
struct DepthFirstCase {
  Compute depthwise, pointwise;
  std::shared_ptr<Schedule> schedule;
};
DepthFirstCase depth_first_case(std::int64_t ic_step) {
  const std::int64_t n = 2, c = 6, o = 7, h = 5, w = 9;
  DepthFirstCase k;
  k.depthwise = depthwise_relu_producer(buffer("in", {n, c, h, w}), buffer("wd", {c, 3, 3}), buffer("bd", {c}), false);
  const Buffer d = k.depthwise.output;
  Var vn = var("n", n), vo = var("o", o), vy = var("y", h), vx = var("x", w), vc = var("c", c);
  Buffer wp = buffer("wp", {o, c}), bp = buffer("bp", {o});
  k.pointwise = compute("pointwise", buffer("out", {n, o, h, w}), {vn, vo, vy, vx}, {vc}, load(d, {vn, vc, vy, vx}) * load(wp, {vo, vc}),
                        acc() + load(bp, {vo}), {d, wp, bp});
  auto s = std::make_shared<Schedule>(k.pointwise);
  const auto [oo, o_rest] = s->split(vo, 4);
  const auto [ot, orr] = s->split(o_rest, 2);
  const auto [xo, x_rest] = s->split(vx, 4);
  const auto [xt, xr] = s->split(x_rest, 2);
  const auto [yo, yt] = s->split(vy, 2);
  const auto [co, ci] = s->split(vc, ic_step);
  s->reorder({vn, oo, yo, xo, ot, yt, xt, co, ci, orr, xr});
  for (const Var& v : {vn, oo, yo, xo}) s->bind_block(v);
  for (const Var& v : {ot, yt, xt}) s->bind_thread(v);
  s->unroll(orr);
  s->unroll(xr);
  s->stage_shared(d, co, k.depthwise);
  s->stage_shared(wp, co);
  k.schedule = s;
  return k;
}

TEST_CASE("a depth-first group computes its producer in shared memory, under host emulation and NVRTC", "[codegen][cuda]") {
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::get(&why);
  for (std::int64_t step : {1, 4, 6}) {
    const DepthFirstCase k = depth_first_case(step);
    INFO(k.schedule->describe());
    const LoweredKernel lowered = lower(*k.schedule);
    REQUIRE(lowered.args.size() == 6);  // in, wd, bd (the producer's, in d's place), wp, bp, out
    CHECK(lowered.args[0]->name == "in");
    CHECK(lowered.args[3]->name == "wp");
    const PrintedCudaKernel printed = print_cuda(lowered, "wpk_depth_first_" + std::to_string(step), "codegen tests");
    INFO(printed.source);
    CHECK(printed.source.find("__syncthreads();") != std::string::npos);
    const auto kernel = build_emulated(printed, "depth_first_" + std::to_string(step), &why);
    INFO(why);
    REQUIRE(kernel);
    Values v;
    std::uint32_t seed = 11;
    for (const Buffer& b : k.depthwise.inputs) v[b.get()] = random_values(numel(b), seed++);
    for (const Buffer& b : k.pointwise.inputs)
      if (b->name != "d") v[b.get()] = random_values(numel(b), seed++);
    v[k.depthwise.output.get()] = interpret(k.depthwise, v);
    const std::vector<float> want = interpret(k.pointwise, v);
    std::vector<float> got(want.size(), 12345.0f);
    std::vector<float*> args;
    for (std::size_t a = 0; a + 1 < lowered.args.size(); ++a) args.push_back(v.at(lowered.args[a].get()).data());
    args.push_back(got.data());
    reinterpret_cast<Entry>(kernel->entry)(args.data(), nullptr, 1);
    CHECK_FALSE(emulation_diverged(*kernel));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i])))) ++bad;
    CHECK(bad == 0);
    if (!nvrtc) continue;
    const CompiledCubin cubin = nvrtc->compile(printed.source, printed.symbol, 90);
    CHECK(cubin.resources.registers > 0);
    CHECK(cubin_shared_bytes(cubin.cubin) <= cuda_arch_limits(90).shared_bytes_per_block);
  }
  const DepthFirstCase k = depth_first_case(2);
  Schedule bad(k.pointwise);
  const auto [co, ci] = bad.split(k.pointwise.reduce[0], 2);
  (void)ci;
  CHECK_THROWS_WITH(bad.stage_shared(k.pointwise.inputs[0], co, k.pointwise), Catch::Contains("element-wise"));
  // A producer whose axes are the consumer's own loops would name two things at once.
  Var i = var("i", 4), kk = var("k", 4);
  Buffer a = buffer("a", {4, 4}), src = buffer("src", {4, 4});
  Schedule shared_axes(compute("red", buffer("o", {4}), {i}, {kk}, load(a, {i, kk}), nullptr, {a}));
  CHECK_THROWS_WITH(shared_axes.stage_shared(a, kk, compute("make_a", a, {i, kk}, {}, load(src, {i, kk}), nullptr, {src})),
                    Catch::Contains("is a loop of this schedule"));
}

TEST_CASE("printed CUDA kernels compile with NVRTC for sm_80 and sm_90 within the architectures' limits", "[codegen][cuda]") {
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::get(&why);
  if (!nvrtc) {
    WARN("NVRTC is not on this machine, nothing compiled: " << why);
    return;
  }
  const std::vector<int> archs = nvrtc->architectures();
  for (int sm : {80, 90}) {
    if (std::find(archs.begin(), archs.end(), sm) == archs.end()) {
      WARN("NVRTC " << nvrtc->version() << " does not compile for sm_" << sm);
      continue;
    }
    const CudaArchLimits limits = cuda_arch_limits(sm);
    for (const Case& c : cases()) {
      INFO(c.name << " for sm_" << sm << ": " << c.schedule->describe());
      const PrintedCudaKernel printed = print_cuda(lower(*c.schedule), "wpk_" + c.name, "codegen tests");
      const CompiledCubin cubin = nvrtc->compile(printed.source, c.name, sm);
      INFO(cubin.log);
      CHECK(cubin.cubin.compare(0, 4, "\x7f" "ELF") == 0);
      REQUIRE(cubin.resources.registers > 0);  // ptxas's report was read
      CHECK(cubin_register_count(cubin.cubin) == cubin.resources.registers);  // and the cubin's notes agree
      // The cubin's figure includes the kilobyte sm_90 reserves; -1 from ptxas: none reported.
      CHECK(cubin_shared_bytes(cubin.cubin) >= std::max<std::int64_t>(0, cubin.resources.shared_bytes));
      CHECK(cubin_shared_bytes(cubin.cubin) <= std::max<std::int64_t>(0, cubin.resources.shared_bytes) + (sm >= 90 ? 1024 : 0));
      CHECK(cubin.resources.registers <= limits.registers_per_thread);
      CHECK(cubin.resources.registers * printed.threads <= limits.registers_per_block);
      CHECK(cubin.resources.shared_bytes <= limits.shared_bytes_per_block);
      CHECK(cubin.resources.spill_bytes <= 0);  // -1: this NVRTC did not report it
    }
  }
  CHECK_THROWS_WITH(nvrtc->compile("this is not CUDA", "broken", 90), Catch::Contains("broken") && Catch::Contains("NVRTC failed"));
}

TEST_CASE("the CUDA printer refuses what a CUDA launch cannot express, and the C++ printer bound loops", "[codegen][cuda]") {
  Case big = elementwise_case(4, 2048, 2048);  // 2048 threads per block
  CHECK_THROWS_WITH(print_cuda(lower(*big.schedule), "k", "tests"), Catch::Contains("threads per block"));
  CHECK_THROWS_WITH(print_cpp(lower(*elementwise_case(4, 64, 32).schedule), CpuTarget::Scalar, "k", "tests"),
                    Catch::Contains("bound to CUDA"));
  Var r = dynamic_var("r"), q = var("q", 8);
  Buffer x = buffer("x", {kDynamic, 8});
  Schedule dynamic(compute("dyn", buffer("o", {kDynamic, 8}), {r, q}, {}, load(x, {r, q}), nullptr, {x}));
  dynamic.bind_thread(q);
  CHECK_THROWS_WITH(print_cuda(lower(dynamic), "k", "tests"), Catch::Contains("dynamic"));
  Var r2 = var("r", 4);
  Buffer x2 = buffer("x", {4, 8});
  Schedule parallel(compute("par", buffer("o", {4, 8}), {r2, q}, {}, load(x2, {r2, q}), nullptr, {x2}));
  parallel.parallel(r2);
  CHECK_THROWS_WITH(print_cuda(lower(parallel), "k", "tests"), Catch::Contains("bind it to blocks"));
  Var i = var("i", 4), k = var("k", 4);
  Buffer a = buffer("a", {4, 4});
  Schedule inside(compute("red", buffer("o", {4}), {i}, {k}, load(a, {i, k}), nullptr, {a}));
  inside.reorder({k, i});
  inside.bind_thread(i);
  CHECK_THROWS_WITH(lower(inside), Catch::Contains("inside a reduction"));
}

}  // namespace
}  // namespace wpk::codegen::test
