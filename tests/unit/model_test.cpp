// Whole models against PyTorch: scripts/export_models.py exports each with fixed seeds and
// stores PyTorch's output for one input; wpk must match within 1e-4 relative L2 error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "core/cpu_features.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
namespace fs = std::filesystem;

namespace {

fs::path models_dir() { return fs::path(WPK_TEST_MODELS_DIR); }

fs::path require_model(const std::string& name) {
  const fs::path p = models_dir() / (name + ".onnx");
  if (!fs::exists(p)) FAIL("missing fixture " << p << ": run scripts/export_models.py " << models_dir().string());
  return p;
}

// The model's output 0 on its stored input, under `options`, and PyTorch's output for it.
std::pair<Tensor, Tensor> run_stored_input(const std::string& name, const SessionOptions& options = {},
                                           const std::string& data_set = "test_data_set_0") {
  Session s(load(require_model(name).string()), options);
  const fs::path data = models_dir() / name / data_set;
  TensorMap inputs;
  for (std::size_t i = 0; i < s.inputs().size(); ++i)
    inputs[s.inputs()[i].name] = load_tensor((data / ("input_" + std::to_string(i) + ".pb")).string());
  return {s.run(inputs).at(s.outputs()[0].name), load_tensor((data / "output_0.pb").string())};
}

void check_against_pytorch(const std::string& name, const std::string& data_set = "test_data_set_0") {
  const auto [actual, expected] = run_stored_input(name, {}, data_set);
  REQUIRE(actual.shape() == expected.shape());
  const double err = wpk::testing::relative_l2_error(actual, expected);
  INFO(name << " relative L2 error " << err);
  CHECK(err <= 1e-4);
}

// The stored input repeated `batch` times: every row of the output must match PyTorch's. Batch
// 2+ takes other kernels than batch 1 (pointwise convs as matmuls, Winograd F(4x4, 3x3)).
void check_batch_against_pytorch(const std::string& name, std::int64_t batch, bool fixed_dims) {
  SessionOptions options;
  Graph graph = load(require_model(name).string());
  if (fixed_dims) options.fixed_dims = {{graph.value(graph.inputs().front()).dims->front().symbol, batch}};
  Session s(std::move(graph), options);
  const fs::path data = models_dir() / name / "test_data_set_0";
  const Tensor one = load_tensor((data / "input_0.pb").string());
  const Tensor expected = load_tensor((data / "output_0.pb").string());
  Shape shape = one.shape();
  shape[0] = batch;
  Tensor many = Tensor::zeros(DType::Float32, shape);
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(one.data<float>(), one.data<float>() + one.numel(), many.data<float>() + b * one.numel());
  const Tensor actual = s.run({{s.inputs()[0].name, many}}).at(s.outputs()[0].name);
  REQUIRE(actual.numel() == batch * expected.numel());
  for (std::int64_t b = 0; b < batch; ++b) {
    const double err = wpk::testing::relative_l2_error(
        Tensor::borrow(actual.data<float>() + b * expected.numel(), expected.shape()), expected);
    INFO(name << " batch " << batch << " row " << b << " relative L2 error " << err);
    CHECK(err <= 1e-4);
  }
}

}  // namespace

