// Embedding wpk: load an image classifier, optimize it, run it on a deterministic test image and
// print the latency and the top-5 classes.
//
//   wpk_classify MODEL.onnx [--runs N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <wpk/wpk.hpp>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: wpk_classify MODEL.onnx [--runs N]\n");
    return 2;
  }
  int runs = 10;
  if (argc >= 4 && !std::strcmp(argv[2], "--runs")) runs = std::max(1, std::atoi(argv[3]));
  try {
    const auto t0 = std::chrono::steady_clock::now();
    wpk::Session session(wpk::load(argv[1]));
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    // A deterministic 224x224 RGB "image" in the normalised range a torchvision model expects.
    std::vector<float> pixels(3 * 224 * 224);
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (float& p : pixels) p = noise(rng);
    const std::string input = session.inputs().at(0).name;
    wpk::TensorMap feeds{{input, wpk::Tensor::borrow(pixels.data(), {1, 3, 224, 224})}};

    // Warm-up as `wpk bench` does: the first run records the memory plan, the next ones settle
    // caches and the OpenMP pool.
    wpk::TensorMap out;
    for (int i = 0; i < 3; ++i) out = session.run(feeds);
    std::vector<double> times;
    for (int i = 0; i < runs; ++i) {
      const auto t = std::chrono::steady_clock::now();
      out = session.run(feeds);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    std::sort(times.begin(), times.end());

    const wpk::Tensor& logits = out.at(session.outputs().at(0).name);
    const float* scores = logits.data<float>();
    std::vector<int> order(static_cast<std::size_t>(logits.numel()));
    std::iota(order.begin(), order.end(), 0);
    const std::size_t k = std::min<std::size_t>(5, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int a, int b) { return scores[a] > scores[b]; });
    std::printf("%s: load %.1f ms, median latency %.2f ms over %d runs\n", argv[1], load_ms, times[times.size() / 2], runs);
    std::printf("top-5 classes:\n");
    for (std::size_t i = 0; i < k; ++i) std::printf("  class %4d  score %8.4f\n", order[i], scores[order[i]]);
    return 0;
  } catch (const wpk::Error& e) {
    std::fprintf(stderr, "wpk_classify: %s\n", e.what());
    return 2;
  }
}
