#include "runtime/plan_cache.hpp"

#include <algorithm>
#include <iterator>

namespace wpk {

ShapeSignature shape_signature(const std::vector<const Tensor*>& inputs) {
  std::size_t length = 0;
  for (const Tensor* t : inputs) length += 1 + t->shape().size();
  ShapeSignature sig;
  sig.reserve(length);
  for (const Tensor* t : inputs) {
    const Shape& s = t->shape();
    sig.push_back(static_cast<std::int64_t>(s.size()));
    sig.insert(sig.end(), s.begin(), s.end());
  }
  return sig;
}

std::shared_ptr<const SignaturePlan> PlanCache::find(const ShapeSignature& sig) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(sig);
  if (it == plans_.end()) return nullptr;
  latest_ = it->second;  // describe() shows the plan of the signature run most recently
  // The signature becomes the most recently used: eviction takes the longest unused, so a
  // shape that keeps coming back survives any stream of one-off shapes. Searched from the most
  // recent end and moved, not copied: a run of the same shape as the last finds it at once.
  const auto newer = std::find(order_.rbegin(), order_.rend(), sig).base();
  std::rotate(std::prev(newer), newer, order_.end());
  return it->second;
}

std::shared_ptr<const SignaturePlan> PlanCache::insert(const ShapeSignature& sig, std::shared_ptr<const SignaturePlan> plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [it, inserted] = plans_.emplace(sig, std::move(plan));
  latest_ = it->second;
  if (inserted) order_.push_back(sig);
  while (plans_.size() > kMaxSignatures && !order_.empty()) {
    plans_.erase(order_.front());
    order_.pop_front();
  }
  return latest_;
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  plans_.clear();
  order_.clear();
}

void PlanCache::replace(const ShapeSignature& sig, std::shared_ptr<const SignaturePlan> plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = plans_.find(sig);
  latest_ = plan;
  if (it != plans_.end()) {
    it->second = std::move(plan);
    return;
  }
  plans_.emplace(sig, std::move(plan));
  order_.push_back(sig);
  while (plans_.size() > kMaxSignatures && !order_.empty()) {
    plans_.erase(order_.front());
    order_.pop_front();
  }
}

std::shared_ptr<const SignaturePlan> PlanCache::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

}  // namespace wpk
