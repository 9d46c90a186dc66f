// The cpu backend's weight-streaming convolution (backends/cpu/stream_conv.hpp): the kernel
// itself on weights packed in each block layout it reads (wpk's packing checked against
// oneDNN's reorder into the same layout), against a plain double-precision convolution; the
// FusedConv candidates on it against the reference backend; and a session that streams batch 1.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <dnnl.hpp>

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/stream_conv.hpp"
#include "backends/cpu/weight_packing.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "support/onednn_isa.hpp"
#include "support/conv_kernel_check.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using wpk::cpu::StreamConvShape;
using wpk::cpu::stream_conv_runs;

using wpk::testing::conv_shape;
using wpk::testing::onednn_backend;
using wpk::testing::random_floats;

namespace {

dnnl::memory::format_tag block_tag(int block) {
  using Tag = dnnl::memory::format_tag;
  return block == 16 ? Tag::Acdb16a : block == 32 ? Tag::Acdb32a : block == 48 ? Tag::Acdb48a : Tag::Acdb64a;
}

}  // namespace

// Every block layout, output channels off the blocks (masked stores, zero-padded weights), input
// channels off the 64-row k chunks, padding, strides, dilation, a batch, more output pixels than
// one 64-row block, a single pixel (fewer row groups than vectors), and every epilogue.
TEST_CASE("the weight-streaming conv kernel matches a plain convolution", "[onednn][conv][stream]") {
  if (!wpk::cpu::stream_conv_available()) {
    WARN("no AVX-512F: the weight-streaming kernel does not run on this CPU");
    return;
  }
  struct Case {
    StreamConvShape s;
    const char* what;
  };
  const Case cases[] = {
      {conv_shape(1, 7, 67, 70, 3, 1, 1, 1), "3x3, 67 -> 70 channels at 7x7"},
      {conv_shape(1, 9, 130, 96, 3, 2, 1, 1), "3x3 stride 2, two k chunks and a tail"},
      {conv_shape(2, 5, 40, 64, 1, 1, 0, 1), "1x1 at batch 2"},
      {conv_shape(1, 9, 16, 33, 3, 1, 1, 1), "81 output pixels: two row blocks"},
      {conv_shape(1, 1, 96, 80, 1, 1, 0, 1), "one output pixel"},
      {conv_shape(1, 8, 20, 48, 3, 1, 2, 2), "dilation 2"},
  };
  unsigned seed = 7;
  for (const Case& c : cases)
    for (int block : {16, 32, 48, 64})
      for (int epilogue = 0; epilogue < 4; ++epilogue) {
        const StreamConvShape& s = c.s;
        wpk::testing::ConvKernelCase k(s, epilogue, seed);
        const auto packed = wpk::testing::pack_weights(k.w, s, block_tag(block));
        const auto own = wpk::cpu::pack_acdb(k.w.data(), s.oc, s.ic, s.kh, s.kw, block);
        REQUIRE(static_cast<std::size_t>(wpk::cpu::acdb_floats(s.oc, s.ic, s.kh, s.kw, block)) == packed.size());
        REQUIRE(std::equal(packed.begin(), packed.end(), own.get()));
        wpk::cpu::stream_conv(s, k.x.data(), own.get(), block, k.e, k.y.data());
        INFO(c.what << ", block " << block << ", epilogue " << epilogue);
        const wpk::testing::ConvDiff diff = k.diff();
        // float32 sums of up to 1170 products in [-1, 1] against double: rounding alone reaches
        // ~1e-6 relative (more where Clip leaves small outputs); a wrong tap or lane is O(1).
        CHECK(diff.worst < 1e-4);
        CHECK(diff.relative_l2 < 1e-5);
        CHECK(k.guards_changed() == 0);
      }
}

// Threads take runs of whole column groups: the cost model discounts the kernel by how much the
// busiest thread has over an even share.
TEST_CASE("the streaming kernel's work split, as the cost model sees it", "[cpu][conv][stream]") {
  using wpk::cpu::stream_conv_balance;
  CHECK(stream_conv_balance(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 64, 2) == 1.0);  // 4 + 4 groups
  CHECK(stream_conv_balance(conv_shape(1, 7, 2048, 512, 1, 1, 0, 1), 48, 2) == Approx(512.0 / (2 * 272)));
  CHECK(stream_conv_balance(conv_shape(1, 7, 960, 320, 1, 1, 0, 1), 48, 2) == Approx(320.0 / (2 * 176)));
  CHECK(stream_conv_balance(conv_shape(1, 7, 4096, 192, 1, 1, 0, 1), 64, 2) == Approx(0.75));  // 3 groups
  CHECK(stream_conv_balance(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 64, 16) == Approx(0.5));  // 8 groups
  CHECK(stream_conv_runs(conv_shape(8, 7, 512, 512, 3, 1, 1, 1), 64) == wpk::cpu::stream_conv_available());
  CHECK(!stream_conv_runs(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 8));  // a layout it does not read
}

