#pragma once
// y = relu(a @ b + bias) with random constant b [k, n] and bias [n]: one node after fusion, which
// the generated backend runs. `rows`: a's first dimension, a number or a symbol.
#include <cstdint>
#include <random>
#include <vector>

#include "wpk/wpk.hpp"

namespace wpk::testing {

inline Graph relu_product_graph(Dim rows, std::int64_t k, std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> b(static_cast<std::size_t>(k * n)), bias(static_cast<std::size_t>(n));
  for (float& v : b) v = u(rng);
  for (float& v : bias) v = u(rng);
  Graph g;
  g.add_input("a", DType::Float32, {std::move(rows), k});
  g.add_initializer("b", Tensor::from_vector(b, {k, n}));
  g.add_initializer("bias", Tensor::from_vector(bias, {n}));
  g.add_node("MatMul", {"a", "b"}, {"p"});
  g.add_node("Add", {"p", "bias"}, {"q"});
  g.add_node("Relu", {"q"}, {"y"});
  g.add_output("y");
  return g;
}

}  // namespace wpk::testing
