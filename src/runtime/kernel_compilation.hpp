#pragma once
// Generated kernels get their code after the plan has prepared every step: all their sources are
// compiled in one batch (units of several kernels, compilers in parallel) or found in the kernel
// store, so a model's kernels cost one wait, not one per node, and a warm store compiles nothing.
#include <functional>
#include <string>
#include <vector>

#include "codegen/jit/kernel_store.hpp"
#include "runtime/execution_plan.hpp"

namespace wpk {

// The kernel store of a session's cache folder ("" keeps kernels for this process only).
std::string kernel_folder(const std::string& cache_dir);

// Hands every candidate that has a source (Kernel::source) its code from the store `store()`
// returns (unset: a store private to this process), compiling at most `parallel` at once; candidates whose code cannot be had leave their step, with one log
// line for the lot. Throws Unsupported when that leaves a step without candidates.
void compile_generated_kernels(std::vector<PlanStep>& steps, const Graph& graph, const std::function<codegen::KernelStore*()>& store, int parallel);

}  // namespace wpk