// Through the cpu backend: NHWC FusedConvs on the streaming kernel in each of its block
// configs, with each activation it fuses and a residual.
TEST_CASE("FusedConvs on the streaming kernel match the reference", "[cpu][conv][stream]") {
  if (!wpk::cpu::stream_conv_available()) return;
  const wpk::cpu::CpuBackend cpu;
  unsigned seed = 300;
  for (const std::string kind : {"", "Relu", "Clip"})
    for (bool residual : {false, true}) {
      wpk::testing::OpCase c("FusedConv", "com.wpk");
      c.input("X", {1, 7, 7, 256})
          .constant("W", {272, 256, 3, 3})
          .constant("B", {272})
          .attr("pads", {1, 1, 1, 1})
          .attr("channels_last", std::int64_t{1})
          .activation(kind)
          .seed(seed++);
      if (residual) c.input("Z", {1, 7, 7, 272});
      for (int block : {16, 32, 48, 64}) {
        INFO(c.describe() << " block " << block);
        // 2304-term sums of products in [-1, 1]: near-zero outputs need an absolute tolerance.
        CHECK(c.check(cpu, "kernel=stream_avx512,block=" + std::to_string(block), 1e-4, 1e-4) == "");
      }
    }
}

namespace {

// x [N, 256, 7, 7] -> 3x3 Conv (pads 1, 2.4 MB of weights) + bias -> Relu -> y.
wpk::Graph wide_conv_graph() {
  wpk::Graph g;
  g.add_input("x", wpk::DType::Float32, {wpk::Dim("N"), 256, 7, 7});
  g.add_initializer("w", wpk::Tensor::from_vector(random_floats(256 * 256 * 9, 11), {256, 256, 3, 3}));
  g.add_initializer("b", wpk::Tensor::from_vector(random_floats(256, 12), {256}));
  g.add_node("Conv", {"x", "w", "b"}, {"c"}, {{"pads", wpk::Attribute({1, 1, 1, 1})}});
  g.add_node("Relu", {"c"}, {"y"});
  g.add_output("y");
  return g;
}

std::string conv_backend(const wpk::RunProfile& p) {
  for (const wpk::StepProfile& step : p.steps)
    if (step.op == "com.wpk.FusedConv") return step.backend;
  return "";
}

}  // namespace

// With a symbolic batch the plan prepares the cost model's choice at batch 1 (streaming, on
// AVX-512 at 2 threads), and a second candidate only where that one is predicted well behind at
// a large batch: batch 3 runs on whichever it picks, and each of its items equals the batch-1
// result.
TEST_CASE("a session streams a batch-1 conv and runs larger batches too", "[cpu][conv][stream]") {
  wpk::SessionOptions o;
  o.threads = 2;
  o.profile = true;
  o.use_tuning_records = false;
  const wpk::Session s(wide_conv_graph(), o);
  const auto x = random_floats(3 * 256 * 49, 13);
  const wpk::Tensor all = s.run({{"x", wpk::Tensor::borrow(const_cast<float*>(x.data()), {3, 256, 7, 7})}}).at("y");
  CHECK(!conv_backend(s.last_profile()).empty());
  for (std::int64_t b = 0; b < 3; ++b) {
    const wpk::Tensor one =
        s.run({{"x", wpk::Tensor::borrow(const_cast<float*>(x.data()) + b * 256 * 49, {1, 256, 7, 7})}}).at("y");
    if (wpk::cpu::stream_conv_available()) CHECK(conv_backend(s.last_profile()).rfind("cpu(kernel=stream_avx512", 0) == 0);
    INFO("batch item " << b);
    CHECK(wpk::testing::compare_allclose(wpk::Tensor::borrow(all.data<float>() + b * 256 * 49, {1, 256, 7, 7}), one, 1e-4,
                                         1e-4) == "");
  }
}

#endif  // WPK_WITH_ONEDNN
