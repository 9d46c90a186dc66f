#include "graph/batch_rows.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "graph/fused_ops.hpp"
#include "graph/passes/match.hpp"

namespace wpk {

namespace {

using passes::constant_int_values;

// What a value is with respect to the batch: the same for every batch (constants and what is
// computed from them alone), or batched (its dim 0 is the batch, rows computed apart).
enum class Row { Unreached, Invariant, Batched };

const std::set<std::string> kElementwise = {
    "Add",     "Sub",      "Mul",         "Div",         "Pow",       "Max",       "Min",       "Sum",
    "Mean",    "Mod",      "Equal",       "Greater",     "Less",      "GreaterOrEqual", "LessOrEqual",
    "And",     "Or",       "Xor",         "Not",         "Where",     "Relu",      "Sigmoid",   "Tanh",
    "Exp",     "Log",      "Abs",         "Neg",         "Sqrt",      "Reciprocal", "Erf",     "Clip",
    "LeakyRelu", "Elu",    "Selu",        "Celu",        "HardSigmoid", "HardSwish", "Softplus", "Softsign",
    "ThresholdedRelu", "Mish", "PRelu",   "Gelu",        "Identity",  "Cast",      "Floor",     "Ceil",
    "Round",   "Sign",     "Sin",         "Cos",         "Tan",       "Atan",      "Sinh",      "Cosh",
    "IsNaN",   "IsInf",    "Dropout"};

// Ops whose input 0 is the data (rows along dim 0, kept apart) and whose other inputs are
// parameters, except the listed ones, which broadcast onto the output as an element-wise
// operand does.
struct DataFirst {
  std::vector<int> broadcast_inputs;
};
const std::vector<std::pair<std::string, DataFirst>> kDataFirst = {
    {"Conv", {}},          {"ConvTranspose", {}},    {"ConvInteger", {}},    {"QLinearConv", {}},
    {"MaxPool", {}},       {"AveragePool", {}},      {"GlobalAveragePool", {}}, {"GlobalMaxPool", {}},
    {"LpPool", {}},        {"GlobalLpPool", {}},     {"LRN", {}},            {"InstanceNormalization", {}},
    {"BatchNormalization", {}}, {"QuantizeLinear", {}}, {"DequantizeLinear", {}}, {"LayerNormalization", {}},
    {"Softmax", {}},       {"LogSoftmax", {}},       {"Hardmax", {}},        {"Flatten", {}},
    {"Transpose", {}},     {"Squeeze", {}},          {"Unsqueeze", {}},      {"Reshape", {}},
    {"ReduceMean", {}},    {"ReduceSum", {}},        {"ReduceMax", {}},      {"ReduceMin", {}},
    {"ReduceProd", {}},    {"ReduceL1", {}},         {"ReduceL2", {}},       {"ReduceLogSumExp", {}},
    {"ReduceSumSquare", {}}, {"ReduceLogSum", {}},   {"ArgMax", {}},         {"ArgMin", {}},
    {"Slice", {}},         {"Pad", {}},              {"Split", {}}};
const std::vector<std::pair<std::string, DataFirst>> kWpkDataFirst = {
    {"FusedConv", {{3}}},  {"DepthwisePointwiseConv", {{5}}}, {"ScaledPointwiseConv", {{1, 4}}},
    {"FusedBatchNorm", {}}, {"ConvIntegerToFloat", {}}, {"QLinearConvAdd", {{9}}}};

const DataFirst* data_first(const Node& n) {
  if (!n.domain.empty() && n.domain != kWpkDomain) return nullptr;
  for (const auto& [op, rule] : n.domain.empty() ? kDataFirst : kWpkDataFirst)
    if (op == n.op_type) return &rule;
  return nullptr;
}

class RowCheck {
 public:
  explicit RowCheck(const Graph& g) : g_(g), row_(g.values().size(), Row::Unreached) {}

