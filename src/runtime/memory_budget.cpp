#include "runtime/memory_budget.hpp"

#include <cstdio>

#include "core/limits.hpp"
#include "wpk/error.hpp"

namespace wpk {

bool MemoryBudget::try_reserve(std::int64_t bytes) {
  std::int64_t held = held_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - held) return false;
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return true;
}

void MemoryBudget::reserve(std::int64_t bytes, const char* where) {
  if (!try_reserve(bytes)) fail(bytes, where);
}

void MemoryBudget::fail(std::int64_t bytes, const std::string& where) const {
  throw Error(ErrorCode::ResourceExhausted, where + "needs " + format_bytes(bytes) + " more while the session holds " +
                                                format_bytes(held()) + ", beyond its memory limit of " + format_bytes(limit_) +
                                                " (SessionOptions::memory_limit)");
}

bool RunReservation::try_reserve(std::int64_t bytes) {
  if (!budget_->try_reserve(bytes)) return false;
  bytes_ += bytes;
  return true;
}

void RunReservation::reserve(std::int64_t bytes, const char* where) {
  if (!try_reserve(bytes)) budget_->fail(bytes, where);
}

void RunReservation::release(std::int64_t bytes) {
  budget_->release(bytes);
  bytes_ -= bytes;
}

void RunReservation::release_all() {
  if (bytes_ != 0) budget_->release(bytes_);
  bytes_ = 0;
}

std::int64_t resolve_memory_limit(std::int64_t requested) {
  if (requested < 0)
    throw Error(ErrorCode::InvalidArgument,
                "SessionOptions::memory_limit must be >= 0 (0 = 3/4 of the machine's memory), got " + std::to_string(requested));
  if (requested > 0) return requested;
  const std::int64_t machine = machine_memory_bytes();
  return machine > 0 ? machine / 4 * 3 : std::int64_t(16) << 30;
}

std::string format_bytes(std::int64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (std::int64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", b / (1 << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1 << 20));
  return text;
}

}  // namespace wpk
