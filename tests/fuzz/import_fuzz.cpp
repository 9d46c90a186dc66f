// libFuzzer target: arbitrary bytes as an ONNX model. Loading, optimizing and (when the model
// loads) running it must end in a wpk::Error or a result, never a crash, hang or other exception.
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DWPK_BUILD_FUZZERS=ON && cmake --build build-fuzz
//   build-fuzz/tests/wpk_import_fuzz -max_total_time=60 corpus/
#include <cstdint>
#include <string>

#include "wpk/wpk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    wpk::Graph g = wpk::load_from_bytes(std::string(reinterpret_cast<const char*>(data), size));
    wpk::Session s(std::move(g));
    wpk::TensorMap inputs;
    for (const wpk::ValueInfo& in : s.inputs()) {
      if (!in.dims) return 0;
      wpk::Shape shape;
      for (const wpk::Dim& d : *in.dims) shape.push_back(d.is_static() ? d.value : 1);
      // Keep fuzzed shapes small: the point is parsing and validation, not big arithmetic.
      if (wpk::shape_numel(shape) > (1 << 16)) return 0;
      inputs[in.name] = wpk::Tensor::zeros(in.dtype, shape);
    }
    s.run(inputs);
  } catch (const wpk::Error&) {
  }
  return 0;
}
