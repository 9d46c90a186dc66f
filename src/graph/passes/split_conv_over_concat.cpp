// A channel Concat read only by a 1x1 convolution is never built: a convolution is a sum over its
// input channels, so conv(Concat(X0, X1, ...), W) = conv(X0, W0) + conv(X1, W1) + ... with Wi
// the weights' slice for Xi's channels. The reader becomes a chain of com.wpk FusedConv, one per
// concat input, each adding the previous one's result as its residual (which oneDNN runs as an
// accumulation into the same bytes); the bias goes to the first, the activation to the last.
// SqueezeNet's fire modules (expand 1x1 and 3x3, concatenated, then squeezed) are this pattern.
//
// Only 1x1 readers: their outputs are narrow next to the concat (SqueezeNet squeezes 128 -> 16
// channels), so the extra accumulation passes cost less than the copy; a 3x3 reader would also
// lose its Winograd kernel, which takes no residual. Runs after the layout pass: the channel
// axis is 3 for channels_last = 1 and 1 otherwise.
#include <algorithm>

#include "core/page_memory.hpp"
#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {
namespace {

// A Conv or FusedConv reading `v` as its activation only, ungrouped, with constant 4-D 1x1
// weights whose input channels are those of the concatenation along `axis` (rank 4).
bool splittable_reader(const Graph& g, const Node& n, ValueId v, std::int64_t axis, std::int64_t channels) {
  const bool conv = is_onnx_op(&n, "Conv") || (n.domain == kWpkDomain && n.op_type == "FusedConv");
  if (!conv || n.inputs.size() < 2 || n.inputs[0] != v || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
  for (std::size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] == v) return false;
  const Tensor* w = float_constant(g, n.inputs[1]);
  if (!w || w->rank() != 4 || w->shape()[1] != channels || w->shape()[2] != 1 || w->shape()[3] != 1) return false;
  if (n.attr_int("group", 1) != 1) return false;
  const std::int64_t channels_last = n.attr_int("channels_last", 0);
  if (channels_last != 0 && channels_last != 1) return false;
  return axis == (channels_last ? 3 : 1);
}

// Weights [O, C, 1, 1] -> the input channels [c0, c0 + c) of each output channel.
Tensor channel_slice(const Tensor& w, std::int64_t c0, std::int64_t c) {
  const std::int64_t out = w.shape()[0], in = w.shape()[1];
  Tensor s = long_lived_zeros(DType::Float32, {out, c, 1, 1});
  const float* from = w.data<float>();
  float* to = s.data<float>();
  for (std::int64_t o = 0; o < out; ++o) std::copy_n(from + o * in + c0, c, to + o * c);
  return s;
}

}  // namespace

bool split_conv_over_concat(Graph& g, const PassContext& ctx) {
  return rewrite_to_fixed_point(g, ctx, [&](std::size_t i, const GraphIndex& index, const StaticShapes& shapes,
                                       Rewriter& rewriter) {
    const Node& concat = g.nodes()[i];
    if (!is_onnx_op(&concat, "Concat") || concat.inputs.size() < 2 || concat.outputs.size() != 1) return;
    const ValueId joined = concat.outputs[0];
    if (shapes.rank(joined) != 4) return;
    std::int64_t axis = concat.attr_int("axis", 0);
    if (axis < 0) axis += 4;
    if (axis != 1 && axis != 3) return;  // a channel axis (NCHW or NHWC); also rejects nonsense
    std::vector<std::int64_t> widths;  // channels of each input
    std::int64_t channels = 0;
    for (ValueId v : concat.inputs) {
      const DimList* d = v == kNoValue ? nullptr : shapes.dims(v);
      if (!d || d->size() != 4 || g.is_initializer(v) || g.value(v).dtype != DType::Float32) return;
      const Dim& c = (*d)[static_cast<std::size_t>(axis)];
      if (!c.is_static() || c.value < 1) return;
      widths.push_back(c.value);
      channels += c.value;
    }
    // One reader: the parts go where it was, after every concat input and before its readers.
    const int r = index.sole_reader_index(joined);
    if (r < 0 || !splittable_reader(g, g.nodes()[static_cast<std::size_t>(r)], joined, axis, channels)) return;
    const std::vector<int> matched{static_cast<int>(i), r};
    if (!rewriter.available(matched)) return;

    std::vector<Node> replacement;
    const Node& conv = g.nodes()[static_cast<std::size_t>(r)];
    const Tensor& w = *g.initializer(conv.inputs[1]);
    const ValueId bias = conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue;
    ValueId partial = conv.inputs.size() > 3 ? conv.inputs[3] : kNoValue;  // a residual it already adds
    std::vector<std::string> ops = conv.fused_from.empty() ? std::vector<std::string>{conv.op_type} : conv.fused_from;
    ops.insert(ops.begin(), "Concat");
    std::int64_t c0 = 0;
    for (std::size_t j = 0; j < concat.inputs.size(); ++j) {
      const bool last = j + 1 == concat.inputs.size();
      Node part = conv;
      part.op_type = "FusedConv";
      part.domain = kWpkDomain;
      part.name = conv.name + "__part" + std::to_string(j);
      const ValueId w_part =
          add_constant(g, g.value(conv.inputs[1]).name + "_part" + std::to_string(j), channel_slice(w, c0, widths[j]));
      part.inputs = {concat.inputs[j], w_part, j == 0 ? bias : kNoValue};
      if (partial != kNoValue) part.inputs.push_back(partial);
      while (part.inputs.back() == kNoValue) part.inputs.pop_back();  // X and W stay
      if (last) {
        part.outputs = conv.outputs;
      } else {
        part.attributes.erase("activation");
        part.attributes.erase("activation_params");
        ValueInfo info = g.value(conv.outputs[0]);
        info.name = unique_name(g, info.name + "__part" + std::to_string(j));
        if (const DimList* d = shapes.dims(conv.outputs[0])) info.dims = *d;
        part.outputs = {g.add_value(std::move(info))};
        partial = part.outputs[0];
      }
      part.fused_from = ops;
      replacement.push_back(std::move(part));
      c0 += widths[j];
    }
    rewriter.replace(matched, std::move(replacement));
  });
}

}  // namespace wpk::passes
