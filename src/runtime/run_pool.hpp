#pragma once
// The process's CPUs, shared by every run of every Session. A run asks for its session's thread
// count in CPUs and executes on one of the pool's runner threads once that many are free, so
// overlapping runs queue for the cores instead of each starting a full OpenMP team on them (8
// concurrent requests at 2 threads each on 2 cores were 16 busy threads, plus libgomp's idle
// workers spinning in every team).
//
// Why runner threads rather than the caller's thread: libgomp keeps one team per thread that
// opens a parallel region, and its workers spin for a while after each region. Runs that go to
// the most recently used idle runner land on a team that is already awake, and a process has at
// most one team per CPU however many threads call run(). The same holds for the per-thread
// caches of the kernels (oneDNN streams and scratchpads).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace wpk {

struct RunPoolCounters {
  int cpus = 0;                // what the pool shares out, and its runner threads (one per CPU)
  int peak_busy_cpus = 0;      // the most CPUs held by runs at once
  std::uint64_t executed = 0;  // works run on a runner thread
  std::uint64_t waited = 0;    // of those, works that found too few CPUs free and queued
  std::uint64_t polled = 0;    // works whose caller polled for them (before sleeping, if it did)
  std::uint64_t slept = 0;     // works whose caller slept until the work was done
  std::uint64_t left_cpu = 0;  // of the polled, works whose caller slept at once: their runner
                               // had not started them soon or ran them on the caller's CPU
  std::uint64_t gave_way = 0;  // of the polled, works whose caller stopped spinning because another
                               // work started beside them (its runner may need the caller's CPU)
  // How long a caller that slept took to resume once its work was done (a running mean over the
  // sleeps; negative before the first): what sleeping costs a run on this machine.
  double wake_us = -1;
};

class RunPool {
 public:
  // The pool every Session uses: the CPUs of the process's affinity mask at first use.
  static RunPool& process();

  // `wake_us`: what a wake-up is taken to cost until one is measured (RunPoolCounters::wake_us;
  // tests set it, a pool measures its own).
  explicit RunPool(int cpus, double wake_us = -1);
  ~RunPool();  // waits for the works in flight
  RunPool(const RunPool&) = delete;
  RunPool& operator=(const RunPool&) = delete;

  // Runs `work` on a runner thread once `threads` CPUs are free (a work asking for more than the
  // pool has waits until it is idle and then runs alone), waits for it and rethrows what it
  // threw. Works start in the order they were asked for. Called from a runner thread (a
  // session's set-up runs the model to tune it), it runs `work` at once on that thread: the
  // CPUs are already held. `expected_us` is how long the work is likely to take (negative: not
  // known): the caller polls for a work expected to finish sooner than waking it would cost,
  // while a runner on another CPU runs it, and sleeps until any other is done. `expected_cpus`
  // is how many CPUs the work is likely to keep busy (0: not known): one that leaves the caller's
  // CPU idle is polled for longer (poll_bound_us).
  void execute(int threads, const std::function<void()>& work, double expected_us = -1, int expected_cpus = 0);

  // The longest expected work a caller polls for when it runs alone in a pool of `pool_cpus`:
  // 100 us, or, for a work that keeps one CPU busy while others are free (the caller's spin then
  // takes nothing from it), as long as sleeping would add more than a tenth to it by the
  // measured `wake_us`, up to 1 ms.
  static double poll_bound_us(int expected_cpus, int pool_cpus, double wake_us);

  RunPoolCounters counters() const;

  // Marks the calling thread, while it lives, as working for a work that already holds its CPUs
  // (an OpenMP worker of a runner's parallel region): execute() called there runs at once, as on
  // a runner thread, instead of queueing for CPUs its own work holds.
  class HeldCpusScope {
   public:
    HeldCpusScope();
    ~HeldCpusScope();
    HeldCpusScope(const HeldCpusScope&) = delete;
    HeldCpusScope& operator=(const HeldCpusScope&) = delete;

   private:
    bool previous_;
  };

 private:
  struct Work;
  struct Runner;
  bool poll_for_end(Work& w, double expected_us, double bound_us, bool& left_cpu);
  void start_queued(std::unique_lock<std::mutex>& lock);
  void runner_loop(Runner* runner);
  void stop_runners();

  const int cpus_;
  mutable std::mutex mutex_;
  int free_cpus_;
  // Works handed to runners so far, read without the lock by a spinning caller: one that changes
  // while it spins for a work that was alone means a work started beside it.
  std::atomic<std::uint64_t> works_started_{0};
  bool stopping_ = false;
  std::deque<Work*> queue_;
  std::vector<std::unique_ptr<Runner>> runners_;
  std::vector<Runner*> idle_;  // the most recently idled last: its OpenMP team is the warmest
  RunPoolCounters counters_;
};

}  // namespace wpk
