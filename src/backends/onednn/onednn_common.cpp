#include "backends/onednn/onednn_common.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backends/onednn/int8_weight_packing.hpp"
#include "backends/onednn/winograd_weight_packing.hpp"
#include "core/cpu_features.hpp"
#include "core/page_memory.hpp"
#include "runtime/logging.hpp"
#include "runtime/threads.hpp"

#include <omp.h>

namespace wpk::onednn {


void cap_isa() {
  static const bool applied = [] {
    const IsaCap cap = isa_cap();
    if (cap == IsaCap::kNone) return true;
    try {
      dnnl::set_max_cpu_isa(cap == IsaCap::kAvx2 ? dnnl::cpu_isa::avx2 : dnnl::cpu_isa::avx512_core_bf16);
    } catch (const dnnl::error&) {  // oneDNN had dispatched already (another user in the process)
      logger().warn("oneDNN had chosen its instruction set before WPK_MAX_ISA could cap it; its kernels keep it");
    }
    return true;
  }();
  (void)applied;
}

dnnl::engine& engine() {
  cap_isa();
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory::desc f32_desc(const Dims& dims, Tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const Tensor& t) {
  return dnnl::memory(desc, engine(), const_cast<void*>(t.raw()));
}

namespace {

struct ArgKey {
  const void* primitive;
  int arg;
  bool operator==(const ArgKey& o) const { return primitive == o.primitive && arg == o.arg; }
};
struct ArgKeyHash {
  std::size_t operator()(const ArgKey& k) const {
    return std::hash<const void*>()(k.primitive) ^ (static_cast<std::size_t>(k.arg) * 0x9e3779b97f4a7c15ull);
  }
};
struct BoundMemory {
  dnnl::memory::desc desc;
  dnnl::memory memory;
};

}  // namespace

dnnl::memory wrap_arg(const dnnl::primitive& p, int arg, const dnnl::memory::desc& desc, const Tensor& t) {
  // Bounded: a long-lived thread that sees many sessions come and go starts over now and then.
  constexpr std::size_t kMaxEntries = 4096;
  thread_local std::unordered_map<ArgKey, BoundMemory, ArgKeyHash> cache;
  void* data = const_cast<void*>(t.raw());
  const ArgKey key{p.get(), arg};
  auto it = cache.find(key);
  // A primitive freed and another made at its address finds the entry of the old one: the desc
  // check keeps that correct.
  if (it != cache.end() && it->second.desc == desc) {
    it->second.memory.set_data_handle(data);
    return it->second.memory;
  }
  if (cache.size() >= kMaxEntries) cache.clear();
  dnnl::memory m(desc, engine(), data);
  cache[key] = BoundMemory{desc, m};
  return m;
}

void require_f32(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
}

PackedWeights::PackedWeights(Tensor loaded, dnnl::memory::desc loaded_desc)
    : loaded_(std::move(loaded)), loaded_desc_(std::move(loaded_desc)), shape_(loaded_.shape()) {}

namespace {

// Packs weights on the calling thread alone. A packing happens once; at load the session's other
// threads are preparing other nodes, and an OpenMP team per reorder would wake workers that then
// spin beside them. (The reorder is made and run under the same count: oneDNN sizes a primitive
// for the threads it sees when it is made, and caches it keyed by that count.)
void reorder_into(const dnnl::memory& from, const dnnl::memory& to) {
  if (pack_int8_product_weights(from, to) || pack_winograd_weights(from, to)) return;
  const OmpThreadScope alone(1);
  execute(dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from.get_desc(), engine(), to.get_desc(), make_attr())),
          {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

}  // namespace

dnnl::memory PackedWeights::pack_for(const dnnl::memory::desc& wanted) const { return pack_for(wanted, loaded_desc_); }

dnnl::memory PackedWeights::pack_for(const dnnl::memory::desc& wanted, const dnnl::memory::desc& view) const {
  if (packed_ && packed_.get_desc() == wanted) return packed_;
  // One packing per layout and view, shared by every plan that wants it: plans are rebuilt
  // when a kernel's shape cache evicts them, and a layout is packed once however often.
  auto find = [&]() -> dnnl::memory {
    for (const Packing& p : owned_->packings)
      if (p.memory.get_desc() == wanted && p.view == view) return p.memory;
    return {};
  };
  {
    std::lock_guard<std::mutex> lock(owned_->mutex);
    if (dnnl::memory found = find()) return found;
  }
  // oneDNN's own allocations come from malloc's heap, which would keep the pages of the freed
  // loaded copies resident around the packed ones: long-lived storage instead.
  std::shared_ptr<void> bytes = long_lived_zeroed(wanted.get_size());
  dnnl::memory out(wanted, engine(), bytes.get());
  reorder_weights_into(out, view);
  // Kept as long as these weights (no plan holding `out` lives longer), and only once packed:
  // a shape whose packing fails leaves nothing behind.
  std::lock_guard<std::mutex> lock(owned_->mutex);
  if (dnnl::memory found = find()) return found;  // another thread packed it first
  owned_->packings.push_back({out, view, std::move(bytes)});
  return out;
}

void PackedWeights::reorder_weights_into(const dnnl::memory& out, const dnnl::memory::desc& view) const {
  if (!loaded_.empty()) return reorder_into(wrap(view, loaded_), out);
  // Only the packed copy is left: straight from it when it was packed through the same view,
  // else (another view, or a layout oneDNN only reorders from plain ones: Winograd's) through
  // plain bytes, which every view reads alike.
  if (packed_view_ == view) {
    try {
      return reorder_into(packed_, out);
    } catch (const dnnl::error&) {
    }
  }
  const std::shared_ptr<void> plain_bytes = long_lived_zeroed(packed_view_.get_size());
  dnnl::memory plain(packed_view_, engine(), plain_bytes.get());
  try {
    reorder_into(packed_, plain);
  } catch (const dnnl::error&) {
    throw Error(ErrorCode::InvalidArgument,
                "weights were packed at load for the input shape the model declares (a fixed shape), and this input "
                "shape needs another layout, which cannot be made from that packing");
  }
  reorder_into(dnnl::memory(view, engine(), plain.get_data_handle()), out);
}

void PackedWeights::keep_beside_loaded(dnnl::memory packed, const dnnl::memory::desc& view) {
  packed_ = std::move(packed);
  packed_view_ = view;
}

void PackedWeights::keep_only(dnnl::memory packed) { keep_only(std::move(packed), loaded_desc_); }

void PackedWeights::keep_only(dnnl::memory packed, const dnnl::memory::desc& view) {
  packed_ = std::move(packed);
  packed_view_ = view;
  loaded_ = Tensor();
}

const Tensor& residual_input(const KernelContext& ctx, std::size_t index, const Tensor& y) {
  const Tensor& z = ctx.input(index);
  if (z.dtype() != y.dtype() || z.shape() != y.shape())
    ctx.fail(ErrorCode::InvalidArgument, "residual input is " + std::string(dtype_name(z.dtype())) + " " +
                                             shape_to_string(z.shape()) + ", expected " + dtype_name(y.dtype()) + " " +
                                             shape_to_string(y.shape()));
  return z;
}

void accumulate_residual_into(const KernelContext& ctx, std::size_t index, Tensor& y) {
  const Tensor& z = residual_input(ctx, index, y);
  // The memory plan hands y the residual's own bytes when nothing reads them later; otherwise
  // the sum post-op needs them copied in.
  if (z.raw() == y.raw()) return;
  // Split over the run's threads: one thread alone copies at a fraction of the bandwidth.
  const char* from = static_cast<const char*>(z.raw());
  char* to = static_cast<char*>(y.raw());
  const std::int64_t bytes = static_cast<std::int64_t>(y.nbytes()), chunk = std::int64_t(1) << 18;
#pragma omp parallel for schedule(static) if (bytes > 4 * chunk)
  for (std::int64_t at = 0; at < bytes; at += chunk)
    std::memcpy(to + at, from + at, static_cast<std::size_t>(std::min(chunk, bytes - at)));
}

namespace {

constexpr int kScratchpadSlot = 3;  // slots 0 to 2 are thread_memory's

// Buffer `slot` of the calling thread, 64-byte aligned, grown to at least `bytes`; it lives as
// long as the thread.
void* thread_buffer(int slot, std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffers[kScratchpadSlot + 1];
  std::vector<std::uint8_t>& buffer = buffers[slot];
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  return reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t(63));
}

}  // namespace

dnnl::primitive_attr make_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void execute(const dnnl::primitive& p, Args args) {
  const_dnnl_primitive_desc_t pd = nullptr;
  dnnl::error::wrap_c_api(dnnl_primitive_get_primitive_desc(p.get(), &pd), "could not query a primitive descriptor");
  const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const std::size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
  // The scratchpad has its own slot: a thread executes one primitive at a time, while the
  // staging slots of thread_memory stay live across the primitives of one step.
  if (bytes > 0)
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD,
                          dnnl::memory(dnnl::memory::desc(*md), engine(), thread_buffer(kScratchpadSlot, bytes)));
  p.execute(thread_stream(), args);
  thread_stream().wait();
}

dnnl::memory thread_memory(int slot, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, engine(), thread_buffer(slot, desc.get_size()));
}

