// wpk::quantize_model: a float model with Conv -> Relu -> MaxPool -> Conv, a residual Add and a
// Gemm head becomes a QDQ model whose Convs, Add, MaxPool and Gemm wpk runs as integer ops, close
// to the float model; bad requests are clear errors. Whole models: quantized_model_test.cpp.
#include <catch2/catch.hpp>

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

void add_ints(onnx::NodeProto* n, const std::string& name, const std::vector<long>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (long v : values) a->add_ints(v);
}

// x [N, 4, 8, 8] -> Conv(8, 3x3, pad 1) -> Relu -> MaxPool(2x2) = p [N, 8, 4, 4]
// -> Conv(8, 3x3, pad 1) -> Add(p) -> Relu -> Flatten -> Gemm(10) -> y
std::string float_model(const std::string& dir, int opset = 17) {
  OnnxModelBuilder b(opset);
  b.input("x", {-1, 4, 8, 8}).output("y", {-1, 10});
  b.float_initializer("w1", {8, 4, 3, 3}, random_floats(8 * 4 * 9, 1, 0.3f));
  b.float_initializer("b1", {8}, random_floats(8, 2, 0.1f));
  b.float_initializer("w2", {8, 8, 3, 3}, random_floats(8 * 8 * 9, 3, 0.2f));
  b.float_initializer("b2", {8}, random_floats(8, 4, 0.1f));
  b.float_initializer("wf", {10, 128}, random_floats(10 * 128, 5, 0.1f));
  b.float_initializer("bf", {10}, random_floats(10, 6, 0.1f));
  b.node("Conv", {"x", "w1", "b1"}, {"c1"}).node("Relu", {"c1"}, {"r1"}).node("MaxPool", {"r1"}, {"p"});
  b.node("Conv", {"p", "w2", "b2"}, {"c2"}).node("Add", {"c2", "p"}, {"s"}).node("Relu", {"s"}, {"r2"});
  b.node("Flatten", {"r2"}, {"f"}).node("Gemm", {"f", "wf", "bf"}, {"y"});
  auto* nodes = b.model.mutable_graph()->mutable_node();
  add_ints(&nodes->at(0), "pads", {1, 1, 1, 1});
  add_ints(&nodes->at(2), "kernel_shape", {2, 2});
  add_ints(&nodes->at(2), "strides", {2, 2});
  add_ints(&nodes->at(3), "pads", {1, 1, 1, 1});
  onnx::AttributeProto* t = nodes->at(7).add_attribute();
  t->set_name("transB");
  t->set_type(onnx::AttributeProto::INT);
  t->set_i(1);
  return b.save(dir + "/float.onnx");
}

std::vector<TensorMap> samples(int n, unsigned seed) {
  std::vector<TensorMap> out;
  for (int i = 0; i < n; ++i)
    out.push_back({{"x", Tensor::from_vector(random_floats(2 * 4 * 8 * 8, seed + static_cast<unsigned>(i), 1.0f), {2, 4, 8, 8})}});
  return out;
}

int count_op(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

onnx::ModelProto read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto m;
  REQUIRE(m.ParseFromIstream(&in));
  return m;
}

}  // namespace

