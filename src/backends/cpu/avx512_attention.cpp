#include "backends/cpu/avx512_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/avx2_attention.hpp"
#include "backends/cpu/stream_conv.hpp"

namespace wpk::cpu {
namespace {

constexpr std::int64_t kBlock = 64;  // keys (and value features) per block of packed weights
constexpr std::int64_t kMaxChunk = 128;  // query rows computed together

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Per thread: one batch entry's packed keys and values, and one chunk's rows, scores and outputs.
struct Scratch {
  std::vector<float> keys, values, rows, scores, out;
  std::int64_t packed = -1;  // the batch entry keys and values hold
};

// The product of `count` contiguous rows of `in` features with weights packed for `out`
// columns, written contiguous, on this thread.
void product(std::int64_t count, std::int64_t in, std::int64_t out, const float* x, const float* w, float* y) {
  StreamConvShape shape;
  shape.n = shape.ih = shape.oh = 1;
  shape.iw = shape.ow = count;
  shape.ic = in;
  shape.oc = out;
  stream_conv_on_this_thread(shape, x, w, kBlock, StreamConvEpilogue{}, y);
}

// Rows [first, first + count) of batch entry b.
void run_chunk(const AttentionJob& job, std::int64_t b, std::int64_t first, std::int64_t count, Scratch& w) {
  const AttentionShape& s = job.s;
  for (std::int64_t r = 0; r < count; ++r)
    std::memcpy(w.rows.data() + r * s.d, job.q.data + job.q.batch_offsets[b] + (first + r) * job.q.row_stride,
                sizeof(float) * static_cast<std::size_t>(s.d));
  product(count, s.d, s.cols, w.rows.data(), w.keys.data(), w.scores.data());
  for (std::int64_t r = 0; r < count; ++r) {
    const float* m = job.mask.data ? job.mask.data + job.mask.batch_offsets[b] + (first + r) * job.mask.row_stride : nullptr;
    attention_softmax_row(w.scores.data() + r * s.cols, s.cols, m, job.mask.col_stride);
  }
  product(count, s.cols, s.dv, w.scores.data(), w.values.data(), w.out.data());
  for (std::int64_t r = 0; r < count; ++r)
    std::memcpy(job.y + job.y_offsets[b] + (first + r) * job.y_row_stride, w.out.data() + r * s.dv,
                sizeof(float) * static_cast<std::size_t>(s.dv));
}

void run_items(const AttentionJob& job, std::int64_t begin, std::int64_t end, Scratch& w) {
  const AttentionShape& s = job.s;
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t b = i / job.chunks, first = i % job.chunks * job.chunk;
    if (w.packed != b) {
      pack_attention_keys(job.k.data + job.k.batch_offsets[b], job.k.row_stride, s.cols, s.d, s.scale, kBlock, w.keys.data());
      pack_attention_values(job.v.data + job.v.batch_offsets[b], job.v.row_stride, s.cols, s.dv, kBlock, w.values.data());
      w.packed = b;
    }
    run_chunk(job, b, first, std::min(s.rows, first + job.chunk) - first, w);
  }
}

}  // namespace

bool avx512_attention_available() { return stream_conv_available() && avx2_attention_available(); }

void avx512_attention(const AttentionShape& s, const AttentionOperand& q, const AttentionOperand& k,
                      const AttentionOperand& v, const AttentionOperand& mask, float* y,
                      const std::vector<std::int64_t>& y_offsets, std::int64_t y_row_stride) {
  if (s.batch == 0 || s.rows == 0 || s.dv == 0) return;
  // Enough items for every thread to get a few (load balance); a thread packs a batch entry's
  // keys and values once for its consecutive items of that entry.
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t per_entry = std::max(ceil_div(s.rows, kMaxChunk), std::min(ceil_div(4 * threads, s.batch), ceil_div(s.rows, 8)));
  const std::int64_t chunk = ceil_div(s.rows, per_entry);
  const AttentionJob job{s, q, k, v, mask, y, y_offsets, y_row_stride, chunk, ceil_div(s.rows, chunk)};
  const std::int64_t items = s.batch * job.chunks;
  // Allocated here, where std::bad_alloc reaches the caller; thrown inside the parallel region
  // it would terminate the process.
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
  for (Scratch& w : scratch) {
    w.keys.resize(static_cast<std::size_t>(ceil_div(s.cols, kBlock) * kBlock * s.d));
    w.values.resize(static_cast<std::size_t>(ceil_div(s.dv, kBlock) * kBlock * s.cols));
    w.rows.resize(static_cast<std::size_t>(chunk * s.d));
    w.scores.resize(static_cast<std::size_t>(chunk * s.cols));
    w.out.resize(static_cast<std::size_t>(chunk * s.dv));
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const std::int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    run_items(job, items * t / n, items * (t + 1) / n, scratch[static_cast<std::size_t>(t)]);
  }
}

}  // namespace wpk::cpu
