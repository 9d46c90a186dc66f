#include "backends/onednn/int8_weight_packing.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace wpk::onednn {
namespace {

constexpr std::int64_t kBlock = 64;  // rows (K) and columns (N) of a block
constexpr std::int64_t kGroup = 4;   // consecutive K codes per column (one VNNI dot product)

bool is_plain_rows(const dnnl_memory_desc_t& d, std::int64_t k, std::int64_t n) {
  const auto& b = d.format_desc.blocking;
  return d.ndims == 2 && d.data_type == dnnl_s8 && d.format_kind == dnnl_blocked && d.dims[0] == k && d.dims[1] == n &&
         d.offset0 == 0 && b.inner_nblks == 0 && b.strides[0] == n && b.strides[1] == 1 && d.extra.flags == 0;
}

bool is_vnni_blocks(const dnnl_memory_desc_t& d) {
  const auto& b = d.format_desc.blocking;
  if (d.ndims != 2 || d.data_type != dnnl_s8 || d.format_kind != dnnl_blocked || d.offset0 != 0) return false;
  if (b.inner_nblks != 3 || b.inner_blks[0] != 16 || b.inner_idxs[0] != 0 || b.inner_blks[1] != kBlock ||
      b.inner_idxs[1] != 1 || b.inner_blks[2] != kGroup || b.inner_idxs[2] != 0)
    return false;
  const std::int64_t kp = d.padded_dims[0], np = d.padded_dims[1];
  if (kp % kBlock || np % kBlock || d.padded_offsets[0] || d.padded_offsets[1]) return false;
  if (b.strides[0] != kBlock * kBlock || b.strides[1] != kp * kBlock) return false;
  // Nothing but the compensation of an unsigned A's zero point, per column.
  if (d.extra.flags == 0) return true;
  return d.extra.flags == dnnl_memory_extra_flag_compensation_conv_asymmetric_src && d.extra.asymm_compensation_mask == 2;
}

}  // namespace

bool pack_int8_product_weights(const dnnl::memory& from, const dnnl::memory& to) {
  const dnnl::memory::desc to_desc = to.get_desc();
  const dnnl_memory_desc_t& t = to_desc.data;
  if (!is_vnni_blocks(t)) return false;
  const std::int64_t k = t.dims[0], n = t.dims[1], kp = t.padded_dims[0], np = t.padded_dims[1];
  if (!is_plain_rows(from.get_desc().data, k, n)) return false;
  const bool compensate = t.extra.flags != 0;
  const std::size_t data_bytes = static_cast<std::size_t>(kp * np);
  if (to_desc.get_size() < data_bytes + (compensate ? static_cast<std::size_t>(np) * sizeof(std::int32_t) : 0)) return false;

  const auto* w = static_cast<const std::int8_t*>(from.get_data_handle());
  auto* out = static_cast<std::int8_t*>(to.get_data_handle());
  std::memset(out, 0, to_desc.get_size());
  std::vector<std::int32_t> sums(static_cast<std::size_t>(np), 0);
  for (std::int64_t r = 0; r < k; ++r) {
    const std::int8_t* row = w + r * n;
    // Row r's place within a column of every block of its K block.
    std::int8_t* block_row = out + (r / kBlock) * kBlock * kBlock + (r % kBlock / kGroup) * kBlock * kGroup + r % kGroup;
    for (std::int64_t c = 0; c < n; ++c) {
      block_row[(c / kBlock) * kp * kBlock + (c % kBlock) * kGroup] = row[c];
      sums[static_cast<std::size_t>(c)] += row[c];
    }
  }
  if (compensate) {
    for (std::int32_t& s : sums) s = -s;
    std::memcpy(out + data_bytes, sums.data(), sums.size() * sizeof(std::int32_t));
  }
  return true;
}

}  // namespace wpk::onednn
