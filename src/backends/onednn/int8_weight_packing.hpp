#pragma once
// wpk's own packing of int8 product weights into the layout oneDNN's brgemm matmul reads:
// oneDNN 2.6 has no JIT reorder into that layout with the zero-point compensation an unsigned
// A needs, and its generic loop made the reorders most of a quantized transformer's load. Only
// the one layout below is handled; anything else goes to oneDNN's reorder.
#include <dnnl.hpp>

namespace wpk::onednn {

// Packs `from` (int8 [K, N], row-major) into `to` when `to` is the layout of an int8 matmul's
// weights on AVX-512 VNNI brgemm (BA16a64b4a: 64 x 64 blocks, N blocks outermost, four
// consecutive K codes per column), K and N padded to 64 with zeros, followed by the int32
// compensation -sum_k B[k, n] per padded column when `to` asks for it (the src zero point is
// applied as zp * that). Returns false, writing nothing, for any other pair of layouts.
bool pack_int8_product_weights(const dnnl::memory& from, const dnnl::memory& to);

}  // namespace wpk::onednn
