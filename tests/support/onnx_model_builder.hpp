#pragma once
// Builds small ONNX models as bytes for importer and error-path tests, through the ONNX
// protobuf classes (so tests can make models wpk's own builder would refuse to make).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace wpk::testing {

struct OnnxModelBuilder {
  onnx::ModelProto model;

  explicit OnnxModelBuilder(int opset = 17);
  // A float32 (or other elem_type) input/output; dims < 0 become the symbol "N".
  OnnxModelBuilder& input(const std::string& name, const std::vector<long>& dims, int elem_type = 1);
  OnnxModelBuilder& output(const std::string& name, const std::vector<long>& dims, int elem_type = 1);
  OnnxModelBuilder& node(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs);
  OnnxModelBuilder& float_initializer(const std::string& name, const std::vector<long>& dims, const std::vector<float>& values);
  OnnxModelBuilder& int64_initializer(const std::string& name, const std::vector<long>& dims, const std::vector<long>& values);
  OnnxModelBuilder& bool_initializer(const std::string& name, bool value);  // a scalar (Loop's condition)
  // Attributes of the last node added.
  OnnxModelBuilder& attr(const std::string& name, long value);
  OnnxModelBuilder& attr(const std::string& name, float value);
  OnnxModelBuilder& attr(const std::string& name, const std::vector<long>& values);
  OnnxModelBuilder& attr(const std::string& name, const std::string& value);
  // A graph attribute (If's branches, Loop's and Scan's body): `body`'s graph.
  OnnxModelBuilder& attr(const std::string& name, const OnnxModelBuilder& body);
  std::string bytes() const;
  // Writes the model to `path`; returns path.
  std::string save(const std::string& path) const;
};

// A fresh empty folder under the system temp dir, unique per call; removed when the process exits.
std::string temp_dir(const std::string& tag);

}  // namespace wpk::testing
