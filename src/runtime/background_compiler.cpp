#include "runtime/background_compiler.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/logging.hpp"

namespace wpk {
namespace {

// Linux keeps a nice value per thread, and a child process starts with its parent thread's.
void lower_this_threads_priority() {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  if (setpriority(PRIO_PROCESS, tid, 19) != 0) logger().debug("background compiling: could not lower its priority");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

BackgroundCompiler::BackgroundCompiler(ExecutionPlan& plan, codegen::KernelStore& store, int parallel,
                                       std::function<void()> on_ready)
    : plan_(plan), store_(store), parallel_(parallel), on_ready_(std::move(on_ready)), start_(std::chrono::steady_clock::now()) {
  status_.kernels = static_cast<int>(plan.awaiting_code().size());
  status_.finished = status_.kernels == 0;
  if (status_.finished) return;
  serving_ = true;
  thread_ = std::thread([this] { serve(); });
}

BackgroundCompiler::~BackgroundCompiler() {
  // No run (so no want_more) outlives the session that owns this: the thread is not replaced now.
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

void BackgroundCompiler::want_more() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancel_) return;
  ++wanted_;
  ++status_.kernels;
  status_.finished = false;
  if (serving_) return;  // the serving thread sees wanted_ move before it stops
  // A thread that ran out of work has stopped, or is about to return without the lock.
  if (thread_.joinable()) thread_.join();
  serving_ = true;
  thread_ = std::thread([this] { serve(); });
}

void BackgroundCompiler::serve() {
  lower_this_threads_priority();
  for (;;) {
    std::uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = wanted_;
    }
    compile_batch();
    std::lock_guard<std::mutex> lock(mutex_);
    if (wanted_ == seen || cancel_) {
      serving_ = false;
      status_.finished = true;
      status_.seconds = seconds_since(start_);
      finished_.notify_all();
      return;
    }
  }
}

void BackgroundCompiler::compile_batch() {
  std::vector<std::pair<std::size_t, std::size_t>> awaiting;
  for (const auto& c : plan_.awaiting_code())
    if (std::find(tried_.begin(), tried_.end(), c) == tried_.end()) awaiting.push_back(c);
  tried_.insert(tried_.end(), awaiting.begin(), awaiting.end());
  if (awaiting.empty()) return;
  if (!store_.compiler().usable()) {
    // A machine without a compiler: said once a process, not at every load.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      logger().info("generated kernels are not compiled after load: {}", store_.compiler().why_unusable);
    std::lock_guard<std::mutex> lock(mutex_);
    status_.failed += static_cast<int>(awaiting.size());
    return;
  }
  // One source per awaiting kernel (the plan printed each before it let the kernel await; nodes
  // of one shape and config print the same source, which the store compiles once).
  std::vector<codegen::KernelSource> sources;
  for (const auto& [step, candidate] : awaiting) {
    sources.push_back(*plan_.steps()[step].candidates[candidate].kernel->source());
    logger().debug("compiling {} in the background (step {})", sources.back().name, step);
  }
  std::vector<codegen::Obtained> got;
  try {
    codegen::CompileStop stop;
    stop.cancel = &cancel_;
    got = store_.obtain(sources, parallel_, true, stop);
  } catch (const std::exception& e) {
    logger().warn("compiling generated kernels in the background failed: {}", e.what());
    got.assign(sources.size(), {});
  }
  int ready = 0, failed = 0;
  std::string first_failure;
  for (std::size_t a = 0; a < awaiting.size(); ++a) {
    if (!got[a].kernel) {
      ++failed;
      if (first_failure.empty()) first_failure = got[a].why.substr(0, got[a].why.find('\n'));
      continue;
    }
    plan_.attach_code(awaiting[a].first, awaiting[a].second, got[a].kernel);
    ++ready;
  }
  if (ready > 0 && !cancel_) on_ready_();
  if (failed > 0 && !cancel_)
    logger().warn("{} of {} generated kernels could not be compiled in the background, their nodes keep the kernels "
                  "they run: {}",
                  failed, awaiting.size(), first_failure);
  logger().info("background compiling: {} generated kernels ready in {:.1f} s", ready, seconds_since(start_));
  std::lock_guard<std::mutex> lock(mutex_);
  status_.ready += ready;
  status_.failed += failed;
}

BackgroundCompilation BackgroundCompiler::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  BackgroundCompilation s = status_;
  if (!s.finished) s.seconds = seconds_since(start_);
  return s;
}

BackgroundCompilation BackgroundCompiler::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return status_.finished; });
  return status_;
}

}  // namespace wpk
