#include "graph/passes/static_shapes.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk::passes {

bool same_dim(const Dim& a, const Dim& b) {
  if (a.is_static()) return b.is_static() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

bool all_static(const DimList& d) {
  return std::all_of(d.begin(), d.end(), [](const Dim& x) { return x.is_static(); });
}

namespace {

Dim unknown_dim() { return Dim(std::int64_t{-1}); }

// No rule builds a longer dim list: a hostile model's Reshape to a shape of 2^50 entries stays
// unknown here, and the session's rank limit (graph/shape_limits.hpp) reports it.
constexpr std::int64_t kMaxInferredRank = 1024;

bool known(const Dim& d) { return d.is_static() || !d.symbol.empty(); }

IntElem to_elem(const Dim& d) {
  if (d.is_static()) return {d.value, ""};
  return {std::nullopt, d.symbol};
}
IntData to_data(const DimList& dims) {
  IntData out;
  for (const Dim& d : dims) out.push_back(to_elem(d));
  return out;
}
// The elements as dims; negative numbers (not sizes) become unknown.
DimList to_dims(const IntData& data) {
  DimList out;
  for (const IntElem& e : data) {
    if (e.value)
      out.push_back(*e.value >= 0 ? Dim(*e.value) : unknown_dim());
    else
      out.push_back(e.symbol.empty() ? unknown_dim() : Dim(e.symbol));
  }
  return out;
}

bool one_of(const std::string& op, std::initializer_list<const char*> ops) {
  return std::any_of(ops.begin(), ops.end(), [&](const char* o) { return op == o; });
}

// Ops whose output 0 has the shape of input 0.
bool keeps_shape(const Node& n) {
  if (n.domain == kWpkDomain)
    return n.op_type == "Gelu" || n.op_type == "LayerNormalization" || n.op_type == "FusedBatchNorm" ||
           n.op_type == "QLinearAdd";
  return one_of(n.op_type, {"Relu",
                            "QuantizeLinear",
                            "DequantizeLinear",
                            "DynamicQuantizeLinear",
                            "Sigmoid",
                            "Tanh",
                            "Clip",
                            "LeakyRelu",
                            "HardSigmoid",
                            "HardSwish",
                            "Elu",
                            "Selu",
                            "Softplus",
                            "Erf",
                            "Sqrt",
                            "Exp",
                            "Log",
                            "Neg",
                            "Abs",
                            "Sign",
                            "Reciprocal",
                            "Floor",
                            "Ceil",
                            "Round",
                            "Sin",
                            "Cos",
                            "Not",
                            "Identity",
                            "Dropout",
                            "Cast",
                            "Softmax",
                            "LogSoftmax",
                            "LayerNormalization",
                            "BatchNormalization",
                            "InstanceNormalization",
                            "LRN"});
}

// com.wpk ConcatBatchNorm: its 4-D inputs (4 on) joined along the channel axis.
template <typename In>
std::optional<DimList> concat_batchnorm_dims(const Node& n, In in) {
  const std::size_t axis = n.attr_int("channels_last", 0) == 1 ? 3 : 1;
  std::optional<DimList> out;
  std::int64_t total = 0;
  bool total_known = true;
  for (std::size_t i = 4; i < n.inputs.size(); ++i) {
    const DimList* x = in(i);
    if (!x || x->size() != 4) return std::nullopt;
    if (!out) out = *x;
    const Dim& c = (*x)[axis];
    total_known = total_known && c.is_static();
    if (c.is_static()) total += c.value;
  }
  if (out) (*out)[axis] = total_known ? Dim(total) : unknown_dim();
  return out;
}

// Ops whose output has the numpy broadcast shape of all inputs.
bool broadcasts(const Node& n) {
  return one_of(n.op_type, {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater", "LessOrEqual",
                            "GreaterOrEqual", "And", "Or", "Xor", "PRelu", "Max", "Min", "Sum", "Mean"});
}

std::optional<DimList> broadcast(const std::vector<const DimList*>& ins) {
  std::size_t rank = 0;
  for (const DimList* d : ins) {
    if (!d) return std::nullopt;
    rank = std::max(rank, d->size());
  }
  DimList out(rank, Dim(1));
  for (const DimList* d : ins)
    for (std::size_t i = 0; i < d->size(); ++i) {
      Dim& o = out[rank - d->size() + i];
      const Dim& x = (*d)[i];
      if ((x.is_static() && x.value == 1) || same_dim(o, x)) continue;
      if (o.is_static() && o.value == 1)
        o = x;
      else if (o.is_static())
        continue;  // x is o or 1 at run time, so the result is o
      else
        o = x.is_static() ? x : unknown_dim();
    }
  return out;
}

// Product of dims: static when all are, the dim itself when there is one, else unknown.
Dim product(DimList::const_iterator begin, DimList::const_iterator end) {
  if (end - begin == 1) return *begin;
  std::int64_t p = 1;
  for (auto it = begin; it != end; ++it) {
    if (!it->is_static() || (it->value != 0 && p > std::numeric_limits<std::int64_t>::max() / it->value))
      return unknown_dim();
    p *= it->value;
  }
  return Dim(p);
}

// Small integer constants are followed as data: they may be shapes, axes or indices.
std::optional<IntData> small_int_data(const Tensor& t) {
  const auto values = t.numel() <= 64 ? int_values(t) : std::nullopt;
  if (!values) return std::nullopt;
  IntData d;
  for (std::int64_t v : *values) d.push_back({v, ""});
  return d;
}

// Unsqueeze/Squeeze/Reduce axes: an attribute before opset 13, an input from it.
std::optional<std::vector<std::int64_t>> axes_of(const Graph& g, const Node& n) {
  if (n.has_attr("axes")) return n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) return constant_int_values(g, n.inputs[1]);
  return std::vector<std::int64_t>{};
}

// One spatial output size of Conv or pooling, computed the way the reference kernels do.
Dim window_out(const Dim& in, std::int64_t k, std::int64_t stride, std::int64_t dilation, std::int64_t pad_begin,
               std::int64_t pad_end, const std::string& auto_pad, bool ceil_mode) {
  if (!in.is_static() || stride < 1 || k < 1) return unknown_dim();
  const std::int64_t big = std::int64_t(1) << 31;  // beyond any real window: no overflow below
  for (std::int64_t v : {in.value, k, stride, dilation, pad_begin, pad_end})
    if (v > big || v < -big) return unknown_dim();
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return Dim((in.value + stride - 1) / stride);
  if (auto_pad == "VALID") pad_begin = pad_end = 0;
  const std::int64_t span = in.value + pad_begin + pad_end - ((k - 1) * dilation + 1);
  if (span < 0) return unknown_dim();
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in.value + pad_begin) --out;
  return Dim(out);
}

