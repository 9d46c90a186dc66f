#pragma once
// MemoryRecorder: watches the first run of an input-shape signature, which allocates every
// intermediate on the heap, and turns what it saw into that signature's arena layout:
//   - the byte size of every intermediate the step allocators made;
//   - which outputs are views of an input (Reshape, Identity...): they keep their root's bytes
//     alive for as long as they are read;
//   - which elementwise steps could have written their output over an input nothing reads later.
// Graph outputs are never placed in the arena: they are returned to the caller.
#include <vector>

#include "runtime/execution_plan.hpp"
#include "runtime/plan_cache.hpp"

namespace wpk {

// Which inputs' bytes output 0 of `node` may take over, given the backend that runs it:
//   - every input of an elementwise op: each output element depends only on the input
//     elements at the same index, so reading element i before writing element i is all the
//     kernel needs (deliberately short: anything with a reduction, a window or a reordering,
//     Softmax, Conv, Transpose, ..., is not here), unless the backend says it cannot;
//   - the residual Z of a fused conv/matmul, when the backend accumulates into it. The product
//     reads its other inputs everywhere while it writes, so none of them may touch Z's bytes.
struct InPlaceRule {
  std::vector<std::size_t> inputs;  // candidates, in order of preference
  bool elementwise = false;         // other inputs may read the same bytes in the same arrangement
};
InPlaceRule in_place_rule(const Node& node, const Backend& backend, const std::string& config);

class MemoryRecorder {
 public:
  MemoryRecorder(const Graph& graph, const ExecutionPlan& plan);

  // The step allocator made `t` for intermediate `v` (never called for graph outputs).
  void on_allocate(ValueId v, const Tensor& t);
  // Step `s` ran on `backend` in `config` with these inputs and produced these outputs.
  void on_step(std::size_t s, const Backend& backend, const std::string& config, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor>& outputs);
  // Offsets, arena size and aliases for the plan of this signature.
  void finish(SignaturePlan& plan) const;

 private:
  struct Seen {
    const char* data = nullptr;
    std::size_t bytes = 0;
    bool allocated = false;         // lives in memory the step allocator made
    ValueId alias_root = kNoValue;  // else: a view into that allocated value's bytes
  };
  struct InPlace {
    int step;
    ValueId output;
    ValueId input_root;
  };
  ValueId root_of(ValueId v) const;
  ValueId find_root_overlapping(const Tensor& t, const Node& node) const;
  void note_in_place(std::size_t s, const Node& node, const std::vector<const Tensor*>& inputs,
                     const InPlaceRule& rule);

  const Graph& graph_;
  const ExecutionPlan& plan_;
  std::vector<Seen> seen_;
  std::vector<InPlace> in_place_;
};

}  // namespace wpk
