// Session's batch parts (runtime/batch_parts.hpp): running a batch as parts at once, and tuning
// at load's choice between that and the whole batch.
#include <chrono>
#include <exception>

#include "runtime/input_check.hpp"
#include "runtime/logging.hpp"
#include "runtime/measurement.hpp"
#include "runtime/run_pool.hpp"
#include "runtime/threads.hpp"
#include "runtime/session_impl.hpp"

namespace wpk {

namespace {

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : tensors) out.push_back(&t);
  return out;
}

// The comparison's length: pairs of whole runs, one each way, after a pair to warm up. The
// machines this runs on drift by several percent within seconds, which a median of each way
// alone does not cancel: the choice is made on the median of the pairs' ratios.
constexpr int kMinRuns = 5, kMaxRuns = 31;
constexpr double kComparisonSeconds = 10;

}  // namespace

std::vector<Tensor> Session::run_in_parts(const std::vector<const Tensor*>& inputs, int parts, const RunOptions* options,
                                          RunProfile* profile, double checks_us, double queued_us) const {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<Tensor>> views(static_cast<std::size_t>(parts)), outputs(views.size());
  for (int p = 0; p < parts; ++p) views[static_cast<std::size_t>(p)] = batch_part(inputs, p, parts);
  std::vector<std::exception_ptr> errors(views.size());
  const bool profiling = profile || impl_->options.profile;
  RunProfile first;
  // The session's CPUs are held: one part a thread of this runner's OpenMP team, each running
  // its nodes on that thread alone.
  note_step_cpus(parts);
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int p = 0; p < parts; ++p) {
    const RunPool::HeldCpusScope held;
    const auto i = static_cast<std::size_t>(p);
    try {
      outputs[i] = run_checked(pointers(views[i]), options, p == 0 && profiling ? &first : nullptr, 0, 0, nullptr, true);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<Tensor> out = join_batch_parts(outputs);
  if (profiling) {
    first.total_us = checks_us + queued_us + us_since(t0);
    first.queued_us = queued_us;
    first.batch_parts = parts;
    if (profile) *profile = first;
    if (impl_->options.profile) {
      std::lock_guard<std::mutex> lock(impl_->profile_mutex);
      impl_->last_profile = first;
    }
  }
  return out;
}

void Session::tune_batch_parts(const TensorMap& inputs, std::chrono::steady_clock::time_point deadline) {
  Impl& im = *impl_;
  if (!im.rows_apart || !im.tuning_db) return;
  const std::vector<const Tensor*> bound = bind_run_inputs(im.graph, inputs);
  const int parts = possible_batch_parts(bound, im.threads);
  if (parts < 2) return;
  const ShapeSignature signature = shape_signature(bound);
  const std::string key = batch_parts_key(im.fingerprint, signature, im.threads);
  if (im.tuning_db->lookup(key)) return;  // a record answers, as for nodes
  if (std::chrono::steady_clock::now() >= deadline) {
    logger().info("tuning at load: no time left to try the batch in {} parts; it runs whole", parts);
    return;
  }
  // A part's nodes are tuned on one part alone, on one thread, as the whole batch's were.
  const std::vector<Tensor> part = batch_part(bound, 0, parts);
  im.part_tuner->start_measuring(deadline);
  try {
    run_checked(pointers(part), nullptr, nullptr, 0, 0, nullptr, true);
  } catch (...) {
    im.part_tuner->stop_measuring();
    throw;
  }
  im.part_tuner->stop_measuring();

  std::vector<double> whole_ms, parts_ms, ratios;
  const auto timed = [&](bool in_parts) {
    const auto t0 = std::chrono::steady_clock::now();
    if (in_parts) run_in_parts(bound, parts, nullptr, nullptr, 0, 0);
    else run_checked(bound, nullptr, nullptr, 0, 0);
    return us_since(t0) / 1000;
  };
  timed(false);
  timed(true);
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int>(whole_ms.size()) < kMaxRuns &&
         (static_cast<int>(whole_ms.size()) < kMinRuns || us_since(start) < kComparisonSeconds * 1e6)) {
    // Each way goes first in every other pair: a run may leave the caches warm for the next.
    const bool parts_first = whole_ms.size() % 2 == 1;
    const double first = timed(parts_first), second = timed(!parts_first);
    whole_ms.push_back(parts_first ? second : first);
    parts_ms.push_back(parts_first ? first : second);
    ratios.push_back(parts_ms.back() / whole_ms.back());
  }
  BatchPartsCheck& check = im.parts_check;
  check.parts = parts;
  check.runs = static_cast<int>(whole_ms.size());
  check.whole_ms = median(whole_ms);
  check.parts_ms = median(parts_ms);
  check.ratio = median(ratios);
  check.chosen = check.ratio < kMinGain;
  const int chosen = check.chosen ? parts : 1;
  im.tuning_db->store(key, record_batch_parts(chosen), (check.chosen ? check.parts_ms : check.whole_ms) * 1000,
                      "batch of " + std::to_string(bound.front()->shape()[0]) + " in " + std::to_string(parts) + " parts: " +
                          std::to_string(check.parts_ms) + " ms, whole: " + std::to_string(check.whole_ms) + " ms, ratio " +
                          std::to_string(check.ratio));
  {
    std::lock_guard<std::mutex> lock(im.parts_mutex);
    im.parts[signature] = chosen;
  }
  logger().info("tuning at load: the batch in {} parts, one a thread: {:.3f} ms, whole: {:.3f} ms ({} runs each, median "
                "ratio {:.3f}); {}",
                parts, check.parts_ms, check.whole_ms, check.runs, check.ratio, check.chosen ? "runs in parts" : "runs whole");
}

}  // namespace wpk