// [N, channels, spatial outputs...] of a Conv (kernel from the weights) or pooling op.
std::optional<DimList> window_dims(const Node& n, const DimList* x, const DimList* w, const Dim& channels) {
  if (!x || x->size() < 3 || x->size() > 5) return std::nullopt;
  if (n.attr_int("channels_last", 0) != 0) {
    // NHWC (the layout pass): the same window over the NCHW view, its result back in NHWC.
    if (x->size() != 4) return std::nullopt;
    const DimList nchw{(*x)[0], (*x)[3], (*x)[1], (*x)[2]};
    Node plain = n;
    plain.attributes.erase("channels_last");
    auto out = window_dims(plain, &nchw, w, channels);
    if (!out) return std::nullopt;
    return DimList{(*out)[0], (*out)[2], (*out)[3], (*out)[1]};
  }
  const std::size_t nd = x->size() - 2;
  std::vector<std::int64_t> kernel = n.attr_ints("kernel_shape");
  if (kernel.empty() && w && w->size() == x->size() && all_static(*w))
    for (std::size_t i = 2; i < w->size(); ++i) kernel.push_back((*w)[i].value);
  const auto strides = n.attr_ints("strides", std::vector<std::int64_t>(nd, 1));
  const auto dilations = n.attr_ints("dilations", std::vector<std::int64_t>(nd, 1));
  const auto pads = n.attr_ints("pads", std::vector<std::int64_t>(2 * nd, 0));
  if (kernel.size() != nd || strides.size() != nd || dilations.size() != nd || pads.size() != 2 * nd)
    return std::nullopt;
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  DimList out = {(*x)[0], channels};
  for (std::size_t i = 0; i < nd; ++i)
    out.push_back(
        window_out((*x)[2 + i], kernel[i], strides[i], dilations[i], pads[i], pads[nd + i], auto_pad, ceil_mode));
  return out;
}

std::optional<DimList> matmul_dims(const DimList* a, const DimList* b) {
  if (!a || !b || a->empty() || b->empty()) return std::nullopt;
  const bool a_vec = a->size() == 1, b_vec = b->size() == 1;
  const DimList a_batch(a->begin(), a->end() - (a_vec ? 1 : 2)), b_batch(b->begin(), b->end() - (b_vec ? 1 : 2));
  auto out = broadcast({&a_batch, &b_batch});
  if (!a_vec) out->push_back((*a)[a->size() - 2]);
  if (!b_vec) out->push_back(b->back());
  return out;
}

