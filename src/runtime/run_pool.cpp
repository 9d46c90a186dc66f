#include "runtime/run_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <exception>

#include "runtime/threads.hpp"

namespace wpk {

namespace {

thread_local bool on_runner_thread = false;

// How long a runner that waits for the next run, or a caller that waits for a run expected to be
// this short, polls before it sleeps on its condition variable. Waking a sleeping thread costs a
// futex call on each side and a trip through the scheduler, which on a virtual machine is tens of
// microseconds: as much as a small model's whole run, and every iteration of a serving loop
// pays it twice. Polling yields the CPU between checks, so a thread with work to do is not held
// up by it.
//
// A caller whose run takes longer sleeps at once. Each yield moves the yielding thread behind
// every other runnable thread of its CPU (Linux's EEVDF scheduler pushes its deadline a whole
// slice per yield), so a caller that polls while the run's threads hold both CPUs of a two-core
// machine can find itself queued behind a thread that never yields, such as an OpenMP worker
// spinning at the end of a parallel region, until the scheduler's next tick: 4 ms after every
// run, in some processes, for a model that runs in 0.5 ms.
constexpr auto kPollBeforeSleeping = std::chrono::microseconds(100);

// Polls `ready` until it holds or kPollBeforeSleeping has passed; returns its last answer.
template <typename Ready>
bool poll_briefly(const Ready& ready) {
  const auto until = std::chrono::steady_clock::now() + kPollBeforeSleeping;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

std::atomic<RunPool*> process_pool{nullptr};

// A child of fork() has none of its parent's runner threads: it makes a pool of its own when it
// first runs a model (most children exec at once, and a fork handler must not start threads).
// The parent's pool object is left behind (its mutex may have been held at the fork).
void forget_pool_after_fork() { process_pool.store(nullptr); }

}  // namespace

struct RunPool::Work {
  int cpus = 1;
  const std::function<void()>* body = nullptr;
  // Set under the pool's lock, as the runner's last touch of the work unless `sleeping`: a caller
  // that polls it needs no lock to see it, and may then drop the work at once.
  std::atomic<bool> done{false};
  bool sleeping = false;  // under the lock: the caller waits on `finished` and must be notified
  std::exception_ptr error;
  std::condition_variable finished;
};

struct RunPool::Runner {
  std::atomic<Work*> work{nullptr};  // set under the pool's lock; polled without it while spinning
  std::condition_variable assigned;
  std::thread thread;
};

RunPool& RunPool::process() {
  static const int registered = pthread_atfork(nullptr, nullptr, forget_pool_after_fork);
  (void)registered;
  RunPool* pool = process_pool.load();
  if (pool) return *pool;
  // Never destroyed: runs may still be in flight on other threads when statics go away. Two
  // threads asking first each make one; the one that loses stops its runners again.
  auto made = std::make_unique<RunPool>(affinity_cpu_count());
  if (process_pool.compare_exchange_strong(pool, made.get())) return *made.release();
  return *pool;
}

RunPool::RunPool(int cpus) : cpus_(std::max(1, cpus)), free_cpus_(cpus_) {
  counters_.cpus = cpus_;
  // One runner per CPU, all started now: at most that many works run at once, so handing one
  // out never has to start a thread (which can fail, with the work already taken off the queue).
  try {
    for (int i = 0; i < cpus_; ++i) {
      runners_.push_back(std::make_unique<Runner>());
      Runner* r = runners_.back().get();
      r->thread = std::thread([this, r] { runner_loop(r); });
    }
  } catch (...) {
    stop_runners();
    throw;
  }
  for (auto it = runners_.rbegin(); it != runners_.rend(); ++it) idle_.push_back(it->get());  // the first on top
}

RunPool::~RunPool() { stop_runners(); }

void RunPool::stop_runners() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& r : runners_) r->assigned.notify_one();
  }
  for (auto& r : runners_)
    if (r->thread.joinable()) r->thread.join();
}

void RunPool::execute(int threads, const std::function<void()>& work, double expected_us) {
  if (on_runner_thread) {
    work();
    return;
  }
  Work w;
  w.cpus = std::clamp(threads, 1, cpus_);
  w.body = &work;
  const bool poll = expected_us >= 0 && expected_us < std::chrono::duration<double, std::micro>(kPollBeforeSleeping).count();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!queue_.empty() || w.cpus > free_cpus_) ++counters_.waited;
  if (poll) ++counters_.polled;
  queue_.push_back(&w);
  start_queued(lock);
  lock.unlock();
  if (!poll || !poll_briefly([&] { return w.done.load(std::memory_order_acquire); })) {
    lock.lock();
    if (!w.done.load(std::memory_order_relaxed)) ++counters_.slept;
    w.sleeping = true;
    w.finished.wait(lock, [&] { return w.done.load(std::memory_order_relaxed); });
  }
  if (w.error) std::rethrow_exception(w.error);
}

// Hands queued works to runners, oldest first, while the oldest fits in the free CPUs. The caller
// holds the lock.
void RunPool::start_queued(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  while (!queue_.empty() && queue_.front()->cpus <= free_cpus_) {
    Work* w = queue_.front();
    queue_.pop_front();
    free_cpus_ -= w->cpus;
    counters_.peak_busy_cpus = std::max(counters_.peak_busy_cpus, cpus_ - free_cpus_);
    ++counters_.executed;
    // Never empty: a runner per CPU, and every work running holds at least one CPU.
    Runner* r = idle_.back();
    idle_.pop_back();
    r->work.store(w, std::memory_order_release);
    r->assigned.notify_one();
  }
}

void RunPool::runner_loop(Runner* runner) {
  on_runner_thread = true;
  for (;;) {
    // A work handed over while this runner polls starts without the lock, which the thread that
    // handed it may still hold.
    Work* w = nullptr;
    if (poll_briefly([&] { return runner->work.load(std::memory_order_acquire) != nullptr; })) {
      w = runner->work.load(std::memory_order_acquire);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      runner->assigned.wait(lock, [&] { return runner->work.load(std::memory_order_relaxed) != nullptr || stopping_; });
      w = runner->work.load(std::memory_order_relaxed);
      if (!w) return;
    }
    try {
      (*w->body)();
    } catch (...) {
      w->error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    runner->work.store(nullptr, std::memory_order_relaxed);
    free_cpus_ += w->cpus;
    const bool notify = w->sleeping;
    w->done.store(true, std::memory_order_release);
    if (notify) w->finished.notify_one();
    idle_.push_back(runner);
    start_queued(lock);
  }
}

RunPool::HeldCpusScope::HeldCpusScope() : previous_(on_runner_thread) { on_runner_thread = true; }
RunPool::HeldCpusScope::~HeldCpusScope() { on_runner_thread = previous_; }

RunPoolCounters RunPool::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

}  // namespace wpk
