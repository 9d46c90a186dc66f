// `wpk bench --idle MS`: CPU time the process's other threads (OpenMP workers) use while the
// calling thread sleeps after the last run() returned. libgomp workers spin-wait before they
// sleep; this shows how long that costs on this machine and with this environment.
#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "cli.hpp"

namespace wpk::cli {
namespace {

// On-CPU nanoseconds of every thread but the caller: /proc/self/task/*/schedstat, whose first
// field is exact, unlike stat's utime in clock ticks (10 ms).
long long other_threads_cpu_ns() {
  const long self = syscall(SYS_gettid);
  long long total = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.' || std::atol(e->d_name) == self) continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/schedstat");
    long long ns = 0;
    if (in >> ns) total += ns;
  }
  closedir(dir);
  return total;
}

}  // namespace

double idle_cpu_ms(int sleep_ms) {
  const long long before = other_threads_cpu_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  return static_cast<double>(other_threads_cpu_ns() - before) / 1e6;
}

}  // namespace wpk::cli
