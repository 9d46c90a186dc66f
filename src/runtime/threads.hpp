#pragma once
// Threads. wpk's kernels (Eigen built with OpenMP) and oneDNN (Debian's build is OpenMP-
// threaded) share the calling thread's libgomp pool, so a Session creates no threads of its own
// and two Sessions used from one thread share one pool. The thread count is an OpenMP setting
// of the calling thread, set for the duration of each run() and restored afterwards.
namespace wpk {

// CPUs in this process's affinity mask (sched_getaffinity): what `taskset`/cgroups allow.
int affinity_cpu_count();
// SessionOptions::threads resolved: 0 = affinity_cpu_count(); negative throws InvalidArgument.
int resolve_threads(int requested);

// For one run() (or a Session's set-up): sets the calling thread's OpenMP thread count and
// restores the previous one on exit. Every run of a session uses the same count, even when runs
// overlap: oneDNN fixes a primitive's thread count when it creates it (at a shape's first run),
// so a count that varied with the load would stick to the primitives created under it. Callers
// that run N requests at once give each session about cores / N threads.
class OmpThreadScope {
 public:
  explicit OmpThreadScope(int threads);
  ~OmpThreadScope();
  OmpThreadScope(const OmpThreadScope&) = delete;
  OmpThreadScope& operator=(const OmpThreadScope&) = delete;

 private:
  int threads_ = 1;
  int previous_ = 0;
};

// The most CPUs a step run on this thread was given since the innermost scope began (a body's
// runs inside a Loop count for the enclosing run): a run whose every step kept to one CPU leaves
// its caller's CPU idle, and RunPool lets such a caller poll for it longer.
class StepCpusScope {
 public:
  StepCpusScope();
  ~StepCpusScope();  // the enclosing scope takes this one's widest step
  StepCpusScope(const StepCpusScope&) = delete;
  StepCpusScope& operator=(const StepCpusScope&) = delete;
  int widest() const;  // 0 before any step

 private:
  int enclosing_ = 0;
};
// Called for each step: the CPUs it is given.
void note_step_cpus(int cpus);

// Once per process, at debug level: whether libgomp's idle workers spin after a run (its default,
// about 3 ms) or sleep at once (OMP_WAIT_POLICY=passive); see the README, "Threads".
void log_openmp_wait_policy();

}  // namespace wpk
