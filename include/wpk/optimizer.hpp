#pragma once
// wpk::Optimizer — rewrites a Graph into an equivalent, faster one. Each pass is Graph → Graph,
// has a stable name, and can be switched off by that name in OptimizerOptions.
#include <string>
#include <vector>

#include "wpk/graph.hpp"
#include "wpk/options.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

class Optimizer {
 public:
  explicit Optimizer(OptimizerOptions options = {});
  // Names of the passes that would run, in order.
  std::vector<std::string> pass_names() const;
  // Every pass wpk has, whatever the level.
  static std::vector<std::string> all_pass_names();
  Graph optimize(Graph graph) const;

 private:
  OptimizerOptions options_;
};

}  // namespace wpk

#pragma GCC visibility pop
