#pragma once
// Runs f, expects a wpk::Error with `code` whose message contains every fragment.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "wpk/error.hpp"

namespace wpk::testing {

template <typename F>
void expect_error(F&& f, ErrorCode code, std::vector<std::string> fragments) {
  try {
    f();
    FAIL("no wpk::Error thrown");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    for (const auto& frag : fragments) CHECK(std::string(e.what()).find(frag) != std::string::npos);
  }
}

}  // namespace wpk::testing
