#include "runtime/measurement.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/float_values.hpp"
#include "runtime/threads.hpp"

namespace wpk {
namespace {

constexpr int kTimedReps = 5;
constexpr double kRepBudgetUs = 50000;  // a slow candidate stops repeating after this much time

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double time_once(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, int threads,
                 std::vector<Tensor>& out) {
  std::vector<Tensor> previous = std::move(out);
  KernelContext ctx(node, inputs, [&previous](DType dtype, const Shape& shape) {
    for (Tensor& t : previous)
      if (!t.empty() && t.dtype() == dtype && t.shape() == shape) return std::exchange(t, Tensor());
    return Tensor::zeros(dtype, shape);
  });
  const int all = omp_get_max_threads();
#pragma omp parallel num_threads(all)
  { (void)0; }
  const auto t0 = std::chrono::steady_clock::now();
  {
    const OmpThreadScope scope(threads);
    kernel.run(ctx);
  }
#pragma omp parallel num_threads(all)
  { (void)0; }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  out = std::move(ctx.outputs());
  return us;
}

double time_config(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, int threads,
                   std::vector<Tensor>& out) {
  double spent = time_once(kernel, node, inputs, threads, out);
  std::vector<double> times;
  for (int r = 0; r < kTimedReps && spent < kRepBudgetUs; ++r) {
    times.push_back(time_once(kernel, node, inputs, threads, out));
    spent += times.back();
  }
  return times.empty() ? spent : median(times);
}

bool all_agree(const Node& node, const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  for (std::size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == kNoValue) continue;
    if (o >= got.size() || o >= want.size() || !outputs_agree(got[o], want[o])) return false;
  }
  return true;
}

bool outputs_agree(const Tensor& got, const Tensor& want) {
  if (got.empty() || want.empty()) return got.empty() == want.empty();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) return false;
  if (!dtype_is_float(want.dtype())) return got.nbytes() == want.nbytes() && std::memcmp(got.raw(), want.raw(), got.nbytes()) == 0;
  double scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double w = float_element(want, i);
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  }
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double w = float_element(want, i), g = float_element(got, i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return false;
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (w != g) return false;
      continue;
    }
    if (std::abs(g - w) > 1e-3 * std::abs(w) + 1e-4 * scale) return false;
  }
  return true;
}

}  // namespace wpk
