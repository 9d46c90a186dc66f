#include "graph/dtype_inference.hpp"

#include <set>
#include <string>

namespace wpk {
namespace {

// Ops whose every output has the dtype of input 0.
const std::set<std::string>& same_as_input0() {
  static const std::set<std::string> ops = {
      "Abs", "Acos", "Acosh", "Add", "Asin", "Asinh", "Atan", "Atanh", "AveragePool", "BatchNormalization",
      "Ceil", "Celu", "Clip", "Compress", "Concat", "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace",
      "Div", "Dropout", "Einsum", "Elu", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "GatherElements",
      "GatherND", "Gemm", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "Hardmax",
      "Identity", "InstanceNormalization", "LRN", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "LpPool",
      "MatMul", "Max", "MaxUnpool", "Mean", "MeanVarianceNormalization", "Min", "Mod", "Mul", "Neg",
      "NegativeLogLikelihoodLoss", "PRelu", "Pad", "Pow", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
      "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu",
      "Reshape", "Resize", "ReverseSequence", "Round", "Scatter", "ScatterElements", "ScatterND", "Selu", "Shrink",
      "Sigmoid", "Sign", "Sin", "Sinh", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus", "Softsign",
      "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "Transpose",
      "Trilu", "Unsqueeze", "Upsample", "Range", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
      "Gelu", "CenterCropPad", "Col2Im", "GroupNormalization", "AffineGrid", "DFT", "Mish", "LpNormalization", "DeformConv"};
  return ops;
}

const std::set<std::string>& boolean_result() {
  static const std::set<std::string> ops = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                            "Xor", "Not", "IsNaN", "IsInf"};
  return ops;
}

DType attr_dtype(const Node& n, const char* key) {
  const Attribute* a = n.find_attr(key);
  if (!a || a->kind() != Attribute::Kind::Int) return DType::Undefined;
  const DType d = static_cast<DType>(static_cast<std::uint8_t>(a->i()));
  return (dtype_is_storable(d) || d == DType::String) && static_cast<std::int64_t>(d) == a->i() ? d : DType::Undefined;
}

DType constant_dtype(const Node& n) {
  if (n.has_attr("value_string") || n.has_attr("value_strings")) return DType::String;
  if (const Attribute* a = n.find_attr("value"))
    return a->kind() == Attribute::Kind::Tensor ? a->t().dtype() : DType::Undefined;
  if (n.has_attr("value_float") || n.has_attr("value_floats")) return DType::Float32;
  if (n.has_attr("value_int") || n.has_attr("value_ints")) return DType::Int64;
  return DType::Undefined;
}

// dtype of each output of `n`, given its inputs' (Undefined where unknown).
std::vector<DType> rule(const Node& n, const std::vector<DType>& in) {
  auto input = [&](std::size_t i) { return i < in.size() ? in[i] : DType::Undefined; };
  std::vector<DType> out(n.outputs.size(), DType::Undefined);
  auto all = [&](DType d) {
    for (auto& o : out) o = d;
  };
  const std::string& op = n.op_type;
  if (n.domain == "com.wpk") {  // fused ops compute in their first input's type, but for these
    if (op == "QLinearAdd") all(input(7));  // the output zero point's
    else if (op == "QLinearConvAdd") all(input(13));
    else if (op == "MatMulIntegerToFloat" || op == "ConvIntegerToFloat") all(DType::Float32);
    else all(input(0));
    return out;
  }
  if (!n.domain.empty() && n.domain != "ai.onnx") return out;
  if (op == "SequenceMap") {
    all(DType::Sequence);
    return out;
  }
  // Control flow: the outputs of the body (a Loop's from its second, after the condition).
  const char* body = op == "If" ? "then_branch" : (op == "Loop" || op == "Scan") ? "body" : nullptr;
  if (const Attribute* a = body ? n.find_attr(body) : nullptr; a && a->kind() == Attribute::Kind::Graph) {
    const Graph& b = a->g();
    const std::size_t skip = op == "Loop" ? 1 : 0;
    for (std::size_t o = 0; o < out.size() && o + skip < b.outputs().size(); ++o) out[o] = b.value(b.outputs()[o + skip]).dtype;
    return out;
  }
  if (same_as_input0().count(op)) {
    all(input(0));
    if ((op == "MaxPool" || op == "Dropout") && out.size() > 1) out[1] = op == "Dropout" ? DType::Bool : DType::Int64;
  } else if (op == "MaxPool") {
    all(input(0));
    if (out.size() > 1) out[1] = DType::Int64;
  } else if (boolean_result().count(op)) {
    all(DType::Bool);
  } else if (op == "Shape" || op == "Size" || op == "ArgMax" || op == "ArgMin" || op == "NonZero" ||
             op == "NonMaxSuppression") {
    all(DType::Int64);
  } else if (op == "RandomUniform" || op == "RandomNormal") {
    const DType d = attr_dtype(n, "dtype");
    all(d != DType::Undefined ? d : DType::Float32);
  } else if (op == "RandomUniformLike" || op == "RandomNormalLike" || op == "Bernoulli") {
    const DType d = attr_dtype(n, "dtype");
    all(d != DType::Undefined ? d : input(0));
  } else if (op == "StringNormalizer" || op == "StringConcat") {
    all(DType::String);
  } else if (op == "StringSplit") {
    all(DType::String);
    if (out.size() > 1) out[1] = DType::Int64;
  } else if (op == "TfIdfVectorizer") {
    all(DType::Float32);
  } else if (op == "RegexFullMatch") {
    all(DType::Bool);
  } else if (op == "Multinomial") {
    const DType d = attr_dtype(n, "dtype");
    all(d != DType::Undefined ? d : DType::Int32);
  } else if (op == "Cast") {
    all(attr_dtype(n, "to"));
  } else if (op == "CastLike") {
    all(input(1));
  } else if (op == "Where") {
    all(input(1));
  } else if (op == "Constant") {
    all(constant_dtype(n));
  } else if (op == "ConstantOfShape") {
    const Attribute* v = n.find_attr("value");
    all(v && v->kind() == Attribute::Kind::Tensor ? v->t().dtype() : DType::Float32);
  } else if (op == "EyeLike") {
    const DType d = attr_dtype(n, "dtype");
    all(d != DType::Undefined ? d : input(0));
  } else if (op == "OneHot") {
    all(input(2));
  } else if (op == "TopK" || op == "Unique") {
    all(DType::Int64);
    if (!out.empty()) out[0] = input(0);
  } else if (op == "QuantizeLinear") {
    const DType named = attr_dtype(n, "output_dtype");
    all(in.size() > 2 && input(2) != DType::Undefined ? input(2) : named != DType::Undefined ? named : DType::UInt8);
  } else if (op == "DequantizeLinear") {
    all(input(1));
  } else if (op == "QLinearConv" || op == "QLinearMatMul") {
    all(input(7));  // the output zero point's
  } else if (op == "MatMulInteger" || op == "ConvInteger") {
    all(DType::Int32);
  } else if (op == "DynamicQuantizeLinear") {
    all(DType::UInt8);
    if (out.size() > 1) out[1] = DType::Float32;
  }
  return out;
}

}  // namespace

