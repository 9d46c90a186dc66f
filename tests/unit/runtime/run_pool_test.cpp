// The process's CPUs shared by runs (src/runtime/run_pool): works that fit together overlap,
// works that do not queue in order, a work larger than the pool runs alone, errors reach the
// caller, a work started from a runner runs inline, and sessions' runs go through the pool.
#include <catch2/catch.hpp>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "probe_backend.hpp"
#include "runtime/run_pool.hpp"
#include "runtime/session_factory.hpp"
#include "runtime/threads.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;

namespace {

// Counts the CPUs held by works running now and the most ever held.
struct Occupancy {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  void enter(int cpus) {
    const int n = now += cpus;
    int p = peak;
    while (n > p && !peak.compare_exchange_weak(p, n)) {
    }
  }
  void leave(int cpus) { now -= cpus; }
};

// Waits (at most 10 s) until `flag` is set; false on timeout.
bool wait_for(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  return flag;
}

}  // namespace

TEST_CASE("run pool: two works that fit the CPUs together run at once", "[threads][run_pool]") {
  RunPool pool(2);
  std::atomic<bool> a_in{false}, b_in{false};
  bool a_saw_b = false, b_saw_a = false;
  std::thread a([&] { pool.execute(1, [&] { a_in = true; a_saw_b = wait_for(b_in); }); });
  std::thread b([&] { pool.execute(1, [&] { b_in = true; b_saw_a = wait_for(a_in); }); });
  a.join();
  b.join();
  CHECK(a_saw_b);
  CHECK(b_saw_a);
  CHECK(pool.counters().peak_busy_cpus == 2);
}

TEST_CASE("run pool: works that do not fit together queue, and the CPUs held never exceed the pool", "[threads][run_pool]") {
  RunPool pool(2);
  Occupancy cpus;
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i)
    callers.emplace_back([&, i] {
      const int want = i % 3 == 0 ? 1 : 2;
      pool.execute(want, [&] {
        cpus.enter(want);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        cpus.leave(want);
      });
    });
  for (auto& t : callers) t.join();
  CHECK(cpus.peak <= 2);
  const RunPoolCounters c = pool.counters();
  CHECK(c.peak_busy_cpus <= 2);
  CHECK(c.executed == 6);
  CHECK(c.waited >= 1);
}

TEST_CASE("run pool: a work asking for more CPUs than the pool has runs alone", "[threads][run_pool]") {
  RunPool pool(2);
  Occupancy cpus;
  std::atomic<bool> big_alone{true};
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i)
    callers.emplace_back([&, i] {
      const bool big = i == 2;
      pool.execute(big ? 8 : 1, [&] {
        cpus.enter(big ? 2 : 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (big && cpus.now != 2) big_alone = false;
        cpus.leave(big ? 2 : 1);
      });
    });
  for (auto& t : callers) t.join();
  CHECK(big_alone);
  CHECK(cpus.peak <= 2);
}

TEST_CASE("run pool: a work's exception reaches its caller and the pool goes on", "[threads][run_pool]") {
  RunPool pool(1);
  CHECK_THROWS_WITH(pool.execute(1, [] { throw std::runtime_error("from the work"); }), "from the work");
  int ran = 0;
  pool.execute(1, [&] { ran = 1; });
  CHECK(ran == 1);
}

TEST_CASE("run pool: a work started from a runner runs inline instead of waiting for its own CPUs", "[threads][run_pool]") {
  RunPool pool(1);
  std::thread::id outer, inner;
  pool.execute(1, [&] {
    outer = std::this_thread::get_id();
    pool.execute(1, [&] { inner = std::this_thread::get_id(); });
  });
  CHECK(outer == inner);
  CHECK(outer != std::this_thread::get_id());
}

TEST_CASE("run pool: one caller's works in sequence reuse one runner", "[threads][run_pool]") {
  // The warmest OpenMP team is the runner that finished last.
  RunPool pool(2);
  std::vector<std::thread::id> ids;
  for (int i = 0; i < 10; ++i) pool.execute(2, [&] { ids.push_back(std::this_thread::get_id()); });
  CHECK(std::all_of(ids.begin(), ids.end(), [&](std::thread::id id) { return id == ids.front(); }));
}

