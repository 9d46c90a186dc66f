#pragma once
// A library's kernel (cuDNN, cuBLAS) against a generated kernel's schedules, for one op of a
// region: how tuning picks between them, and how a later session takes what tuning recorded.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/device_op.hpp"
#include "search/space.hpp"

namespace wpk::cuda {

// The generated kernel's side: its knobs, which points are valid, the cost model's seconds for a
// point (ranks before compiling), its source for a point, and the device buffers to time it on.
struct GeneratedCandidates {
  std::vector<search::Knob> knobs;
  std::function<bool(const search::Space&, const search::Point&)> valid;
  std::function<double(const search::Space&, const search::Point&)> predict;
  std::function<codegen::PrintedCudaKernel(const search::Space&, const search::Point&)> print;
  std::vector<CUdeviceptr> args;
};

struct Choice {
  std::shared_ptr<const GeneratedKernel> kernel;  // null: the library's runs
  std::string config;
};

// Tuning (env.search): times `library` (the library's launch, epilogue included), searches the
// generated schedules with the session's strategy ranked by the cost model (candidates compiled
// a batch at a time on several threads, each timed on the device), logs each trial (debug) and
// both bests (info), records the choice under `key` and returns it. `what` names the op in logs,
// `library_name` the library's kernel.
Choice search_generated(const PrepareEnv& env, const std::string& key, const std::string& what, const std::string& library_name,
                        const GeneratedCandidates& candidates, const std::function<void()>& library);

// Without tuning: the generated schedule an earlier tuning recorded under `key`, if any (a
// schedule that no longer compiles or fits leaves the library's kernel, with a warning).
Choice recorded_choice(const PrepareEnv& env, const std::string& key, const GeneratedCandidates& candidates);

// A library's variants of one op measured at load (cuBLASLt's algorithms against cuBLAS with the
// generated epilogue, cuDNN's fused graphs against its convolution): `current` is what the op runs
// now, each alternative is timed on the op's buffers and must reproduce current's output; returns
// the index of the fastest alternative faster than current, or -1. Identical ops in this process
// (same `key`) take the first one's answer without measuring. `what` names them in the log.
struct Alternative {
  std::string name;
  std::function<void()> launch;
};
int fastest_alternative(const PrepareEnv& env, const std::string& key, const std::string& what, const std::function<void()>& current,
                        const std::vector<Alternative>& alternatives);
// What fastest_alternative answered for `key` in this process, if it was asked: an op whose
// alternatives are costly to build (cuDNN's fused graphs) skips them when they lost before.
std::optional<int> known_alternative(const std::string& key);
// Records that `key` has no alternative worth measuring (-1) or which one won.
void remember_alternative(const std::string& key, int winner);

}  // namespace wpk::cuda
