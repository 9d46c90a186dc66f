// The GPU cost model (search/gpu_cost_model.hpp) against real measurements: schedules of the
// generated convolution timed on an H200 while tuning ResNet-50 (data/gpu_conv_trials_h200.txt).
// Needs no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "backends/cuda/generated_kernels.hpp"

namespace wpk {
namespace {

struct Trial {
  cuda::ConvGeometry geometry;
  cuda::CudaConvConfig config;
  double seconds;
  int registers;
  std::int64_t threads, blocks;
};

// "conv_N_C_H_W_O_CG_KH_KW_PH_PW_SH_SW_DH_DW_gG..." as the CUDA backend names a convolution.
cuda::ConvGeometry parse_geometry(const std::string& sig) {
  std::vector<std::int64_t> d;
  std::stringstream in(sig.substr(5, sig.rfind("_g") - 5));
  for (std::string item; std::getline(in, item, '_');) d.push_back(std::stoll(item));
  REQUIRE(d.size() == 14);
  const std::int64_t groups = std::stoll(sig.substr(sig.rfind("_g") + 2));
  const std::int64_t oh = (d[2] + 2 * d[8] - d[12] * (d[6] - 1) - 1) / d[10] + 1;
  const std::int64_t ow = (d[3] + 2 * d[9] - d[13] * (d[7] - 1) - 1) / d[11] + 1;
  return {{d[0], d[1], d[2], d[3]}, {d[4], d[5], d[6], d[7]}, {d[0], d[4], oh, ow}, groups, {d[8], d[9]}, {d[10], d[11]}, {d[12], d[13]}};
}

std::vector<Trial> trials(const std::string& file = "gpu_conv_trials_h200.txt") {
  std::ifstream in(std::string(WPK_SOURCE_DIR) + "/tests/unit/backends/data/" + file);
  REQUIRE(in);
  const std::regex line(
      R"((\S+) threads_oc=(\d+),regs_oc=(\d+),threads_x=(\d+),regs_x=(\d+)(?:,stage_ic=(\d+))?(?:,threads_y=(\d+))? (\S+) us, (-?\d+) registers, (\d+) threads, (\d+) blocks)");
  std::vector<Trial> out;
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (text.empty() || text[0] == '#' || !std::regex_match(text, m, line)) continue;
    Trial t{parse_geometry(m[1]),
            {std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), std::stoll(m[5]), m[6].matched ? std::stoll(m[6]) : 0,
             m[7].matched ? std::stoll(m[7]) : 1},
            std::stod(m[8]) * 1e-6,
            std::stoi(m[9]),
            std::stoll(m[10]),
            std::stoll(m[11])};
    if (std::isfinite(t.seconds)) out.push_back(t);
  }
  return out;
}

TEST_CASE("the generated convolution's launch as the cost model computes it is the one the printer made", "[cuda][cost]") {
  auto all = trials();
  REQUIRE(all.size() > 700);
  for (const char* file : {"gpu_conv_staged_trials_h200.txt", "gpu_conv_rows_trials_h200.txt"}) {
    const auto more = trials(file);
    REQUIRE(more.size() > 1000);
    all.insert(all.end(), more.begin(), more.end());
  }
  for (const Trial& t : all) {
    const search::GpuLaunch l = cuda::conv_launch(t.geometry, t.config, t.registers);
    INFO(t.config.describe());
    CHECK(l.threads == t.threads);
    CHECK(l.blocks == t.blocks);
  }
}

// Predicted and measured seconds of each schedule, by the op they are schedules of.
using ByOp = std::map<std::string, std::vector<std::pair<double, double>>>;

// How well the predictions rank each op's schedules: the share of pairs (of different measured
// times) ordered right, the median of predicted over measured, and the pairs counted.
struct Ranking {
  double accuracy = 0, median_ratio = 0;
  std::size_t pairs = 0;
};
Ranking ranking(const ByOp& by_op) {
  std::size_t right = 0, pairs = 0;
  std::vector<double> ratios;
  for (const auto& [key, points] : by_op)
    for (std::size_t i = 0; i < points.size(); ++i) {
      ratios.push_back(points[i].first / points[i].second);
      for (std::size_t j = i + 1; j < points.size(); ++j) {
        if (points[i].second == points[j].second) continue;
        ++pairs;
        right += (points[i].first < points[j].first) == (points[i].second < points[j].second);
      }
    }
  std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
  return {static_cast<double>(right) / static_cast<double>(pairs), ratios[ratios.size() / 2], pairs};
}

