#include "runtime/device_placement.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <set>

#include "backends/cuda/cuda_backend_names.hpp"
#include "backends/cuda/support.hpp"
#include "core/cpu_features.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/workload.hpp"

namespace wpk {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double value_bytes(const Graph& g, ValueId v) {
  const ValueInfo& info = g.value(v);
  if (!info.dims) return 0;
  double n = 4;  // float32: what regions carry
  for (const Dim& d : *info.dims) n *= d.is_static() ? static_cast<double>(d.value) : 1.0;
  return n;
}

InputShapes static_shapes(const Node& n, const Graph& g) {
  InputShapes shapes;
  for (ValueId v : n.inputs) {
    if (v == kNoValue || !g.value(v).dims) {
      shapes.emplace_back();
      continue;
    }
    Shape s;
    for (const Dim& d : *g.value(v).dims) s.push_back(d.is_static() ? d.value : 1);
    shapes.emplace_back(std::move(s));
  }
  return shapes;
}

double cpu_seconds(const Node& n, const Graph& g, int threads) {
  if (cuda::is_view_op(n)) return 0;
  const search::Workload w = estimate_workload(n, static_shapes(n, g));
  const CpuFeatures& cpu = cpu_features();
  search::KernelTraits best;  // the best kernel wpk has for it, roughly
  best.vector_bits = cpu.avx512_core() ? 512 : cpu.avx2_fma() ? 256 : 128;
  best.efficiency = 0.6;
  search::Machine m;
  m.threads = std::max(1, threads);
  return search::predict_seconds(w, best, m);
}

double gpu_seconds(const Node& n, const Graph& g, const GpuModel& gpu) {
  if (cuda::is_view_op(n)) return 0;
  const search::Workload w = estimate_workload(n, static_shapes(n, g));
  return std::max(w.flops / gpu.flops, w.bytes / gpu.bytes_per_second) + gpu.launch_seconds;
}

// The nodes [first, last) as one region node.
Node make_region(const Graph& g, std::size_t first, std::size_t last, int index) {
  const auto& nodes = g.nodes();
  std::set<ValueId> produced;
  for (std::size_t i = first; i < last; ++i) produced.insert(nodes[i].outputs.begin(), nodes[i].outputs.end());
  std::vector<ValueId> inputs, outputs;
  std::set<ValueId> seen;
  for (std::size_t i = first; i < last; ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue && !produced.count(v) && !g.is_initializer(v) && seen.insert(v).second) inputs.push_back(v);
  std::set<ValueId> read_after(g.outputs().begin(), g.outputs().end());
  for (std::size_t i = last; i < nodes.size(); ++i) read_after.insert(nodes[i].inputs.begin(), nodes[i].inputs.end());
  for (std::size_t i = first; i < last; ++i)
    for (ValueId v : nodes[i].outputs)
      if (read_after.count(v)) outputs.push_back(v);

  auto body = std::make_shared<Graph>();
  body->set_opset(g.opset());
  body->set_name("cuda_region_" + std::to_string(index));
  auto declare = [&](ValueId v) {
    ValueInfo& info = body->mutable_value(body->value_id(g.value(v).name));
    info.dtype = g.value(v).dtype;
    info.dims = g.value(v).dims;
  };
  for (ValueId v : inputs) body->add_input(g.value(v).name, g.value(v).dtype, *g.value(v).dims);
  for (std::size_t i = first; i < last; ++i) {
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue && g.is_initializer(v) && body->find_value(g.value(v).name) == kNoValue)
        body->add_initializer(g.value(v).name, *g.initializer(v));
    std::vector<std::string> in, out;
    for (ValueId v : nodes[i].inputs) in.push_back(v == kNoValue ? "" : g.value(v).name);
    for (ValueId v : nodes[i].outputs) out.push_back(v == kNoValue ? "" : g.value(v).name);
    Node& copy = body->add_node(nodes[i].op_type, in, out, nodes[i].attributes, nodes[i].name);
    copy.domain = nodes[i].domain;
    copy.fused_from = nodes[i].fused_from;
    for (ValueId v : nodes[i].outputs)
      if (v != kNoValue) declare(v);
  }
  for (ValueId v : outputs) body->add_output(g.value(v).name);

  Node region;
  region.name = "cuda_region_" + std::to_string(index);
  region.op_type = cuda::kRegionOp;
  region.domain = kWpkDomain;
  region.inputs = inputs;
  region.outputs = outputs;
  region.attributes.emplace("body", Attribute(std::shared_ptr<const Graph>(body)));
  // The outputs that only the caller reads: RunOptions::outputs_on_device may leave them on the GPU.
  std::set<ValueId> read_by_nodes;
  for (std::size_t i = last; i < nodes.size(); ++i) read_by_nodes.insert(nodes[i].inputs.begin(), nodes[i].inputs.end());
  const std::set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());
  std::vector<std::int64_t> returned;
  for (std::size_t o = 0; o < outputs.size(); ++o)
    if (graph_outputs.count(outputs[o]) && !read_by_nodes.count(outputs[o])) returned.push_back(static_cast<std::int64_t>(o));
  region.attributes.emplace("returned_outputs", Attribute(returned));
  for (std::size_t i = first; i < last; ++i) region.fused_from.push_back(nodes[i].op_type);
  return region;
}

}  // namespace

