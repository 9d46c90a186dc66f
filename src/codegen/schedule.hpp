#pragma once
// Schedules: how a Compute (tensor_expr.hpp) is computed. A schedule starts as one serial loop
// per axis, then one per reduction variable, and is changed by primitives:
//   split(v, f)    v becomes an outer loop over ceil(extent / f) and an inner loop over f; a
//                  remainder is computed by a copy of the inner nest with the shorter extent
//                  (an outer loop may be split again only where it has no remainder)
//   reorder(vs)    the loops in this order (all of them)
//   fuse(a, b)     the adjacent spatial loops a and b (a outside) become one loop over their
//                  extents' product whose iteration k runs a = k / extent(b), b = k % extent(b):
//                  a parallel loop over it shares out pairs, not rows of pairs. Where b is the
//                  outer loop of a split with a remainder, each iteration picks the full or the
//                  short inner nest at run time. Fixed extents only; a fused loop is serial or
//                  parallel and is not split again
//   parallel(v)    iterations of v shared by the kernel's threads (one parallel loop, outside
//                  every reduction loop)
//   vectorize(v)   v (the innermost loop) computed in SIMD vectors of the target, the last one
//                  masked when the extent is not a multiple of the vector length
//   unroll(v)      v's iterations written out one after another
//   bind_block(v), bind_thread(v)
//                  v's iterations are a CUDA kernel's blocks or a block's threads (outside
//                  every reduction loop; the CUDA printer only)
//   pack(b, v)     input b is read from a packed copy: the dimension of b that v (already split by
//                  f) indexes becomes panels of f, the panel index first and the f elements last,
//                  the last panel zero-filled (pack_input makes the copy, once for a constant)
//   prefetch_next(b, v)
//                  while an iteration of v (the outer loop of the split b is packed along,
//                  outside every reduction) runs, the panel of packed b that the next iteration
//                  reads is prefetched into the L2 cache, a line at a time spread evenly over the
//                  iterations of the loops between v and the register tile: weights streamed from
//                  memory arrive while the panel before them is computed (the C++ printer only;
//                  the CUDA printer leaves it out)
//   prefetch_epilogue(b)
//                  as each register tile starts its reduction, the lines of input b that the
//                  tile's epilogue will read are prefetched into L1: an input read only after the
//                  reduction (a residual) arrives while the tile computes instead of stalling its
//                  stores (the C++ printer only; no outer reduction)
//   stage_shared(b, r)
//                  input b is read from a staged tile: at the top of each iteration of the serial
//                  loop r (a reduction loop in a CUDA kernel; on the CPU also a spatial loop,
//                  serial or the parallel one, whose tile then serves every loop inside it), the
//                  part of b that the iteration
//                  reads (zero where it leaves
//                  b) is copied into CUDA shared memory by the block's threads together, between
//                  two __syncthreads(), or by a CPU thread into an array of its own. So that every
//                  thread of a block meets every barrier, a CUDA kernel with a stage computes its
//                  spatial splits' remainders as whole tiles and stores only the points inside
//   stage_shared(b, r, producer)
//                  as above, but the tile's elements are computed there by `producer`, an
//                  element-wise compute whose output is b: b never exists in memory (a depth-first
//                  group: the producer's values live in the tile only, in cache). In the
//                  kernel's buffers the producer's inputs take b's place
// Spatial loops inside the reductions form the register tile: the sums of one tile stay in
// registers over the whole reduction and meet the epilogue once (they must be unrolled or
// vectorized). One outer reduction loop may lie outside the rest (the outer part of a split
// reduction of fixed extent, serial, on the CPU, with neither stages nor prefetches): serial or
// parallel spatial loops, then the other reductions and the register tile come inside it. Its
// blocks keep partial results in the output; the first starts from the reducer's identity, the
// last applies the epilogue. So the data a block of the reduction reads stays in cache while
// every tile reads it (a K-blocked product), at the cost of the output's reads and writes
// between blocks, and the output must not share memory with an input the epilogue reads. A
// schedule that breaks a rule throws std::invalid_argument when lowered.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/tensor_expr.hpp"

