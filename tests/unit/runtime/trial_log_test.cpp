// The trial log a search stores beside its record: round trip, and damage skipped item by item.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "runtime/trial_log.hpp"

using wpk::LoggedTrial;

TEST_CASE("a trial log reads back what was written, failed trials included", "[tuning]") {
  const std::vector<LoggedTrial> log = {
      {"cpu(kernel=stream_avx512,block=64)", 2, 845.125, 910.5, "f32_conv_stream_nhwc__avx512_7x64"},
      {"onednn(algorithm=direct,layout=blocked)", 1, 1203.0, 1500.25, ""},
      {"reference", 2, std::numeric_limits<double>::infinity(), 20000, ""}};
  const std::vector<LoggedTrial> back = wpk::decode_trial_log(wpk::encode_trial_log(log));
  REQUIRE(back.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back[i].identity == log[i].identity);
    CHECK(back[i].threads == log[i].threads);
    CHECK(back[i].predicted_us == Approx(log[i].predicted_us));
    CHECK(back[i].kernel == log[i].kernel);
  }
  CHECK(back[0].us == Approx(845.125));
  CHECK(std::isinf(back[2].us));
}

TEST_CASE("a damaged trial log yields its well-formed items only", "[tuning]") {
  CHECK(wpk::decode_trial_log("onednn|2|100|90;").empty());  // no prefix: not a trial log
  const auto back = wpk::decode_trial_log(
      "trials:onednn|2|100|90;|2|1|1;cpu|x|1|1;cpu|0|1|1;cpu|2|nan|1;cpu|2|-5|1;onednn|1|50;cpu|2|7|oops;trunc|2");
  REQUIRE(back.size() == 3);
  CHECK(back[0].identity == "onednn");
  CHECK(back[1].threads == 1);
  CHECK(back[1].predicted_us == 0);  // an older log without predictions
  CHECK(back[2].identity == "cpu");
  CHECK(back[2].predicted_us == 0);  // an unreadable prediction is none
  CHECK(back[0].kernel.empty());      // a log from before kernels were named
}
