#pragma once
// A kernel made of other kernels: a small graph's nodes run one after another, each by a kernel a
// backend prepared for it, the values between them in scratch memory of the calling thread that
// later runs reuse. How a backend runs a com.wpk group (a depth-first group, say) as the ops it stands for, so
// that the group's own kernel competes with the parts' kernels for the node.
#include <memory>
#include <vector>

#include "backends/kernel.hpp"

namespace wpk {

class CompositeKernel : public Kernel {
 public:
  // One kernel or more per part: the first that runs a part's inputs (Kernel::runs) runs it.
  using Alternatives = std::vector<std::unique_ptr<Kernel>>;
  // `node_inputs`: the values of `graph` that the node's inputs are, in order (kNoValue where the
  // node omits one); parts[i] runs graph.nodes()[i], and the last node writes the node's output.
  CompositeKernel(Graph graph, std::vector<ValueId> node_inputs, std::vector<Alternatives> parts, KernelProfile profile);
  void run(KernelContext& ctx) const override;
  KernelProfile profile() const override { return profile_; }
  // A constant input every kernel that reads it keeps its own copy of (packed weights): the
  // composite's graph drops it, and the session may free it too.
  bool owns_input(std::size_t i) const override { return i < owned_.size() && owned_[i]; }

 private:
  Graph graph_;
  std::vector<ValueId> node_inputs_;
  std::vector<Alternatives> parts_;
  KernelProfile profile_;
  std::vector<bool> owned_;  // per node input
  // Per part: the scratch slot its output takes (reused once every reader of a slot's value has
  // run, so a long chain cycles through a few buffers that stay in cache), and the values it is
  // the last reader of.
  std::vector<std::size_t> slot_;
  std::vector<std::vector<ValueId>> last_reads_;
};

}  // namespace wpk
