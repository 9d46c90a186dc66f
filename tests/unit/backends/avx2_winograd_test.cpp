// wpk's Winograd F(4x4, 3x3) convolution for AVX2 CPUs (backends/cpu/avx2_winograd.hpp):
// the kernel on weights it transformed from oneDNN's Acdb16a packing against a plain
// double-precision convolution, at 1-3 threads (tiles split over threads, and output channels
// too when tiles are few), and the shapes it takes. FusedConvs through the backend run on it on
// CPUs without AVX-512 in onednn_test.cpp's Winograd cases. The kernel runs on any CPU with AVX2
// and FMA, so AVX-512 machines test it too, though their sessions do not use it.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <dnnl.hpp>

#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/avx2_tile.hpp"
#include "backends/cpu/avx2_winograd.hpp"
#include "runtime/threads.hpp"
#include "support/conv_kernel_check.hpp"

using wpk::cpu::StreamConvShape;
using wpk::testing::conv_shape;
using wpk::testing::cpu_runs_avx2_kernel;
using wpk::testing::rect_shape;

// Tiles cut by the output's edge (sizes off multiples of 4, across images), padding on every side
// and none, output channels off the 16-channel blocks and the 8-lane vectors, blocks of tiles
// (128 tiles), 16 tiles (output channels split over threads), sums over 1024 input channels, and
// every epilogue; at 1, 2 and 3 threads; with its products on the AVX2 tile and, where AVX-512
// is there, on the streaming kernel's.
TEST_CASE("wpk's AVX2 Winograd kernel matches a plain convolution", "[onednn][conv][avx2]") {
  if (!cpu_runs_avx2_kernel()) {
    WARN("no AVX2 and FMA: wpk's AVX2 Winograd kernel does not run on this CPU");
    return;
  }
  struct Case {
    StreamConvShape s;
    const char* what;
  };
  const Case cases[] = {
      {conv_shape(1, 14, 64, 64, 3, 1, 1, 1), "64 channels at 14x14: 16 tiles"},
      {conv_shape(2, 11, 32, 40, 3, 1, 1, 1), "two 11x11 images, 40 output channels"},
      {conv_shape(1, 18, 48, 70, 3, 1, 0, 1), "no padding, 70 output channels"},
      {rect_shape(1, 13, 22, 40, 24, 3, 3, 1, 1, 0, 2, 1, 0), "asymmetric padding, 13x21 output"},
      {conv_shape(2, 30, 64, 16, 3, 1, 1, 1), "128 tiles in blocks"},
      {conv_shape(1, 16, 1024, 24, 3, 1, 1, 1), "1024 input channels"},
  };
  unsigned seed = 71;
  for (const bool wide : {false, true}) {
    if (wide && !wpk::cpu::stream_conv_available()) continue;  // the wide products need AVX-512
    for (const int threads : {1, 2, 3}) {
      const wpk::OmpThreadScope scope(threads);
      for (const Case& c : cases)
        for (int epilogue = 0; epilogue < 6; ++epilogue) {
          const StreamConvShape& s = c.s;
          REQUIRE(wpk::cpu::avx2_winograd_runs(s));
          wpk::testing::ConvKernelCase k(s, epilogue, seed);
          const auto packed = wpk::testing::pack_weights(k.w, s, dnnl::memory::format_tag::Acdb16a);
          std::vector<float> u(wpk::cpu::avx2_winograd_weights_size(s));
          wpk::cpu::avx2_winograd_weights(s, packed.data(), u.data());
          wpk::cpu::avx2_winograd_conv(s, k.x.data(), u.data(), k.e, k.y.data(), wide);
          INFO(c.what << ", epilogue " << epilogue << ", " << threads << " threads" << (wide ? ", AVX-512 products" : ""));
          const wpk::testing::ConvDiff diff = k.diff();
          // Winograd rounds in the transforms as well as in the sums: on these cases its worst
          // error measured 0.3e-7-1.2e-7 x terms and its relative L2 0.5e-6-2.9e-6, 1.1-2.7x the
          // direct kernel's; a wrong point, lane, tile edge or pixel is O(1).
          const double terms = 9.0 * s.ic;
          CHECK(diff.worst < 2e-7 * terms);
          // Clip's outputs are small beside the sums it clips, so its relative error is larger
          // (measured up to 1.7e-5).
          CHECK(diff.relative_l2 < (epilogue == 2 ? 5e-5 : 5e-6));
          CHECK(k.guards_changed() == 0);
        }
    }
  }
}

TEST_CASE("wpk's AVX2 Winograd kernel runs 3x3 stride-1 undilated convs of 8k input channels", "[cpu][conv][avx2]") {
  using wpk::cpu::avx2_winograd_runs;
  if (!wpk::cpu::avx2_kernels_available()) {
    CHECK(!avx2_winograd_runs(conv_shape(1, 56, 64, 64, 3, 1, 1, 1)));
    return;
  }
  CHECK(avx2_winograd_runs(conv_shape(1, 56, 64, 64, 3, 1, 1, 1)));
  CHECK(avx2_winograd_runs(conv_shape(1, 14, 256, 256, 3, 1, 1, 1)));  // 16 tiles
  CHECK(avx2_winograd_runs(conv_shape(1, 7, 512, 512, 3, 1, 1, 1)));    // 4 tiles: slow, but it runs
  CHECK(avx2_winograd_runs(conv_shape(1, 28, 16, 64, 3, 1, 1, 1)));     // 16 input channels
  CHECK(!avx2_winograd_runs(conv_shape(1, 28, 128, 128, 3, 2, 1, 1)));  // stride 2
  CHECK(!avx2_winograd_runs(conv_shape(1, 28, 128, 128, 3, 1, 2, 2)));  // dilated
  CHECK(!avx2_winograd_runs(conv_shape(1, 28, 128, 128, 5, 1, 2, 1)));  // 5x5
  CHECK(!avx2_winograd_runs(conv_shape(1, 28, 67, 64, 3, 1, 1, 1)));    // off the 8-lane vectors
}

#endif  // WPK_WITH_ONEDNN
