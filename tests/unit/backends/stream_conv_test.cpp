// The oneDNN backend's weight-streaming convolution (backends/cpu/stream_conv.hpp): the kernel
// itself on weights packed by oneDNN in each block layout it reads, against a plain
// double-precision convolution; and the FusedConv kernel that picks it, against the reference
// backend and against oneDNN's primitive on the same packed weights.
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <dnnl.hpp>

#include <vector>

#include "backends/cpu/avx2_conv.hpp"
#include "backends/cpu/stream_conv.hpp"
#include "backends/onednn/onednn_common.hpp"
#include "runtime/threads.hpp"
#include "support/backend_tester.hpp"
#include "support/onednn_isa.hpp"
#include "support/conv_kernel_check.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using wpk::cpu::StreamConvShape;

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
        REQUIRE(wpk::onednn::stream_weights_block(
                    dnnl::memory::desc({s.oc, s.ic, s.kh, s.kw}, dnnl::memory::data_type::f32, block_tag(block)), s.oc,
                    s.ic, s.kh, s.kw) == block);
        wpk::cpu::stream_conv(s, k.x.data(), packed.data(), block, k.e, k.y.data());
        INFO(c.what << ", block " << block << ", epilogue " << epilogue);
        const wpk::testing::ConvDiff diff = k.diff();
        // float32 sums of up to 1170 products in [-1, 1] against double: rounding alone reaches
        // ~1e-6 relative (more where Clip leaves small outputs); a wrong tap or lane is O(1).
        CHECK(diff.worst < 1e-4);
        CHECK(diff.relative_l2 < 1e-5);
        CHECK(k.guards_changed() == 0);
      }
}

TEST_CASE("streaming pays only for few output pixels, large weights over many k rows and an even split", "[onednn][conv][stream]") {
  if (!wpk::cpu::stream_conv_available()) return;
  using wpk::cpu::stream_conv_pays;
  CHECK(stream_conv_pays(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 32, 2));     // ResNet-50's layer4, 9.4 MB
  CHECK(stream_conv_pays(conv_shape(1, 7, 2048, 512, 1, 1, 0, 1), 48, 2));    // 240 + 272 channels: 6% over
  CHECK(!stream_conv_pays(conv_shape(8, 7, 512, 512, 3, 1, 1, 1), 32, 2));    // batch 8: 392 pixels
  CHECK(!stream_conv_pays(conv_shape(1, 14, 256, 256, 3, 1, 1, 1), 32, 2));   // 196 pixels
  CHECK(stream_conv_pays(conv_shape(1, 8, 384, 384, 3, 1, 1, 1), 32, 2));     // 64 pixels, 5.3 MB
  CHECK(!stream_conv_pays(conv_shape(1, 7, 960, 320, 1, 1, 0, 1), 48, 2));    // 144 + 176 channels
  CHECK(!stream_conv_pays(conv_shape(1, 7, 512, 256, 1, 1, 0, 1), 64, 2));    // 0.5 MB
  CHECK(!stream_conv_pays(conv_shape(1, 7, 320, 1280, 1, 1, 0, 1), 64, 2));   // 1.6 MB over 320 k rows
  CHECK(stream_conv_pays(conv_shape(1, 7, 512, 2048, 1, 1, 0, 1), 64, 2));    // 4 MB over 512 k rows
  CHECK(!stream_conv_pays(conv_shape(1, 7, 4096, 192, 1, 1, 0, 1), 64, 2));   // 3 groups for 2 threads
  CHECK(!stream_conv_pays(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 32, 16));   // 8 groups for 16 threads
  CHECK(!stream_conv_pays(conv_shape(1, 7, 512, 512, 3, 1, 1, 1), 8, 2));     // a layout it does not read
}

namespace {

// Whether the conv kernel streams an NHWC 3x3 conv (pads 1, stride 1) at `threads`: what
// oneDNN's direct kernel packs its weights as, and whether streaming pays for that layout.
bool expect_stream(std::int64_t size, std::int64_t ic, std::int64_t oc, int threads) {
  if (!wpk::cpu::stream_conv_available()) return false;
  using Tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc src({1, ic, size, size}, f32, Tag::nhwc), dst({1, oc, size, size}, f32, Tag::nhwc),
      weights({oc, ic, 3, 3}, f32, Tag::any), bias({oc}, f32, Tag::x);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      weights, bias, dst, {1, 1}, {1, 1}, {1, 1}),
      eng);
  const int block = wpk::onednn::stream_weights_block(pd.weights_desc(), oc, ic, 3, 3);
  return wpk::cpu::stream_conv_pays(conv_shape(1, size, ic, oc, 3, 1, 1, 1), block, threads);
}

}  // namespace

// Through the backend: NHWC FusedConvs whose weights oneDNN packs in blocks run on the streaming
// kernel when it pays (at 2 threads, set here: the plan follows the calling thread's OpenMP
// count), with each activation it fuses and a residual.
TEST_CASE("FusedConvs on the streaming kernel match the reference", "[onednn][conv][stream]") {
  const wpk::OmpThreadScope two_threads(2);
  if (!expect_stream(7, 256, 272, 2)) WARN("oneDNN packs these weights in a layout the streaming kernel does not read");
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
      INFO(c.describe());
      // 2304-term sums of products in [-1, 1]: near-zero outputs need an absolute tolerance.
      CHECK(c.check(onednn_backend(), 1e-4, 1e-4) == "");
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

// Batch 1 (49 output pixels) streams; batch 3 of the same session runs oneDNN's primitive on the
// weights packed at load (both read one copy), and each of its items equals the batch-1 result.
// (Without AVX-512 nothing streams and both run on wpk's AVX2 kernel, avx2_conv.hpp.)
TEST_CASE("a session streams a batch-1 conv and runs larger batches on oneDNN", "[onednn][conv][stream]") {
  wpk::SessionOptions o;
  o.threads = 2;
  o.profile = true;
  const wpk::Session s(wide_conv_graph(), o);
  const auto x = random_floats(3 * 256 * 49, 13);
  const wpk::Tensor all = s.run({{"x", wpk::Tensor::borrow(const_cast<float*>(x.data()), {3, 256, 7, 7})}}).at("y");
  const std::string direct = wpk::cpu::avx2_conv_available() ? "onednn:avx2" : "onednn";
  CHECK(conv_backend(s.last_profile()) == direct);
  const bool streams = expect_stream(7, 256, 256, 2);
  if (!streams) WARN("this CPU or oneDNN build does not stream the test conv; only results are compared");
  for (std::int64_t b = 0; b < 3; ++b) {
    const wpk::Tensor one =
        s.run({{"x", wpk::Tensor::borrow(const_cast<float*>(x.data()) + b * 256 * 49, {1, 256, 7, 7})}}).at("y");
    CHECK(conv_backend(s.last_profile()) == (streams ? "onednn:stream" : direct));
    INFO("batch item " << b);
    CHECK(wpk::testing::compare_allclose(wpk::Tensor::borrow(all.data<float>() + b * 256 * 49, {1, 256, 7, 7}), one, 1e-4,
                                         1e-4) == "");
  }
}

#endif  // WPK_WITH_ONEDNN
