#pragma once
// The cpu backend's conv candidates as configs ("kernel=stream_avx512,block=64"): which of wpk's
// conv kernels, with which knobs, and how each computes a given conv for the cost model.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/stream_conv.hpp"
#include "backends/kernel.hpp"

namespace wpk::cpu {

struct ConvConfig {
  enum class Kernel { DirectAvx2, WinogradAvx2, WinogradAvx512, StreamAvx512 };
  Kernel kernel = Kernel::DirectAvx2;
  std::int64_t group_kb = 192;  // direct: weight bytes (KiB) of a group of channel blocks kept in L2
  std::int64_t pixels = 96;     // direct: output pixels per block
  int block = 64;               // stream: output channels per block of the packed weights

  std::string text() const;
  // nullopt for text that is no config of these kernels.
  static std::optional<ConvConfig> parse(const std::string& text);
};

// Every config the search may pick: the direct kernel's default knobs first (it runs every
// shape), then the rest of its knobs, Winograd, streaming.
const std::vector<ConvConfig>& all_conv_configs();

// "f32_conv_nhwc__avx2_6x16": what profiles and disabled_kernels call the kernel.
std::string conv_kernel_name(ConvConfig::Kernel kernel);

// How `config` computes conv `s` on `threads` threads, for the cost model.
KernelProfile describe_conv(const ConvConfig& config, const StreamConvShape& s, int threads);

// What the conv's node fuses after the sums (bias, residual, activation); nullopt for an
// activation no kernel here applies (only Relu, Clip, Gelu and GeluTanh are).
std::optional<StreamConvEpilogue> conv_epilogue(const Node& node, const Tensor& bias);

// The geometry of a conv with weights `ws` (OIHW) on NHWC input `x`, from the node's strides,
// pads and dilations; fails naming the node when they do not fit.
StreamConvShape conv_geometry(const KernelContext& ctx, const Shape& x, const Shape& ws);
// The same for a kernel's runs(): the geometry of input 0 of `inputs`, nullopt where it is
// missing or does not fit the weights.
std::optional<StreamConvShape> input_conv_geometry(const Node& node, const std::vector<const Tensor*>& inputs,
                                                   const Shape& ws);

}  // namespace wpk::cpu
