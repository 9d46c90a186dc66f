// The environment every unit test runs in, set before main() (an explicit setting in the
// environment wins):
// - WPK_ARENA_POISON=1: every arena block is filled with 0xFF before a run, so a kernel that
//   reads an output before writing it fails a test instead of passing on leftover or zeroed
//   bytes (=0 to compare);
// - WPK_CACHE_DIR: a folder of the test binary's own, so tuning records in the user's cache
//   folder cannot change which kernels the tests run (tests that tune use folders of their own),
//   removed when the process ends;
// - WPK_COMPILE_IN_BACKGROUND=0: a session's kernels do not change between its runs when a
//   compiler finishes (tests of compiling after load turn it on for themselves).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {
std::string& own_cache_folder() {
  static std::string folder;
  return folder;
}

pid_t g_owner = 0;

// A forked child's exit leaves it to the parent.
void remove_own_cache_folder() {
  std::error_code ec;
  if (::getpid() == g_owner) std::filesystem::remove_all(own_cache_folder(), ec);
}

const bool kEnvSet = [] {
  // The folder is the process's own: it goes when the process ends, unless the environment named another.
  if (!std::getenv("WPK_CACHE_DIR")) {
    g_owner = ::getpid();
    own_cache_folder() = "/tmp/wpk_test_no_tuning_records_" + std::to_string(g_owner);
    ::setenv("WPK_CACHE_DIR", own_cache_folder().c_str(), 0);
    std::atexit(remove_own_cache_folder);
  }
  return ::setenv("WPK_ARENA_POISON", "1", /*overwrite=*/0) == 0 && ::setenv("WPK_COMPILE_IN_BACKGROUND", "0", 0) == 0;
}();
}  // namespace