TEST_CASE("ResNet-50 matches PyTorch", "[model]") { check_against_pytorch("resnet50"); }
TEST_CASE("ResNet-50 at batch 4, fixed at load, matches PyTorch on every row", "[model]") {
  check_batch_against_pytorch("resnet50", 4, true);
}
TEST_CASE("MobileNetV2 at batch 3 (dynamic) matches PyTorch on every row", "[model]") {
  check_batch_against_pytorch("mobilenet_v2", 3, false);
}
TEST_CASE("MobileNetV2 matches PyTorch", "[model]") { check_against_pytorch("mobilenet_v2"); }
TEST_CASE("BERT-base-like encoder (seq 128) matches PyTorch", "[model]") { check_against_pytorch("bert_base"); }
TEST_CASE("BERT-base-like encoder with its batch fixed at load fuses its attention and matches PyTorch", "[model]") {
  // Fixing the batch must not cost a fusion: the scores' scale is shape arithmetic the folding
  // passes must finish before the element-wise chains look at the scores.
  const auto attentions = [](const Session& s) {
    const PlanSummary plan = s.describe();
    return std::count_if(plan.steps.begin(), plan.steps.end(), [](const StepSummary& p) { return p.op == "com.wpk.Attention"; });
  };
  SessionOptions fixed;
  fixed.fixed_dims = {{"N", 1}};
  const auto [actual, expected] = run_stored_input("bert_base", fixed);
  const double err = wpk::testing::relative_l2_error(actual, expected);
  INFO("relative L2 error " << err);
  CHECK(err <= 1e-4);
  CHECK(attentions(Session(load(require_model("bert_base").string()), fixed)) == 12);
  CHECK(attentions(Session(load(require_model("bert_base").string()))) == 12);
}
TEST_CASE("ResNet-18 matches PyTorch", "[model]") { check_against_pytorch("resnet18"); }
TEST_CASE("DenseNet-121 matches PyTorch", "[model]") { check_against_pytorch("densenet121"); }
TEST_CASE("SqueezeNet 1.1 matches PyTorch", "[model]") { check_against_pytorch("squeezenet1_1"); }
TEST_CASE("Inception v3 (299x299) matches PyTorch", "[model]") { check_against_pytorch("inception_v3"); }
TEST_CASE("EfficientNet-B0 matches PyTorch", "[model]") { check_against_pytorch("efficientnet_b0"); }
TEST_CASE("small ViT (2 layers, hidden 192) matches PyTorch", "[model]") { check_against_pytorch("vit_small"); }
TEST_CASE("small GPT-2-style causal decoder (seq 32) matches PyTorch", "[model]") {
  check_against_pytorch("gpt2_small");
}

TEST_CASE("a greedy decoder exported with loops matches PyTorch, for any number of steps", "[model][control]") {
  // Two Loops: one reads the prompt, one generates (its logits grow by a step per iteration).
  check_against_pytorch("greedy_decoder");
  Session s(load(require_model("greedy_decoder").string()));
  const fs::path data = models_dir() / "greedy_decoder" / "test_data_set_0";
  const Tensor prompt = load_tensor((data / "input_0.pb").string());
  const Tensor six = load_tensor((data / "output_0.pb").string());
  // Generation is deterministic: three steps are the first three of six; none is an empty axis.
  const Tensor three = s.run({{"prompt", prompt}, {"steps", Tensor::scalar<std::int64_t>(3)}}).at("output");
  REQUIRE(three.shape() == Shape{2, 3, 50});
  for (std::int64_t row = 0; row < 2; ++row)
    for (std::int64_t i = 0; i < 3 * 50; ++i)
      REQUIRE(three.data<float>()[row * 150 + i] == Approx(six.data<float>()[row * 300 + i]).margin(1e-4));
  const Tensor none = s.run({{"prompt", prompt}, {"steps", Tensor::scalar<std::int64_t>(0)}}).at("output");
  CHECK(none.shape() == Shape{2, 0, 50});
}

TEST_CASE("a model with If matches PyTorch on both branches", "[model][control]") {
  check_against_pytorch("gated_residual", "test_data_set_0");
  check_against_pytorch("gated_residual", "test_data_set_1");
}

