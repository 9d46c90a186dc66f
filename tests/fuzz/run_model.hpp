#pragma once
// What the import fuzzer does with its bytes, shared with the test that replays the inputs it
// once failed on (tests/fuzz/regressions): load, optimize, and when the model loads, run it on
// zeros. Must end in a result or a wpk::Error; anything else escapes to the caller.
#include <chrono>
#include <string>

#include "wpk/wpk.hpp"

namespace wpk::fuzz {

// Bounds well inside the fuzzer's -rss_limit_mb: a model asking for more must be refused.
inline SessionOptions bounded_options() {
  SessionOptions options;
  options.threads = 1;
  options.memory_limit = std::int64_t(512) << 20;
  options.max_tensor_elements = std::int64_t(1) << 26;
  options.max_loop_iterations = 1 << 10;  // a Loop that never ends stops here
  return options;
}

inline void load_and_run(const std::string& bytes) {
  Session s(load_from_bytes(bytes), bounded_options());
  TensorMap inputs;
  for (const ValueInfo& in : s.inputs()) {
    if (!in.dims) return;
    Shape shape;
    for (const Dim& d : *in.dims) shape.push_back(d.is_static() ? d.value : 1);
    // Keep fuzzed inputs small: the point is parsing and validation, not big arithmetic.
    if (shape_numel(shape) > (1 << 16)) return;
    inputs[in.name] = Tensor::zeros(in.dtype, shape);
  }
  RunOptions run;
  run.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);  // the fuzzer's own limit is 25 s
  s.run(inputs, run);
}

}  // namespace wpk::fuzz
