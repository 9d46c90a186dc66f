#include "runtime/measurement.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <memory>
#include <string>
#include <utility>

#include "core/float_values.hpp"
#include "runtime/threads.hpp"

namespace wpk {
namespace {

constexpr int kTimedReps = 5;
constexpr double kRepBudgetUs = 50000;  // a slow candidate stops repeating after this much time

constexpr std::size_t kMaxSweepBytes = std::size_t{256} << 20;

// What a step finds cached in a model whose constants do not stay in a core's private caches:
// every cache line of `sweep_bytes` read, a share on each thread so every core's private caches
// are swept too; then the activations, split between the threads as the steps that wrote them
// split their work.
// A buffer of at least `bytes`, held for the process as large as the largest sweep asked for; a
// session tuning beside another keeps the one it got while a larger one replaces it.
std::shared_ptr<const std::vector<unsigned char>> sweep_buffer(std::size_t bytes) {
  static std::mutex mutex;
  static std::shared_ptr<const std::vector<unsigned char>> buffer;
  std::lock_guard<std::mutex> lock(mutex);
  if (!buffer || buffer->size() < bytes) buffer = std::make_shared<const std::vector<unsigned char>>(bytes, 1);
  return buffer;
}

void evict_all_but(const CacheState& cache) {
  // Each thread reads its share: enough, at the least, to pass through its core's private caches.
  const std::size_t threads = static_cast<std::size_t>(omp_get_max_threads());
  const std::size_t bytes = std::min(std::max(cache.sweep_bytes, 2 * private_cache_bytes() * threads), kMaxSweepBytes);
  const std::shared_ptr<const std::vector<unsigned char>> held = sweep_buffer(bytes);
  const std::vector<unsigned char>& sweep = *held;
  unsigned sum = 0;
  const std::int64_t lines = static_cast<std::int64_t>(bytes / 64);
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t l = 0; l < lines; ++l) sum += sweep[static_cast<std::size_t>(l) * 64];
  for (const Tensor* t : cache.activations) {
    if (!t) continue;
    const auto* p = static_cast<const unsigned char*>(t->raw());
    const std::int64_t activation_lines = static_cast<std::int64_t>((t->nbytes() + 63) / 64);
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (std::int64_t l = 0; l < activation_lines; ++l) sum += p[static_cast<std::size_t>(l) * 64];
  }
  // An asm barrier keeps the reads: their sum is otherwise unused.
  asm volatile("" : : "r"(sum) : "memory");
}

std::size_t sysfs_cache_bytes(int index) {
  std::ifstream size("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::size_t amount = 0;
  char unit = 0;
  if (size >> amount >> unit && (unit == 'K' || unit == 'M')) return amount << (unit == 'K' ? 10 : 20);
  return 0;
}

int sysfs_cache_level(int index) {
  std::ifstream level("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/level");
  int l = 0;
  return level >> l ? l : 0;
}

}  // namespace

std::size_t last_level_cache_bytes() {
  static const std::size_t bytes = [] {
    // The kernel's description of this CPU's caches first: under a hypervisor the C library's
    // CPUID answer can be the host's whole cache (384 MiB where the guest's is 32 MiB).
    std::size_t largest = 0;
    for (int index = 0; index < 8; ++index) largest = std::max(largest, sysfs_cache_bytes(index));
    if (largest > 0) return largest;
    for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
      const long b = sysconf(name);
      if (b > 0) return static_cast<std::size_t>(std::min<long>(b, 1L << 30));
    }
    return std::size_t{32} << 20;
  }();
  return bytes;
}

std::size_t private_cache_bytes() {
  static const std::size_t bytes = [] {
    int last = 0;
    for (int index = 0; index < 8; ++index) last = std::max(last, sysfs_cache_level(index));
    std::size_t largest = 0;
    for (int index = 0; index < 8; ++index)
      if (sysfs_cache_level(index) < last) largest = std::max(largest, sysfs_cache_bytes(index));
    return std::min(largest > 0 ? largest : std::size_t{1} << 20, last_level_cache_bytes());
  }();
  return bytes;
}

