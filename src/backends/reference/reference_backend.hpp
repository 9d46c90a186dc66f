#pragma once
// The reference backend: every op wpk supports, written for clarity with Eigen where it helps.
// It is the correctness oracle every faster backend is tested against.
#include "backends/kernel.hpp"

namespace wpk::reference {

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  // reference_profile(node): never a description, so calibration never learns the reference.
  KernelProfile undescribed_profile(const Node& node) const override;
};

// What the cost model knows of the reference kernels: scalar loops over generic index
// arithmetic (NHWC ops through transposes), far from a vector unit's peak even where an op is
// memory-bound. With the default profile such an op's prediction came close to a vectorised
// kernel's, and a calibration from tuning records could rank the reference first: this keeps
// it behind an undescribed candidate by more than calibration's largest factor (8).
KernelProfile reference_profile();
// The same for one node: element-wise ops (elementwise.cpp, binary.cpp) are one scalar loop,
// on tensors of a few hundred elements faster than a library's call.
KernelProfile reference_profile(const Node& node);

}  // namespace wpk::reference
