#include "graph/passes/match.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/page_memory.hpp"

#include "graph/fused_ops.hpp"

namespace wpk::passes {

GraphIndex::GraphIndex(const Graph& g)
    : g_(g), producer_(g.values().size(), -1), readers_(g.values().size()), is_output_(g.values().size(), false) {
  const auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) readers_[v].push_back(static_cast<int>(i));
    for (ValueId v : nodes[i].outputs)
      if (v != kNoValue) producer_[v] = static_cast<int>(i);
  }
  for (ValueId v : g.outputs()) is_output_[v] = true;
}

int GraphIndex::producer_index(ValueId v) const { return v == kNoValue ? -1 : producer_[v]; }

const Node* GraphIndex::producer(ValueId v) const {
  const int i = producer_index(v);
  return i < 0 ? nullptr : &g_.nodes()[i];
}

int GraphIndex::sole_reader_index(ValueId v) const {
  if (v == kNoValue || is_output_[v] || readers_[v].size() != 1) return -1;
  return readers_[v][0];
}

const Node* GraphIndex::sole_reader(ValueId v) const {
  const int i = sole_reader_index(v);
  return i < 0 ? nullptr : &g_.nodes()[i];
}

const std::vector<int>& GraphIndex::readers(ValueId v) const { return readers_[v]; }

bool is_onnx_op(const Node* n, const char* op_type) {
  return n && (n->domain.empty() || n->domain == "ai.onnx") && n->op_type == op_type;
}

ValueId other_input(const Node& n, ValueId v) {
  if (n.inputs.size() != 2) return kNoValue;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return kNoValue;
}

bool is_inference_batchnorm(const Node& n, const Graph& g) {
  const bool bn = is_onnx_op(&n, "BatchNormalization") || (n.domain == kWpkDomain && n.op_type == "FusedBatchNorm");
  if (!bn || n.inputs.size() != 5 || n.attr_int("training_mode", 0) != 0 || n.attr_int("spatial", 1) != 1) return false;
  for (std::size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] != kNoValue) return false;
  for (std::size_t i = 1; i < 5; ++i)
    if (!g.is_initializer(n.inputs[i])) return false;
  return true;
}

std::optional<std::vector<std::int64_t>> constant_pad_amounts(const Node& n, const Graph& g) {
  if (!is_onnx_op(&n, "Pad")) return std::nullopt;
  if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) return std::nullopt;  // pads of some axes only
  if (const Attribute* a = n.find_attr("pads"))
    return a->kind() == Attribute::Kind::Ints ? std::optional(a->ints()) : std::nullopt;
  const Tensor* t = n.inputs.size() > 1 && n.inputs[1] != kNoValue ? g.initializer(n.inputs[1]) : nullptr;
  if (!t || t->dtype() != DType::Int64 || t->rank() != 1) return std::nullopt;
  return std::vector<std::int64_t>(t->data<std::int64_t>(), t->data<std::int64_t>() + t->numel());
}

std::optional<std::vector<std::int64_t>> int_values(const Tensor& t) {
  if (t.rank() > 1 || (t.dtype() != DType::Int64 && t.dtype() != DType::Int32)) return std::nullopt;
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.dtype() == DType::Int64 ? t.data<std::int64_t>()[i] : t.data<std::int32_t>()[i]);
  return out;
}

std::optional<std::vector<std::int64_t>> constant_int_values(const Graph& g, ValueId v) {
  const Tensor* t = v == kNoValue ? nullptr : g.initializer(v);
  return t ? int_values(*t) : std::nullopt;
}

