#pragma once
// Generated kernels compiled after load. A session that does not tune takes no compiler's time
// at load: where the cost model ranks first a generated kernel the kernel store lacks, the node
// starts on its best library or hand-written kernel, and the generated one is prepared beside it
// awaiting its code (PlanOptions::compile_later). This compiles those kernels on a thread of its
// own, at the lowest CPU priority (the compilers it starts inherit it, so runs keep the cores),
// gives each its code (ExecutionPlan::attach_code) and tells the session, which then chooses its
// steps' kernels again (SessionOptions::compile_in_background). The kernels go into the kernel
// store: later sessions have them at load. A node's large-batch alternative waits until a run's
// shapes rank it first (Candidate::code_wanted); want_more() then hands it to the same thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "codegen/jit/kernel_store.hpp"
#include "runtime/execution_plan.hpp"
#include "wpk/session.hpp"

namespace wpk {

class BackgroundCompiler {
 public:
  // Starts compiling the plan's awaiting candidates (nothing to do: no thread yet) with at most
  // `parallel` compilers at once; `on_ready` is called on that thread once the kernels that
  // compiled have their code. The plan and the store must outlive this object.
  BackgroundCompiler(ExecutionPlan& plan, codegen::KernelStore& store, int parallel, std::function<void()> on_ready);
  // Stops the compilers still running (their kernels stay awaiting, and are compiled again by a
  // later session) and waits for the thread.
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  // One more candidate became wanted (ExecutionPlan::want_code returned true): it is compiled
  // after those before it.
  void want_more();
  BackgroundCompilation status() const;
  BackgroundCompilation wait() const;

 private:
  void serve();
  // Compiles the awaiting candidates not tried yet; their counts go into status_.
  void compile_batch();

  ExecutionPlan& plan_;
  codegen::KernelStore& store_;
  const int parallel_;
  const std::function<void()> on_ready_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  BackgroundCompilation status_;
  std::uint64_t wanted_ = 0;  // want_more() calls, under mutex_
  bool serving_ = false;      // a thread is compiling, under mutex_; it stops when no work is left
  std::vector<std::pair<std::size_t, std::size_t>> tried_;  // the serving thread's own
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace wpk
