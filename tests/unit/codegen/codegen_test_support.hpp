#pragma once
// For the codegen tests: a direct interpreter of tensor expressions (the oracle generated code is
// compared with), the targets this CPU runs, and compiling a schedule into a callable kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpp_printer.hpp"
#include "codegen/jit/kernel_store.hpp"

namespace wpk::codegen::test {

using Values = std::map<const BufferNode*, std::vector<float>>;

inline float eval(const Expr& e, const std::map<const VarNode*, std::int64_t>& at, const Values& values, float acc_value) {
  auto index_of = [&](const Affine& a) {
    std::int64_t v = a.offset;
    for (const auto& t : a.terms) v += t.second * at.at(t.first.get());
    return v;
  };
  switch (e->op) {
    case Op::Const: return e->value;
    case Op::Acc: return acc_value;
    case Op::Load: {
      std::int64_t flat = 0;
      for (std::size_t d = 0; d < e->index.size(); ++d) {
        const std::int64_t i = index_of(e->index[d]);
        if (e->checked && e->buffer->dims[d] != kDynamic && (i < 0 || i >= e->buffer->dims[d])) return e->outside;
        flat = flat * e->buffer->dims[d] + i;
      }
      return values.at(e->buffer.get()).at(static_cast<std::size_t>(flat));
    }
    default: break;
  }
  const float a = eval(e->args[0], at, values, acc_value);
  const float b = e->args.size() > 1 ? eval(e->args[1], at, values, acc_value) : 0.0f;
  switch (e->op) {
    case Op::Neg: return -a;
    case Op::Abs: return std::fabs(a);
    case Op::Relu: return a > 0 ? a : 0.0f;
    case Op::Sqrt: return std::sqrt(a);
    case Op::Exp: return std::exp(a);
    case Op::Sigmoid: return 1.0f / (1.0f + std::exp(-a));
    case Op::Tanh: return std::tanh(a);
    case Op::Erf: return std::erf(a);
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Max: return a > b ? a : b;
    case Op::Min: return a < b ? a : b;
    default: return 0;
  }
}

// A variable's extent, `rows` for a dynamic one (the tests give every dynamic variable the same).
inline std::int64_t extent_of(const Var& v, std::int64_t rows) { return v->dynamic() ? rows : v->extent; }

// The compute evaluated point by point, sums in double; dynamic variables span `rows`.
inline std::vector<float> interpret(const Compute& c, const Values& values, std::int64_t rows = 0) {
  std::int64_t total = 1;
  for (const Var& v : c.axes) total *= extent_of(v, rows);
  std::vector<float> out(static_cast<std::size_t>(total));
  std::map<const VarNode*, std::int64_t> at;
  for (std::int64_t flat = 0; flat < total; ++flat) {
    std::int64_t rest = flat;
    for (std::size_t d = c.axes.size(); d-- > 0;) {
      at[c.axes[d].get()] = rest % extent_of(c.axes[d], rows);
      rest /= extent_of(c.axes[d], rows);
    }
    float value;
    if (c.reduce.empty()) {
      value = eval(c.body, at, values, 0);
    } else {
      std::int64_t points = 1;
      for (const Var& r : c.reduce) points *= extent_of(r, rows);
      const bool max = c.reducer == Reducer::Max;
      double sum = max ? -HUGE_VAL : 0;
      for (std::int64_t p = 0; p < points; ++p) {
        std::int64_t left = p;
        for (std::size_t d = c.reduce.size(); d-- > 0;) {
          at[c.reduce[d].get()] = left % extent_of(c.reduce[d], rows);
          left /= extent_of(c.reduce[d], rows);
        }
        const double term = eval(c.body, at, values, 0);
        sum = max ? std::max(sum, term) : sum + term;
      }
      value = c.epilogue ? eval(c.epilogue, at, values, static_cast<float>(sum)) : static_cast<float>(sum);
    }
    out[static_cast<std::size_t>(flat)] = value;
  }
  return out;
}

// Computes evaluated in order, each one's output a value the later ones read; the last's output.
inline std::vector<float> interpret(const std::vector<Compute>& stages, Values values, std::int64_t rows = 0) {
  for (const Compute& c : stages) values[c.output.get()] = interpret(c, values, rows);
  return values.at(stages.back().output.get());
}

inline std::vector<CpuTarget> runnable_targets() {
  std::vector<CpuTarget> t = {CpuTarget::Scalar};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) t.push_back(CpuTarget::Avx2);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    t.push_back(CpuTarget::Avx512);
  return t;
}

