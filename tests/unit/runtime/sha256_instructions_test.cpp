// The compiled-kernel store's SHA-256 on the CPU's SHA instructions (codegen/jit/sha256.hpp)
// against its portable rounds and FIPS 180-4's vectors, at every length around the 64-byte
// block and its padding. Here rather than in the codegen tests: whether the CPU has the
// instructions is the runtime's CPU probe's to say.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/jit/sha256.hpp"
#include "core/cpu_features.hpp"

using wpk::codegen::sha256_hex;
using wpk::codegen::use_sha_instructions;

TEST_CASE("SHA-256 on the SHA instructions equals the portable rounds", "[codegen][sha256]") {
  if (!wpk::cpu_features().sha) {
    WARN("no SHA instructions on this CPU: the portable rounds are the only ones");
    return;
  }
  std::string text;
  for (int n = 0; n < 300; ++n) {
    text += static_cast<char>((n * 131 + 7) % 256);
    use_sha_instructions(false);
    const std::string portable = sha256_hex(text);
    use_sha_instructions(true);
    INFO(n + 1 << " bytes");
    CHECK(sha256_hex(text) == portable);
  }
  use_sha_instructions(true);
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  use_sha_instructions(wpk::cpu_features().sha);
}
