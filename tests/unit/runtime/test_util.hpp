#pragma once
// Helpers shared by the runtime tests.
#include <cstring>
#include <filesystem>
#include <string>

#include "wpk/wpk.hpp"

namespace wpk::runtime_test {

// "" when both tensors hold the same dtype, shape and bytes.
inline std::string compare_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) return std::string("dtype ") + dtype_name(a.dtype()) + " vs " + dtype_name(b.dtype());
  if (a.shape() != b.shape()) return "shape " + shape_to_string(a.shape()) + " vs " + shape_to_string(b.shape());
  if (a.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) return "bytes differ";
  return "";
}

inline std::string compare_all(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return "different output counts";
  for (const auto& kv : a) {
    auto it = b.find(kv.first);
    if (it == b.end()) return "missing output " + kv.first;
    const std::string d = compare_bytes(kv.second, it->second);
    if (!d.empty()) return kv.first + ": " + d;
  }
  return "";
}

inline std::filesystem::path model_path(const std::string& name) {
  return std::filesystem::path(WPK_TEST_MODELS_DIR) / (name + ".onnx");
}

// The model's first stored input set (scripts/export_models.py).
inline TensorMap model_inputs(const Session& s, const std::string& name) {
  const auto dir = std::filesystem::path(WPK_TEST_MODELS_DIR) / name / "test_data_set_0";
  TensorMap inputs;
  for (std::size_t i = 0; i < s.inputs().size(); ++i)
    inputs[s.inputs()[i].name] = load_tensor((dir / ("input_" + std::to_string(i) + ".pb")).string());
  return inputs;
}

}  // namespace wpk::runtime_test