  std::string run() {
    for (ValueId v : g_.inputs()) {
      const auto r = rank(v);
      if (!r || *r < 1) return "input '" + g_.value(v).name + "' has no dim 0";
      row_[static_cast<std::size_t>(v)] = Row::Batched;
    }
    for (const auto& [v, t] : g_.initializers()) {
      (void)t;
      row_[static_cast<std::size_t>(v)] = Row::Invariant;
    }
    for (const Node& n : g_.nodes()) {
      bool batched = false;
      for (ValueId v : n.inputs) {
        if (v == kNoValue) continue;
        if (row(v) == Row::Unreached) return "node '" + n.name + "' reads a value computed nowhere before it";
        batched = batched || row(v) == Row::Batched;
      }
      for (const auto& [key, a] : n.attributes)
        if (a.kind() == Attribute::Kind::Graph) return "node '" + n.name + "' (" + n.op_type + ") has a body";
      if (batched) {
        const std::string why = check(n);
        if (!why.empty()) return "node '" + n.name + "' (" + n.op_type + "): " + why;
      }
      for (ValueId v : n.outputs)
        if (v != kNoValue) row_[static_cast<std::size_t>(v)] = batched ? Row::Batched : Row::Invariant;
    }
    for (ValueId v : g_.outputs())
      if (row(v) != Row::Batched) return "output '" + g_.value(v).name + "' is not computed from the batch";
    return "";
  }

 private:
  Row row(ValueId v) const { return row_[static_cast<std::size_t>(v)]; }
  bool batched(ValueId v) const { return v != kNoValue && row(v) == Row::Batched; }
  bool invariant(ValueId v) const { return v == kNoValue || row(v) == Row::Invariant; }

  std::optional<std::size_t> rank(ValueId v) const {
    const auto& dims = g_.value(v).dims;
    if (!dims || g_.value(v).dtype == DType::Sequence) return std::nullopt;
    return dims->size();
  }
  bool dim0_is_one(ValueId v) const {
    const auto& dims = g_.value(v).dims;
    return dims && !dims->empty() && dims->front().is_static() && dims->front().value == 1;
  }
  // `axis` of a value of rank r, counted from the front; nullopt when outside it.
  static std::optional<std::int64_t> from_front(std::int64_t axis, std::size_t r) {
    const auto n = static_cast<std::int64_t>(r);
    if (axis < -n || axis >= n) return std::nullopt;
    return axis < 0 ? axis + n : axis;
  }
  // An operand broadcast onto an output of rank out_rank: a batched one must have its rank (so
  // its dim 0 is the output's); one that is the same for every batch must not reach dim 0 with
  // more than one row.
  bool broadcasts(ValueId v, std::size_t out_rank) const {
    if (v == kNoValue) return true;
    const auto r = rank(v);
    if (!r) return false;
    if (batched(v)) return *r == out_rank;
    return *r < out_rank || dim0_is_one(v);
  }
  // Every axis in `axes` (of a value of rank r) other than dim 0; false when any is unknown.
  static bool spares_dim0(const std::optional<std::vector<std::int64_t>>& axes, std::size_t r) {
    if (!axes || axes->empty()) return false;
    return std::all_of(axes->begin(), axes->end(), [&](std::int64_t a) {
      const auto f = from_front(a, r);
      return f && *f != 0;
    });
  }
  std::optional<std::vector<std::int64_t>> axes_of(const Node& n, std::size_t input) const {
    if (n.has_attr("axes")) return n.attr_ints("axes");
    if (n.inputs.size() > input && n.inputs[input] != kNoValue) return constant_int_values(g_, n.inputs[input]);
    return std::nullopt;
  }

