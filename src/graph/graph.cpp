#include "wpk/graph.hpp"

namespace wpk {

std::string dims_to_string(const DimList& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].is_static() ? std::to_string(dims[i].value) : (dims[i].symbol.empty() ? "?" : dims[i].symbol);
  }
  return s + "]";
}

namespace {
[[noreturn]] void bad_attr(const std::string& key, const Node& n, const Error& e) {
  throw Error(ErrorCode::InvalidModel, "node '" + n.name + "' (" + n.op_type + "): attribute '" + key + "': " + e.what());
}
}  // namespace

const Attribute* Node::find_attr(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

std::int64_t Node::attr_int(const std::string& key, std::int64_t fallback) const {
  const Attribute* a = find_attr(key);
  try { return a ? a->i() : fallback; } catch (const Error& e) { bad_attr(key, *this, e); }
}
float Node::attr_float(const std::string& key, float fallback) const {
  const Attribute* a = find_attr(key);
  try { return a ? a->f() : fallback; } catch (const Error& e) { bad_attr(key, *this, e); }
}
std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  const Attribute* a = find_attr(key);
  try { return a ? a->s() : fallback; } catch (const Error& e) { bad_attr(key, *this, e); }
}
std::vector<std::int64_t> Node::attr_ints(const std::string& key, std::vector<std::int64_t> fallback) const {
  const Attribute* a = find_attr(key);
  try { return a ? a->ints() : fallback; } catch (const Error& e) { bad_attr(key, *this, e); }
}
std::vector<float> Node::attr_floats(const std::string& key, std::vector<float> fallback) const {
  const Attribute* a = find_attr(key);
  try { return a ? a->floats() : fallback; } catch (const Error& e) { bad_attr(key, *this, e); }
}

ValueId Graph::add_value(ValueInfo info) {
  if (info.name.empty()) throw Error(ErrorCode::InvalidModel, "a value needs a non-empty name");
  if (by_name_.count(info.name))
    throw Error(ErrorCode::InvalidModel, "value '" + info.name + "' is defined twice");
  const ValueId id = static_cast<ValueId>(values_.size());
  by_name_.emplace(info.name, id);
  values_.push_back(std::move(info));
  return id;
}

ValueId Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

ValueId Graph::value_id(const std::string& name) const {
  ValueId id = find_value(name);
  if (id == kNoValue) throw Error(ErrorCode::NotFound, "no value named '" + name + "' in the graph");
  return id;
}

const ValueInfo& Graph::value(ValueId id) const {
  if (id < 0 || id >= static_cast<ValueId>(values_.size()))
    throw Error(ErrorCode::Internal, "value id " + std::to_string(id) + " out of range");
  return values_[id];
}

ValueInfo& Graph::mutable_value(ValueId id) { return const_cast<ValueInfo&>(value(id)); }

ValueId Graph::add_input(const std::string& name, DType dtype, DimList dims) {
  ValueId id = add_value({name, dtype, std::move(dims)});
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_initializer(const std::string& name, Tensor value) {
  DimList dims(value.shape().begin(), value.shape().end());
  ValueId id = find_value(name);
  if (id == kNoValue) id = add_value({name, value.dtype(), std::move(dims)});
  initializers_[id] = std::move(value);
  return id;
}

void Graph::set_initializer(ValueId id, Tensor value) {
  ValueInfo& info = mutable_value(id);
  info.dtype = value.dtype();
  info.dims = DimList(value.shape().begin(), value.shape().end());
  initializers_[id] = std::move(value);
}

void Graph::erase_initializer(ValueId id) { initializers_.erase(id); }

Tensor* Graph::mutable_initializer(ValueId id) {
  auto it = initializers_.find(id);
  return it == initializers_.end() ? nullptr : &it->second;
}

const Tensor* Graph::initializer(ValueId id) const {
  auto it = initializers_.find(id);
  return it == initializers_.end() ? nullptr : &it->second;
}

Node& Graph::add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs, std::map<std::string, Attribute> attributes,
                      const std::string& name) {
  Node n;
  n.op_type = op_type;
  n.name = name.empty() ? op_type + "_" + std::to_string(nodes_.size()) : name;
  n.attributes = std::move(attributes);
  for (const auto& in : inputs) {
    if (in.empty()) {
      n.inputs.push_back(kNoValue);
      continue;
    }
    ValueId id = find_value(in);
    if (id == kNoValue)
      throw Error(ErrorCode::InvalidModel, "node '" + n.name + "' (" + op_type + "): input '" + in +
                                               "' is not produced by any earlier node, input or initializer");
    n.inputs.push_back(id);
  }
  for (const auto& out : outputs) n.outputs.push_back(out.empty() ? kNoValue : add_value({out, DType::Undefined, {}}));
  nodes_.push_back(std::move(n));
  return nodes_.back();
}

void Graph::add_output(const std::string& name) { outputs_.push_back(value_id(name)); }

}  // namespace wpk