namespace {

// Sequence ops: a sequence output's element dtype, or (SequenceAt, ConcatFromSequence) the
// dtype of the tensor taken out of one. Returns false for other ops.
bool sequence_rule(const Node& n, const Graph& g, ValueInfo& out) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  auto in = [&](std::size_t i) -> const ValueInfo* {
    return i < n.inputs.size() && n.inputs[i] != kNoValue ? &g.value(n.inputs[i]) : nullptr;
  };
  const std::string& op = n.op_type;
  DType element = DType::Undefined;
  if (op == "SequenceEmpty") element = attr_dtype(n, "dtype") != DType::Undefined ? attr_dtype(n, "dtype") : DType::Float32;
  else if (op == "SequenceConstruct" || op == "SplitToSequence") element = in(0) ? in(0)->dtype : DType::Undefined;
  else if (op == "SequenceInsert") element = in(1) ? in(1)->dtype : DType::Undefined;
  else if (op == "SequenceErase") element = in(0) ? in(0)->element_dtype : DType::Undefined;
  else if (op == "SequenceAt" || op == "ConcatFromSequence") {
    if (out.dtype == DType::Undefined && in(0)) out.dtype = in(0)->element_dtype;
    return true;
  } else if (op == "SequenceMap") {
    const Attribute* a = n.find_attr("body");
    if (a && a->kind() == Attribute::Kind::Graph && !a->g().outputs().empty())
      element = a->g().value(a->g().outputs().front()).dtype;
  } else if (op == "SequenceLength") {
    out.dtype = DType::Int64;
    return true;
  } else if (op == "OptionalHasElement") {
    out.dtype = DType::Bool;
    return true;
  } else if (op == "Optional" || op == "OptionalGetElement") {
    if (op == "Optional") out.optional = true;
    const ValueInfo* from = in(0);
    if (out.dtype == DType::Undefined) out.dtype = from ? from->dtype : attr_dtype(n, "type");
    if (out.element_dtype == DType::Undefined && from) out.element_dtype = from->element_dtype;
    return true;
  } else {
    return false;
  }
  out.dtype = DType::Sequence;
  if (out.element_dtype == DType::Undefined) out.element_dtype = element;
  return true;
}

}  // namespace

void infer_dtypes(Graph& graph) {
  for (const Node& n : graph.nodes()) {
    if (n.outputs.size() == 1 && n.outputs[0] != kNoValue && sequence_rule(n, graph, graph.mutable_value(n.outputs[0])))
      continue;
    std::vector<DType> in;
    for (ValueId v : n.inputs) in.push_back(v == kNoValue ? DType::Undefined : graph.value(v).dtype);
    const std::vector<DType> out = rule(n, in);
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o] == kNoValue) continue;
      ValueInfo& info = graph.mutable_value(n.outputs[o]);
      if (info.dtype == DType::Undefined) info.dtype = out[o];
    }
  }
}

}  // namespace wpk
