// Loop and Scan (opset 8 without sequence_lens, and 9 on): the body runs once per
// iteration on the carried values; per-iteration outputs are stacked into the scan outputs.
#include <algorithm>
#include <optional>

#include "backends/reference/data_movement.hpp"
#include "graph/subgraph.hpp"
#include "runtime/control_flow.hpp"
#include "runtime/run_control.hpp"

namespace wpk {
namespace {

// Equal-shaped parts stacked along a new `axis` (in reverse order when `reverse`) into `out`:
// a concatenation of the parts each given a length-1 axis there.
void stack_into(const std::vector<Tensor>& parts, int axis, bool reverse, Tensor& out) {
  std::vector<Tensor> viewed;
  for (const Tensor& t : parts) {
    Shape v = t.shape();
    v.insert(v.begin() + axis, 1);
    viewed.push_back(t.reshaped(std::move(v)));
  }
  std::vector<const Tensor*> order;
  for (const Tensor& t : viewed) order.push_back(&t);
  if (reverse) std::reverse(order.begin(), order.end());
  reference::concat_into(order, axis, out);
}

// The per-iteration values of one scan output, checked as they come.
class ScanOutput {
 public:
  ScanOutput(std::string what, DType declared) : what_(std::move(what)), dtype_(declared) {}

  void add(Tensor t, const KernelContext& ctx, std::int64_t& elements) {
    if (!parts_.empty() && (t.shape() != parts_.front().shape() || t.dtype() != parts_.front().dtype()))
      ctx.fail(ErrorCode::InvalidArgument, what_ + " is " + dtype_name(t.dtype()) + " " + shape_to_string(t.shape()) +
                                               " at iteration " + std::to_string(parts_.size()) + " but was " +
                                               dtype_name(parts_.front().dtype()) + " " +
                                               shape_to_string(parts_.front().shape()));
    // What the iterations have produced so far is bounded like one tensor of the session.
    elements += t.numel();
    if (elements > ctx.limits().max_elements)
      ctx.fail(ErrorCode::ResourceExhausted, what_ + " grew past " + std::to_string(ctx.limits().max_elements) +
                                                 " elements (SessionOptions::max_tensor_elements)");
    parts_.push_back(std::move(t));
  }


  // The stacked output: the new axis at `axis` (of the stacked rank; negative from the back).
  void emit(KernelContext& ctx, std::size_t output, std::int64_t axis, bool reverse) const {
    const int a = stacked_axis(ctx, axis);
    Tensor& out = ctx.allocate_output(output, dtype(), stacked_shape(a));
    if (!parts_.empty()) stack_into(parts_, a, reverse, out);
  }

  // The same along axis 0, as a tensor of its own (opset 8's per-batch-item scan outputs).
  Tensor stacked(const KernelContext& ctx, bool reverse) const {
    Tensor out = Tensor::zeros(dtype(), stacked_shape(stacked_axis(ctx, 0)));
    if (!parts_.empty()) stack_into(parts_, 0, reverse, out);
    return out;
  }

 private:
  DType dtype() const {
    if (!parts_.empty()) return parts_.front().dtype();
    return dtype_ == DType::Undefined ? DType::Float32 : dtype_;  // no iteration told
  }
  int stacked_axis(const KernelContext& ctx, std::int64_t axis) const {
    const std::int64_t rank = (parts_.empty() ? 0 : static_cast<std::int64_t>(parts_.front().rank())) + 1;
    if (axis < -rank || axis >= rank)
      ctx.fail(ErrorCode::InvalidModel, what_ + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return static_cast<int>(axis < 0 ? axis + rank : axis);
  }
  Shape stacked_shape(int axis) const {
    Shape shape = parts_.empty() ? Shape{} : parts_.front().shape();
    shape.insert(shape.begin() + axis, static_cast<std::int64_t>(parts_.size()));
    return shape;
  }

  std::string what_;
  DType dtype_;
  std::vector<Tensor> parts_;
};

std::int64_t one_int64(const Tensor& t, const KernelContext& ctx, const char* what) {
  if (t.dtype() != DType::Int64 || t.numel() != 1)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be one int64, got " + dtype_name(t.dtype()) + " " +
                                             shape_to_string(t.shape()));
  return t.data<std::int64_t>()[0];
}

bool one_bool(const Tensor& t, const KernelContext& ctx, const char* what) {
  if (t.dtype() != DType::Bool || t.numel() != 1)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be one bool, got " + dtype_name(t.dtype()) + " " +
                                             shape_to_string(t.shape()));
  return t.data<bool>()[0];
}

void count_iteration(std::int64_t i, const Body& body, const KernelContext& ctx) {
  if (i >= body.max_iterations())
    ctx.fail(ErrorCode::ResourceExhausted, "more than " + std::to_string(body.max_iterations()) +
                                               " iterations (SessionOptions::max_loop_iterations)");
  check_run_control(ctx.node());
}

// Loop(M, cond, v_initial..., captured...): body(i, cond, v..., captured...) -> (cond, v..., scan...).
class LoopKernel : public Kernel {
 public:
  // The counts fit (graph/subgraph.hpp's check, which the backend's support test runs).
  explicit LoopKernel(const Node& node)
      : body_(node, "body"), captured_(captured_count(node)), carried_(node.inputs.size() - 2 - captured_) {}

