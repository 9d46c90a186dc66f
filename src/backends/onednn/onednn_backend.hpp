#pragma once
// The oneDNN backend: convolutions, matrix products and pooling on Debian's oneDNN 2.6, with
// weights packed at load and post-op fusion. Everything else falls through to the reference.
#include "backends/kernel.hpp"

namespace wpk::onednn {

class OneDnnBackend : public Backend {
 public:
  std::string name() const override { return "onednn"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  std::string version() const override;
  // Conv and MatMul residual adds are sum post-ops (onednn_common.hpp).
  bool accumulates_into_residual(const Node& node) const override;
};

// Convolutions on oneDNN's direct algorithm only: with tuning on, a candidate beside `onednn`,
// whose heuristics pick Winograd or matmul for some shapes, so the tuner measures which
// algorithm is faster for each node and shape.
class OneDnnDirectConvBackend : public OneDnnBackend {
 public:
  std::string name() const override { return "onednn-direct"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
};

}  // namespace wpk::onednn
