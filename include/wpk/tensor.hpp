#pragma once
// wpk::Tensor — a dense, row-major n-d array: dtype, shape, and memory that is either owned
// (shared, reference-counted: copies of a Tensor share the same bytes) or borrowed (the caller
// keeps the memory alive and unchanged for as long as the Tensor or any copy is used).
//
// Thread-safety: a Tensor is a value; concurrent reads are safe, concurrent writes to the same
// bytes are not. wpk never writes into a borrowed input.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wpk/dtype.hpp"
#include "wpk/error.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

using Shape = std::vector<std::int64_t>;

// Product of the dimensions; throws Error on a negative dimension or on overflow.
std::int64_t shape_numel(const Shape& shape);
// "[1, 3, 224, 224]"
std::string shape_to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // an empty tensor: dtype Undefined, no memory

  // Owned memory, zero-filled.
  static Tensor zeros(DType dtype, Shape shape);
  // Owned copy of `values`; throws if shape_numel(shape) != values.size().
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    Tensor t = zeros(dtype_of<T>(), std::move(shape));
    t.check_count(values.size());
    T* out = t.data<T>();  // element by element: std::vector<bool> has no data()
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    return t;
  }
  // Owned 0-d tensor.
  template <typename T>
  static Tensor scalar(T value) { return from_vector<T>({value}, {}); }

  // Borrowed memory: nothing is copied. `data` must hold shape_numel(shape) elements.
  static Tensor borrow(void* data, DType dtype, Shape shape);
  template <typename T>
  static Tensor borrow(T* data, Shape shape) {
    return borrow(static_cast<void*>(data), dtype_of<T>(), std::move(shape));
  }
  // Shared memory kept alive by `owner` (e.g. a view into a larger block): copies of the Tensor
  // hold `owner`, which is released with the last of them. `data` must hold shape_numel(shape)
  // elements and lie inside what `owner` keeps alive. The bytes are not initialised.
  static Tensor wrap(std::shared_ptr<void> owner, void* data, DType dtype, Shape shape);
  // A borrowed read-only input; wpk treats every borrowed tensor as read-only.
  template <typename T>
  static Tensor borrow(const T* data, Shape shape) {
    return borrow(const_cast<T*>(data), std::move(shape));
  }

  // Memory on the GPU that a CUDA session (SessionOptions::device) runs on: raw() is the device
  // address, which the host never reads (data<T>() and clone() throw). As an input it is copied on
  // the device into the device region that reads it (to the host where the CPU reads it); with
  // RunOptions::outputs_on_device, outputs a device region computes come back this way. Borrowed:
  // the caller keeps the memory alive and unchanged while the run uses it.
  static Tensor borrow_device(void* device_data, DType dtype, Shape shape);
  // Device memory kept alive by `owner` (released with the last copy of the Tensor).
  static Tensor wrap_device(std::shared_ptr<void> owner, void* device_data, DType dtype, Shape shape);
  bool on_device() const { return on_device_; }

  // A tensor of strings (dtype String): raw() is null and nbytes() 0; strings() holds the
  // elements in row-major order. Strings are immutable once made.
  static Tensor from_strings(std::vector<std::string> values, Shape shape);
  const std::vector<std::string>& strings() const;

  // An ONNX sequence: tensors of one element dtype, of any shapes (dtype() is DType::Sequence,
  // numel() 0). The elements are shared, not copied.
  static Tensor sequence(std::vector<Tensor> elements, DType element_dtype);
  // An ONNX optional without a value (dtype() is DType::OptionalNone). An optional with a value
  // is that value itself.
  static Tensor none();
  bool is_sequence() const { return dtype_ == DType::Sequence; }
  bool is_none() const { return dtype_ == DType::OptionalNone; }
  // A sequence's elements and their dtype; Error for anything else.
  const std::vector<Tensor>& elements() const;
  DType element_dtype() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int axis) const;  // negative axes count from the back
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const { return dtype_ == DType::Undefined; }
  bool is_borrowed() const { return data_ != nullptr && !storage_; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // Typed access; throws Error if T does not match dtype() or the tensor is on the device.
  template <typename T> T* data() { check_type(dtype_of<T>()); return static_cast<T*>(data_); }
  template <typename T> const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(data_);
  }

  // A deep, owned copy (of every element, for a sequence); Error for a device tensor.
  Tensor clone() const;
  // Same bytes, another shape with the same element count.
  Tensor reshaped(Shape shape) const;

 private:
  void check_type(DType want) const;
  void check_count(std::size_t n) const;
  static void copy_bytes(void* dst, const void* src, std::size_t n);

  DType dtype_ = DType::Undefined;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::shared_ptr<void> storage_;  // null when borrowed
  void* data_ = nullptr;
  std::shared_ptr<const std::vector<Tensor>> elements_;  // a sequence's
  std::shared_ptr<const std::vector<std::string>> strings_;  // a string tensor's
  DType element_dtype_ = DType::Undefined;
  bool on_device_ = false;
};

}  // namespace wpk

#pragma GCC visibility pop
