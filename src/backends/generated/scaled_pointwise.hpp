#pragma once
// The gen backend's kernel for com.wpk ScaledPointwiseConv (graph/fused_ops.hpp): a staged group
// (staged_group.hpp) whose producer scales the input per channel, so the scaled input never
// reaches memory. A call computes one image; the kernel walks the batch.
#include <memory>
#include <optional>
#include <string>

#include "backends/generated/staged_group.hpp"
#include "backends/kernel.hpp"

namespace wpk::gen {

struct ScaledPointwiseSpec {
  std::int64_t h = 0, w = 0, c = 0, o = 0;  // the input's [H, W, C]; the output channels
  Epilogue pointwise;                       // its bias (input 3), residual (input 4) and activation
};

// The node as this backend's kernel, or why not (`why` set).
std::optional<ScaledPointwiseSpec> scaled_pointwise_spec(const Node& node, const Graph& graph, std::string& why);
// Its configs are group_configs(w, c), its kernels "f32_scaled_pointwise_nhwc__..." (group_kernel_name).
// The product reading the scale compute's output, staged at the pixel tile (exposed for tests).
codegen::Schedule scaled_pointwise_schedule(const ScaledPointwiseSpec& spec, const GroupConfig& config, int lanes);
// The kernel for `config`, its weights packed from the graph's constant.
std::unique_ptr<Kernel> make_scaled_pointwise(const Node& node, const Graph& graph, const ScaledPointwiseSpec& spec,
                                              const GroupConfig& config);

}  // namespace wpk::gen
