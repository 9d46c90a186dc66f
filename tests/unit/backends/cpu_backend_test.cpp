// The cpu backend (backends/cpu): each of its kernels against the reference, at and around the
// shapes it takes; the shapes it declines (Kernel::runs) go to another candidate in a session;
// profiles name the kernel that ran.
#include <catch2/catch.hpp>

#include "backends/cpu/cpu_backend.hpp"
#include "support/backend_tester.hpp"
#include "wpk/wpk.hpp"

using wpk::Attribute;
using wpk::Shape;
using wpk::testing::OpCase;

namespace {

const wpk::cpu::CpuBackend& cpu_backend() {
  static const wpk::cpu::CpuBackend backend;
  return backend;
}

void expect_ok(const OpCase& c, double rtol = 1e-4, double atol = 1e-5) {
  INFO(c.describe());
  CHECK(c.check(cpu_backend(), rtol, atol) == "");
}

// The backend named in the profile of the one step running `op` (after a run).
std::string backend_of(const wpk::Session& s, const std::string& op) {
  for (const wpk::StepProfile& step : s.last_profile().steps)
    if (step.op == op) return step.backend;
  return "(no " + op + " step)";
}

// y = Concat(a, b) along the channels of two [2, 16, 8, 8] inputs: the cpu backend's copy runs it.
wpk::Graph channel_concat() {
  wpk::Graph g;
  g.add_input("a", wpk::DType::Float32, {2, 16, 8, 8});
  g.add_input("b", wpk::DType::Float32, {2, 16, 8, 8});
  g.add_node("Concat", {"a", "b"}, {"y"}, {{"axis", Attribute(std::int64_t{1})}});
  g.add_output("y");
  return g;
}

}  // namespace

// An operand spanning only the trailing dims (16+ floats) runs on wpk's row loop, element by
// element in IEEE float like the reference: the results must be identical, not just close.
// Row lengths on and off the 16-float vectors; enough rows to split over the threads; operands
// in either order.
TEST_CASE("cpu: binary ops over trailing-dim operands match the reference exactly", "[cpu][binary]") {
  for (const std::string op : {"Add", "Sub", "Mul", "Div"})
    for (std::int64_t c : {16, 17, 32, 144}) {
      expect_ok(OpCase(op).input("A", {1, 56, 56, c}).input("B", {1, 1, 1, c}), 0, 0);  // squeeze-excite, NHWC
      expect_ok(OpCase(op).input("A", {2, 3, 5, c}).constant("B", {c}), 0, 0);          // per-channel constant
      expect_ok(OpCase(op).input("A", {4, 3, c}).input("B", {1, 3, c}), 0, 0);          // spans two dims
    }
  for (const std::string op : {"Add", "Mul"}) {  // commutative: the full operand may come second
    expect_ok(OpCase(op).input("A", {1, 1, 1, 48}).input("B", {1, 9, 9, 48}), 0, 0);
    expect_ok(OpCase(op).input("A", {1, 1, 32}).input("B", {7, 1, 32}), 0, 0);
  }
}

