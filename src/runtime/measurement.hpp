#pragma once
// Measuring a kernel configuration as it would run inside the model, and checking its result
// against the oracle's: the tuner's measurement (runtime/tuner.hpp).
#include <vector>

#include "backends/kernel.hpp"

namespace wpk {

// How the caches stand when a step starts inside the model. Warm (the default): as the previous
// run of the same kernel left them. Otherwise the rest of a run has gone through `sweep_bytes`
// (the model's constants) since the step last ran: the step meets its weights (loaded or packed
// by its kernel) wherever that leaves them, and only its activations, just written by the steps
// before it, in cache. A kernel that wins on weights kept hot by repeating it can lose inside the
// model (one whose weight reads the hardware prefetchers do not follow, say).
struct CacheState {
  std::size_t sweep_bytes = 0;
  std::vector<const Tensor*> activations;  // read back into the caches after the sweep
};

// Bytes of this machine's last-level cache, as Linux's sysfs (else the C library) reports it;
// 32 MiB when neither does.
std::size_t last_level_cache_bytes();
// Bytes of one core's largest private cache (the largest level below the last, as sysfs
// says); 1 MiB when sysfs says nothing.
std::size_t private_cache_bytes();
// What a run of a model whose constants take `bytes` goes through between two runs of a step,
// as CacheState::sweep_bytes: 0 when they all fit a core's private caches, else the constants'
// bytes up to twice the last-level cache (at most 256 MiB).
std::size_t sweep_bytes_for_constants(std::size_t bytes);

// One run of `kernel` on `threads` OpenMP threads between steps on all of them, as in a model:
// its microseconds; the outputs in `out`, as time_config says. `residual_in_place` >= 0: inside
// the model output 0 has the bytes of that input (a fused residual the kernel accumulates into,
// which no later step reads: the memory plan's in-place rule), so the run starts, untimed, from
// the residual's values copied into the output and reads them there; a kernel measured with a
// copy the model never makes would lose to one that needs none.
double time_once(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, int threads,
                 std::vector<Tensor>& out, const CacheState& cache = {}, int residual_in_place = -1);

// One warm-up (caches, lazy compiles, the outputs' pages), then up to 5 timed runs into the same
// outputs: their median in microseconds. The kernel runs on `threads` OpenMP threads, and the
// time counts what a step on fewer than the session's pays to shrink the team and the next step
// to grow it back. Outputs land in `out` (its tensors are reused where dtype and shape match:
// inside a model they live in an arena the run has touched, so fresh pages are no part of a
// step). Throws what the kernel throws.
double time_config(const Kernel& kernel, const Node& node, const std::vector<const Tensor*>& inputs, int threads,
                   std::vector<Tensor>& out, const CacheState& cache = {}, int residual_in_place = -1);

// The median of a non-empty list (of times, of ratios).
double median(std::vector<double> v);

// True when `got` matches `want` closely enough to stand in for it: same dtype and shape;
// floats within `rtol` relative plus `scale_share` of the largest |want| (summation order
// differs between backends); NaN where `want` has NaN; 8-bit codes within `codes`; other types
// exactly.
bool outputs_agree(const Tensor& got, const Tensor& want, double rtol = 1e-3, double scale_share = 1e-4, int codes = 0);
// outputs_agree for every output the node has; looser for a node allowed to compute in bf16
// (compute_precision, graph/fused_ops.hpp: its inputs and weights keep 8 significant bits), and
// one code for QLinearConv (kernels requantize float or double products).
bool all_agree(const Node& node, const std::vector<Tensor>& got, const std::vector<Tensor>& want);

}  // namespace wpk
