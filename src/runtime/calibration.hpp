#pragma once
// The ranges quantization gives activations: the float model run on calibration samples with
// the activations to quantize exposed as outputs, their values summarised per tensor.
#include <map>
#include <string>
#include <vector>

#include "wpk/quantize.hpp"

namespace wpk {

struct ActivationRange {
  float lo = 0, hi = 0;  // always lo <= 0 <= hi: zero must be exactly representable
};

// Runs the serialized model (`base_dir` resolves its external data) on every sample and returns
// the range of each named value, by options.method: "minmax" the extremes seen, "percentile" the
// central options.percentile percent of all values seen (a second pass over the samples).
std::map<std::string, ActivationRange> calibrate_ranges(const std::string& model_bytes, const std::string& base_dir,
                                                        const std::vector<std::string>& names,
                                                        const std::vector<TensorMap>& samples,
                                                        const QuantizeOptions& options);

}  // namespace wpk
