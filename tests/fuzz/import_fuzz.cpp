// libFuzzer target: arbitrary bytes as an ONNX model. Loading, optimizing and (when the model
// loads) running it must end in a wpk::Error or a result, never a crash, hang or other exception.
// scripts/fuzz.sh builds and runs it (the README's Tests section).
#include <cstdint>
#include <string>

#include "fuzz/run_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    wpk::fuzz::load_and_run(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const wpk::Error&) {
  }
  return 0;
}
