#include "graph/onnx_contrib.hpp"

#include "graph/onnx_names.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "wpk/error.hpp"

namespace wpk::onnx_import {
namespace {

constexpr const char* kContribDomain = "com.microsoft";

class Expander {
 public:
  Expander(onnx::GraphProto& g, std::int64_t opset) : g_(g), names_(g), opset_(opset) {
    for (const auto& t : g.initializer()) initializers_[t.name()] = &t;
  }

  // The nodes that stand for `n`, or false when it is not a contrib op this rewrites.
  bool expand(const onnx::NodeProto& n, std::vector<onnx::NodeProto>& out) {
    if (n.domain() != kContribDomain) return false;
    const std::string& op = n.op_type();
    node_ = &n;
    if (op == "QLinearAdd" || op == "QLinearMul") {
      need(7, 8);  // the output zero point may be omitted by the schema (not by wpk: quantize())
      const std::string a = dequantize(out, 0, 1, 2), b = dequantize(out, 3, 4, 5);
      float_op(out, op == "QLinearAdd" ? "Add" : "Mul", {a, b}, {}, quantize(6, 7));
    } else if (op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool" || op == "QLinearSigmoid" ||
               op == "QLinearLeakyRelu") {
      need(4, 5);
      const std::string x = dequantize(out, 0, 1, 2);
      const char* plain = op == "QLinearGlobalAveragePool" ? "GlobalAveragePool"
                                : op == "QLinearAveragePool"     ? "AveragePool"
                                : op == "QLinearSigmoid"         ? "Sigmoid"
                                                                 : "LeakyRelu";
      float_op(out, plain, {x}, attributes_except({}), quantize(3, 4));
    } else if (op == "QLinearConcat") {
      if (n.input_size() < 5 || (n.input_size() - 2) % 3 != 0 || n.output_size() != 1)
        fail("expects Y_scale, Y_zero_point, then (X, scale, zero point) triples, and one output");
      std::vector<std::string> xs;
      for (int i = 2; i < n.input_size(); i += 3) xs.push_back(dequantize(out, i, i + 1, i + 2));
      float_op(out, "Concat", xs, attributes_except({}), quantize(0, 1));
    } else if (op == "QGemm") {
      expand_qgemm(out);
    } else {
      return false;
    }
    return true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const std::string name = node_->name().empty() ? node_->output_size() ? node_->output(0) : "" : node_->name();
    throw Error(ErrorCode::InvalidModel, "node '" + name + "' (" + node_->domain() + "." + node_->op_type() + "): " + what);
  }

  void need(int min, int max) const {
    if (node_->input_size() < min || node_->input_size() > max || node_->output_size() != 1)
      fail("expects " + std::to_string(min) + (min == max ? "" : " to " + std::to_string(max)) + " inputs and one output");
  }

  bool given(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }

  onnx::NodeProto make(const char* op, const std::vector<std::string>& ins, const std::string& out) {
    onnx::NodeProto m;
    m.set_op_type(op);
    m.set_name(names_.fresh(out + "__" + op));
    for (const auto& s : ins) m.add_input(s);
    m.add_output(out);
    return m;
  }

  static void set_int(onnx::NodeProto& n, const char* name, std::int64_t v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }

  // True when `name` is an initializer of one element (every dim 1).
  bool one_element_constant(const std::string& name) const {
    const auto it = initializers_.find(name);
    if (it == initializers_.end()) return false;
    for (auto d : it->second->dims())
      if (d != 1) return false;
    return true;
  }

  // DequantizeLinear of input `x` with scale `s` and (optional) zero point `z`; per-axis along
  // `axis` when the scale has more than one element.
  std::string dequantize(std::vector<onnx::NodeProto>& out, int x, int s, int z, std::int64_t axis = -1) {
    if (!given(x) || !given(s)) fail("input " + std::to_string(x) + " or its scale is missing");
    const std::string v = names_.fresh(node_->input(x) + "__dequantized");
    std::vector<std::string> ins = {node_->input(x), node_->input(s)};
    if (given(z)) ins.push_back(node_->input(z));
    onnx::NodeProto dq = make("DequantizeLinear", ins, v);
    if (axis >= 0 && !one_element_constant(node_->input(s))) {
      if (opset_ < 13) fail("a per-channel scale needs opset 13 or later");
      set_int(dq, "axis", axis);
    }
    out.push_back(std::move(dq));
    return v;
  }

