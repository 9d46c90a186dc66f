#include "runtime/run_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <exception>

#include "runtime/threads.hpp"

namespace wpk {

namespace {

thread_local bool on_runner_thread = false;
// Where this caller's last short work ran on the caller's own CPU, that CPU, else -1: a caller
// back on it sleeps at once instead of waiting for a runner that cannot start while it spins.
thread_local int caller_shares_cpu = -1;

// How long a runner that waits for the next run, or a caller that waits for a run expected to be
// this short, spins before it sleeps on its condition variable. Waking a sleeping thread costs a
// futex call on each side and a trip through the scheduler, which on a virtual machine is tens of
// microseconds: as much as a small model's whole run, and every iteration of a serving loop
// pays it twice.
//
// The spin never yields. Linux's EEVDF scheduler pushes a yielding thread's deadline a whole slice
// back per yield, so a thread that yields thousands of times while it polls ends up behind any
// other runnable thread of its CPU, a nice-19 one too, for that thread's whole slice (see
// docs/threads.md). So a thread spins only where it keeps no thread of its own process from a
// CPU: a runner while no other work runs and on another CPU than its last caller; a caller while
// its work runs alone on another CPU, and not much longer than the work is expected to take,
// since the work's OpenMP workers may need the caller's CPU. Beside other works both yield
// between checks, as before: there a spin would take a CPU from another work's threads. A caller
// whose work is expected to take longer sleeps at once.
constexpr auto kPollBeforeSleeping = std::chrono::microseconds(100);

// A caller of a work that leaves its CPU idle polls while sleeping would cost the run more than
// this share of it (the wake-up measured on this machine), for runs of at most kLongestPolledRun:
// on a virtual machine a wake-up costs tens of microseconds, a tenth of a 300 us run, and a
// caller's CPU spinning past a millisecond is worth more to other processes than that.
constexpr double kSleepCostShare = 0.1;
constexpr auto kLongestPolledRun = std::chrono::microseconds(1000);

// How long a caller spins for its runner to pick the work up. A runner that spins on another CPU
// sees the work within a microsecond or two; one that has not started by then is asleep, or
// waits for the caller's own CPU, and either way the caller does best to sleep at once.
constexpr auto kPickUpWait = std::chrono::microseconds(10);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Moves the calling thread off `cpu` if it runs there and may run elsewhere; returns the CPU it
// runs on. A caller and a runner that wake each other stay on one CPU of a virtual machine (the
// scheduler places a woken thread beside its waker rather than on an idle virtual CPU, which may
// be descheduled), and there each waits for the other to sleep: twice a futex wake-up a run. One
// move apart, the runner spins on its own CPU for the next work. The thread's affinity is only
// narrowed for the move and then restored as it was.
int move_off(int cpu) {
  const int now = sched_getcpu();
  if (now != cpu || cpu < 0) return now;
  cpu_set_t mask;
  if (pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) < 2) return now;
  cpu_set_t others = mask;
  CPU_CLR(cpu, &others);
  if (pthread_setaffinity_np(pthread_self(), sizeof(others), &others) != 0) return now;
  pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask);
  return sched_getcpu();
}

// Checks `ready`, calling `between` between checks, until it holds or `at_most` has passed;
// returns its last answer. `spin` pauses the core; `yield` hands the CPU over, for waits beside
// other works of the pool, whose threads a spin would keep from a CPU.
template <typename Ready, typename Between>
bool poll_until(std::chrono::nanoseconds at_most, const Ready& ready, const Between& between) {
  const auto until = std::chrono::steady_clock::now() + at_most;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return ready();
    between();
  }
  return true;
}
const auto spin = [] { cpu_relax(); };
const auto yield = [] { std::this_thread::yield(); };

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
  int caller_cpu = -1;              // where the caller was when it handed the work over
  bool polled = false;              // its caller polls for it rather than sleep at once
  bool queued = false;              // it found other works ahead of it or too few CPUs free
  bool alone = false;               // under the lock: no other work ran when it was handed over
  std::uint64_t started_as = 0;     // works_started_ once it was handed over, if it was
  std::atomic<int> runner_cpu{-1};  // where its runner started it
  bool sleeping = false;  // under the lock: the caller waits on `finished` and must be notified
  std::chrono::steady_clock::time_point done_at;  // under the lock: when a sleeping caller's work ended
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

