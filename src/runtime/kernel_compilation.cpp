#include "runtime/kernel_compilation.hpp"

#include <algorithm>
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
  if (!store_) {
    const auto t0 = std::chrono::steady_clock::now();
    store_ = store_of_ ? store_of_() : nullptr;
    logger().debug("kernel store opened in {:.2f} ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!store_) {
    static codegen::KernelStore private_store("", codegen::find_host_compiler());
    store_ = &private_store;
  }
  return *store_;
}

std::vector<codegen::Obtained> KernelCompilation::fetch(const std::vector<codegen::KernelSource>& sources, bool compile,
                                                         const codegen::CompileStop& stop) {
  if (sources.empty()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<codegen::Obtained> got = store().obtain(sources, parallel_, compile, stop);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const codegen::Obtained& o : got) {
    ++asked_;
    compiled_ += o.kernel && o.kernel->compiled;
    // Code not compiled because the caller asked for stored code only, or because the deadline
    // came first, is no failure to report.
    if (o.kernel || !compile) continue;
    if (o.stopped)
      ++past_deadline_;
    else if (failed_++ == 0)
      first_failure_ = first_line(o.why);
  }
  return got;
}

std::shared_ptr<codegen::LoadedKernel> KernelCompilation::recall(const codegen::KernelRecipe& recipe) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<codegen::LoadedKernel> got = store().recall(recipe);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (got) {
    ++asked_;
    ++recalled_;
  }
  return got;
}

const codegen::KernelSource* KernelCompilation::source_of(const Kernel& kernel, std::string& why) {
  try {
    return kernel.source();
  } catch (const std::exception& e) {
    why = std::string("its source could not be printed: ") + e.what();
    ++asked_;
    if (failed_++ == 0) first_failure_ = first_line(why);
    return nullptr;
  }
}

bool KernelCompilation::obtain(Kernel& kernel, std::string& why, bool may_compile) {
  if (auto code = recall(*kernel.recipe())) {
    kernel.set_code(std::move(code));
    return true;
  }
  const codegen::KernelSource* source = source_of(kernel, why);
  if (!source) return false;
  const std::vector<codegen::Obtained> got = fetch({*source}, may_compile);
  if (!got.front().kernel) {
    why = first_line(got.front().why);
    return false;
  }
  kernel.set_code(got.front().kernel);
  return true;
}

void KernelCompilation::obtain_all(std::vector<PlanStep>& steps, const Graph& graph) {
  // Nodes of one shape and config share a recipe: each distinct one is recalled, or printed and
  // obtained with the others in one batch, once.
  std::vector<codegen::KernelSource> sources;
  std::map<std::pair<std::string, std::string>, std::size_t> index_of_recipe;
  std::vector<codegen::Obtained> got;
  std::vector<std::vector<std::size_t>> source_of_candidate(steps.size());
  std::vector<std::size_t> fetched_into;  // for each of `sources`, its place in `got`
  for (std::size_t s = 0; s < steps.size(); ++s)
    for (const Candidate& c : steps[s].candidates) {
      // Deferred candidates have no recipe; awaiting ones get their code after load.
      const codegen::KernelRecipe* recipe = c.kernel && !c.awaiting() ? c.kernel->recipe() : nullptr;
      std::size_t index = SIZE_MAX;
      if (recipe) {
        const auto [it, fresh] = index_of_recipe.emplace(std::make_pair(recipe->name, recipe->text), got.size());
        if (fresh) {
          got.emplace_back();
          got.back().kernel = recall(*recipe);
          const codegen::KernelSource* src = got.back().kernel ? nullptr : source_of(*c.kernel, got.back().why);
          if (src) {
            sources.push_back(*src);
            fetched_into.push_back(got.size() - 1);
          }
        }
        index = it->second;
      }
      source_of_candidate[s].push_back(index);
    }
  if (got.empty()) return;
  if (!sources.empty()) {
    // A step whose candidates are all generated, none recalled, needs one of them whatever the
    // deadline: its first source is compiled unstopped; the others stop at the deadline.
    std::vector<bool> needed(got.size(), false);
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const std::vector<std::size_t>& of = source_of_candidate[s];
      const bool all_generated = std::all_of(of.begin(), of.end(), [](std::size_t i) { return i != SIZE_MAX; });
      const bool any_recalled =
          std::any_of(of.begin(), of.end(), [&](std::size_t i) { return i != SIZE_MAX && got[i].kernel; });
      if (!of.empty() && all_generated && !any_recalled) needed[of.front()] = true;
    }
    std::vector<codegen::KernelSource> first, rest;
    std::vector<std::size_t> first_into, rest_into;
    for (std::size_t k = 0; k < sources.size(); ++k) {
      const bool need = needed[fetched_into[k]];
      (need ? first : rest).push_back(std::move(sources[k]));
      (need ? first_into : rest_into).push_back(fetched_into[k]);
    }
    const std::vector<codegen::Obtained> fetched_first = fetch(first);
    for (std::size_t k = 0; k < fetched_first.size(); ++k) got[first_into[k]] = fetched_first[k];
    codegen::CompileStop at_deadline;
    at_deadline.deadline = deadline_;
    const std::vector<codegen::Obtained> fetched_rest = fetch(rest, true, at_deadline);
    for (std::size_t k = 0; k < fetched_rest.size(); ++k) got[rest_into[k]] = fetched_rest[k];
  }
  for (std::size_t s = 0; s < steps.size(); ++s) {
    std::vector<Candidate>& candidates = steps[s].candidates;
    std::vector<Candidate> kept;
    std::string why;  // this step's first failure
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const std::size_t index = source_of_candidate[s][c];
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
  if (past_deadline_)
    logger().warn("the tuning budget ran out while compiling: {} of {} generated kernels left out of this session "
                  "(the next tuning session compiles them)",
                  past_deadline_, asked_);
  logger().debug("generated kernels: {} obtained, {} of them by recipe, {} compiled, {} unavailable", asked_, recalled_,
                 compiled_, failed_);
  if (failed_)
    logger().warn("{} of {} generated kernels left out, the other backends run their nodes: {}", failed_, asked_,
                  first_failure_);
}

}  // namespace wpk