TEST_CASE("quantize_model writes a QDQ model that runs close to the float one on integer ops", "[quantize][int8]") {
  const std::string dir = wpk::testing::temp_dir("quantize");
  const std::string in = float_model(dir), out = dir + "/int8.onnx";
  for (const char* method : {"minmax", "percentile"}) {
    INFO(method);
    QuantizeOptions o;
    o.method = method;
    const QuantizeReport r = quantize_model(in, samples(4, 10), out, o);
    CHECK(r.convs == 2);
    CHECK(r.products == 1);
    CHECK(r.samples == 4);
    CHECK(r.skipped.empty());
    // x, the two Relu outputs, the MaxPool's output, the second Conv's output, the Gemm's input.
    CHECK(r.activations == 6);
    const onnx::ModelProto m = read(out);
    CHECK(count_op(m, "QuantizeLinear") == 6);
    CHECK(count_op(m, "DequantizeLinear") == 6 + 5);  // and three weights, two biases
    CHECK(count_op(m, "Relu") == 2);                  // still there: other runtimes run it as written
    for (const auto& t : m.graph().initializer()) CHECK(t.name() != "w1");  // the float weights went

    const Session float_session(load(in)), int8_session(load(out));
    const PlanSummary plan = int8_session.describe();
    int integer_ops = 0;
    // The second conv and the add run as one QLinearConvAdd.
    for (const StepSummary& s : plan.steps)
      integer_ops += s.op == "QLinearConv" || s.op == "com.wpk.QLinearAdd" || s.op == "com.wpk.MatMulIntegerToFloat" ?
                         1 : s.op == "com.wpk.QLinearConvAdd" ? 2 : 0;
    CHECK(integer_ops == 4);
    SessionOptions as_written;
    as_written.optimizer.level = OptimizationLevel::None;
    const Session plain(load(out), as_written);
    for (const TensorMap& s : samples(2, 50)) {
      const Tensor want = float_session.run(s).at("y");
      const Tensor got = int8_session.run(s).at("y");
      const double err = wpk::testing::relative_l2_error(got, want);
      INFO("relative L2 to the float model " << err);
      CHECK(err < 0.05);
      // The integer ops against the QDQ graph run op by op: the same codes up to rounding order.
      CHECK(wpk::testing::relative_l2_error(got, plain.run(s).at("y")) < 0.01);
    }
  }
}

TEST_CASE("quantize_model refuses what it cannot quantize with clear errors", "[quantize][int8]") {
  const std::string dir = wpk::testing::temp_dir("quantize_errors");
  const std::string in = float_model(dir), out = dir + "/int8.onnx";
  wpk::testing::expect_error([&] { quantize_model(in, {}, out); }, ErrorCode::InvalidArgument, {"at least one calibration sample"});
  QuantizeOptions o;
  o.method = "entropy";
  wpk::testing::expect_error([&] { quantize_model(in, samples(1, 1), out, o); }, ErrorCode::InvalidArgument, {"not minmax or percentile"});
  o = {};
  o.percentile = 40;
  wpk::testing::expect_error([&] { quantize_model(in, samples(1, 1), out, o); }, ErrorCode::InvalidArgument, {"percentile"});
  wpk::testing::expect_error([&] { quantize_model(dir + "/none.onnx", samples(1, 1), out); }, ErrorCode::NotFound, {"not found"});
  const std::string old = float_model(wpk::testing::temp_dir("quantize_old"), 12);
  wpk::testing::expect_error([&] { quantize_model(old, samples(1, 1), out); }, ErrorCode::Unsupported, {"opset 13"});
  // A sample without the model's input.
  wpk::testing::expect_error([&] { quantize_model(in, {TensorMap{}}, out); }, ErrorCode::InvalidArgument, {});
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("quantize_model with reduce_range keeps every weight code in [-64, 64]", "[quantize][int8]") {
  const std::string dir = wpk::testing::temp_dir("quantize_reduced");
  const std::string in = float_model(dir), out = dir + "/int8.onnx";
  QuantizeOptions o;
  o.reduce_range = true;
  quantize_model(in, samples(2, 30), out, o);
  const onnx::ModelProto m = read(out);
  int weights = 0, widest = 0;
  for (const auto& t : m.graph().initializer()) {
    if (t.data_type() != onnx::TensorProto::INT8 || t.dims_size() < 2) continue;
    ++weights;
    for (unsigned char c : t.raw_data()) widest = std::max(widest, std::abs(static_cast<int>(static_cast<signed char>(c))));
  }
  CHECK(weights == 3);
  CHECK(widest == 64);  // the largest weight of each channel maps to the top code
  const Session float_session(load(in)), int8_session(load(out));
  for (const TensorMap& s : samples(2, 60))
    CHECK(wpk::testing::relative_l2_error(int8_session.run(s).at("y"), float_session.run(s).at("y")) < 0.08);
}
