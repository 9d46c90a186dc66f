// consumer MODEL.onnx INPUT.pb EXPECTED.pb: runs the model on the input and compares its first
// output with the expected tensor (|got - want| <= 1e-3 + 1e-3 |want|). Exit 0 when it matches,
// 1 when it does not, 2 on a wpk::Error (whose type must cross the library boundary intact).
#include <cmath>
#include <cstdio>

#include <wpk/wpk.hpp>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: consumer MODEL.onnx INPUT.pb EXPECTED.pb\n");
    return 2;
  }
  try {
    const wpk::Session session(wpk::load(argv[1]));
    const wpk::TensorMap out = session.run({{session.inputs()[0].name, wpk::load_tensor(argv[2])}});
    const wpk::Tensor& got = out.at(session.outputs()[0].name);
    const wpk::Tensor want = wpk::load_tensor(argv[3]);
    if (got.shape() != want.shape()) {
      std::printf("shape %s, expected %s\n", wpk::shape_to_string(got.shape()).c_str(), wpk::shape_to_string(want.shape()).c_str());
      return 1;
    }
    double worst = 0;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.data<float>()[i], w = want.data<float>()[i];
      worst = std::max(worst, std::abs(g - w) / (1e-3 + 1e-3 * std::abs(w)));
    }
    std::printf("%lld outputs, worst error %.3f of the tolerance\n", static_cast<long long>(got.numel()), worst);
    if (!(worst <= 1.0)) return 1;
    try {
      wpk::load("/nonexistent/model.onnx");
      return 1;
    } catch (const wpk::Error& e) {
      if (e.code() != wpk::ErrorCode::NotFound) return 1;
    }
    return 0;
  } catch (const wpk::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 2;
  }
}