// The convolution trials of `file` ranked by the model, which must order at least `accuracy` of
// each convolution's pairs right and stay within 2x of the measured times (median).
void check_conv_ranking(const std::string& file, double accuracy) {
  const search::GpuSpec* h200 = search::gpu_spec("NVIDIA H200");
  REQUIRE(h200);
  ByOp by_conv;
  for (const Trial& t : trials(file)) {
    std::string key;
    for (std::int64_t d : t.geometry.x) key += std::to_string(d) + ",";
    for (std::int64_t d : t.geometry.w) key += std::to_string(d) + ",";
    key += std::to_string(t.geometry.strides[0]);
    by_conv[key].push_back({cuda::predict_conv_seconds(*h200, t.geometry, t.config, t.registers), t.seconds});
  }
  const Ranking r = ranking(by_conv);
  INFO(file << ": pairwise ranking accuracy " << r.accuracy << "; predicted / measured, median " << r.median_ratio);
  CHECK(r.accuracy >= accuracy);
  CHECK(r.median_ratio > 0.5);
  CHECK(r.median_ratio < 2.0);
}

TEST_CASE("the GPU cost model ranks measured schedules of each convolution", "[cuda][cost]") {
  // Measured when the model was written: 0.82 of the pairs ranked right, a median ratio of 0.90.
  check_conv_ranking("gpu_conv_trials_h200.txt", 0.80);
}

TEST_CASE("the GPU cost model ranks schedules that tile output rows", "[cuda][cost]") {
  // Row tiles are priced by the same terms as the staged schedules, with no fit of their own.
  check_conv_ranking("gpu_conv_rows_trials_h200.txt", 0.63);
}

TEST_CASE("the GPU cost model ranks staged and unstaged schedules of each convolution", "[cuda][cost]") {
  // Copies into shared memory are harder to price than the plain loop (barriers, latency): the
  // bar is below the plain schedules'.
  check_conv_ranking("gpu_conv_staged_trials_h200.txt", 0.65);
}

TEST_CASE("the GPU cost model ranks measured schedules of each product, and computes their launches", "[cuda][cost]") {
  std::ifstream in(std::string(WPK_SOURCE_DIR) + "/tests/unit/backends/data/gpu_matmul_trials_h200.txt");
  REQUIRE(in);
  const std::regex line(
      R"(matmul_(\d+)_(\d+)_(\d+)_(\d+)(_batched)?\S* threads_m=(\d+),regs_m=(\d+),threads_n=(\d+),regs_n=(\d+) (\S+) us, (-?\d+) registers, (\d+) threads, (\d+) blocks)");
  const search::GpuSpec* h200 = search::gpu_spec("H200");
  ByOp by_product;
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (text.empty() || text[0] == '#' || !std::regex_match(text, m, line)) continue;
    const cuda::ProductGeometry g{std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), m[5].matched};
    const cuda::CudaProductConfig c{std::stoll(m[6]), std::stoll(m[7]), std::stoll(m[8]), std::stoll(m[9])};
    const double seconds = std::stod(m[10]) * 1e-6;
    const search::GpuLaunch l = cuda::product_launch(g, c, std::stoi(m[11]));
    CHECK(l.threads == std::stoll(m[12]));
    CHECK(l.blocks == std::stoll(m[13]));
    if (std::isfinite(seconds)) by_product[text.substr(0, text.find(' '))].push_back({search::predict_gpu_seconds(*h200, l, cuda::product_loop(g, c)), seconds});
  }
  const Ranking r = ranking(by_product);
  REQUIRE(r.pairs > 500);
  const double accuracy = r.accuracy;
  INFO("pairwise ranking accuracy " << accuracy << " over " << r.pairs << " pairs");
  // Measured when the data was taken: 0.57, better than chance and well short of the
  // convolutions' ranking; what the model misses in products is not known yet.
  CHECK(accuracy >= 0.55);
}

TEST_CASE("the library roofline prices cuDNN's measured convolutions", "[cuda][cost]") {
  std::ifstream in(std::string(WPK_SOURCE_DIR) + "/tests/unit/backends/data/gpu_cudnn_h200.txt");
  REQUIRE(in);
  const search::GpuSpec* h200 = search::gpu_spec("H200");
  std::vector<double> ratios;
  for (std::string text; std::getline(in, text);) {
    if (text.empty() || text[0] == '#') continue;
    std::istringstream fields(text);
    std::string sig, algorithm;
    double us = 0;
    fields >> sig >> algorithm >> us;
    const cuda::ConvGeometry g = parse_geometry(sig);
    double flops = 2.0, elements = 0;
    for (std::int64_t d : g.y) flops *= static_cast<double>(d);
    for (std::size_t i = 1; i < 4; ++i) flops *= static_cast<double>(g.w[i]);
    for (const Shape* sh : {&g.x, &g.w, &g.y}) {
      double n = 1;
      for (std::int64_t d : *sh) n *= static_cast<double>(d);
      elements += n;
    }
    ratios.push_back(search::predict_library_seconds(*h200, flops, 4 * elements) / (us * 1e-6));
  }
  REQUIRE(ratios.size() == 48);
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2], low = ratios[ratios.size() / 10], high = ratios[ratios.size() * 9 / 10];
  INFO("modelled / measured: median " << median << ", 10th percentile " << low << ", 90th " << high);
  CHECK(median > 0.67);
  CHECK(median < 1.5);
  CHECK(low > 0.2);
  CHECK(high < 5);
}

}  // namespace
}  // namespace wpk
