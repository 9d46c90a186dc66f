#pragma once
// Models that declare ONNX opsets 1 to 6 (older exporters, PyTorch's among them) are rewritten to
// opset 7 before import, op by op, where the old versions differ: in-place hints and the training
// switch dropped, the legacy `broadcast`/`axis` of binary ops turned into opset 7's trailing
// alignment, Concat-1's default axis, Cast-1's type names, Reshape-1's shape attribute, PRelu's
// per-channel slope. Ops whose old meaning wpk does not rewrite are refused by name. (The ONNX
// library's version converter does this too, but crashes on hostile models: the fuzzer found one
// within seconds.)
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace wpk::onnx_import {

// Rewrites `model`, which declares default-domain opset `from` (< `to`), to opset `to`. Throws
// wpk::Error (Unsupported or InvalidModel) naming the node it cannot rewrite.
void upgrade_opset(onnx::ModelProto& model, std::int64_t from, std::int64_t to);

}  // namespace wpk::onnx_import