TEST_CASE("an SSDlite detector with its post-processing (NMS, top-k) matches PyTorch", "[model][detection]") {
  Session s(load(require_model("ssdlite").string()));
  const fs::path data = models_dir() / "ssdlite" / "test_data_set_0";
  const TensorMap out = s.run({{s.inputs()[0].name, load_tensor((data / "input_0.pb").string())}});
  const Tensor boxes = load_tensor((data / "output_0.pb").string());
  const Tensor scores = load_tensor((data / "output_1.pb").string());
  const Tensor labels = load_tensor((data / "output_2.pb").string());
  REQUIRE(boxes.shape() == Shape{10, 4});  // PyTorch found ten detections: there is something to compare
  REQUIRE(out.at("boxes").shape() == boxes.shape());
  CHECK(wpk::testing::relative_l2_error(out.at("boxes"), boxes) <= 1e-4);
  CHECK(wpk::testing::relative_l2_error(out.at("scores"), scores) <= 1e-4);
  REQUIRE(out.at("labels").shape() == labels.shape());
  CHECK(std::equal(labels.data<std::int64_t>(), labels.data<std::int64_t>() + labels.numel(),
                   out.at("labels").data<std::int64_t>()));
}

TEST_CASE("a dynamic batch dimension runs at any batch size", "[model]") {
  Session s(load(require_model("resnet18").string()));
  const Tensor one = load_tensor((models_dir() / "resnet18" / "test_data_set_0" / "input_0.pb").string());
  const Tensor ref = s.run({{s.inputs()[0].name, one}}).at(s.outputs()[0].name);
  // Batch of 3: the image, its negation, the image again. Rows 0 and 2 must equal the batch-1 run.
  Shape shape = one.shape();
  shape[0] = 3;
  Tensor three = Tensor::zeros(DType::Float32, shape);
  const std::int64_t n = one.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = one.data<float>()[i];
    three.data<float>()[i] = v;
    three.data<float>()[n + i] = -v;
    three.data<float>()[2 * n + i] = v;
  }
  const Tensor out = s.run({{s.inputs()[0].name, three}}).at(s.outputs()[0].name);
  REQUIRE(out.shape()[0] == 3);
  const std::int64_t classes = ref.numel();
  const Tensor row0 = Tensor::borrow(out.data<float>(), ref.shape());
  const Tensor row1 = Tensor::borrow(out.data<float>() + classes, ref.shape());
  const Tensor row2 = Tensor::borrow(out.data<float>() + 2 * classes, ref.shape());
  CHECK(wpk::testing::relative_l2_error(row0, ref) <= 1e-5);
  CHECK(wpk::testing::relative_l2_error(row2, ref) <= 1e-5);
  CHECK(wpk::testing::relative_l2_error(row1, ref) > 1e-3);  // a different image gives different logits
}

namespace {

// precision = BF16: on CPUs with AVX-512 BF16 or AMX the convolutions and products round their
// inputs to bf16 (the output moves off PyTorch's by more than float32 rounding, but stays within
// `max_error` with the same top class); elsewhere the session runs float32.
void check_bf16_against_pytorch(const std::string& name, double max_error) {
  SessionOptions options;
  options.precision = Precision::BF16;
  const auto [actual, expected] = run_stored_input(name, options);
  REQUIRE(actual.shape() == expected.shape());
  const double err = wpk::testing::relative_l2_error(actual, expected);
  INFO(name << " bf16: relative L2 error " << err);
  const wpk::CpuFeatures& cpu = wpk::cpu_features();
  if (cpu.avx512_bf16 || cpu.amx_bf16) {
    CHECK(err > 1e-4);
    CHECK(err < max_error);
    const auto top = [](const Tensor& t) { return std::max_element(t.data<float>(), t.data<float>() + t.numel()) - t.data<float>(); };
    if (expected.rank() == 2) CHECK(top(actual) == top(expected));
  } else {
    CHECK(err <= 1e-4);
  }
}

}  // namespace

TEST_CASE("ResNet-50 in bf16 stays near PyTorch's float output", "[model][bf16]") { check_bf16_against_pytorch("resnet50", 2e-2); }
TEST_CASE("BERT-base-like encoder in bf16 stays near PyTorch's float output", "[model][bf16]") {
  check_bf16_against_pytorch("bert_base", 2e-2);
}
