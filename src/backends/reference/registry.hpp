#pragma once
// The reference backend's op table: the one place that says which ops wpk runs on the CPU
// reference path, from which opset, and which function runs them. Every kernel group file
// exposes a register_* function; reference_backend.cpp calls them all explicitly (no static
// initializers, so a static link cannot drop an op).
#include <map>
#include <string>

#include "backends/kernel.hpp"

namespace wpk::reference {

using KernelFn = void (*)(KernelContext&);

struct OpEntry {
  KernelFn fn = nullptr;
  int min_inputs = 0;
  int max_inputs = 0;   // -1 for variadic
  int since_opset = 1;  // earliest opset whose semantics the kernel implements
};

// Keys: the ONNX op type ("Conv") for the default domain, "<domain>:<op>" otherwise
// ("com.wpk:FusedConv", see graph/fused_ops.hpp).
std::string table_key(const Node& node);

class OpTable {
 public:
  void add(const std::string& op_type, OpEntry entry);
  const OpEntry* find(const std::string& op_type) const;
  const std::map<std::string, OpEntry>& entries() const { return entries_; }

 private:
  std::map<std::string, OpEntry> entries_;
};

// One per kernel group file.
void register_elementwise(OpTable& t);    // elementwise.cpp: unary math, activations
void register_binary(OpTable& t);         // binary.cpp: arithmetic, comparison, logic, Where, variadic
void register_conv_pool(OpTable& t);      // conv.cpp, pool.cpp
void register_linalg(OpTable& t);         // matmul.cpp: MatMul, Gemm, Einsum
void register_normalization(OpTable& t);  // normalization.cpp
void register_reduce(OpTable& t);         // reduce.cpp, softmax.cpp: reductions, ArgMax, Softmax...
void register_shape_ops(OpTable& t);      // shape_ops.cpp + layout_ops.cpp: Reshape, Transpose, Pad, Trilu...
void register_index_ops(OpTable& t);      // index_ops.cpp + select_ops.cpp: Gather*, Scatter*, TopK, OneHot...
void register_misc(OpTable& t);           // misc.cpp + resize.cpp: Cast, Resize, Range...
void register_fused(OpTable& t);          // fused.cpp: the com.wpk ops of graph/fused_ops.hpp

const OpTable& op_table();

}  // namespace wpk::reference
