#pragma once
// Pieces every oneDNN kernel shares: the CPU engine, a stream per calling thread, wrapping wpk
// tensors as dnnl::memory without copies, and mapping wpk activations to post-ops.
#include <dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/kernel.hpp"

namespace wpk::onednn {

using Tag = dnnl::memory::format_tag;

// Every oneDNN kernel: its library's vectors are the widest this CPU has (oneDNN dispatches on
// the ISA itself), which is what the cost model needs to know of it.
class OneDnnKernel : public Kernel {
 public:
  KernelProfile profile() const override;
};

// What a oneDNN primitive's execution costs whatever its size (argument map, stream, its own
// dispatch), nominal; every profile of this backend carries it.
constexpr double kPrimitiveCallSeconds = 1e-6;
// OneDnnKernel::profile(), and what the cost model assumes of a kernel not yet prepared.
KernelProfile primitive_profile();
using Dims = dnnl::memory::dims;

// Applies WPK_MAX_ISA's cap (core/cpu_features.hpp) to oneDNN, once, before it first dispatches;
// engine() calls it.
void cap_isa();
dnnl::engine& engine();
// One stream per calling thread: dnnl streams must not be shared by concurrent executions.
dnnl::stream& thread_stream();

dnnl::memory::desc f32_desc(const Dims& dims, Tag tag);
// A dnnl::memory over the tensor's bytes (no copy). The tensor must outlive the memory.
dnnl::memory wrap(const dnnl::memory::desc& desc, const Tensor& t);

// wrap() for argument `arg` of primitive `p`, reusing this thread's dnnl::memory object for that
// argument (only its data pointer changes): creating one costs two aligned mallocs inside oneDNN,
// about a third of a small step's framework time. The memory is good until this thread binds the
// same argument of the same primitive again, so one execute() must not bind an argument twice.
dnnl::memory wrap_arg(const dnnl::primitive& p, int arg, const dnnl::memory::desc& desc, const Tensor& t);

// Fails naming the node when a run-time tensor is not float32 (the model declared it so, or
// did not declare it at all).
void require_f32(const KernelContext& ctx, const Tensor& t, const char* what);

using Args = std::unordered_map<int, dnnl::memory>;

// Constant weights of a kernel, packed into the layout each compiled primitive chose. It starts
// from the loaded tensor; once packed for the shapes the model declares, it keeps only that
// packed copy (so the session can free the loaded one) and packs other layouts from it.
// A kernel may read the loaded bytes through more than one plain view (a 1x1 conv's [C_out,
// C_in, 1, 1] weights are also the [C_in, C_out] matrix of a matmul): each packing names the
// view it was made through.
class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(Tensor loaded, dnnl::memory::desc loaded_desc);
  bool empty() const { return shape_.empty(); }
  const Shape& shape() const { return shape_; }
  // The weights in layout `wanted`, read through `view` (a plain desc of the loaded bytes;
  // default: loaded_desc): the kept packed copy itself when it already is, else a reorder
  // (through plain bytes when oneDNN has no direct one). Safe to call from several threads.
  dnnl::memory pack_for(const dnnl::memory::desc& wanted) const;
  dnnl::memory pack_for(const dnnl::memory::desc& wanted, const dnnl::memory::desc& view) const;
  // Drops the loaded tensor; `packed` (from pack_for through `view`) becomes the only copy.
  // Not thread-safe: call while preparing the kernel.
  void keep_only(dnnl::memory packed);
  void keep_only(dnnl::memory packed, const dnnl::memory::desc& view);
  // Keeps `packed` for later pack_for calls that want its layout, and the loaded tensor for
  // the others: for layouts oneDNN cannot reorder from (Winograd's) when other input shapes
  // may come. Not thread-safe either.
  void keep_beside_loaded(dnnl::memory packed, const dnnl::memory::desc& view);
  bool owns_copy() const { return loaded_.empty() && !empty(); }

