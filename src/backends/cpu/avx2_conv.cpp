#include "backends/cpu/avx2_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/avx2_tile.hpp"
#include "backends/cpu/conv_walk.hpp"
#include "core/cpu_features.hpp"

namespace wpk::cpu {
namespace {

using namespace avx2;  // the shared tile, vector math and work-split helpers
constexpr std::int64_t kMaxTaps = 64;

#ifdef WPK_AVX2_KERNELS
struct Job {
  const StreamConvShape& s;
  const float* x;
  const float* w;
  const StreamConvEpilogue& e;
  float* y;
  const float* zeros;  // s.ic zeros: the input of taps in the padding
  std::int64_t taps, pixels, blocks, group, pixel_block;
};

// Output-channel blocks `blocks` for the output pixels `pixels` (whole tiles but at the end).
void run_part(const Job& job, Range blocks, Range pixels, const float** table) {
  const StreamConvShape& s = job.s;
  const std::int64_t panel = job.taps * s.ic * kBlock;
  TileArgs args{};
  args.zeros = job.zeros;
  args.taps = static_cast<int>(job.taps);
  args.ic = s.ic;
  args.ldy = s.oc;
  // The GELUs go in a pass over each group's outputs after its tiles (avx2_tile.hpp's
  // activate_rows); the tiles apply the rest of the epilogue.
  const bool deferred = job.e.act == StreamConvEpilogue::Act::Gelu || job.e.act == StreamConvEpilogue::Act::GeluTanh;
  StreamConvEpilogue in_tile = job.e;
  if (deferred) in_tile.act = StreamConvEpilogue::Act::None;
  const std::int64_t pixel_blocks = ceil_div(pixels.end - pixels.begin, job.pixel_block);
  for (std::int64_t g0 = blocks.begin; g0 < blocks.end; g0 += job.group) {
    const std::int64_t g1 = std::min(blocks.end, g0 + job.group);
    for (std::int64_t pb = 0; pb < pixel_blocks; ++pb) {
      const Range px = part(pixels.end - pixels.begin, pixel_blocks, pb);
      const std::int64_t first = pixels.begin + px.begin, count = px.end - px.begin;
      fill_tap_table(s, job.x, s.ic, job.zeros, first, count, table);
      // Tiles of near-equal size, at most kTile pixels each.
      const std::int64_t tiles = ceil_div(count, kTile);
      for (std::int64_t b = g0; b < g1; ++b) {
        // While this block's tiles run, each prefetches a slice of the block whose weights
        // would come next from memory (in the first pixel block the group's next block, in the
        // last the next group's block in this place): spread over the tiles, the fetches overlap
        // the sums instead of stalling each block's first tile (BERT-base: ~2.5 ms a run).
        std::int64_t next = -1;
        if (pb == 0 && (b + 1 < g1 || pixel_blocks == 1)) next = b + 1;
        else if (pb == pixel_blocks - 1) next = b + (g1 - g0);
        const char* pf = next >= 0 && next < blocks.end ? reinterpret_cast<const char*>(job.w + next * panel) : nullptr;
        const std::int64_t pf_bytes = pf ? 4 * panel : 0, pf_per_tile = ceil_div(ceil_div(pf_bytes, 64), tiles) * 64;
        args.w = job.w + b * panel;
        args.bias = job.e.bias ? job.e.bias + b * kBlock : nullptr;
        args.cols = static_cast<int>(std::min<std::int64_t>(kBlock, s.oc - b * kBlock));
        for (std::int64_t i = 0; i < tiles; ++i) {
          const Range r = part(count, tiles, i);
          args.a = table + r.begin * job.taps;
          args.y = job.y + (first + r.begin) * s.oc + b * kBlock;
          args.prefetch = pf ? pf + std::min(pf_bytes, i * pf_per_tile) : nullptr;
          args.prefetch_end = pf ? pf + std::min(pf_bytes, (i + 1) * pf_per_tile) : nullptr;
          kPrefetchingTiles[r.end - r.begin - 1](args, in_tile);
        }
      }
      if (deferred) {
        const std::int64_t c0 = g0 * kBlock, c1 = std::min(s.oc, g1 * kBlock);
        activate_rows(job.y + first * s.oc + c0, count, c1 - c0, s.oc, job.e);
      }
    }
  }
}
#endif

}  // namespace

bool avx2_conv_runs(const StreamConvShape& s) {
  return avx2_kernels_available() && s.ic >= 1 && s.oc >= 1 && s.kh * s.kw <= kMaxTaps && s.n * s.oh * s.ow >= 1;
}

void avx2_conv(const StreamConvShape& s, const float* x, const float* w, const StreamConvEpilogue& e, float* y,
               const Avx2ConvTiling& tiling) {
#ifdef WPK_AVX2_KERNELS
  // Scratch kept from call to call on the calling thread (allocated here, where std::bad_alloc
  // reaches the caller; inside the parallel region it would terminate the process): a model's
  // many small products would otherwise allocate it at every run.
  thread_local std::vector<float> zeros;
  thread_local std::vector<const float*> tables;
  if (zeros.size() < static_cast<std::size_t>(s.ic)) zeros.assign(static_cast<std::size_t>(s.ic), 0.0f);
  const std::int64_t taps = s.kh * s.kw, blocks = ceil_div(s.oc, kBlock);
  const std::int64_t group = std::max<std::int64_t>(1, tiling.group_bytes / (4 * taps * s.ic * kBlock));
  const std::int64_t pixel_block = std::max<std::int64_t>(kTile, tiling.pixel_block);
  const Job job{s, x, w, e, y, zeros.data(), taps, s.n * s.oh * s.ow, blocks, group, pixel_block};
  const std::int64_t max_threads = omp_get_max_threads();
  const std::size_t table_size = static_cast<std::size_t>(pixel_block * taps);
  if (tables.size() < table_size * static_cast<std::size_t>(max_threads)) tables.resize(table_size * static_cast<std::size_t>(max_threads));
  const float** table_base = tables.data();
  const auto thread_part = [&](std::int64_t t, std::int64_t threads) {
    const std::int64_t tiles = ceil_div(job.pixels, kTile);
    const ConvSplit split = choose_conv_split(s, tiles, blocks, kBlock, group, threads, 4);
    const float** table = table_base + static_cast<std::size_t>(t) * table_size;
    const Range tile_range = part(tiles, split.pixel_parts, t % split.pixel_parts);
    const Range pixels{tile_range.begin * kTile, std::min(job.pixels, tile_range.end * kTile)};
    const Range block_range = part(blocks, split.oc_parts, t / split.pixel_parts);
    if (t < split.oc_parts * split.pixel_parts && pixels.begin < pixels.end) run_part(job, block_range, pixels, table);
  };
  // A node given one thread (the cost model's choice on small tensors) opens no parallel region.
  if (max_threads == 1) {
    thread_part(0, 1);
    return;
  }
#pragma omp parallel num_threads(max_threads)
  thread_part(omp_get_thread_num(), omp_get_num_threads());
#else
  (void)s, (void)x, (void)w, (void)e, (void)y, (void)tiling;
#endif
}

}  // namespace wpk::cpu
