// Element-wise ops on float32 values whose results only the next op of the chain reads become
// one com.wpk ElementwiseChain (graph/fused_ops.hpp): a depth-first group. Forming it decides
// nothing about speed: its candidates include its steps on their own kernels one after the
// other, as before, beside generated code that computes the chain in one pass over the data,
// and the cost model or a measurement picks. Runs last among the fusions, so that every
// activation a conv or product can take into its epilogue is already there.
#include <algorithm>

#include "graph/elementwise_chain.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

// More steps than this make a second chain: a generated kernel's expression stays small.
constexpr std::size_t kMostSteps = 16;

bool static_dims(const DimList* d) {
  return d && std::all_of(d->begin(), d->end(), [](const Dim& x) { return x.is_static(); });
}

// A node a chain may hold: a listed ONNX op with its operand count, on float32 values of known
// dims.
bool chainable(const Graph& g, const Node& n, const StaticShapes& shapes) {
  if (!n.domain.empty() || !chain_op(n.op_type) || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
  if (n.inputs.size() != (chain_op_unary(n.op_type) ? 1u : 2u)) return false;
  for (ValueId v : n.inputs)
    if (v == kNoValue || g.value(v).dtype != DType::Float32 || !static_dims(shapes.dims(v))) return false;
  return g.value(n.outputs[0]).dtype == DType::Float32 && static_dims(shapes.dims(n.outputs[0]));
}

struct Chain {
  std::vector<int> nodes;       // producers before readers; the last writes the chain's output
  std::vector<ValueId> inputs;  // values from outside, each once
};

// The chain ending at node i: node i, after the chainable producers of its operands that only
// it reads, and theirs, depth first. `claimed` counts the nodes taken so far, those still being
// gathered included (they join the list only after their producers): it bounds the steps, and
// the recursion's depth with them.
void gather(const Graph& g, int i, const GraphIndex& index, const StaticShapes& shapes, Chain& chain,
            std::size_t& claimed) {
  for (ValueId v : g.nodes()[static_cast<std::size_t>(i)].inputs) {
    const int p = index.producer_index(v);
    if (p >= 0 && claimed < kMostSteps && index.sole_reader_index(v) == i &&
        chainable(g, g.nodes()[static_cast<std::size_t>(p)], shapes)) {
      ++claimed;
      gather(g, p, index, shapes, chain, claimed);
    }
  }
  chain.nodes.push_back(i);
}

}  // namespace

bool fuse_elementwise_chains(Graph& g, const PassContext& ctx) {
  const bool changed = rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes, Rewriter& rewriter) {
    const Node& last = g.nodes()[i];
    if (!chainable(g, last, shapes)) return;
    // Only the chain's last step starts one: a step that the next one alone reads joins it.
    const int reader = index.sole_reader_index(last.outputs[0]);
    if (reader >= 0 && chainable(g, g.nodes()[static_cast<std::size_t>(reader)], shapes)) return;
    Chain chain;
    std::size_t claimed = 1;
    gather(g, static_cast<int>(i), index, shapes, chain, claimed);
    if (chain.nodes.size() < 2 || !rewriter.available(chain.nodes)) return;
    Node fused;
    fused.name = last.name;
    fused.op_type = "ElementwiseChain";
    fused.domain = kWpkDomain;
    fused.outputs = last.outputs;
    std::vector<ValueId> results;  // step s writes results[s]
    for (int n : chain.nodes) results.push_back(g.nodes()[static_cast<std::size_t>(n)].outputs[0]);
    auto is_result = [&](ValueId v) { return std::find(results.begin(), results.end(), v) != results.end(); };
    for (int n : chain.nodes)
      for (ValueId v : g.nodes()[static_cast<std::size_t>(n)].inputs)
        if (!is_result(v) && std::find(chain.inputs.begin(), chain.inputs.end(), v) == chain.inputs.end())
          chain.inputs.push_back(v);
    // fused_ops.hpp's numbering: the inputs, then the steps' results.
    auto number = [&](ValueId v) -> std::int64_t {
      const auto step = std::find(results.begin(), results.end(), v);
      if (step != results.end()) return static_cast<std::int64_t>(chain.inputs.size() + (step - results.begin()));
      return std::find(chain.inputs.begin(), chain.inputs.end(), v) - chain.inputs.begin();
    };
    std::vector<std::string> ops;
    std::vector<std::int64_t> operands;
    for (int n : chain.nodes) {
      const Node& step = g.nodes()[static_cast<std::size_t>(n)];
      ops.push_back(step.op_type);
      operands.push_back(number(step.inputs[0]));
      operands.push_back(step.inputs.size() > 1 ? number(step.inputs[1]) : -1);
      fused.fused_from.push_back(step.op_type);
    }
    fused.inputs = chain.inputs;
    fused.attributes.emplace("ops", Attribute(ops));
    fused.attributes.emplace("operands", Attribute(operands));
    rewriter.replace(chain.nodes, {std::move(fused)});
  });
  if (!changed) return false;
  // The chains' values carry the dims they were formed for: kernels that are generated for a
  // shape read them from the graph, where a model may not have declared them.
  const StaticShapes shapes(g);
  for (const Node& n : g.nodes()) {
    if (n.domain != kWpkDomain || n.op_type != "ElementwiseChain") continue;
    std::vector<ValueId> values = n.inputs;
    values.push_back(n.outputs[0]);
    for (ValueId v : values)
      if (const DimList* d = shapes.dims(v); d && static_dims(d)) g.mutable_value(v).dims = *d;
  }
  ctx.analyses.reset();
  return true;
}

}  // namespace wpk::passes
