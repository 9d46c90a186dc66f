// Sequences and optionals: SequenceEmpty/Construct/Insert/Erase/At/Length, SplitToSequence,
// ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.
//
// A sequence holds its own copies of the tensors put into it (a run's intermediates live in an
// arena the next steps reuse), and SequenceAt hands out a copy (a later in-place step must not
// write into an element another step reads).

#include "backends/reference/common.hpp"
#include "backends/reference/data_movement.hpp"
#include "backends/reference/misc_internal.hpp"

namespace wpk::reference {
namespace {

const Tensor& sequence_input(const KernelContext& ctx, std::size_t i) {
  const Tensor& s = ctx.input(i);
  if (!s.is_sequence()) ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " must be a sequence, got " + dtype_name(s.dtype()));
  return s;
}

// A position input (int32 or int64 scalar) in [-n, n - 1], or [-n, n] when `end_allowed`.
std::size_t position(const KernelContext& ctx, std::size_t i, std::size_t n, bool end_allowed) {
  const Tensor& p = ctx.input(i);
  if (p.numel() != 1 || (p.dtype() != DType::Int64 && p.dtype() != DType::Int32))
    ctx.fail(ErrorCode::InvalidArgument, "position must be one int32 or int64");
  const std::int64_t v = p.dtype() == DType::Int64 ? p.data<std::int64_t>()[0] : p.data<std::int32_t>()[0];
  const std::int64_t len = static_cast<std::int64_t>(n);
  if (v < -len || v > (end_allowed ? len : len - 1))
    ctx.fail(ErrorCode::InvalidArgument, "position " + std::to_string(v) + " is outside a sequence of " + std::to_string(n));
  return static_cast<std::size_t>(v < 0 ? v + len : v);
}

DType dtype_attr(const KernelContext& ctx, DType fallback) {
  const Attribute* a = ctx.node().find_attr("dtype");
  return a ? static_cast<DType>(static_cast<std::uint8_t>(a->i())) : fallback;
}

void sequence_empty(KernelContext& ctx) { ctx.set_output(0, Tensor::sequence({}, dtype_attr(ctx, DType::Float32))); }

void sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != ctx.input(0).dtype())
      ctx.fail(ErrorCode::InvalidArgument, std::string("a sequence holds one dtype; inputs are ") + dtype_name(ctx.input(0).dtype()) +
                                               " and " + dtype_name(ctx.input(i).dtype()));
    items.push_back(ctx.input(i).clone());
  }
  ctx.set_output(0, Tensor::sequence(std::move(items), ctx.input(0).dtype()));
}

void sequence_insert(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  if (t.dtype() != s.element_dtype())
    ctx.fail(ErrorCode::InvalidArgument, std::string("cannot insert a ") + dtype_name(t.dtype()) + " tensor into a sequence of " +
                                             dtype_name(s.element_dtype()));
  std::vector<Tensor> items = s.elements();
  const std::size_t at = ctx.has_input(2) ? position(ctx, 2, items.size(), true) : items.size();
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), t.clone());
  ctx.set_output(0, Tensor::sequence(std::move(items), s.element_dtype()));
}

void sequence_erase(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  std::vector<Tensor> items = s.elements();
  if (items.empty()) ctx.fail(ErrorCode::InvalidArgument, "cannot erase from an empty sequence");
  const std::size_t at = ctx.has_input(1) ? position(ctx, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
  ctx.set_output(0, Tensor::sequence(std::move(items), s.element_dtype()));
}

void sequence_at(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  ctx.set_output(0, s.elements()[position(ctx, 1, s.elements().size(), false)].clone());
}

void sequence_length(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<std::int64_t>(static_cast<std::int64_t>(sequence_input(ctx, 0).elements().size())));
}

