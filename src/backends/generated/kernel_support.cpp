#include "backends/generated/kernel_support.hpp"

#include <cstdio>
#include <cstring>
#include <map>

#include "core/cpu_features.hpp"
#include "runtime/cache_key.hpp"

namespace wpk::gen {

using codegen::CpuTarget;

CpuTarget widest_target() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512_core() && cpu.fma) return CpuTarget::Avx512;
  if (cpu.avx2_fma()) return CpuTarget::Avx2;
  return CpuTarget::Scalar;
}

int vector_registers(CpuTarget t) { return t == CpuTarget::Avx512 ? 32 : 16; }

std::string tile_kernel_name(const std::string& op, int rows, int vectors, CpuTarget target) {
  return "f32_" + op + "__" + codegen::target_name(target) + "_" + std::to_string(rows) + "x" +
         std::to_string(vectors * codegen::vector_lanes(target));
}

std::string kernel_name(const std::string& op, const MatMulConfig& c, CpuTarget target) {
  return tile_kernel_name(op, c.rows, c.vectors, target) + (c.parallel_cols ? "_pcols" : "_prows") + (c.prefetch ? "_pf" : "") +
         (c.prefetch_residual ? "_pz" : "") + (c.k_block ? "_kb" + std::to_string(c.k_block) : "");
}

std::shared_ptr<const std::vector<float>> packed_weights(const codegen::PackRecord& p, const codegen::Schedule& s,
                                                         const Tensor& w) {
  std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(w.raw())) + ":" + std::to_string(w.nbytes()) + ":" +
                    std::to_string(p.dim) + ":" +
                    std::to_string(hash_memory(w.raw(), w.nbytes()));
  for (std::int64_t d : p.packed->dims) key += "," + std::to_string(d);
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const std::vector<float>>> shared;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = shared.begin(); it != shared.end();) it = it->second.expired() ? shared.erase(it) : std::next(it);
  if (auto known = shared[key].lock()) return known;
  auto made = std::make_shared<const std::vector<float>>(codegen::pack_input(p, s, w.data<float>()));
  shared[key] = made;
  return made;
}

RecipeText& RecipeText::add(const char* key, const std::string& v) {
  text_ += std::string(key) + "=" + std::to_string(v.size()) + ":" + v + ";";
  return *this;
}

RecipeText& RecipeText::add(const Epilogue& e, const std::string& prefix) {
  std::string params;
  for (float f : e.params) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    params += std::to_string(bits) + ",";
  }
  return add((prefix + "bias").c_str(), e.bias)
      .add((prefix + "residual").c_str(), e.residual)
      .add((prefix + "activation").c_str(), e.activation)
      .add((prefix + "params").c_str(), params);
}

std::optional<int> vectors_config(const std::string& config) {
  for (int v : {1, 2, 4})
    if (config == "vectors=" + std::to_string(v)) return v;
  return std::nullopt;
}

CompiledKernel::CompiledKernel(std::string name, const codegen::Schedule& schedule, CpuTarget target, std::string recipe)
    : CompiledKernel(std::move(name), std::vector<codegen::Schedule>{schedule}, target, std::move(recipe)) {}

CompiledKernel::CompiledKernel(std::string name, std::vector<codegen::Schedule> stages, CpuTarget target, std::string recipe)
    : name_(std::move(name)), vector_bits_(32 * codegen::vector_lanes(target)), stages_(std::move(stages)), target_(target),
      recipe_{name_, std::move(recipe)} {}

const codegen::KernelSource* CompiledKernel::source() const {
  if (code_) return nullptr;
  std::call_once(printed_, [this] { source_ = print(); });
  return &source_;
}

CompiledKernel::Entry CompiledKernel::entry(const KernelContext& ctx) const {
  if (!code_) ctx.fail(ErrorCode::Internal, "generated kernel " + name_ + " ran without its code");
  return reinterpret_cast<Entry>(code_->entry);
}

// The source: printed once with a placeholder symbol, which then becomes a hash of that text, so
// kernels compiled into one unit never clash (a 64-bit hash is plenty among a unit's few; the
// store's key hashes the whole source).
codegen::KernelSource CompiledKernel::print() const {
  const std::string placeholder = "wpk_gen_" + std::string(16, '0');
  codegen::PrintedKernel printed = codegen::print_cpp(codegen::lower(stages_), target_, placeholder, "gen backend, " + name_);
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(fnv1a64(printed.source)));
  const std::string symbol = std::string("wpk_gen_") + digest;
  const std::size_t at = printed.source.find(placeholder);
  if (at == std::string::npos) throw Error(ErrorCode::Internal, "generated kernel " + name_ + " printed no entry point");
  printed.source.replace(at, placeholder.size(), symbol);
  return {name_, symbol, std::move(printed.prelude), std::move(printed.source), codegen::target_flags(target_),
          codegen::target_name(target_), recipe_.text};
}

void CompiledKernel::check_f32(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Float32)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
}

const float* CompiledKernel::channel_input(const KernelContext& ctx, std::size_t i, std::int64_t n, const char* what) {
  const Tensor& t = ctx.input(i);
  check_f32(ctx, t, what);
  if (t.numel() != n)
    ctx.fail(ErrorCode::InvalidArgument,
             std::string(what) + " " + shape_to_string(t.shape()) + " does not have " + std::to_string(n) + " channels");
  return t.data<float>();
}

const float* CompiledKernel::residual_input(const KernelContext& ctx, std::size_t i, const Shape& y_shape) {
  const Tensor& t = ctx.input(i);
  check_f32(ctx, t, "residual input");
  if (t.shape() != y_shape)
    ctx.fail(ErrorCode::InvalidArgument,
             "residual input has shape " + shape_to_string(t.shape()) + ", expected " + shape_to_string(y_shape));
  return t.data<float>();
}

}  // namespace wpk::gen
