// Profiles of timed runs: a per-node table for `wpk bench --profile` and a Chrome trace
// (`--trace FILE.json`, opens in Perfetto or chrome://tracing).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cli.hpp"

namespace wpk::cli {
namespace {

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
}

// A backend's name as the table shows it: a device region names every kernel it runs (thousands
// of characters for BERT), which would widen every row; the table keeps the start.
constexpr std::size_t kBackendWidth = 72;
std::string backend_cell(const std::string& backend) {
  return backend.size() <= kBackendWidth ? backend : backend.substr(0, kBackendWidth - 3) + "...";
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

void print_profile_table(const std::vector<RunProfile>& runs) {
  if (runs.empty() || runs.front().steps.empty()) return;
  // Each step's median over the runs: one slow outlier run should not reorder the table.
  const std::size_t n = runs.front().steps.size();
  std::vector<double> per_step(n);
  std::vector<double> totals;
  for (std::size_t s = 0; s < n; ++s) {
    std::vector<double> times;
    for (const RunProfile& r : runs)
      if (s < r.steps.size()) times.push_back(r.steps[s].duration_us);
    per_step[s] = median_of(times);
  }
  for (const RunProfile& r : runs) totals.push_back(r.total_us);
  double sum = 0;
  for (double t : per_step) sum += t;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return per_step[a] > per_step[b]; });

  std::printf("\nper-node profile (median of %zu runs; steps sum to %.3f ms, run median %.3f ms)\n", runs.size(),
              sum / 1000, median_of(totals) / 1000);
  if (runs.front().batch_parts > 1)
    std::printf("the batch ran in %d parts at once, one a thread (a tuning record chose it): the steps are the first "
                "part's\n",
                runs.front().batch_parts);
  int width = 4;  // the node column fits the longest name
  int backend_width = 10;  // "onednn:stream" is wider than the rest
  bool cut = false;
  for (const StepProfile& p : runs.front().steps) {
    width = std::max(width, static_cast<int>(p.node.size()));
    backend_width = std::max(backend_width, static_cast<int>(backend_cell(p.backend).size()));
    cut |= p.backend.size() > kBackendWidth;
  }
  if (cut)
    std::printf("(long backend names cut short; a device region's steps and their device times: WPK_LOG_LEVEL=debug)\n");
  std::printf("%10s %7s  %-*s %-24s %-*s %-12s %s\n", "ms", "share", width, "node", "op", backend_width, "backend",
              "layout", "output");
  for (std::size_t i : order) {
    const StepProfile& p = runs.front().steps[i];
    std::printf("%10.3f %6.1f%%  %-*s %-24s %-*s %-12s %s\n", per_step[i] / 1000, sum > 0 ? 100 * per_step[i] / sum : 0,
                width, p.node.c_str(), p.op.c_str(), backend_width, backend_cell(p.backend).c_str(), p.layout.c_str(),
                shape_to_string(p.output_shape).c_str());
  }
}

void write_chrome_trace(const std::vector<RunProfile>& runs, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorCode::Io, "cannot write trace file '" + path + "'");
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  double origin = 0;  // runs are laid end to end, each step at its offset within its run
  bool first = true;
  char num[64];
  auto event = [&](const std::string& name, const std::string& cat, double ts, double dur, const std::string& args) {
    out << (first ? "" : ",\n") << "{\"name\": " << json_string(name) << ", \"cat\": " << json_string(cat)
        << ", \"ph\": \"X\", \"pid\": 1, \"tid\": 1";
    std::snprintf(num, sizeof num, ", \"ts\": %.3f, \"dur\": %.3f", ts, dur);
    out << num << ", \"args\": {" << args << "}}";
    first = false;
  };
  for (std::size_t r = 0; r < runs.size(); ++r) {
    event("run " + std::to_string(r), "run", origin, runs[r].total_us, "");
    for (const StepProfile& p : runs[r].steps)
      event(p.node, p.op, origin + p.start_us, p.duration_us,
            "\"op\": " + json_string(p.op) + ", \"backend\": " + json_string(p.backend) + ", \"layout\": " +
                json_string(p.layout) + ", \"output\": " + json_string(shape_to_string(p.output_shape)));
    origin += runs[r].total_us + 10;  // a small gap keeps runs apart on the timeline
  }
  out << "\n]}\n";
  if (!out) throw Error(ErrorCode::Io, "cannot write trace file '" + path + "'");
}

}  // namespace wpk::cli
