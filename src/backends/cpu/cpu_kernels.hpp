#pragma once
// The cpu backend's op families (cpu_backend.cpp dispatches to them): each says why it cannot
// run a node ("" = it can) and builds the kernel. The kernels' own code lives beside them
// (row_broadcast.hpp, stream_conv.hpp, ...).
#include <memory>
#include <string>

#include "backends/kernel.hpp"

namespace wpk::cpu {

// x86-64 builds carry AVX-512 and AVX2 copies of a loop, picked by the CPU at load.
#if defined(__x86_64__) && defined(__GNUC__)
#define WPK_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WPK_CPU_CLONES
#endif
// The vectors the WPK_CPU_CLONES copy this CPU runs uses.
int clones_vector_bits();

// Fails naming the node when a run-time tensor is not float32.
void require_f32(const KernelContext& ctx, const Tensor& t, const char* what);

// y = the residual input `index`, which a kernel then accumulates onto; nothing to copy when the
// memory plan gave y the residual's own bytes. Fails naming the node on a dtype or shape mismatch.
void copy_residual(const KernelContext& ctx, std::size_t index, Tensor& y);

std::string attention_unsupported(const Node& node, const Graph& graph);  // attention_kernel.cpp
// Configs kernel=avx2 (wpk's AVX2 kernel) and, where the CPU runs it, kernel=avx512; "" is the first.
std::vector<std::string> attention_configs();
std::unique_ptr<Kernel> make_attention(const Node& node, const Graph& graph, const std::string& config);
std::optional<KernelProfile> describe_attention(const std::string& config);

std::string conv_unsupported(const Node& node, const Graph& graph);  // conv_kernel.cpp
// The configs (conv_config.hpp) this CPU runs the node's conv in, the usual favourite first.
std::vector<std::string> conv_configs(const Node& node, const Graph& graph);
// `config` "" is the first of conv_configs.
std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph, const std::string& config);
// How `config` computes inputs of these shapes; nullopt when it does not run them.
std::optional<KernelProfile> describe_conv(const Node& node, const std::string& config, const InputShapes& shapes,
                                           int threads);

std::string matmul_unsupported(const Node& node, const Graph& graph);  // matmul_kernel.cpp
std::vector<std::string> matmul_configs();
constexpr const char* kMatMulKernelName = "f32_matmul__avx2_6x16";
std::unique_ptr<Kernel> make_matmul(const Node& node, const Graph& graph, const std::string& config);
std::optional<KernelProfile> describe_matmul(const Node& node, const std::string& config, const InputShapes& shapes,
                                             int threads);

// QLinearConv and com.wpk QLinearConvAdd, com.wpk MatMulIntegerToFloat on wpk's exact 8-bit
// kernel (quantized_kernels.cpp), in the arithmetics its configs name ("" is the first);
// describe_* as describe_conv.
std::vector<std::string> quantized_kernel_names();
std::vector<std::string> quantized_configs();
std::string quantized_conv_unsupported(const Node& node, const Graph& graph);
std::unique_ptr<Kernel> make_quantized_conv(const Node& node, const Graph& graph, const std::string& config);
std::optional<KernelProfile> describe_quantized_conv(const Node& node, const Graph& graph, const std::string& config,
                                                    const InputShapes& shapes);
std::string quantized_product_unsupported(const Node& node, const Graph& graph);
std::unique_ptr<Kernel> make_quantized_product(const Node& node, const Graph& graph, const std::string& config);
std::optional<KernelProfile> describe_quantized_product(const Node& node, const Graph& graph, const std::string& config,
                                                       const InputShapes& shapes);

std::string concat_unsupported(const Node& node, const Graph& graph);  // concat_kernel.cpp
std::unique_ptr<Kernel> make_concat(const Node& node, const Graph& graph);

std::string concat_batchnorm_unsupported(const Node& node, const Graph& graph);  // concat_batchnorm.cpp
std::unique_ptr<Kernel> make_concat_batchnorm(const Node& node, const Graph& graph);



std::string quantize_unsupported(const Node& node, const Graph& graph);  // quantize_kernel.cpp
std::unique_ptr<Kernel> make_quantize(const Node& node, const Graph& graph);
std::string dynamic_quantize_unsupported(const Node& node, const Graph& graph);  // quantize_kernel.cpp
std::unique_ptr<Kernel> make_dynamic_quantize(const Node& node, const Graph& graph);
std::string qlinear_add_unsupported(const Node& node, const Graph& graph);  // quantize_kernel.cpp
std::unique_ptr<Kernel> make_qlinear_add(const Node& node, const Graph& graph);

std::string tanh_unsupported(const Node& node, const Graph& graph);  // tanh_kernel.cpp
std::unique_ptr<Kernel> make_tanh(const Node& node, const Graph& graph);
std::string tanh_kernel_name();  // "f32_tanh__sse2": the vectors Eigen was built for

std::string row_broadcast_unsupported(const Node& node, const Graph& graph);  // row_broadcast_kernel.cpp
std::unique_ptr<Kernel> make_row_broadcast(const Node& node, const Graph& graph);

}  // namespace wpk::cpu