  void run(KernelContext& ctx) const override {
    const std::size_t n = carried_, scans = body_.output_count() - 1 - n;
    std::optional<std::int64_t> trips;
    if (ctx.has_input(0)) trips = one_int64(ctx.input(0), ctx, "M");
    const bool has_cond = ctx.has_input(1);
    bool cond = has_cond ? one_bool(ctx.input(1), ctx, "cond") : true;
    std::vector<Tensor> args(2 + n + captured_);
    for (std::size_t i = 0; i < n; ++i) args[2 + i] = ctx.input(2 + i);
    for (std::size_t j = 0; j < captured_; ++j) args[2 + n + j] = ctx.input(2 + n + j);
    std::vector<ScanOutput> stacked;
    for (std::size_t j = 0; j < scans; ++j)
      stacked.emplace_back("scan output " + std::to_string(j), body_.output_dtype(1 + n + j));
    std::int64_t elements = 0;
    std::int64_t i = 0;
    for (; (!trips || i < *trips) && cond; ++i) {
      count_iteration(i, body_, ctx);
      args[0] = Tensor::scalar<std::int64_t>(i);
      args[1] = Tensor::scalar<bool>(cond);
      std::vector<Tensor> outs = body_.run(args);
      // Without a cond input the body's condition is computed but not obeyed.
      if (has_cond) cond = one_bool(outs[0], ctx, "the body's condition");
      for (std::size_t c = 0; c < n; ++c) args[2 + c] = std::move(outs[1 + c]);
      for (std::size_t j = 0; j < scans; ++j) stacked[j].add(std::move(outs[1 + n + j]), ctx, elements);
    }
    // After no iteration the carried values are the inputs themselves: copies, not views.
    for (std::size_t c = 0; c < n; ++c)
      if (ctx.wants_output(c)) ctx.set_output(c, i == 0 ? args[2 + c].clone() : args[2 + c]);
    for (std::size_t j = 0; j < scans; ++j)
      if (ctx.wants_output(n + j)) stacked[j].emit(ctx, n + j, 0, false);
  }

  std::vector<const Session*> body_sessions() const override { return {&body_.session()}; }

 private:
  Body body_;
  std::size_t captured_ = 0, carried_ = 0;
};

// Scan(states..., scan_inputs..., captured...): body(states..., slices..., captured...) ->
// (states..., scan slices...). Opset 8's form has a batch axis 0 over which the whole scan repeats.
class ScanKernel : public Kernel {
 public:
  ScanKernel(const Node& node, std::int64_t opset)
      : body_(node, "body"), captured_(captured_count(node)), batched_(opset < 9) {
    // The counts fit (graph/subgraph.hpp's check, which the backend's support test runs).
    scan_inputs_ = static_cast<std::size_t>(node.attr_int("num_scan_inputs", 1));
    states_ = node.inputs.size() - captured_ - (batched_ ? 1 : 0) - scan_inputs_;
    const std::size_t scans = body_.output_count() - states_;
    in_axes_ = node.attr_ints("scan_input_axes", std::vector<std::int64_t>(scan_inputs_, 0));
    in_reverse_ = node.attr_ints(batched_ ? "directions" : "scan_input_directions", std::vector<std::int64_t>(scan_inputs_, 0));
    out_axes_ = node.attr_ints("scan_output_axes", std::vector<std::int64_t>(scans, 0));
    out_reverse_ = node.attr_ints("scan_output_directions", std::vector<std::int64_t>(scans, 0));
    if (in_axes_.size() != scan_inputs_ || in_reverse_.size() != scan_inputs_ || out_axes_.size() != scans ||
        out_reverse_.size() != scans)
      throw Error(ErrorCode::InvalidModel, node_label(node) + "its axes and directions need one entry per scan input or output");
  }

