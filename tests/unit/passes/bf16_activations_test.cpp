// keep_bf16_between_products: under SessionOptions::precision = BF16 the values that pass only
// between bf16 convolutions and products become bfloat16, and a session that keeps them runs
// them on the backend that says it takes them, near the float32 result.
#include "core/cpu_features.hpp"
#include "graph/dtype_inference.hpp"
#include "graph/passes/pass.hpp"
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

std::map<std::string, Attribute> padded() { return {{"pads", Attribute(std::vector<std::int64_t>{1, 1, 1, 1})}}; }

// x -> conv1 -> c1 -> conv2 -> c2 -+-> conv3 -> c3 -> Relu -> r (output)
//                                  \-> conv4 (FusedConv, c2 also its residual) -> c4 -> conv5 -> y (output)
Graph chain() {
  Graph g;
  g.add_input("x", DType::Float32, {1, 8, 6, 6});
  for (int i = 1; i <= 5; ++i) g.add_initializer("w" + std::to_string(i), random_tensor({8, 8, 3, 3}, static_cast<unsigned>(i), -0.3f, 0.3f));
  g.add_node("Conv", {"x", "w1"}, {"c1"}, padded(), "conv1");
  g.add_node("Conv", {"c1", "w2"}, {"c2"}, padded(), "conv2");
  g.add_node("Conv", {"c2", "w3"}, {"c3"}, padded(), "conv3");
  g.add_node("Relu", {"c3"}, {"r"});
  g.add_node("FusedConv", {"c2", "w4", "", "c2"}, {"c4"}, padded(), "conv4").domain = kWpkDomain;
  g.add_node("Conv", {"c4", "w5"}, {"y"}, padded(), "conv5");
  g.add_output("r");
  g.add_output("y");
  infer_dtypes(g);
  return g;
}

// A residual stream: x -> conv1 -> a -> block(a) -> b -> block(b) -> c -> `tail` -> out, each
// block a FusedConv adding its input as the residual; the tail a Relu or a Conv.
Graph residual_stream(const std::string& tail) {
  Graph g;
  g.add_input("x", DType::Float32, {1, 8, 6, 6});
  for (int i = 1; i <= 4; ++i) g.add_initializer("w" + std::to_string(i), random_tensor({8, 8, 3, 3}, static_cast<unsigned>(i), -0.3f, 0.3f));
  g.add_node("Conv", {"x", "w1"}, {"a"}, padded());
  g.add_node("FusedConv", {"a", "w2", "", "a"}, {"b"}, padded()).domain = kWpkDomain;
  g.add_node("FusedConv", {"b", "w3", "", "b"}, {"c"}, padded()).domain = kWpkDomain;
  if (tail == "Relu") g.add_node("Relu", {"c"}, {"out"});
  else g.add_node("Conv", {"c", "w4"}, {"out"}, padded());
  g.add_output("out");
  infer_dtypes(g);
  return g;
}

// Sessions keep bf16 values only on CPUs with AVX-512 BF16 or AMX; elsewhere they run float32.
bool cpu_computes_bf16() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512_bf16 || cpu.amx_bf16;
}

DType dtype_of(const Graph& g, const std::string& value) { return g.value(g.value_id(value)).dtype; }

int keep_all(Graph& g) {
  passes::mark_bf16_compute(g);
  return passes::keep_bf16_between_products(g, [](const Node&) { return true; });
}

}  // namespace

TEST_CASE("keep_bf16_between_products keeps in bf16 only what bf16 products alone read", "[passes][bf16]") {
  Graph g = chain();
  CHECK(keep_all(g) == 3);
  CHECK(dtype_of(g, "c1") == DType::BFloat16);  // conv1 -> conv2 only
  CHECK(dtype_of(g, "c2") == DType::BFloat16);  // conv3's and conv4's input, conv4's residual
  CHECK(dtype_of(g, "c4") == DType::BFloat16);  // written with a bf16 residual, read by conv5
  CHECK(dtype_of(g, "c3") == DType::Float32);   // read by the Relu
  CHECK(dtype_of(g, "y") == DType::Float32);    // a graph output
  CHECK(has_bf16_activations(g.nodes()[0], g));
  CHECK(has_bf16_activations(g.nodes()[2], g));
  CHECK_FALSE(has_bf16_activations(g.nodes()[3], g));  // the Relu is not marked
}

TEST_CASE("keep_bf16_between_products keeps a residual stream in one dtype from end to end", "[passes][bf16]") {
  Graph into_conv = residual_stream("Conv");
  CHECK(keep_all(into_conv) == 3);
  for (const char* v : {"a", "b", "c"}) CHECK(dtype_of(into_conv, v) == DType::BFloat16);
  // c is read by a Relu, so it stays float32; b is c's residual, a is b's: both stay too.
  Graph into_relu = residual_stream("Relu");
  CHECK(keep_all(into_relu) == 0);
  for (const char* v : {"a", "b", "c"}) CHECK(dtype_of(into_relu, v) == DType::Float32);
}

