#include "graph/onnx_tensor.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/page_memory.hpp"
#include "wpk/wpk.hpp"

namespace wpk::onnx_import {
namespace {

[[noreturn]] void bad(const std::string& what, const std::string& msg) {
  throw Error(ErrorCode::InvalidModel, what + ": " + msg);
}

DType dtype_from_proto(int32_t t, const std::string& what) {
  const DType d = static_cast<DType>(t);
  if (t < 0 || t > 16 || (!dtype_is_storable(d) && d != DType::String))
    throw Error(ErrorCode::Unsupported, what + ": unsupported data type " + std::to_string(t));
  return d;
}

struct ExternalSpan {
  std::filesystem::path file;
  std::uint64_t offset = 0;
};

// External data: the file must stay inside the model's folder (a hostile model must not read
// /etc/passwd), and the requested range must lie inside the file. Checked before the tensor is
// allocated, so a hostile shape cannot make wpk allocate what the file does not back.
ExternalSpan locate_external(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what,
                             std::size_t nbytes) {
  std::string location;
  std::uint64_t offset = 0;
  std::int64_t length = -1;
  for (const auto& kv : proto.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoull(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      bad(what, "external data field '" + kv.key() + "' is not a number");
    }
  }
  if (location.empty()) bad(what, "external data has no location");
  namespace fs = std::filesystem;
  const fs::path rel(location);
  if (base_dir.empty()) bad(what, "external data is not allowed here");
  if (rel.is_absolute()) bad(what, "external data location '" + location + "' must be relative to the model");
  for (const auto& part : rel)
    if (part == "..") bad(what, "external data location '" + location + "' leaves the model's folder");
  const fs::path file = fs::path(base_dir) / rel;
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec || !fs::exists(status)) throw Error(ErrorCode::NotFound, what + ": external data file '" + file.string() + "' not found");
  if (!fs::is_regular_file(status))
    bad(what, "external data location '" + location + "' is not a regular file");
  // A symbolic link inside the folder must not lead out of it: the file as resolved must lie
  // under the model's folder as resolved.
  std::error_code ec_dir;
  const fs::path inside = fs::canonical(file, ec).lexically_relative(fs::canonical(base_dir, ec_dir));
  if (ec || ec_dir || inside.empty() || *inside.begin() == "..")
    bad(what, "external data location '" + location + "' leaves the model's folder");
  const auto size = fs::file_size(file, ec);
  if (ec) throw Error(ErrorCode::Io, what + ": cannot read the size of external data file '" + file.string() + "'");
  if (length >= 0 && static_cast<std::uint64_t>(length) != nbytes)
    bad(what, "external data length " + std::to_string(length) + " does not match the " + std::to_string(nbytes) +
                  " bytes its shape needs");
  if (offset > size || size - offset < nbytes)
    bad(what, "external data file '" + file.string() + "' is too short for offset " + std::to_string(offset) + " + " +
                  std::to_string(nbytes) + " bytes");
  return {file, offset};
}

void read_external(const ExternalSpan& span, const std::string& what, void* dst, std::size_t nbytes) {
  std::ifstream in(span.file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(span.offset));
  if (!in.read(static_cast<char*>(dst), static_cast<std::streamsize>(nbytes)))
    throw Error(ErrorCode::Io, what + ": reading external data file '" + span.file.string() + "' failed");
}

// How many values the typed field for `dtype` holds (int32_data carries every type of 32 bits
// or fewer).
std::int64_t typed_count(const onnx::TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::Float32: return p.float_data_size();
    case DType::Float64: return p.double_data_size();
    case DType::Int64: return p.int64_data_size();
    case DType::UInt64: case DType::UInt32: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

template <typename Dst, typename Field>
void copy_field(const Field& field, Tensor& t, const std::string& what) {
  if (field.size() != t.numel())
    bad(what, "holds " + std::to_string(field.size()) + " values but its shape " + shape_to_string(t.shape()) +
                  " needs " + std::to_string(t.numel()));
  Dst* out = static_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
}

// Typed fields: int32_data carries every type of 32 bits or fewer (fp16 as raw bits).
void copy_typed(const onnx::TensorProto& p, Tensor& t, const std::string& what) {
  switch (t.dtype()) {
    case DType::Float32: return copy_field<float>(p.float_data(), t, what);
    case DType::Float64: return copy_field<double>(p.double_data(), t, what);
    case DType::Int64: return copy_field<std::int64_t>(p.int64_data(), t, what);
    case DType::UInt64: return copy_field<std::uint64_t>(p.uint64_data(), t, what);
    case DType::UInt32: return copy_field<std::uint32_t>(p.uint64_data(), t, what);
    case DType::Int32: return copy_field<std::int32_t>(p.int32_data(), t, what);
    case DType::Int16: return copy_field<std::int16_t>(p.int32_data(), t, what);
    case DType::UInt16: case DType::Float16: case DType::BFloat16:
      return copy_field<std::uint16_t>(p.int32_data(), t, what);
    case DType::Int8: return copy_field<std::int8_t>(p.int32_data(), t, what);
    case DType::UInt8: return copy_field<std::uint8_t>(p.int32_data(), t, what);
    case DType::Bool: {
      copy_field<std::uint8_t>(p.int32_data(), t, what);
      auto* b = static_cast<std::uint8_t*>(t.raw());  // normalise to 0/1 so bool reads are defined
      for (std::int64_t i = 0; i < t.numel(); ++i) b[i] = b[i] != 0;
      return;
    }
    default: bad(what, std::string("unsupported dtype ") + dtype_name(t.dtype()));
  }
}

}  // namespace

namespace {

// `take`, when given, is `p` itself: its raw bytes become the tensor's.
Tensor convert(const onnx::TensorProto& p, onnx::TensorProto* take, const std::string& base_dir, const std::string& what) {
  if (p.has_segment()) throw Error(ErrorCode::Unsupported, what + ": segmented tensors are not supported");
  const DType dtype = dtype_from_proto(p.data_type(), what);
  Shape shape(p.dims().begin(), p.dims().end());
  if (dtype == DType::String) {
    if (p.data_location() == onnx::TensorProto::EXTERNAL) bad(what, "string tensors cannot be external data");
    for (auto d : shape)
      if (d < 0) bad(what, "negative dimension in " + shape_to_string(shape));
    std::int64_t numel = 0;
    try {
      numel = shape_numel(shape);
    } catch (const Error& e) {
      bad(what, e.what());
    }
    if (numel != p.string_data_size())
      bad(what, "holds " + std::to_string(p.string_data_size()) + " strings but its shape " + shape_to_string(shape) +
                    " needs " + std::to_string(numel));
    return Tensor::from_strings(std::vector<std::string>(p.string_data().begin(), p.string_data().end()), std::move(shape));
  }
  for (auto d : shape)
    if (d < 0) bad(what, "negative dimension in " + shape_to_string(shape));
  // Check the declared size against the bytes actually present before allocating, so a hostile
  // dims field cannot make wpk allocate memory the file does not back.
  std::int64_t numel;
  try {
    numel = shape_numel(shape);
  } catch (const Error& e) {
    bad(what, e.what());
  }
  if (static_cast<std::uint64_t>(numel) > std::numeric_limits<std::uint64_t>::max() / std::max<std::size_t>(dtype_size(dtype), 1))
    bad(what, "shape " + shape_to_string(shape) + " of " + dtype_name(dtype) + " is larger than any tensor can be");
  const std::uint64_t need = static_cast<std::uint64_t>(numel) * dtype_size(dtype);
  const bool external = p.data_location() == onnx::TensorProto::EXTERNAL;
  if (!external && p.has_raw_data() && p.raw_data().size() != need)
    bad(what, "raw data has " + std::to_string(p.raw_data().size()) + " bytes but shape " + shape_to_string(shape) +
                  " of " + dtype_name(dtype) + " needs " + std::to_string(need));
  if (!external && !p.has_raw_data() && typed_count(p, dtype) != numel)
    bad(what, "holds " + std::to_string(typed_count(p, dtype)) + " values but its shape " + shape_to_string(shape) +
                  " needs " + std::to_string(numel));
  ExternalSpan span;
  if (external) span = locate_external(p, base_dir, what, need);
  if (take && !external && p.has_raw_data() && need > 0) {
    // The parsed bytes become the tensor's: no second copy of the weights, and no fresh memory
    // to fault in while the model loads (the proto's copy is already resident).
    auto bytes = std::make_shared<std::string>(std::move(*take->mutable_raw_data()));
    take->clear_raw_data();
    void* data = bytes->data();
    if (dtype == DType::Bool)
      for (std::uint64_t i = 0; i < need; ++i) static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t*>(data)[i] != 0;
    return Tensor::wrap(std::move(bytes), data, dtype, std::move(shape));
  }
  Tensor t;
  try {
    t = long_lived_zeros(dtype, shape);  // initializers above all, freed in bulk once packed
  } catch (const Error& e) {
    bad(what, e.what());
  }
  if (external) {
    read_external(span, what, t.raw(), t.nbytes());
  } else if (p.has_raw_data()) {
    if (need) std::memcpy(t.raw(), p.raw_data().data(), need);
    if (dtype == DType::Bool) {
      auto* b = static_cast<std::uint8_t*>(t.raw());
      for (std::int64_t i = 0; i < t.numel(); ++i) b[i] = b[i] != 0;
    }
  } else {
    copy_typed(p, t, what);
  }
  return t;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& what) {
  return convert(p, nullptr, base_dir, what);
}

Tensor tensor_from_proto(onnx::TensorProto&& p, const std::string& base_dir, const std::string& what) {
  return convert(p, &p, base_dir, what);
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& p) {
  p.set_data_type(static_cast<int32_t>(t.dtype()));
  p.clear_dims();
  for (auto d : t.shape()) p.add_dims(d);
  if (t.dtype() == DType::String) {
    for (const std::string& v : t.strings()) p.add_string_data(v);
    return;
  }
  p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace wpk::onnx_import
