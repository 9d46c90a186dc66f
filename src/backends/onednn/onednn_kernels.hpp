#pragma once
// The oneDNN backend's kernels: each op family says why it cannot run a node ("" = it can)
// and builds the kernel.
#include <optional>

#include "backends/onednn/onednn_common.hpp"
#include "backends/op_support.hpp"

namespace wpk::onednn {

// The declared shape of a value with symbolic dims taken as 1 (the batch-1 case a session is
// most often run at); nullopt when the rank or a dim is unknown.
std::optional<Shape> static_shape(const Graph& graph, ValueId v);
// True when every dim of v is a number: its shape is the same at every run.
bool fully_static(const Graph& graph, ValueId v);

// Compiles a kernel for its declared shapes at load. A failure is not an error: the declared
// shape may be wrong, and the first run compiles for the real one.
template <typename WarmUp>
void try_warm_up(WarmUp&& warm_up) {
  try {
    warm_up();
  } catch (const Error&) {
  } catch (const dnnl::error&) {
  }
}

// The float32 4-D input of a conv or pooling kernel; fails naming the node otherwise.
const Tensor& image_input(const KernelContext& ctx);

std::string conv_unsupported(const Node& node, const Graph& graph);  // conv.cpp
// Its algorithms for the node as configs ("algorithm=direct" first, the rest where oneDNN has
// them: "algorithm=direct,layout=blocked", "algorithm=winograd", "algorithm=matmul").
std::vector<std::string> conv_configs(const Node& node, const Graph& graph);
// How `config` computes inputs of these shapes, for the cost model.
std::optional<KernelProfile> describe_conv(const Node& node, const std::string& config, const InputShapes& shapes,
                                           int threads);
// `config` "" is algorithm=direct.
std::unique_ptr<Kernel> make_conv(const Node& node, const Graph& graph, const std::string& config);

std::string qlinear_conv_unsupported(const Node& node, const Graph& graph);  // qlinear_conv.cpp
// "arithmetic=int8" first where oneDNN's integer sums are exact here, then "arithmetic=float".
std::vector<std::string> qlinear_conv_configs(const Node& node, const Graph& graph);
// `config` "" is the first of qlinear_conv_configs.
std::unique_ptr<Kernel> make_qlinear_conv(const Node& node, const Graph& graph, const std::string& config);

std::string matmul_integer_unsupported(const Node& node, const Graph& graph);  // matmul_integer.cpp
// As qlinear_conv_configs: "arithmetic=int8" where exact here, then "arithmetic=float".
std::vector<std::string> matmul_integer_configs(const Node& node, const Graph& graph);
std::unique_ptr<Kernel> make_matmul_integer(const Node& node, const Graph& graph, const std::string& config);

std::string conv_integer_unsupported(const Node& node, const Graph& graph);  // conv_integer.cpp
// As qlinear_conv_configs: "arithmetic=int8" where exact here, then "arithmetic=float".
std::vector<std::string> conv_integer_configs(const Node& node, const Graph& graph);
std::unique_ptr<Kernel> make_conv_integer(const Node& node, const Graph& graph, const std::string& config);

std::string matmul_unsupported(const Node& node, const Graph& graph);  // matmul.cpp
std::unique_ptr<Kernel> make_matmul(const Node& node, const Graph& graph);
// How its matmul computes a product with constant B, for the cost model; nullopt otherwise.
std::optional<KernelProfile> describe_matmul(const Node& node, const Graph& graph, const InputShapes& shapes);

std::string transpose_unsupported(const Node& node, const Graph& graph);  // transpose.cpp
std::unique_ptr<Kernel> make_transpose(const Node& node, const Graph& graph);

std::string attention_unsupported(const Node& node, const Graph& graph);  // attention.cpp
std::unique_ptr<Kernel> make_attention(const Node& node, const Graph& graph);

std::string layernorm_unsupported(const Node& node, const Graph& graph);  // layernorm.cpp
std::unique_ptr<Kernel> make_layernorm(const Node& node, const Graph& graph);

std::string binary_unsupported(const Node& node, const Graph& graph);  // binary.cpp
std::unique_ptr<Kernel> make_binary(const Node& node, const Graph& graph);
// The dense row-major format tag of a rank (a, ab, abc, ...).
Tag plain_tag(std::size_t rank);

std::string batchnorm_unsupported(const Node& node, const Graph& graph);  // batchnorm.cpp
std::unique_ptr<Kernel> make_batchnorm(const Node& node, const Graph& graph);

bool is_eltwise(const Node& node);  // eltwise.cpp
std::string eltwise_unsupported(const Node& node, const Graph& graph);
std::unique_ptr<Kernel> make_eltwise(const Node& node, const Graph& graph);

std::string softmax_unsupported(const Node& node, const Graph& graph);  // softmax.cpp
std::unique_ptr<Kernel> make_softmax(const Node& node, const Graph& graph);

std::string concat_unsupported(const Node& node, const Graph& graph);  // concat.cpp
std::unique_ptr<Kernel> make_concat(const Node& node, const Graph& graph);

std::string pool_unsupported(const Node& node, const Graph& graph);  // pool.cpp
std::unique_ptr<Kernel> make_pool(const Node& node, const Graph& graph);

}  // namespace wpk::onednn
