#pragma once
// Test backends built on the reference backend's kernels: a candidate that is slow, one that is
// wrong, and one that records what it sees while it runs. For dispatch, tuning and thread tests.
#include <omp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "backends/reference/reference_backend.hpp"
#include "wpk/session.hpp"

namespace wpk::runtime_test {

class WrappingBackend : public Backend {
 public:
  // `after` runs after the reference kernel, with its context (to slow it down, corrupt it...).
  WrappingBackend(std::string name, std::function<void(KernelContext&)> after)
      : name_(std::move(name)), after_(std::move(after)) {}
  std::string name() const override { return name_; }
  std::string version() const override { return "test-1"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override {
    return node.op_type == "Relu" || node.op_type == "Sigmoid" ? reference_.why_unsupported(node, graph) : "test backend";
  }
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override {
    return std::make_unique<Wrapped>(reference_.prepare(node, graph), after_);
  }

 private:
  struct Wrapped : Kernel {
    Wrapped(std::unique_ptr<Kernel> inner, std::function<void(KernelContext&)> after)
        : inner(std::move(inner)), after(std::move(after)) {}
    void run(KernelContext& ctx) const override {
      inner->run(ctx);
      after(ctx);
    }
    std::unique_ptr<Kernel> inner;
    std::function<void(KernelContext&)> after;
  };
  std::string name_;
  std::function<void(KernelContext&)> after_;
  reference::ReferenceBackend reference_;
};

inline const Backend& reference_backend() {
  static const reference::ReferenceBackend b;
  return b;
}

// Correct but 2 ms slower per call.
inline const Backend& slow_backend() {
  static const WrappingBackend b("slow", [](KernelContext&) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  return b;
}

// Fast but wrong: adds 1 to every output element.
inline const Backend& wrong_backend() {
  static const WrappingBackend b("wrong", [](KernelContext& ctx) {
    Tensor& y = ctx.outputs()[0];
    for (std::int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] += 1.0f;
  });
  return b;
}

// y = Relu(x), x of shape [N, 4]: a one-node model that test backends run.
inline Graph relu_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 4});
  g.add_node("Relu", {"x"}, {"y"});
  g.add_output("y");
  return g;
}

// relu_graph's input: N rows of ones.
inline TensorMap ones(std::int64_t n) {
  return {{"x", Tensor::from_vector<float>(std::vector<float>(static_cast<std::size_t>(n * 4), 1.0f), {n, 4})}};
}

}  // namespace wpk::runtime_test
