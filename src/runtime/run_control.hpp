#pragma once
// The RunOptions (deadline, cancel flag) of the run executing on this thread. Session::run
// installs them on the runner thread for the run's duration; the executor checks them before each
// node, Loop and Scan at each iteration, and a control-flow body's run (on the same thread)
// answers to its enclosing run's options.
#include "wpk/graph.hpp"
#include "wpk/options.hpp"

namespace wpk {

class RunControlScope {
 public:
  // Null leaves the thread's current options (an enclosing run's) in place.
  explicit RunControlScope(const RunOptions* options);
  ~RunControlScope();
  RunControlScope(const RunControlScope&) = delete;
  RunControlScope& operator=(const RunControlScope&) = delete;

 private:
  const RunOptions* previous_;
  bool installed_;
};

// Throws Error(Cancelled), naming the node it reached, when the thread's run is past its deadline
// or its cancel flag is set; does nothing outside a run with options.
void check_run_control(const Node& node);
// The thread's run options; null outside a run given some.
const RunOptions* current_run_options();

}  // namespace wpk