GpuModel gpu_model(const std::string& device_name, int multiprocessors) {
  GpuModel m;
  m.name = device_name;
  // Sustained float32 (CUDA cores, no tensor cores: regions compute float32 exactly) and memory
  // bandwidth at about 70% and 80% of the data sheets'.
  if (device_name.find("H200") != std::string::npos) {
    m.flops = 0.7 * 67e12, m.bytes_per_second = 0.8 * 4.8e12, m.link_bytes_per_second = 50e9;
  } else if (device_name.find("H100") != std::string::npos) {
    m.flops = 0.7 * 67e12, m.bytes_per_second = 0.8 * 3.35e12, m.link_bytes_per_second = 50e9;
  } else if (device_name.find("A100") != std::string::npos) {
    m.flops = 0.7 * 19.5e12, m.bytes_per_second = 0.8 * 2.0e12;
  } else {
    // 128 float32 lanes per multiprocessor at ~1.5 GHz, 2 operations per FMA.
    m.flops = 0.7 * std::max(1, multiprocessors) * 128 * 2 * 1.5e9;
    m.bytes_per_second = 0.8 * 1e12;
  }
  return m;
}

void leave_off_cpu_only_passes(OptimizerOptions& options) {
  for (const char* pass : {"layout_nhwc", "fuse_concat_batchnorm", "split_conv_over_concat", "fuse_elementwise_chains"})
    options.disabled_passes.push_back(pass);
}

PlacementSummary place_on_gpu(Graph& g, const GpuModel& gpu, int cpu_threads) {
  const auto& nodes = g.nodes();
  const std::size_t n = nodes.size();
  PlacementSummary summary;
  summary.nodes = static_cast<int>(n);
  if (n == 0) return summary;
  // cut[i]: bytes that must cross if the device changes between node i - 1 and node i (cut[n]:
  // after the last node): the values made before it (graph inputs included) and read after it.
  std::vector<std::size_t> last_use(g.values().size(), 0);
  std::vector<long> made_at(g.values().size(), -2);
  for (ValueId v : g.inputs()) made_at[static_cast<std::size_t>(v)] = -1;
  for (std::size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) last_use[static_cast<std::size_t>(v)] = i;
    for (ValueId v : nodes[i].outputs)
      if (v != kNoValue) made_at[static_cast<std::size_t>(v)] = static_cast<long>(i);
  }
  for (ValueId v : g.outputs()) last_use[static_cast<std::size_t>(v)] = n;
  std::vector<double> cut(n + 1, 0);
  for (std::size_t v = 0; v < made_at.size(); ++v) {
    if (made_at[v] < -1 || g.is_initializer(static_cast<ValueId>(v))) continue;
    const double bytes = value_bytes(g, static_cast<ValueId>(v));
    for (std::size_t c = static_cast<std::size_t>(made_at[v] + 1); c <= last_use[v] && c <= n; ++c) cut[c] += bytes;
  }
  auto crossing = [&](std::size_t c) { return cut[c] / gpu.link_bytes_per_second + gpu.link_seconds; };

  std::vector<double> on_cpu(n), on_gpu(n);
  for (std::size_t i = 0; i < n; ++i) {
    on_cpu[i] = cpu_seconds(nodes[i], g, cpu_threads);
    on_gpu[i] = cuda::why_cuda_cannot_run(nodes[i], g).empty() ? gpu_seconds(nodes[i], g, gpu) : kInfinity;
    summary.predicted_cpu_seconds += on_cpu[i];
  }
  // best[i][d]: the least time for nodes [0, i] with node i on d (0 CPU, 1 GPU); from[i][d] the
  // device of node i - 1 it came from.
  std::vector<std::array<double, 2>> best(n);
  std::vector<std::array<int, 2>> from(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 2; ++d) {
      const double own = d ? on_gpu[i] : on_cpu[i];
      if (i == 0) {
        best[i][d] = own + (d ? crossing(0) : 0);  // the graph's inputs start on the host
        from[i][d] = 0;
        continue;
      }
      const double stay = best[i - 1][d], move = best[i - 1][1 - d] + crossing(i);
      best[i][d] = own + std::min(stay, move);
      from[i][d] = stay <= move ? d : 1 - d;
    }
  const double end_cpu = best[n - 1][0], end_gpu = best[n - 1][1] + crossing(n);  // outputs end on the host
  int d = end_gpu < end_cpu ? 1 : 0;
  summary.predicted_seconds = std::min(end_cpu, end_gpu);
  std::vector<int> device(n);
  for (std::size_t i = n; i-- > 0;) {
    device[i] = d;
    d = from[i][d];
  }
  // Runs of GPU nodes that hold more than views become regions, last first so indices stay valid.
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < n;) {
    if (!device[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    bool work = false;
    while (j < n && device[j]) work |= !cuda::is_view_op(nodes[j++]);
    if (work) runs.emplace_back(i, j);
    i = j;
  }
  for (std::size_t r = runs.size(); r-- > 0;) {
    const auto [first, last] = runs[r];
    Node region = make_region(g, first, last, static_cast<int>(r));
    auto& list = g.mutable_nodes();
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(first), list.begin() + static_cast<std::ptrdiff_t>(last));
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(first), std::move(region));
    summary.nodes_on_gpu += static_cast<int>(last - first);
  }
  summary.regions = static_cast<int>(runs.size());
  return summary;
}

}  // namespace wpk