bool is_reference_impl(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

Activation read_activation(const Node& node) {
  return {node.attr_string("activation", ""), node.attr_floats("activation_params", {})};
}

bool activation_supported(const Activation& a) {
  static const char* kinds[] = {"",     "Relu",      "Clip", "LeakyRelu", "Sigmoid",    "Tanh",
                                "SiLU", "HardSwish", "Gelu", "GeluTanh",  "HardSigmoid"};
  for (const char* k : kinds)
    if (a.kind == k) {
      if (a.kind == "Clip" || a.kind == "HardSigmoid") return a.params.size() == 2;
      if (a.kind == "LeakyRelu") return a.params.size() == 1;
      return true;
    }
  return false;
}

void append_activation(dnnl::post_ops& ops, const Activation& a) {
  using A = dnnl::algorithm;
  if (a.kind.empty()) return;
  if (a.kind == "Relu") ops.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
  else if (a.kind == "LeakyRelu") ops.append_eltwise(1.f, A::eltwise_relu, a.params[0], 0.f);
  else if (a.kind == "Clip") ops.append_eltwise(1.f, A::eltwise_clip, a.params[0], a.params[1]);
  else if (a.kind == "Sigmoid") ops.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
  else if (a.kind == "Tanh") ops.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
  else if (a.kind == "SiLU") ops.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f);
  else if (a.kind == "HardSwish") ops.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
  else if (a.kind == "Gelu") ops.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
  else if (a.kind == "GeluTanh") ops.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f);
  else if (a.kind == "HardSigmoid") {
    // clamp(alpha x + beta, 0, 1), which oneDNN 2.6 has as two steps but not as one.
    ops.append_eltwise(1.f, A::eltwise_linear, a.params[0], a.params[1]);
    ops.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
  }
}

