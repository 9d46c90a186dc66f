#pragma once
// The analytic cost model: how long a kernel should take on a workload, from the work (FLOPs
// and bytes moved) and how the kernel computes (vector width, the share of peak it sustains),
// on a nominal machine. It ranks a node's candidates before any is measured: without tuning it
// alone picks which one runs; with tuning it orders what the search tries first. Absolute
// values are rough; only comparisons between candidates of one workload mean anything.
//
// Compute and memory time add up: most kernels overlap them only in part, and the sum keeps the
// vector width visible on memory-bound ops, where two kernels differ mostly in it. A kernel that
// prefetches its operands while it computes (overlaps_memory) costs the larger of the two.
namespace wpk::search {

struct Workload {
  double flops = 0;  // arithmetic operations (a fused multiply-add counts 2)
  double bytes = 0;  // bytes read and written from memory
};

struct KernelTraits {
  int vector_bits = 32;      // the widest vectors its inner loops use
  double efficiency = 0.25;  // the share of those vectors' peak it sustains where compute-bound
  double work_scale = 1;     // the share of the workload's FLOPs it performs (Winograd: under 1)
  // Bytes it moves beyond the workload's (reorders, transformed weights); negative where it
  // moves fewer (weights packed in bf16).
  double extra_bytes = 0;
  bool overlaps_memory = false;  // prefetches while computing: the larger of the two times counts
  // Of the bytes moved, those prefetched while computing: their time counts only where it exceeds
  // the compute time (under overlaps_memory they overlap anyway).
  double prefetched_bytes = 0;
  double call_seconds = 0;       // per call, whatever the size
  bool multithreaded = true;     // false: one thread does the work whatever the machine offers
  int parallel_regions = 1;      // times a call starts and joins its threads
};

struct Machine {
  int threads = 1;
  // Per thread, nominal: two FMA pipes at ~3 GHz per 32-bit lane, and a share of the memory
  // bandwidth. Refined from tuning records later; the ranking rarely depends on them.
  double flops_per_lane = 12e9;
  double bytes_per_second = 10e9;
  // Starting and joining the threads of one parallel region, nominal: what a kernel on tiny
  // tensors pays for its threads, so that there one thread is predicted the faster.
  double parallel_region_seconds = 2e-6;
};

// Predicted seconds: the call, the parallel region where more than one thread takes part, then
// compute and memory time shared among the threads.
double predict_seconds(const Workload& w, const KernelTraits& k, const Machine& m);

}  // namespace wpk::search
