#pragma once
// MemoryBudget: the bytes one session may hold (SessionOptions::memory_limit) and what it holds
// now: its weights as loaded and folded, and what runs in flight hold for intermediates. A
// reservation that would cross the limit is an Error (ResourceExhausted) before anything is
// allocated, so a hostile model or input fails cleanly instead of meeting the OOM killer.
// Thread-safe: concurrent runs reserve from one budget.
#include <atomic>
#include <cstdint>
#include <string>

namespace wpk {

class MemoryBudget {
 public:
  explicit MemoryBudget(std::int64_t limit_bytes) : limit_(limit_bytes) {}
  std::int64_t limit() const { return limit_; }
  std::int64_t held() const { return held_.load(std::memory_order_relaxed); }
  // False, reserving nothing, when `bytes` more would cross the limit.
  bool try_reserve(std::int64_t bytes);
  // try_reserve, or Error(ResourceExhausted) starting with `where` (fail() throws that error);
  // a literal, so that a run reserving its arena builds no string unless it fails.
  void reserve(std::int64_t bytes, const char* where);
  [[noreturn]] void fail(std::int64_t bytes, const std::string& where) const;
  void release(std::int64_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

 private:
  const std::int64_t limit_;
  std::atomic<std::int64_t> held_{0};
};

// What a run has reserved, given back when the run ends however it ends.
class RunReservation {
 public:
  explicit RunReservation(MemoryBudget* budget) : budget_(budget) {}
  ~RunReservation() { release_all(); }
  RunReservation(const RunReservation&) = delete;
  RunReservation& operator=(const RunReservation&) = delete;
  bool try_reserve(std::int64_t bytes);
  void reserve(std::int64_t bytes, const char* where);
  void release(std::int64_t bytes);
  void release_all();
  const MemoryBudget& budget() const { return *budget_; }

 private:
  MemoryBudget* budget_;
  std::int64_t bytes_ = 0;
};

// SessionOptions::memory_limit resolved: 0 = 3/4 of the machine's (or the cgroup's) memory;
// negative is an error.
std::int64_t resolve_memory_limit(std::int64_t requested);

// "1.5 GiB", "12.0 MiB": sizes in messages.
std::string format_bytes(std::int64_t bytes);

}  // namespace wpk
