#include "backends/cpu/conv_config.hpp"

#include <algorithm>
#include <cmath>

#include "backends/cpu/avx2_winograd.hpp"

namespace wpk::cpu {

std::string ConvConfig::text() const {
  switch (kernel) {
    case Kernel::DirectAvx2:
      return "kernel=direct_avx2,group_kb=" + std::to_string(group_kb) + ",pixels=" + std::to_string(pixels);
    case Kernel::WinogradAvx2: return "kernel=winograd_avx2";
    case Kernel::WinogradAvx512: return "kernel=winograd_avx512";
    case Kernel::StreamAvx512: return "kernel=stream_avx512,block=" + std::to_string(block);
  }
  return "";
}

std::optional<ConvConfig> ConvConfig::parse(const std::string& text) {
  for (const ConvConfig& c : all_conv_configs())
    if (c.text() == text) return c;
  return std::nullopt;
}

const std::vector<ConvConfig>& all_conv_configs() {
  static const std::vector<ConvConfig> configs = [] {
    std::vector<ConvConfig> out;
    // The direct kernel first: it runs every shape, so it is the default where nothing can be
    // ranked (input shapes unknown at load).
    for (std::int64_t group_kb : {192, 96, 384})
      for (std::int64_t pixels : {96, 48, 192}) {
        ConvConfig c;
        c.group_kb = group_kb;
        c.pixels = pixels;
        out.push_back(c);
      }
    for (auto kernel : {ConvConfig::Kernel::WinogradAvx2, ConvConfig::Kernel::WinogradAvx512}) {
      ConvConfig w;
      w.kernel = kernel;
      out.push_back(w);
    }
    for (int block : {64, 48, 32, 16}) {
      ConvConfig c;
      c.kernel = ConvConfig::Kernel::StreamAvx512;
      c.block = block;
      out.push_back(c);
    }
    return out;
  }();
  return configs;
}

std::string conv_kernel_name(ConvConfig::Kernel kernel) {
  switch (kernel) {
    case ConvConfig::Kernel::DirectAvx2: return "f32_conv_nhwc__avx2_6x16";
    case ConvConfig::Kernel::WinogradAvx2: return "f32_conv_winograd4x3_nhwc__avx2_6x16";
    case ConvConfig::Kernel::WinogradAvx512: return "f32_conv_winograd4x3_nhwc__avx512_7x64";
    case ConvConfig::Kernel::StreamAvx512: return "f32_conv_stream_nhwc__avx512_7x64";
  }
  return "";
}

// The efficiencies below are shares of the vectors' FMA peak each kernel sustains where its
// operands are in cache, as measured on its shapes (docs/backend-cpu.md); the memory terms carry
// what happens when they are not.
KernelProfile describe_conv(const ConvConfig& config, const StreamConvShape& s, int threads) {
  KernelProfile p;
  p.name = conv_kernel_name(config.kernel);
  const double rows = static_cast<double>(s.n * s.oh * s.ow);
  const double k_rows = static_cast<double>(s.kh * s.kw * s.ic);
  const double weight_bytes = 4.0 * static_cast<double>(s.oc) * k_rows;
  switch (config.kernel) {
    case ConvConfig::Kernel::DirectAvx2: {
      p.vector_bits = 256;
      // Each tap's loop runs over the input channels: a stem conv's 3 leaves the tile mostly
      // loop overhead. A 1x1 has no taps to amortise reloading its inputs per channel block.
      p.efficiency = 0.6 * std::min(1.0, static_cast<double>(s.ic) / 16.0) * (s.kh * s.kw == 1 ? 0.85 : 1.0);
      // Knobs off the usual favourite cost a little in the model: measurement decides them.
      if (config.group_kb != 192 || config.pixels != 96) p.efficiency *= 0.97;
      break;
    }
    case ConvConfig::Kernel::WinogradAvx2:
    case ConvConfig::Kernel::WinogradAvx512: {
      // The wide form's share of its wider peak is lower: its products go through the streaming
      // kernel's sums in memory, and its epilogue is the narrow one's on two halves.
      const bool wide = config.kernel == ConvConfig::Kernel::WinogradAvx512;
      p.vector_bits = wide ? 512 : 256;
      p.work_scale = 0.25;  // 2.25 multiply-adds per output where direct takes 9, plus transforms
      // A block of tiles reads all its thread's transformed weights: under ~8 tiles a thread the
      // 36 products are too skinny to reuse them.
      const double tiles = static_cast<double>(avx2_winograd_tiles(s));
      p.efficiency = (wide ? 0.3 : 0.45) * std::min(1.0, tiles / (8.0 * std::max(1, threads)));
      p.extra_bytes = 3 * weight_bytes;  // the transformed weights are 4x the direct ones
      break;
    }
    case ConvConfig::Kernel::StreamAvx512: {
      p.vector_bits = 512;
      p.overlaps_memory = true;  // it prefetches the next chunk of weights while computing
      // Per output it pays a fixed cost (zeroing and storing its sums) that short k loops do
      // not hide; past 64 rows its tiles re-read each chunk of weights from L2 (ResNet-50's
      // layer4 at batch 8: 7-20% behind oneDNN's kernels, Xeon with AVX-512).
      p.efficiency = 0.6 * stream_conv_balance(s, config.block, threads) * k_rows / (k_rows + 256.0) *
                     (rows > 64 ? 0.85 : 1.0);
      break;
    }
  }
  return p;
}

}  // namespace wpk::cpu