// com.wpk Attention's Y from Q [..., S, D], K, V [..., T, Dv], each rank-4 operand flagged in
// interleaved_heads read as [B, S, H, D] (Y then written so); nullopt for a bad attribute.
std::optional<DimList> attention_dims(const Node& n, DimList q, DimList k, DimList v) {
  std::array<bool, 4> interleaved;
  try {
    interleaved = attention_interleaved_heads(n);
  } catch (const Error&) {
    return std::nullopt;  // the kernel reports the attribute
  }
  if ((interleaved[0] && !swap_heads(q)) || (interleaved[1] && !swap_heads(k)) || (interleaved[2] && !swap_heads(v)))
    return std::nullopt;
  const DimList qb(q.begin(), q.end() - 2), kb(k.begin(), k.end() - 2), vb(v.begin(), v.end() - 2);
  auto y = broadcast({&qb, &kb, &vb});
  if (!y) return std::nullopt;
  y->push_back(q[q.size() - 2]);
  y->push_back(v.back());
  if (interleaved[3] && !swap_heads(*y)) return std::nullopt;
  return y;
}

// Reshape to `target` (entries may be symbolic): 0 copies the input dim (unless allowzero), and
// -1 is inferred when the input and the other entries agree on every symbol.
DimList reshape_dims(const DimList* in, const IntData& target, bool allowzero) {
  DimList out;
  int infer_at = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    const IntElem& t = target[i];
    if (t.value == 0 && !allowzero) {
      out.push_back(in && i < in->size() ? (*in)[i] : unknown_dim());
    } else if (t.value == -1) {
      infer_at = static_cast<int>(i);
      out.push_back(unknown_dim());
    } else {
      out.push_back(to_dims({t})[0]);
    }
  }
  if (infer_at < 0 || !in) return out;
  // Both sides as (static product, symbols); -1 is what is left of the input.
  auto split = [](const DimList& d, int skip, std::int64_t& size, std::multiset<std::string>& syms) {
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (static_cast<int>(i) == skip) continue;
      if (!known(d[i])) return false;
      if (d[i].is_static())
        size *= d[i].value;
      else
        syms.insert(d[i].symbol);
    }
    return true;
  };
  std::int64_t in_size = 1, out_size = 1;
  std::multiset<std::string> in_syms, out_syms;
  if (split(*in, -1, in_size, in_syms) && split(out, infer_at, out_size, out_syms) && in_syms == out_syms &&
      out_size > 0 && in_size % out_size == 0)
    out[infer_at] = Dim(in_size / out_size);
  return out;
}

// The element count of a broadcast of 1-D shape data: equal counts, or one side a single element
// (0 with 1 gives 0); nullopt where they do not broadcast.
std::optional<std::size_t> data_broadcast(std::size_t a, std::size_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  return std::nullopt;
}

// Resize's output: its `sizes` where known (stretched: no aspect ratio kept), else each static dim
// times its constant scale, rounded down (a symbolic dim only under a scale of 1).
std::optional<DimList> resize_dims(const Graph& g, const Node& n, const DimList& in, const IntData* sizes) {
  if (sizes && !sizes->empty()) {
    if (n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch" || sizes->size() != in.size()) return std::nullopt;
    return to_dims(*sizes);
  }
  const Tensor* scales = n.inputs.size() > 2 && n.inputs[2] != kNoValue ? g.initializer(n.inputs[2]) : nullptr;
  if (!scales || scales->dtype() != DType::Float32 || scales->numel() != static_cast<std::int64_t>(in.size()))
    return std::nullopt;
  DimList out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float scale = scales->data<float>()[i];
    if (!in[i].is_static() && scale == 1.0f) {  // a batch kept as it is
      out.push_back(in[i]);
      continue;
    }
    const double d = static_cast<double>(in[i].value) * static_cast<double>(scale);
    if (!in[i].is_static() || !(d >= 0) || d > static_cast<double>(std::int64_t{1} << 40)) return std::nullopt;
    out.push_back(Dim(static_cast<std::int64_t>(std::floor(d))));
  }
  return out;
}

}  // namespace

StaticShapes::StaticShapes(const Graph& g)
    : dims_(g.values().size()), data_(g.values().size()), data_dtype_(g.values().size(), DType::Undefined) {
  for (ValueId v : g.inputs()) set_dims(v, g.value(v).dims);
  for (const auto& kv : g.initializers()) {
    const Tensor& t = kv.second;
    set_dims(kv.first, DimList(t.shape().begin(), t.shape().end()));
    if (auto d = small_int_data(t)) set_data(kv.first, *d, t.dtype());
  }
  for (const Node& n : g.nodes()) {
    infer(g, n);
    // A declared shape (value_info) fills in what no rule found.
    for (ValueId v : n.outputs)
      if (v != kNoValue && !dims_[v]) dims_[v] = g.value(v).dims;
  }
}

