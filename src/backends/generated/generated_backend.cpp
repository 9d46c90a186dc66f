#include "backends/generated/generated_backend.hpp"

#include <omp.h>

#include <algorithm>

#include "backends/generated/matmul_expr.hpp"
#include "codegen/cpp_printer.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "codegen/jit/sha256.hpp"
#include "core/cpu_features.hpp"

namespace wpk::gen {
namespace {

using codegen::CpuTarget;

// The widest target this CPU runs: which ISA a kernel uses is the CPU's answer, its tile the
// search's.
CpuTarget widest_target() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512_core() && cpu.fma) return CpuTarget::Avx512;
  if (cpu.avx2_fma()) return CpuTarget::Avx2;
  return CpuTarget::Scalar;
}

int vector_registers(CpuTarget t) { return t == CpuTarget::Avx512 ? 32 : 16; }

std::string kernel_name(const MatMulSpec& spec, const MatMulConfig& c, CpuTarget target) {
  const int lanes = codegen::vector_lanes(target);
  return "f32_" + spec.op + "__" + codegen::target_name(target) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.vectors * lanes) + (c.parallel_cols ? "_pcols" : "_prows");
}

// A product compiled from its generated source: A [..., K] x B, the node's bias, residual and
// activation in the store.
class GeneratedMatMul : public Kernel {
 public:
  // A constant B (`constant_b`, else null) is packed here, and runs pass no tensor for it.
  GeneratedMatMul(const MatMulSpec& spec, const MatMulConfig& config, CpuTarget target, const Tensor* constant_b)
      : spec_(spec), name_(kernel_name(spec, config, target)), vector_bits_(32 * codegen::vector_lanes(target)) {
    const codegen::Compute c = matmul_compute(spec);
    const codegen::Schedule schedule = matmul_schedule(c, config, codegen::vector_lanes(target), constant_b != nullptr);
    if (constant_b)
      packed_b_ = std::make_shared<const std::vector<float>>(
          codegen::pack_input(schedule.packs().front(), schedule, constant_b->data<float>()));
    const codegen::LoweredKernel lowered = codegen::lower(schedule);
    // The symbol names the source's content, so kernels compiled into one unit never clash.
    const std::string generator = "gen backend, " + name_;
    const std::string draft = codegen::print_cpp(lowered, target, "wpk_gen", generator).source;
    const codegen::PrintedKernel printed =
        codegen::print_cpp(lowered, target, "wpk_gen_" + codegen::sha256_hex(draft).substr(0, 20), generator);
    source_ = {name_, printed.symbol, printed.prelude, printed.source, codegen::target_flags(target),
               codegen::target_name(target)};
  }

  void run(KernelContext& ctx) const override {
    if (!code_) ctx.fail(ErrorCode::Internal, "generated kernel " + name_ + " ran without its code");
    const Tensor& a = ctx.input(0);
    check_f32(ctx, a, "A");
    if (a.rank() < 1 || a.shape().back() != spec_.k || (spec_.rank && a.rank() != spec_.rank))
      ctx.fail(ErrorCode::InvalidArgument,
               "input " + shape_to_string(a.shape()) + " is not the " + (spec_.rank ? "rank-4 NHWC input of " : "[..., ") +
                   std::to_string(spec_.k) + (spec_.rank ? " channels" : "]") + " the kernel was generated for");
    Shape y_shape(a.shape().begin(), a.shape().end() - 1);
    y_shape.push_back(spec_.n);
    std::vector<float*> args = {const_cast<float*>(a.data<float>()), const_cast<float*>(b_data(ctx))};
    if (spec_.bias) {
      const Tensor& bias = ctx.input(2);
      check_f32(ctx, bias, "bias");
      if (bias.numel() != spec_.n) ctx.fail(ErrorCode::InvalidArgument, "bias " + shape_to_string(bias.shape()) + " is not [N]");
      args.push_back(const_cast<float*>(bias.data<float>()));
    }
    if (spec_.residual) {
      const Tensor& z = ctx.input(3);
      check_f32(ctx, z, "residual input");
      if (z.shape() != y_shape)
        ctx.fail(ErrorCode::InvalidArgument,
                 "residual input has shape " + shape_to_string(z.shape()) + ", expected " + shape_to_string(y_shape));
      args.push_back(const_cast<float*>(z.data<float>()));
    }
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    const std::int64_t rows = a.numel() / spec_.k;
    if (rows == 0) return;
    args.push_back(y.data<float>());
    using Entry = void (*)(float* const*, const std::int64_t*, int);
    reinterpret_cast<Entry>(code_->entry)(args.data(), &rows, omp_get_max_threads());
  }

  // For shapes describe() cannot see (A of unknown rank): a low share, left to measurement.
  KernelProfile profile() const override { return {name_, vector_bits_, 0.2}; }
  bool owns_input(std::size_t i) const override { return i == 1 && packed_b_; }
  const codegen::KernelSource* source() const override { return code_ ? nullptr : &source_; }
  void set_code(std::shared_ptr<const codegen::LoadedKernel> code) override { code_ = std::move(code); }

