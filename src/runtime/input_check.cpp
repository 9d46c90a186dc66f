#include "runtime/input_check.hpp"

#include <map>
#include <set>

namespace wpk {

void check_graph_interface(const Graph& graph) {
  for (ValueId v : graph.inputs()) {
    const ValueInfo& info = graph.value(v);
    if (!dtype_is_storable(info.dtype))
      throw Error(ErrorCode::Unsupported, "graph input '" + info.name + "' has dtype " + dtype_name(info.dtype) +
                                              ", which wpk does not support");
  }
}

void check_run_inputs(const Graph& graph, const TensorMap& inputs) {
  std::set<std::string> declared;
  std::string names;
  for (ValueId v : graph.inputs()) {
    declared.insert(graph.value(v).name);
    names += (names.empty() ? "" : ", ") + graph.value(v).name;
  }
  for (const auto& kv : inputs)
    if (!declared.count(kv.first))
      throw Error(ErrorCode::InvalidArgument, "unknown input '" + kv.first + "'; the model's inputs are: " + names);

  std::map<std::string, std::int64_t> bound;  // symbolic dim -> size seen first
  for (ValueId v : graph.inputs()) {
    const ValueInfo& info = graph.value(v);
    auto it = inputs.find(info.name);
    if (it == inputs.end()) throw Error(ErrorCode::InvalidArgument, "input '" + info.name + "' is missing");
    const Tensor& t = it->second;
    const std::string where = "input '" + info.name + "'";
    if (t.empty()) throw Error(ErrorCode::InvalidArgument, where + " is an empty Tensor");
    if (t.dtype() != info.dtype)
      throw Error(ErrorCode::InvalidArgument, where + " must be " + dtype_name(info.dtype) + ", got " + dtype_name(t.dtype()));
    if (t.raw() == nullptr && t.numel() != 0) throw Error(ErrorCode::InvalidArgument, where + " has no data");
    if (!info.dims) continue;
    const DimList& dims = *info.dims;
    const std::string want = dims_to_string(dims);
    if (static_cast<std::size_t>(t.rank()) != dims.size())
      throw Error(ErrorCode::InvalidArgument, where + " must have shape " + want + ", got " + shape_to_string(t.shape()));
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t got = t.shape()[i];
      if (dims[i].is_static() && got != dims[i].value)
        throw Error(ErrorCode::InvalidArgument, where + " must have shape " + want + ", got " + shape_to_string(t.shape()) +
                                                    " (dimension " + std::to_string(i) + ")");
      if (!dims[i].is_static() && !dims[i].symbol.empty()) {
        auto b = bound.emplace(dims[i].symbol, got);
        if (b.first->second != got)
          throw Error(ErrorCode::InvalidArgument, where + ": dimension '" + dims[i].symbol + "' is " + std::to_string(got) +
                                                      " here but " + std::to_string(b.first->second) + " in another input");
      }
    }
  }
}

}  // namespace wpk
