// The unit tests run with arena poisoning on (WPK_ARENA_POISON=1): every arena block is filled
// with 0xFF before a run, so a kernel that reads an output before writing it fails a test
// instead of passing on leftover or zeroed bytes. Set before main(); the runtime reads it when a
// Session is built. An explicit WPK_ARENA_POISON in the environment wins (e.g. =0 to compare).
#include <cstdlib>

namespace {
const bool kPoisonSet = [] { return ::setenv("WPK_ARENA_POISON", "1", /*overwrite=*/0) == 0; }();
}  // namespace
