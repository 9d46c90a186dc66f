#pragma once
// Shared by the optimizer pass tests: counting ops in a rewritten graph, seeded random inputs,
// a quantized convolution's weights, and running a graph with and without a pass to check it
// computes the same outputs.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/reference_backend.hpp"
#include "graph/fused_ops.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

namespace wpk::testing {

inline int count_op(const Graph& g, const std::string& op, const std::string& domain = "") {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op && node.domain == domain;
  return n;
}

inline const Node* find_op(const Graph& g, const std::string& op, const std::string& domain = "") {
  for (const Node& node : g.nodes())
    if (node.op_type == op && node.domain == domain) return &node;
  return nullptr;
}

// Floats uniform in [lo, hi), the same for the same seed on every run.
inline Tensor random_tensor(const Shape& shape, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(gen);
  return Tensor::from_vector(v, shape);
}

// The graph after every pass but `disabled`. The layout pass, when wpk has one, is also left out:
// these tests look at the ops the fusions make, not at where layout conversions go.
inline Graph optimized(const Graph& g, std::vector<std::string> disabled = {}) {
  for (const std::string& name : Optimizer::all_pass_names())
    if (name.rfind("layout", 0) == 0) disabled.push_back(name);
  OptimizerOptions o;
  o.disabled_passes = std::move(disabled);
  return Optimizer(o).optimize(g);
}

inline TensorMap run_graph(const Graph& g, OptimizationLevel level, const TensorMap& inputs,
                           std::vector<std::string> disabled = {}) {
  SessionOptions o;
  o.optimizer.level = level;
  o.optimizer.disabled_passes = std::move(disabled);
  return Session(g, o).run(inputs);
}

// The graph's outputs with every node run on the reference backend, in order: the kernels that
// define the semantics, whatever backend a Session would pick.
inline TensorMap run_on_reference(const Graph& g, const TensorMap& inputs) {
  static const reference::ReferenceBackend backend;
  std::map<ValueId, Tensor> values;
  for (const auto& kv : g.initializers()) values[kv.first] = kv.second;
  for (const auto& kv : inputs) values[g.value_id(kv.first)] = kv.second;
  for (const Node& n : g.nodes()) {
    std::vector<const Tensor*> in;
    for (ValueId v : n.inputs) in.push_back(v == kNoValue ? nullptr : &values.at(v));
    KernelContext ctx(n, in);
    backend.prepare(n, g)->run(ctx);
    for (std::size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] != kNoValue) values[n.outputs[i]] = ctx.outputs()[i];
  }
  TensorMap out;
  for (ValueId v : g.outputs()) out[g.value(v).name] = values.at(v);
  return out;
}

// Every output of the fully optimized graph matches the unoptimized one, and the one optimized
// with `pass` switched off.
// The weights of an 8 -> 8 channel 3x3 convolution as a quantizer writes them: int8 codes per
// output channel and an int32 bias at x_scale * w_scale (times `bias_scale_off`, 1 for a
// quantizer's), dequantized into "wd" and "bd" for a Conv to read.
inline void add_quantized_conv_weights(Graph& g, float x_scale, float bias_scale_off = 1.0f) {
  std::vector<std::int8_t> w(8 * 8 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
  g.add_initializer("wq", Tensor::from_vector(w, {8, 8, 3, 3}));
  std::vector<float> ws, bs;
  std::vector<std::int32_t> b;
  for (int c = 0; c < 8; ++c) {
    ws.push_back(0.001f * static_cast<float>(c + 1));
    bs.push_back(x_scale * ws.back() * bias_scale_off);
    b.push_back(c * 300 - 1000);
  }
  g.add_initializer("ws", Tensor::from_vector(ws, {8}));
  g.add_initializer("wz", Tensor::from_vector(std::vector<std::int8_t>(8, 0), {8}));
  g.add_initializer("bq", Tensor::from_vector(b, {8}));
  g.add_initializer("bs", Tensor::from_vector(bs, {8}));
  g.add_initializer("bz", Tensor::from_vector(std::vector<std::int32_t>(8, 0), {8}));
  g.add_node("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, {{"axis", Attribute(std::int64_t{0})}});
  g.add_node("DequantizeLinear", {"bq", "bs", "bz"}, {"bd"}, {{"axis", Attribute(std::int64_t{0})}});
}

// Largest magnitude in a float tensor.
inline double max_abs(const Tensor& t) {
  double m = 0;
  const float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(static_cast<double>(p[i])));
  return m;
}

// The pass changes no output: against the optimized graph without it (the same kernels, so
// `atol` as given), and against the unoptimized graph, whose convolutions run on other kernels
// (NCHW where the optimized graph's are NHWC; direct where those may be Winograd), which round
// differently by a few parts in a million of the outputs' scale: there `atol` scales with the
// largest output.
inline void check_unchanged(const Graph& g, const TensorMap& inputs, const std::string& pass, double rtol = 1e-5,
                            double atol = 1e-6) {
  const TensorMap plain = run_graph(g, OptimizationLevel::None, inputs);
  const TensorMap without = run_graph(g, OptimizationLevel::All, inputs, {pass});
  const TensorMap fast = run_graph(g, OptimizationLevel::All, inputs);
  for (const auto& kv : plain) {
    INFO("output " << kv.first);
    const double scale = kv.second.dtype() == DType::Float32 ? std::max(1.0, max_abs(kv.second)) : 1.0;
    CHECK(compare_allclose(fast.at(kv.first), kv.second, rtol, atol * scale) == "");
    CHECK(compare_allclose(fast.at(kv.first), without.at(kv.first), rtol, atol) == "");
  }
}

}  // namespace wpk::testing
