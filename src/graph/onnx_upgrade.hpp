#pragma once
// Models that declare ONNX opsets 1 to 6 (older exporters, PyTorch's among them) are rewritten to
// opset 7 by the ONNX library's version converter before wpk imports them: it knows each op's old
// semantics (Add's legacy `broadcast`/`axis`, BatchNormalization's `is_test`, ...) and rewrites
// them into opset 7's. The model must pass the ONNX checker first, since the converter trusts its
// input.
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace wpk::onnx_import {

// Rewrites `model`, which declares default-domain opset `from` (< `to`), to opset `to`. Throws
// wpk::Error (Unsupported) naming the opset and what the checker or converter refused.
void upgrade_opset(onnx::ModelProto& model, std::int64_t from, std::int64_t to);

}  // namespace wpk::onnx_import