const DimList* StaticShapes::dims(ValueId v) const {
  return v >= 0 && v < static_cast<ValueId>(dims_.size()) && dims_[v] ? &*dims_[v] : nullptr;
}

int StaticShapes::rank(ValueId v) const {
  const DimList* d = dims(v);
  return d ? static_cast<int>(d->size()) : -1;
}

const IntData* StaticShapes::data(ValueId v) const {
  return v >= 0 && v < static_cast<ValueId>(data_.size()) && data_[v] ? &*data_[v] : nullptr;
}

DType StaticShapes::data_dtype(ValueId v) const { return data(v) ? data_dtype_[v] : DType::Undefined; }

bool StaticShapes::same_shape(ValueId a, ValueId b) const {
  const DimList *da = dims(a), *db = dims(b);
  if (!da || !db || da->size() != db->size()) return false;
  for (std::size_t i = 0; i < da->size(); ++i)
    if (!same_dim((*da)[i], (*db)[i])) return false;
  return true;
}

void StaticShapes::set_dims(ValueId v, std::optional<DimList> d) {
  if (v != kNoValue) dims_[v] = std::move(d);
}

void StaticShapes::set_data(ValueId v, IntData d, DType dtype) {
  if (v == kNoValue) return;
  data_[v] = std::move(d);
  data_dtype_[v] = dtype;
}

