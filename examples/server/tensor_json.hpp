#pragma once
// The server's JSON tensors: {"shape": [2, 4], "dtype": "float32", "data": [...]}, data flat in
// row-major order. dtype may be left out: it is then the model input's.
#include <nlohmann/json.hpp>

#include <string>

#include <wpk/wpk.hpp>

namespace wpk_server {

// Throws wpk::Error (InvalidArgument) naming `name` when the value is not such a tensor, its data
// holds a value the dtype cannot (a fraction or an out-of-range number for an integer type), or
// its data count differs from its shape's.
wpk::Tensor tensor_from_json(const nlohmann::json& value, wpk::DType declared, const std::string& name);
nlohmann::json tensor_to_json(const wpk::Tensor& tensor);

}  // namespace wpk_server