  std::string check(const Node& n) const {
    if (n.outputs.empty() || n.outputs[0] == kNoValue) return "no output";
    const auto out_rank = rank(n.outputs[0]);
    if (!out_rank || *out_rank < 1) return "its output's rank is unknown or 0";
    const bool onnx = n.domain.empty();
    const bool wpk = n.domain == kWpkDomain;
    if ((onnx && kElementwise.count(n.op_type)) || (wpk && (n.op_type == "ElementwiseChain" || n.op_type == "Gelu"))) {
      for (ValueId v : n.inputs)
        if (!broadcasts(v, *out_rank)) return "an operand broadcasts over the batch";
      return "";
    }
    if (onnx && n.op_type == "Gemm") {
      if (n.attr_int("transA", 0) != 0 || !batched(n.inputs[0])) return "the batch is not A's rows";
      if (!invariant(n.inputs[1]) || (n.inputs.size() > 2 && !broadcasts(n.inputs[2], 2))) return "B or C changes with the batch";
      return "";
    }
    if ((onnx && (n.op_type == "MatMul" || n.op_type == "MatMulInteger")) ||
        (wpk && (n.op_type == "FusedMatMul" || n.op_type == "MatMulIntegerToFloat")))
      return check_product(n, *out_rank);
    if (wpk && n.op_type == "Attention") {
      for (int i = 0; i < 3; ++i)
        if (!batched(n.inputs[static_cast<std::size_t>(i)]) || rank(n.inputs[static_cast<std::size_t>(i)]) != out_rank)
          return "Q, K and V must all be batched";
      if (*out_rank < 3 || (n.inputs.size() > 3 && !broadcasts(n.inputs[3], *out_rank))) return "the mask broadcasts over the batch";
      return "";
    }
    if (wpk && n.op_type == "ConcatBatchNorm") {
      for (std::size_t i = 0; i < n.inputs.size(); ++i)
        if (i < 4 ? !invariant(n.inputs[i]) : !batched(n.inputs[i])) return "a part is not batched";
      return "";
    }
    if (wpk && n.op_type == "QLinearAdd") {  // ONNX has none: the importer expands contrib ones
      for (std::size_t i = 0; i < n.inputs.size(); ++i)
        if (i == 0 || i == 3 ? !broadcasts(n.inputs[i], *out_rank) : !invariant(n.inputs[i])) return "a parameter changes with the batch";
      return "";
    }
    if (onnx && n.op_type == "Concat") {
      const auto axis = from_front(n.attr_int("axis", 0), *out_rank);
      if (!axis || *axis == 0) return "it concatenates along dim 0";
      for (ValueId v : n.inputs)
        if (!batched(v)) return "a part is not batched";
      return "";
    }
    if (onnx && n.op_type == "Gather") return check_gather(n);
    if (const DataFirst* rule = data_first(n)) {
      if (!batched(n.inputs[0])) return "its data is not the batched input";
      for (std::size_t i = 1; i < n.inputs.size(); ++i) {
        const bool broadcast =
            std::find(rule->broadcast_inputs.begin(), rule->broadcast_inputs.end(), static_cast<int>(i)) != rule->broadcast_inputs.end();
        if (broadcast ? !broadcasts(n.inputs[i], *out_rank) : !invariant(n.inputs[i])) return "a parameter changes with the batch";
      }
      return onnx ? check_axes(n) : "";
    }
    return "not known to keep rows apart";
  }

