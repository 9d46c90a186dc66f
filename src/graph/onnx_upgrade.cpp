#include "graph/onnx_upgrade.hpp"

#include <map>
#include <set>
#include <string>

#include "wpk/error.hpp"

namespace wpk::onnx_import {
namespace {

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

void erase_attr(onnx::NodeProto& n, const std::string& name) {
  auto* attrs = n.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name) attrs->DeleteSubrange(i, 1);
}

void set_int_attr(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
  erase_attr(n, name);
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// Ranks the model states: graph inputs and outputs, value infos, initializers.
std::map<std::string, int> known_ranks(const onnx::GraphProto& g) {
  std::map<std::string, int> rank;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list)
      if (v.type().tensor_type().has_shape()) rank[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const auto& t : g.initializer()) rank[t.name()] = t.dims_size();
  return rank;
}

// ONNX's TensorProto.DataType for the names Cast-1 took ("FLOAT", "INT64", ...).
int dtype_from_name(const std::string& name) {
  static const std::map<std::string, int> kTypes = {
      {"FLOAT", 1},   {"UINT8", 2},  {"INT8", 3},   {"UINT16", 4}, {"INT16", 5},   {"INT32", 6},   {"INT64", 7},
      {"STRING", 8},  {"BOOL", 9},   {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}};
  const auto it = kTypes.find(name);
  return it == kTypes.end() ? -1 : it->second;
}

bool binary_with_legacy_broadcast(const std::string& op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Greater", "Less", "And", "Or", "Xor"};
  return kOps.count(op) != 0;
}

}  // namespace