TEST_CASE("cpu: the row loop declines other broadcasts, which run elsewhere", "[cpu][binary]") {
  const std::vector<OpCase> declined = {
      OpCase("Add").input("A", {2, 3, 5, 8}).input("B", {1, 1, 1, 8}),     // rows under 16 floats
      OpCase("Sub").input("A", {1, 1, 1, 48}).input("B", {1, 9, 9, 48}),  // full operand second, not commutative
      OpCase("Mul").input("A", {4, 1, 32}).input("B", {1, 3, 32}),        // the output comes from both
      OpCase("Add").input("A", {4, 32}).input("B", {4, 32})};             // no broadcast at all
  for (const OpCase& c : declined) {
    INFO(c.describe());
    CHECK(c.check(cpu_backend(), 0, 0).find("declines") != std::string::npos);
  }
  // In a session each still gives the reference's answer, from whichever candidate runs it.
  wpk::Graph g;
  g.add_input("a", wpk::DType::Float32, {4, 1, 32});
  g.add_input("b", wpk::DType::Float32, {1, 3, 32});
  g.add_node("Mul", {"a", "b"}, {"y"});
  g.add_output("y");
  const wpk::Session s(g);
  const wpk::Tensor a = wpk::Tensor::from_vector(std::vector<float>(4 * 32, 2.0f), {4, 1, 32});
  const wpk::Tensor b = wpk::Tensor::from_vector(std::vector<float>(3 * 32, 3.0f), {1, 3, 32});
  const wpk::Tensor y = s.run({{"a", a}, {"b", b}}).at("y");
  REQUIRE(y.shape() == Shape{4, 3, 32});
  CHECK(y.data<float>()[4 * 3 * 32 - 1] == 6.0f);
  // The same with a constant operand of rank 3 (BERT's position embeddings): a constant no
  // kernel packs leaves the node every backend's candidate, so one runs what the loop declines.
  wpk::Graph h;
  h.add_input("a", wpk::DType::Float32, {4, 1, 32});
  h.add_initializer("b", b);
  h.add_node("Mul", {"a", "b"}, {"y"});
  h.add_output("y");
  const wpk::Session t(h);
  const wpk::Tensor z = t.run({{"a", a}}).at("y");
  REQUIRE(z.shape() == Shape{4, 3, 32});
  CHECK(z.data<float>()[4 * 3 * 32 - 1] == 6.0f);
}

TEST_CASE("cpu: ConcatBatchNorm matches the reference in both layouts", "[cpu][concat]") {
  unsigned seed = 40;
  for (int channels_last : {0, 1})
    for (const std::string act : {"", "Relu"})
      for (std::vector<std::int64_t> parts : {std::vector<std::int64_t>{17}, {64, 32}, {1, 16, 15, 33}}) {
        std::int64_t c = 0;
        for (std::int64_t p : parts) c += p;
        OpCase op("ConcatBatchNorm", "com.wpk");
        op.constant("scale", {c}).constant("B", {c}).constant("mean", {c})
            .constant("var", wpk::Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(c), 0.8f), {c}));
        for (std::size_t i = 0; i < parts.size(); ++i)
          op.input("X" + std::to_string(i), channels_last ? Shape{2, 5, 3, parts[i]} : Shape{2, parts[i], 5, 3});
        expect_ok(op.attr("activation", act).attr("epsilon", 1e-3f).attr("channels_last", std::int64_t{channels_last})
                      .seed(seed++));
      }
}

TEST_CASE("disabled_kernels leaves a backend, or one of its kernels, out", "[cpu][options]") {
  const wpk::Graph g = channel_concat();
  const wpk::Tensor x = wpk::Tensor::zeros(wpk::DType::Float32, {2, 16, 8, 8});
  wpk::SessionOptions o;
  o.profile = true;
  const wpk::Session plain(g, o);
  plain.run({{"a", x}, {"b", x}});
  const std::string by_default = backend_of(plain, "Concat");
  CHECK(by_default == "cpu:any_concat");
  for (const std::string disabled : {"cpu", "cpu:any_concat"}) {
    INFO(disabled);
    o.disabled_kernels = {disabled};
    const wpk::Session s(g, o);
    const wpk::Tensor y = s.run({{"a", x}, {"b", x}}).at("y");
    CHECK(backend_of(s, "Concat").rfind("cpu", 0) == std::string::npos);
    CHECK(y.shape() == Shape{2, 32, 8, 8});
  }
  for (const std::string bad : {"gpu", "cpu:f32_bogus", "reference:eigen"}) {
    o.disabled_kernels = {bad};
    try {
      const wpk::Session s(g, o);
      FAIL("an unknown backend or kernel was accepted: " + bad);
    } catch (const wpk::Error& e) {
      CHECK(e.code() == wpk::ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find("'" + bad + "'") != std::string::npos);
    }
  }
#ifdef WPK_WITH_ONEDNN
  o.disabled_kernels = {"cpu", "onednn", "reference"};
#else
  o.disabled_kernels = {"cpu", "reference"};
#endif
  try {
    const wpk::Session s(g, o);
    FAIL("a model no candidate runs was accepted");
  } catch (const wpk::Error& e) {
    CHECK(e.code() == wpk::ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("disabled") != std::string::npos);
  }
}