  void run(KernelContext& ctx) const override {
    const std::size_t first = batched_ ? 1 : 0;
    std::vector<Tensor> states, inputs, captured;
    for (std::size_t i = 0; i < states_; ++i) states.push_back(ctx.input(first + i));
    for (std::size_t j = 0; j < scan_inputs_; ++j) inputs.push_back(ctx.input(first + states_ + j));
    for (std::size_t k = 0; k < captured_; ++k) captured.push_back(ctx.input(first + states_ + scan_inputs_ + k));
    const std::size_t scans = body_.output_count() - states_;
    std::int64_t elements = 0;
    if (!batched_) {
      std::vector<ScanOutput> stacked = scan_outputs(scans);
      std::int64_t iterations = 0;
      states = scan(ctx, states, inputs, captured, stacked, elements, iterations);
      for (std::size_t i = 0; i < states_; ++i)
        if (ctx.wants_output(i)) ctx.set_output(i, iterations == 0 ? states[i].clone() : states[i]);
      for (std::size_t j = 0; j < scans; ++j)
        if (ctx.wants_output(states_ + j)) stacked[j].emit(ctx, states_ + j, out_axes_[j], out_reverse_[j] != 0);
      return;
    }
    // Opset 8: every input has the batch axis 0; each batch item is scanned along its axis 0.
    const std::int64_t batch = inputs.front().rank() > 0 ? inputs.front().shape()[0] : 0;
    std::vector<ScanOutput> final_states = scan_outputs(states_), stacked = scan_outputs(scans);
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> s_b, in_b;
      for (const Tensor& s : states) s_b.push_back(batch_item(s, b, ctx, "initial state"));
      for (const Tensor& x : inputs) in_b.push_back(batch_item(x, b, ctx, "scan input"));
      std::vector<ScanOutput> per_item = scan_outputs(scans);
      std::int64_t iterations = 0, item_elements = 0;
      s_b = scan(ctx, s_b, in_b, captured, per_item, item_elements, iterations);
      for (std::size_t i = 0; i < states_; ++i) final_states[i].add(s_b[i], ctx, elements);
      for (std::size_t j = 0; j < scans; ++j) {
        Tensor item = per_item[j].stacked(ctx, out_reverse_[j] != 0);
        stacked[j].add(std::move(item), ctx, elements);
      }
    }
    for (std::size_t i = 0; i < states_; ++i)
      if (ctx.wants_output(i)) final_states[i].emit(ctx, i, 0, false);
    for (std::size_t j = 0; j < scans; ++j)
      if (ctx.wants_output(states_ + j)) stacked[j].emit(ctx, states_ + j, 0, false);
  }
  std::vector<const Session*> body_sessions() const override { return {&body_.session()}; }

 private:
  std::vector<ScanOutput> scan_outputs(std::size_t count) const {
    std::vector<ScanOutput> out;
    for (std::size_t j = 0; j < count; ++j)
      out.emplace_back("scan output " + std::to_string(j), body_.output_dtype(body_.output_count() - count + j));
    return out;
  }

