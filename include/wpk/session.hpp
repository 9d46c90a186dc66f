#pragma once
// wpk::Session — a loaded, optimized, ready-to-run model.
//
//   wpk::Session s(wpk::load("model.onnx"));
//   auto out = s.run({{"input", wpk::Tensor::borrow(ptr, {1, 3, 224, 224})}});
//   const wpk::Tensor& logits = out.at("logits");
//
// Thread-safety: `run` may be called from many threads at once; each call has its own
// intermediate memory and gives the same results as a call from one thread.
// Ownership: a Session owns its graph and weights; input tensors are borrowed for the duration of
// `run`; returned tensors own their memory.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wpk/graph.hpp"
#include "wpk/options.hpp"
#include "wpk/tensor.hpp"

namespace wpk {

using TensorMap = std::map<std::string, Tensor>;

// A node no registered backend can run, and why.
struct UnsupportedNode {
  std::string node;
  std::string op_type;
  std::string reason;
};
// Every node of `graph` that a Session could not run (empty when the model is fully supported).
std::vector<UnsupportedNode> find_unsupported(const Graph& graph);

class Session {
 public:
  explicit Session(Graph graph, SessionOptions options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs the model. Every graph input must be given, with its declared dtype and a shape that
  // agrees with the declared one (symbolic dimensions take any size, consistently).
  TensorMap run(const TensorMap& inputs) const;

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;  // in model order
  const Graph& graph() const;  // the optimized graph this session runs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wpk
