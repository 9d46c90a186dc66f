#include "graph/onnx_upgrade.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
#include <map>
#include <string>

#include "wpk/error.hpp"

namespace wpk::onnx_import {
namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// PRelu before opset 7 applied a slope of shape [C] along the channel axis (1); from opset 7 it
// broadcasts as numpy does, against the last axis, and the converter leaves it as it is. A
// constant [C] slope read only by PRelus of inputs of known rank r >= 3 becomes [C, 1, ...] (r - 2
// ones).
void slopes_per_channel(onnx::GraphProto& g) {
  std::map<std::string, int> rank, readers, prelu_readers;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list)
      if (v.type().tensor_type().has_shape()) rank[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const auto& node : g.node())
    for (int i = 0; i < node.input_size(); ++i) {
      ++readers[node.input(i)];
      if (node.op_type() == "PRelu" && i == 1) ++prelu_readers[node.input(i)];
    }
  for (const auto& node : g.node()) {
    if (node.op_type() != "PRelu" || node.input_size() < 2) continue;
    const auto r = rank.find(node.input(0));
    if (r == rank.end() || r->second < 3 || readers[node.input(1)] != prelu_readers[node.input(1)]) continue;
    for (auto& slope : *g.mutable_initializer())
      if (slope.name() == node.input(1) && slope.dims_size() == 1 && slope.dims(0) > 1)
        for (int i = 0; i < r->second - 2; ++i) slope.add_dims(1);
  }
}

}  // namespace

void upgrade_opset(onnx::ModelProto& model, std::int64_t from, std::int64_t to) {
  const std::string what = "the model uses ONNX opset " + std::to_string(from) + ", which wpk runs after converting it to opset " +
                           std::to_string(to) + "; ";
  // Models from before opset_import existed (IR version < 3) are opset 1.
  if (model.opset_import_size() == 0) model.add_opset_import()->set_version(1);
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Unsupported, what + "the ONNX checker refused it: " + first_line(e.what()));
  }
  // The converter's broadcasting adapters need the shapes of the values they rewrite.
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception&) {
    // Converting without them may still succeed; if not, the converter says which is missing.
  }
  slopes_per_channel(*model.mutable_graph());
  try {
    model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(to));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Unsupported, what + "the conversion failed: " + first_line(e.what()));
  }
}

}  // namespace wpk::onnx_import
