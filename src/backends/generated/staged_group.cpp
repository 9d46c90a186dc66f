#include "backends/generated/staged_group.hpp"

#include <algorithm>
#include <cstdio>

#include "backends/generated/kernel_support.hpp"
#include "graph/fused_ops.hpp"
#include "graph/group_parts.hpp"

namespace wpk::gen {

using namespace codegen;

std::optional<Graph> group_parts_of(const Node& node, const Graph& graph, const char* op, std::string& why) {
  if (node.domain != kWpkDomain || node.op_type != op) {
    why = "the gen backend does not write " + node.op_type;
    return std::nullopt;
  }
  try {
    return group_graph(node, graph);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

std::string GroupConfig::text() const {
  return "rows=" + std::to_string(rows) + ",vectors=" + std::to_string(vectors) + ",stage=" + (vector_stage ? "vector" : "wide");
}

std::optional<GroupConfig> GroupConfig::parse(const std::string& text) {
  GroupConfig c;
  char stage[8] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "rows=%d,vectors=%d,stage=%6[a-z]%n", &c.rows, &c.vectors, stage, &used) != 3 ||
      static_cast<std::size_t>(used) != text.size())
    return std::nullopt;
  const std::string kind = stage;
  if ((kind != "vector" && kind != "wide") || c.rows < 1 || c.rows > 16 || c.vectors < 1 || c.vectors > 8) return std::nullopt;
  c.vector_stage = kind == "vector";
  return c;
}

std::vector<GroupConfig> group_configs(std::int64_t width, std::int64_t channels, CpuTarget target) {
  std::vector<GroupConfig> out;
  for (bool vector_stage : {true, false})
    for (const MatMulConfig& c : matmul_configs(vector_registers(target)))
      // Tiles of at least 3 pixels (fewer reload each weight vector too often); the producer's
      // tile (rows x every channel) must fit the stack array a thread keeps it in.
      if (!c.parallel_cols && c.rows >= 3 && std::min<std::int64_t>(c.rows, width) * channels * 4 <= kMaxSharedBytes)
        out.push_back({c.rows, c.vectors, vector_stage});
  return out;
}

std::string group_kernel_name(const std::string& op, const GroupConfig& config, CpuTarget target) {
  return tile_kernel_name(op, config.rows, config.vectors, target) + "_ptiles" + (config.vector_stage ? "_vstage" : "_wstage");
}

Schedule staged_pointwise_schedule(const std::string& name, const Compute& producer, std::int64_t o_channels,
                                   const Epilogue& epilogue, const GroupConfig& config, int lanes) {
  const std::vector<std::int64_t>& dims = producer.output->dims;  // [1, H, W, C]
  const std::int64_t h = dims[1], w = dims[2], channels = dims[3];
  Var n = var("n", 1), y = var("y", h), x = var("x", w), o = var("o", o_channels), c = var("c", channels);
  Buffer between = producer.output, weights = buffer("w", {o_channels, channels});
  std::vector<Buffer> inputs = {between, weights};
  const Expr store = epilogue_expr(epilogue, o, {n, y, x, o}, {1, h, w, o_channels}, inputs);
  const Compute group = compute(name, buffer("y", {1, h, w, o_channels}), {n, y, x, o}, {c},
                                load(between, {n, y, x, c}) * load(weights, {o, c}), store, inputs);
  Schedule s(group);
  const auto [xo, xi] = s.split(x, std::min<std::int64_t>(config.rows, w));
  const auto [oo, oi] = s.split(o, std::min<std::int64_t>(std::int64_t{config.vectors} * lanes, o_channels));
  s.reorder({n, y, xo, oo, c, xi, oi});
  const Var tiles = s.fuse(y, xo);
  s.parallel(tiles);
  s.unroll(xi);
  s.vectorize(oi);
  s.pack(weights, o);
  s.stage_shared(between, tiles, producer, config.vector_stage ? lanes : 64);
  return s;
}

}  // namespace wpk::gen