namespace wpk::codegen {

// GpuBlock and GpuThread loops are a CUDA kernel's grid and thread block (cuda_printer.hpp): every
// iteration runs at once, one per block or per thread; the C++ printer refuses them.
enum class LoopKind { Serial, Parallel, Unrolled, Vectorized, GpuBlock, GpuThread };

struct Loop {
  Var var;
  LoopKind kind = LoopKind::Serial;
  bool reduction = false;
};

struct SplitRecord {
  Var parent, outer, inner;
  std::int64_t factor;
};

struct FuseRecord {
  Var fused;
  std::vector<Var> parts;  // outermost first
};

struct StageRecord {
  Buffer original;  // an input
  Var at;           // the reduction loop whose iterations copy it
  std::shared_ptr<const Compute> producer;  // computes the tile's elements; null: copied from b
  std::int64_t chunk = 64;  // a CPU thread's producer: values of the last dimension computed at a time
};

struct PackRecord {
  Buffer original, packed;  // packed: [ceil(D / f), the other dims..., f]
  std::size_t dim;          // of `original`, indexed by `var` alone
  Var var;                  // split by f
};

struct PrefetchRecord {
  Buffer original;  // a packed input
  Var at;           // the loop whose next iteration's panel is prefetched
};

class Schedule {
 public:
  explicit Schedule(const Compute& c);

  std::pair<Var, Var> split(const Var& v, std::int64_t factor);
  void reorder(const std::vector<Var>& order);
  Var fuse(const Var& outer, const Var& inner);
  void parallel(const Var& v) { kind(v, LoopKind::Parallel); }
  void vectorize(const Var& v) { kind(v, LoopKind::Vectorized); }
  void unroll(const Var& v) { kind(v, LoopKind::Unrolled); }
  void bind_block(const Var& v) { kind(v, LoopKind::GpuBlock); }
  void bind_thread(const Var& v) { kind(v, LoopKind::GpuThread); }
  void pack(const Buffer& b, const Var& v);
  void prefetch_next(const Buffer& b, const Var& at);
  void prefetch_epilogue(const Buffer& b);
  void stage_shared(const Buffer& b, const Var& at);
  // `chunk`: on the CPU, how many values of the tile's last dimension the producer computes at
  // every point of the others before the next (one SIMD vector keeps what it reads along that
  // dimension alone in registers).
  void stage_shared(const Buffer& b, const Var& at, const Compute& producer, std::int64_t chunk = 64);

  const Compute& compute() const { return compute_; }
  const std::vector<Loop>& loops() const { return loops_; }
  // The split that replaced v, or null.
  const SplitRecord* split_of(const VarNode* v) const;
  // The split whose outer loop v is, or null.
  const SplitRecord* split_with_outer(const VarNode* v) const;
  // The loops fused into v, or null.
  const FuseRecord* fuse_of(const VarNode* v) const;
  // How input b is packed, or null.
  const PackRecord* pack_of(const BufferNode* b) const;
  const std::vector<PackRecord>& packs() const { return packs_; }
  const std::vector<PrefetchRecord>& prefetches() const { return prefetches_; }
  const std::vector<Buffer>& epilogue_prefetches() const { return epilogue_prefetches_; }
  const std::vector<StageRecord>& stages() const { return stages_; }
  // How input b is staged, or null.
  const StageRecord* stage_of(const BufferNode* b) const;
  // "i.o(par) j.o k i.i(unroll) j.i(vec)": the loop nest, outermost first.
  std::string describe() const;

 private:
  void kind(const Var& v, LoopKind k);
  std::size_t position(const Var& v) const;
  Compute compute_;
  std::vector<Loop> loops_;
  std::map<const VarNode*, SplitRecord> splits_;
  std::map<const VarNode*, FuseRecord> fuses_;
  std::vector<PackRecord> packs_;
  std::vector<PrefetchRecord> prefetches_;
  std::vector<Buffer> epilogue_prefetches_;
  std::vector<StageRecord> stages_;
};

// `data` (the input `p.original`, row-major) in the packed layout the kernel reads.
std::vector<float> pack_input(const PackRecord& p, const Schedule& s, const float* data);

}  // namespace wpk::codegen