const Tensor* float_constant(const Graph& g, ValueId v) {
  const Tensor* t = v == kNoValue ? nullptr : g.initializer(v);
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

std::optional<float> scalar_constant(const Graph& g, ValueId v, int other_rank) {
  const Tensor* t = float_constant(g, v);
  if (!t || t->numel() != 1 || (t->rank() > 0 && t->rank() > other_rank)) return std::nullopt;
  return t->data<float>()[0];
}

namespace {

// Clip's bounds: attributes before opset 11, optional one-element constant inputs after.
std::optional<std::vector<float>> clip_bounds(const Graph& g, const Node& clip) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (g.opset() < 11) return std::vector<float>{clip.attr_float("min", lo), clip.attr_float("max", hi)};
  for (std::size_t i = 1; i < clip.inputs.size() && i < 3; ++i) {
    if (clip.inputs[i] == kNoValue) continue;
    const Tensor* t = float_constant(g, clip.inputs[i]);
    if (!t || t->numel() != 1) return std::nullopt;  // a bound computed at run time
    (i == 1 ? lo : hi) = t->data<float>()[0];
  }
  return std::vector<float>{lo, hi};
}

}  // namespace

std::optional<ActivationMatch> match_activation(const Graph& g, const GraphIndex& index, ValueId v) {
  ActivationMatch m;
  const int i = index.sole_reader_index(v);
  if (i < 0) {
    // SiLU reads v twice: Sigmoid(v) and Mul(v, sigmoid), and nothing else may read v.
    const auto& readers = index.readers(v);
    if (readers.size() != 2 || std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end())
      return std::nullopt;
    for (int s : readers) {
      const Node& sig = g.nodes()[s];
      if (!is_onnx_op(&sig, "Sigmoid")) continue;
      const int mi = index.sole_reader_index(sig.outputs[0]);
      const int other = readers[0] == s ? readers[1] : readers[0];
      if (mi != other || !is_onnx_op(&g.nodes()[mi], "Mul") || other_input(g.nodes()[mi], v) != sig.outputs[0])
        continue;
      m.name = "SiLU";
      m.nodes = {s, mi};
      m.output = g.nodes()[mi].outputs[0];
      return m;
    }
    return std::nullopt;
  }
  const Node& n = g.nodes()[i];
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] != v) return std::nullopt;
  m.nodes = {i};
  m.output = n.outputs[0];
  if (n.domain == kWpkDomain && n.op_type == "Gelu") {
    m.name = gelu_activation_kind(n);
    if (m.name.empty()) return std::nullopt;
    return m;
  }
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
    m.name = op;
  } else if (op == "LeakyRelu") {
    m.name = op;
    m.params = {n.attr_float("alpha", 0.01f)};
  } else if (op == "HardSigmoid") {
    m.name = op;
    m.params = {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)};
  } else if (op == "Clip") {
    auto bounds = clip_bounds(g, n);
    if (!bounds) return std::nullopt;
    m.name = op;
    m.params = *bounds;
  } else {
    return std::nullopt;
  }
  return m;
}

std::string unique_name(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.find_value(name) != kNoValue; ++k) name = base + "_" + std::to_string(k);
  return name;
}

GraphAnalyses::GraphAnalyses(const Graph& g)
    : graph(&g), nodes(g.nodes().size()), values(g.values().size()), initializers(g.initializers().size()), index(g), shapes(g) {}

std::shared_ptr<const GraphAnalyses> analyses_of(const Graph& g, const PassContext& ctx) {
  const GraphAnalyses* a = ctx.analyses.get();
  if (!a || a->graph != &g || a->nodes != g.nodes().size() || a->values != g.values().size() ||
      a->initializers != g.initializers().size())
    ctx.analyses = std::make_shared<const GraphAnalyses>(g);
  return ctx.analyses;
}

ValueId add_constant(Graph& g, const std::string& base, Tensor t) {
  return g.add_initializer(unique_name(g, base), std::move(t));
}

namespace {

// In square tiles: element by element, every write of a row of the input lands on another cache
// line and page of the output (a classifier's [1000, 2048] took milliseconds of a load).
template <std::size_t kBytes>
void transpose_tiled(const char* src, char* dst, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 32;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i) * kBytes; };
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (std::int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) std::memcpy(dst + at(c * rows + r), src + at(r * cols + c), kBytes);
}

}  // namespace