using Entry = void (*)(float* const*, const std::int64_t*, int);

// Prints, compiles (one store per test process, in a private folder) and loads.
inline std::shared_ptr<LoadedKernel> build(const Schedule& s, CpuTarget target, std::string* why = nullptr) {
  static KernelStore store("", find_host_compiler());
  const LoweredKernel lowered = lower(s);
  const PrintedKernel printed = print_cpp(lowered, target, "wpk_test_kernel", "codegen tests");
  KernelSource src{s.compute().name + "_" + target_name(target), printed.symbol, printed.prelude, printed.source,
                   target_flags(target), target_name(target), ""};
  Obtained got = store.obtain({src}, 1).front();
  if (why) *why = got.why;
  return got.kernel;
}

// A kernel of several stages (lower(std::vector<Schedule>)), printed, compiled and loaded.
inline std::shared_ptr<LoadedKernel> build(const std::vector<Schedule>& stages, CpuTarget target, std::string* why = nullptr) {
  static KernelStore store("", find_host_compiler());
  const LoweredKernel lowered = lower(stages);
  const PrintedKernel printed = print_cpp(lowered, target, "wpk_test_kernel", "codegen tests");
  KernelSource src{lowered.name + "_" + target_name(target), printed.symbol, printed.prelude, printed.source,
                   target_flags(target), target_name(target), ""};
  Obtained got = store.obtain({src}, 1).front();
  if (why) *why = got.why;
  return got.kernel;
}

// relu(bd[c] + the 3x3 depthwise taps of `in` at (n, c, y, x), pads 1): a depth-first group's
// producer, for inputs laid out NCHW or (nhwc) NHWC; `in`, `wd` [C, 3, 3] and `bd` [C] given.
inline Compute depthwise_relu_producer(const Buffer& in, const Buffer& wd, const Buffer& bd, bool nhwc) {
  const std::vector<std::int64_t>& dims = in->dims;
  const std::int64_t n = dims[0], c = nhwc ? dims[3] : dims[1], h = nhwc ? dims[1] : dims[2], w = nhwc ? dims[2] : dims[3];
  Var pn = var("pn", n), pc = var("pc", c), py = var("py", h), px = var("px", w);
  Expr sum = load(bd, {pc});
  for (std::int64_t ky = 0; ky < 3; ++ky)
    for (std::int64_t kx = 0; kx < 3; ++kx) {
      const Affine iy = Affine(py) + (ky - 1), ix = Affine(px) + (kx - 1);
      sum = sum + load_or_zero(in, nhwc ? std::vector<Affine>{pn, iy, ix, pc} : std::vector<Affine>{pn, pc, iy, ix}) *
                      load(wd, {pc, ky, kx});
    }
  return compute("depthwise", buffer("d", dims), nhwc ? std::vector<Var>{pn, py, px, pc} : std::vector<Var>{pn, pc, py, px}, {},
                 relu(sum), nullptr, {in, wd, bd});
}

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A dynamic first dimension counts `rows`.
inline std::size_t numel(const Buffer& b, std::int64_t rows = 0) {
  std::size_t n = 1;
  for (std::int64_t d : b->dims) n *= static_cast<std::size_t>(d == kDynamic ? rows : d);
  return n;
}

// Runs the compiled kernel on `values` (the compute's inputs), dynamic variables spanning `rows`,
// with guard floats after the output that must stay untouched; returns the output.
inline std::vector<float> run(const std::shared_ptr<LoadedKernel>& k, const Compute& c, Values values, int threads,
                              bool* guards_intact, std::int64_t rows = 0) {
  std::vector<float*> args;
  for (const Buffer& b : c.inputs) args.push_back(values.at(b.get()).data());
  const std::size_t n = numel(c.output, rows);
  std::vector<float> out(n + 64, 12345.0f);
  args.push_back(out.data());
  const std::vector<std::int64_t> extents(c.dynamic().size(), rows);
  reinterpret_cast<Entry>(k->entry)(args.data(), extents.data(), threads);
  *guards_intact = true;
  for (std::size_t i = n; i < out.size(); ++i) *guards_intact = *guards_intact && out[i] == 12345.0f;
  out.resize(n);
  return out;
}

}  // namespace wpk::codegen::test
