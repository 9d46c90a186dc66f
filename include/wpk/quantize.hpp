#pragma once
// Static int8 quantization of an ONNX model into the QDQ form (QuantizeLinear/DequantizeLinear
// pairs around float ops), which wpk runs on integer kernels and other runtimes also run.
#include <string>
#include <vector>

#include "wpk/options.hpp"
#include "wpk/session.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

struct QuantizeOptions {
  // How an activation's range is read from the calibration runs: "minmax" (everything seen) or
  // "percentile" (the central `percentile` percent of the values seen; outliers clip).
  std::string method = "minmax";
  double percentile = 99.99;  // in (50, 100]
  // Weights in [-64, 64] instead of [-127, 127]: what CPUs without VNNI or AMX (AMD Zen 3) need
  // to run the integer kernels exactly (their 8-bit pair sums are 16-bit); a little accuracy for
  // several times the speed there.
  bool reduce_range = false;
  // How the float model runs while calibrating.
  SessionOptions session;
};

struct QuantizeReport {
  int convs = 0;        // Conv nodes given int8 weights (per output channel) and an int32 bias
  int products = 0;     // MatMul/Gemm nodes given int8 B (per output column)
  int activations = 0;  // tensors given a QuantizeLinear/DequantizeLinear pair (uint8)
  int samples = 0;      // calibration inputs run
  // Convs and products left in float, each "Op 'name': why".
  std::vector<std::string> skipped;
};

// Reads the ONNX model at `model_path` (opset 13 or later), runs it on each calibration sample
// (all its inputs by name) to find the activations' ranges, and writes to `out_path` the model
// with Conv weights quantized to int8 symmetric per output channel, biases to int32 at
// input scale x weight scale, MatMul/Gemm constant B to int8 per output column, and uint8
// QuantizeLinear/DequantizeLinear pairs on the Convs' inputs and outputs (after their Relu or
// Clip(0, max)), the Adds that join them, MaxPools between them (which keep their input's
// scale) and the products' A inputs. Other ops, and the products' outputs, stay float. Throws Error: NotFound, InvalidModel,
// InvalidArgument (no samples, a sample missing an input, bad options), Io.
QuantizeReport quantize_model(const std::string& model_path, const std::vector<TensorMap>& calibration,
                              const std::string& out_path, const QuantizeOptions& options = {});

}  // namespace wpk

#pragma GCC visibility pop
