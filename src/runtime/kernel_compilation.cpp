#include "runtime/kernel_compilation.hpp"

#include <chrono>
#include <map>

#include "codegen/jit/sha256.hpp"
#include "core/cpu_features.hpp"
#include "runtime/logging.hpp"

namespace wpk {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

std::string kernel_folder(const std::string& cache_dir) { return cache_dir.empty() ? "" : cache_dir + "/kernels"; }
std::string cuda_kernel_folder(const std::string& cache_dir) { return cache_dir.empty() ? "" : cache_dir + "/cuda-kernels"; }

KernelCompilation::KernelCompilation(std::function<codegen::KernelStore*()> store_of, int parallel)
    : store_of_(std::move(store_of)), parallel_(parallel) {}

codegen::KernelStore& KernelCompilation::store() {
  // The store checksums every kernel it loads: on the CPU's SHA instructions where it has them.
  codegen::use_sha_instructions(cpu_features().sha);
  if (!store_) store_ = store_of_ ? store_of_() : nullptr;
  if (!store_) {
    static codegen::KernelStore private_store("", codegen::find_host_compiler());
    store_ = &private_store;
  }
  return *store_;
}

std::vector<codegen::Obtained> KernelCompilation::fetch(const std::vector<codegen::KernelSource>& sources) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<codegen::Obtained> got = store().obtain(sources, parallel_);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const codegen::Obtained& o : got) {
    ++asked_;
    compiled_ += o.kernel && o.kernel->compiled;
    if (!o.kernel && failed_++ == 0) first_failure_ = first_line(o.why);
  }
  return got;
}

bool KernelCompilation::obtain(Kernel& kernel, std::string& why) {
  const std::vector<codegen::Obtained> got = fetch({*kernel.source()});
  if (!got.front().kernel) {
    why = first_line(got.front().why);
    return false;
  }
  kernel.set_code(got.front().kernel);
  return true;
}

void KernelCompilation::obtain_all(std::vector<PlanStep>& steps, const Graph& graph) {
  // Nodes of one shape and config share a source: each distinct one is obtained once.
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, std::size_t> index_of_key;
  std::vector<std::vector<std::size_t>> source_of(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s)
    for (const Candidate& c : steps[s].candidates) {
      const codegen::KernelSource* src = c.kernel ? c.kernel->source() : nullptr;  // deferred ones have none
      std::size_t index = SIZE_MAX;
      if (src) {
        const auto [it, fresh] = index_of_key.emplace(store().key_of(*src), sources.size());
        if (fresh) sources.push_back(*src);
        index = it->second;
      }
      source_of[s].push_back(index);
    }
  if (sources.empty()) return;
  const std::vector<codegen::Obtained> got = fetch(sources);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    std::vector<Candidate>& candidates = steps[s].candidates;
    std::vector<Candidate> kept;
    std::string why;  // this step's first failure
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const std::size_t index = source_of[s][c];
      if (index != SIZE_MAX && !got[index].kernel) {
        if (why.empty()) why = first_line(got[index].why);
        continue;
      }
      if (index != SIZE_MAX) candidates[c].kernel->set_code(got[index].kernel);
      kept.push_back(std::move(candidates[c]));
    }
    if (kept.empty())
      throw Error(ErrorCode::Unsupported, node_label(graph.nodes()[steps[s].node_index]) +
                                              "its only candidates are generated kernels, and none could be had: " + why);
    candidates = std::move(kept);
  }
}

void KernelCompilation::report() const {
  if (asked_ == 0) return;
  logger().debug("generated kernels: {} obtained, {} of them compiled, {} unavailable", asked_, compiled_, failed_);
  if (failed_)
    logger().warn("{} of {} generated kernels left out, the other backends run their nodes: {}", failed_, asked_,
                  first_failure_);
}

}  // namespace wpk
