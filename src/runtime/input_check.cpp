#include "runtime/input_check.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace wpk {

void check_graph_interface(const Graph& graph) {
  // Every op but the recurrent ones (whose Y is optional) has a first output; passes and kernels
  // rely on it (a fuzzed MatMul without one crashed the matmul epilogue fusion).
  for (const Node& n : graph.nodes()) {
    const bool optional_first = n.op_type == "GRU" || n.op_type == "LSTM" || n.op_type == "RNN";
    const bool any = std::any_of(n.outputs.begin(), n.outputs.end(), [](ValueId v) { return v != kNoValue; });
    if (!any || (!optional_first && n.outputs[0] == kNoValue))
      throw Error(ErrorCode::InvalidModel, "node '" + n.name + "' (" + n.op_type + ") has no first output");
  }
  for (ValueId v : graph.inputs()) {
    const ValueInfo& info = graph.value(v);
    const DType elements = info.dtype == DType::Sequence ? info.element_dtype : info.dtype;
    if (!dtype_is_storable(elements) && elements != DType::String && !(info.dtype == DType::Sequence && elements == DType::Undefined))
      throw Error(ErrorCode::Unsupported, "graph input '" + info.name + "' has dtype " + dtype_name(elements) +
                                              ", which wpk does not support");
  }
}

namespace {

std::string input_names(const Graph& graph) {
  std::string names;
  for (ValueId v : graph.inputs()) names += (names.empty() ? "" : ", ") + graph.value(v).name;
  return names;
}

}  // namespace

// Messages are built only on the way to an error: control-flow bodies pass through here at every
// iteration.
std::vector<const Tensor*> bind_run_inputs(const Graph& graph, const TensorMap& inputs) {
  std::size_t known = 0;
  for (ValueId v : graph.inputs()) known += inputs.count(graph.value(v).name);
  if (known != inputs.size())
    for (const auto& kv : inputs) {
      const bool declared = std::any_of(graph.inputs().begin(), graph.inputs().end(),
                                        [&](ValueId v) { return graph.value(v).name == kv.first; });
      if (!declared)
        throw Error(ErrorCode::InvalidArgument, "unknown input '" + kv.first + "'; the model's inputs are: " + input_names(graph));
    }
  std::vector<const Tensor*> bound;
  bound.reserve(graph.inputs().size());
  for (ValueId v : graph.inputs()) {
    auto it = inputs.find(graph.value(v).name);
    if (it == inputs.end()) throw Error(ErrorCode::InvalidArgument, "input '" + graph.value(v).name + "' is missing");
    bound.push_back(&it->second);
  }
  check_bound_inputs(graph, bound);
  return bound;
}

void check_bound_inputs(const Graph& graph, const std::vector<const Tensor*>& inputs) {
  if (inputs.size() != graph.inputs().size())
    throw Error(ErrorCode::InvalidArgument, "the model takes " + std::to_string(graph.inputs().size()) + " inputs (" +
                                                input_names(graph) + "), got " + std::to_string(inputs.size()));
  std::vector<std::pair<const std::string*, std::int64_t>> bound;  // symbolic dim -> size seen first
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const ValueInfo& info = graph.value(graph.inputs()[k]);
    const Tensor& t = *inputs[k];
    auto where = [&info] { return "input '" + info.name + "'"; };
    if (t.empty()) throw Error(ErrorCode::InvalidArgument, where() + " is an empty Tensor");
    if (t.is_none()) {
      if (!info.optional) throw Error(ErrorCode::InvalidArgument, where() + " is not optional; it must have a value");
      continue;
    }
    if (info.dtype == DType::Sequence) {
      if (!t.is_sequence()) throw Error(ErrorCode::InvalidArgument, where() + " must be a sequence, got " + dtype_name(t.dtype()));
      if (info.element_dtype != DType::Undefined && t.element_dtype() != info.element_dtype)
        throw Error(ErrorCode::InvalidArgument, where() + " must be a sequence of " + dtype_name(info.element_dtype) +
                                                    ", got one of " + dtype_name(t.element_dtype()));
      continue;
    }
    if (t.dtype() != info.dtype)
      throw Error(ErrorCode::InvalidArgument, where() + " must be " + dtype_name(info.dtype) + ", got " + dtype_name(t.dtype()));
    if (t.raw() == nullptr && t.numel() != 0 && t.dtype() != DType::String)
      throw Error(ErrorCode::InvalidArgument, where() + " has no data");
    if (!info.dims) continue;
    const DimList& dims = *info.dims;
    if (static_cast<std::size_t>(t.rank()) != dims.size())
      throw Error(ErrorCode::InvalidArgument,
                  where() + " must have shape " + dims_to_string(dims) + ", got " + shape_to_string(t.shape()));
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t got = t.shape()[i];
      if (dims[i].is_static() && got != dims[i].value)
        throw Error(ErrorCode::InvalidArgument, where() + " must have shape " + dims_to_string(dims) + ", got " +
                                                    shape_to_string(t.shape()) + " (dimension " + std::to_string(i) + ")");
      if (dims[i].is_static() || dims[i].symbol.empty()) continue;
      auto b = std::find_if(bound.begin(), bound.end(), [&](const auto& s) { return *s.first == dims[i].symbol; });
      if (b == bound.end()) {
        bound.emplace_back(&dims[i].symbol, got);
      } else if (b->second != got) {
        throw Error(ErrorCode::InvalidArgument, where() + ": dimension '" + dims[i].symbol + "' is " + std::to_string(got) +
                                                    " here but " + std::to_string(b->second) + " in another input");
      }
    }
  }
}

void fix_symbolic_dims(Graph& graph, const std::map<std::string, std::int64_t>& sizes) {
  if (sizes.empty()) return;
  std::set<std::string> declared;
  for (ValueId v : graph.inputs())
    if (const auto& dims = graph.value(v).dims)
      for (const Dim& d : *dims)
        if (!d.is_static() && !d.symbol.empty()) declared.insert(d.symbol);
  for (const auto& kv : sizes) {
    if (!declared.count(kv.first)) {
      std::string names;
      for (const std::string& n : declared) names += (names.empty() ? "" : ", ") + n;
      throw Error(ErrorCode::InvalidArgument, "fixed_dims names '" + kv.first + "', which no input declares" +
                                                  (names.empty() ? " (the inputs have no symbolic dims)"
                                                                 : " (symbolic input dims: " + names + ")"));
    }
    if (kv.second < 1 || kv.second >= (std::int64_t(1) << 31))
      throw Error(ErrorCode::InvalidArgument, "fixed_dims['" + kv.first + "'] is " + std::to_string(kv.second) +
                                                  "; sizes must be at least 1 and below 2^31");
  }
  for (std::size_t v = 0; v < graph.values().size(); ++v) {
    auto& dims = graph.mutable_value(static_cast<ValueId>(v)).dims;
    if (!dims) continue;
    for (Dim& d : *dims) {
      if (d.is_static() || d.symbol.empty()) continue;
      auto it = sizes.find(d.symbol);
      if (it != sizes.end()) d = Dim(it->second);
    }
  }
}

}  // namespace wpk
