#include "runtime/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "wpk/wpk.hpp"

namespace wpk {
namespace {

// Bins of the percentile method's histograms, between each value's extremes.
constexpr std::size_t kBins = 4096;

const Tensor& float_output(const TensorMap& outputs, const std::string& name) {
  const auto it = outputs.find(name);
  if (it == outputs.end()) throw Error(ErrorCode::Internal, "calibration did not compute '" + name + "'");
  if (it->second.dtype() != DType::Float32)
    throw Error(ErrorCode::InvalidModel, "'" + name + "' is " + dtype_name(it->second.dtype()) + ", not float32");
  return it->second;
}

// Calls f(name, values, count) for each named value of each sample's run.
template <typename F>
void for_each_run(const Session& session, const std::vector<std::string>& names, const std::vector<TensorMap>& samples,
                  F&& f) {
  for (const TensorMap& sample : samples) {
    const TensorMap out = session.run(sample);
    for (const std::string& name : names) {
      const Tensor& t = float_output(out, name);
      f(name, t.data<float>(), t.numel());
    }
  }
}

// The value below which `fraction` of the histogram's mass lies.
float quantile(const std::vector<std::uint64_t>& bins, float lo, float hi, double fraction) {
  std::uint64_t total = 0;
  for (auto b : bins) total += b;
  const double want = fraction * static_cast<double>(total);
  double seen = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    seen += static_cast<double>(bins[i]);
    if (seen >= want) return lo + (hi - lo) * static_cast<float>(i + 1) / static_cast<float>(bins.size());
  }
  return hi;
}

}  // namespace

std::map<std::string, ActivationRange> calibrate_ranges(const std::string& model_bytes, const std::string& base_dir,
                                                        const std::vector<std::string>& names,
                                                        const std::vector<TensorMap>& samples,
                                                        const QuantizeOptions& options) {
  const Session session(load_from_bytes(model_bytes, base_dir), options.session);
  std::map<std::string, ActivationRange> ranges;
  std::map<std::string, bool> finite;
  for (const std::string& n : names) {
    ranges[n] = {0, 0};
    finite[n] = true;
  }
  for_each_run(session, names, samples, [&](const std::string& name, const float* v, std::int64_t n) {
    ActivationRange& r = ranges[name];
    for (std::int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) {
        finite[name] = false;
        continue;
      }
      r.lo = std::min(r.lo, v[i]);
      r.hi = std::max(r.hi, v[i]);
    }
  });
  for (const auto& [name, ok] : finite)
    if (!ok) throw Error(ErrorCode::InvalidArgument, "calibration gave '" + name + "' values that are not finite");
  if (options.method == "minmax") return ranges;

  std::map<std::string, std::vector<std::uint64_t>> histograms;
  for (const std::string& n : names) histograms[n].assign(kBins, 0);
  for_each_run(session, names, samples, [&](const std::string& name, const float* v, std::int64_t n) {
    const ActivationRange& r = ranges[name];
    if (r.hi <= r.lo) return;
    std::vector<std::uint64_t>& h = histograms[name];
    const float per_bin = static_cast<float>(kBins) / (r.hi - r.lo);
    for (std::int64_t i = 0; i < n; ++i) {
      const float b = (v[i] - r.lo) * per_bin;
      h[std::min(kBins - 1, static_cast<std::size_t>(std::max(0.0f, b)))]++;
    }
  });
  const double tail = (100.0 - options.percentile) / 200.0;  // each side's share of the outliers
  for (auto& [name, r] : ranges) {
    if (r.hi <= r.lo) continue;
    const std::vector<std::uint64_t>& h = histograms[name];
    const float lo = quantile(h, r.lo, r.hi, tail) - (r.hi - r.lo) / static_cast<float>(kBins);
    const float hi = quantile(h, r.lo, r.hi, 1.0 - tail);
    r = {std::min(0.0f, std::max(lo, r.lo)), std::max(0.0f, std::min(hi, r.hi))};
  }
  return ranges;
}

}  // namespace wpk
