// libFuzzer target: arbitrary bytes as a TensorProto file (`wpk run --inputs` reads these).
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "wpk/wpk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/wpk_tensor_fuzz_" + std::to_string(::getpid()) + ".pb";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  try {
    wpk::Tensor t = wpk::load_tensor(path);
    (void)t.nbytes();
  } catch (const wpk::Error&) {
  }
  return 0;
}
