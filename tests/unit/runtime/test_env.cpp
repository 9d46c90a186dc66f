// The environment every unit test runs in, set before main() (an explicit setting in the
// environment wins):
// - WPK_ARENA_POISON=1: every arena block is filled with 0xFF before a run, so a kernel that
//   reads an output before writing it fails a test instead of passing on leftover or zeroed
//   bytes (=0 to compare);
// - WPK_CACHE_DIR: a folder of the test binary's own, so tuning records in the user's cache
//   folder cannot change which kernels the tests run (tests that tune use folders of their own);
// - WPK_COMPILE_IN_BACKGROUND=0: a session's kernels do not change between its runs when a
//   compiler finishes (tests of compiling after load turn it on for themselves).
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {
const bool kEnvSet = [] {
  const std::string cache = "/tmp/wpk_test_no_tuning_records_" + std::to_string(::getpid());
  return ::setenv("WPK_ARENA_POISON", "1", /*overwrite=*/0) == 0 && ::setenv("WPK_CACHE_DIR", cache.c_str(), 0) == 0 &&
         ::setenv("WPK_COMPILE_IN_BACKGROUND", "0", 0) == 0;
}();
}  // namespace
