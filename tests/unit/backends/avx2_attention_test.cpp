// wpk's attention kernels (backends/cpu/avx2_attention.hpp, avx512_attention.hpp): each kernel
// itself against a double-precision attention at 1-3 threads, with operands contiguous and with
// heads interleaved, every kind of mask broadcast, and the rows the softmax must make NaN; and
// Attention nodes through the oneDNN backend and the cpu backend's configurations against the
// reference backend, interleaved_heads included. The AVX2 kernel runs on any CPU with AVX2 and
// FMA, so AVX-512 machines test it too.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/avx2_attention.hpp"
#include "backends/cpu/avx512_attention.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "support/conv_kernel_check.hpp"
#include "support/onednn_isa.hpp"
#include "wpk/wpk.hpp"

using wpk::cpu::AttentionOperand;
using wpk::cpu::AttentionShape;
using wpk::testing::cpu_runs_avx2_kernel;
using wpk::testing::onednn_backend;
using wpk::testing::OpCase;
using wpk::testing::random_floats;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Mask { None, Keys, PerImage, Full, PerRow };

struct Case {
  std::int64_t images, heads, rows, cols, d, dv;
  Mask mask;
  bool interleaved;  // Q, K, V and Y as [B, S, H, D]
  const char* what;
};

// An operand [images, heads, rows, cols] stored contiguous, or as [images, rows, heads, cols].
AttentionOperand view(const float* data, const Case& c, std::int64_t rows, std::int64_t cols) {
  AttentionOperand o;
  o.data = data;
  o.row_stride = c.interleaved ? c.heads * cols : cols;
  for (std::int64_t b = 0; b < c.images * c.heads; ++b)
    o.batch_offsets.push_back(c.interleaved ? b / c.heads * rows * c.heads * cols + b % c.heads * cols : b * rows * cols);
  return o;
}

// The mask as the kernel reads it, over `m` (sized for the largest kind: images x heads x rows x
// cols).
AttentionOperand mask_view(const std::vector<float>& m, const Case& c) {
  AttentionOperand o;
  if (c.mask == Mask::None) return o;
  o.data = m.data();
  for (std::int64_t b = 0; b < c.images * c.heads; ++b) {
    const std::int64_t image = b / c.heads;
    switch (c.mask) {
      case Mask::Keys: o.batch_offsets.push_back(0); break;                  // [cols]
      case Mask::PerImage: o.batch_offsets.push_back(image * c.cols); break;  // [images, 1, 1, cols]
      case Mask::Full: o.batch_offsets.push_back(b * c.rows * c.cols); break;
      case Mask::PerRow: o.batch_offsets.push_back(0); break;  // [rows, 1]
      case Mask::None: break;
    }
  }
  o.row_stride = c.mask == Mask::Full ? c.cols : c.mask == Mask::PerRow ? 1 : 0;
  o.col_stride = c.mask == Mask::PerRow ? 0 : 1;
  return o;
}

// Y by the definition, in double: softmax(Q Kᵀ scale + mask) V; NaN rows where a score is NaN
// or the largest is infinite.
std::vector<double> attention_in_double(const Case& c, const AttentionOperand& q, const AttentionOperand& k,
                                        const AttentionOperand& v, const AttentionOperand& mask, float scale) {
  std::vector<double> y(static_cast<std::size_t>(c.images * c.heads * c.rows * c.dv));
  std::vector<double> s(static_cast<std::size_t>(c.cols));
  for (std::int64_t b = 0; b < c.images * c.heads; ++b)
    for (std::int64_t i = 0; i < c.rows; ++i) {
      const float* qi = q.data + q.batch_offsets[b] + i * q.row_stride;
      double max = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (std::int64_t j = 0; j < c.cols; ++j) {
        const float* kj = k.data + k.batch_offsets[b] + j * k.row_stride;
        double dot = 0;
        for (std::int64_t t = 0; t < c.d; ++t) dot += static_cast<double>(qi[t]) * kj[t];
        s[j] = dot * scale;
        if (mask.data) s[j] += mask.data[mask.batch_offsets[b] + i * mask.row_stride + j * mask.col_stride];
        nan = nan || std::isnan(s[j]);
        max = std::max(max, s[j]);
      }
      double* yi = y.data() + (b * c.rows + i) * c.dv;
      if (nan || !std::isfinite(max)) {
        std::fill(yi, yi + c.dv, std::nan(""));
        continue;
      }
      double sum = 0;
      for (std::int64_t j = 0; j < c.cols; ++j) sum += s[j] = std::exp(s[j] - max);
      for (std::int64_t j = 0; j < c.cols; ++j) {
        const float* vj = v.data + v.batch_offsets[b] + j * v.row_stride;
        for (std::int64_t t = 0; t < c.dv; ++t) yi[t] += s[j] / sum * vj[t];
      }
    }
  return y;
}

}  // namespace