TEST_CASE("run pool: a caller whose work runs on its own CPU sleeps at once and leaves the CPU to it", "[threads][run_pool]") {
  // A caller that spun there would keep its runner from the CPU until its spin ran out. The
  // pool's runners are made while this thread may use one CPU only, so they share it.
  struct OneCpu {
    cpu_set_t all;
    OneCpu() {
      REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
      cpu_set_t one;
      CPU_ZERO(&one);
      int first = 0;
      while (!CPU_ISSET(first, &all)) ++first;
      CPU_SET(first, &one);
      REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
    }
    ~OneCpu() { sched_setaffinity(0, sizeof(all), &all); }
  } pinned;
  RunPool pool(2);
  for (int i = 0; i < 5; ++i) {
    const RunPoolCounters before = pool.counters();
    pool.execute(1, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }, 10.0);
    CHECK(pool.counters().polled == before.polled + 1);
    CHECK(pool.counters().left_cpu == before.left_cpu + 1);
  }
}

TEST_CASE("run pool: a caller polls only for a work expected to be short, and sleeps at once otherwise", "[threads][run_pool]") {
  // A caller that polls holds a CPU the work's own threads may need, and its yields put it behind
  // them until the scheduler's next tick: it polls only for a work expected to end sooner than a
  // wake-up costs (100 us), never for one of unknown length.
  RunPool pool(2);
  const auto five_ms = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  for (const double expected_us : {-1.0, 100.0, 5000.0}) {
    const RunPoolCounters before = pool.counters();
    pool.execute(1, five_ms, expected_us);
    INFO(expected_us << " us expected");
    CHECK(pool.counters().polled == before.polled);
    CHECK(pool.counters().slept == before.slept + 1);
  }
  for (const double expected_us : {0.0, 10.0, 99.0}) {
    const RunPoolCounters before = pool.counters();
    pool.execute(1, five_ms, expected_us);  // longer than expected: polls, then sleeps
    INFO(expected_us << " us expected");
    CHECK(pool.counters().polled == before.polled + 1);
    CHECK(pool.counters().slept == before.slept + 1);
  }
}

TEST_CASE("run pool: a caller polls longer for a work that leaves its CPU idle, by what a wake-up costs", "[threads][run_pool]") {
  // Sleeping costs a run the wake-up measured here; a caller polls while that would add more
  // than a tenth, at least 100 us and at most 1 ms of it, and only where its spin takes nothing
  // from the work (one CPU of a pool of two or more).
  CHECK(RunPool::poll_bound_us(1, 2, 40) == Approx(400));
  CHECK(RunPool::poll_bound_us(1, 2, 5) == Approx(100));
  CHECK(RunPool::poll_bound_us(1, 2, 500) == Approx(1000));
  CHECK(RunPool::poll_bound_us(2, 2, 40) == Approx(100));
  CHECK(RunPool::poll_bound_us(0, 2, 40) == Approx(100));
  CHECK(RunPool::poll_bound_us(1, 1, 40) == Approx(100));
  CHECK(RunPool::poll_bound_us(1, 2, -1) == Approx(100));

  RunPool pool(2);
  const auto busy_us = [](int us) {
    return [us] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
      while (std::chrono::steady_clock::now() < until) {
      }
    };
  };
  CHECK(pool.counters().wake_us < 0);
  for (int i = 0; i < 4; ++i) pool.execute(1, busy_us(300));  // of unknown length: the caller sleeps
  const double wake_us = pool.counters().wake_us;
  REQUIRE(wake_us > 0);
  INFO("a wake-up here: " << wake_us << " us");
  // Where a wake-up costs more than 15 us (virtual machines: tens), 150 us is under the bound.
  const bool polls = RunPool::poll_bound_us(1, 2, wake_us) > 150;
  RunPoolCounters before = pool.counters();
  pool.execute(1, busy_us(20), 150, 1);
  CHECK(pool.counters().polled == before.polled + (polls ? 1 : 0));
  before = pool.counters();
  pool.execute(2, busy_us(20), 150, 2);
  CHECK(pool.counters().polled == before.polled);
}