TEST_CASE("keep_bf16_between_products leaves a value alone where either end's backend does not take bf16", "[passes][bf16]") {
  for (const std::string refused : {"conv1", "conv2"}) {
    Graph g = chain();
    passes::mark_bf16_compute(g);
    passes::keep_bf16_between_products(g, [&](const Node& n) { return n.name != refused; });
    CHECK(dtype_of(g, "c1") == DType::Float32);
  }
  Graph unmarked = chain();  // nothing marked: nothing kept, whatever the backends take
  CHECK(passes::keep_bf16_between_products(unmarked, [](const Node&) { return true; }) == 0);
  CHECK(dtype_of(unmarked, "c1") == DType::Float32);
}

TEST_CASE("a bf16 session keeps conv-to-conv values in bf16 on oneDNN, near the float32 result", "[passes][bf16][onednn]") {
  // On a CPU without bf16: nothing kept, the float32 result.
  const bool bf16_cpu = cpu_computes_bf16();
  // Three convs in a row on NHWC, the second adding the first one's output as its residual: the
  // two values between them are kept, the residual added in bf16.
  Graph g;
  g.add_input("x", DType::Float32, {1, 16, 9, 9});
  for (int i = 1; i <= 3; ++i) g.add_initializer("w" + std::to_string(i), random_tensor({16, 16, 3, 3}, static_cast<unsigned>(i), -0.2f, 0.2f));
  g.add_initializer("b2", random_tensor({16}, 7));
  g.add_node("Conv", {"x", "w1"}, {"c1"}, padded());
  g.add_node("Conv", {"c1", "w2", "b2"}, {"c2"}, padded());
  g.add_node("Add", {"c2", "c1"}, {"s2"});
  g.add_node("Relu", {"s2"}, {"r2"});
  g.add_node("Conv", {"r2", "w3"}, {"y"}, padded());
  g.add_output("y");
  const Tensor x = random_tensor({1, 16, 9, 9}, 11);

  SessionOptions fp32;
  const Tensor want = Session(g, fp32).run({{"x", x}}).at("y");
  SessionOptions bf16;
  bf16.precision = Precision::BF16;
  bf16.profile = true;
  Session s(g, bf16);
  const Tensor got = s.run({{"x", x}}).at("y");
  int kept = 0;
  for (const ValueInfo& v : s.graph().values()) kept += v.dtype == DType::BFloat16;
  CHECK(kept == (bf16_cpu ? 2 : 0));
  int residuals = 0;
  for (const Node& n : s.graph().nodes()) residuals += has_fused_residual(n) && has_bf16_activations(n, s.graph());
  CHECK(residuals == (bf16_cpu ? 1 : 0));
  for (const StepProfile& step : s.last_profile().steps)
    if (bf16_cpu && step.op.find("Conv") != std::string::npos) CHECK(step.backend.rfind("onednn", 0) == 0);
  const double err = relative_l2_error(got, want);
  INFO("relative L2 to float32: " << err);
  if (bf16_cpu) CHECK(err > 1e-5);  // bf16 rounding shows
  CHECK(err < (bf16_cpu ? 2e-2 : 1e-6));

  // oneDNN left out: nothing can take bf16 values, so none is kept and the rest still runs.
  bf16.disabled_kernels = {"onednn"};
  Session without(g, bf16);
  for (const ValueInfo& v : without.graph().values()) CHECK(v.dtype != DType::BFloat16);
  CHECK(relative_l2_error(without.run({{"x", x}}).at("y"), want) < 2e-2);
}

TEST_CASE("a bf16 session keeps a product's residual stream in bf16 and runs it", "[passes][bf16][onednn]") {
  const bool bf16_cpu = cpu_computes_bf16();  // without: nothing kept, the float32 result
  // h = x W0; h2 = h W1 + b + h (a FusedMatMul with h as its residual); y = h2 W2.
  Graph g;
  g.add_input("x", DType::Float32, {5, 32});
  for (int i = 0; i < 3; ++i) g.add_initializer("w" + std::to_string(i), random_tensor({32, 32}, static_cast<unsigned>(20 + i), -0.2f, 0.2f));
  g.add_initializer("b", random_tensor({32}, 30));
  g.add_node("MatMul", {"x", "w0"}, {"h"});
  g.add_node("MatMul", {"h", "w1"}, {"p"});
  g.add_node("Add", {"p", "b"}, {"pb"});
  g.add_node("Add", {"pb", "h"}, {"h2"});
  g.add_node("MatMul", {"h2", "w2"}, {"y"});
  g.add_output("y");
  const Tensor x = random_tensor({5, 32}, 31);
  const Tensor want = Session(g).run({{"x", x}}).at("y");
  SessionOptions bf16;
  bf16.precision = Precision::BF16;
  Session s(g, bf16);
  int kept = 0, residuals = 0;
  for (const ValueInfo& v : s.graph().values()) kept += v.dtype == DType::BFloat16;
  for (const Node& n : s.graph().nodes()) residuals += has_fused_residual(n) && has_bf16_activations(n, s.graph());
  CHECK(kept == (bf16_cpu ? 2 : 0));
  CHECK(residuals == (bf16_cpu ? 1 : 0));
  CHECK(relative_l2_error(s.run({{"x", x}}).at("y"), want) < (bf16_cpu ? 2e-2 : 1e-6));
}