  // The QuantizeLinear writing the node's output from the float result, emitted after the float
  // op (float_op); returns the float result's name.
  std::string quantize(int s, int z) {
    if (!given(s) || !given(z)) fail("the output's scale and zero point must be given (the zero point sets its type)");
    const std::string v = names_.fresh(node_->output(0) + "__float");
    pending_q_ = make("QuantizeLinear", {v, node_->input(s), node_->input(z)}, node_->output(0));
    return v;
  }

  std::vector<onnx::AttributeProto> attributes_except(const std::set<std::string>& skip) const {
    std::vector<onnx::AttributeProto> kept;
    for (const auto& a : node_->attribute())
      if (!skip.count(a.name())) kept.push_back(a);
    return kept;
  }

  // The float op writing `result`, then the pending QuantizeLinear (if any).
  void float_op(std::vector<onnx::NodeProto>& out, const char* op, const std::vector<std::string>& ins,
                const std::vector<onnx::AttributeProto>& attrs, const std::string& result) {
    onnx::NodeProto f = make(op, ins, result);
    f.set_name(node_->name().empty() ? f.name() : names_.fresh(node_->name()));
    for (const auto& a : attrs) *f.add_attribute() = a;
    out.push_back(std::move(f));
    if (pending_q_.op_type().size()) out.push_back(std::move(pending_q_));
    pending_q_ = onnx::NodeProto();
  }

  // QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, [C], [y_scale], [y_zero_point]):
  // Gemm of the dequantized A and B (B per column: axis 0 when transposed), C an int32 bias at
  // a_scale * b_scale; quantized when y_scale is given, else the float result.
  void expand_qgemm(std::vector<onnx::NodeProto>& out) {
    need(6, 9);
    std::int64_t trans_b = 0;
    for (const auto& a : node_->attribute())
      if (a.name() == "transB") trans_b = a.i();
    const std::string a = dequantize(out, 0, 1, 2), b = dequantize(out, 3, 4, 5, trans_b ? 0 : 1);
    std::vector<std::string> ins = {a, b};
    if (given(6)) {
      const std::string scale = names_.fresh(node_->output(0) + "__bias_scale");
      out.push_back(make("Mul", {node_->input(1), node_->input(4)}, scale));
      const std::string c = names_.fresh(node_->input(6) + "__dequantized");
      onnx::NodeProto dq = make("DequantizeLinear", {node_->input(6), scale}, c);
      if (!one_element_constant(node_->input(4))) {
        if (opset_ < 13) fail("a per-channel scale needs opset 13 or later");
        set_int(dq, "axis", 0);
      }
      out.push_back(std::move(dq));
      ins.push_back(c);
    }
    const bool quantized = given(7);
    const std::string result = quantized ? quantize(7, 8) : node_->output(0);
    float_op(out, "Gemm", ins, attributes_except({}), result);
  }

  onnx::GraphProto& g_;
  ProtoNames names_;
  std::int64_t opset_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  const onnx::NodeProto* node_ = nullptr;
  onnx::NodeProto pending_q_;
};

}  // namespace

void expand_quantized_contrib_ops(onnx::ModelProto& model, std::int64_t opset) {
  onnx::GraphProto& g = *model.mutable_graph();
  bool any = false;
  for (const auto& n : g.node()) any = any || n.domain() == kContribDomain;
  if (!any) return;
  Expander expander(g, opset);
  std::vector<onnx::NodeProto> nodes;
  for (const auto& n : g.node()) {
    std::vector<onnx::NodeProto> replacement;
    if (expander.expand(n, replacement))
      for (auto& r : replacement) nodes.push_back(std::move(r));
    else
      nodes.push_back(n);
  }
  g.clear_node();
  for (auto& n : nodes) *g.add_node() = std::move(n);
}

}  // namespace wpk::onnx_import
