// oneDNN quietly runs a primitive on its reference code when its optimized kernels lack what the
// attributes ask for: correct, and hundreds of times slower. The epilogues wpk asks of it are
// checked here on the CPU at hand by reading oneDNN's own report of what ran (its verbose log).
#include <catch2/catch.hpp>

#ifdef WPK_WITH_ONEDNN
#include <dnnl.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <unistd.h>

#include "support/backend_tester.hpp"
#include "support/onednn_isa.hpp"

using wpk::Shape;
using wpk::Tensor;
using wpk::testing::OpCase;

namespace {

// What oneDNN prints while `work` runs (stdout, where its verbose log goes).
template <typename Work>
std::string onednn_log_of(const Work& work) {
  std::fflush(stdout);
  std::FILE* log = std::tmpfile();
  REQUIRE(log);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(::fileno(log), STDOUT_FILENO);
  dnnl::set_verbose(1);
  work();
  std::fflush(stdout);
  dnnl::set_verbose(0);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::rewind(log);
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, log)) > 0;) text.append(buffer, n);
  std::fclose(log);
  return text;
}

template <typename T>
Tensor codes(const Shape& shape, int lo, int hi) {
  std::vector<T> v(static_cast<std::size_t>(wpk::shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(lo + static_cast<int>((i * 7919 + 13) % (hi - lo + 1)));
  return Tensor::from_vector(v, shape);
}

// The executed primitives of `kind` ("convolution", "matmul") in a verbose log, and how many of
// them ran on reference code.
std::pair<int, int> executions(const std::string& log, const std::string& kind) {
  std::istringstream lines(log);
  int all = 0, reference = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find(",exec,") != std::string::npos && line.find("," + kind + ",") != std::string::npos) {
      ++all;
      reference += line.find("," + kind + ",ref") != std::string::npos;
    }
  return {all, reference};
}

}  // namespace

TEST_CASE("quantized residual epilogues in float arithmetic run on oneDNN's optimized kernels", "[onednn][int8]") {
  OpCase conv("QLinearConvAdd", "com.wpk");
  conv.input("X", codes<std::uint8_t>({1, 6, 6, 16}, 0, 255)).constant("XS", Tensor::scalar(0.04f))
      .constant("XZ", Tensor::scalar(std::uint8_t{9})).constant("W", codes<std::int8_t>({32, 16, 1, 1}, -127, 127))
      .constant("WS", Tensor::scalar(0.003f)).constant("WZ", Tensor::scalar(std::int8_t{0}))
      .constant("YS", Tensor::scalar(0.5f)).constant("YZ", Tensor::scalar(std::uint8_t{60}))
      .constant("B", codes<std::int32_t>({32}, -2000, 2000)).input("R", codes<std::uint8_t>({1, 6, 6, 32}, 0, 255)).constant("RS", Tensor::scalar(0.3f))
      .constant("RZ", Tensor::scalar(std::uint8_t{130})).constant("SS", Tensor::scalar(0.4f))
      .constant("SZ", Tensor::scalar(std::uint8_t{0})).attr("channels_last", std::int64_t{1});
  OpCase product("MatMulIntegerToFloat", "com.wpk");
  product.input("A", codes<std::uint8_t>({9, 33}, 0, 255)).constant("B", codes<std::int8_t>({33, 40}, -127, 127))
      .input("AS", Tensor::scalar(0.02f)).constant("BS", Tensor::scalar(0.01f))
      .input("AZ", Tensor::scalar(std::uint8_t{120})).constant("BZ", Tensor::scalar(std::int8_t{0}))
      .constant("Bias", {40}).input("Z", {9, 40}).activation("Relu");
  struct Case {
    const OpCase& op;
    std::string kind;
    double rtol, atol;  // codes within one step; floats as the candidate sweep holds them
  };
  for (const Case& c : {Case{conv, "convolution", 0, 1}, Case{product, "matmul", 1e-5, 1e-5}}) {
    INFO(c.op.describe());
    std::string mismatch;
    const std::string log =
        onednn_log_of([&] { mismatch = c.op.check(wpk::testing::onednn_backend(), "arithmetic=float", c.rtol, c.atol); });
    CHECK(mismatch == "");
    const auto [ran, on_reference] = executions(log, c.kind);
    CHECK(ran > 0);  // the log was read: a check that could not fail otherwise
    CHECK(on_reference == 0);
  }
}
#endif  // WPK_WITH_ONEDNN
