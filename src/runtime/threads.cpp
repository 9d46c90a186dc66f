#include "runtime/threads.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>

#include "runtime/logging.hpp"
#include "wpk/error.hpp"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace wpk {

int affinity_cpu_count() {
  // Grow the set until the kernel accepts its size (machines with more than 1024 CPUs).
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (!set) break;
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int n = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0 && n > 0) return n;
    if (rc != 0 && errno != EINVAL) break;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int resolve_threads(int requested) {
  if (requested < 0)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions::threads must be >= 0 (0 = every CPU this process may use), got " + std::to_string(requested));
  return requested == 0 ? affinity_cpu_count() : requested;
}

OmpThreadScope::OmpThreadScope(int threads) : threads_(std::max(1, threads)) {
#ifdef _OPENMP
  previous_ = omp_get_max_threads();
  if (previous_ != threads_) omp_set_num_threads(threads_);
#endif
}

OmpThreadScope::~OmpThreadScope() {
#ifdef _OPENMP
  if (previous_ != threads_) omp_set_num_threads(previous_);
#endif
}

namespace {
thread_local int t_widest_step = 0;
}  // namespace

StepCpusScope::StepCpusScope() : enclosing_(t_widest_step) { t_widest_step = 0; }
StepCpusScope::~StepCpusScope() { t_widest_step = std::max(enclosing_, t_widest_step); }
int StepCpusScope::widest() const { return t_widest_step; }
void note_step_cpus(int cpus) { t_widest_step = std::max(t_widest_step, cpus); }

void log_openmp_wait_policy() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    if (!policy && !spin)
      logger().debug("OpenMP: libgomp's default wait policy; idle workers spin ~3 ms after each run before sleeping "
                     "(OMP_WAIT_POLICY=passive at process start makes them sleep at once)");
    else
      logger().debug("OpenMP: OMP_WAIT_POLICY={} GOMP_SPINCOUNT={}", policy ? policy : "(unset)", spin ? spin : "(unset)");
  });
}

}  // namespace wpk
