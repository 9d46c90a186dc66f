#pragma once
// Conversion between onnx::TensorProto and wpk::Tensor, shared by the model importer and the
// test-data reader/writer.
#include <string>

#include <onnx/onnx_pb.h>

#include "wpk/tensor.hpp"

namespace wpk::onnx_import {

// `base_dir` resolves external data; empty when the tensor cannot have any (test data files).
// `what` names the tensor in error messages ("initializer 'conv1.weight'").
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what);
// The same, taking the proto's raw bytes as the tensor's memory instead of copying them (the
// proto is left without them).
Tensor tensor_from_proto(onnx::TensorProto&& proto, const std::string& base_dir, const std::string& what);
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);

}  // namespace wpk::onnx_import