std::size_t sweep_bytes_for_constants(std::size_t bytes) {
  if (bytes <= private_cache_bytes()) return 0;
  return std::min({bytes, 2 * last_level_cache_bytes(), kMaxSweepBytes});
}

double median(std::vector<double> v) {
  // Selection, not a sort: calibration takes the median of every logged trial of a cache folder.
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto upper = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), upper, v.end());
  if (v.size() % 2) return *upper;
  return 0.5 * (*std::max_element(v.begin(), upper) + *upper);
}

double time_once(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, int threads,
                 std::vector<Tensor>& out, const CacheState& cache, int residual_in_place) {
  std::vector<Tensor> previous = std::move(out);
  std::vector<const Tensor*> in = inputs;
  CacheState state = cache;
  // The output's bytes holding the residual's values, handed to the kernel as both.
  Tensor shared;
  const Tensor* z = residual_in_place >= 0 && static_cast<std::size_t>(residual_in_place) < in.size()
                        ? in[static_cast<std::size_t>(residual_in_place)]
                        : nullptr;
  if (z && !z->empty() && !z->on_device() && dtype_is_float(z->dtype())) {
    for (Tensor& t : previous)
      if (!t.empty() && t.dtype() == z->dtype() && t.shape() == z->shape()) {
        shared = std::exchange(t, Tensor());
        break;
      }
    if (shared.empty()) shared = Tensor::zeros(z->dtype(), z->shape());
    std::memcpy(shared.raw(), z->raw(), z->nbytes());
    for (const Tensor*& a : state.activations)
      if (a == z) a = &shared;
    in[static_cast<std::size_t>(residual_in_place)] = &shared;
  }
  bool handed = shared.empty();
  KernelContext ctx(node, in, [&](DType dtype, const Shape& shape) {
    if (!handed && dtype == shared.dtype() && shape == shared.shape()) {
      handed = true;
      return shared;  // a copy shares the bytes
    }
    for (Tensor& t : previous)
      if (!t.empty() && t.dtype() == dtype && t.shape() == shape) return std::exchange(t, Tensor());
    return Tensor::zeros(dtype, shape);
  });
  const int all = omp_get_max_threads();
  if (state.sweep_bytes > 0) evict_all_but(state);
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
                   std::vector<Tensor>& out, const CacheState& cache, int residual_in_place) {
  double spent = time_once(kernel, node, inputs, threads, out, cache, residual_in_place);
  std::vector<double> times;
  for (int r = 0; r < kTimedReps && spent < kRepBudgetUs; ++r) {
    times.push_back(time_once(kernel, node, inputs, threads, out, cache, residual_in_place));
    spent += times.back();
  }
  return times.empty() ? spent : median(times);
}

bool all_agree(const Node& node, const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  const bool bf16 = node.attr_string("compute_precision", "") == "bf16";
  // QLinearConv requantizes a float or a double product (kernels differ): one code apart.
  const int codes = node.op_type == "QLinearConv" ? 1 : 0;
  for (std::size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == kNoValue) continue;
    if (o >= got.size() || o >= want.size()) return false;
    if (!(bf16 ? outputs_agree(got[o], want[o], 3e-2, 1e-2) : outputs_agree(got[o], want[o], 1e-3, 1e-4, codes)))
      return false;
  }
  return true;
}

bool outputs_agree(const Tensor& got, const Tensor& want, double rtol, double scale_share, int codes) {
  if (got.empty() || want.empty()) return got.empty() == want.empty();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) return false;
  if (codes > 0 && (want.dtype() == DType::UInt8 || want.dtype() == DType::Int8)) {
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      const int g = want.dtype() == DType::UInt8 ? got.data<std::uint8_t>()[i] : got.data<std::int8_t>()[i];
      const int w = want.dtype() == DType::UInt8 ? want.data<std::uint8_t>()[i] : want.data<std::int8_t>()[i];
      if (g - w > codes || w - g > codes) return false;
    }
    return true;
  }
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
    if (std::abs(g - w) > rtol * std::abs(w) + scale_share * scale) return false;
  }
  return true;
}

}  // namespace wpk