// Rows in tiles of 1-6 (counts off multiples of 6), keys and features off the 8-lane vectors and
// the 16-wide blocks, one head to twelve, BERT-base's shape, five mask broadcasts (keys masked
// with -inf and -10000 among them), and rows made NaN by a fully masked row, a +inf mask entry
// and a NaN query; at 1, 2 and 3 threads. Guard floats past Y must stay untouched.
TEST_CASE("wpk's attention kernels match a double-precision attention", "[onednn][avx2]") {
  if (!cpu_runs_avx2_kernel()) {
    WARN("no AVX2 and FMA: wpk's attention kernels do not run on this CPU");
    return;
  }
  using Kernel = decltype(&wpk::cpu::avx2_attention);
  std::vector<std::pair<const char*, Kernel>> kernels = {{"avx2", &wpk::cpu::avx2_attention}};
  if (wpk::cpu::avx512_attention_available()) kernels.push_back({"avx512", &wpk::cpu::avx512_attention});
  else WARN("no AVX-512: the AVX-512 attention kernel does not run on this CPU");
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1, Mask::None, false, "one query, one key"},
      {1, 2, 5, 7, 8, 16, Mask::Keys, false, "5 queries (one short tile), 7 keys (one short vector)"},
      {2, 3, 13, 17, 64, 17, Mask::PerImage, true, "13 queries, 17 keys and values: one past a block"},
      {1, 2, 6, 33, 65, 40, Mask::Full, false, "a full mask, 65 features"},
      {3, 1, 7, 9, 4, 5, Mask::PerRow, true, "a mask per query row"},
      {1, 12, 128, 128, 64, 64, Mask::PerImage, true, "BERT-base at seq 128"},
      {2, 2, 40, 200, 16, 32, Mask::Keys, false, "more keys than queries"},
      {1, 2, 300, 70, 24, 80, Mask::Full, true, "past a 128-row chunk, a second block of values"},
  };
  const float scale = 0.37f;
  unsigned seed = 7;
  for (const auto& [kernel_name, kernel] : kernels)
  for (const int threads : {1, 2, 3}) {
    const wpk::OmpThreadScope scope(threads);
    for (const Case& c : cases) {
      INFO(kernel_name << ": " << c.what << " at " << threads << " threads");
      const std::int64_t batch = c.images * c.heads;
      std::vector<float> q = random_floats(static_cast<std::size_t>(batch * c.rows * c.d), seed++);
      const std::vector<float> k = random_floats(static_cast<std::size_t>(batch * c.cols * c.d), seed++);
      const std::vector<float> v = random_floats(static_cast<std::size_t>(batch * c.cols * c.dv), seed++);
      std::vector<float> m = random_floats(static_cast<std::size_t>(batch * c.rows * c.cols), seed++);
      // Masked keys: -inf and BERT's -10000 on the last keys of every mask row.
      for (std::size_t i = 0; i < m.size(); ++i)
        if (c.cols > 2 && static_cast<std::int64_t>(i) % c.cols == c.cols - 1) m[i] = -kInf;
        else if (c.cols > 2 && static_cast<std::int64_t>(i) % c.cols == c.cols - 2) m[i] = -10000.0f;
      const AttentionOperand mask = mask_view(m, c);
      if (c.mask == Mask::Full) {
        std::fill(m.begin(), m.begin() + c.cols, -kInf);  // row 0 of head 0: every key masked -> NaN
        m[static_cast<std::size_t>(2 * c.cols + 3)] = kInf;  // row 2: an infinite score -> NaN
      }
      if (c.rows > 2) q[static_cast<std::size_t>(c.interleaved ? c.heads * c.d : c.d)] = std::nanf("");  // row 1 of head 0
      const AttentionOperand qv = view(q.data(), c, c.rows, c.d), kv = view(k.data(), c, c.cols, c.d),
                             vv = view(v.data(), c, c.cols, c.dv);
      const std::int64_t n = batch * c.rows * c.dv, guard = 64;
      std::vector<float> y(static_cast<std::size_t>(n + guard), 1234.5f);
      const AttentionOperand yv = view(y.data(), c, c.rows, c.dv);
      const AttentionShape shape{batch, c.rows, c.cols, c.d, c.dv, scale};
      kernel(shape, qv, kv, vv, mask, y.data(), yv.batch_offsets, yv.row_stride);

      const std::vector<double> want = attention_in_double(c, qv, kv, vv, mask, scale);
      double worst = 0;
      std::int64_t nan_rows = 0, mismatched_nans = 0;
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t i = 0; i < c.rows; ++i) {
          const float* got = y.data() + yv.batch_offsets[b] + i * yv.row_stride;
          const double* w = want.data() + (b * c.rows + i) * c.dv;
          nan_rows += std::isnan(w[0]) ? 1 : 0;
          for (std::int64_t t = 0; t < c.dv; ++t) {
            if (std::isnan(w[t]) || std::isnan(got[t])) {
              mismatched_nans += std::isnan(w[t]) != std::isnan(got[t]) ? 1 : 0;
              continue;
            }
            worst = std::max(worst, std::abs(got[t] - w[t]));
          }
        }
      // Values and probabilities are at most 1, so Y is too: float rounding of the d-term dot
      // products and the 200-term sums stays well under 2e-6; a wrong row, key or mask is ~0.1.
      CHECK(worst < 2e-6);
      CHECK(mismatched_nans == 0);
      CHECK(nan_rows >= (c.rows > 2 ? 1 : 0) + (c.mask == Mask::Full ? 2 : 0));
      for (std::int64_t g = n; g < n + guard; ++g) CHECK(y[static_cast<std::size_t>(g)] == 1234.5f);
    }
  }
}

