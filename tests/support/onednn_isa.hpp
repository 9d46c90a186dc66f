// The oneDNN backend for tests, and what it can use on the CPU the tests run on, for tests
// whose expected plan depends on it (oneDNN 2.6's Winograd kernels exist for AVX-512 only).
#pragma once

#include "core/cpu_features.hpp"

#include "backends/onednn/onednn_backend.hpp"

namespace wpk::testing {

// One backend instance shared by a test binary's oneDNN tests.
inline const onednn::OneDnnBackend& onednn_backend() {
  static const onednn::OneDnnBackend backend;
  return backend;
}

inline bool onednn_has_avx512() { return cpu_features().avx512_core(); }

}  // namespace wpk::testing
