#pragma once
// The loop IR a schedule lowers to, and the printers (cpp_printer.hpp, later a CUDA printer)
// read: loops over leaf variables (split variables are gone, replaced by outer * factor +
// inner), remainder branches, register buffers and stores of expressions.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/schedule.hpp"

namespace wpk::codegen {

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;

enum class StmtKind {
  Block,  // body: in order
  For,    // var over [0, extent), kind; body[0]. With `dynamic`: over [0, ceil(dynamic / divisor)).
          // With `vars` (a fused loop's parts, outermost first): each iteration k also sets
          // vars[d] = (k / the product of the later bounds) % bounds[d] before its body
  Tail,   // var < full ? body[0] : body[1] (a split's remainder). With `dynamic`: var < dynamic /
          // divisor ? body[0] : body[r] where r = dynamic % divisor (one body per remainder)
  Alloc,  // buffer: a register buffer, or (not registers) an intermediate's array on the thread's
          // stack, live for the rest of the enclosing block
  Store,  // buffer[index] = value
  Guard,  // body[0] where index[d] lies in [0, bounds[d]) for every d (a whole-tile remainder's
          // points that exist; a tile whose reads all stay inside their buffers), else body[1]
          // when there is one
  Barrier,  // every thread of the block waits for the others (CUDA's __syncthreads)
  Stage,    // buffer (a staged tile) [t] = source[index + t] for every t within buffer's dims, 0
            // where that leaves source; a CUDA block's threads share the copy. With `value`: the
            // element is value with `vars` (a producer's axes) bound to index + t, not a load.
            // With body[0] as well (a CPU thread's producer): that loop nest computes the tile
            // in vectors, leaving the points past the producer's output unset
  Prefetch,  // buffer (a packed input, its first dimension the panels): while panel `var` is
             // computed, the lines of panel var + 1 (unless var + 1 = extent, the panels) at
             // fractions index[0] / trips of it, trips = full * ceil(dynamic / divisor) (the
             // product of the loops index[0] walks: full alone without a dynamic one)
  PrefetchLines,  // the cache lines of buffer[index] and the `extent` - 1 elements after it (along
                  // its contiguous last dimension), into L1: an epilogue's input asked for while the
                  // tile's reduction runs (Schedule::prefetch_epilogue; the C++ printer only)
};

struct Stmt {
  StmtKind kind = StmtKind::Block;
  std::vector<StmtPtr> body;
  Var var;
  std::int64_t extent = 0;  // For
  LoopKind loop = LoopKind::Serial;
  std::int64_t full = 0;    // Tail
  Var dynamic;              // For, Tail: the dynamic variable whose runtime extent bounds them
  std::int64_t divisor = 1;
  Buffer buffer;            // Alloc, Store, Stage
  std::vector<Affine> index;
  Expr value;
  Buffer source;                      // Stage
  std::vector<Var> vars;              // Stage with a producer: its axes; For: the fused parts
  std::vector<std::int64_t> bounds;   // Guard; For: the fused parts' extents
};

// The shared memory a CUDA block may declare statically: what staged tiles may take together.
constexpr std::int64_t kMaxSharedBytes = 48 * 1024;

struct LoweredKernel {
  std::string name;          // the compute's
  std::string schedule;      // Schedule::describe()
  std::vector<Buffer> args;  // inputs (a produced one replaced by its producer's inputs), then the output
  std::vector<Var> dynamic;  // the kernel's extents argument, in order
  std::vector<Buffer> shared;  // staged tiles (Schedule::stage_shared), in CUDA shared memory
  StmtPtr body;
};

// Checks the schedule's rules (schedule.hpp) and lowers it; throws std::invalid_argument.
LoweredKernel lower(const Schedule& schedule);

// What one iteration of a kernel's shared loop may keep of its intermediates, in floats on the
// thread's stack.
constexpr std::int64_t kMaxLocalFloats = 16 * 1024;

// Several schedules as one kernel (a softmax: the row's max, the sum of exponentials, the
// quotients): each stage's first loop is the same variable, unsplit and of one kind (the loop
// they share, parallel over rows, say), and one iteration of it runs the stages in order. A
// buffer a stage writes and a later one reads is an intermediate: indexed first by the shared
// variable alone, each iteration's part of it lives in an array on the thread's stack (an Alloc
// of a buffer that is not registers), never in memory the caller sees. Arguments: the stages'
// other inputs, each once in first-seen order, then the last stage's output. No stage may pack
// or stage an input. Throws std::invalid_argument naming the fault.
LoweredKernel lower(const std::vector<Schedule>& stages);

// Indented text of the IR, for tests and `docs/`.
std::string dump(const StmtPtr& s);

}  // namespace wpk::codegen
