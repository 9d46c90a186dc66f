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
  // Convolutions: one config per algorithm oneDNN has for the node (conv.cpp), each described
  // for the cost model; QLinearConv: its arithmetic, int8 or float (qlinear_conv.cpp).
  std::vector<std::string> configs(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph, const std::string& config) const override;
  std::optional<KernelProfile> describe(const Node& node, const Graph& graph, const std::string& config,
                                        const InputShapes& shapes, int threads) const override;
  // Kernels not yet prepared: as a prepared one describes itself (OneDnnKernel::profile).
  KernelProfile undescribed_profile(const Node& node) const override;
  std::string version() const override;
  // Conv and MatMul residual adds are sum post-ops (onednn_common.hpp).
  bool accumulates_into_residual(const Node& node, const std::string& config) const override;
  bool takes_bf16_activations(const Node& node, const Graph& graph) const override;
};

}  // namespace wpk::onednn