 private:
  // Fills `out` with the weights, read through `view`; throws when no reorder makes them.
  void reorder_weights_into(const dnnl::memory& out, const dnnl::memory::desc& view) const;

  // Every packing made besides packed_, with its storage (core/page_memory.hpp's long-lived
  // blocks), shared by copies of these weights.
  struct Packing {
    dnnl::memory memory;
    dnnl::memory::desc view;
    std::shared_ptr<void> bytes;
  };
  struct PackingList {
    std::mutex mutex;
    std::vector<Packing> packings;
  };
  std::shared_ptr<PackingList> owned_ = std::make_shared<PackingList>();
  Tensor loaded_;
  dnnl::memory::desc loaded_desc_;
  dnnl::memory packed_;
  dnnl::memory::desc packed_view_;
  Shape shape_;
};

// Residual adds run as oneDNN's sum post-op (dst += result), which keeps the fast brgemm
// kernels; a binary_add post-op sends 1x1 convolutions to a slower implementation (measured
// 0.60 vs 0.41 ms on ResNet-50's 128->512 28x28 conv). This puts residual input `index` into y
// before the primitive runs, after checking it has y's shape and dtype: a copy, unless the
// memory plan already gave y the residual's bytes (Backend::accumulates_into_residual).
void accumulate_residual_into(const KernelContext& ctx, std::size_t index, Tensor& y);
// Residual input `index`, checked to have y's dtype and shape (fails naming both otherwise).
const Tensor& residual_input(const KernelContext& ctx, std::size_t index, const Tensor& y);

// Attributes every wpk primitive is created with: the scratchpad is handed in by execute().
// oneDNN's own (library) scratchpad is shared by all primitives and ties a primitive to the
// thread that created it, while Session::run executes kernels on whichever thread calls it.
dnnl::primitive_attr make_attr();

// A dnnl::memory of `desc` over this thread's buffer number `slot` (0, 1 or 2), which grows as
// needed and lives as long as the thread: staging space for one step, never kept across steps.
// The primitives' scratchpad has a buffer of its own (execute).
dnnl::memory thread_memory(int slot, const dnnl::memory::desc& desc);

// Whether a primitive descriptor's implementation (impl_info_str) is oneDNN's reference code,
// which it falls back to for what its optimized kernels do not take.
bool is_reference_impl(const char* impl);

// Executes on this thread's stream with this thread's scratchpad, and waits: wpk steps run one
// after another.
void execute(const dnnl::primitive& p, Args args);

// The fused activation of a com.wpk op (graph/fused_ops.hpp) as a oneDNN post-op.
struct Activation {
  std::string kind;  // "" = none
  std::vector<float> params;
};
Activation read_activation(const Node& node);
// False when oneDNN 2.6 has no matching eltwise algorithm or pair of them.
bool activation_supported(const Activation& a);
void append_activation(dnnl::post_ops& ops, const Activation& a);

// Kernels compile a primitive per input-shape signature (shapes are known only at run time
// when the model has symbolic dims). Entries are immutable once built, so lookups hand out
// shared pointers and executions never hold the lock. Bounded like the session's plan cache: a
// stream of ever new shapes (a sequence length per request) keeps the kMaxEntries most recently
// used; an evicted entry lives on in the runs that still hold it.
template <typename Entry>
class ShapeCache {
 public:
  static constexpr std::size_t kMaxEntries = 64;