void split_to_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), x.rank(), ctx);
  const std::int64_t len = x.shape()[axis];
  std::vector<std::int64_t> lengths;
  bool keep = true;
  if (!ctx.has_input(1)) {
    lengths.assign(static_cast<std::size_t>(len), 1);
    keep = ctx.node().attr_int("keepdims", 1) != 0;
  } else if (ctx.input(1).rank() == 0) {
    const std::int64_t chunk = read_int_list(ctx.input(1), ctx).at(0);
    if (chunk <= 0) ctx.fail(ErrorCode::InvalidArgument, "split must be positive, got " + std::to_string(chunk));
    for (std::int64_t at = 0; at < len; at += chunk) lengths.push_back(std::min(chunk, len - at));
  } else {
    lengths = read_int_list(ctx.input(1), ctx);
    std::int64_t total = 0;
    for (std::int64_t l : lengths) {
      if (l < 0) ctx.fail(ErrorCode::InvalidArgument, "split has a negative length " + std::to_string(l));
      total += l;
    }
    if (total != len)
      ctx.fail(ErrorCode::InvalidArgument, "split sums to " + std::to_string(total) + ", axis " + std::to_string(axis) +
                                               " has " + std::to_string(len));
  }
  std::vector<Tensor> items;
  std::int64_t start = 0;
  for (std::int64_t l : lengths) {
    items.push_back(slab(x, axis, start, l, keep));
    start += l;
  }
  ctx.set_output(0, Tensor::sequence(std::move(items), x.dtype()));
}

void concat_from_sequence(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  const std::vector<Tensor>& items = s.elements();
  if (items.empty()) ctx.fail(ErrorCode::InvalidArgument, "cannot concatenate an empty sequence");
  const bool stack = ctx.node().attr_int("new_axis", 0) != 0;
  if (!ctx.node().has_attr("axis")) ctx.fail(ErrorCode::InvalidModel, "attribute 'axis' is required");
  const int rank = items[0].rank();
  const int axis = normalize_axis(ctx.node().attr_int("axis", 0), stack ? rank + 1 : rank, ctx);
  // Stacking concatenates the elements each given a length-1 axis.
  std::vector<Tensor> viewed;
  for (const Tensor& t : items) {
    Shape v = t.shape();
    if (stack) v.insert(v.begin() + axis, 1);
    viewed.push_back(t.reshaped(v));
  }
  Shape out = viewed[0].shape();
  out[axis] = 0;  // summed below
  std::vector<const Tensor*> parts;
  for (std::size_t i = 0; i < viewed.size(); ++i) {
    const Shape& v = viewed[i].shape();
    bool same = v.size() == out.size();
    for (std::size_t d = 0; same && d < v.size(); ++d) same = static_cast<int>(d) == axis || v[d] == out[d];
    if (!same)
      ctx.fail(ErrorCode::InvalidArgument, "elements " + shape_to_string(items[0].shape()) + " and " +
                                               shape_to_string(items[i].shape()) + " do not fit together along axis " +
                                               std::to_string(axis));
    out[axis] += v[axis];
    parts.push_back(&viewed[i]);
  }
  concat_into(parts, axis, ctx.allocate_output(0, s.element_dtype(), out));
}

// An optional with the input's value, or none without an input.
void optional(KernelContext& ctx) { ctx.set_output(0, ctx.has_input(0) ? ctx.input(0) : Tensor::none()); }

void optional_has_element(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<bool>(ctx.has_input(0) && !ctx.input(0).is_none()));
}

void optional_get_element(KernelContext& ctx) {
  if (ctx.input(0).is_none()) ctx.fail(ErrorCode::InvalidArgument, "the optional input has no value");
  ctx.set_output(0, ctx.input(0));
}

}  // namespace

void register_sequence(OpTable& t) {
  t.add("SequenceEmpty", {sequence_empty, 0, 0, 11});
  t.add("SequenceConstruct", {sequence_construct, 1, -1, 11});
  t.add("SequenceInsert", {sequence_insert, 2, 3, 11});
  t.add("SequenceErase", {sequence_erase, 1, 2, 11});
  t.add("SequenceAt", {sequence_at, 2, 2, 11});
  t.add("SequenceLength", {sequence_length, 1, 1, 11});
  t.add("SplitToSequence", {split_to_sequence, 1, 2, 11});
  t.add("ConcatFromSequence", {concat_from_sequence, 1, 1, 11});
  t.add("Optional", {optional, 0, 1, 15});
  t.add("OptionalHasElement", {optional_has_element, 0, 1, 15});
  t.add("OptionalGetElement", {optional_get_element, 1, 1, 15});
}

}  // namespace wpk::reference
