#pragma once
// wpk's own transform of 3x3 convolution weights into the Winograd layouts of oneDNN's F(2x2, 3x3)
// convolution: oneDNN 2.6's reorder into them is a generic loop that made most of a small CNN's
// load (SqueezeNet's six Winograd convolutions). Only float weights, plain OIHW, into the 2x3
// layouts; anything else goes to oneDNN's reorder.
#include <dnnl.hpp>

namespace wpk::onednn {

// Writes G w G^T of every (output, input) channel pair of `from` (float [O, I, 3, 3], plain) into
// `to` when `to` is a float weights tensor of oneDNN's Winograd F(2x2, 3x3) (wino formats aaOIoi,
// aaOio, aaOBiOo), channels past O and I zero. Returns false, writing nothing, for any other pair.
bool pack_winograd_weights(const dnnl::memory& from, const dnnl::memory& to);

}  // namespace wpk::onednn