TEST_CASE("run pool: a caller spinning for a work alone stops when another work starts beside it", "[threads][run_pool]") {
  // Its spin took nothing from its own work, but the new work's runner may need the caller's CPU.
  // A wake-up taken as 100 us: a one-CPU work expected to take 300 us is polled for, up to 610 us.
  // The other work's caller sleeps until the first work has started, and is then moved to the
  // first work's runner CPU, which that runner yields while it waits: the spinning caller cannot
  // keep it from starting. Tried a few times.
  if (affinity_cpu_count() < 2) {
    WARN("skipped: this process may use one CPU");
    return;
  }
  RunPool pool(2, 100);
  bool gave_way = false;
  for (int attempt = 0; attempt < 10 && !gave_way; ++attempt) {
    std::mutex m;
    std::condition_variable cv;
    bool a_in = false;
    std::atomic<bool> b_done{false};
    std::thread b([&] {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return a_in; });
      }
      pool.execute(1, [&] { b_done = true; });
    });
    pool.execute(1, [] {}, 0, 1);  // its runner then spins for the next work, which starts at once
    const RunPoolCounters before = pool.counters();
    pool.execute(1, [&] {
      cpu_set_t here;
      CPU_ZERO(&here);
      CPU_SET(sched_getcpu(), &here);
      pthread_setaffinity_np(b.native_handle(), sizeof(here), &here);
      {
        std::lock_guard<std::mutex> lock(m);
        a_in = true;
      }
      cv.notify_one();
      wait_for(b_done);
    }, 300, 1);
    b.join();
    REQUIRE(b_done);
    gave_way = pool.counters().gave_way > before.gave_way;
  }
  CHECK(gave_way);
}

using runtime_test::ones;
using runtime_test::relu_graph;

TEST_CASE("sessions' runs share the process's CPUs: runs of sessions using every CPU do not overlap", "[threads][run_pool]") {
  Occupancy runs;
  const runtime_test::WrappingBackend probe("probe", [&](KernelContext&) {
    runs.enter(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    runs.leave(1);
  });
  SessionOptions o;
  o.threads = affinity_cpu_count();
  const Session s1 = SessionFactory::create(relu_graph(), o, {&probe});
  const Session s2 = SessionFactory::create(relu_graph(), o, {&probe});
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i) callers.emplace_back([&, i] { (i % 2 ? s1 : s2).run(ones(1 + i)); });
  for (auto& t : callers) t.join();
  CHECK(runs.peak == 1);
  CHECK(RunPool::process().counters().peak_busy_cpus <= affinity_cpu_count());
}

TEST_CASE("sessions' runs share the process's CPUs: one-thread runs overlap on a machine of two or more", "[threads][run_pool]") {
  if (affinity_cpu_count() < 2) {
    WARN("skipped: this process may use one CPU");
    return;
  }
  std::atomic<bool> a_in{false}, b_in{false};
  std::atomic<bool> a_saw_b{false};
  const runtime_test::WrappingBackend probe("probe", [&](KernelContext& ctx) {
    if (ctx.input(0).dim(0) == 1) {
      a_in = true;
      a_saw_b = wait_for(b_in);
    } else {
      b_in = true;
      wait_for(a_in);
    }
  });
  SessionOptions o;
  o.threads = 1;
  const Session s = SessionFactory::create(relu_graph(), o, {&probe});
  std::thread a([&] { s.run(ones(1)); });
  s.run(ones(2));
  a.join();
  CHECK(a_saw_b);
}

TEST_CASE("a run's profile says how long it queued for CPUs", "[threads][run_pool]") {
  std::atomic<bool> hold_in{false}, release{false};
  const runtime_test::WrappingBackend probe("probe", [&](KernelContext& ctx) {
    if (ctx.input(0).dim(0) == 1) {
      hold_in = true;
      wait_for(release);
    }
  });
  SessionOptions o;
  o.threads = affinity_cpu_count();
  const Session s = SessionFactory::create(relu_graph(), o, {&probe});
  std::thread holder([&] { s.run(ones(1)); });
  REQUIRE(wait_for(hold_in));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  RunProfile p;
  s.run(ones(2), &p);
  holder.join();
  releaser.join();
  CHECK(p.queued_us >= 20000);
  CHECK(p.total_us >= p.queued_us);
}
