#include "backends/cpu/weight_packing.hpp"

#include <omp.h>

#include "core/page_memory.hpp"

namespace wpk::cpu {

std::int64_t acdb_floats(std::int64_t oc, std::int64_t ic, std::int64_t kh, std::int64_t kw, std::int64_t block) {
  return (oc + block - 1) / block * block * ic * kh * kw;
}

std::shared_ptr<const float> pack_acdb(const float* w, std::int64_t oc, std::int64_t ic, std::int64_t kh,
                                       std::int64_t kw, std::int64_t block, bool transposed_matrix) {
  const std::int64_t floats = acdb_floats(oc, ic, kh, kw, block);
  const std::shared_ptr<void> bytes = long_lived_zeroed(static_cast<std::size_t>(floats) * sizeof(float));
  float* out = static_cast<float*>(bytes.get());
  const std::int64_t blocks = (oc + block - 1) / block, taps = kh * kw;
  // Writes run sequentially through each block; the zeroed padding is left as it is. On the
  // packing thread alone: packing happens once, at load, where the session's threads are
  // preparing other nodes, and an OpenMP team opened here would spin beside them.
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t t = 0; t < taps; ++t)
      for (std::int64_t i = 0; i < ic; ++i) {
        float* row = out + ((b * taps + t) * ic + i) * block;
        for (std::int64_t j = 0; j < block && b * block + j < oc; ++j) {
          const std::int64_t o = b * block + j;
          row[j] = transposed_matrix ? w[i * oc + o] : w[(o * ic + i) * taps + t];
        }
      }
  return std::shared_ptr<const float>(bytes, out);
}

}  // namespace wpk::cpu
