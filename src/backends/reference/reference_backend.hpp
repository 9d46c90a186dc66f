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
};

}  // namespace wpk::reference
