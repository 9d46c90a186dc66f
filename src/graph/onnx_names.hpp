#pragma once
// Fresh value and node names for rewrites of an ONNX graph protobuf (the contrib-op expansion at
// import, the quantizer): every name the graph uses is taken, and new ones are made from a base.
#include <set>
#include <string>

#include <onnx/onnx_pb.h>

namespace wpk::onnx_import {

class ProtoNames {
 public:
  explicit ProtoNames(const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      used_.insert(n.name());
      for (const auto& s : n.input()) used_.insert(s);
      for (const auto& s : n.output()) used_.insert(s);
    }
    for (const auto& t : g.initializer()) used_.insert(t.name());
    for (const auto& v : g.input()) used_.insert(v.name());
    for (const auto& v : g.output()) used_.insert(v.name());
    for (const auto& v : g.value_info()) used_.insert(v.name());
  }
  // `base`, or `base_1`, `base_2`, ... : the first not in use, which it then is.
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

}  // namespace wpk::onnx_import
