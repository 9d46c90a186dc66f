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
  For,    // var over [0, extent), kind; body[0]. With `dynamic`: over [0, ceil(dynamic / divisor))
  Tail,   // var < full ? body[0] : body[1] (a split's remainder). With `dynamic`: var < dynamic /
          // divisor ? body[0] : body[r] where r = dynamic % divisor (one body per remainder)
  Alloc,  // buffer: a register buffer, live for the rest of the enclosing block
  Store,  // buffer[index] = value
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
  Buffer buffer;            // Alloc, Store
  std::vector<Affine> index;
  Expr value;
};

struct LoweredKernel {
  std::string name;          // the compute's
  std::string schedule;      // Schedule::describe()
  std::vector<Buffer> args;  // inputs, then the output
  std::vector<Var> dynamic;  // the kernel's extents argument, in order
  StmtPtr body;
};

// Checks the schedule's rules (schedule.hpp) and lowers it; throws std::invalid_argument.
LoweredKernel lower(const Schedule& schedule);

// Indented text of the IR, for tests and `docs/`.
std::string dump(const StmtPtr& s);

}  // namespace wpk::codegen
