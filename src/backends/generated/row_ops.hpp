#pragma once
// Softmax and LayerNormalization over the last axis as the gen backend writes them: kernels of
// several computes (codegen::lower of stages) sharing one parallel loop over rows, each row's
// reductions computed in SIMD vectors of partial results (the lanes past the row's end read the
// reduction's identity) and kept, with the row's max, sum, mean and deviation, on the thread's
// stack while the row is in cache. The row's length is fixed at load, the number of rows (the
// product of the other dims) when the kernel runs.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "codegen/cpp_printer.hpp"
#include "codegen/schedule.hpp"

namespace wpk::gen {

struct RowOpSpec {
  bool softmax = true;  // else layer normalization: input 1 the scale, input 2 (if any) the bias
  std::int64_t n = 0;   // the row's length
  float epsilon = 1e-5f;
  bool bias = false;
};

// The node as a row op this backend writes, or why not (`why` set).
std::optional<RowOpSpec> row_op_spec(const Node& node, const Graph& graph, std::string& why);
// "vectors=1|2|4": the partial results' width, in SIMD vectors (more hide the reductions' latency).
std::vector<std::string> row_op_configs();
// The stages for `config` at `lanes` floats a vector (exposed for tests); throws
// std::invalid_argument for a config it does not know.
std::vector<codegen::Schedule> row_op_stages(const RowOpSpec& spec, const std::string& config, int lanes);
// "f32_softmax__avx2_v2", "f32_layernorm__avx512_v1".
std::string row_op_kernel_name(const RowOpSpec& spec, const std::string& config, codegen::CpuTarget target);
std::unique_ptr<Kernel> make_row_op(const RowOpSpec& spec, const std::string& config);

}  // namespace wpk::gen
