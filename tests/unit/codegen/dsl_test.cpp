// Generated kernels against the tensor-expression interpreter: register-tiled products with
// epilogues and element-wise chains, on every target this CPU runs, at and around tile edges.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codegen/cpp_printer.hpp"
#include "codegen_test_support.hpp"

namespace wpk::codegen::test {
namespace {

struct Product {
  Compute c;
  Var i, j, k;
  Buffer a, b, bias, out;
};

Product product(std::int64_t m, std::int64_t n, std::int64_t kk) {
  Product p;
  p.i = var("i", m), p.j = var("j", n), p.k = var("k", kk);
  p.a = buffer("a", {m, kk}), p.b = buffer("b", {kk, n}), p.bias = buffer("bias", {n}), p.out = buffer("c", {m, n});
  p.c = compute("matmul", p.out, {p.i, p.j}, {p.k}, load(p.a, {p.i, p.k}) * load(p.b, {p.k, p.j}),
                relu(acc() + load(p.bias, {p.j})), {p.a, p.b, p.bias});
  return p;
}

Values values_for(const Compute& c, std::uint32_t seed) {
  Values v;
  for (const Buffer& b : c.inputs) v[b.get()] = random_values(numel(b), seed++);
  return v;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    const bool same_inf = std::isinf(got[i]) && got[i] == want[i];
    if (!both_nan && !same_inf && !(std::fabs(got[i] - want[i]) <= tolerance * (1 + std::fabs(want[i])))) {
      if (bad++ < 5) UNSCOPED_INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("a register-tiled product with bias and ReLU matches the interpreter on every target", "[codegen]") {
  // Extents below, at and above the tiles (4 rows x 2 vectors of the target, k in chunks of 8).
  // The threads share the row tiles, or the pairs of row and column tile (the two loops fused:
  // each iteration picks the short tiles' nest where either has a remainder).
  for (const auto& shape : std::vector<std::array<std::int64_t, 3>>{{13, 37, 19}, {8, 32, 16}, {1, 5, 3}, {4, 64, 40}}) {
    for (CpuTarget target : runnable_targets())
      for (bool fused : {false, true}) {
        Product p = product(shape[0], shape[1], shape[2]);
        Schedule s(p.c);
        const std::int64_t lanes = vector_lanes(target);
        const auto [io, ii] = s.split(p.i, std::min<std::int64_t>(4, shape[0]));
        const auto [jo, ji] = s.split(p.j, std::min<std::int64_t>(2 * lanes, shape[1]));
        const auto [ko, ki] = s.split(p.k, std::min<std::int64_t>(8, shape[2]));
        s.reorder({io, jo, ko, ki, ii, ji});
        if (fused) {
          const Var tiles = s.fuse(io, jo);
          CHECK(tiles->extent == io->extent * jo->extent);
          s.parallel(tiles);
        } else {
          s.parallel(io);
        }
        s.unroll(ii);
        s.vectorize(ji);
        INFO("target " << target_name(target) << ", " << shape[0] << "x" << shape[1] << "x" << shape[2] << ": "
                       << s.describe());
        if (fused) CHECK(dump(lower(s).body).find("parallel as i.o < ") != std::string::npos);
        std::string why;
        const auto kernel = build(s, target, &why);
        INFO(why);
        REQUIRE(kernel);
        const Values v = values_for(p.c, 7);
        bool guards = false;
        for (int threads : {1, 2}) {
          check_close(run(kernel, p.c, v, threads, &guards), interpret(p.c, v), 1e-5f);
          CHECK(guards);
        }
      }
  }
}

TEST_CASE("an element-wise chain with broadcasts and transcendental functions matches the interpreter", "[codegen]") {
  const std::int64_t rows = 7, cols = 45;
  Var r = var("r", rows), q = var("q", cols);
  Buffer x = buffer("x", {rows, cols}), scale = buffer("scale", {cols}), shift = buffer("shift", {rows, 1}),
         y = buffer("y", {rows, cols});
  const Expr v = load(x, {r, q}) * load(scale, {q}) + load(shift, {r, 0});
  const Expr body = sigmoid(v) * unary(Op::Tanh, v) + exp(min(v, constant(80.0f))) - max(unary(Op::Abs, v), constant(0.5f));
  const Compute c = compute("chain", y, {r, q}, {}, body, nullptr, {x, scale, shift});
  Values values;
  values[x.get()] = random_values(numel(x), 3, -12, 12);
  // Edges: NaN, infinities, zero and values where exp over- and underflows.
  const float edge[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 0.0f, -0.0f, 100.0f, -100.0f, 1e-6f, -3e-3f, 88.0f};
  for (std::size_t i = 0; i < sizeof edge / sizeof edge[0]; ++i) values[x.get()][i * 3] = edge[i];
  values[scale.get()] = random_values(numel(scale), 4, 0.5, 2);
  values[shift.get()] = random_values(numel(shift), 5);
  for (CpuTarget target : runnable_targets()) {
    Schedule s(c);
    const auto [qo, qi] = s.split(q, std::min<std::int64_t>(2 * vector_lanes(target), cols));
    s.parallel(r);
    s.vectorize(qi);
    (void)qo;
    INFO("target " << target_name(target) << ": " << s.describe());
    std::string why;
    const auto kernel = build(s, target, &why);
    INFO(why);
    REQUIRE(kernel);
    bool guards = false;
    check_close(run(kernel, c, values, 2, &guards), interpret(c, values), 2e-6f);
    CHECK(guards);
  }
}

// c (one axis i) vectorized at the target's width, built and run on one thread; its guards must
// have run.
std::vector<float> run_vectorized(const Compute& c, const Var& i, CpuTarget target, const Values& v) {
  Schedule s(c);
  const auto [io, ii] = s.split(i, vector_lanes(target));
  s.vectorize(ii);
  (void)io;
  const auto kernel = build(s, target);
  REQUIRE(kernel);
  bool guards = false;
  std::vector<float> out = run(kernel, c, v, 1, &guards);
  CHECK(guards);
  return out;
}

TEST_CASE("erf on vectors stays within 3e-7 of the library's, and exact GELU's form within its rounding", "[codegen]") {
  // The vector targets approximate erf (a rational-exponential fit); the interpreter calls std::erf.
  const std::int64_t n = 203;
  Var i = var("i", n);
  Buffer x = buffer("x", {n}), y = buffer("y", {n}), g = buffer("g", {n});
  const Expr v = load(x, {i});
  const Compute erf_c = compute("erf", y, {i}, {}, unary(Op::Erf, v), nullptr, {x});
  const Expr gelu = v * (constant(1.0f) + unary(Op::Erf, v / constant(1.41421354f))) * constant(0.5f);
  const Compute gelu_c = compute("gelu", g, {i}, {}, gelu, nullptr, {x});
  Values values;
  values[x.get()] = random_values(n, 8, -6, 6);
  const float edge[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-7f,
                        1e-3f, -0.4f, 0.5f, 0.9f, -2.0f, 3.5f, 9.0f, -30.0f};
  for (std::size_t k = 0; k < sizeof edge / sizeof edge[0]; ++k) values[x.get()][k * 7] = edge[k];
  for (CpuTarget target : runnable_targets())
    for (const Compute* c : {&erf_c, &gelu_c}) {
      INFO("target " << target_name(target) << ", " << c->name);
      check_close(run_vectorized(*c, i, target, values), interpret(*c, values), 3e-7f);
    }
  // Near 0 erf is about 1.13 x: relative error, not absolute, is what an Erf node's reader sees
  // (below |x| = 0.5, where the fit above would cancel).
  Values tiny;
  tiny[x.get()] = random_values(n, 9, -0.499, 0.499);
  const float small_edge[] = {1e-30f, -1e-20f, 1e-5f, -3e-4f, 0.01f, -0.1f, 0.49f, -0.499f};
  for (std::size_t k = 0; k < sizeof small_edge / sizeof small_edge[0]; ++k) tiny[x.get()][k * 5] = small_edge[k];
  for (CpuTarget target : runnable_targets()) {
    INFO("target " << target_name(target) << ", small arguments");
    const std::vector<float> got = run_vectorized(erf_c, i, target, tiny), want = interpret(erf_c, tiny);
    std::size_t bad = 0;
    for (std::size_t k = 0; k < got.size(); ++k)
      if (!(std::fabs(got[k] - want[k]) <= 4e-7f * std::fabs(want[k]))) {
        if (bad++ < 5) UNSCOPED_INFO("erf(" << tiny[x.get()][k] << "): " << got[k] << " vs " << want[k]);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("sigmoid on vectors stays within 3e-7 of the library's, and 0 and 1 where it saturates", "[codegen]") {
  // The vector targets compute e^-|x| with their own polynomial; the interpreter 1 / (1 + exp(-x)).
  const std::int64_t n = 301;
  Var i = var("i", n);
  Buffer x = buffer("x", {n}), y = buffer("y", {n});
  const Compute c = compute("sigmoid", y, {i}, {}, sigmoid(load(x, {i})), nullptr, {x});
  Values values;
  values[x.get()] = random_values(n, 10, -30, 30);
  const float edge[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), INFINITY,
                        -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-7f, 0.35f, -0.35f, 17.0f, -17.0f, 86.9f, -86.9f, 87.3f,
                        -87.3f, -87.4f, -88.5f, 88.8f, -88.8f, 100.0f, -100.0f, 1e30f, -1e30f};
  for (std::size_t k = 0; k < sizeof edge / sizeof edge[0]; ++k) values[x.get()][k * 11] = edge[k];
  for (CpuTarget target : runnable_targets()) {
    INFO("target " << target_name(target));
    const std::vector<float> got = run_vectorized(c, i, target, values), want = interpret(c, values);
    std::size_t bad = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
      const float in = values[x.get()][k];
      // Where the library's result is below float's normal range (x under -87.3) the vector
      // form gives 0: off by less than the smallest normal float.
      const bool close = std::fabs(got[k] - want[k]) <= 3e-7f * std::fabs(want[k]) + 1.2e-38f;
      const bool saturated = in < -88.8f ? got[k] == 0.0f : in > 87.3f ? got[k] == 1.0f : true;
      if (!(std::isnan(in) ? std::isnan(got[k]) : close && saturated && got[k] >= 0.0f && got[k] <= 1.0f)) {
        if (bad++ < 5) UNSCOPED_INFO("sigmoid(" << in << "): " << got[k] << " vs " << want[k]);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("strided loads in a vectorized loop are gathered", "[codegen]") {
  const std::int64_t n = 21, m = 6;
  Var i = var("i", n), j = var("j", m);
  Buffer x = buffer("x", {m, n}), y = buffer("y", {n, m});  // a transpose: x read with stride n
  const Compute c = compute("transpose", y, {i, j}, {}, load(x, {j, i}) * constant(2.0f), nullptr, {x});
  for (CpuTarget target : runnable_targets()) {
    Schedule s(c);
    s.vectorize(j);
    const auto kernel = build(s, target);
    REQUIRE(kernel);
    const Values v = {{x.get(), random_values(numel(x), 9)}};
    bool guards = false;
    check_close(run(kernel, c, v, 1, &guards), interpret(c, v), 0);
    CHECK(guards);
  }
}

TEST_CASE("a product over a dynamic number of rows runs every row count with one kernel", "[codegen]") {
  // Rows known only at run time: the row tile's remainders are chosen when the kernel runs.
  const std::int64_t n = 37, kk = 19;
  Var i = dynamic_var("i"), j = var("j", n), k = var("k", kk);
  Buffer a = buffer("a", {kDynamic, kk}), b = buffer("b", {kk, n}), bias = buffer("bias", {n}), out = buffer("c", {kDynamic, n});
  const Compute c = compute("rows", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), relu(acc() + load(bias, {j})), {a, b, bias});
  REQUIRE(c.dynamic().size() == 1);
  for (CpuTarget target : runnable_targets()) {
    Schedule s(c);
    const auto [io, ii] = s.split(i, 4);
    const auto [jo, ji] = s.split(j, std::min<std::int64_t>(2 * vector_lanes(target), n));
    s.reorder({io, jo, k, ii, ji});
    s.parallel(io);
    s.unroll(ii);
    s.vectorize(ji);
    INFO("target " << target_name(target) << ": " << s.describe());
    std::string why;
    const auto kernel = build(s, target, &why);
    INFO(why);
    REQUIRE(kernel);
    for (std::int64_t rows : {1, 3, 4, 5, 8, 11}) {
      INFO(rows << " rows");
      Values v;
      v[a.get()] = random_values(numel(a, rows), 21);
      v[b.get()] = random_values(numel(b), 22);
      v[bias.get()] = random_values(numel(bias), 23);
      // On one thread the parallel loop runs outside a parallel region, on two inside one.
      for (int threads : {1, 2}) {
        INFO(threads << " threads");
        bool guards = false;
        check_close(run(kernel, c, v, threads, &guards, rows), interpret(c, v, rows), 1e-5f);
        CHECK(guards);
      }
    }
  }
  Schedule s(c);
  s.unroll(i);
  CHECK_THROWS_WITH(lower(s), Catch::Contains("dynamic extent"));
  Buffer wide = buffer("w", {kDynamic, n});
  CHECK_THROWS_WITH(compute("bad", out, {i, j}, {}, load(wide, {j, j}), nullptr, {wide}), Catch::Contains("dynamic"));
}

// A product over a dynamic number of rows (its first input, A) whose one packed input is read
// packed, against the interpreter at 1, 4 and 8 rows on these thread counts: inputs random from
// `seed` on, in the compute's order.
void check_packed_product(const Schedule& s, CpuTarget target, std::uint32_t seed, const std::vector<int>& thread_counts) {
  const Compute& c = s.compute();
  REQUIRE(s.packs().size() == 1);
  std::string why;
  const auto kernel = build(s, target, &why);
  INFO(why);
  REQUIRE(kernel);
  for (std::int64_t rows : {1, 4, 8}) {
    Values v;
    std::uint32_t next = seed;
    for (const Buffer& b : c.inputs) v[b.get()] = random_values(b == c.inputs[0] ? numel(b, rows) : numel(b), next++);
    const std::vector<float> want = interpret(c, v, rows);
    const Buffer& packed = s.packs()[0].original;
    v[packed.get()] = pack_input(s.packs()[0], s, v[packed.get()].data());
    for (int threads : thread_counts) {
      bool guards = false;
      check_close(run(kernel, c, v, threads, &guards, rows), want, 1e-5f);
      CHECK(guards);
    }
  }
}

TEST_CASE("a product reading B packed in column panels matches the interpreter", "[codegen]") {
  // Panels of 2 vectors, the last one partial (37 columns), rows dynamic.
  const std::int64_t n = 37, kk = 19;
  Var i = dynamic_var("i"), j = var("j", n), k = var("k", kk);
  Buffer a = buffer("a", {kDynamic, kk}), b = buffer("b", {kk, n}), out = buffer("c", {kDynamic, n});
  const Compute c = compute("packed", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), nullptr, {a, b});
  for (CpuTarget target : runnable_targets()) {
    Schedule s(c);
    const auto [io, ii] = s.split(i, 3);
    const auto [jo, ji] = s.split(j, std::min<std::int64_t>(2 * vector_lanes(target), n));
    s.reorder({jo, io, k, ii, ji});
    s.parallel(jo);
    s.unroll(ii);
    s.vectorize(ji);
    s.pack(b, j);
    INFO("target " << target_name(target) << ": " << s.describe());
    REQUIRE(s.packs().size() == 1);
    CHECK(s.packs()[0].packed->dims == std::vector<std::int64_t>{(n + ji->extent - 1) / ji->extent, kk, ji->extent});
    check_packed_product(s, target, 31, {2});
  }
  Schedule s(c);
  CHECK_THROWS_WITH(s.pack(b, j), Catch::Contains("split it first"));
  s.split(j, 8);
  CHECK_THROWS_WITH(s.pack(a, j), Catch::Contains("dynamic dimension"));
  CHECK_THROWS_WITH(s.pack(out, j), Catch::Contains("not an input"));
  Var r = var("r", 4);
  Buffer a4 = buffer("a4", {4, kk}), out4 = buffer("c4", {4, n});
  Schedule s4(compute("static", out4, {r, j}, {k}, load(a4, {r, k}) * load(b, {k, j}), nullptr, {a4, b}));
  s4.split(j, 8);
  CHECK_THROWS_WITH(s4.pack(a4, j), Catch::Contains("must index one dimension"));
}

TEST_CASE("a product whose reduction blocks lie outside its tile loops keeps the partial sums in its output", "[codegen]") {
  // k in blocks outside the row and column loops (the parallel one inside them), B packed, rows
  // dynamic: the ReLU of the epilogue must meet the whole sum, once, after the last block; k's
  // extent below, at and above a block, with and without a remainder.
  const std::int64_t n = 37;
  for (std::int64_t kk : {19, 16, 5}) {
    Var i = dynamic_var("i"), j = var("j", n), k = var("k", kk);
    Buffer a = buffer("a", {kDynamic, kk}), b = buffer("b", {kk, n}), bias = buffer("bias", {n}), out = buffer("c", {kDynamic, n});
    const Compute c = compute("blocked", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), relu(acc() + load(bias, {j})),
                              {a, b, bias});
    for (CpuTarget target : runnable_targets()) {
      Schedule s(c);
      const auto [io, ii] = s.split(i, 3);
      const auto [jo, ji] = s.split(j, std::min<std::int64_t>(2 * vector_lanes(target), n));
      const auto [ko, ki] = s.split(k, std::min<std::int64_t>(8, kk));
      s.reorder({ko, jo, io, ki, ii, ji});
      s.parallel(jo);
      s.unroll(ii);
      s.vectorize(ji);
      s.pack(b, j);
      INFO("target " << target_name(target) << ", k " << kk << ": " << s.describe());
      check_packed_product(s, target, 41, {1, 2});
    }
  }
}

// How many times `what` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("padded NHWC convolutions, dense and depthwise, match the interpreter at the borders", "[codegen]") {
  // 3x3, pads 1, strides 1 and 2, a pixel tile of 3 (not dividing the 7 or 4 output columns),
  // channels a vector and a bit; the batch dynamic. At stride 1 the middle pixel tiles read no
  // padding and take a copy of the reduction without the per-read checks; at stride 2 no tile can.
  const std::int64_t h = 7, w = 7, c = 19, oc = 21;
  for (std::int64_t stride : {1, 2}) {
    const std::int64_t oh = (h + 2 - 3) / stride + 1, ow = (w + 2 - 3) / stride + 1;
    Var n = dynamic_var("n"), y = var("y", oh), x = var("x", ow), o = var("o", oc), ky = var("ky", 3), kx = var("kx", 3),
        ic = var("ic", c);
    Buffer in = buffer("in", {kDynamic, h, w, c}), wt = buffer("w", {oc, c, 3, 3}), dw = buffer("dw", {c, 1, 3, 3});
    const Affine iy = Affine(y) * stride + Affine(ky) - 1, ix = Affine(x) * stride + Affine(kx) - 1;
    const Compute dense = compute("conv", buffer("out", {kDynamic, oh, ow, oc}), {n, y, x, o}, {ky, kx, ic},
                                  load_or_zero(in, {n, iy, ix, ic}) * load(wt, {o, ic, ky, kx}), nullptr, {in, wt});
    Var ch = var("ch", c);
    const Compute depthwise = compute("depthwise", buffer("dout", {kDynamic, oh, ow, c}), {n, y, x, ch}, {ky, kx},
                                      load_or_zero(in, {n, iy, ix, ch}) * load(dw, {ch, 0, ky, kx}), nullptr, {in, dw});
    for (const Compute* conv : {&dense, &depthwise})
      for (CpuTarget target : runnable_targets()) {
        Schedule s(*conv);
        const Var& channels = conv->axes[3];
        const auto [xo, xi] = s.split(x, 3);
        const auto [co, ci] = s.split(channels, std::min<std::int64_t>(vector_lanes(target) * 2, channels->extent));
        std::vector<Var> order = {n, y, xo, co};
        for (const Var& r : conv->reduce) order.push_back(r);
        order.push_back(xi);
        order.push_back(ci);
        s.reorder(order);
        s.parallel(y);
        s.unroll(xi);
        s.vectorize(ci);
        s.pack(conv->inputs[1], channels);
        INFO(conv->name << ", stride " << stride << ", target " << target_name(target) << ": " << s.describe());
        const std::string ir = dump(lower(s).body);
        INFO(ir);
        CHECK((count_of(ir, "in[") > count_of(ir, "]?0")) == (stride == 1));
        std::string why;
        const auto kernel = build(s, target, &why);
        INFO(why);
        REQUIRE(kernel);
        for (std::int64_t batch : {1, 2}) {
          Values v;
          v[in.get()] = random_values(numel(in, batch), 41);
          v[conv->inputs[1].get()] = random_values(numel(conv->inputs[1]), 42);
          const std::vector<float> want = interpret(*conv, v, batch);
          v[conv->inputs[1].get()] = pack_input(s.packs()[0], s, v[conv->inputs[1].get()].data());
          bool guards = false;
          check_close(run(kernel, *conv, v, 2, &guards, batch), want, 1e-5f);
          CHECK(guards);
        }
      }
  }
}

TEST_CASE("a max reduction reads its padding as -inf and matches the interpreter at the borders", "[codegen]") {
  // A 3x3 max pool, pads 1, strides 1 and 2, over inputs that are all negative: padding read as 0
  // (a sum's) would win every border window. The tile of 3 pixels leaves remainders, the channels a
  // vector and a bit; the stride-1 middle tiles take the unchecked copy.
  const std::int64_t h = 7, w = 7, c = 19;
  for (std::int64_t stride : {1, 2}) {
    const std::int64_t oh = (h + 2 - 3) / stride + 1, ow = (w + 2 - 3) / stride + 1;
    Var n = dynamic_var("n"), y = var("y", oh), x = var("x", ow), ch = var("ch", c), ky = var("ky", 3), kx = var("kx", 3);
    Buffer in = buffer("in", {kDynamic, h, w, c});
    const Affine iy = Affine(y) * stride + Affine(ky) - 1, ix = Affine(x) * stride + Affine(kx) - 1;
    const Compute pool = compute("maxpool", buffer("out", {kDynamic, oh, ow, c}), {n, y, x, ch}, {ky, kx},
                                 load_or(in, {n, iy, ix, ch}, -std::numeric_limits<float>::infinity()), nullptr, {in},
                                 Reducer::Max);
    for (CpuTarget target : runnable_targets()) {
      Schedule s(pool);
      const auto [xo, xi] = s.split(x, 3);
      const auto [co, ci] = s.split(ch, std::min<std::int64_t>(vector_lanes(target) * 2, c));
      s.reorder({n, y, xo, co, ky, kx, xi, ci});
      s.parallel(y);
      s.unroll(xi);
      s.vectorize(ci);
      INFO("stride " << stride << ", target " << target_name(target) << ": " << s.describe());
      std::string why;
      const auto kernel = build(s, target, &why);
      INFO(why);
      REQUIRE(kernel);
      for (std::int64_t batch : {1, 3}) {
        Values v;
        v[in.get()] = random_values(numel(in, batch), 43, -2.0f, -1.0f);
        const std::vector<float> want = interpret(pool, v, batch);
        bool guards = false;
        const std::vector<float> got = run(kernel, pool, v, 2, &guards, batch);
        CHECK(got == want);  // a max picks an input: exact
        CHECK(guards);
        CHECK(*std::max_element(got.begin(), got.end()) < 0.0f);
      }
    }
  }
  // A staged tile holds zeros where it leaves its buffer: a -inf padding cannot be staged.
  Var y = var("y", 4), ky = var("ky", 3);
  Buffer in = buffer("in", {4});
  const Compute pool = compute("maxpool1d", buffer("out", {4}), {y}, {ky},
                               load_or(in, {Affine(y) + Affine(ky) - 1}, -std::numeric_limits<float>::infinity()), nullptr,
                               {in}, Reducer::Max);
  Schedule s(pool);
  s.stage_shared(in, y);
  CHECK_THROWS_WITH(lower(s), Catch::Contains("a staged tile holds 0 there"));
}

// Softmax over rows of n floats as five computes in one kernel: per row the max in vectors of
// partial maxima (the lanes past the row read -inf), their max, the sum of exponentials the same
// way, and the quotients; the row's intermediates live on the thread's stack.
std::vector<Compute> softmax_stages(std::int64_t n, std::int64_t width) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::int64_t steps = (n + width - 1) / width;
  Var i = dynamic_var("i");
  Buffer x = buffer("x", {kDynamic, n});
  Buffer part_max = buffer("part_max", {kDynamic, width}), row_max = buffer("row_max", {kDynamic});
  Buffer part_sum = buffer("part_sum", {kDynamic, width}), row_sum = buffer("row_sum", {kDynamic});
  Var l1 = var("l1", width), s1 = var("s1", steps), r1 = var("r1", width);
  Var l2 = var("l2", width), s2 = var("s2", steps), r2 = var("r2", width), j = var("j", n);
  return {compute("part_max", part_max, {i, l1}, {s1}, load_or(x, {i, Affine(s1) * width + Affine(l1)}, -inf), nullptr, {x},
                  Reducer::Max),
          compute("row_max", row_max, {i}, {r1}, load(part_max, {i, r1}), nullptr, {part_max}, Reducer::Max),
          compute("part_sum", part_sum, {i, l2}, {s2},
                  exp(load_or(x, {i, Affine(s2) * width + Affine(l2)}, -inf) - load(row_max, {i})), nullptr, {x, row_max}),
          compute("row_sum", row_sum, {i}, {r2}, load(part_sum, {i, r2}), nullptr, {part_sum}),
          compute("softmax", buffer("y", {kDynamic, n}), {i, j}, {}, exp(load(x, {i, j}) - load(row_max, {i})) / load(row_sum, {i}),
                  nullptr, {x, row_max, row_sum})};
}

TEST_CASE("a kernel of several computes runs them per row with the intermediates on the stack", "[codegen]") {
  for (CpuTarget target : runnable_targets())
    for (std::int64_t n : {1, 5, 8, 13, 37}) {
      const int lanes = vector_lanes(target);
      const std::vector<Compute> stages = softmax_stages(n, 2 * lanes);
      std::vector<Schedule> schedules;
      for (const Compute& c : stages) {
        Schedule s(c);
        s.parallel(c.axes[0]);
        if (c.reduce.empty()) {  // the quotients: vectors along the row, the last one masked
          const auto [jo, ji] = s.split(c.axes[1], std::min<std::int64_t>(lanes, n));
          s.vectorize(ji);
        } else if (c.axes.size() == 2) {  // partial results: one lane of the width each
          s.reorder({c.axes[0], c.reduce[0], c.axes[1]});
          s.vectorize(c.axes[1]);
        }
        schedules.push_back(std::move(s));
      }
      const LoweredKernel lowered = lower(schedules);
      INFO("n " << n << ", target " << target_name(target) << "\n" << dump(lowered.body));
      REQUIRE(lowered.args.size() == 2);  // x, y: the intermediates are not arguments
      std::string why;
      const auto kernel = build(schedules, target, &why);
      INFO(why);
      REQUIRE(kernel);
      for (std::int64_t rows : {1, 3, 7}) {
        Values v;
        v[stages[0].inputs[0].get()] = random_values(static_cast<std::size_t>(rows * n), 51, -4.0f, 4.0f);
        const std::vector<float> want = interpret(stages, v, rows);
        bool guards = false;
        std::vector<float*> args = {v[stages[0].inputs[0].get()].data()};
        std::vector<float> out(static_cast<std::size_t>(rows * n) + 64, 12345.0f);
        args.push_back(out.data());
        reinterpret_cast<Entry>(kernel->entry)(args.data(), &rows, 2);
        guards = std::all_of(out.begin() + rows * n, out.end(), [](float f) { return f == 12345.0f; });
        out.resize(static_cast<std::size_t>(rows * n));
        check_close(out, want, 1e-5f);
        CHECK(guards);
      }
    }
}

TEST_CASE("a kernel of several computes refuses stages that do not share their loop or their rows", "[codegen]") {
  const std::vector<Compute> stages = softmax_stages(13, 8);
  auto scheduled = [&](std::vector<Compute> cs) {
    std::vector<Schedule> out;
    for (const Compute& c : cs) out.emplace_back(c);
    return out;
  };
  // Stages out of order: the quotients read the max before it is written.
  CHECK_THROWS_WITH(lower(scheduled({stages[4], stages[0], stages[1], stages[2], stages[3]})),
                    Catch::Contains("writes only then"));
  // A stage whose first loop is not the shared one.
  std::vector<Schedule> swapped = scheduled(stages);
  swapped[2].reorder({swapped[2].compute().reduce[0], swapped[2].compute().axes[0], swapped[2].compute().axes[1]});
  CHECK_THROWS_WITH(lower(swapped), Catch::Contains("does not start with the loop"));
  // An intermediate nobody reads.
  CHECK_THROWS_WITH(lower(scheduled({stages[0], stages[3]})), Catch::Contains("is never read"));
  // An intermediate read at another row than the iteration's own.
  Var k = var("k", 4), m = var("m", 4);
  Buffer a = buffer("a", {4, 4}), mid = buffer("mid", {4, 4});
  const Compute first = compute("first", mid, {k, m}, {}, load(a, {k, m}), nullptr, {a});
  const Compute second = compute("second", buffer("b", {4, 4}), {k, m}, {}, load(mid, {m, k}), nullptr, {mid});
  CHECK_THROWS_WITH(lower(scheduled({first, second})), Catch::Contains("other than at the shared loop"));
}

// Runs a kernel of fixed extents on 2 threads with these inputs; returns its `count` outputs,
// checking that it wrote nothing past them.
std::vector<float> run_fixed(const LoadedKernel& kernel, std::vector<float*> args, std::size_t count) {
  std::vector<float> got(count + 16, 12345.0f);
  args.push_back(got.data());
  reinterpret_cast<Entry>(kernel.entry)(args.data(), nullptr, 2);
  for (std::size_t i = count; i < got.size(); ++i) CHECK(got[i] == 12345.0f);
  got.resize(count);
  return got;
}

TEST_CASE("a depth-first group computes its depthwise producer tile by tile on the CPU", "[codegen]") {
  // NHWC: d = relu(depthwise 3x3 (pads 1) + bd), then out = d . wp over channels; d is computed
  // per tile of 4 pixels x `step` channels inside the product's reduction and never stored.
  const std::int64_t n = 2, h = 5, w = 7, c = 12, oc = 20;
  Buffer in = buffer("in", {n, h, w, c}), wd = buffer("wd", {c, 3, 3}), bd = buffer("bd", {c});
  const Compute depthwise = depthwise_relu_producer(in, wd, bd, true);
  const Buffer d = depthwise.output;
  Var vn = var("n", n), vy = var("y", h), vx = var("x", w), vo = var("o", oc), vc = var("c", c);
  Buffer wp = buffer("wp", {c, oc});
  const Compute pointwise = compute("pointwise", buffer("out", {n, h, w, oc}), {vn, vy, vx, vo}, {vc},
                                    load(d, {vn, vy, vx, vc}) * load(wp, {vc, vo}), nullptr, {d, wp});
  for (std::int64_t step : {5, 12})
    for (CpuTarget target : runnable_targets()) {
      Schedule s(pointwise);
      const auto [xo, xi] = s.split(vx, 4);
      const auto [oo, oi] = s.split(vo, std::min<std::int64_t>(vector_lanes(target), oc));
      const auto [co, ci] = s.split(vc, step);
      s.reorder({vn, vy, xo, oo, co, ci, xi, oi});
      s.parallel(vy);
      s.unroll(xi);
      s.vectorize(oi);
      s.stage_shared(d, co, depthwise);
      INFO("step " << step << ", target " << target_name(target) << ": " << s.describe());
      const LoweredKernel lowered = lower(s);
      CHECK(dump(lowered.body).find("barrier") == std::string::npos);  // one thread, its own tile
      std::string why;
      const auto kernel = build(s, target, &why);
      INFO(why);
      REQUIRE(kernel);
      Values v;
      std::uint32_t seed = 51;
      for (const Buffer& b : {in, wd, bd, wp}) v[b.get()] = random_values(numel(b), seed++);
      v[d.get()] = interpret(depthwise, v);
      const std::vector<float> want = interpret(pointwise, v);
      check_close(run_fixed(*kernel, {v[in.get()].data(), v[wd.get()].data(), v[bd.get()].data(), v[wp.get()].data()}, want.size()),
                  want, 1e-5f);
    }
}

// min(max(bd[c] + the 3x3 depthwise taps of NHWC `in` at stride `stride`, pads 1, 0), 6), the
// weights `wd` laid out [3, 3, C] so that a vector of channels reads them contiguously.
Compute strided_depthwise_producer(const Buffer& in, const Buffer& wd, const Buffer& bd, std::int64_t stride) {
  const std::int64_t n = in->dims[0], h = in->dims[1], w = in->dims[2], c = in->dims[3];
  const std::int64_t oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
  Var pn = var("pn", n), py = var("py", oh), px = var("px", ow), pc = var("pc", c);
  Expr sum = load(bd, {pc});
  for (std::int64_t ky = 0; ky < 3; ++ky)
    for (std::int64_t kx = 0; kx < 3; ++kx)
      sum = sum + load_or_zero(in, {pn, Affine(py) * stride + (ky - 1), Affine(px) * stride + (kx - 1), pc}) * load(wd, {ky, kx, pc});
  return compute("depthwise", buffer("d", {n, oh, ow, c}), {pn, py, px, pc}, {}, min(max(sum, constant(0)), constant(6)), nullptr,
                 {in, wd, bd});
}

TEST_CASE("a depth-first group staged per pixel tile computes its producer in vectors, remainders included", "[codegen]") {
  // The producer's tile is every channel of `rows` pixels, computed at the top of each pixel tile
  // and read by all the output channels' tiles; channel counts below, at and above the chunk the
  // tile is computed in (one vector, or 64 values), pixel tiles with and without a remainder,
  // strides 1 and 2. Images wide enough to have tiles away from the padding take those tiles
  // through a copy of the producer's nest without the per-read checks. Where the output channels
  // make whole tiles, the threads may also share parts of those tiles (each part computing the
  // producer again), the last part short or not. Or (the group kernels' way) they share the pairs
  // of row and pixel tile (the two loops fused), each pair's producer tile staged at the fused
  // loop; sharing rows alone (the stage at a serial loop) is checked on the strided shapes.
  struct Shape {
    std::int64_t h, w, c, oc, stride, rows;
    bool chunk_of_a_vector, interior_tiles;
  };
  for (const Shape& sh : {Shape{5, 7, 12, 20, 1, 4, true, false}, Shape{6, 9, 64, 9, 2, 3, false, false},
                          Shape{3, 8, 70, 24, 1, 4, false, false}, Shape{4, 5, 136, 16, 2, 6, false, false},
                          Shape{5, 6, 70, 24, 2, 4, true, false}, Shape{6, 14, 24, 16, 1, 4, true, true},
                          Shape{7, 17, 16, 8, 2, 3, false, true}, Shape{5, 9, 24, 48, 1, 4, true, true}})
    for (CpuTarget target : runnable_targets())
      for (const char* share : {"rows", "tiles", "parts"}) {
        const std::int64_t parts = share == std::string("parts") ? 2 : 1;
        const std::int64_t width = std::min<std::int64_t>(vector_lanes(target) * 2, sh.oc);
        if (parts > 1 && (sh.oc % width != 0 || sh.oc / width < parts)) continue;
        if (share == std::string("rows") && sh.stride == 1) continue;
        Buffer in = buffer("in", {1, sh.h, sh.w, sh.c}), wd = buffer("wd", {3, 3, sh.c}), bd = buffer("bd", {sh.c});
        const Compute depthwise = strided_depthwise_producer(in, wd, bd, sh.stride);
        const Buffer d = depthwise.output;
        const std::int64_t oh = d->dims[1], ow = d->dims[2];
        Var vn = var("n", 1), vy = var("y", oh), vx = var("x", ow), vo = var("o", sh.oc), vc = var("c", sh.c);
        Buffer wp = buffer("wp", {sh.c, sh.oc}), bp = buffer("bp", {sh.oc});
        const Compute pointwise = compute("pointwise", buffer("out", {1, oh, ow, sh.oc}), {vn, vy, vx, vo}, {vc},
                                          load(d, {vn, vy, vx, vc}) * load(wp, {vc, vo}), acc() + load(bp, {vo}), {d, wp, bp});
        Schedule s(pointwise);
        const auto [xo, xi] = s.split(vx, std::min(sh.rows, ow));
        const auto [oo, oi] = s.split(vo, width);
        if (parts > 1) {
          const auto [part, po] = s.split(oo, (oo->extent + parts - 1) / parts);
          s.reorder({vn, part, vy, xo, po, vc, xi, oi});
          s.parallel(part);
        } else {
          s.reorder({vn, vy, xo, oo, vc, xi, oi});
          s.parallel(vy);
        }
        Var staged_at = xo;
        if (share == std::string("tiles")) {
          staged_at = s.fuse(vy, xo);
          s.parallel(staged_at);
        }
        s.unroll(xi);
        s.vectorize(oi);
        s.pack(wp, vo);
        s.stage_shared(d, staged_at, depthwise, sh.chunk_of_a_vector ? vector_lanes(target) : 64);
        INFO("h " << sh.h << " w " << sh.w << " c " << sh.c << " oc " << sh.oc << " stride " << sh.stride << ", sharing " << share << ", chunk "
                  << s.stages()[0].chunk << ", target "
                  << target_name(target) << ": " << s.describe());
        const std::string ir = dump(lower(s).body);
        INFO(ir);
        CHECK(ir.find("vectorized") < ir.find("for c <"));  // the tile in vectors, before the product reads it
        CHECK((ir.find("parallel as y < ") != std::string::npos) == (share == std::string("tiles")));
        // Each tap reads a weight and a checked input; the copy for interior tiles reads its inputs unchecked.
        CHECK((count_of(ir, "wd[") > count_of(ir, "]?0")) == sh.interior_tiles);
        std::string why;
        const auto kernel = build(s, target, &why);
        INFO(why);
        REQUIRE(kernel);
        Values v;
        std::uint32_t seed = 71;
        for (const Buffer& b : {in, wd, bd, wp, bp}) v[b.get()] = random_values(numel(b), seed++, -2, 2);
        v[d.get()] = interpret(depthwise, v);
        const std::vector<float> want = interpret(pointwise, v);
        const std::vector<float> packed = pack_input(s.packs()[0], s, v[wp.get()].data());
        check_close(run_fixed(*kernel, {v[in.get()].data(), v[wd.get()].data(), v[bd.get()].data(), const_cast<float*>(packed.data()),
                                        v[bp.get()].data()},
                              want.size()),
                    want, 1e-5f);
      }
}

TEST_CASE("prefetching the next panel of packed B leaves a product's values as they were", "[codegen]") {
  // Rows dynamic (the prefetch spread over steps known at run time) and static, the panel loop
  // parallel outside the row tiles and serial inside them; one row tile with more panel lines
  // than steps takes several lines a step.
  const std::int64_t n = 37, kk = 19;
  Var j = var("j", n), k = var("k", kk);
  Buffer b = buffer("b", {kk, n});
  for (bool dynamic_rows : {true, false})
    for (bool panels_outside : {true, false})
      for (CpuTarget target : runnable_targets()) {
        Var i = dynamic_rows ? dynamic_var("i") : var("i", 5);
        Buffer a = buffer("a", {dynamic_rows ? kDynamic : 5, kk}), out = buffer("c", {dynamic_rows ? kDynamic : 5, n});
        const Compute c = compute("prefetched", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), nullptr, {a, b});
        Schedule s(c);
        const auto [io, ii] = s.split(i, 3);
        const auto [jo, ji] = s.split(j, std::min<std::int64_t>(vector_lanes(target), n));
        s.reorder(panels_outside ? std::vector<Var>{jo, io, k, ii, ji} : std::vector<Var>{io, jo, k, ii, ji});
        s.parallel(panels_outside ? jo : io);
        s.unroll(ii);
        s.vectorize(ji);
        s.pack(b, j);
        s.prefetch_next(b, jo);
        INFO("target " << target_name(target) << ": " << s.describe());
        const PrintedKernel printed = print_cpp(lower(s), target, "f", "unit test");
        CHECK(printed.source.find("__builtin_prefetch") != std::string::npos);
        std::string why;
        const auto kernel = build(s, target, &why);
        INFO(why);
        REQUIRE(kernel);
        for (std::int64_t rows : dynamic_rows ? std::vector<std::int64_t>{1, 4, 8} : std::vector<std::int64_t>{5}) {
          INFO(rows << " rows");
          Values v;
          v[a.get()] = random_values(numel(a, rows), 41);
          v[b.get()] = random_values(numel(b), 42);
          const std::vector<float> want = interpret(c, v, rows);
          v[b.get()] = pack_input(s.packs()[0], s, v[b.get()].data());
          for (int threads : {1, 2}) {
            bool guards = false;
            check_close(run(kernel, c, v, threads, &guards, rows), want, 1e-5f);
            CHECK(guards);
          }
        }
      }
  Var i = var("i", 4);
  Buffer a = buffer("a", {4, kk}), out = buffer("c", {4, n});
  const Compute c = compute("refused", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), nullptr, {a, b});
  Schedule s(c);
  const auto [jo, ji] = s.split(j, 8);
  CHECK_THROWS_WITH(s.prefetch_next(b, jo), Catch::Contains("pack it first"));
  s.pack(b, j);
  CHECK_THROWS_WITH(s.prefetch_next(b, i), Catch::Contains("not the outer loop"));
  s.prefetch_next(b, jo);
  CHECK_THROWS_WITH(s.prefetch_next(b, jo), Catch::Contains("prefetched already"));
  s.reorder({i, k, jo, ji});  // the panel loop in the register tile, inside the reduction
  s.unroll(jo);
  s.vectorize(ji);
  CHECK_THROWS_WITH(lower(s), Catch::Contains("outside the reductions"));
}

TEST_CASE("asking for the residual as each tile starts leaves a product's values as they were", "[codegen]") {
  // The epilogue adds z[i, j] after the reduction; every tile asks for the lines of its rows of z
  // before it (a run of a vector, or of a masked last vector, from each unrolled row). Rows
  // dynamic (remainder tiles of 1 and 2 rows), columns with a remainder; the packed B prefetched
  // too on one pass.
  const std::int64_t n = 37, kk = 19;
  Var j = var("j", n), k = var("k", kk), i = dynamic_var("i");
  Buffer a = buffer("a", {kDynamic, kk}), b = buffer("b", {kk, n}), z = buffer("z", {kDynamic, n}), out = buffer("c", {kDynamic, n});
  const Compute c = compute("residual", out, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), relu(acc() + load(z, {i, j})), {a, b, z});
  for (bool with_panels : {false, true})
    for (CpuTarget target : runnable_targets()) {
      Schedule s(c);
      const auto [io, ii] = s.split(i, 3);
      const auto [jo, ji] = s.split(j, std::min<std::int64_t>(2 * vector_lanes(target), n));
      s.reorder({io, jo, k, ii, ji});
      s.parallel(io);
      s.unroll(ii);
      s.vectorize(ji);
      s.pack(b, j);
      if (with_panels) s.prefetch_next(b, jo);
      s.prefetch_epilogue(z);
      INFO("target " << target_name(target) << ": " << s.describe());
      const std::string ir = dump(lower(s).body);
      INFO(ir);
      CHECK(ir.find("prefetch z[") != std::string::npos);
      CHECK(ir.find("prefetch z[") < ir.find("for k <"));  // before the reduction
      const PrintedKernel printed = print_cpp(lower(s), target, "f", "unit test");
      CHECK(printed.source.find("__builtin_prefetch(a2 + (") != std::string::npos);  // z is the third argument
      std::string why;
      const auto kernel = build(s, target, &why);
      INFO(why);
      REQUIRE(kernel);
      for (std::int64_t rows : {1, 4, 8}) {
        INFO(rows << " rows");
        Values v;
        v[a.get()] = random_values(numel(a, rows), 51);
        v[b.get()] = random_values(numel(b), 52);
        v[z.get()] = random_values(numel(z, rows), 53);
        const std::vector<float> want = interpret(c, v, rows);
        v[b.get()] = pack_input(s.packs()[0], s, v[b.get()].data());
        for (int threads : {1, 2}) {
          bool guards = false;
          check_close(run(kernel, c, v, threads, &guards, rows), want, 1e-5f);
          CHECK(guards);
        }
      }
    }
  Schedule s(c);
  CHECK_THROWS_WITH(s.prefetch_epilogue(a), Catch::Contains("not an input the epilogue reads"));
  CHECK_THROWS_WITH(s.prefetch_epilogue(buffer("elsewhere", {4})), Catch::Contains("not an input the epilogue reads"));
  s.prefetch_epilogue(z);
  CHECK_THROWS_WITH(s.prefetch_epilogue(z), Catch::Contains("already"));
  // Read by the reduction as well: it is there before the epilogue anyway.
  Var row = var("row", kk);
  Buffer square = buffer("square", {kk, kk}), zs = buffer("zs", {kk, n});
  const Compute both = compute("both", buffer("y", {kk, n}), {row, j}, {k}, load(square, {row, k}) * load(zs, {k, j}),
                               acc() + load(zs, {row, j}), {square, zs});
  Schedule sb(both);
  CHECK_THROWS_WITH(sb.prefetch_epilogue(zs), Catch::Contains("the reduction reads it too"));
  // The vectorized loop must walk the residual's last dimension, as each prefetch covers a run of it.
  Buffer zt = buffer("zt", {n, 8}), a8 = buffer("a8", {8, kk});
  Var r = var("r", 8);
  const Compute across = compute("across", buffer("y", {8, n}), {r, j}, {k}, load(a8, {r, k}) * load(b, {k, j}),
                                 acc() + load(zt, {j, r}), {a8, b, zt});
  Schedule st(across);
  const auto [jo, ji] = st.split(j, 8);
  st.reorder({r, jo, k, ji});
  st.vectorize(ji);
  st.prefetch_epilogue(zt);
  CHECK_THROWS_WITH(lower(st), Catch::Contains("must walk its last dimension contiguously"));
  // Not with the reduction in blocks outside the tiles: only the last block reads the residual.
  Schedule so(c);
  const auto [io, ii] = so.split(i, 3);
  const auto [jo2, ji2] = so.split(j, 8);
  const auto [ko, ki] = so.split(k, 8);
  so.reorder({ko, jo2, io, ki, ii, ji2});
  so.unroll(ii);
  so.vectorize(ji2);
  so.prefetch_epilogue(z);
  CHECK_THROWS_WITH(lower(so), Catch::Contains("neither stages nor prefetches"));
}

TEST_CASE("schedules that break a rule are refused with the rule named", "[codegen]") {
  Product p = product(8, 32, 16);
  {
    Schedule s(p.c);
    s.vectorize(p.k);
    s.reorder({p.i, p.j, p.k});
    CHECK_THROWS_WITH(lower(s), Catch::Contains("cannot be vectorized"));
  }
  {
    Schedule s(p.c);
    s.reorder({p.i, p.k, p.j});  // j in the register tile but a plain loop
    CHECK_THROWS_WITH(lower(s), Catch::Contains("neither unrolled nor vectorized"));
  }
  {
    Schedule s(p.c);
    s.vectorize(p.i);
    CHECK_THROWS_WITH(lower(s), Catch::Contains("only the innermost loop"));
  }
  {
    Schedule s(p.c);
    s.parallel(p.i);
    s.parallel(p.j);
    CHECK_THROWS_WITH(lower(s), Catch::Contains("one parallel loop"));
  }
  {
    Schedule s(p.c);
    const auto [io, ii] = s.split(p.i, 4);
    const auto [ko, ki] = s.split(p.k, 4);
    const auto [k2, k3] = s.split(ki, 2);
    s.reorder({ko, k2, io, p.j, k3, ii});  // two reduction loops outside the row loop
    s.unroll(ii);
    CHECK_THROWS_WITH(lower(s), Catch::Contains("must be contiguous"));
  }
  {
    Schedule s(p.c);
    const auto [ko, ki] = s.split(p.k, 4);
    const auto [jo, ji] = s.split(p.j, 8);
    s.reorder({ko, jo, p.i, ki, ji});
    s.vectorize(ji);
    s.pack(p.b, p.j);
    s.prefetch_next(p.b, jo);
    CHECK_THROWS_WITH(lower(s), Catch::Contains("neither stages nor prefetches"));
  }
  {
    Schedule s(p.c);
    CHECK_THROWS_WITH(s.split(p.i, 9), Catch::Contains("cannot split"));
    CHECK_THROWS_WITH(s.reorder({p.i, p.j}), Catch::Contains("reorder names 2 loops of 3"));
    // Splitting the outer loop of a split with a remainder would lose the short last tile.
    const auto [io, ii] = s.split(p.i, 3);
    CHECK_THROWS_WITH(s.split(io, 2), Catch::Contains("has a remainder"));
    // A fused loop's parts lie next to each other and keep one extent over its iterations.
    CHECK_THROWS_WITH(s.fuse(io, p.j), Catch::Contains("right inside"));
    CHECK_THROWS_WITH(s.fuse(io, ii), Catch::Contains("has a remainder"));
  }
  {
    Product small = product(2, 4, 3);
    Schedule s(small.c);
    CHECK_THROWS_WITH(s.fuse(small.j, small.k), Catch::Contains("only spatial loops"));
    const Var ij = s.fuse(small.i, small.j);
    CHECK(s.describe().rfind("i*j k", 0) == 0);
    CHECK_THROWS_WITH(s.split(ij, 2), Catch::Contains("fused loop"));
    CHECK_THROWS_WITH(s.split(small.i, 2), Catch::Contains("not a loop"));
    s.unroll(ij);
    CHECK_THROWS_WITH(lower(s), Catch::Contains("serial or parallel"));
  }
  Var i = var("i", 4);
  Buffer x = buffer("x", {4}), y = buffer("y", {4});
  CHECK_THROWS_WITH(compute("oob", y, {i}, {}, load(x, {Affine(i) + 1}), nullptr, {x}), Catch::Contains("leaves its dimension 0"));
  CHECK_THROWS_WITH(compute("missing", y, {i}, {}, load(x, {i}), nullptr, {}), Catch::Contains("not among the inputs"));
}

TEST_CASE("the first line of generated source says what generated it", "[codegen]") {
  Product p = product(4, 16, 4);
  Schedule s(p.c);
  const PrintedKernel k = print_cpp(lower(s), CpuTarget::Scalar, "f", "unit test");
  CHECK(k.source.rfind("// Generated by wpk unit test (src/codegen) from 'matmul', schedule: i j k, target scalar.", 0) == 0);
}

TEST_CASE("a small parallel loop opens a parallel region only for more than one thread", "[codegen]") {
  const auto printed = [](std::int64_t m, std::int64_t n, std::int64_t kk) {
    Product p = product(m, n, kk);
    Schedule s(p.c);
    s.parallel(p.i);
    return print_cpp(lower(s), CpuTarget::Scalar, "f", "unit test").source;
  };
  const std::string small = printed(8, 16, 4);
  const std::size_t branch = small.find("if (threads > 1) {"), region = small.find("#pragma omp parallel for"),
                    serial = small.find("} else {");
  REQUIRE(branch != std::string::npos);
  REQUIRE(region != std::string::npos);
  REQUIRE(serial != std::string::npos);
  CHECK(branch < region);
  CHECK(region < serial);
  CHECK(small.find("#pragma omp parallel", region + 1) == std::string::npos);
  // A large one: the region's cost is small beside its work, and one body keeps compiling cheap.
  const std::string large = printed(256, 256, 256);
  CHECK(large.find("#pragma omp parallel for") != std::string::npos);
  CHECK(large.find("if (threads > 1)") == std::string::npos);
}

}  // namespace
}  // namespace wpk::codegen::test
