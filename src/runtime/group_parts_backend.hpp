#pragma once
// The "parts" backend: a depth-first group (graph/group_parts.hpp) run as the ops it stands for,
// one after the other, each on the kernel the cost model ranks first for it among the session's
// other backends, the values between them in the calling thread's scratch (CompositeKernel).
// It makes forming a group free: where no kernel of the whole group wins, the group runs as
// its parts would have without it. Generated kernels and the reference are left out of the
// parts (compiling is for tuning; a group whose part only the reference runs is the reference's).
//
// registered_backends() lists an unbound one, for names, `wpk info` and cache keys; each plan
// binds its own copy to the session's backends, disabled kernels, threads and calibration.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "runtime/cost_calibration.hpp"

namespace wpk {

class GroupPartsBackend : public Backend {
 public:
  // Over `backends` (itself and control flow skipped), with no kernels disabled and the
  // machine's threads: the registry's.
  GroupPartsBackend() = default;
  GroupPartsBackend(std::vector<const Backend*> backends, std::vector<std::string> disabled, int threads,
                    const CostCalibration* calibration);

  std::string name() const override { return "parts"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  // The sum of the parts' predictions (KernelProfile::predicted_seconds).
  std::optional<KernelProfile> describe(const Node& node, const Graph& graph, const std::string& config,
                                        const InputShapes& shapes, int threads) const override;
  // As the prepared kernel of the group's last part does (false before it is prepared).
  bool accumulates_into_residual(const Node& node, const std::string& config) const override;

 private:
  struct Choice {
    const Backend* backend = nullptr;
    std::string config;
    std::string label;  // "onednn(algorithm=direct)", "cpu:f32_row_broadcast"
    double seconds = 0;
  };
  // A part's candidates, the cost model's best first; empty with `why` when none runs it.
  std::vector<Choice> ranked(const Node& part, const Graph& parts, const InputShapes& shapes, int threads,
                             std::string& why) const;
  std::vector<const Backend*> part_backends() const;

  std::vector<const Backend*> backends_;  // empty: the registered ones
  std::vector<std::string> disabled_;
  int threads_ = 0;  // 0: the machine's
  const CostCalibration* calibration_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::map<std::string, bool> accumulates_;  // by node name, once prepared
};

}  // namespace wpk