 private:
  // The packed copy of a constant B, else the run's B checked against the generated shape.
  const float* b_data(const KernelContext& ctx) const {
    if (packed_b_) return packed_b_->data();
    const Tensor& b = ctx.input(1);
    check_f32(ctx, b, "B");
    const Shape b_shape = spec_.transposed_b ? Shape{spec_.n, spec_.k} : Shape{spec_.k, spec_.n};
    if (b.shape() != b_shape)
      ctx.fail(ErrorCode::InvalidArgument, "input B " + shape_to_string(b.shape()) + " is not the " +
                                               shape_to_string(b_shape) + " the kernel was generated for");
    return b.data<float>();
  }

  static void check_f32(const KernelContext& ctx, const Tensor& t, const char* what) {
    if (t.dtype() != DType::Float32)
      ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
  }

  MatMulSpec spec_;
  std::string name_;
  int vector_bits_;
  codegen::KernelSource source_;
  std::shared_ptr<const std::vector<float>> packed_b_;  // [N / panel][K][panel]
  std::shared_ptr<const codegen::LoadedKernel> code_;
};

MatMulSpec spec_or_throw(const Node& node, const Graph& graph) {
  std::string why;
  const std::optional<MatMulSpec> spec = matmul_spec(node, graph, why);
  if (!spec) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  return *spec;
}

// The shapes' row count (A's dims but the last), or nullopt when A's shape is not known.
std::optional<std::int64_t> rows_of(const InputShapes& shapes) {
  if (shapes.empty() || !shapes[0] || shapes[0]->empty()) return std::nullopt;
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shapes[0]->size(); ++d) rows *= (*shapes[0])[d];
  return rows;
}

}  // namespace

std::string GeneratedBackend::why_unsupported(const Node& node, const Graph& graph) const {
  std::string why;
  matmul_spec(node, graph, why);
  return why;
}

std::vector<std::string> GeneratedBackend::configs(const Node& node, const Graph& graph) const {
  if (!why_unsupported(node, graph).empty()) return {""};
  std::vector<std::string> out;
  for (const MatMulConfig& c : matmul_configs(vector_registers(widest_target()))) out.push_back(c.text());
  return out;
}

std::unique_ptr<Kernel> GeneratedBackend::prepare(const Node& node, const Graph& graph) const {
  return prepare(node, graph, configs(node, graph).front());
}

std::unique_ptr<Kernel> GeneratedBackend::prepare(const Node& node, const Graph& graph, const std::string& config) const {
  const MatMulSpec spec = spec_or_throw(node, graph);
  const std::optional<MatMulConfig> c = MatMulConfig::parse(config.empty() ? configs(node, graph).front() : config);
  if (!c) throw Error(ErrorCode::Internal, node_label(node) + "the gen backend has no product configuration '" + config + "'");
  try {
    const Tensor* b = graph.initializer(node.inputs[1]);
    if (b && b->dtype() != DType::Float32) b = nullptr;
    return std::make_unique<GeneratedMatMul>(spec, *c, widest_target(), b);
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCode::Unsupported, node_label(node) + "no generated product in configuration '" + config + "': " + e.what());
  }
}

std::optional<KernelProfile> GeneratedBackend::describe(const Node& node, const Graph& graph, const std::string& config,
                                                        const InputShapes& shapes, int threads) const {
  std::string why;
  const std::optional<MatMulSpec> spec = matmul_spec(node, graph, why);
  const std::optional<MatMulConfig> c = MatMulConfig::parse(config);
  const std::optional<std::int64_t> rows = rows_of(shapes);
  if (!spec || !c || !rows) return std::nullopt;
  const CpuTarget target = widest_target();
  const int lanes = codegen::vector_lanes(target);
  KernelProfile p;
  p.name = kernel_name(*spec, *c, target);
  p.vector_bits = 32 * lanes;
  // Each step of the reduction loads `vectors` vectors of B and broadcasts `rows` values of A for
  // rows x vectors FMAs: with two loads and two FMAs a cycle, the tile keeps the FMA units busy
  // when rows x vectors reaches rows + vectors. A share below the hand-written and library
  // kernels' until measurement says otherwise; a B read strided (not constant, transposed) pays.
  const double fmas = c->rows * c->vectors, loads = c->rows + c->vectors;
  const bool packed = graph.initializer(node.inputs[1]) != nullptr;
  p.efficiency = 0.4 * std::min(1.0, fmas / loads) * (spec->transposed_b && !packed ? 0.25 : 1.0);
  const std::int64_t cols = std::min<std::int64_t>(std::int64_t{c->vectors} * lanes, spec->n);
  const std::int64_t col_tiles = (spec->n + cols - 1) / cols;
  const std::int64_t row_tiles = (std::max<std::int64_t>(*rows, 1) + c->rows - 1) / c->rows;
  // Masked last vectors do whole vectors' work; the parallel loop's tiles shared among threads.
  const std::int64_t tiles = c->parallel_cols ? col_tiles : row_tiles;
  const std::int64_t per_thread = (tiles + threads - 1) / std::max(1, threads);
  p.work_scale = static_cast<double>(col_tiles * cols) / static_cast<double>(spec->n) *
                 static_cast<double>(per_thread * std::max(1, threads)) / static_cast<double>(tiles);
  return p;
}

}  // namespace wpk::gen
