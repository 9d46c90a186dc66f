#pragma once
// What a Session learns from the first run of each input-shape signature (shapes are only known
// at run time when the model has symbolic dims): which candidate runs each step, and where each
// intermediate lives in the run's arena. Later runs with that signature reuse it unchanged.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/execution_plan.hpp"
#include "wpk/session.hpp"

namespace wpk {

struct ValueSlot {
  bool in_arena = false;          // the step's allocator places this value at `offset`
  std::size_t offset = 0;
  std::size_t bytes = 0;          // what the first run needed; a larger request goes to the heap
  ValueId alias_root = kNoValue;  // the first run's kernel made this value a view of that one
};

struct SignaturePlan {
  std::vector<StepChoice> choice;  // per step
  bool memory_planned = false;
  std::vector<ValueSlot> values;  // per ValueId (empty when !memory_planned)
  std::size_t arena_bytes = 0;
  std::size_t naive_bytes = 0;
};

// The graph inputs' shapes, in graph-input order, each prefixed by its rank.
using ShapeSignature = std::vector<std::int64_t>;
ShapeSignature shape_signature(const std::vector<const Tensor*>& inputs);

// Thread-safe map from signature to plan. Bounded: a model fed ever new shapes (a sequence
// length per request) keeps the plans of the kMaxSignatures most recently run signatures.
class PlanCache {
 public:
  static constexpr std::size_t kMaxSignatures = 64;
  // Also makes the found plan the latest one and its signature the most recently used.
  std::shared_ptr<const SignaturePlan> find(const ShapeSignature& sig) const;
  // Keeps the first plan stored for a signature (two first runs may race) and returns it.
  std::shared_ptr<const SignaturePlan> insert(const ShapeSignature& sig, std::shared_ptr<const SignaturePlan> plan);
  std::shared_ptr<const SignaturePlan> latest() const;
  // Replaces the signature's plan (tuning at load revising its first run's choices).
  void replace(const ShapeSignature& sig, std::shared_ptr<const SignaturePlan> plan);
  // Forgets every signature's plan (new candidates became ready): each signature's next run
  // chooses and plans again. latest() stays until then.
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<ShapeSignature, std::shared_ptr<const SignaturePlan>> plans_;
  mutable std::deque<ShapeSignature> order_;  // least recently used first, for eviction
  mutable std::shared_ptr<const SignaturePlan> latest_;
};

}  // namespace wpk
