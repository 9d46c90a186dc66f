#pragma once
// wpk::Graph — the IR every part of wpk works on: typed values, nodes in topological order,
// attributes and constant weights (initializers). Built by the ONNX importer or by hand:
//
//   wpk::Graph g;
//   g.add_input("x", wpk::DType::Float32, {wpk::Dim("N"), 4});
//   g.add_initializer("w", wpk::Tensor::from_vector<float>(w, {4, 2}));
//   g.add_node("MatMul", {"x", "w"}, {"y"});
//   g.add_output("y");
//
// Values are referred to by index (ValueId) inside wpk and by name at the API edge. A Graph is a
// plain value: copy it to keep a version; it is not safe to mutate from several threads.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "wpk/attribute.hpp"
#include "wpk/tensor.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

using ValueId = int;
constexpr ValueId kNoValue = -1;  // an omitted optional input

// One dimension of a declared shape: a number, or a symbol ("N", "seq") fixed at run time.
struct Dim {
  Dim(std::int64_t v) : value(v) {}
  Dim(int v) : value(v) {}
  Dim(std::string sym) : value(-1), symbol(std::move(sym)) {}
  Dim(const char* sym) : value(-1), symbol(sym) {}
  bool is_static() const { return value >= 0; }
  std::int64_t value;  // -1 when symbolic or unknown
  std::string symbol;  // empty when static or unknown
};
using DimList = std::vector<Dim>;
std::string dims_to_string(const DimList& dims);

struct ValueInfo {
  std::string name;
  DType dtype = DType::Undefined;  // DType::Sequence for a sequence of tensors
  std::optional<DimList> dims;  // nullopt when the rank is unknown (and for sequences)
  DType element_dtype = DType::Undefined;  // a sequence's elements'; Undefined when unknown
  bool optional = false;  // an ONNX optional: the value may be Tensor::none()
};

struct Node {
  std::string name;  // may be empty in the model; wpk fills "<op>_<index>" on import
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::map<std::string, Attribute> attributes;
  // When the optimizer merged several model nodes into this one: their op types in graph order
  // (Conv, BatchNormalization, Add, Relu); empty otherwise. Descriptive only: kernels ignore it.
  std::vector<std::string> fused_from;

  bool has_attr(const std::string& key) const { return attributes.count(key) != 0; }
  const Attribute* find_attr(const std::string& key) const;
  // Typed lookups with a default when the attribute is absent.
  std::int64_t attr_int(const std::string& key, std::int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<std::int64_t> attr_ints(const std::string& key,
                                      std::vector<std::int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> fallback = {}) const;
};

class Graph {
 public:
  // --- builder -------------------------------------------------------------------------
  ValueId add_input(const std::string& name, DType dtype, DimList dims);
  ValueId add_initializer(const std::string& name, Tensor value);
  // Inputs and outputs are value names; "" is an omitted optional input. Output values are
  // created; input values must already exist (graph inputs, initializers or earlier outputs).
  Node& add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                 const std::vector<std::string>& outputs,
                 std::map<std::string, Attribute> attributes = {}, const std::string& name = "");
  void add_output(const std::string& name);

  // --- lower-level editing used by the importer and optimizer passes -------------------------
  ValueId add_value(ValueInfo info);  // throws if the name exists
  ValueId find_value(const std::string& name) const;  // kNoValue when absent
  ValueId value_id(const std::string& name) const;    // throws NotFound when absent
  void set_initializer(ValueId id, Tensor value);
  void erase_initializer(ValueId id);
  Tensor* mutable_initializer(ValueId id);  // nullptr when not a constant; the entry stays put
  std::vector<Node>& mutable_nodes() { return nodes_; }
  std::vector<ValueId>& mutable_inputs() { return inputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  ValueInfo& mutable_value(ValueId id);

  // --- queries -------------------------------------------------------------------------
  const std::vector<ValueInfo>& values() const { return values_; }
  const ValueInfo& value(ValueId id) const;
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::unordered_map<ValueId, Tensor>& initializers() const { return initializers_; }
  const Tensor* initializer(ValueId id) const;  // nullptr when not a constant
  bool is_initializer(ValueId id) const { return initializers_.count(id) != 0; }

  // Opset of the default ONNX domain the graph was written for (import fills it).
  std::int64_t opset() const { return opset_; }
  void set_opset(std::int64_t v) { opset_ = v; }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

 private:
  std::string name_;
  std::int64_t opset_ = 17;
  std::vector<ValueInfo> values_;
  std::unordered_map<std::string, ValueId> by_name_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::unordered_map<ValueId, Tensor> initializers_;
};

}  // namespace wpk

#pragma GCC visibility pop