std::vector<std::int64_t> shape_key(std::initializer_list<const Shape*> shapes) {
  // oneDNN fixes a primitive's thread count when it creates it: a run with another count
  // (another Session's threads option, or the caller's OpenMP setting) needs its own primitive.
  std::size_t size = 1;
  for (const Shape* s : shapes) size += (s ? s->size() : 0) + 1;
  std::vector<std::int64_t> key;
  key.reserve(size);  // one allocation: this runs for every step of every run
  key.push_back(omp_get_max_threads());
  for (const Shape* s : shapes) {
    if (s) key.insert(key.end(), s->begin(), s->end());
    key.push_back(-1);
  }
  return key;
}


namespace {

// True when oneDNN dispatches to kernels with 8-bit dot products (AVX-512 VNNI or AMX): four
// products a 32-bit lane, summed without 16-bit intermediates.
bool has_8bit_dot_products() {
  cap_isa();
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
         isa == dnnl::cpu_isa::avx512_core_amx;
}

}  // namespace

bool exact_int8_products(const Tensor& weights, bool signed_input) {
  if (has_8bit_dot_products()) return true;
  if (signed_input || weights.dtype() != DType::Int8) return false;
  const std::int8_t* w = weights.data<std::int8_t>();
  for (std::int64_t i = 0; i < weights.numel(); ++i)
    if (w[i] < -64 || w[i] > 64) return false;
  return true;
}

