// ONNX backend node tests (Debian's libonnx-testdata) run through wpk: wpk's conformance suite.
// Prints one line per failing case and a per-op table, and exits non-zero when fewer than
// --min-pass cases pass.
//
//   wpk_conformance [--data DIR] [--filter SUBSTRING] [--min-pass N] [--verbose]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

namespace fs = std::filesystem;

namespace {

enum class Outcome { Passed, Wrong, Unsupported };

struct Result {
  Outcome outcome;
  std::string detail;
};

// ONNX 1.12's test data stores bfloat16 tensors as uint16 bits; read them as what the model says.
wpk::Tensor as_bfloat16_if_bits(const wpk::Tensor& t, wpk::DType want) {
  if (want != wpk::DType::BFloat16 || t.dtype() != wpk::DType::UInt16) return t;
  return wpk::Tensor::borrow(const_cast<void*>(t.raw()), want, t.shape()).clone();
}

// A test-data file read as the model declares the value: a tensor, a sequence or an optional.
wpk::Tensor load_value(const fs::path& file, const wpk::ValueInfo& info) {
  const wpk::DType element = info.element_dtype == wpk::DType::Undefined ? wpk::DType::Float32 : info.element_dtype;
  if (info.optional) return wpk::load_optional(file.string(), element);
  if (info.dtype == wpk::DType::Sequence) return wpk::load_sequence(file.string(), element);
  return as_bfloat16_if_bits(wpk::load_tensor(file.string()), info.dtype);
}

// The ONNX backend test runner's default tolerances.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// Tensors within the tolerances; sequences element by element; optionals both none or both not.
std::string compare_values(const wpk::Tensor& actual, const wpk::Tensor& expected) {
  if (actual.is_none() || expected.is_none())
    return actual.is_none() == expected.is_none() ? "" : std::string(actual.is_none() ? "none" : "a value") + ", expected " +
                                                              (expected.is_none() ? "none" : "a value");
  if (expected.is_sequence()) {
    if (!actual.is_sequence()) return std::string("a ") + wpk::dtype_name(actual.dtype()) + " tensor, expected a sequence";
    if (actual.elements().size() != expected.elements().size())
      return std::to_string(actual.elements().size()) + " elements, expected " + std::to_string(expected.elements().size());
    for (std::size_t e = 0; e < expected.elements().size(); ++e) {
      const std::string d = compare_values(actual.elements()[e], expected.elements()[e]);
      if (!d.empty()) return "element " + std::to_string(e) + ": " + d;
    }
    return "";
  }
  return wpk::testing::compare_allclose(actual, expected, kRtol, kAtol);
}

Result run_case(const fs::path& dir) {
  std::unique_ptr<wpk::Session> session;
  try {
    session = std::make_unique<wpk::Session>(wpk::load((dir / "model.onnx").string()));
  } catch (const wpk::Error& e) {
    return {e.code() == wpk::ErrorCode::Unsupported ? Outcome::Unsupported : Outcome::Wrong, e.what()};
  }
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  for (const auto& set : sets) {
    wpk::TensorMap inputs;
    std::vector<wpk::Tensor> expected;
    try {
      const auto in_files = numbered_files(set, "input_");
      if (in_files.size() != session->inputs().size())
        return {Outcome::Wrong, "test data has " + std::to_string(in_files.size()) + " inputs, session expects " +
                                    std::to_string(session->inputs().size())};
      for (std::size_t i = 0; i < in_files.size(); ++i) {
        const wpk::ValueInfo& info = session->inputs()[i];
        inputs[info.name] = load_value(in_files[i], info);
      }
      const auto out_files = numbered_files(set, "output_");
      for (std::size_t i = 0; i < out_files.size(); ++i)
        expected.push_back(i < session->outputs().size() ? load_value(out_files[i], session->outputs()[i])
                                                         : wpk::load_tensor(out_files[i].string()));
    } catch (const wpk::Error& e) {
      return {Outcome::Unsupported, std::string("test data: ") + e.what()};  // e.g. sequence or string tensors
    }
    wpk::TensorMap outputs;
    try {
      outputs = session->run(inputs);
    } catch (const wpk::Error& e) {
      return {e.code() == wpk::ErrorCode::Unsupported ? Outcome::Unsupported : Outcome::Wrong, e.what()};
    }
    if (expected.size() != session->outputs().size())
      return {Outcome::Wrong, "expected " + std::to_string(expected.size()) + " outputs, model has " +
                                  std::to_string(session->outputs().size())};
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const std::string& name = session->outputs()[i].name;
      std::string diff = compare_values(outputs.at(name), expected[i]);
      if (!diff.empty()) return {Outcome::Wrong, set.filename().string() + " output '" + name + "': " + diff};
    }
  }
  return {Outcome::Passed, ""};
}

