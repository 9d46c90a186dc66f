#include "wpk/tensor.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/page_memory.hpp"

namespace wpk {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw Error(ErrorCode::InvalidArgument, "negative dimension in shape " + shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw Error(ErrorCode::InvalidArgument, "shape " + shape_to_string(shape) + " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
// One allocation cap so a hostile shape cannot ask for terabytes or for more than the machine
// has (which the kernel's OOM killer would answer by ending the process): the smaller of
// 64 GiB and physical memory, per tensor.
std::size_t max_tensor_bytes() {
  static const std::size_t cap = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    const std::size_t limit = std::size_t(64) << 30;
    if (pages <= 0 || page <= 0) return limit;
    return std::min(limit, static_cast<std::size_t>(pages) * static_cast<std::size_t>(page));
  }();
  return cap;
}

// The byte count of a zero-filled tensor, after the checks every allocation makes.
std::size_t checked_nbytes(DType dtype, const Shape& shape) {
  if (!dtype_is_storable(dtype))
    throw Error(ErrorCode::Unsupported, std::string("tensors of dtype ") + dtype_name(dtype) + " are not supported");
  const std::int64_t numel = shape_numel(shape);
  const std::size_t elem = dtype_size(dtype);
  if (static_cast<std::uint64_t>(numel) > max_tensor_bytes() / elem)
    throw Error(ErrorCode::InvalidArgument, "tensor of shape " + shape_to_string(shape) + " and dtype " +
                                                dtype_name(dtype) + " exceeds the per-tensor limit of " +
                                                std::to_string(max_tensor_bytes() >> 20) + " MiB (physical memory, at most 64 GiB)");
  return static_cast<std::size_t>(numel) * elem;
}

// A zero-filled tensor owning storage from `allocate` (64-byte aligned, suiting every SIMD
// width wpk uses; at least one byte, so data() is non-null).
Tensor zeros_from(std::shared_ptr<void> (*allocate)(std::size_t), DType dtype, Shape shape) {
  std::shared_ptr<void> owner = allocate(checked_nbytes(dtype, shape));
  void* data = owner.get();
  return Tensor::wrap(std::move(owner), data, dtype, std::move(shape));
}

}  // namespace

Tensor Tensor::zeros(DType dtype, Shape shape) { return zeros_from(&heap_zeroed, dtype, std::move(shape)); }

Tensor long_lived_zeros(DType dtype, Shape shape) { return zeros_from(&long_lived_zeroed, dtype, std::move(shape)); }

Tensor Tensor::borrow(void* data, DType dtype, Shape shape) {
  if (!dtype_is_storable(dtype))
    throw Error(ErrorCode::Unsupported, std::string("tensors of dtype ") + dtype_name(dtype) + " are not supported");
  Tensor t;
  t.numel_ = shape_numel(shape);
  if (data == nullptr && t.numel_ != 0)
    throw Error(ErrorCode::InvalidArgument, "Tensor::borrow given a null pointer for shape " + shape_to_string(shape));
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<void> owner, void* data, DType dtype, Shape shape) {
  Tensor t = borrow(data, dtype, std::move(shape));
  if (!owner) throw Error(ErrorCode::InvalidArgument, "Tensor::wrap given no owner; use Tensor::borrow");
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::borrow_device(void* device_data, DType dtype, Shape shape) {
  if (!dtype_is_storable(dtype) || dtype == DType::String)
    throw Error(ErrorCode::Unsupported, std::string("device tensors of dtype ") + dtype_name(dtype) + " are not supported");
  Tensor t = borrow(device_data, dtype, std::move(shape));
  t.on_device_ = true;
  return t;
}

Tensor Tensor::wrap_device(std::shared_ptr<void> owner, void* device_data, DType dtype, Shape shape) {
  if (!owner) throw Error(ErrorCode::InvalidArgument, "Tensor::wrap_device given no owner; use Tensor::borrow_device");
  Tensor t = borrow_device(device_data, dtype, std::move(shape));
  t.storage_ = std::move(owner);
  return t;
}

std::int64_t Tensor::dim(int axis) const {
  const int r = rank();
  if (axis < -r || axis >= r)
    throw Error(ErrorCode::InvalidArgument, "axis " + std::to_string(axis) + " out of range for shape " + shape_to_string(shape_));
  return shape_[axis < 0 ? axis + r : axis];
}

Tensor Tensor::sequence(std::vector<Tensor> elements, DType element_dtype) {
  if (!dtype_is_storable(element_dtype) && element_dtype != DType::String)
    throw Error(ErrorCode::Unsupported, std::string("sequences of ") + dtype_name(element_dtype) + " are not supported");
  for (const Tensor& e : elements)
    if (e.dtype() != element_dtype)
      throw Error(ErrorCode::InvalidArgument, std::string("a sequence of ") + dtype_name(element_dtype) + " cannot hold a " +
                                                  dtype_name(e.dtype()) + " tensor");
  Tensor t;
  t.dtype_ = DType::Sequence;
  t.element_dtype_ = element_dtype;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(elements));
  return t;
}

Tensor Tensor::from_strings(std::vector<std::string> values, Shape shape) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.check_count(values.size());
  t.dtype_ = DType::String;
  t.strings_ = std::make_shared<const std::vector<std::string>>(std::move(values));
  return t;
}

const std::vector<std::string>& Tensor::strings() const {
  if (dtype_ != DType::String) throw Error(ErrorCode::InvalidArgument, std::string("a ") + dtype_name(dtype_) + " tensor holds no strings");
  return *strings_;
}

Tensor Tensor::none() {
  Tensor t;
  t.dtype_ = DType::OptionalNone;
  return t;
}

const std::vector<Tensor>& Tensor::elements() const {
  if (!is_sequence()) throw Error(ErrorCode::InvalidArgument, std::string("a ") + dtype_name(dtype_) + " tensor is not a sequence");
  return *elements_;
}

DType Tensor::element_dtype() const {
  elements();
  return element_dtype_;
}

Tensor Tensor::clone() const {
  if (is_sequence()) {
    std::vector<Tensor> copies;
    for (const Tensor& e : *elements_) copies.push_back(e.clone());
    return sequence(std::move(copies), element_dtype_);
  }
  if (is_none()) return none();
  if (dtype_ == DType::String) return *this;  // immutable: sharing is copying
  if (empty()) return Tensor();
  if (on_device_) throw Error(ErrorCode::Unsupported, "a device tensor cannot be cloned on the host; copy it with the CUDA API");
  Tensor t = zeros(dtype_, shape_);
  copy_bytes(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel_)
    throw Error(ErrorCode::InvalidArgument, "cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::check_type(DType want) const {
  if (on_device_)
    throw Error(ErrorCode::InvalidArgument, "the tensor is in GPU memory, which the host does not read; its device address is raw()");
  if (want != dtype_)
    throw Error(ErrorCode::InvalidArgument,
                std::string("tensor holds ") + dtype_name(dtype_) + ", accessed as " + dtype_name(want));
}

void Tensor::check_count(std::size_t n) const {
  if (static_cast<std::int64_t>(n) != numel_)
    throw Error(ErrorCode::InvalidArgument, "shape " + shape_to_string(shape_) + " needs " + std::to_string(numel_) +
                                                " values, got " + std::to_string(n));
}

void Tensor::copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n) std::memcpy(dst, src, n);
}

}  // namespace wpk
