// Batch parts on whole models (runtime/batch_parts.hpp): a model whose rows the optimizer's graph
// keeps apart, run as two parts of a batch of two different rows at once, gives each row what the
// same model gives that row alone; rows that would mix (a node that reads across the batch) make
// these differ, or the model runs whole. The two rows' answers must differ, so that a swap
// cannot pass: MobileNetV2 and EfficientNet-B0 are left out, their exported random weights give
// every input nearly the same answer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "runtime/batch_parts.hpp"
#include "runtime/tuning_db.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
namespace fs = std::filesystem;

namespace {

// A second row unlike the first: floats scaled and shifted, token ids rolled by one.
Tensor other_row(const Tensor& row) {
  Tensor t = row.clone();
  if (t.dtype() == DType::Float32) {
    float* v = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = 0.5f * v[i] + 0.25f;
  } else if (t.dtype() == DType::Int64) {
    std::int64_t* v = t.data<std::int64_t>();
    std::rotate(v, v + 1, v + t.numel());
  }
  return t;
}

Tensor stack(const Tensor& a, const Tensor& b) {
  Shape shape = a.shape();
  shape[0] = 2;
  Tensor out = Tensor::zeros(a.dtype(), shape);
  char* to = static_cast<char*>(out.raw());
  std::copy_n(static_cast<const char*>(a.raw()), a.nbytes(), to);
  std::copy_n(static_cast<const char*>(b.raw()), b.nbytes(), to + a.nbytes());
  return out;
}

// `fixed`: the parts' session has its batch fixed at load to the two rows (SessionOptions::
// fixed_dims), so its parts run one row where the graph declares two; `in_parts`: whether the
// optimized graph still lets them.
void check_parts_match_rows(const std::string& name, bool fixed = false, bool in_parts = true) {
  const fs::path dir = fs::path(WPK_TEST_MODELS_DIR);
  const Graph graph = load((dir / (name + ".onnx")).string());
  SessionOptions whole_options;
  whole_options.threads = 2;
  whole_options.cache_dir = wpk::testing::temp_dir("parts-model-whole");
  const Session whole(graph, whole_options);
  TensorMap first, second, both;
  for (std::size_t i = 0; i < whole.inputs().size(); ++i) {
    const std::string& in = whole.inputs()[i].name;
    first[in] = load_tensor((dir / name / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string());
    second[in] = i == 0 || first[in].dtype() == DType::Float32 ? other_row(first[in]) : first[in];
    both[in] = stack(first[in], second[in]);
  }
  std::vector<const Tensor*> bound;
  for (const ValueInfo& in : whole.inputs()) bound.push_back(&both.at(in.name));
  SessionOptions parts_options = whole_options;
  parts_options.cache_dir = wpk::testing::temp_dir("parts-model-" + name);
  if (fixed) parts_options.fixed_dims = {{graph.value(graph.inputs().front()).dims->front().symbol, 2}};
  TuningDb(parts_options.cache_dir)
      .store(batch_parts_key(model_fingerprint(graph), shape_signature(bound), 2), record_batch_parts(2), 1, "test");
  const Session parts(graph, parts_options);
  RunProfile profile;
  const TensorMap out = parts.run(both, &profile);
  CHECK(profile.batch_parts == (in_parts ? 2 : 1));
  const std::string output = whole.outputs()[0].name;
  const Tensor rows[2] = {whole.run(first).at(output), whole.run(second).at(output)};
  const Tensor& joined = out.at(output);
  REQUIRE(joined.numel() == 2 * rows[0].numel());
  // The two rows' answers differ, so rows swapped or mixed cannot pass.
  CHECK(wpk::testing::relative_l2_error(rows[1], rows[0]) > 1e-2);
  for (int r = 0; r < 2; ++r) {
    const double err = wpk::testing::relative_l2_error(
        Tensor::borrow(joined.data<float>() + r * rows[0].numel(), rows[0].shape()), rows[r]);
    INFO(name << " row " << r << " relative L2 error " << err);
    CHECK(err <= 1e-4);
  }
}

}  // namespace

TEST_CASE("ResNet-50 in batch parts gives each row its own answer", "[model]") { check_parts_match_rows("resnet50"); }
TEST_CASE("SqueezeNet 1.1 in batch parts gives each row its own answer", "[model]") { check_parts_match_rows("squeezenet1_1"); }
TEST_CASE("ResNet-18 in batch parts gives each row its own answer", "[model]") { check_parts_match_rows("resnet18"); }
TEST_CASE("ResNet-18 with its batch fixed at load, in batch parts, gives each row its own answer", "[model]") {
  check_parts_match_rows("resnet18", true);
}
// Its Reshapes' targets fold to the fixed batch, which a part's rows are not: it runs whole.
TEST_CASE("BERT-base-like encoder with its batch fixed at load runs its batch whole, whatever a record says", "[model]") {
  check_parts_match_rows("bert_base", true, false);
}
TEST_CASE("DenseNet-121 in batch parts gives each row its own answer", "[model]") { check_parts_match_rows("densenet121"); }
TEST_CASE("Inception v3 in batch parts gives each row its own answer", "[model]") { check_parts_match_rows("inception_v3"); }
TEST_CASE("BERT-base-like encoder in batch parts gives each row its own answer", "[model]") {
  check_parts_match_rows("bert_base");
}
TEST_CASE("GPT-2-style decoder in batch parts gives each row its own answer", "[model]") {
  check_parts_match_rows("gpt2_small");
}