void StaticShapes::infer(const Graph& g, const Node& n) {
  if (n.outputs.empty() || n.outputs[0] == kNoValue) return;
  auto in = [&](std::size_t i) { return i < n.inputs.size() ? dims(n.inputs[i]) : nullptr; };
  auto in_data = [&](std::size_t i) { return i < n.inputs.size() ? data(n.inputs[i]) : nullptr; };
  const ValueId out = n.outputs[0];
  const std::string& op = n.op_type;
  const int rank0 = rank(n.inputs.empty() ? kNoValue : n.inputs[0]);

  if (n.domain == kWpkDomain) {
    if (keeps_shape(n) && in(0)) set_dims(out, *in(0));
    if (op == "FusedMatMul" || op == "MatMulIntegerToFloat") set_dims(out, matmul_dims(in(0), in(1)));
    if ((op == "FusedConv" || op == "ConvIntegerToFloat") && in(1) && !in(1)->empty())
      set_dims(out, window_dims(n, in(0), in(1), (*in(1))[0]));
    if (op == "QLinearConvAdd" && in(3) && !in(3)->empty()) set_dims(out, window_dims(n, in(0), in(3), (*in(3))[0]));
    if (op == "DepthwisePointwiseConv" && in(1) && !in(1)->empty() && in(3) && !in(3)->empty())
      if (auto dims = window_dims(n, in(0), in(1), (*in(1))[0]); dims && dims->size() == 4) {
        dims->back() = (*in(3))[0];  // NHWC: the pointwise conv's channels
        set_dims(out, dims);
      }
    if (op == "ScaledPointwiseConv" && in(0) && in(0)->size() == 4 && in(2) && !in(2)->empty()) {
      DimList dims = *in(0);
      dims.back() = (*in(2))[0];
      set_dims(out, dims);
    }
    if (op == "ConcatBatchNorm") set_dims(out, concat_batchnorm_dims(n, [&](std::size_t i) { return in(i); }));
    if (op == "ElementwiseChain" && !n.inputs.empty()) {
      // Steps broadcast only: the output is the broadcast of every input.
      std::vector<const DimList*> ins;
      for (std::size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(in(i));
      set_dims(out, broadcast(ins));  // nullopt where an input's dims are unknown
    }
    if (op == "Attention" && in(0) && in(1) && in(2) && rank0 >= 2 && rank(n.inputs[1]) >= 2 &&
        rank(n.inputs[2]) >= 2)
      set_dims(out, attention_dims(n, *in(0), *in(1), *in(2)));
    return;
  }
  if (!n.domain.empty() && n.domain != "ai.onnx") return;

  if (op == "DynamicQuantizeLinear")  // its scale and zero point are scalars
    for (std::size_t o = 1; o < n.outputs.size() && o < 3; ++o) set_dims(n.outputs[o], DimList{});
  if (op == "Split") {
    if (in(0)) infer_split(g, n, *in(0));
    return;
  }
  if (keeps_shape(n) && in(0)) {
    set_dims(out, *in(0));
    const std::int64_t to = n.attr_int("to", 0);
    if (op == "Cast" && in_data(0) && (to == 6 || to == 7)) set_data(out, *in_data(0), static_cast<DType>(to));
  } else if (broadcasts(n)) {
    std::vector<const DimList*> ins;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(in(i));
    set_dims(out, broadcast(ins));
    // Data is followed for scalars and vectors only: elements pair up by position there.
    bool vectors = true;
    for (ValueId v : n.inputs) vectors = vectors && v != kNoValue && rank(v) >= 0 && rank(v) <= 1;
    if (vectors && in_data(0) && in_data(1)) infer_arithmetic(n, *in_data(0), *in_data(1));
    if (vectors && op == "Equal" && in_data(0) && in_data(1)) infer_equal(n, *in_data(0), *in_data(1));
    if (vectors && op == "Where" && in_data(0) && in_data(1) && in_data(2))
      infer_where(n, *in_data(0), *in_data(1), *in_data(2));
  } else if (op == "MatMul" || op == "MatMulInteger") {
    set_dims(out, matmul_dims(in(0), in(1)));
  } else if (op == "Gemm" && in(0) && in(1) && in(0)->size() == 2 && in(1)->size() == 2) {
    set_dims(out, DimList{(*in(0))[n.attr_int("transA", 0) ? 1 : 0], (*in(1))[n.attr_int("transB", 0) ? 0 : 1]});
  } else if (op == "Conv" && in(1) && !in(1)->empty()) {
    set_dims(out, window_dims(n, in(0), in(1), (*in(1))[0]));
  } else if (op == "QLinearConv" && in(3) && !in(3)->empty()) {
    set_dims(out, window_dims(n, in(0), in(3), (*in(3))[0]));
  } else if ((op == "MaxPool" || op == "AveragePool") && in(0) && in(0)->size() >= 3) {
    const bool nhwc = n.attr_int("channels_last", 0) != 0;
    set_dims(out, window_dims(n, in(0), nullptr, nhwc ? in(0)->back() : (*in(0))[1]));
  } else if ((op == "GlobalAveragePool" || op == "GlobalMaxPool") && in(0) && rank0 >= 3) {
    DimList d(in(0)->size(), Dim(1));
    d[0] = (*in(0))[0];
    if (n.attr_int("channels_last", 0) != 0) d.back() = in(0)->back();  // [N, 1, 1, C]
    else d[1] = (*in(0))[1];
    set_dims(out, d);
  } else if (op == "Flatten" && in(0)) {
    std::int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += rank0;
    if (axis >= 0 && axis <= rank0)
      set_dims(out, DimList{axis == 0 ? Dim(1) : product(in(0)->begin(), in(0)->begin() + axis),
                            axis == rank0 ? Dim(1) : product(in(0)->begin() + axis, in(0)->end())});
  } else if (op == "Pad" && in(0) && !(n.inputs.size() > 3 && n.inputs[3] != kNoValue)) {
    // Pads from the attribute (before opset 11) or a followed constant input.
    std::vector<std::int64_t> pads = n.attr_ints("pads");
    if (pads.empty() && in_data(1))
      for (const IntElem& e : *in_data(1)) {
        if (!e.value) {
          pads.clear();
          break;
        }
        pads.push_back(*e.value);
      }
    if (static_cast<int>(pads.size()) == 2 * rank0 && rank0 > 0) {
      DimList d = *in(0);
      for (int i = 0; i < rank0; ++i) {
        std::int64_t grown = 0;
        if (pads[i] == 0 && pads[rank0 + i] == 0) continue;
        const bool fits = d[i].is_static() && !__builtin_add_overflow(d[i].value, pads[i], &grown) &&
                          !__builtin_add_overflow(grown, pads[rank0 + i], &grown) && grown >= 0;
        d[i] = fits ? Dim(grown) : unknown_dim();
      }
      set_dims(out, d);
    }
  } else if (op == "Transpose" && in(0)) {
    std::vector<std::int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (int i = rank0 - 1; i >= 0; --i) perm.push_back(i);
    DimList d;
    for (std::int64_t p : perm)
      if (p >= 0 && p < rank0) d.push_back((*in(0))[p]);
    if (static_cast<int>(d.size()) == rank0 && static_cast<int>(perm.size()) == rank0) set_dims(out, d);
  } else if (op == "Reshape") {
    if (in_data(1) && in(1) && in(1)->size() == 1)
      set_dims(out, reshape_dims(in(0), *in_data(1), n.attr_int("allowzero", 0) != 0));
    else if (in(1) && in(1)->size() == 1 && (*in(1))[0].is_static() && (*in(1))[0].value <= kMaxInferredRank)
      set_dims(out, DimList(static_cast<std::size_t>((*in(1))[0].value), unknown_dim()));
    // Flattened to one dim (exporters write Reshape(shape, [-1])), the elements keep their order.
    if (in_data(0) && rank(n.inputs[0]) <= 1 && rank(out) == 1 && (*dims(out))[0].is_static() &&
        (*dims(out))[0].value == static_cast<std::int64_t>(in_data(0)->size()))
      set_data(out, *in_data(0), data_dtype(n.inputs[0]));
  } else if (op == "ConstantOfShape" && in_data(0)) {
    set_dims(out, to_dims(*in_data(0)));
    // A small filled shape vector (the ones an Expand's target is built from).
    const Attribute* value = n.find_attr("value");
    const DimList* filled = dims(out);
    if (value && filled && filled->size() == 1 && (*filled)[0].is_static() && (*filled)[0].value <= 64)
      if (const auto fill = small_int_data(value->t()); fill && fill->size() == 1)
        set_data(out, IntData(static_cast<std::size_t>((*filled)[0].value), (*fill)[0]), value->t().dtype());
  } else if (op == "Expand" && in_data(1)) {
    const DimList target = to_dims(*in_data(1));
    set_dims(out, broadcast({in(0), &target}));
  } else if (op == "Resize" && in(0) && !n.has_attr("axes") &&
             n.attr_string("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize") {
    set_dims(out, resize_dims(g, n, *in(0), n.inputs.size() > 3 ? in_data(3) : nullptr));
  } else if (op == "Range") {
    set_dims(out, DimList{unknown_dim()});
  } else if (op == "Constant" && n.has_attr("value")) {
    const Tensor& t = n.find_attr("value")->t();
    set_dims(out, DimList(t.shape().begin(), t.shape().end()));
    if (auto d = small_int_data(t)) set_data(out, *d, t.dtype());
  } else {
    infer_shape_data(g, n);
  }
}

// Split's outputs: the input's dims with the axis cut into the sizes given (a constant input, else
// the attribute older opsets use), else into equal parts of a static axis (the last part
// smaller where num_outputs does not divide it, as opset 18 allows).
void StaticShapes::infer_split(const Graph& g, const Node& n, const DimList& in) {
  const auto r = static_cast<std::int64_t>(in.size());
  std::int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return;
  std::vector<std::int64_t> sizes;
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {  // the input wins, as in the kernel
    const IntData* given = data(n.inputs[1]);
    if (!given) return;
    for (const IntElem& e : *given) {
      if (!e.value) return;
      sizes.push_back(*e.value);
    }
  } else if (g.opset() < 13 && n.has_attr("split")) {
    sizes = n.attr_ints("split");
  } else {
    const auto parts = static_cast<std::int64_t>(n.outputs.size());
    if (!in[axis].is_static() || parts < 1) return;
    const std::int64_t d = in[axis].value, part = (d + parts - 1) / parts;
    if (d % parts != 0 && !n.has_attr("num_outputs")) return;
    for (std::int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<std::int64_t>(0, std::min(part, d - i * part)));
  }
  if (sizes.size() != n.outputs.size()) return;
  std::int64_t total = 0;
  for (std::int64_t size : sizes)
    if (size < 0 || __builtin_add_overflow(total, size, &total)) return;
  if (in[axis].is_static() && total != in[axis].value) return;  // an invalid split: the run says so
  for (std::size_t o = 0; o < sizes.size(); ++o) {
    DimList d = in;
    d[axis] = Dim(sizes[o]);
    set_dims(n.outputs[o], d);
  }
}

namespace {

// Pairs the elements of two shape data as a broadcast does and maps each pair through f; nullopt
// where they do not broadcast or f gives up on a pair.
template <typename F>
std::optional<IntData> pairwise(const IntData& a, const IntData& b, F f) {
  const std::optional<std::size_t> count = data_broadcast(a.size(), b.size());
  if (!count) return std::nullopt;
  IntData out;
  for (std::size_t i = 0; i < *count; ++i) {
    const std::optional<IntElem> e = f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    if (!e) return std::nullopt;
    out.push_back(*e);
  }
  return out;
}

}  // namespace

// Integer arithmetic on dims (head size = hidden / heads): elementwise, or against one value.
void StaticShapes::infer_arithmetic(const Node& n, const IntData& a, const IntData& b) {
  const std::string& op = n.op_type;
  if ((op != "Add" && op != "Sub" && op != "Mul" && op != "Div") || n.inputs.size() != 2) return;
  const auto out = pairwise(a, b, [&](const IntElem& x, const IntElem& y) -> std::optional<IntElem> {
    if (!x.value || !y.value || (op == "Div" && *y.value == 0)) return std::nullopt;
    const std::int64_t u = *x.value, v = *y.value, limit = std::int64_t(1) << 31;
    if (u > limit || u < -limit || v > limit || v < -limit) return std::nullopt;  // dims, not sentinels: no overflow
    // Div truncates, as the reference kernel's integer division does.
    return IntElem{op == "Add" ? u + v : op == "Sub" ? u - v : op == "Mul" ? u * v : u / v, ""};
  });
  if (out) set_data(n.outputs[0], *out, data_dtype(n.inputs[0]));
}

// Equal on shape elements: numbers compare; an element without a value stands for a dim (symbolic
// or unknown, the only way data loses a value), never negative, so it differs from any negative
// number (the -1 an exporter compares a size with); else unknown.
void StaticShapes::infer_equal(const Node& n, const IntData& a, const IntData& b) {
  const auto out = pairwise(a, b, [](const IntElem& x, const IntElem& y) -> std::optional<IntElem> {
    if (x.value && y.value) return IntElem{*x.value == *y.value ? 1 : 0, ""};
    if ((x.value && *x.value < 0) || (y.value && *y.value < 0)) return IntElem{0, ""};
    if (!x.symbol.empty() && x.symbol == y.symbol) return IntElem{1, ""};
    return std::nullopt;
  });
  if (out) set_data(n.outputs[0], *out, DType::Bool);
}

// Where on shape elements: each element from x or y as its condition says.
void StaticShapes::infer_where(const Node& n, const IntData& cond, const IntData& x, const IntData& y) {
  const std::optional<std::size_t> xy = data_broadcast(x.size(), y.size());
  const std::optional<std::size_t> count = xy ? data_broadcast(cond.size(), *xy) : std::nullopt;
  if (!count) return;
  IntData out;
  for (std::size_t i = 0; i < *count; ++i) {
    const IntElem& c = cond[cond.size() == 1 ? 0 : i];
    if (!c.value) return;
    out.push_back(*c.value ? x[x.size() == 1 ? 0 : i] : y[y.size() == 1 ? 0 : i]);
  }
  set_data(n.outputs[0], out, data_dtype(n.inputs[1]));
}

// Ops that move dims around as data: Shape, and what exporters compute from it to build the
// targets of Reshape and Expand.
void StaticShapes::infer_shape_data(const Graph& g, const Node& n) {
  auto in = [&](std::size_t i) { return i < n.inputs.size() ? dims(n.inputs[i]) : nullptr; };
  auto in_data = [&](std::size_t i) { return i < n.inputs.size() ? data(n.inputs[i]) : nullptr; };
  const ValueId out = n.outputs[0];
  const std::string& op = n.op_type;
  const DType dtype0 = n.inputs.empty() ? DType::Undefined : data_dtype(n.inputs[0]);
  // An index or bound in [0, size], counted from the back when negative (Shape, Slice).
  auto clamp_index = [](std::int64_t i, std::int64_t size) {
    if (i < 0) i += size;
    return std::clamp<std::int64_t>(i, 0, size);
  };
  if (op == "Shape" && in(0)) {
    const auto r = static_cast<std::int64_t>(in(0)->size());
    const std::int64_t start = clamp_index(n.attr_int("start", 0), r);
    const std::int64_t end = std::max(start, clamp_index(n.attr_int("end", r), r));
    set_dims(out, DimList{Dim(end - start)});
    set_data(out, to_data(DimList(in(0)->begin() + start, in(0)->begin() + end)), DType::Int64);
  } else if (op == "Gather" && in(0) && in(1) && !in(0)->empty()) {
    const auto r = static_cast<std::int64_t>(in(0)->size());
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return;
    DimList d(in(0)->begin(), in(0)->begin() + axis);
    d.insert(d.end(), in(1)->begin(), in(1)->end());
    d.insert(d.end(), in(0)->begin() + axis + 1, in(0)->end());
    set_dims(out, d);
    if (!in_data(0) || !in_data(1) || r != 1) return;
    IntData picked;
    for (const IntElem& i : *in_data(1)) {
      const auto size = static_cast<std::int64_t>(in_data(0)->size());
      if (!i.value || *i.value < -size || *i.value >= size) return;
      picked.push_back((*in_data(0))[*i.value < 0 ? *i.value + size : *i.value]);
    }
    set_data(out, picked, dtype0);
  } else if (op == "Unsqueeze" && in(0)) {
    const auto axes = axes_of(g, n);
    if (!axes) return;
    const auto r = static_cast<std::int64_t>(in(0)->size() + axes->size());
    std::vector<bool> inserted(static_cast<std::size_t>(r), false);
    for (std::int64_t a : *axes) {
      if (a < 0) a += r;
      if (a < 0 || a >= r || inserted[a]) return;
      inserted[a] = true;
    }
    DimList d;
    auto it = in(0)->begin();
    for (std::int64_t i = 0; i < r; ++i) d.push_back(inserted[i] ? Dim(1) : *it++);
    set_dims(out, d);
    if (in_data(0)) set_data(out, *in_data(0), dtype0);
  } else if (op == "Squeeze" && in(0)) {
    const auto axes = axes_of(g, n);
    if (!axes) return;
    const auto r = static_cast<std::int64_t>(in(0)->size());
    std::vector<bool> removed(static_cast<std::size_t>(r), false);
    for (std::int64_t i = 0; i < r && axes->empty(); ++i) {
      if (!(*in(0))[i].is_static()) return;  // might or might not be 1
      removed[i] = (*in(0))[i].value == 1;
    }
    for (std::int64_t a : *axes) {
      if (a < 0) a += r;
      if (a < 0 || a >= r) return;
      removed[a] = true;
    }
    DimList d;
    for (std::int64_t i = 0; i < r; ++i)
      if (!removed[i]) d.push_back((*in(0))[i]);
    set_dims(out, d);
    if (in_data(0)) set_data(out, *in_data(0), dtype0);
  } else if (op == "Concat" && in(0) && !in(0)->empty()) {
    const auto r = static_cast<std::int64_t>(in(0)->size());
    std::int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return;
    DimList d = *in(0);
    std::int64_t total = 0;
    bool total_known = true, data_known = r == 1;
    IntData joined;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      if (!in(i) || static_cast<std::int64_t>(in(i)->size()) != r) return;
      for (std::int64_t j = 0; j < r; ++j)
        if (j != axis && !known(d[j])) d[j] = (*in(i))[j];  // inputs agree off the axis
      const Dim& a = (*in(i))[axis];
      total_known = total_known && a.is_static();
      if (a.is_static()) total += a.value;
      data_known = data_known && in_data(i);
      if (data_known) joined.insert(joined.end(), in_data(i)->begin(), in_data(i)->end());
    }
    d[axis] = total_known ? Dim(total) : unknown_dim();
    set_dims(out, d);
    if (data_known) set_data(out, joined, dtype0);
  } else if (op == "Slice" && in(0) && in(0)->size() == 1 && in_data(0)) {
    // Only the 1-D, step-1 slices of shapes that exporters write (x.shape[1:3]).
    const bool attrs = g.opset() < 10;
    auto arg = [&](std::size_t i, const char* name) -> std::optional<std::vector<std::int64_t>> {
      if (attrs) return n.has_attr(name) ? std::optional(n.attr_ints(name)) : std::nullopt;
      if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return std::nullopt;
      return constant_int_values(g, n.inputs[i]);
    };
    const auto starts = arg(1, "starts"), ends = arg(2, "ends"), axes = arg(3, "axes"), steps = arg(4, "steps");
    if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return;
    if (axes && !(axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1))) return;
    if (steps && !(steps->size() == 1 && (*steps)[0] == 1)) return;
    const auto size = static_cast<std::int64_t>(in_data(0)->size());
    const std::int64_t b = clamp_index((*starts)[0], size), e = std::max(b, clamp_index((*ends)[0], size));
    set_dims(out, DimList{Dim(e - b)});
    set_data(out, IntData(in_data(0)->begin() + b, in_data(0)->begin() + e), dtype0);
  }
}

void annotate_static_shapes(Graph& g) {
  const StaticShapes shapes(g);
  for (std::size_t v = 0; v < g.values().size(); ++v) {
    ValueInfo& info = g.mutable_value(static_cast<ValueId>(v));
    const DimList* found = shapes.dims(static_cast<ValueId>(v));
    if (!found) continue;
    const bool declared_complete =
        info.dims && std::all_of(info.dims->begin(), info.dims->end(), [](const Dim& d) { return d.is_static() || !d.symbol.empty(); });
    if (!declared_complete) {
      info.dims = *found;
      continue;
    }
    // A dim the model declares by a name of its own (exporters name each output's dims) that
    // the walk proves static takes the number: placement and kernels need static shapes.
    if (info.dims->size() != found->size()) continue;
    for (std::size_t d = 0; d < found->size(); ++d)
      if (!(*info.dims)[d].is_static() && (*found)[d].is_static()) (*info.dims)[d] = (*found)[d];
  }
}

}  // namespace wpk::passes
