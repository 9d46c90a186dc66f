// wpk::quantize_model (wpk/quantize.hpp): the float model's ONNX protobuf rewritten into the
// QDQ form. Conv weights become int8 per output channel, MatMul/Gemm B int8 per output column.
// Which activations get a Q/DQ pair:
//   - each quantized product's input A (its output stays float);
//   - each quantized Conv's input, and its output, or its Relu's or Clip(0, max)'s when that is the
//     output's only reader (a uint8 range from 0 saturates where it clips, so the pair covers both);
//   - the inputs and output (or its Relu's) of an Add whose two inputs both have a pair;
//   - a MaxPool's output when its input has a pair, at the input's scale and zero point.
// A tensor with a pair keeps its name on the DequantizeLinear's output, so every reader and the
// graph's outputs are left as they were; the value its producer writes gets a new name.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <algorithm>

#include "graph/onnx_names.hpp"
#include "graph/onnx_tensor.hpp"
#include "runtime/calibration.hpp"
#include "wpk/wpk.hpp"

namespace wpk {
namespace {

constexpr std::int64_t kMinOpset = 13;  // per-axis DequantizeLinear

bool is_onnx_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

onnx::ModelProto read_model(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(ErrorCode::NotFound, "'" + path + "': file not found");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > static_cast<std::uintmax_t>(std::numeric_limits<int>::max()))
    throw Error(ErrorCode::InvalidModel, "'" + path + "': larger than 2 GiB");
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in))
    throw Error(ErrorCode::InvalidModel, "'" + path + "': not a valid ONNX protobuf (truncated or not ONNX)");
  return model;
}

std::int64_t onnx_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (is_onnx_domain(o.domain())) return o.version();
  return 0;
}

// Round half to even, as QuantizeLinear rounds.
float round_even(float v) { return std::nearbyint(v); }

// uint8 scale and zero point covering [r.lo, r.hi] (which holds 0).
std::pair<float, std::uint8_t> activation_params(const ActivationRange& r) {
  const float span = r.hi - r.lo;
  const float scale = span / 255.0f;
  // No range, or one so small its scale is not a normal float (QuantizeLinear would divide by 0).
  if (!(scale >= std::numeric_limits<float>::min())) return {1.0f, 0};
  const float zero = std::min(255.0f, std::max(0.0f, round_even(-r.lo / scale)));
  return {scale, static_cast<std::uint8_t>(zero)};
}

// int8 weights symmetric per slice along `axis` (0: a Conv's output channels or a transposed
// product's rows; 1: a product's columns): scale = max |w| / top, codes in [-top, top].
struct QuantizedWeights {
  Tensor q, scale, zero;
};
QuantizedWeights quantize_weights(const Tensor& w, int axis, float top) {
  const std::int64_t channels = w.dim(axis), per = w.numel() / std::max<std::int64_t>(1, channels);
  // Element (c, i) of channel c: rows of `per` for axis 0, columns of a [per, channels] matrix for 1.
  auto at = [&](std::int64_t c, std::int64_t i) { return axis == 0 ? c * per + i : i * channels + c; };
  std::vector<std::int8_t> q(static_cast<std::size_t>(w.numel()));
  std::vector<float> scales(static_cast<std::size_t>(channels));
  const float* p = w.data<float>();
  for (std::int64_t c = 0; c < channels; ++c) {
    float amax = 0;
    for (std::int64_t i = 0; i < per; ++i) {
      if (!std::isfinite(p[at(c, i)])) throw Error(ErrorCode::InvalidModel, "a weight is not finite: it cannot be quantized");
      amax = std::max(amax, std::fabs(p[at(c, i)]));
    }
    const float s = amax / top >= std::numeric_limits<float>::min() ? amax / top : 1.0f;  // all ~0: any scale
    scales[static_cast<std::size_t>(c)] = s;
    for (std::int64_t i = 0; i < per; ++i)
      q[static_cast<std::size_t>(at(c, i))] = static_cast<std::int8_t>(std::min(top, std::max(-top, round_even(p[at(c, i)] / s))));
  }
  return {Tensor::from_vector(q, w.shape()), Tensor::from_vector(scales, {channels}),
          Tensor::from_vector(std::vector<std::int8_t>(static_cast<std::size_t>(channels), 0), {channels})};
}