  // The ONNX data-first ops whose attributes or constant inputs name axes: none may be dim 0.
  std::string check_axes(const Node& n) const {
    const auto in_rank = rank(n.inputs[0]);
    if (!in_rank) return "its input's rank is unknown";
    const std::string& op = n.op_type;
    const std::size_t live_outputs =
        static_cast<std::size_t>(std::count_if(n.outputs.begin(), n.outputs.end(), [](ValueId v) { return v != kNoValue; }));
    if ((op == "MaxPool" || op == "BatchNormalization") && live_outputs > 1) return "its extra outputs span the batch";
    if (op == "BatchNormalization" && n.attr_int("training_mode", 0) != 0) return "it normalises with the batch's statistics";
    if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
      const auto axis = from_front(n.attr_int("axis", g_.opset() < 13 ? 1 : -1), *in_rank);
      return axis && *axis != 0 ? "" : "it normalises over dim 0";
    }
    if (op == "LayerNormalization") {
      const auto axis = from_front(n.attr_int("axis", -1), *in_rank);
      return axis && *axis != 0 ? "" : "it normalises over dim 0";
    }
    if (op == "Flatten") {  // axis in [-r, r]: the output's rows are the dims before it
      const std::int64_t axis = n.attr_int("axis", 1), r = static_cast<std::int64_t>(*in_rank);
      const std::int64_t front = axis < 0 ? axis + r : axis;
      return front >= 1 && front <= r ? "" : "it flattens dim 0 away";
    }
    if (op == "Transpose") {
      const auto perm = n.attr_ints("perm");
      const bool keeps = perm.empty() ? *in_rank == 1 : perm.front() == 0;
      return keeps ? "" : "it moves dim 0";
    }
    if (op == "Squeeze") return spares_dim0(axes_of(n, 1), *in_rank) ? "" : "it may squeeze dim 0";
    if (op == "Unsqueeze") return spares_dim0(axes_of(n, 1), *rank(n.outputs[0])) ? "" : "it inserts a dim before the batch";
    if (op.rfind("Reduce", 0) == 0) return spares_dim0(axes_of(n, 1), *in_rank) ? "" : "it may reduce over dim 0";
    if (op == "ArgMax" || op == "ArgMin") {
      const auto axis = from_front(n.attr_int("axis", 0), *in_rank);
      return axis && *axis != 0 ? "" : "it reduces over dim 0";
    }
    if (op == "Split") {
      const auto axis = from_front(n.attr_int("axis", 0), *in_rank);
      return axis && *axis != 0 ? "" : "it splits dim 0";
    }
    if (op == "Slice") {
      if (n.inputs.size() < 4) return "it may slice dim 0";
      return spares_dim0(constant_int_values(g_, n.inputs[3]), *in_rank) ? "" : "it may slice dim 0";
    }
    if (op == "Pad") {
      const auto pads = passes::constant_pad_amounts(n, g_);
      if (!pads || pads->size() != 2 * *in_rank) return "its pads are not constant";
      return (*pads)[0] == 0 && (*pads)[*in_rank] == 0 ? "" : "it pads dim 0";
    }
    if (op == "Reshape") {
      const auto target = n.inputs.size() > 1 ? constant_int_values(g_, n.inputs[1]) : std::nullopt;
      if (!target || target->empty() || n.attr_int("allowzero", 0) != 0 || target->front() != 0)
        return "its target does not copy dim 0";
      return "";
    }
    if (op == "QuantizeLinear" || op == "DequantizeLinear") {
      const Tensor* scale = n.inputs.size() > 1 ? g_.initializer(n.inputs[1]) : nullptr;
      if (scale && scale->numel() <= 1) return "";
      const auto axis = from_front(n.attr_int("axis", 1), *in_rank);
      return axis && *axis != 0 ? "" : "it quantizes per row of the batch";
    }
    return "";
  }

  // MatMul-like: A (input 0) and B (input 1) with numpy batching; further inputs are FusedMatMul's
  // bias and residual (broadcast) or the integer products' scales and zero points (constant).
  std::string check_product(const Node& n, std::size_t out_rank) const {
    const ValueId a = n.inputs[0], b = n.inputs[1];
    const auto ra = rank(a), rb = rank(b);
    if (!ra || !rb) return "an operand's rank is unknown";
    bool ok = false;
    // An operand the same for every batch may have leading dims of its own, broadcast onto the
    // batched one's: fewer of them, or dim 0 of one row.
    const auto leads_fewer = [&](ValueId v, std::size_t r, std::size_t other) {
      return r <= 2 || r < other || (r == other && dim0_is_one(v));
    };
    if (batched(a) && invariant(b)) ok = *ra >= 2 && leads_fewer(b, *rb, *ra);
    else if (invariant(a) && batched(b)) ok = *rb >= 3 && leads_fewer(a, *ra, *rb);
    else if (batched(a) && batched(b)) ok = *ra == *rb && *ra >= 3;
    if (!ok) return "the batch is not an outer dim of the product";
    const bool epilogue = n.op_type == "FusedMatMul";
    for (std::size_t i = 2; i < n.inputs.size(); ++i) {
      const bool broadcast = epilogue || (n.op_type == "MatMulIntegerToFloat" && i >= 6);
      if (broadcast ? !broadcasts(n.inputs[i], out_rank) : !invariant(n.inputs[i])) return "a parameter changes with the batch";
    }
    return "";
  }

  std::string check_gather(const Node& n) const {
    const ValueId data = n.inputs[0], indices = n.inputs[1];
    const auto rd = rank(data), ri = rank(indices);
    if (!rd || !ri) return "an operand's rank is unknown";
    const auto axis = from_front(n.attr_int("axis", 0), *rd);
    if (!axis) return "its axis is outside the data";
    if (batched(data) && invariant(indices) && *axis != 0) return "";
    if (invariant(data) && batched(indices) && *axis == 0 && *ri >= 1) return "";
    return "it gathers across the batch";
  }

  const Graph& g_;
  std::vector<Row> row_;
};

}  // namespace

std::string why_rows_depend_on_each_other(const Graph& graph) { return RowCheck(graph).run(); }

}  // namespace wpk
