#pragma once
// The gen backend's kernel for com.wpk ElementwiseChain (graph/fused_ops.hpp): the chain's steps
// as one expression, computed in one pass over the output, each input loaded where the output
// point reads it (broadcast dims at index 0), so no step's result reaches memory.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "codegen/cpp_printer.hpp"
#include "codegen/schedule.hpp"
#include "graph/elementwise_chain.hpp"

namespace wpk::gen {

struct ElementwiseChainSpec {
  Shape output;               // the chain's output shape (static)
  std::vector<Shape> inputs;  // each input's shape as the model gives it
  std::vector<ChainStep> steps;
};

// The node as this backend's kernel, or why not (`why` set): float32 values of static shapes.
std::optional<ElementwiseChainSpec> elementwise_chain_spec(const Node& node, const Graph& graph, std::string& why);
// "vectors=1", "vectors=2", "vectors=4": vectors of the output's last dims a loop iteration computes.
std::vector<std::string> elementwise_chain_configs();
// The schedule for `config` (exposed for tests); throws std::invalid_argument for a config it
// does not know.
codegen::Schedule elementwise_chain_schedule(const ElementwiseChainSpec& spec, const std::string& config, int lanes);
// "f32_elementwise_chain__avx2_v2".
std::string elementwise_chain_kernel_name(const std::string& config, codegen::CpuTarget target);
std::unique_ptr<Kernel> make_elementwise_chain(const ElementwiseChainSpec& spec, const std::string& config);

}  // namespace wpk::gen
