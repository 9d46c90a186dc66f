#include "runtime/gpu_simulation.hpp"

#include <algorithm>
#include <future>
#include <limits>
#include <map>

#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "codegen/jit/cubin_store.hpp"
#include "codegen/jit/nvrtc_compiler.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/input_check.hpp"
#include "runtime/kernel_compilation.hpp"
#include "runtime/threads.hpp"
#include "runtime/tuning_db.hpp"
#include "search/strategy.hpp"
#include "wpk/optimizer.hpp"

namespace wpk {
namespace {

double library_seconds(const search::GpuSpec& gpu, const cuda::ConvGeometry& g) {
  double flops = 2.0;
  for (std::int64_t d : g.y) flops *= static_cast<double>(d);
  for (std::size_t i = 1; i < g.w.size(); ++i) flops *= static_cast<double>(g.w[i]);
  double elements = 0;
  for (const Shape* s : {&g.x, &g.w, &g.y}) {
    double n = 1;
    for (std::int64_t d : *s) n *= static_cast<double>(d);
    elements += n;
  }
  return search::predict_library_seconds(gpu, flops, 4.0 * elements);
}

class ModelledCost : public search::CostModel {
 public:
  ModelledCost(const search::GpuSpec& gpu, const cuda::ConvGeometry& g) : gpu_(gpu), g_(g) {}
  double predict(const search::Space& space, const search::Point& p) const override {
    const cuda::CudaConvConfig c = cuda::conv_config_at(space, p);
    return cuda::predict_conv_seconds(gpu_, g_, c, cuda::estimated_conv_registers(c));
  }

 private:
  const search::GpuSpec& gpu_;
  const cuda::ConvGeometry& g_;
};

}  // namespace

GpuSimulation simulate_gpu_tuning(Graph graph, const SessionOptions& options, const std::string& arch) {
  const search::GpuSpec* spec = search::gpu_spec(arch);
  if (!spec)
    throw Error(ErrorCode::InvalidArgument, "no GPU figures for '" + arch + "' (sm_80, sm_90, A100, H100, H200)");
  GpuSimulation out;
  out.gpu = *spec;
  fix_symbolic_dims(graph, options.fixed_dims);
  OptimizerOptions optimizer = options.optimizer;
  leave_off_cpu_only_passes(optimizer);
  graph = Optimizer(optimizer).optimize(std::move(graph));
  out.placement = place_on_gpu(graph, gpu_model(spec->name, spec->multiprocessors), resolve_threads(options.threads));

  const std::string device = "simulated " + spec->name + " sm_" + std::to_string(spec->sm);
  codegen::CubinStore store(cuda_kernel_folder(resolve_cache_dir(options.cache_dir)));
  const codegen::CubinCounters before = codegen::cubin_counters();
  const codegen::Nvrtc* nvrtc = nullptr;
  const std::vector<search::Knob> knobs = cuda::cuda_conv_knobs();
  const std::string algorithm = options.tuning_algorithm == "compare" ? "grid" : options.tuning_algorithm;
  const std::size_t trials = options.tuning_trials ? options.tuning_trials : 16;
  std::map<std::string, std::size_t> seen;  // signature -> index in out.convs
  for (const Node& region : graph.nodes()) {
    if (region.op_type != cuda::kRegionOp) continue;
    const Graph& body = region.find_attr("body")->g();
    for (const Node& n : body.nodes()) {
      if (n.op_type != "Conv" && n.op_type != "FusedConv") continue;
      const cuda::ConvGeometry g = cuda::conv_geometry(n, body);
      const cuda::ConvEpilogue e = cuda::conv_epilogue(n);
      const std::string signature = cuda::conv_signature(g, e);
      if (auto it = seen.find(signature); it != seen.end()) {
        ++out.convs[it->second].repeats;
        continue;
      }
      if (!nvrtc) {
        std::string why;
        nvrtc = codegen::Nvrtc::get(&why);
        if (!nvrtc) throw Error(ErrorCode::Unsupported, "simulating CUDA tuning compiles every candidate: " + why);
      }
      const search::Space space(knobs, [&g](const search::Space& sp, const search::Point& p) {
        return cuda::cuda_conv_config_valid(g, cuda::conv_config_at(sp, p));
      });
      const ModelledCost model(*spec, g);
      auto strategy = search::make_strategy(search::parse_algorithm(algorithm), space, options.tuning_seed, &model);
      SimulatedConv conv;
      conv.node = n.name;
      conv.signature = signature;
      conv.library_seconds = library_seconds(*spec, g);
      conv.generated_seconds = std::numeric_limits<double>::infinity();
      while (conv.schedules_tried < trials) {
        const auto points = strategy->propose(std::min<std::size_t>(8, trials - conv.schedules_tried));
        if (points.empty()) break;
        // Compiled on several threads, as tuning on a device does.
        std::vector<std::future<int>> registers;
        for (const auto& point : points)
          registers.push_back(std::async(std::launch::async, [&, c = cuda::conv_config_at(space, point)] {
            const codegen::PrintedCudaKernel printed = cuda::conv_kernel(g, c, e.bias, e.residual, e.activation, e.params);
            try {
              return codegen::cubin_register_count(store.obtain(nvrtc, printed.source, printed.symbol, spec->sm, device));
            } catch (const std::exception&) {
              return -1;
            }
          }));
        for (std::size_t i = 0; i < points.size(); ++i) {
          const cuda::CudaConvConfig c = cuda::conv_config_at(space, points[i]);
          const int regs = registers[i].get();
          const double seconds =
              regs > 0 ? cuda::predict_conv_seconds(*spec, g, c, regs) : std::numeric_limits<double>::infinity();
          strategy->observe(points[i], seconds);
          ++conv.schedules_tried;
          if (seconds < conv.generated_seconds) {
            conv.generated_seconds = seconds;
            conv.schedule = space.describe(points[i]);
            conv.registers = regs;
          }
        }
      }
      seen[signature] = out.convs.size();
      out.convs.push_back(conv);
    }
  }
  const codegen::CubinCounters after = codegen::cubin_counters();
  out.compiled = after.compiled - before.compiled;
  out.from_cache = after.loaded - before.loaded;
  return out;
}

}  // namespace wpk
