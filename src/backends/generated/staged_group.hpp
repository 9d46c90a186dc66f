#pragma once
// What the gen backend's depth-first groups share (depthwise_pointwise.hpp, scaled_pointwise.hpp):
// a pointwise product over an NHWC image whose input is a producer's output, computed tile by
// tile and never stored. The threads share the image's pixel tiles (`rows` pixels along a row;
// the pairs of row and tile, so that a 7-row image splits evenly over 2 threads); for each tile a
// thread computes every channel of the producer at those pixels into an array on its stack
// (Schedule::stage_shared at the tile), which the product reads for each tile of `vectors` SIMD
// vectors of output channels.
#include <optional>
#include <string>
#include <vector>

#include "backends/generated/epilogue.hpp"
#include "backends/generated/matmul_expr.hpp"
#include "codegen/cpp_printer.hpp"
#include "codegen/schedule.hpp"

namespace wpk::gen {

// The node's parts (graph/group_parts.hpp) when it is a com.wpk `op` they can be made of, else
// nullopt with `why` set.
std::optional<Graph> group_parts_of(const Node& node, const Graph& graph, const char* op, std::string& why);

// The register tile, and how the producer's tile is computed: one SIMD vector of channels at
// every pixel before the next vector (a depthwise producer's weights stay in registers over the
// pixels), or 64 channels at a time. "rows=4,vectors=2,stage=vector" or "...,stage=wide".
struct GroupConfig {
  int rows = 4, vectors = 2;
  bool vector_stage = true;
  MatMulConfig tile() const { return {rows, vectors, false}; }
  std::string text() const;
  static std::optional<GroupConfig> parse(const std::string& text);
};

// The configs whose accumulators fit the target's registers and whose producer tile (rows of an
// image `width` pixels wide, `channels` each) fits a stack array; the usual favourite first.
std::vector<GroupConfig> group_configs(std::int64_t width, std::int64_t channels, codegen::CpuTarget target);

// "f32_<op>__avx2_4x16_ptiles_vstage".
std::string group_kernel_name(const std::string& op, const GroupConfig& config, codegen::CpuTarget target);

// The product `name` of `producer`'s output [1, H, W, C] by weights w [o, C] (packed), with
// `epilogue`, the producer staged at the pixel tile: the group's schedule for `config`.
codegen::Schedule staged_pointwise_schedule(const std::string& name, const codegen::Compute& producer, std::int64_t o,
                                            const Epilogue& epilogue, const GroupConfig& config, int lanes);

}  // namespace wpk::gen
