#pragma once
// The gen backend: kernels wpk writes from tensor expressions (src/codegen) for the node's shapes
// (products, pointwise, dense and depthwise NHWC convs: matmul_expr.hpp, conv_expr.hpp; the
// optimizer's depth-first groups as one kernel each: staged_group.hpp)
// and compiles at load with the host compiler, one candidate per schedule config beside the
// hand-written and library ones. Preparing builds the source only; the plan compiles every
// prepared kernel's source in one batch (Kernel::source) or finds it in the kernel store.
#include "backends/kernel.hpp"

namespace wpk::gen {

class GeneratedBackend : public Backend {
 public:
  std::string name() const override { return "gen"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  std::vector<std::string> configs(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph, const std::string& config) const override;
  std::optional<KernelProfile> describe(const Node& node, const Graph& graph, const std::string& config,
                                        const InputShapes& shapes, int threads) const override;
  // Families: "gen:f32_matmul" leaves out every generated product, whatever its tile and ISA.
  std::vector<std::string> kernel_names() const override {
    return {"f32_matmul", "f32_conv1x1_nhwc", "f32_conv_nhwc", "f32_depthwise_conv_nhwc", "f32_depthwise_pointwise_nhwc",
            "f32_scaled_pointwise_nhwc"};
  }
  std::string version() const override { return "1"; }
  bool generates_code() const override { return true; }
  // Every kernel's store reads the residual's element just before it writes the output's, but
  // for a product in blocks of its reduction (MatMulConfig::k_block), whose blocks before the
  // last store partial sums there.
  bool accumulates_into_residual(const Node& node, const std::string& config) const override;
};

}  // namespace wpk::gen