  template <typename Build>
  std::shared_ptr<const Entry> get(const std::vector<std::int64_t>& key, Build&& build) const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto found = find_locked(key)) return found;
    }
    auto entry = std::make_shared<const Entry>(build());
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto found = find_locked(key)) return found;  // another thread built it first
    if (slots_.size() == kMaxEntries) {
      auto oldest = std::min_element(slots_.begin(), slots_.end(),
                                     [](const Slot& a, const Slot& b) { return a.last_use < b.last_use; });
      *oldest = Slot{key, entry, ++clock_};
    } else {
      slots_.push_back(Slot{key, entry, ++clock_});
    }
    return entry;
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return slots_.size();
  }

 private:
  struct Slot {
    std::vector<std::int64_t> key;
    std::shared_ptr<const Entry> entry;
    std::uint64_t last_use;
  };

  std::shared_ptr<const Entry> find_locked(const std::vector<std::int64_t>& key) const {
    for (Slot& s : slots_)
      if (s.key == key) {
        s.last_use = ++clock_;
        return s.entry;
      }
    return nullptr;
  }

  mutable std::mutex mutex_;
  mutable std::vector<Slot> slots_;
  mutable std::uint64_t clock_ = 0;
};

// True when oneDNN's integer convolutions and matmuls compute exact int32 sums on this CPU, by
// the ISA oneDNN dispatches to (which ONEDNN_MAX_CPU_ISA may lower below the CPU's): with
// AVX-512 VNNI (or AMX) they use 8-bit dot products. Below that they add pairs of uint8 x int8
// products in 16 bits, which saturates unless every weight lies in [-64, 64], and int8 inputs
// have their weights halved (odd weights round): those are never exact there.
bool exact_int8_products(const Tensor& weights, bool signed_input);
// The share of float32's multiply-add instructions that oneDNN's products in `type` (bf16, or
// an 8-bit type) take here, by the ISA oneDNN dispatches to: dot products do two bf16 or four
// 8-bit multiply-adds a 32-bit lane; AMX's tile instructions sum a 16x16 block over 32 bf16 or 64
// 8-bit pairs in the time of 16 AVX-512 multiply-adds (1/16, 1/32). 1 for float32.
double reduced_precision_work_share(dnnl::memory::data_type type);
// The node may compute in bf16 (compute_precision, graph/fused_ops.hpp; set only on CPUs that do).
bool computes_bf16(const Node& node);
// v, one of the node's values, is a bf16 activation: the node may compute in bf16 and the graph
// keeps v in bf16 (passes::keep_bf16_between_products). Anything else a model declares bf16 is
// not one: the kernels refuse it rather than write float32 into a bf16-sized output.
bool bf16_activation(const Node& node, const Graph& graph, ValueId v);
// An int8 or int32 tensor's integers as float32 (exact for |v| <= 2^24: weights' codes, biases):
// the weights and bias of the integer kernels' arithmetic=float config.
Tensor integers_as_float(const Tensor& t);
// A one-element int32 memory holding z (a run-time zero point), in this thread's storage: good
// for the next execute() on this thread, which may bind up to two of them.
dnnl::memory int32_scalar_memory(std::int32_t z);

// The arithmetic configs of an integer kernel (QLinearConv, MatMulIntegerToFloat):
// {"arithmetic=int8", "arithmetic=float"} where exact_int8_products, else {"arithmetic=float"}.
// `input` and `weights` are the node's 8-bit input and constant weights.
std::vector<std::string> integer_arithmetic_configs(const Node& node, const Graph& graph, std::size_t input,
                                                    std::size_t weights);
// True when `config` ("" = the first offered) is arithmetic=float; an Internal error naming the
// node when it is not one of `offered`.
bool chooses_float_arithmetic(const Node& node, const std::vector<std::string>& offered, const std::string& config);
// How an integer kernel computes in `config` with inputs of these shapes (the 8-bit input first),
// for the cost model.
std::optional<KernelProfile> describe_integer_arithmetic(const std::string& config, const InputShapes& shapes);

// Cache key: the OpenMP thread count, then the shapes with separators.
std::vector<std::int64_t> shape_key(std::initializer_list<const Shape*> shapes);

// Runs `body` translating dnnl::error into wpk::Error naming the node.
template <typename Body>
void guarded(const KernelContext& ctx, Body&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    ctx.fail(ErrorCode::Internal, std::string("oneDNN: ") + e.what());
  }
}

}  // namespace wpk::onednn
