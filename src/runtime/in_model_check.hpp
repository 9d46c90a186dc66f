#pragma once
// The in-model check of tuning at load. The tuner times each node's candidates alone; inside the
// model a node also meets what its neighbours leave behind (a producer that splits its output
// across the cores otherwise than its consumer reads it, weights a larger packed copy pushed out
// of the cache), so a winner alone can lose in the model. The check runs the whole model on the
// tuned choices and on the untuned ones, alternately, with per-step timings, and keeps a tuned
// choice only where the model ran faster with it:
//   - each changed step's gain is its own time saved plus the time saved by the unchanged steps
//     that read its outputs (where a cache effect lands); steps sharing a tuning record are
//     decided together, as the record is one; the configurations that measured next fastest
//     alone (runners-up) run in plans of their own, and a record takes whichever of its options
//     saves most in the model; each saving is the median over rounds of what one round's two
//     runs differ by (a machine slower for a while slows both runs of a round);
//   - then the plan with the kept choices runs against the untuned one again, alternately; unless
//     the median of its runs' times over the untuned runs' of the same rounds is at most
//     accepted_ratio, it drops the record that saved least and runs again (a few times), and then
//     keeps none. The margin keeps a plan whose gain is within the machine's noise from being
//     stored: a record outlives the session, the noise that made it look faster does not.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "runtime/execution_plan.hpp"
#include "wpk/session.hpp"

namespace wpk {

struct PlannedChange {
  std::size_t step;
  StepChoice untuned;
  std::string record;                   // steps with the same record are settled together
  std::string node;                     // for the log
  std::vector<StepChoice> runners_up;   // tried too, where the tuned choice loses in the model
};

struct InModelCheckLimits {
  int min_pairs = 8;          // alternating runs of each plan, whatever the time
  int max_pairs = 25;
  double seconds = 4.0;       // per phase: no new pair after this
  int back_offs = 3;          // kept plans tried without their weakest record before keeping none
  double accepted_ratio = 0.99;  // the kept plan's time over the untuned one's, paired by round
};

struct InModelCheckResult {
  std::vector<bool> keep;                // per change: the tuned choice or a runner-up stays
  std::vector<StepChoice> choice;        // per change: what stays (the untuned choice where !keep)
  std::vector<double> step_us;           // per change: its step's median time on that choice
  int pairs = 0;               // runs of each plan in the final comparison
  double tuned_ms = 0;         // median run, every tuned choice
  double untuned_ms = 0;       // median run, no tuned choice (the final comparison's)
  double kept_ms = 0;          // median run, the kept choices (== untuned_ms when none is kept)
  double ratio = 1;            // the kept plan's paired ratio to the untuned one (1 when none is kept)
};

// Runs the model once on the given per-step choices and returns its profile (one StepProfile per
// plan step, in step order; total_us the run).
using PlanRunner = std::function<RunProfile(const std::vector<StepChoice>&)>;

// consumers[s]: the steps reading an output of step s.
InModelCheckResult check_in_model(const std::vector<StepChoice>& tuned, const std::vector<PlannedChange>& changes,
                                  const std::vector<std::vector<std::size_t>>& consumers, const PlanRunner& run,
                                  InModelCheckLimits limits = {});

// The steps reading each step's outputs.
std::vector<std::vector<std::size_t>> step_consumers(const Graph& graph, const ExecutionPlan& plan);

}  // namespace wpk
