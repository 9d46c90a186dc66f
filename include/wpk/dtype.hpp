#pragma once
// Element types. The numeric values equal ONNX TensorProto.DataType so import is a cast.
#include <cstddef>
#include <cstdint>

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

enum class DType : std::uint8_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,  // a Tensor of strings holds them apart from its bytes (Tensor::from_strings)
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
  // Not element types: the dtype of a Tensor that stands for an ONNX sequence of tensors
  // (Tensor::sequence) or for an ONNX optional without a value (Tensor::none). Outside ONNX's
  // codes.
  Sequence = 100,
  OptionalNone = 101,
};

// Bytes per element; 0 for Undefined and String.
std::size_t dtype_size(DType t);
// "float32", "int64", ... ; "undefined" for anything unknown.
const char* dtype_name(DType t);
// True for the types a Tensor can hold (everything but Undefined and String).
bool dtype_is_storable(DType t);

// 16-bit floats are stored as raw bits; kernels convert through float.
struct Float16Bits { std::uint16_t bits; };
struct BFloat16Bits { std::uint16_t bits; };

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::Int8; };
template <> struct DTypeOf<std::int16_t> { static constexpr DType value = DType::Int16; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::UInt16; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct DTypeOf<std::uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <> struct DTypeOf<Float16Bits> { static constexpr DType value = DType::Float16; };
template <> struct DTypeOf<BFloat16Bits> { static constexpr DType value = DType::BFloat16; };

template <typename T> constexpr DType dtype_of() { return DTypeOf<T>::value; }

}  // namespace wpk

#pragma GCC visibility pop
