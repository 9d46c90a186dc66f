#include "backends/onednn/winograd_weight_packing.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace wpk::onednn {
namespace {

constexpr int kTaps = 3;   // r: the kernel's rows and columns
constexpr int kAlpha = 4;  // a transformed tile's rows and columns (2 outputs + 3 taps - 1)

// F(2x2, 3x3)'s weight transform, the tile's rows (columns) from the kernel's.
constexpr float kG[kAlpha][kTaps] = {{1.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.0f, 0.0f, 1.0f}};

bool is_plain_oihw_3x3(const dnnl_memory_desc_t& d) {
  const auto& b = d.format_desc.blocking;
  return d.ndims == 4 && d.data_type == dnnl_f32 && d.format_kind == dnnl_blocked && d.offset0 == 0 &&
         b.inner_nblks == 0 && d.dims[2] == kTaps && d.dims[3] == kTaps && d.extra.flags == 0 &&
         b.strides[3] == 1 && b.strides[2] == kTaps && b.strides[1] == kTaps * kTaps &&
         b.strides[0] == d.dims[1] * kTaps * kTaps;
}

bool is_float_wino_2x3(const dnnl_memory_desc_t& d) {
  if (d.format_kind != dnnl_format_kind_wino || d.data_type != dnnl_f32 || d.ndims != 4) return false;
  const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
  const bool layout = w.wino_format == dnnl_wino_wei_aaOIoi || w.wino_format == dnnl_wino_wei_aaOio ||
                      w.wino_format == dnnl_wino_wei_aaOBiOo;
  return layout && w.r == kTaps && w.alpha == kAlpha && w.ic_block > 0 && w.oc_block > 0 && w.oc2_block > 0 &&
         w.ic % w.ic_block == 0 && w.oc % w.oc_block == 0 && (w.oc / w.oc_block) % w.oc2_block == 0 &&
         w.ic >= d.dims[1] && w.oc >= d.dims[0];
}

// Offset in `to` of the transformed weight at tile position (u, v), input channel i, output
// channel o (both padded), for the wino desc's layout.
std::int64_t wino_offset(const dnnl_wino_desc_t& w, int u, int v, std::int64_t i, std::int64_t o) {
  const std::int64_t ic = w.ic, oc = w.oc, ib = w.ic_block, ob = w.oc_block;
  const std::int64_t tile = (static_cast<std::int64_t>(u) * kAlpha + v) * ic * oc;  // a whole (u, v) plane
  switch (w.wino_format) {
    case dnnl_wino_wei_aaOIoi:  // [O block][I block][o][i]
      return tile + (o / ob) * ob * ic + (i / ib) * ob * ib + (o % ob) * ib + i % ib;
    case dnnl_wino_wei_aaOio:  // [O block][I][o]
      return tile + (o / ob) * ic * ob + i * ob + o % ob;
    default: {  // aaOBiOo: [O chunk of oc2 blocks][I block][i][block of the chunk][o]
      const std::int64_t chunk = w.oc2_block * ob;
      return tile + (o / chunk) * ic * chunk + (i / ib) * ib * chunk + (i % ib) * chunk + o % chunk;
    }
  }
}

}  // namespace

bool pack_winograd_weights(const dnnl::memory& from, const dnnl::memory& to) {
  const dnnl::memory::desc to_desc = to.get_desc(), from_desc = from.get_desc();
  const dnnl_memory_desc_t& t = to_desc.data;
  const dnnl_memory_desc_t& f = from_desc.data;
  if (!is_float_wino_2x3(t) || !is_plain_oihw_3x3(f) || t.dims[0] != f.dims[0] || t.dims[1] != f.dims[1]) return false;
  const dnnl_wino_desc_t& w = t.format_desc.wino_desc;
  const std::size_t count = static_cast<std::size_t>(kAlpha) * kAlpha * w.ic * w.oc;
  if (to_desc.get_size() < count * sizeof(float)) return false;

  const auto* weights = static_cast<const float*>(from.get_data_handle());
  auto* out = static_cast<float*>(to.get_data_handle());
  std::memset(out, 0, to_desc.get_size());  // padded channels stay zero
  const std::int64_t outputs = f.dims[0], inputs = f.dims[1];
  for (std::int64_t o = 0; o < outputs; ++o)
    for (std::int64_t i = 0; i < inputs; ++i) {
      const float* g = weights + (o * inputs + i) * kTaps * kTaps;
      // Along the kernel's columns first (rows of g by G^T), then along its rows.
      float half[kTaps][kAlpha];
      for (int r = 0; r < kTaps; ++r)
        for (int v = 0; v < kAlpha; ++v) {
          float s = 0.0f;
          for (int c = 0; c < kTaps; ++c) s += g[r * kTaps + c] * kG[v][c];
          half[r][v] = s;
        }
      for (int u = 0; u < kAlpha; ++u)
        for (int v = 0; v < kAlpha; ++v) {
          float s = 0.0f;
          for (int r = 0; r < kTaps; ++r) s += kG[u][r] * half[r][v];
          out[wino_offset(w, u, v, i, o)] = s;
        }
    }
  return true;
}

}  // namespace wpk::onednn
