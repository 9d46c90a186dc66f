#pragma once
// The narrow interface every backend plugs in through (see DESIGN.md, "a backend plugs in").
//
//   Backend::supports(node, graph)  -> can it run this node (op, dtypes, attributes)?
//   Backend::prepare(node, graph)   -> a Kernel: weights packed, code compiled, ready to run
//   Kernel::run(ctx)                -> one execution; must be safe to call from many threads
//
// Kernels read inputs and write outputs only through KernelContext, so a later runtime can hand
// them arena memory, other layouts or fused neighbours without changing any kernel.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/limits.hpp"
#include "wpk/error.hpp"
#include "wpk/graph.hpp"
#include "wpk/tensor.hpp"

namespace wpk {

class Session;

namespace codegen {
struct KernelRecipe;
struct KernelSource;
struct LoadedKernel;
}  // namespace codegen

// "node 'conv1' (Conv): " — the prefix every node error starts with.
std::string node_label(const Node& node);
// The initializer `node` reads as input i; nullptr when it is omitted or not a constant.
const Tensor* constant_input(const Node& node, const Graph& graph, std::size_t i);

class KernelContext {
 public:
  // Allocates output memory; the default makes owned, zero-filled tensors.
  using Allocator = std::function<Tensor(DType, const Shape&)>;
  // Like Allocator, but told which output it allocates, so a memory plan can place each output
  // at its own offset in the run's arena. Such memory is NOT zeroed: kernels write every byte.
  using OutputAllocator = std::function<Tensor(std::size_t output, DType, const Shape&)>;

  KernelContext(const Node& node, std::vector<const Tensor*> inputs, Allocator allocator = {});
  // Reads `count` inputs from `inputs` and writes the outputs into `outputs` (made one empty
  // tensor per output of the node), both the caller's to keep while the context lives: the
  // runtime's steps reuse them, with nothing to allocate per step.
  KernelContext(const Node& node, const Tensor* const* inputs, std::size_t count, std::vector<Tensor>& outputs);
  // inputs_ and outputs_ may point into the context's own members.
  KernelContext(const KernelContext&) = delete;
  KernelContext& operator=(const KernelContext&) = delete;

  const Node& node() const { return node_; }
  // Opset of the default ONNX domain the model was written for; ops whose signature changed
  // across opsets (Slice, Split, Clip, Pad, Reduce*, ...) branch on it.
  std::int64_t opset() const { return opset_; }
  void set_opset(std::int64_t v) { opset_ = v; }
  std::size_t num_inputs() const { return num_inputs_; }
  std::size_t num_outputs() const { return node_.outputs.size(); }
  // True when input i is given (optional inputs may be omitted or beyond the end).
  bool has_input(std::size_t i) const { return i < num_inputs_ && inputs_[i] != nullptr; }
  // Input i; throws a node-naming Error when it is missing.
  const Tensor& input(std::size_t i) const;
  // The session's shape bounds. allocate_output checks every output against them; a kernel that
  // builds a shape from data (Reshape's target, ConstantOfShape, ...) checks its rank first.
  const ShapeLimits& limits() const { return limits_; }
  void set_limits(const ShapeLimits& limits) { limits_ = limits; }
  // Creates output i with the given dtype and shape and returns it for writing; a shape over
  // the limits is an Error (ResourceExhausted) before anything is allocated.
  Tensor& allocate_output(std::size_t i, DType dtype, const Shape& shape);
  // Sets output i to an existing tensor (e.g. a view sharing an input's bytes).
  void set_output(std::size_t i, Tensor t);
  // True when output i is requested by the graph (optional outputs may be unused).
  bool wants_output(std::size_t i) const;

  std::vector<Tensor>& outputs() { return *outputs_; }
  // Takes precedence over the constructor's Allocator (the runtime sets it per step).
  void set_output_allocator(OutputAllocator a) { output_allocator_ = std::move(a); }

  // Errors that name this node and op.
  [[noreturn]] void fail(ErrorCode code, const std::string& what) const;

