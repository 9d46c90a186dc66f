#include "runtime/background_compiler.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>

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
    : start_(std::chrono::steady_clock::now()) {
  status_.kernels = static_cast<int>(plan.awaiting_code().size());
  status_.finished = status_.kernels == 0;
  if (status_.finished) return;
  thread_ = std::thread([this, &plan, &store, parallel, on_ready = std::move(on_ready)] {
    compile(plan, store, parallel, on_ready);
  });
}

BackgroundCompiler::~BackgroundCompiler() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

void BackgroundCompiler::compile(ExecutionPlan& plan, codegen::KernelStore& store, int parallel,
                                 const std::function<void()>& on_ready) {
  if (!store.compiler().usable()) {
    // A machine without a compiler: said once a process, not at every load.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      logger().info("generated kernels are not compiled after load: {}", store.compiler().why_unusable);
    std::lock_guard<std::mutex> lock(mutex_);
    status_.failed = status_.kernels;
    status_.finished = true;
    status_.seconds = seconds_since(start_);
    finished_.notify_all();
    return;
  }
  lower_this_threads_priority();
  const std::vector<std::pair<std::size_t, std::size_t>> awaiting = plan.awaiting_code();
  // Nodes of one shape and config print one source: each is compiled once (the store also
  // folds equal sources of one batch, but this keeps the batch small).
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, std::size_t> index_of_name;
  std::vector<std::size_t> source_of(awaiting.size());
  int unprintable = 0;
  for (std::size_t a = 0; a < awaiting.size(); ++a) {
    const Candidate& c = plan.steps()[awaiting[a].first].candidates[awaiting[a].second];
    const codegen::KernelSource* source = nullptr;
    try {
      source = c.kernel->source();
    } catch (const std::exception&) {
    }
    if (!source) {
      source_of[a] = SIZE_MAX;
      ++unprintable;
      continue;
    }
    const auto [it, fresh] = index_of_name.emplace(source->name + "\n" + source->source, sources.size());
    if (fresh) sources.push_back(*source);
    source_of[a] = it->second;
  }
  std::vector<codegen::Obtained> got;
  try {
    got = store.obtain(sources, parallel, true, &cancel_);
  } catch (const std::exception& e) {
    logger().warn("compiling generated kernels in the background failed: {}", e.what());
    got.assign(sources.size(), {});
  }
  int ready = 0, failed = unprintable;
  std::string first_failure;
  for (std::size_t a = 0; a < awaiting.size(); ++a) {
    if (source_of[a] == SIZE_MAX) continue;
    const codegen::Obtained& o = got[source_of[a]];
    if (!o.kernel) {
      ++failed;
      if (first_failure.empty()) first_failure = o.why.substr(0, o.why.find('\n'));
      continue;
    }
    plan.attach_code(awaiting[a].first, awaiting[a].second, o.kernel);
    ++ready;
  }
  if (ready > 0 && !cancel_) on_ready();
  if (failed > 0 && !cancel_)
    logger().warn("{} of {} generated kernels could not be compiled in the background, their nodes keep the kernels "
                  "they run: {}",
                  failed, awaiting.size(), first_failure);
  logger().info("background compiling: {} generated kernels ready in {:.1f} s", ready, seconds_since(start_));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_.ready = ready;
    status_.failed = failed;
    status_.finished = true;
    status_.seconds = seconds_since(start_);
  }
  finished_.notify_all();
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
