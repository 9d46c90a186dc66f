// Whole models quantized by wpk::quantize_model (int8 QDQ, calibrated on the stored PyTorch
// input) and run on wpk's integer ops: close to PyTorch's float output, and to the same QDQ
// model run op by op as written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
namespace fs = std::filesystem;

namespace {

void check_quantized(const std::string& name, int convs, double max_error) {
  const fs::path model = fs::path(WPK_TEST_MODELS_DIR) / (name + ".onnx");
  if (!fs::exists(model)) FAIL("missing fixture " << model << ": run scripts/export_models.py " << WPK_TEST_MODELS_DIR);
  const fs::path data = fs::path(WPK_TEST_MODELS_DIR) / name / "test_data_set_0";
  const Graph graph = load(model.string());
  const std::string input = graph.value(graph.inputs().front()).name;
  const TensorMap sample = {{input, load_tensor((data / "input_0.pb").string())}};
  const std::string out = wpk::testing::temp_dir("quantized_" + name) + "/int8.onnx";
  const QuantizeReport report = quantize_model(model.string(), {sample}, out);
  CHECK(report.convs == convs);
  CHECK(report.skipped.empty());

  const Session int8(load(out));
  int integer_convs = 0;
  // A residual block's last conv runs with its shortcut add as one QLinearConvAdd.
  for (const StepSummary& s : int8.describe().steps) integer_convs += s.op == "QLinearConv" || s.op == "com.wpk.QLinearConvAdd";
  CHECK(integer_convs == convs);
  const Tensor expected = load_tensor((data / "output_0.pb").string());
  const Tensor got = int8.run(sample).begin()->second;
  REQUIRE(got.shape() == expected.shape());
  const double err = wpk::testing::relative_l2_error(got, expected);
  INFO(name << " int8: relative L2 to PyTorch's float output " << err);
  CHECK(err < max_error);
  const auto top = [](const Tensor& t) { return std::max_element(t.data<float>(), t.data<float>() + t.numel()) - t.data<float>(); };
  CHECK(top(got) == top(expected));

  SessionOptions as_written;
  as_written.optimizer.level = OptimizationLevel::None;
  const Tensor plain = Session(load(out), as_written).run(sample).begin()->second;
  const double drift = wpk::testing::relative_l2_error(got, plain);
  INFO("integer ops against the QDQ graph run op by op: relative L2 " << drift);
  CHECK(drift < 0.01);
}

}  // namespace

TEST_CASE("ResNet-18 quantized to int8 by wpk stays near PyTorch's float output", "[model][int8]") {
  check_quantized("resnet18", 20, 0.05);
}
TEST_CASE("MobileNetV2 quantized to int8 by wpk stays near PyTorch's float output", "[model][int8]") {
  check_quantized("mobilenet_v2", 52, 0.05);
}
