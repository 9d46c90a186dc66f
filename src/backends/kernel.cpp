#include "backends/kernel.hpp"

namespace wpk {

std::string node_label(const Node& node) { return "node '" + node.name + "' (" + node.op_type + "): "; }

const Tensor* constant_input(const Node& node, const Graph& graph, std::size_t i) {
  return i < node.inputs.size() && node.inputs[i] != kNoValue ? graph.initializer(node.inputs[i]) : nullptr;
}

KernelContext::KernelContext(const Node& node, std::vector<const Tensor*> inputs, Allocator allocator)
    : node_(node), owned_inputs_(std::move(inputs)), inputs_(owned_inputs_.data()), num_inputs_(owned_inputs_.size()),
      owned_outputs_(node.outputs.size()), outputs_(&owned_outputs_), allocator_(std::move(allocator)) {}

KernelContext::KernelContext(const Node& node, const Tensor* const* inputs, std::size_t count, std::vector<Tensor>& outputs)
    : node_(node), inputs_(inputs), num_inputs_(count), outputs_(&outputs) {
  outputs.clear();
  outputs.resize(node.outputs.size());
}

const Tensor& KernelContext::input(std::size_t i) const {
  if (!has_input(i)) fail(ErrorCode::InvalidModel, "required input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

Tensor& KernelContext::allocate_output(std::size_t i, DType dtype, const Shape& shape) {
  if (i >= outputs_->size()) fail(ErrorCode::InvalidModel, "has no output " + std::to_string(i));
  if (!within_limits(shape, limits_, dtype)) {  // the message only when it is needed
    const std::string where = node_label(node_) + "output " + std::to_string(i) + ": ";
    check_rank(shape.size(), limits_, where);
    check_elements(shape, limits_, where, dtype);
  }
  try {
    (*outputs_)[i] = output_allocator_ ? output_allocator_(i, dtype, shape)
                 : allocator_ ? allocator_(dtype, shape) : Tensor::zeros(dtype, shape);
  } catch (const Error& e) {
    fail(e.code(), "output " + std::to_string(i) + ": " + e.what());
  }
  return (*outputs_)[i];
}

void KernelContext::set_output(std::size_t i, Tensor t) {
  if (i >= outputs_->size()) fail(ErrorCode::InvalidModel, "has no output " + std::to_string(i));
  (*outputs_)[i] = std::move(t);
}

bool KernelContext::wants_output(std::size_t i) const {
  return i < node_.outputs.size() && node_.outputs[i] != kNoValue;
}

void KernelContext::fail(ErrorCode code, const std::string& what) const {
  throw Error(code, node_label(node_) + what);
}

}  // namespace wpk
