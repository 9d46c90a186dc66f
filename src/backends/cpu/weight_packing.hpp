#pragma once
// Constant weights repacked into the layouts wpk's own kernels read, once at load, into
// long-lived memory (core/page_memory.hpp: huge pages where the system has them).
#include <cstdint>
#include <memory>

namespace wpk::cpu {

// OIHW float32 weights [oc][ic][kh][kw] as Acdb{block}a: [ceil(oc / block)][kh][kw][ic][block],
// output channels innermost in blocks, the last block zero-padded. `transposed_matrix`: the
// weights are a [ic][oc] matrix (a product's [K, N] B, a 1x1 conv read as hwio) instead.
std::shared_ptr<const float> pack_acdb(const float* w, std::int64_t oc, std::int64_t ic, std::int64_t kh,
                                       std::int64_t kw, std::int64_t block, bool transposed_matrix = false);

// Floats pack_acdb writes.
std::int64_t acdb_floats(std::int64_t oc, std::int64_t ic, std::int64_t kh, std::int64_t kw, std::int64_t block);

}  // namespace wpk::cpu
