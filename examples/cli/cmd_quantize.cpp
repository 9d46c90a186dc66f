// wpk quantize MODEL OUT --calibrate DIR [--method minmax|percentile] [--percentile P] [--reduce-range] [--threads N]:
// static int8 QDQ quantization (wpk/quantize.hpp) calibrated on DIR's inputs, in the ONNX
// test-data layout (input_0.pb, ... in the model's input order): DIR itself, or each of its
// test_data_set_* folders, is one sample. Then the quantized model's outputs on those samples
// are compared with the float model's: relative L2 per output, and top-1 agreement for [N, K]
// outputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli.hpp"

namespace wpk::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (ValueId v : g.inputs())
    if (!g.initializer(v)) names.push_back(g.value(v).name);
  return names;
}

// One sample from a folder of input_<i>.pb files, or none when it holds no input_0.pb.
std::optional<TensorMap> read_sample(const fs::path& dir, const std::vector<std::string>& names) {
  if (!fs::exists(dir / "input_0.pb")) return std::nullopt;
  TensorMap sample;
  for (std::size_t i = 0; i < names.size(); ++i)
    sample[names[i]] = load_tensor((dir / ("input_" + std::to_string(i) + ".pb")).string());
  return sample;
}

std::vector<TensorMap> read_samples(const fs::path& dir, const std::vector<std::string>& names) {
  if (!fs::is_directory(dir)) throw Error(ErrorCode::NotFound, "calibration folder '" + dir.string() + "' not found");
  std::vector<TensorMap> samples;
  if (auto s = read_sample(dir, names)) samples.push_back(std::move(*s));
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (const fs::path& p : sets)
    if (auto s = read_sample(p, names)) samples.push_back(std::move(*s));
  if (samples.empty())
    throw Error(ErrorCode::InvalidArgument, "calibration folder '" + dir.string() +
                                                "' holds no input_0.pb, directly or in test_data_set_* folders");
  return samples;
}

double relative_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// Rows of an [N, K] output whose largest entry is in the same place in both.
std::pair<int, int> top1_agreement(const Tensor& a, const Tensor& b) {
  const std::int64_t rows = b.dim(0), k = b.dim(1);
  int same = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* pa = a.data<float>() + r * k;
    const float* pb = b.data<float>() + r * k;
    same += std::max_element(pa, pa + k) - pa == std::max_element(pb, pb + k) - pb;
  }
  return {same, static_cast<int>(rows)};
}

}  // namespace

int cmd_quantize(const Args& args) {
  if (!args.has("--calibrate")) throw Error(ErrorCode::InvalidArgument, "quantize needs --calibrate DIR");
  const std::string model = args.positional[0], out = args.positional[1];
  const std::vector<TensorMap> samples = read_samples(args.get("--calibrate", ""), input_names(load(model)));
  QuantizeOptions options;
  options.method = args.get("--method", "minmax");
  if (args.has("--percentile")) {
    const std::string p = args.get("--percentile", "");
    char* end = nullptr;
    options.percentile = std::strtod(p.c_str(), &end);
    if (p.empty() || *end != '\0') throw Error(ErrorCode::InvalidArgument, "--percentile needs a number, got '" + p + "'");
  }
  options.reduce_range = args.has("--reduce-range");
  options.session = base_options(args);
  options.session.threads = args.get_int("--threads", 0, 0);
  const QuantizeReport report = quantize_model(model, samples, out, options);
  std::printf("quantized %d convs, %d matmuls and %d activations (uint8), calibrated on %d sample%s (%s): wrote %s\n",
              report.convs, report.products, report.activations, report.samples, report.samples == 1 ? "" : "s",
              options.method.c_str(), out.c_str());
  for (const std::string& s : report.skipped) std::printf("  left in float: %s\n", s.c_str());

  const Session float_session(load(model), options.session), int8_session(load(out), options.session);
  std::map<std::string, std::vector<double>> errors;
  std::map<std::string, std::pair<int, int>> top1;
  for (const TensorMap& sample : samples) {
    const TensorMap want = float_session.run(sample), got = int8_session.run(sample);
    for (const auto& [name, t] : want) {
      if (t.dtype() != DType::Float32 || got.at(name).shape() != t.shape()) continue;
      errors[name].push_back(relative_l2(got.at(name), t));
      if (t.rank() == 2 && t.dim(1) > 1) {
        const auto [same, rows] = top1_agreement(got.at(name), t);
        top1[name].first += same;
        top1[name].second += rows;
      }
    }
  }
  for (const auto& [name, e] : errors) {
    double mean = 0;
    for (double x : e) mean += x / static_cast<double>(e.size());
    std::printf("output '%s': relative L2 to the float model %.4f (mean over the samples, max %.4f)", name.c_str(), mean,
                *std::max_element(e.begin(), e.end()));
    if (top1.count(name)) std::printf(", top-1 agreement %d/%d", top1[name].first, top1[name].second);
    std::printf("\n");
  }
  return 0;
}

}  // namespace wpk::cli