// The op a case is about: the model op whose name the test name starts with, else the first op.
std::string op_of_case(const fs::path& dir) {
  std::string test = dir.filename().string();
  std::string flat;
  for (char c : test.substr(5)) if (c != '_') flat += static_cast<char>(std::tolower(c));
  try {
    wpk::Graph g = wpk::load((dir / "model.onnx").string());
    std::string best;
    for (const auto& n : g.nodes()) {
      std::string op;
      for (char c : n.op_type) op += static_cast<char>(std::tolower(c));
      if (flat.rfind(op, 0) == 0 && n.op_type.size() > best.size()) best = n.op_type;
    }
    if (!best.empty()) return best;
    if (!g.nodes().empty()) return g.nodes().front().op_type;
  } catch (const wpk::Error&) {
  }
  return test;
}

}  // namespace

int main(int argc, char** argv) {
  // Arena poisoning on (unless the environment says otherwise): see the runtime's memory planner.
  setenv("WPK_ARENA_POISON", "1", /*overwrite=*/0);
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string filter;
  int min_pass = 0;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) data = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--min-pass" && i + 1 < argc) min_pass = std::atoi(argv[++i]);
    else if (a == "--verbose") verbose = true;
    else {
      std::fprintf(stderr, "usage: wpk_conformance [--data DIR] [--filter SUBSTRING] [--min-pass N] [--verbose]\n");
      return 2;
    }
  }
  if (!fs::is_directory(data)) {
    std::fprintf(stderr, "wpk_conformance: no test data at %s (install libonnx-testdata)\n", data.c_str());
    return 2;
  }
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  struct Tally { int passed = 0, wrong = 0, unsupported = 0; };
  std::map<std::string, Tally> per_op;
  Tally total;
  for (const auto& dir : cases) {
    const Result r = run_case(dir);
    Tally& t = per_op[op_of_case(dir)];
    const char* tag = "PASS";
    if (r.outcome == Outcome::Passed) { ++t.passed; ++total.passed; }
    else if (r.outcome == Outcome::Wrong) { ++t.wrong; ++total.wrong; tag = "WRONG"; }
    else { ++t.unsupported; ++total.unsupported; tag = "UNSUPPORTED"; }
    if (verbose || r.outcome == Outcome::Wrong || (!filter.empty() && r.outcome != Outcome::Passed))
      std::printf("%-12s %s%s%s\n", tag, dir.filename().c_str(), r.detail.empty() ? "" : ": ", r.detail.c_str());
  }
  std::printf("\n%-34s %7s %7s %12s\n", "op", "passed", "wrong", "unsupported");
  for (const auto& kv : per_op)
    std::printf("%-34s %7d %7d %12d\n", kv.first.c_str(), kv.second.passed, kv.second.wrong, kv.second.unsupported);
  std::printf("%-34s %7d %7d %12d   (of %zu cases)\n", "TOTAL", total.passed, total.wrong, total.unsupported, cases.size());
  if (total.passed < min_pass) {
    std::printf("FAIL: %d cases passed, at least %d required\n", total.passed, min_pass);
    return 1;
  }
  return 0;
}
