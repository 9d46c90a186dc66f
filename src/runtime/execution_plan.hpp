#pragma once
// ExecutionPlan: the graph compiled into ordered steps, each with the kernel its backend
// prepared, plus value lifetimes so intermediates are released as soon as nothing reads them.
#include <memory>
#include <vector>

#include "backends/kernel.hpp"

namespace wpk {

struct PlanStep {
  std::size_t node_index;
  const Backend* backend;
  std::unique_ptr<Kernel> kernel;
  std::vector<ValueId> release_after;  // values whose last reader is this step
};

class ExecutionPlan {
 public:
  // Asks the backends, in order of preference, for each node; throws Unsupported listing every
  // op no backend runs.
  ExecutionPlan(const Graph& graph, const std::vector<const Backend*>& backends);
  const std::vector<PlanStep>& steps() const { return steps_; }

 private:
  std::vector<PlanStep> steps_;
};

// The backends this build registers, in order of preference (explicit, no static registration).
std::vector<const Backend*> registered_backends();

// Why no backend runs `node`, or "" when one does.
std::string why_unsupported(const Node& node, const Graph& graph);

}  // namespace wpk