// int32 bias at scale x_scale * w_scale[c] (in float32, as QLinearConv forms it).
QuantizedWeights quantize_bias(const Tensor& b, float x_scale, const Tensor& w_scale) {
  const std::int64_t n = b.numel();
  std::vector<std::int32_t> q(static_cast<std::size_t>(n));
  std::vector<float> scales(static_cast<std::size_t>(n));
  for (std::int64_t c = 0; c < n; ++c) {
    const float s = x_scale * w_scale.data<float>()[c];
    scales[static_cast<std::size_t>(c)] = s;
    const double v = std::nearbyint(static_cast<double>(b.data<float>()[c]) / s);
    q[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(std::min(2147483647.0, std::max(-2147483648.0, v)));
  }
  return {Tensor::from_vector(q, {n}), Tensor::from_vector(scales, {n}),
          Tensor::from_vector(std::vector<std::int32_t>(static_cast<std::size_t>(n), 0), {n})};
}

class Quantizer {
 public:
  Quantizer(onnx::ModelProto& model, std::string base_dir, bool reduce_range)
      : g_(*model.mutable_graph()), names_(g_), base_dir_(std::move(base_dir)), weight_top_(reduce_range ? 64.0f : 127.0f) {
    for (int i = 0; i < g_.initializer_size(); ++i) initializers_[g_.initializer(i).name()] = i;
    for (const auto& v : g_.input()) graph_inputs_.insert(v.name());
    for (const auto& v : g_.output()) graph_outputs_.insert(v.name());
    for (int i = 0; i < g_.node_size(); ++i) {
      for (const auto& s : g_.node(i).input()) readers_[s].push_back(i);
      if (g_.node(i).op_type() == "Constant" && g_.node(i).output_size() == 1) constant_nodes_[g_.node(i).output(0)] = i;
    }
  }

  // Picks the Convs, products and activations to quantize; returns those activations' names.
  std::vector<std::string> plan(QuantizeReport& report) {
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      const bool conv = n.op_type() == "Conv", product = n.op_type() == "MatMul" || n.op_type() == "Gemm";
      if ((!conv && !product) || !is_onnx_domain(n.domain())) continue;
      // A product of two activations (attention's) has no weights to quantize: not worth a word.
      if (product && (n.input_size() < 2 || !constant(n.input(1)))) continue;
      const std::string why = conv ? conv_unquantizable(n) : product_unquantizable(n);
      if (!why.empty()) {
        report.skipped.push_back(n.op_type() + " '" + (n.name().empty() ? n.output(0) : n.name()) + "': " + why);
        continue;
      }
      add_activation(n.input(0));
      if (conv) {
        convs_.push_back(i);
        add_activation(end_of(n.output(0)));
      } else {
        products_.push_back(i);  // its output stays float: wpk computes it so from the integer product
      }
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      if (n.op_type() == "Add" && is_onnx_domain(n.domain()) && n.input_size() == 2 && n.output_size() == 1 &&
          has_pair(n.input(0)) && has_pair(n.input(1)))
        add_activation(end_of(n.output(0)));
      if (n.op_type() == "MaxPool" && is_onnx_domain(n.domain()) && n.output_size() == 1 && has_pair(n.input(0)) &&
          !has_pair(n.output(0))) {
        add_activation(n.output(0));
        shares_params_[n.output(0)] = n.input(0);
      }
    }
    report.convs = static_cast<int>(convs_.size());
    report.products = static_cast<int>(products_.size());
    report.activations = static_cast<int>(activations_.size());
    return activations_;
  }

  void rewrite(const std::map<std::string, ActivationRange>& ranges) {
    std::map<std::string, std::pair<std::string, std::string>> params;  // activation -> (scale, zero) names
    for (const std::string& a : activations_) {
      if (shares_params_.count(a)) continue;
      const auto [scale, zero] = activation_params(ranges.at(a));
      params[a] = {add_initializer(a + "_scale", Tensor::scalar(scale)), add_initializer(a + "_zero_point", Tensor::scalar(zero))};
      scales_[a] = scale;
    }
    for (const auto& [a, from] : shares_params_) params[a] = params.at(root_of(from));

    std::vector<onnx::NodeProto> nodes;
    std::map<std::string, std::string> renamed_inputs;  // graph input -> its DequantizeLinear's output
    for (const std::string& a : activations_)
      if (graph_inputs_.count(a)) {
        const std::string dq = names_.fresh(a + "_dequantized");
        emit_pair(nodes, a, dq, params.at(a));
        renamed_inputs[a] = dq;
      }
    std::set<int> convs(convs_.begin(), convs_.end()), products(products_.begin(), products_.end());
    for (int i = 0; i < g_.node_size(); ++i) {
      onnx::NodeProto n = g_.node(i);
      const float x_scale = convs.count(i) ? scales_.at(root_of(n.input(0))) : 0;
      for (auto& in : *n.mutable_input())
        if (renamed_inputs.count(in)) in = renamed_inputs.at(in);
      if (convs.count(i)) quantize_conv_weights(n, x_scale, nodes);
      if (products.count(i)) quantize_product_weights(n, nodes);
      std::vector<std::pair<std::string, std::string>> pairs;  // (float output, name it keeps)
      for (auto& out : *n.mutable_output())
        if (!out.empty() && params.count(out) && !graph_inputs_.count(out)) {
          const std::string kept = out;
          out = names_.fresh(kept + "_float");
          pairs.emplace_back(out, kept);
        }
      nodes.push_back(std::move(n));
      for (const auto& [from, kept] : pairs) emit_pair(nodes, from, kept, params.at(kept));
    }
    g_.clear_node();
    for (auto& n : nodes) *g_.add_node() = std::move(n);
    drop_unread_initializers();
  }

 private:
  // "" when the MatMul or Gemm can be quantized: constant float32 2-D B; Gemm plain but for
  // transB (alpha and beta 1), its C left as it is.
  std::string product_unquantizable(const onnx::NodeProto& n) {
    if (n.input_size() < 2) return "no B";
    const Tensor* b = constant(n.input(1));
    if (!b || b->dtype() != DType::Float32 || b->rank() != 2) return "B is not a constant 2-D float32 tensor";
    if (initializers_.count(n.input(0)) || constant_nodes_.count(n.input(0))) return "A is a constant";
    for (const auto& a : n.attribute()) {
      if (a.name() == "transA" && a.i() != 0) return "transA";
      if ((a.name() == "alpha" || a.name() == "beta") && a.f() != 1.0f) return a.name() + " is not 1";
    }
    return "";
  }

  bool transposed_b(const onnx::NodeProto& n) const {
    for (const auto& a : n.attribute())
      if (a.name() == "transB") return n.op_type() == "Gemm" && a.i() != 0;
    return false;
  }

  // The product reads DequantizeLinear(int8 B), per output column.
  void quantize_product_weights(onnx::NodeProto& n, std::vector<onnx::NodeProto>& nodes) {
    const int axis = transposed_b(n) ? 0 : 1;
    const QuantizedWeights w = quantize_weights(*constant(n.input(1)), axis, weight_top_);
    const std::string wq = add_initializer(n.input(1) + "_quantized", w.q);
    const std::string ws = add_initializer(n.input(1) + "_scale", w.scale);
    const std::string wz = add_initializer(n.input(1) + "_zero_point", w.zero);
    const std::string wd = names_.fresh(n.input(1) + "_dequantized");
    nodes.push_back(make_node("DequantizeLinear", {wq, ws, wz}, wd, axis));
    n.set_input(1, wd);
  }

  // "" when the Conv can be quantized: 2-D, float32 constant weights and bias.
  std::string conv_unquantizable(const onnx::NodeProto& n) {
    if (n.input_size() < 2) return "no weights";
    const Tensor* w = constant(n.input(1));
    if (!w || w->dtype() != DType::Float32 || w->rank() != 4) return "weights are not a constant 4-D float32 tensor";
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Tensor* b = constant(n.input(2));
      if (!b || b->dtype() != DType::Float32 || b->numel() != w->dim(0)) return "bias is not a constant float32 [C_out]";
    }
    if (initializers_.count(n.input(0))) return "its input is a constant";
    return "";
  }

  // An initializer's value, or a Constant node's (exporters write Clip's bounds so).
  const Tensor* constant(const std::string& name) {
    auto cached = loaded_.find(name);
    if (cached != loaded_.end()) return &cached->second;
    const auto it = initializers_.find(name);
    if (it != initializers_.end())
      return &loaded_.emplace(name, onnx_import::tensor_from_proto(g_.initializer(it->second), base_dir_,
                                                                    "initializer '" + name + "'")).first->second;
    const auto node = constant_nodes_.find(name);
    if (node == constant_nodes_.end()) return nullptr;
    for (const auto& a : g_.node(node->second).attribute())
      if (a.name() == "value" && a.has_t())
        return &loaded_.emplace(name, onnx_import::tensor_from_proto(a.t(), base_dir_, "constant '" + name + "'")).first->second;
    return nullptr;
  }

  // v, or the output of a Relu or Clip(0, max) that is v's only reader (and v not a graph
  // output): its uint8 range starts at 0, so the codes saturate where it clips.
  std::string end_of(const std::string& v) {
    const auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end() || it->second.size() != 1) return v;
    const onnx::NodeProto& r = g_.node(it->second[0]);
    if (!is_onnx_domain(r.domain()) || r.output_size() != 1 || r.input(0) != v) return v;
    if (r.op_type() == "Relu") return r.output(0);
    if (r.op_type() != "Clip" || r.input_size() < 2) return v;
    const Tensor* lo = constant(r.input(1));
    return lo && lo->dtype() == DType::Float32 && lo->numel() == 1 && lo->data<float>()[0] == 0.0f ? r.output(0) : v;
  }

  bool has_pair(const std::string& v) const { return std::find(activations_.begin(), activations_.end(), v) != activations_.end(); }
  void add_activation(const std::string& v) {
    if (!v.empty() && !has_pair(v)) activations_.push_back(v);
  }
  std::string root_of(std::string v) const {
    while (shares_params_.count(v)) v = shares_params_.at(v);
    return v;
  }

  std::string add_initializer(const std::string& base, const Tensor& t) {
    onnx::TensorProto* p = g_.add_initializer();
    onnx_import::tensor_to_proto(t, *p);
    p->set_name(names_.fresh(base));
    return p->name();
  }

  onnx::NodeProto make_node(const char* op, std::vector<std::string> in, const std::string& out, std::int64_t axis = -1) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(names_.fresh(out + "_" + op));
    for (auto& s : in) n.add_input(s);
    n.add_output(out);
    if (axis >= 0) {
      onnx::AttributeProto* a = n.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    return n;
  }

  void emit_pair(std::vector<onnx::NodeProto>& nodes, const std::string& from, const std::string& to,
                 const std::pair<std::string, std::string>& p) {
    const std::string q = names_.fresh(to + "_quantized");
    nodes.push_back(make_node("QuantizeLinear", {from, p.first, p.second}, q));
    nodes.push_back(make_node("DequantizeLinear", {q, p.first, p.second}, to));
  }

  // The Conv reads DequantizeLinear(int8 weights) and DequantizeLinear(int32 bias) instead.
  void quantize_conv_weights(onnx::NodeProto& conv, float x_scale, std::vector<onnx::NodeProto>& nodes) {
    const QuantizedWeights w = quantize_weights(*constant(conv.input(1)), 0, weight_top_);
    const std::string wq = add_initializer(conv.input(1) + "_quantized", w.q);
    const std::string ws = add_initializer(conv.input(1) + "_scale", w.scale);
    const std::string wz = add_initializer(conv.input(1) + "_zero_point", w.zero);
    const std::string wd = names_.fresh(conv.input(1) + "_dequantized");
    nodes.push_back(make_node("DequantizeLinear", {wq, ws, wz}, wd, 0));
    if (conv.input_size() > 2 && !conv.input(2).empty()) {
      const QuantizedWeights b = quantize_bias(*constant(conv.input(2)), x_scale, w.scale);
      const std::string bq = add_initializer(conv.input(2) + "_quantized", b.q);
      const std::string bs = add_initializer(conv.input(2) + "_scale", b.scale);
      const std::string bz = add_initializer(conv.input(2) + "_zero_point", b.zero);
      const std::string bd = names_.fresh(conv.input(2) + "_dequantized");
      nodes.push_back(make_node("DequantizeLinear", {bq, bs, bz}, bd, 0));
      conv.set_input(2, bd);
    }
    conv.set_input(1, wd);
  }

  // The float weights the quantized ones replaced, unless something else reads them.
  void drop_unread_initializers() {
    std::set<std::string> read;
    for (const auto& n : g_.node())
      for (const auto& s : n.input()) read.insert(s);
    for (const auto& v : g_.output()) read.insert(v.name());
    auto* list = g_.mutable_initializer();
    for (int i = list->size() - 1; i >= 0; --i)
      if (!read.count(list->Get(i).name()) && !graph_inputs_.count(list->Get(i).name())) list->DeleteSubrange(i, 1);
  }

  onnx::GraphProto& g_;
  onnx_import::ProtoNames names_;
  std::string base_dir_;
  float weight_top_;  // the largest weight code
  std::map<std::string, int> initializers_;
  std::map<std::string, int> constant_nodes_;  // output -> Constant node
  std::map<std::string, Tensor> loaded_;
  std::set<std::string> graph_inputs_, graph_outputs_;
  std::map<std::string, std::vector<int>> readers_;
  std::vector<int> convs_, products_;
  std::vector<std::string> activations_;             // in the order they were picked
  std::map<std::string, std::string> shares_params_;  // MaxPool output -> its input
  std::map<std::string, float> scales_;
};

