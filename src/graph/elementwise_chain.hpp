#pragma once
// com.wpk ElementwiseChain (graph/fused_ops.hpp): its steps, checked, for the pass that forms
// chains, the group splitter and the kernels that compute a chain as one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wpk/graph.hpp"

namespace wpk {

// True for the ONNX ops (default domain) a chain may hold; unary ones read one operand.
bool chain_op(const std::string& op_type);
bool chain_op_unary(const std::string& op_type);

struct ChainStep {
  std::string op;
  std::int64_t first = 0, second = -1;  // operand values (fused_ops.hpp's numbering); -1: none
};

// The shape numpy broadcasting makes of `shapes` (a chain's output from its inputs', a binary
// step's from its operands'), or nullopt when they do not broadcast.
std::optional<Shape> broadcast_shape(const std::vector<Shape>& shapes);

// The chain's steps; throws Error(InvalidModel) naming the fault when its attributes do not
// make a chain of `inputs` inputs (unknown op, operand count, a value read before it exists).
std::vector<ChainStep> chain_steps(const Node& chain);

}  // namespace wpk