RunPool::RunPool(int cpus, double wake_us) : cpus_(std::max(1, cpus)), free_cpus_(cpus_) {
  counters_.cpus = cpus_;
  counters_.wake_us = wake_us;
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

double RunPool::poll_bound_us(int expected_cpus, int pool_cpus, double wake_us) {
  const double base = std::chrono::duration<double, std::micro>(kPollBeforeSleeping).count();
  if (expected_cpus != 1 || pool_cpus < 2 || wake_us <= 0) return base;
  const double longest = std::chrono::duration<double, std::micro>(kLongestPolledRun).count();
  return std::clamp(wake_us / kSleepCostShare, base, longest);
}

void RunPool::execute(int threads, const std::function<void()>& work, double expected_us, int expected_cpus) {
  if (on_runner_thread) {
    work();
    return;
  }
  Work w;
  w.cpus = std::clamp(threads, 1, cpus_);
  w.body = &work;
  w.caller_cpu = sched_getcpu();
  std::unique_lock<std::mutex> lock(mutex_);
  w.queued = !queue_.empty() || w.cpus > free_cpus_;
  if (w.queued) ++counters_.waited;
  // Beside other works the caller's CPU may be another work's: only a work alone polls longer.
  const double bound_us = poll_bound_us(w.queued || free_cpus_ != cpus_ ? 0 : expected_cpus, cpus_, counters_.wake_us);
  const bool poll = expected_us >= 0 && expected_us < bound_us;
  w.polled = poll;
  if (poll) ++counters_.polled;
  queue_.push_back(&w);
  start_queued(lock);
  w.started_as = works_started_.load(std::memory_order_relaxed);
  lock.unlock();
  bool left_cpu = false;
  if (!poll || !poll_for_end(w, expected_us, bound_us, left_cpu)) {
    lock.lock();
    if (left_cpu) ++counters_.left_cpu;
    const bool waits = !w.done.load(std::memory_order_relaxed);
    if (waits) ++counters_.slept;
    w.sleeping = true;
    w.finished.wait(lock, [&] { return w.done.load(std::memory_order_relaxed); });
    if (waits) {
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w.done_at).count();
      counters_.wake_us = counters_.wake_us < 0 ? us : counters_.wake_us + (us - counters_.wake_us) / 8;
    }
  }
  if (poll) caller_shares_cpu = w.runner_cpu.load(std::memory_order_relaxed) == w.caller_cpu ? w.caller_cpu : -1;
  if (w.error) std::rethrow_exception(w.error);
}

// Polls for a short work's end while its runner runs it on another CPU (spinning where the work
// runs alone, yielding beside other works or behind them in the queue); returns whether it
// ended. Gives up at once (`left_cpu`) where the runner is slow to start it or started it on
// this CPU, which the caller then leaves to it.
bool RunPool::poll_for_end(Work& w, double expected_us, double bound_us, bool& left_cpu) {
  const auto is_done = [&] { return w.done.load(std::memory_order_acquire); };
  if (w.queued) return poll_until(kPollBeforeSleeping, is_done, yield);
  if (w.caller_cpu == caller_shares_cpu) {
    left_cpu = true;
    return false;
  }
  int runner_cpu = -1;
  poll_until(kPickUpWait, [&] { return (runner_cpu = w.runner_cpu.load(std::memory_order_acquire)) >= 0; }, spin);
  if (runner_cpu < 0 || runner_cpu == sched_getcpu()) {
    left_cpu = true;
    return false;
  }
  const auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::micro>(std::min(bound_us, 2 * expected_us + 10)));
  if (!w.alone) return poll_until(window, is_done, yield);
  // A work started beside it since may have its runner on this CPU: the caller sleeps instead.
  bool ended = false, others = false;
  poll_until(window, [&] {
    ended = is_done();
    others = !ended && works_started_.load(std::memory_order_relaxed) != w.started_as;
    return ended || others;
  }, spin);
  if (others) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counters_.gave_way;
  }
  return ended;
}

// Hands queued works to runners, oldest first, while the oldest fits in the free CPUs. The caller
// holds the lock.
void RunPool::start_queued(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  while (!queue_.empty() && queue_.front()->cpus <= free_cpus_) {
    Work* w = queue_.front();
    queue_.pop_front();
    w->alone = free_cpus_ == cpus_;
    free_cpus_ -= w->cpus;
    works_started_.fetch_add(1, std::memory_order_relaxed);
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
  enum class Wait { Sleep, Spin, Yield } wait = Wait::Sleep;  // for the next work
  for (;;) {
    // A work handed over while this runner polls starts without the lock, which the thread that
    // handed it may still hold.
    Work* w = nullptr;
    const auto assigned = [&] { return runner->work.load(std::memory_order_acquire) != nullptr; };
    if ((wait == Wait::Spin && poll_until(kPollBeforeSleeping, assigned, spin)) ||
        (wait == Wait::Yield && poll_until(kPollBeforeSleeping, assigned, yield))) {
      w = runner->work.load(std::memory_order_acquire);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      runner->assigned.wait(lock, [&] { return runner->work.load(std::memory_order_relaxed) != nullptr || stopping_; });
      w = runner->work.load(std::memory_order_relaxed);
      if (!w) return;
    }
    const int caller_cpu = w->caller_cpu;
    // Moves off the caller's CPU only for a caller that spins with no other work running: a
    // queued caller's CPU is long out of date, and the other CPU may hold another work.
    const bool move = cpus_ > 1 && w->polled && w->alone;
    w->runner_cpu.store(move ? move_off(caller_cpu) : sched_getcpu(), std::memory_order_release);
    try {
      (*w->body)();
    } catch (...) {
      w->error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    runner->work.store(nullptr, std::memory_order_relaxed);
    free_cpus_ += w->cpus;
    const bool notify = w->sleeping;
    if (notify) w->done_at = std::chrono::steady_clock::now();
    w->done.store(true, std::memory_order_release);
    if (notify) w->finished.notify_one();
    idle_.push_back(runner);
    start_queued(lock);
    // Alone in the pool it spins, unless its caller shares its CPU; beside other works it yields.
    if (free_cpus_ < cpus_) wait = Wait::Yield;
    else wait = caller_cpu != sched_getcpu() ? Wait::Spin : Wait::Sleep;
  }
}

RunPool::HeldCpusScope::HeldCpusScope() : previous_(on_runner_thread) { on_runner_thread = true; }
RunPool::HeldCpusScope::~HeldCpusScope() { on_runner_thread = previous_; }

RunPoolCounters RunPool::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

}  // namespace wpk