  // A kernel that moves its data into another layout for the work and back (oneDNN's Winograd
  // convolution reads nChw16c) says so here, for profiles and `wpk info --optimized`.
  void note_internal_layout(const char* layout, int reorders) {
    internal_layout_ = layout;
    internal_reorders_ = reorders;
  }
  const char* internal_layout() const { return internal_layout_; }
  int internal_reorders() const { return internal_reorders_; }

 private:
  const Node& node_;
  std::vector<const Tensor*> owned_inputs_;  // empty when the caller lends them
  const Tensor* const* inputs_ = nullptr;
  std::size_t num_inputs_ = 0;
  std::vector<Tensor> owned_outputs_;  // unused when the caller lends them
  std::vector<Tensor>* outputs_ = nullptr;
  Allocator allocator_;
  OutputAllocator output_allocator_;
  std::int64_t opset_ = 17;
  ShapeLimits limits_;
  const char* internal_layout_ = nullptr;
  int internal_reorders_ = 0;
};

// How a kernel computes, for the cost model (search/cost_model.hpp) that picks among a node's
// candidates before any is measured.
struct KernelProfile {
  std::string name;          // "f32_conv_nhwc__avx2_6x16": dtype, op, ISA, tile; "" for a library's
  int vector_bits = 32;      // the widest vectors its inner loops use
  double efficiency = 0.25;  // the share of those vectors' peak it sustains where compute-bound
  double work_scale = 1;     // the share of the op's arithmetic it does (a Winograd conv: under 1)
  double extra_bytes = 0;    // bytes it moves beyond the op's inputs and outputs (reorders, ...;
                             // negative: fewer, as weights packed in bf16)
  bool overlaps_memory = false;  // prefetches while it computes: memory and compute time overlap
  // Of the bytes it moves, those it prefetches while it computes (weights fetched a panel ahead):
  // their transfer costs only what it takes beyond the compute time.
  double prefetched_bytes = 0;
  // Its packed weights depend on the input shape (oneDNN's Winograd: another transform from batch
  // 2 on), so with symbolic dims it keeps the loaded weights beside its packing.
  bool shape_specific_weights = false;
  // What one call costs whatever its size (a library's argument maps and dispatch): on tiny
  // tensors it is the whole cost.
  double call_seconds = 0;
  // Splits its work over the node's threads; false: runs on the calling thread alone.
  bool multithreaded = true;
  // How many times a call starts and joins its threads (a product in blocks of K: once a block).
  int parallel_regions = 1;
  // Set by a kernel made of other kernels: the sum of its parts' predicted seconds, which the
  // cost model takes instead of its own estimate for the node's workload.
  double predicted_seconds = 0;
};

// Each input's shape, as the graph declares it (symbolic dims as 1) or as a run passes it;
// nullopt for an omitted input or an unknown shape.
using InputShapes = std::vector<std::optional<Shape>>;

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) const = 0;
  // False when the kernel cannot run these inputs (a shape its code does not cover): another
  // candidate then runs this input-shape signature. Inputs as run() would see them.
  virtual bool runs(const std::vector<const Tensor*>& /*inputs*/) const { return true; }
  virtual KernelProfile profile() const { return {}; }
  // False when it runs on the calling thread alone, whatever threads its node is given: a run of
  // such kernels leaves the session's other CPUs idle (RunPool lets its caller poll longer).
  virtual bool multithreaded() const { return true; }
  // True when the kernel keeps its own copy of constant input i (weights packed into its
  // backend's layout) and never reads it from the context: the session may then free the
  // graph's copy, and runs pass no tensor for it.
  virtual bool owns_input(std::size_t /*i*/) const { return false; }
  // A generated kernel's recipe while it has no code: the plan finds its code in the kernel store
  // by the recipe, else by its source, else compiles the source (runtime/kernel_compilation.hpp),
  // and hands the kernel its code (set_code) before any run. Null for kernels that need no
  // compiling, and once the code is set. A kernel whose code cannot be had is dropped from its step.
  virtual const codegen::KernelRecipe* recipe() const { return nullptr; }
  // Its source, printed at the first call (it costs what a recipe lookup saves): asked only when
  // recipe() is set and the store does not know the recipe.
  virtual const codegen::KernelSource* source() const { return nullptr; }
  virtual void set_code(std::shared_ptr<const codegen::LoadedKernel> /*code*/) {}
  // The sessions a control-flow kernel runs its bodies on (runtime/control_flow.hpp): the
  // enclosing session counts their background compilation as its own.
  virtual std::vector<const Session*> body_sessions() const { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Empty string when supported; otherwise why not (shown by `wpk info`).
  virtual std::string why_unsupported(const Node& node, const Graph& graph) const = 0;
  virtual std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const = 0;
  // The configurations this backend can prepare `node` in (an algorithm, a layout, ...), each as
  // "knob=value,..." (search/space.hpp's form): the first is its default, and prepare(node,
  // graph) prepares it. One empty string when the backend has no choice to offer for the node.
  virtual std::vector<std::string> configs(const Node& /*node*/, const Graph& /*graph*/) const { return {""}; }
  // How the kernel `config` would compute inputs of these shapes on `threads` threads, without
  // preparing it: the cost model ranks candidates by this before any is prepared. nullopt: ask
  // the prepared kernel (Kernel::profile).
  virtual std::optional<KernelProfile> describe(const Node& /*node*/, const Graph& /*graph*/,
                                                const std::string& /*config*/, const InputShapes& /*shapes*/,
                                                int /*threads*/) const {
    return std::nullopt;
  }
  // What the cost model assumes of a candidate this backend does not describe and that is not
  // prepared yet (prepared, the kernel's own profile() answers). Not a description: trial logs
  // record no prediction for it and calibration leaves it alone.
  virtual KernelProfile undescribed_profile(const Node& /*node*/) const { return {}; }
  // Prepares `config` (one of configs()); "" is the default.
  virtual std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph, const std::string& config) const {
    if (!config.empty()) throw Error(ErrorCode::Internal, node_label(node) + name() + " has no configuration '" + config + "'");
    return prepare(node, graph);
  }
  // The names its kernels report in KernelProfile::name, for SessionOptions::disabled_kernels
  // to check "backend:kernel" against (a library's own kernels have none).
  virtual std::vector<std::string> kernel_names() const { return {}; }
  // Library/code version: part of every on-disk cache key (tuning records), so upgrading a
  // backend invalidates what was measured with the old one.
  virtual std::string version() const { return ""; }
  // The memory planner may give an elementwise op (its list is in runtime/memory_recorder.cpp)
  // an output that shares the bytes of a same-sized input nothing reads afterwards. A backend
  // whose kernel for `node` cannot compute in place returns false.
  virtual bool runs_in_place(const Node& /*node*/) const { return true; }
  // True when the kernel for a com.wpk FusedConv/FusedMatMul with a residual Z (input 3), in
  // `config`, reads Z's element i before it writes output element i, so the memory planner may
  // give the output Z's bytes when nothing reads Z afterwards. Off unless a backend says so: a
  // kernel that writes the product (or part of it) first and adds Z afterwards would read
  // overwritten bytes.
  virtual bool accumulates_into_residual(const Node& /*node*/, const std::string& /*config*/) const { return false; }
  // True when its kernel for `node` (marked compute_precision = "bf16") reads a bfloat16 input 0
  // or fused residual and writes a bfloat16 output 0 where the graph's values are so
  // (graph/fused_ops.hpp): only such backends are offered a node with bfloat16 activations.
  virtual bool takes_bf16_activations(const Node& /*node*/, const Graph& /*graph*/) const { return false; }
  // True when its kernels come as source to compile (Kernel::source) before they can run: the
  // plan then prepares none only to stand by as a fallback (preparing one prints its source and
  // packs its weights; compiling it would cost every load).
  virtual bool generates_code() const { return false; }
  // False when its kernels do their work elsewhere (a device) and the number of CPU threads a
  // node is given changes nothing: the tuner then has no thread count to search for them.
  virtual bool uses_host_threads() const { return true; }
};


}  // namespace wpk
