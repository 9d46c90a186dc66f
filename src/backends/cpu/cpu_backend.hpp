#pragma once
// The cpu backend: wpk's own kernels (this folder), each a candidate beside the libraries'. It
// offers a node to the kernel whose op, dtypes and attributes it covers, on CPUs with the ISA
// that kernel needs (core/cpu_features.hpp); a kernel may still decline an input shape
// (Kernel::runs). Whether it should run is not decided here: the cost model (and, with tuning,
// measurement) picks among a node's candidates.
#include "backends/kernel.hpp"

namespace wpk::cpu {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  std::vector<std::string> configs(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph, const std::string& config) const override;
  std::optional<KernelProfile> describe(const Node& node, const Graph& graph, const std::string& config,
                                        const InputShapes& shapes, int threads) const override;
  // Its kernels that describe() leaves out (layer norm, pooling, row broadcast, concat, ...) are
  // vector loops over the widest vectors this CPU runs, as their profile() says once prepared.
  KernelProfile undescribed_profile(const Node& node) const override;
  bool accumulates_into_residual(const Node& node, const std::string& config) const override;
  std::string version() const override { return "1"; }
  std::vector<std::string> kernel_names() const override;
};

}  // namespace wpk::cpu
