#include "tensor_json.hpp"

#include <cmath>
#include <limits>

namespace wpk_server {
namespace {

using nlohmann::json;

wpk::Error bad(const std::string& name, const std::string& what) {
  return wpk::Error(wpk::ErrorCode::InvalidArgument, "input '" + name + "': " + what);
}

wpk::DType dtype_from_name(const std::string& s, const std::string& name) {
  for (wpk::DType t : {wpk::DType::Float32, wpk::DType::Float64, wpk::DType::Int8, wpk::DType::Int16, wpk::DType::Int32,
                       wpk::DType::Int64, wpk::DType::UInt8, wpk::DType::UInt16, wpk::DType::UInt32, wpk::DType::UInt64,
                       wpk::DType::Bool})
    if (s == wpk::dtype_name(t)) return t;
  throw bad(name, "dtype '" + s + "' is not one a JSON body can carry (float32, float64, int8..int64, uint8..uint64, bool)");
}

template <typename T>
void fill(wpk::Tensor& t, const json& data, const std::string& name) {
  T* out = t.data<T>();
  std::size_t i = 0;
  for (const json& v : data) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean() && !v.is_number_integer() && !v.is_number_unsigned()) throw bad(name, "data[" + std::to_string(i) + "] is not a bool");
      out[i] = v.is_boolean() ? v.get<bool>() : v.get<std::int64_t>() != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) throw bad(name, "data[" + std::to_string(i) + "] is not a number");
      out[i] = static_cast<T>(v.get<double>());
    } else {
      if (!v.is_number_integer() && !v.is_number_unsigned())
        throw bad(name, "data[" + std::to_string(i) + "] is not an integer");
      const bool fits = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                            : v.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                  (std::is_unsigned_v<T> || v.get<std::int64_t>() <= static_cast<std::int64_t>(std::numeric_limits<T>::max()));
      if (!fits) throw bad(name, "data[" + std::to_string(i) + "] does not fit " + wpk::dtype_name(t.dtype()));
      out[i] = v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>()) : static_cast<T>(v.get<std::int64_t>());
    }
    ++i;
  }
}

template <typename T>
json values(const wpk::Tensor& t) {
  json data = json::array();
  const T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      // JSON has no NaN or infinity: they travel as null, as most JSON writers send them.
      if (!std::isfinite(p[i])) {
        data.push_back(nullptr);
        continue;
      }
    }
    data.push_back(p[i]);
  }
  return data;
}

}  // namespace

wpk::Tensor tensor_from_json(const json& value, wpk::DType declared, const std::string& name) {
  if (!value.is_object()) throw bad(name, "expected an object {\"shape\": [...], \"data\": [...]}");
  const auto shape_it = value.find("shape");
  const auto data_it = value.find("data");
  if (shape_it == value.end() || !shape_it->is_array()) throw bad(name, "\"shape\" must be an array of sizes");
  if (data_it == value.end() || !data_it->is_array()) throw bad(name, "\"data\" must be a flat array of values");
  wpk::Shape shape;
  std::int64_t count = 1;
  for (const json& d : *shape_it) {
    if (!d.is_number_integer() && !d.is_number_unsigned()) throw bad(name, "a shape size is not an integer");
    const std::int64_t n = d.is_number_unsigned() ? static_cast<std::int64_t>(std::min<std::uint64_t>(d.get<std::uint64_t>(), 1ull << 40))
                                                  : d.get<std::int64_t>();
    if (n < 0 || n > (std::int64_t{1} << 40)) throw bad(name, "shape size " + d.dump() + " is out of range");
    shape.push_back(n);
    // The body already holds every value, so the count is bounded by its size once it matches.
    count = count > (std::int64_t{1} << 40) / std::max<std::int64_t>(n, 1) ? (std::int64_t{1} << 40) : count * n;
  }
  if (static_cast<std::int64_t>(data_it->size()) != count)
    throw bad(name, "shape " + wpk::shape_to_string(shape) + " holds " + std::to_string(count) + " values, data has " +
                        std::to_string(data_it->size()));
  wpk::DType dtype = declared;
  if (const auto d = value.find("dtype"); d != value.end()) {
    if (!d->is_string()) throw bad(name, "\"dtype\" must be a string");
    dtype = dtype_from_name(d->get<std::string>(), name);
  }
  if (!wpk::dtype_is_storable(dtype)) throw bad(name, "the model does not declare its dtype: give \"dtype\"");
  wpk::Tensor t = wpk::Tensor::zeros(dtype, shape);
  switch (dtype) {
    case wpk::DType::Float32: fill<float>(t, *data_it, name); break;
    case wpk::DType::Float64: fill<double>(t, *data_it, name); break;
    case wpk::DType::Int8: fill<std::int8_t>(t, *data_it, name); break;
    case wpk::DType::Int16: fill<std::int16_t>(t, *data_it, name); break;
    case wpk::DType::Int32: fill<std::int32_t>(t, *data_it, name); break;
    case wpk::DType::Int64: fill<std::int64_t>(t, *data_it, name); break;
    case wpk::DType::UInt8: fill<std::uint8_t>(t, *data_it, name); break;
    case wpk::DType::UInt16: fill<std::uint16_t>(t, *data_it, name); break;
    case wpk::DType::UInt32: fill<std::uint32_t>(t, *data_it, name); break;
    case wpk::DType::UInt64: fill<std::uint64_t>(t, *data_it, name); break;
    case wpk::DType::Bool: fill<bool>(t, *data_it, name); break;
    default: throw bad(name, std::string("dtype ") + wpk::dtype_name(dtype) + " cannot travel in JSON; send a TensorProto body");
  }
  return t;
}

json tensor_to_json(const wpk::Tensor& t) {
  json out;
  out["shape"] = t.shape();
  out["dtype"] = wpk::dtype_name(t.dtype());
  switch (t.dtype()) {
    case wpk::DType::Float32: out["data"] = values<float>(t); break;
    case wpk::DType::Float64: out["data"] = values<double>(t); break;
    case wpk::DType::Int8: out["data"] = values<std::int8_t>(t); break;
    case wpk::DType::Int16: out["data"] = values<std::int16_t>(t); break;
    case wpk::DType::Int32: out["data"] = values<std::int32_t>(t); break;
    case wpk::DType::Int64: out["data"] = values<std::int64_t>(t); break;
    case wpk::DType::UInt8: out["data"] = values<std::uint8_t>(t); break;
    case wpk::DType::UInt16: out["data"] = values<std::uint16_t>(t); break;
    case wpk::DType::UInt32: out["data"] = values<std::uint32_t>(t); break;
    case wpk::DType::UInt64: out["data"] = values<std::uint64_t>(t); break;
    case wpk::DType::Bool: out["data"] = values<bool>(t); break;
    default:
      throw wpk::Error(wpk::ErrorCode::Unsupported, std::string("an output of dtype ") + wpk::dtype_name(t.dtype()) +
                                                        " cannot travel in JSON; ask for a TensorProto response");
  }
  return out;
}

}  // namespace wpk_server