double reduced_precision_work_share(dnnl::memory::data_type type) {
  using DT = dnnl::memory::data_type;
  cap_isa();
  const bool amx = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  if (type == DT::bf16) return amx ? 1.0 / 16 : 0.5;
  if (type == DT::u8 || type == DT::s8) return amx ? 1.0 / 32 : has_8bit_dot_products() ? 0.25 : 0.5;
  return 1;
}

bool computes_bf16(const Node& node) { return node.attr_string("compute_precision", "") == "bf16"; }

bool bf16_activation(const Node& node, const Graph& graph, ValueId v) {
  return v != kNoValue && computes_bf16(node) && graph.value(v).dtype == DType::BFloat16;
}

Tensor integers_as_float(const Tensor& t) {
  Tensor f = Tensor::zeros(DType::Float32, t.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    f.data<float>()[i] = t.dtype() == DType::Int8 ? static_cast<float>(t.data<std::int8_t>()[i])
                                                  : static_cast<float>(t.data<std::int32_t>()[i]);
  return f;
}

dnnl::memory int32_scalar_memory(std::int32_t z) {
  thread_local std::int32_t values[2];
  thread_local int next = 0;
  next ^= 1;
  values[next] = z;
  return dnnl::memory({{1}, dnnl::memory::data_type::s32, Tag::x}, engine(), &values[next]);
}

std::vector<std::string> integer_arithmetic_configs(const Node& node, const Graph& graph, std::size_t input,
                                                    std::size_t weights) {
  const Tensor* w = constant_input(node, graph, weights);
  const bool signed_input = graph.value(node.inputs[input]).dtype == DType::Int8;
  if (w && exact_int8_products(*w, signed_input)) return {"arithmetic=int8", "arithmetic=float"};
  return {"arithmetic=float"};
}

bool chooses_float_arithmetic(const Node& node, const std::vector<std::string>& offered, const std::string& config) {
  const std::string chosen = config.empty() && !offered.empty() ? offered.front() : config;
  if (std::find(offered.begin(), offered.end(), chosen) == offered.end())
    throw Error(ErrorCode::Internal, node_label(node) + "onednn does not offer configuration '" + chosen + "' here");
  return chosen == "arithmetic=float";
}

std::optional<KernelProfile> describe_integer_arithmetic(const std::string& config, const InputShapes& shapes) {
  if (shapes.empty() || !shapes[0] || (config != "arithmetic=int8" && config != "arithmetic=float")) return std::nullopt;
  double input = 1;
  for (std::int64_t d : *shapes[0]) input *= static_cast<double>(d);
  const CpuFeatures& cpu = cpu_features();
  KernelProfile p{"", cpu.avx512_core() ? 512 : cpu.avx2_fma() ? 256 : 128, 0.55};
  if (config == "arithmetic=int8") {
    // Without 8-bit dot products, pairs summed in 16 bits and widened take two instructions for four.
    p.work_scale = reduced_precision_work_share(dnnl::memory::data_type::s8);
  } else {
    // The codes reordered into float32 staging (read 1 byte, write 4, the kernel reads 4).
    p.extra_bytes = 9 * input;
  }
  return p;
}

KernelProfile OneDnnKernel::profile() const { return primitive_profile(); }

KernelProfile primitive_profile() {
  const CpuFeatures& cpu = cpu_features();
  KernelProfile p{"", cpu.avx512_core() ? 512 : cpu.avx2_fma() ? 256 : 128, 0.5};
  p.call_seconds = kPrimitiveCallSeconds;
  return p;
}

}  // namespace wpk::onednn
