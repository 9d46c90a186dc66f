#pragma once
// Generated kernels get their code while the plan prepares (runtime/execution_plan.hpp): a kernel
// a session will run gets it at once, from the kernel store or compiled, so the plan knows before
// it settles the node's other candidates and frees weights whether it can run; in tuning sessions,
// which prepare every configuration, all the sources are compiled in one batch at the end (units
// of several kernels, compilers in parallel). A warm store compiles nothing.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/jit/kernel_store.hpp"
#include "runtime/execution_plan.hpp"

namespace wpk {

// The kernel store of a session's cache folder ("" keeps kernels for this process only).
std::string kernel_folder(const std::string& cache_dir);
// The compiled CUDA kernels of a session's cache folder (codegen/jit/cubin_store.hpp).
std::string cuda_kernel_folder(const std::string& cache_dir);

class KernelCompilation {
 public:
  // `store_of` is asked once, when a kernel first needs code; unset: a store private to this
  // process. At most `parallel` compilers run at once.
  KernelCompilation(std::function<codegen::KernelStore*()> store_of, int parallel);

  // Gives `kernel` (whose recipe() is set) its code: by its recipe, else by its source; false,
  // with the reason's first line in `why`, when it cannot be had. With `may_compile` false, only
  // code the store already holds.
  bool obtain(Kernel& kernel, std::string& why, bool may_compile = true);
  // Gives every candidate of `steps` that still has a source its code, in one batch; drops the
  // candidates whose code cannot be had. Throws Unsupported when that leaves a step with none.
  void obtain_all(std::vector<PlanStep>& steps, const Graph& graph);
  // Batch compiles (obtain_all) stop at `deadline`: what is not compiled by then is left out.
  void stop_compiling_at(std::chrono::steady_clock::time_point deadline) { deadline_ = deadline; }
  // One warning for every kernel whose code could not be had; nothing when all came.
  void report() const;
  // Time spent finding or compiling code so far.
  double seconds() const { return seconds_; }

 private:
  codegen::KernelStore& store();
  // Obtains the sources (compiling ends early when `stop` is due); counts and remembers the failures.
  std::vector<codegen::Obtained> fetch(const std::vector<codegen::KernelSource>& sources, bool compile = true,
                                       const codegen::CompileStop& stop = {});
  // The code the store remembers for the recipe, counted; null when it has none.
  std::shared_ptr<codegen::LoadedKernel> recall(const codegen::KernelRecipe& recipe);
  // The kernel's source; null, counted as a failure with the reason in `why`, when it does not print.
  const codegen::KernelSource* source_of(const Kernel& kernel, std::string& why);

  std::function<codegen::KernelStore*()> store_of_;
  codegen::KernelStore* store_ = nullptr;
  int parallel_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::size_t asked_ = 0, compiled_ = 0, failed_ = 0, recalled_ = 0, past_deadline_ = 0;
  std::string first_failure_;
  double seconds_ = 0;
};

}  // namespace wpk
