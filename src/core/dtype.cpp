#include "wpk/dtype.hpp"

namespace wpk {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: case DType::Int32: case DType::UInt32: return 4;
    case DType::Float64: case DType::Int64: case DType::UInt64: return 8;
    case DType::Int16: case DType::UInt16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
    case DType::Undefined: case DType::String: case DType::Sequence: case DType::OptionalNone: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::BFloat16: return "bfloat16";
    case DType::Sequence: return "sequence";
    case DType::OptionalNone: return "none";
    case DType::Undefined: break;
  }
  return "undefined";
}

bool dtype_is_storable(DType t) { return dtype_size(t) != 0; }

}  // namespace wpk
