// Transformer exporters split heads off a projection as Transpose(Reshape(x, [B, S, H, D]),
// perm (0, 2, 1, 3)) and merge them back the same way after attention: four copies of an
// activation per layer (BERT-base at seq 128: 48 Transposes, 1.4-3 ms of a ~140 ms run). A com.wpk
// Attention reading such a Transpose's input instead, or writing such a Transpose's output
// itself, flags that operand in interleaved_heads (graph/fused_ops.hpp), and its kernels read
// and write those layouts through strides. A Transpose left without readers goes with dead code.
#include <algorithm>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"
#include "graph/passes/static_shapes.hpp"

namespace wpk::passes {
namespace {

// A Transpose that swaps axes 1 and 2 of a rank-4 tensor, the head split and merge.
bool swaps_heads(const Node* n) {
  return is_onnx_op(n, "Transpose") && n->inputs.size() == 1 && n->has_attr("perm") &&
         n->attr_ints("perm") == std::vector<std::int64_t>{0, 2, 1, 3};
}

}  // namespace

bool read_attention_heads_in_place(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& att = g.nodes()[i];
    if (att.domain != kWpkDomain || att.op_type != "Attention" || att.inputs.size() < 3 || att.outputs.empty()) return;
    std::vector<std::int64_t> flags(4, 0);
    try {
      const std::array<bool, 4> interleaved = attention_interleaved_heads(att);
      std::copy(interleaved.begin(), interleaved.end(), flags.begin());
    } catch (const Error&) {
      return;  // a bad attribute: the kernels report it
    }
    for (int o = 0; o < 3; ++o)
      if (shapes.rank(att.inputs[static_cast<std::size_t>(o)]) != 4) return;
    Node rewritten = att;
    std::vector<int> matched = {static_cast<int>(i)};
    bool changed = false;
    for (std::size_t o = 0; o < 3; ++o) {
      const Node* t = index.producer(att.inputs[o]);
      if (flags[o] || !swaps_heads(t)) continue;
      rewritten.inputs[o] = t->inputs[0];
      flags[o] = 1;
      changed = true;
    }
    // The merge is absorbed when it is the output's only reader; the Transpose then goes.
    const int merge = index.sole_reader_index(att.outputs[0]);
    if (!flags[3] && merge >= 0 && swaps_heads(&g.nodes()[static_cast<std::size_t>(merge)])) {
      rewritten.outputs[0] = g.nodes()[static_cast<std::size_t>(merge)].outputs[0];
      matched.push_back(merge);
      flags[3] = 1;
      changed = true;
    }
    if (!changed || !rewriter.available(matched)) return;
    rewritten.attributes.insert_or_assign("interleaved_heads", Attribute(flags));
    rewriter.replace(matched, {std::move(rewritten)});
  });
}

}  // namespace wpk::passes