TEST_CASE("Attention with interleaved heads matches the reference on oneDNN and on the cpu kernel", "[onednn]") {
  const wpk::cpu::CpuBackend cpu;
  unsigned seed = 3;
  for (const std::vector<std::int64_t>& flags :
       {std::vector<std::int64_t>{1, 1, 1, 1}, {1, 0, 0, 0}, {0, 1, 1, 0}, {0, 0, 0, 1}, {0, 0, 0, 0}})
    for (const std::int64_t seq : {1, 7, 19}) {
      const auto shape = [&](int o, std::int64_t s, std::int64_t d) {
        return flags[static_cast<std::size_t>(o)] ? wpk::Shape{2, s, 3, d} : wpk::Shape{2, 3, s, d};
      };
      OpCase c("Attention", "com.wpk");
      c.input("Q", shape(0, seq, 8)).input("K", shape(1, 13, 8)).input("V", shape(2, 13, 20)).input("M", {2, 1, 1, 13});
      c.attr("scale", 0.35f).attr("interleaved_heads", flags).seed(seed++);
      INFO(c.describe());
      CHECK(c.check(onednn_backend()) == "");
      for (const std::string& config : c.configs(cpu)) CHECK(c.check(cpu, config, 1e-4, 1e-5) == "");
    }
}

TEST_CASE("Attention with a bad interleaved_heads is an error", "[onednn]") {
  struct Bad {
    std::vector<std::int64_t> flags;
    wpk::Shape qkv;
  };
  for (const Bad& bad : {Bad{{1, 1, 1}, {2, 3, 4, 8}}, Bad{{0, 2, 0, 0}, {2, 3, 4, 8}}, Bad{{1, 0, 0, 0}, {3, 4, 8}}}) {
    wpk::Graph g;
    wpk::TensorMap in;
    for (const char* name : {"Q", "K", "V"}) {
      g.add_input(name, wpk::DType::Float32, wpk::DimList(bad.qkv.begin(), bad.qkv.end()));
      in[name] = wpk::Tensor::zeros(wpk::DType::Float32, bad.qkv);
    }
    wpk::Node& att = g.add_node("Attention", {"Q", "K", "V"}, {"Y"},
                                {{"scale", wpk::Attribute(0.5f)}, {"interleaved_heads", wpk::Attribute(bad.flags)}}, "att");
    att.domain = "com.wpk";
    g.add_output("Y");
    INFO(wpk::shape_to_string(bad.flags) << " on rank " << bad.qkv.size());
    CHECK_THROWS_WITH(wpk::Session(g).run(in), Catch::Contains("interleaved_heads"));
  }
}

#endif  // WPK_WITH_ONEDNN