  static Tensor batch_item(const Tensor& t, std::int64_t b, const KernelContext& ctx, const char* what) {
    if (t.rank() < 1 || t.shape()[0] <= b)
      ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " " + shape_to_string(t.shape()) + " has no batch item " +
                                               std::to_string(b));
    return reference::slab(t, 0, b, 1, false);
  }

  // One scan over `inputs` (each along its axis); returns the final states.
  std::vector<Tensor> scan(KernelContext& ctx, std::vector<Tensor> states, const std::vector<Tensor>& inputs,
                           const std::vector<Tensor>& captured, std::vector<ScanOutput>& stacked, std::int64_t& elements,
                           std::int64_t& iterations) const {
    std::vector<int> axes;
    std::int64_t len = -1;
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      const int rank = inputs[j].rank();
      const std::int64_t a = batched_ ? 0 : in_axes_[j];
      if (a < -rank || a >= rank)
        ctx.fail(ErrorCode::InvalidArgument, "scan input " + std::to_string(j) + " " + shape_to_string(inputs[j].shape()) +
                                                 " has no axis " + std::to_string(a));
      axes.push_back(static_cast<int>(a < 0 ? a + rank : a));
      const std::int64_t l = inputs[j].shape()[static_cast<std::size_t>(axes.back())];
      if (len >= 0 && l != len)
        ctx.fail(ErrorCode::InvalidArgument, "scan inputs have lengths " + std::to_string(len) + " and " + std::to_string(l));
      len = l;
    }
    std::vector<Tensor> args(states_ + scan_inputs_ + captured_);
    for (std::size_t k = 0; k < captured_; ++k) args[states_ + scan_inputs_ + k] = captured[k];
    for (std::int64_t t = 0; t < len; ++t, ++iterations) {
      count_iteration(t, body_, ctx);
      for (std::size_t i = 0; i < states_; ++i) args[i] = states[i];
      for (std::size_t j = 0; j < scan_inputs_; ++j)
        args[states_ + j] = reference::slab(inputs[j], axes[j], in_reverse_[j] != 0 ? len - 1 - t : t, 1, false);
      std::vector<Tensor> outs = body_.run(args);
      for (std::size_t i = 0; i < states_; ++i) states[i] = std::move(outs[i]);
      for (std::size_t j = 0; j < stacked.size(); ++j) stacked[j].add(std::move(outs[states_ + j]), ctx, elements);
    }
    return states;
  }

  Body body_;
  std::size_t captured_ = 0, states_ = 0, scan_inputs_ = 0;
  bool batched_ = false;
  std::vector<std::int64_t> in_axes_, in_reverse_, out_axes_, out_reverse_;
};

// SequenceMap(sequence, more...): the body once per element of the sequence, given the element
// (and the same element of each other sequence input; tensor inputs whole); each body output
// collects into an output sequence.
class SequenceMapKernel : public Kernel {
 public:
  explicit SequenceMapKernel(const Node& node) : body_(node, "body"), captured_(captured_count(node)) {}

  void run(KernelContext& ctx) const override {
    const std::size_t own = ctx.num_inputs() - captured_;
    const Tensor& first = ctx.input(0);
    if (!first.is_sequence()) ctx.fail(ErrorCode::InvalidArgument, "input 0 must be a sequence");
    const std::size_t len = first.elements().size();
    for (std::size_t i = 1; i < own; ++i)
      if (ctx.input(i).is_sequence() && ctx.input(i).elements().size() != len)
        ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " has " + std::to_string(ctx.input(i).elements().size()) +
                                                 " elements, input 0 " + std::to_string(len));
    std::vector<std::vector<Tensor>> collected(body_.output_count());
    std::vector<Tensor> args(ctx.num_inputs());
    for (std::size_t k = own; k < ctx.num_inputs(); ++k) args[k] = ctx.input(k);
    for (std::size_t e = 0; e < len; ++e) {
      count_iteration(static_cast<std::int64_t>(e), body_, ctx);
      for (std::size_t i = 0; i < own; ++i) args[i] = ctx.input(i).is_sequence() ? ctx.input(i).elements()[e] : ctx.input(i);
      std::vector<Tensor> outs = body_.run(args);
      for (std::size_t o = 0; o < outs.size(); ++o) collected[o].push_back(std::move(outs[o]));
    }
    for (std::size_t o = 0; o < collected.size(); ++o) {
      const DType element = collected[o].empty() ? body_.output_dtype(o) : collected[o].front().dtype();
      if (ctx.wants_output(o))
        ctx.set_output(o, Tensor::sequence(std::move(collected[o]), element == DType::Undefined ? DType::Float32 : element));
    }
  }

  std::vector<const Session*> body_sessions() const override { return {&body_.session()}; }

 private:
  Body body_;
  std::size_t captured_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> prepare_sequence_map(const Node& node) { return std::make_unique<SequenceMapKernel>(node); }

std::unique_ptr<Kernel> prepare_loop(const Node& node) { return std::make_unique<LoopKernel>(node); }
std::unique_ptr<Kernel> prepare_scan(const Node& node, std::int64_t opset) {
  return std::make_unique<ScanKernel>(node, opset);
}

}  // namespace wpk
