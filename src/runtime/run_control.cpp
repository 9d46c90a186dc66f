#include "runtime/run_control.hpp"

#include "backends/kernel.hpp"
#include "wpk/error.hpp"

namespace wpk {
namespace {
thread_local const RunOptions* t_options = nullptr;
}  // namespace

RunControlScope::RunControlScope(const RunOptions* options) : previous_(t_options), installed_(options != nullptr) {
  if (installed_) t_options = options;
}

RunControlScope::~RunControlScope() {
  if (installed_) t_options = previous_;
}

void check_run_control(const Node& node) {
  const RunOptions* o = t_options;
  if (!o) return;
  if (o->cancel && o->cancel->load(std::memory_order_relaxed))
    throw Error(ErrorCode::Cancelled, node_label(node) + "the run was cancelled");
  if (o->deadline != std::chrono::steady_clock::time_point::max() && std::chrono::steady_clock::now() >= o->deadline)
    throw Error(ErrorCode::Cancelled, node_label(node) + "the run passed its deadline");
}

const RunOptions* current_run_options() { return t_options; }

}  // namespace wpk