void upgrade_opset(onnx::ModelProto& model, std::int64_t from, std::int64_t to) {
  const std::string what = "the model uses ONNX opset " + std::to_string(from) + ", which wpk reads as opset " +
                           std::to_string(to) + " where the two agree; ";
  onnx::GraphProto& g = *model.mutable_graph();
  const std::map<std::string, int> rank = known_ranks(g);
  std::map<std::string, int> readers;
  for (const auto& node : g.node())
    for (const auto& in : node.input()) ++readers[in];
  google::protobuf::RepeatedPtrField<onnx::NodeProto> rewritten;
  int added = 0;  // numbers the values this adds: node names may be empty or repeated
  const auto new_name = [&](const std::string& base, const char* what_for) {
    return base + "__legacy_" + what_for + "_" + std::to_string(added++);
  };
  for (auto& node : *g.mutable_node()) {
    const std::string where = what + "node '" + node.name() + "' (" + node.op_type() + ")";
    const std::string& op = node.op_type();
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      *rewritten.Add() = node;
      continue;
    }
    for (const auto& a : node.attribute())
      if (a.has_g() || a.graphs_size() > 0) throw Error(ErrorCode::Unsupported, where + " has a subgraph");
    // Attributes the old versions had and opset 7 dropped without a change of meaning in
    // inference: in-place hints and the training switch (inference is what runs).
    erase_attr(node, "consumed_inputs");
    if (op == "BatchNormalization" || op == "Dropout") {
      const auto* is_test = find_attr(node, "is_test");
      if (is_test && is_test->i() == 0 && node.output_size() > 1)
        throw Error(ErrorCode::Unsupported, where + " is in training mode (is_test = 0)");
      erase_attr(node, "is_test");
    }
    if (op == "Gemm") erase_attr(node, "broadcast");  // opset 7 always broadcasts C
    if (binary_with_legacy_broadcast(op)) {
      const auto* broadcast = find_attr(node, "broadcast");
      const auto* axis = find_attr(node, "axis");
      // Broadcasting was B's alone, from `axis` of A (default: B's dims are A's last). Opset 7
      // aligns trailing dims, so B gets trailing ones for the dims of A after its own.
      if (broadcast && broadcast->i() != 0 && axis && node.input_size() == 2) {
        const auto a = rank.find(node.input(0)), b = rank.find(node.input(1));
        if (a == rank.end() || b == rank.end())
          throw Error(ErrorCode::Unsupported, where + " broadcasts along axis " + std::to_string(axis->i()) +
                                                  " and the ranks of its inputs are unknown");
        const std::int64_t ax = axis->i() < 0 ? axis->i() + a->second : axis->i();
        if (ax < 0 || ax > a->second - b->second) throw Error(ErrorCode::InvalidModel, where + ": broadcast axis out of range");
        const std::int64_t ones = a->second - ax - b->second;
        if (ones > 0) {
          onnx::NodeProto& unsqueeze = *rewritten.Add();
          unsqueeze.set_op_type("Unsqueeze");
          unsqueeze.set_name(new_name(node.name(), "broadcast"));
          unsqueeze.add_input(node.input(1));
          unsqueeze.add_output(new_name(node.input(1), "broadcast"));
          auto* axes = unsqueeze.add_attribute();
          axes->set_name("axes");
          axes->set_type(onnx::AttributeProto::INTS);
          for (std::int64_t i = 0; i < ones; ++i) axes->add_ints(b->second + i);
          node.set_input(1, unsqueeze.output(0));
        }
      }
      erase_attr(node, "broadcast");
      erase_attr(node, "axis");
    }
    if (op == "Concat" && from < 4 && !find_attr(node, "axis")) set_int_attr(node, "axis", 1);  // Concat-1's default
    if (op == "Cast") {
      const auto* to_attr = find_attr(node, "to");
      if (to_attr && to_attr->type() == onnx::AttributeProto::STRING) {
        const int dtype = dtype_from_name(to_attr->s());
        if (dtype < 0) throw Error(ErrorCode::InvalidModel, where + ": unknown type '" + to_attr->s() + "'");
        set_int_attr(node, "to", dtype);
      }
    }
    if (op == "Reshape" && from < 5) {
      const auto* shape = find_attr(node, "shape");
      if (!shape) throw Error(ErrorCode::InvalidModel, where + " has no shape");
      // Reshape-1's shape attribute becomes the constant second input of Reshape-5.
      onnx::TensorProto* t = g.add_initializer();
      t->set_name(new_name(node.name(), "shape"));
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(shape->ints_size());
      for (std::int64_t d : shape->ints()) t->add_int64_data(d);
      erase_attr(node, "shape");
      node.add_input(t->name());
    }
    // PRelu before opset 7 applied a [C] slope along the channel axis (1); opset 7 broadcasts it
    // against the last axis. A constant [C] slope gets trailing ones (a copy where others read
    // it too); a slope that may be [C] on an input of unknown rank is refused, not misread.
    if (op == "PRelu" && node.input_size() == 2) {
      onnx::TensorProto* slope = nullptr;
      for (auto& t : *g.mutable_initializer())
        if (t.name() == node.input(1)) slope = &t;
      const bool per_channel = !slope || (slope->dims_size() == 1 && slope->dims(0) > 1);
      const auto x = rank.find(node.input(0));
      if (per_channel && (!slope || x == rank.end()))
        throw Error(ErrorCode::Unsupported, where + ": its slope applies per channel before opset 7, and wpk rewrites only a "
                                                    "constant slope on an input of known rank");
      if (per_channel && x->second >= 3) {
        onnx::TensorProto reshaped = *slope;
        for (int i = 0; i < x->second - 2; ++i) reshaped.add_dims(1);
        if (readers[node.input(1)] == 1) {
          *slope = std::move(reshaped);
        } else {
          reshaped.set_name(new_name(slope->name(), "slope"));
          node.set_input(1, reshaped.name());
          *g.add_initializer() = std::move(reshaped);
        }
      }
    }
    // Ops whose old versions mean something else that wpk does not rewrite (Scan, Loop and If
    // were refused above, with their subgraphs).
    static const std::set<std::string> kChanged = {"Upsample", "Tile", "Split", "Pad", "LSTM", "GRU", "RNN"};
    if (kChanged.count(op) && from < 7) {
      const bool pad_ok = op == "Pad" && from >= 2, split_ok = op == "Split" && from >= 2, tile_ok = op == "Tile" && from >= 6;
      if (!pad_ok && !split_ok && !tile_ok)
        throw Error(ErrorCode::Unsupported, where + " has semantics before opset 7 that wpk does not convert");
    }
    *rewritten.Add() = std::move(node);
  }
  g.mutable_node()->Swap(&rewritten);
  for (auto& op : *model.mutable_opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") op.set_version(to);
}

}  // namespace wpk::onnx_import
