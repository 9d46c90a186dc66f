#pragma once
// Small graphs of the ops device placement moves to the GPU, with deterministic weights: for the
// placement tests (no GPU needed) and the CUDA backend's tests (a GPU needed).
#include <cmath>
#include <string>
#include <vector>

#include "wpk/wpk.hpp"

namespace wpk::device_test {

inline Tensor ramp(const Shape& shape, float scale, int seed) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
  return Tensor::from_vector(v, shape);
}

// x [n, c, s, s] -> Conv 3x3 + bias -> Relu -> MaxPool 3x3/2 pad 1 -> Conv 1x1 -> Add (residual)
// -> Clip(0, 6) -> AveragePool 2x2 -> GlobalAveragePool -> Flatten -> Gemm -> y [n, 10].
inline Graph conv_net(std::int64_t n, std::int64_t c, std::int64_t s) {
  Graph g;
  g.add_input("x", DType::Float32, {n, c, s, s});
  g.add_initializer("w1", ramp({c, c, 3, 3}, 0.2f, 1));
  g.add_initializer("b1", ramp({c}, 0.1f, 2));
  g.add_initializer("w2", ramp({c, c, 1, 1}, 0.3f, 3));
  g.add_initializer("lo", Tensor::scalar<float>(0.0f));
  g.add_initializer("hi", Tensor::scalar<float>(6.0f));
  g.add_initializer("wf", ramp({10, c}, 0.2f, 4));
  g.add_initializer("bf", ramp({10}, 0.1f, 5));
  g.add_node("Conv", {"x", "w1", "b1"}, {"c1"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}, {"kernel_shape", std::vector<std::int64_t>{3, 3}}});
  g.add_node("Relu", {"c1"}, {"r1"});
  g.add_node("MaxPool", {"r1"}, {"p1"},
             {{"kernel_shape", std::vector<std::int64_t>{3, 3}}, {"strides", std::vector<std::int64_t>{2, 2}},
              {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  g.add_node("Conv", {"p1", "w2"}, {"c2"}, {{"kernel_shape", std::vector<std::int64_t>{1, 1}}});
  g.add_node("Add", {"c2", "p1"}, {"a2"});
  g.add_node("Clip", {"a2", "lo", "hi"}, {"r2"});
  g.add_node("AveragePool", {"r2"}, {"ap"}, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"strides", std::vector<std::int64_t>{2, 2}}});
  g.add_node("GlobalAveragePool", {"ap"}, {"gp"});
  g.add_node("Flatten", {"gp"}, {"f"});
  g.add_node("Gemm", {"f", "wf", "bf"}, {"y"}, {{"transB", std::int64_t(1)}});
  g.add_output("y");
  return g;
}

inline TensorMap conv_net_inputs(std::int64_t n, std::int64_t c, std::int64_t s) {
  return {{"x", ramp({n, c, s, s}, 1.0f, 9)}};
}

}  // namespace wpk::device_test
