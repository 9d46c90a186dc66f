#pragma once
// The CUDA backend's generated kernels, written in the kernel DSL (src/codegen) and printed for
// CUDA: convolutions and products with their epilogues and row statistics (element-wise kernels
// are in elementwise_kernels.hpp). Needs no device: the tests emulate and NVRTC-compile what
// these print.
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "backends/cuda/elementwise_kernels.hpp"
#include "codegen/cuda_printer.hpp"
#include "codegen/tensor_expr.hpp"
#include "search/gpu_cost_model.hpp"
#include "search/space.hpp"
#include "wpk/graph.hpp"
#include "wpk/tensor.hpp"

namespace wpk::cuda {

// A 2-D NCHW convolution's geometry (groups included) and the schedule knobs of its generated
// kernel: a thread computes regs_oc output channels x regs_x output columns in registers, a
// block's threads_oc x threads_y x threads_x threads cover a tile of channels, output rows and
// columns; with stage_ic, the block copies the input rows and weights its tile reads into shared
// memory, stage_ic input channels at a time, and its threads read them from there.
struct ConvGeometry {
  Shape x, w, y;  // [N, C, H, W], [O, C / groups, KH, KW], [N, O, OH, OW]
  std::int64_t groups = 1;
  std::vector<std::int64_t> pads, strides, dilations;  // 2 each (pads: begin = end)
};
// A Conv or FusedConv node of `graph` (static shapes, pads equal on both sides) as a geometry,
// and what its epilogue adds.
ConvGeometry conv_geometry(const Node& n, const Graph& graph);
struct ConvEpilogue {
  bool bias = false, residual = false;
  std::string activation;
  std::vector<float> params;
};
ConvEpilogue conv_epilogue(const Node& n);
// "conv_N_C_H_W_O_CG_KH_KW_PH_PW_SH_SW_DH_DW_gG" then b (bias), z (residual), the activation and
// its parameters: how tuning records and logs name a convolution.
std::string conv_signature(const ConvGeometry& g, const ConvEpilogue& e);

struct CudaConvConfig {
  std::int64_t threads_oc = 8, regs_oc = 4, threads_x = 16, regs_x = 2;
  std::int64_t stage_ic = 0;  // 0: every thread reads global memory itself
  std::int64_t threads_y = 1;  // output rows per block, a thread each
  std::string describe() const;
};
// The knobs and their values, a point of them as a config, and the points worth trying (at most
// 1024 threads, at least one warp where the convolution has that much parallelism, at most 32
// accumulators a thread, staged tiles within a block's shared memory).
std::vector<search::Knob> cuda_conv_knobs();
CudaConvConfig conv_config_at(const search::Space& space, const search::Point& p);
bool cuda_conv_config_valid(const ConvGeometry& g, const CudaConvConfig& c);

// The generated convolution's work as the GPU cost model sees it: per thread, a reduction over
// channels and kernel taps, each step regs_oc x regs_x FMAs and the cache lines a warp's loads
// touch (a line per distinct output channel the warp holds for the weights, the input row's
// span for the activations).
search::GpuLoop conv_loop(const ConvGeometry& g, const CudaConvConfig& c);
search::GpuLaunch conv_launch(const ConvGeometry& g, const CudaConvConfig& c, int registers);
// Before compiling: the registers a schedule will likely take (its sums, its operands, indexing).
int estimated_conv_registers(const CudaConvConfig& c);
// The shared memory the schedule's staged tiles take (0 without stage_ic).
std::int64_t conv_shared_bytes(const ConvGeometry& g, const CudaConvConfig& c);
// The GPU cost model's seconds for the schedule taking `registers` per thread.
double predict_conv_seconds(const search::GpuSpec& gpu, const ConvGeometry& g, const CudaConvConfig& c, int registers);

// y = act(conv(x, w) + bias + z), the epilogue fused: the kernel's buffers are x, w, then bias
// ([O]) and z (y's shape) when given, then y.
codegen::PrintedCudaKernel conv_kernel(const ConvGeometry& g, const CudaConvConfig& c, bool bias, bool residual,
                                       const std::string& activation, const std::vector<float>& params);

// A depth-first group: the depthwise convolution `dw` (one channel per group, its bias and
// activation in dw_epilogue, no residual) and the convolution of one group that reads its output,
// as one kernel: the pointwise convolution's schedule (stage_ic > 0) computes the depthwise
// values its block needs in shared memory, stage_ic channels at a time, and never stores them.
// The kernel's buffers: dw's input, its weights ([C, KH, KW]), its bias ([C]) when it has one,
// then the pointwise convolution's as conv_kernel's (its input excepted).
bool depth_first_pair(const ConvGeometry& dw, const ConvEpilogue& dw_epilogue, const ConvGeometry& pw);
codegen::PrintedCudaKernel depth_first_conv_kernel(const ConvGeometry& dw, const ConvEpilogue& dw_epilogue, const ConvGeometry& pw,
                                                   const CudaConvConfig& c, bool bias, bool residual, const std::string& activation,
                                                   const std::vector<float>& params);

// The depth-first groups of a region's body: a depthwise convolution (Conv or FusedConv, as
// depth_first_pair) whose output only a convolution of one group reads, as its input, and which
// is no output of the body. By node index; a node is in one pair at most.
struct DepthFirstNodes {
  std::size_t depthwise = 0, pointwise = 0;
};
std::vector<DepthFirstNodes> depth_first_groups(const Graph& body);

// A (batched) product Y[b] = A[b] B[b or shared] with its epilogue act(acc + bias[n] + Z), and
// the schedule knobs of its generated kernel: a thread computes regs_m x regs_n outputs in
// registers, a block's threads_m x threads_n threads a tile of rows and columns; with stage_k, the
// block copies the rows of A and columns of B its tile reads into shared memory, stage_k steps of
// the reduction at a time.
struct ProductGeometry {
  std::int64_t batch = 1, m = 1, n = 1, k = 1;
  bool b_batched = false;  // B has one matrix per batch entry (else one shared)
};
struct CudaProductConfig {
  std::int64_t threads_m = 8, regs_m = 4, threads_n = 16, regs_n = 2;
  std::int64_t stage_k = 0;  // 0: every thread reads global memory itself
};
std::vector<search::Knob> cuda_product_knobs();
CudaProductConfig product_config_at(const search::Space& space, const search::Point& p);
int estimated_product_registers(const CudaProductConfig& c);
std::int64_t product_shared_bytes(const ProductGeometry& g, const CudaProductConfig& c);
bool cuda_product_config_valid(const ProductGeometry& g, const CudaProductConfig& c);
search::GpuLoop product_loop(const ProductGeometry& g, const CudaProductConfig& c);
search::GpuLaunch product_launch(const ProductGeometry& g, const CudaProductConfig& c, int registers);
// Buffers: A, B, then bias ([n]) and Z (Y's shape) when given, then Y.
codegen::PrintedCudaKernel product_kernel(const ProductGeometry& g, const CudaProductConfig& c, bool bias, bool residual,
                                          const std::string& activation, const std::vector<float>& params);

// LayerNormalization's row statistics over rows x cols, in two steps so that many threads share
// a row: `parts` threads a row each sum the columns j, j + parts, ... (a warp reads consecutive
// columns) into partial[r, j], then a thread per row adds its parts. The sums
// are of x for the mean, of (x - mean[r])^2 for rstd[r] = 1 / sqrt(var[r] + epsilon).
std::int64_t row_parts(std::int64_t cols);  // a power of two dividing cols, near its square root
// Buffers: x, mean (when centred), partial [rows, parts].
codegen::PrintedCudaKernel row_partial_sums_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts, bool centred);
// Buffers: partial, then mean or rstd ([rows]).
codegen::PrintedCudaKernel row_mean_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts);
codegen::PrintedCudaKernel row_rstd_kernel(std::int64_t rows, std::int64_t cols, std::int64_t parts, float epsilon);

// FusedConv's and FusedMatMul's `activation` (graph/fused_ops.hpp) applied to x; x itself for "".
// Throws Error(Unsupported) for one the DSL cannot express (the erf form of Gelu).
codegen::Expr activation_expr(const std::string& activation, const std::vector<float>& params, codegen::Expr x);
bool activation_expressible(const std::string& activation);

}  // namespace wpk::cuda