// A copy of the model that also outputs `names`, serialized.
std::string with_outputs(const onnx::ModelProto& model, const std::vector<std::string>& names) {
  onnx::ModelProto copy = model;
  std::set<std::string> outputs;
  for (const auto& v : copy.graph().output()) outputs.insert(v.name());
  for (const std::string& n : names) {
    if (outputs.count(n)) continue;
    onnx::ValueInfoProto* v = copy.mutable_graph()->add_output();
    v->set_name(n);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  std::string bytes;
  if (!copy.SerializeToString(&bytes)) throw Error(ErrorCode::Internal, "cannot serialize the calibration model");
  return bytes;
}

}  // namespace

QuantizeReport quantize_model(const std::string& model_path, const std::vector<TensorMap>& calibration,
                              const std::string& out_path, const QuantizeOptions& options) {
  if (options.method != "minmax" && options.method != "percentile")
    throw Error(ErrorCode::InvalidArgument, "quantization method '" + options.method + "' is not minmax or percentile");
  if (!(options.percentile > 50 && options.percentile <= 100))
    throw Error(ErrorCode::InvalidArgument, "percentile must be in (50, 100], got " + std::to_string(options.percentile));
  if (calibration.empty()) throw Error(ErrorCode::InvalidArgument, "quantization needs at least one calibration sample");
  onnx::ModelProto model = read_model(model_path);
  const std::int64_t opset = onnx_opset(model);
  if (opset < kMinOpset)
    throw Error(ErrorCode::Unsupported, "'" + model_path + "' is opset " + std::to_string(opset) + "; quantization writes per-channel DequantizeLinear, which needs opset " + std::to_string(kMinOpset) + " or later");
  const std::string dir = std::filesystem::path(model_path).parent_path().string();
  const std::string base_dir = dir.empty() ? "." : dir;

  QuantizeReport report;
  report.samples = static_cast<int>(calibration.size());
  Quantizer quantizer(model, base_dir, options.reduce_range);
  const std::vector<std::string> activations = quantizer.plan(report);
  if (activations.empty())
    throw Error(ErrorCode::InvalidArgument, "'" + model_path + "' has no Conv, MatMul or Gemm with constant weights to quantize");
  const auto ranges = calibrate_ranges(with_outputs(model, activations), base_dir, activations, calibration, options);
  quantizer.rewrite(ranges);

  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !model.SerializeToOstream(&out) || !out.flush())
      throw Error(ErrorCode::Io, "cannot write '" + out_path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out_path, ec);
  if (ec) throw Error(ErrorCode::Io, "cannot write '" + out_path + "': " + ec.message());
  return report;
}

}  // namespace wpk
