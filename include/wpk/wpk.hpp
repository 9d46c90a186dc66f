#pragma once
// The whole public API of wpk.
#include <string>

#include "wpk/attribute.hpp"
#include "wpk/dtype.hpp"
#include "wpk/error.hpp"
#include "wpk/graph.hpp"
#include "wpk/optimizer.hpp"
#include "wpk/options.hpp"
#include "wpk/quantize.hpp"
#include "wpk/session.hpp"
#include "wpk/tensor.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

// Loads an ONNX model (opsets 1-22; external weight files resolved next to the model).
// Throws Error: NotFound, InvalidModel, Unsupported.
Graph load(const std::string& path);
// Parses an ONNX model from bytes; `base_dir` resolves external data.
Graph load_from_bytes(const std::string& bytes, const std::string& base_dir = "");

// Reads/writes a TensorProto file (the ONNX test-data layout, input_0.pb ...).
Tensor load_tensor(const std::string& path);
// Reads a SequenceProto file as a Tensor::sequence (an empty one holds `element_dtype`), or an
// OptionalProto file as its value or Tensor::none().
Tensor load_sequence(const std::string& path, DType element_dtype = DType::Float32);
Tensor load_optional(const std::string& path, DType element_dtype = DType::Float32);
void save_tensor(const Tensor& tensor, const std::string& path);
// The same TensorProto format in memory (a service's request and response bodies). A truncated
// or corrupt message is an Error with code InvalidModel.
Tensor tensor_from_bytes(const std::string& bytes);
std::string tensor_to_bytes(const Tensor& tensor, const std::string& name = "");

}  // namespace wpk

#pragma GCC visibility pop
