#include "wpk/optimizer.hpp"

#include <algorithm>
#include <chrono>

#include "backends/reference/reference_backend.hpp"
#include "core/api_boundary.hpp"
#include "graph/dtype_inference.hpp"
#include "graph/passes/pass.hpp"
#include "graph/passes/static_shapes.hpp"
#include "runtime/logging.hpp"

namespace wpk {
namespace {

struct PassEntry {
  const char* name;
  OptimizationLevel min_level;
  bool (*run)(Graph&, const passes::PassContext&);
  // Runs in the first stage, which brings the graph to a fixed point before the fusions see it:
  // folding and clean-ups, and the quantization patterns that constant folding would dissolve.
  bool first_stage = false;
};

// The order passes run in. Cleanups first so folding sees through Identity chains; QDQ groups
// become integer ops before constant folding dequantizes their weights; shapes fold
// before constants so the arithmetic on them folds in the same round. BatchNorm folds into its
// Conv before the Conv's epilogue is fused. Gelu and attention are recognised before the MatMul
// epilogue fusion, which then absorbs the Gelu and must not take the attention MatMuls apart.
// The concat eliminations (Concat -> BatchNorm, Concat -> 1x1 Conv) run after the layout pass,
// which moves both sides to NHWC, and so does the quantized conv + residual add fusion (its
// convolution reads NHWC once the layout pass has moved it).
const std::vector<PassEntry>& pass_table() {
  static const std::vector<PassEntry> table = {
      {"remove_identity", OptimizationLevel::Basic, passes::remove_identity, true},
      {"fold_qdq", OptimizationLevel::All, passes::fold_qdq, true},
      {"fuse_matmul_integer", OptimizationLevel::All, passes::fuse_matmul_integer, true},
      {"fold_shape_subgraphs", OptimizationLevel::Basic, passes::fold_shape_subgraphs, true},
      {"constant_folding", OptimizationLevel::Basic, passes::fold_constants, true},
      {"fold_captured_constants", OptimizationLevel::Basic, passes::fold_captured_constants, true},
      {"cancel_transposes", OptimizationLevel::Basic, passes::cancel_transposes, true},
      {"fold_batchnorm", OptimizationLevel::Basic, passes::fold_batchnorm, true},
      {"fold_pad", OptimizationLevel::Basic, passes::fold_pad, true},
      {"fuse_layernorm", OptimizationLevel::All, passes::fuse_layernorm},
      {"fuse_gelu", OptimizationLevel::All, passes::fuse_gelu},
      {"fuse_attention", OptimizationLevel::All, passes::fuse_attention},
      {"attention_heads", OptimizationLevel::All, passes::read_attention_heads_in_place},
      {"fuse_conv_epilogue", OptimizationLevel::All, passes::fuse_conv_epilogue},
      {"fuse_matmul_epilogue", OptimizationLevel::All, passes::fuse_matmul_epilogue},
      {"fuse_batchnorm_relu", OptimizationLevel::All, passes::fuse_batchnorm_relu},
      {"layout_nhwc", OptimizationLevel::All, passes::assign_nhwc_layout},
      {"fuse_qlinear_conv_add", OptimizationLevel::All, passes::fuse_qlinear_conv_add},
      {"fuse_concat_batchnorm", OptimizationLevel::All, passes::fuse_concat_batchnorm},
      {"split_conv_over_concat", OptimizationLevel::All, passes::split_conv_over_concat},
      {"fuse_depthwise_pointwise", OptimizationLevel::All, passes::fuse_depthwise_pointwise},
      {"fuse_scaled_pointwise", OptimizationLevel::All, passes::fuse_scaled_pointwise},
      {"fuse_elementwise_chains", OptimizationLevel::All, passes::fuse_elementwise_chains},
      {"dead_code", OptimizationLevel::Basic, passes::eliminate_dead_code, true},
  };
  return table;
}

// Runs a node for constant folding; its outputs may take at most what is left of the budget
// (and kMaxFoldedNodeBytes), refused before they are allocated.
std::vector<Tensor> evaluate_on_reference(const Node& node, const std::vector<const Tensor*>& inputs, std::int64_t opset,
                                          std::int64_t& budget_left) {
  static const reference::ReferenceBackend backend;
  Graph scratch;  // why_unsupported/prepare only read the opset from the graph
  scratch.set_opset(opset);
  if (!backend.why_unsupported(node, scratch).empty()) throw Error(ErrorCode::Unsupported, "cannot fold");
  auto kernel = backend.prepare(node, scratch);
  std::int64_t node_bytes = 0;
  const std::int64_t cap = std::min(budget_left, passes::kMaxFoldedNodeBytes);
  KernelContext ctx(node, inputs, [&](DType dtype, const Shape& shape) {
    node_bytes += shape_numel(shape) * static_cast<std::int64_t>(dtype_size(dtype));
    if (node_bytes > cap) throw Error(ErrorCode::ResourceExhausted, "folded outputs over the folding budget");
    return Tensor::zeros(dtype, shape);
  });
  kernel->run(ctx);
  budget_left -= node_bytes;
  return std::move(ctx.outputs());
}

}  // namespace

Optimizer::Optimizer(OptimizerOptions options) : options_(std::move(options)) {
  for (const auto& name : options_.disabled_passes) {
    const auto& all = pass_table();
    if (std::none_of(all.begin(), all.end(), [&](const PassEntry& p) { return name == p.name; }))
      throw Error(ErrorCode::InvalidArgument, "unknown optimizer pass '" + name + "'");
  }
  if (options_.folding_budget < 0)
    throw Error(ErrorCode::InvalidArgument,
                "OptimizerOptions::folding_budget must be >= 0, got " + std::to_string(options_.folding_budget));
}

std::vector<std::string> Optimizer::all_pass_names() {
  std::vector<std::string> names;
  for (const auto& p : pass_table()) names.push_back(p.name);
  return names;
}

std::vector<std::string> Optimizer::pass_names() const {
  std::vector<std::string> names;
  for (const auto& p : pass_table()) {
    const bool off = std::find(options_.disabled_passes.begin(), options_.disabled_passes.end(), p.name) !=
                     options_.disabled_passes.end();
    if (!off && static_cast<int>(options_.level) >= static_cast<int>(p.min_level)) names.push_back(p.name);
  }
  return names;
}

Graph Optimizer::optimize(Graph graph) const try {
  infer_dtypes(graph);  // graphs built in code declare no intermediate dtypes
  std::int64_t folding_left = options_.folding_budget;
  passes::PassContext ctx;
  ctx.evaluate = [&folding_left](const Node& n, const std::vector<const Tensor*>& ins, std::int64_t opset) {
    return evaluate_on_reference(n, ins, opset, folding_left);
  };
  const auto names = pass_names();
  // Passes enable each other (folding exposes dead code and new constants); repeat to a fixed
  // point, bounded so a pair of passes that undo each other cannot loop forever. The first stage's
  // passes reach theirs first: a fusion must see the graph folded, or it takes apart a pattern
  // another fusion would have matched a round later (with BERT's batch fixed, the element-wise
  // chains took the attention scores' scale and mask before the scale's shape arithmetic was
  // folded into a constant).
  // Time per pass, summed over the rounds: the debug log says which passes a load waits on.
  std::vector<std::pair<double, const char*>> pass_ms(pass_table().size(), {0.0, nullptr});
  int rounds = 0;
  for (const bool first_stage : {true, false})
    for (int round = 0; round < 8; ++round) {
      ++rounds;
      bool changed = false;
      for (std::size_t i = 0; i < pass_table().size(); ++i) {
        const auto& p = pass_table()[i];
        if (std::find(names.begin(), names.end(), p.name) == names.end()) continue;
        if (first_stage && !p.first_stage) continue;
        const auto t0 = std::chrono::steady_clock::now();
        const bool c = p.run(graph, ctx);
        if (c) ctx.analyses.reset();
        pass_ms[i].first += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        pass_ms[i].second = p.name;
        if (c) logger().debug("pass {} changed the graph ({} nodes)", p.name, graph.nodes().size());
        changed |= c;
      }
      if (!changed) break;
    }
  if (logger().should_log(spdlog::level::debug)) {
    std::sort(pass_ms.begin(), pass_ms.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    double total = 0;
    for (const auto& [ms, name] : pass_ms) total += ms;
    std::string slowest;
    for (std::size_t i = 0; i < pass_ms.size() && i < 5 && pass_ms[i].second; ++i)
      slowest += fmt::format("{}{} {:.1f} ms", i ? ", " : "", pass_ms[i].second, pass_ms[i].first);
    logger().debug("optimizer: {} rounds, {:.1f} ms in passes; slowest: {}", rounds, total, slowest);
  }
  infer_dtypes(graph);  // values the passes created
  passes::annotate_static_shapes(graph);
  return graph;
} catch (...) {
  rethrow_as_error("optimizing the model: ");
}

}  // namespace wpk
