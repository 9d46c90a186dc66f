#include "runtime/kernel_compilation.hpp"

#include <chrono>
#include <map>

#include "runtime/logging.hpp"

namespace wpk {

std::string kernel_folder(const std::string& cache_dir) { return cache_dir.empty() ? "" : cache_dir + "/kernels"; }

void compile_generated_kernels(std::vector<PlanStep>& steps, const Graph& graph, const std::function<codegen::KernelStore*()>& store_of, int parallel) {
  bool any = false;
  for (const PlanStep& step : steps)
    for (const Candidate& c : step.candidates) any = any || c.kernel->source();
  if (!any) return;
  codegen::KernelStore* chosen = store_of ? store_of() : nullptr;
  if (!chosen) {
    static codegen::KernelStore private_store("", codegen::find_host_compiler());
    chosen = &private_store;
  }
  codegen::KernelStore& store = *chosen;
  // Nodes of one shape and config share a source: each distinct one is obtained once.
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, std::size_t> index_of_key;
  std::vector<std::vector<std::size_t>> source_of(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s)
    for (const Candidate& c : steps[s].candidates) {
      const codegen::KernelSource* src = c.kernel->source();
      std::size_t index = SIZE_MAX;
      if (src) {
        const auto [it, fresh] = index_of_key.emplace(store.key_of(*src), sources.size());
        if (fresh) sources.push_back(*src);
        index = it->second;
      }
      source_of[s].push_back(index);
    }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<codegen::Obtained> got = store.obtain(sources, parallel);
  std::size_t compiled = 0, failed = 0;
  for (const codegen::Obtained& o : got) {
    compiled += o.kernel && o.kernel->compiled;
    failed += !o.kernel;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  logger().debug("generated kernels: {} distinct, {} compiled, {} from the store, {} unavailable, {:.0f} ms", sources.size(),
                 compiled, sources.size() - compiled - failed, failed, ms);
  if (failed) {
    std::string first_why;
    for (const codegen::Obtained& o : got)
      if (!o.kernel && first_why.empty()) first_why = o.why;
    logger().warn("{} of {} generated kernels left out, the other backends run their nodes: {}", failed, sources.size(),
                  first_why.substr(0, first_why.find('\n')));
  }
  for (std::size_t s = 0; s < steps.size(); ++s) {
    std::vector<Candidate>& candidates = steps[s].candidates;
    std::vector<Candidate> kept;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const std::size_t index = source_of[s][c];
      if (index != SIZE_MAX && !got[index].kernel) continue;
      if (index != SIZE_MAX) candidates[c].kernel->set_code(got[index].kernel);
      kept.push_back(std::move(candidates[c]));
    }
    if (kept.empty()) {
      const Node& n = graph.nodes()[steps[s].node_index];
      throw Error(ErrorCode::Unsupported, node_label(n) + "its only candidates are generated kernels, and none could be had: " +
                                              got[source_of[s].front()].why.substr(0, 400));
    }
    candidates = std::move(kept);
  }
}

}  // namespace wpk
