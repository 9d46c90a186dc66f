#pragma once
// SHA-256 (FIPS 180-4), for content addresses and checksums of compiled kernels: a name that
// two different sources must never share, where a 64-bit hash would be too short. Blocks go
// through the CPU's SHA instructions once use_sha_instructions(true) says it has them (a warm
// load checks every compiled kernel it loads), else through the portable rounds.
#include <cstddef>
#include <cstdint>
#include <string>

namespace wpk::codegen {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex();

 private:
  void block(const std::uint8_t* p);
  void portable_block(const std::uint8_t* p);
  std::uint32_t h_[8];
  std::uint8_t buffer_[64];
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

// Whether blocks may use the SHA instructions (SHA, SSSE3, SSE4.1): the runtime sets it from
// its CPU probe (core/cpu_features.hpp), which this library does not depend on. Off at start.
void use_sha_instructions(bool on);

std::string sha256_hex(const std::string& bytes);

// The digest of a file's bytes, "" when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace wpk::codegen