Tensor transposed_matrix(const Tensor& t) {
  const std::int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out = long_lived_zeros(t.dtype(), {cols, rows});
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  switch (dtype_size(t.dtype())) {
    case 1: transpose_tiled<1>(src, dst, rows, cols); break;
    case 2: transpose_tiled<2>(src, dst, rows, cols); break;
    case 4: transpose_tiled<4>(src, dst, rows, cols); break;
    case 8: transpose_tiled<8>(src, dst, rows, cols); break;
    default: throw Error(ErrorCode::Internal, "transposed_matrix: no dtype of " + std::to_string(dtype_size(t.dtype())) + " bytes");
  }
  return out;
}

bool Rewriter::available(const std::vector<int>& nodes) const {
  for (int i : nodes)
    if (std::binary_search(claimed_.begin(), claimed_.end(), i)) return false;
  return true;
}

void Rewriter::replace(std::vector<int> matched, std::vector<Node> replacement) {
  for (int i : matched) claimed_.insert(std::upper_bound(claimed_.begin(), claimed_.end(), i), i);
  rewrites_.push_back({std::move(matched), std::move(replacement)});
}

bool Rewriter::apply(Graph& g) {
  if (rewrites_.empty()) return false;
  auto& nodes = g.mutable_nodes();
  std::vector<int> owner(nodes.size(), -1), last(rewrites_.size(), -1);
  for (std::size_t r = 0; r < rewrites_.size(); ++r) {
    std::vector<int> matched = rewrites_[r].matched;
    std::sort(matched.begin(), matched.end());
    std::vector<std::string> ops;  // the model ops the group stands for, in graph order
    for (int i : matched) {
      owner[i] = static_cast<int>(r);
      last[r] = std::max(last[r], i);
      const Node& old = nodes[static_cast<std::size_t>(i)];
      if (old.fused_from.empty()) ops.push_back(old.op_type);
      else ops.insert(ops.end(), old.fused_from.begin(), old.fused_from.end());
    }
    // The node writing the group's output (the last of the replacement) stands for the group.
    if (matched.size() > 1 && !rewrites_[r].replacement.empty()) rewrites_[r].replacement.back().fused_from = std::move(ops);
  }
  std::vector<Node> out;
  out.reserve(nodes.size());
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (owner[i] < 0)
      out.push_back(std::move(nodes[i]));
    else if (last[owner[i]] == i)
      for (Node& n : rewrites_[owner[i]].replacement) out.push_back(std::move(n));
  }
  nodes = std::move(out);
  rewrites_.clear();
  claimed_.clear();
  return true;
}

Epilogue match_epilogue(const Graph& g, const GraphIndex& index, const StaticShapes& shapes, ValueId product,
                        const std::function<bool(const Tensor&)>& is_bias) {
  Epilogue e;
  ValueId cur = product;
  int at = index.sole_reader_index(cur);
  if (is_bias && at >= 0 && is_onnx_op(&g.nodes()[at], "Add")) {
    const ValueId c = other_input(g.nodes()[at], cur);
    const Tensor* t = float_constant(g, c);
    if (t && is_bias(*t)) {
      e.bias = c;
      e.nodes.push_back(at);
      cur = g.nodes()[at].outputs[0];
      at = index.sole_reader_index(cur);
    }
  }
  if (at >= 0 && is_onnx_op(&g.nodes()[at], "Add")) {
    const ValueId z = other_input(g.nodes()[at], cur);
    if (z != kNoValue && !g.is_initializer(z) && shapes.same_shape(z, cur)) {
      e.residual = z;
      e.nodes.push_back(at);
      cur = g.nodes()[at].outputs[0];
    }
  }
  if (auto act = match_activation(g, index, cur)) {
    e.nodes.insert(e.nodes.end(), act->nodes.begin(), act->nodes.end());
    cur = act->output;
    e.activation = std::move(*act);
  }
  e.output = cur;
  return e;
}

}  // namespace wpk::passes
