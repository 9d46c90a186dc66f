#pragma once
// The gen backend's depth-first group: com.wpk DepthwisePointwiseConv (graph/fused_ops.hpp) as one
// kernel. The threads share the output rows; for each tile of `rows` pixels along a row, a thread
// computes the depthwise conv's output at those pixels for every channel into an array on its
// stack (Schedule::stage_shared at the pixel tile), which the pointwise product then reads for each
// tile of `vectors` SIMD vectors of output channels. The depthwise output never reaches memory.
// A call computes one image; the kernel walks the batch.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/generated/conv_expr.hpp"
#include "backends/generated/staged_group.hpp"
#include "backends/kernel.hpp"
#include "codegen/cpp_printer.hpp"

namespace wpk::gen {

struct DepthwisePointwiseSpec {
  ConvSpec depthwise;  // with its bias (input 2) and activation; no residual
  std::int64_t o = 0;  // the pointwise conv's output channels
  Epilogue pointwise;  // its bias (input 4), residual (input 5) and activation
};

// The node as this backend's group kernel, or why not (`why` set).
std::optional<DepthwisePointwiseSpec> depthwise_pointwise_spec(const Node& node, const Graph& graph, std::string& why);
// The configs (group_configs) and kernel name ("f32_depthwise_pointwise_nhwc__avx2_4x16_ptiles_vstage")
// live in staged_group.hpp. The group as a tensor expression and its schedule: the pointwise
// product reading the depthwise compute's output, staged at the pixel tile (exposed for tests).
codegen::Schedule depthwise_pointwise_schedule(const DepthwisePointwiseSpec& spec, const GroupConfig& config, int lanes);
// The kernel for `config`, its weights packed from the graph's constants.
std::unique_ptr<Kernel> make_depthwise_pointwise(const Node& node, const Graph& graph, const DepthwisePointwiseSpec& spec,
                                                 const GroupConfig& config);

}  // namespace wpk::gen
