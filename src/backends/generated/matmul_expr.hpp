#pragma once
// The products the gen backend writes: MatMul, Gemm and com.wpk FusedMatMul of float32 A
// [..., K] (any number of rows, known when the kernel runs) by a 2-D B of shape known at load,
// and pointwise convolutions of NHWC activations (1x1, stride 1, unpadded, ungrouped: pixels by
// the [C_out, C_in] weights transposed), with the bias, residual and activation of the node fused
// into the store. As a tensor
// expression (codegen/tensor_expr.hpp) and a register-tiled schedule whose tile and parallel
// loop are the config's knobs.
#include <optional>
#include <string>
#include <vector>

#include "backends/generated/epilogue.hpp"
#include "codegen/schedule.hpp"
#include "wpk/graph.hpp"

namespace wpk::gen {

// Bias: input 2, [N] or [1, N]; residual: input 3, the output's shape.
struct MatMulSpec : Epilogue {
  std::string op = "matmul";  // or "conv1x1_nhwc": the kernel's name says which
  std::int64_t rank = 0;      // of A a run must pass (0: any)
  std::int64_t k = 0, n = 0;
  bool transposed_b = false;  // Gemm transB: B is [N, K]
};

// The node as a product this backend writes, or why not (`why` set).
std::optional<MatMulSpec> matmul_spec(const Node& node, const Graph& graph, std::string& why);

// A register tile of `rows` rows by `vectors` SIMD vectors of columns, the parallel loop over row
// tiles or over column tiles: "rows=4,vectors=2,parallel=rows". With prefetch (",prefetch=1":
// products with constant B, and convs), the next panel of packed weights is prefetched while one
// is computed (codegen::Schedule::prefetch_next): a gain where the weights stream from memory, a
// cost where they stay cached. With a block of the reduction (",kblock=256": products with
// constant B, parallel over column tiles, not prefetching), the product runs k_block values of
// K at a time over all its tiles, the partial sums kept in the output between blocks
// (codegen::Schedule's outer reduction): each thread's A rows of one block stay in its private
// cache while it walks its column tiles, where without blocks A streams from memory once per
// column tile. With ",prefetch_residual=1" (a fused residual, no block of K), each tile asks for
// the residual it adds as it starts its reduction (codegen::Schedule::prefetch_epilogue): the
// tile's stores wait for it otherwise where it comes from memory (a batch's activations).
struct MatMulConfig {
  int rows = 4, vectors = 2;
  bool parallel_cols = false;
  bool prefetch = false;
  bool prefetch_residual = false;
  int k_block = 0;  // 0: the whole of K at once
  std::string text() const;
  static std::optional<MatMulConfig> parse(const std::string& text);
};

// The configs whose tile fits the target's vector registers (accumulators, a row of B, a
// broadcast of A), the usual favourite first.
std::vector<MatMulConfig> matmul_configs(int vector_registers);
// The reduction blocks a product over `k` may take (MatMulConfig::k_block), each at most k / 2.
std::vector<int> k_blocks(std::int64_t k);

// The product as a tensor expression; its arguments: A, B, [bias], [residual], then the output.
codegen::Compute matmul_compute(const MatMulSpec& spec);
// `config` applied to it for vectors of `lanes` floats; with pack_b, B is read in column panels of
// the tile's width (a constant packed once: every step of the reduction reads one contiguous row
// of a panel, whichever way B is stored).
codegen::Schedule matmul_schedule(const codegen::Compute& c, const MatMulConfig& config, int lanes, bool pack_b);

}  // namespace wpk::gen
