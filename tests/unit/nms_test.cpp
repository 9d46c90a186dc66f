// NonMaxSuppression against greedy suppression written out plainly (every candidate compared with
// every box kept before it): random boxes in clusters, as a detector's candidates overlap, in both
// box encodings, with per-class offsets (the batched-NMS trick that puts each class in a region of
// its own), ties in score, degenerate, infinite and NaN boxes, score thresholds and output limits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "support/onnx_model_builder.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::OnnxModelBuilder;

namespace {

struct Case {
  long batches, classes, boxes;
  bool center;
  long max_out;
  float iou, score;  // score < 0: no score threshold
};

std::vector<std::int64_t> plain_nms(const Case& c, const std::vector<float>& boxes, const std::vector<float>& scores) {
  const auto corners = [&](long b, long i) {
    const float* p = boxes.data() + (b * c.boxes + i) * 4;
    std::array<double, 4> r;  // y1, x1, y2, x2
    if (c.center) r = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0};
    else r = {std::min<double>(p[0], p[2]), std::min<double>(p[1], p[3]), std::max<double>(p[0], p[2]), std::max<double>(p[1], p[3])};
    return r;
  };
  const auto iou = [](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]), iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return 0.0;
    const double inter = ih * iw, uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<std::int64_t> out;
  for (long b = 0; b < c.batches; ++b)
    for (long k = 0; k < c.classes; ++k) {
      const float* sc = scores.data() + (b * c.classes + k) * c.boxes;
      std::vector<long> order;
      for (long i = 0; i < c.boxes; ++i)
        if (c.score < 0 || sc[i] > c.score) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](long i, long j) { return sc[i] > sc[j]; });
      std::vector<long> kept;
      for (long i : order) {
        if (static_cast<long>(kept.size()) >= c.max_out) break;
        bool suppressed = false;
        for (long j : kept) suppressed = suppressed || iou(corners(b, i), corners(b, j)) > c.iou;
        if (suppressed) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, k, i});
      }
    }
  return out;
}

}  // namespace

TEST_CASE("NonMaxSuppression keeps what greedy suppression over every kept box keeps", "[nms][reference]") {
  const std::vector<Case> cases = {{1, 1, 300, false, 1000, 0.5f, -1}, {2, 3, 200, true, 1000, 0.45f, 0.2f},
                                   {1, 4, 400, false, 7, 0.3f, -1},     {1, 2, 64, false, 1000, 0.0f, -1},
                                   {1, 1, 500, false, 1000, 1.0f, 0.5f}};
  unsigned seed = 12345;
  const auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>((seed >> 8) & 0xffff) / 65536.0f;
  };
  for (const Case& c : cases)
    for (int variant = 0; variant < 3; ++variant) {  // plain; per-class offsets; with odd boxes
      std::vector<float> boxes, scores;
      for (long b = 0; b < c.batches; ++b)
        for (long i = 0; i < c.boxes; ++i) {
          // Clusters of ~10 boxes around a few centres, sizes 0.02-0.3, shifted far per box group
          // when offsets are on (each group a "class" region).
          const float cx = static_cast<float>(i % 9) * 0.1f + next() * 0.05f, cy = static_cast<float>(i % 7) * 0.12f + next() * 0.05f;
          const float w = 0.02f + next() * 0.28f, h = 0.02f + next() * 0.28f;
          const float off = variant == 1 ? static_cast<float>(i % 5) * 3.0f : 0.0f;
          if (c.center) boxes.insert(boxes.end(), {cx + off, cy + off, w, h});
          else if (i % 2) boxes.insert(boxes.end(), {cy + off, cx + off, cy + h + off, cx + w + off});
          else boxes.insert(boxes.end(), {cy + h + off, cx + w + off, cy + off, cx + off});  // flipped corners
        }
      if (variant == 2) {
        const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
        const std::vector<std::vector<float>> odd = {{0.3f, 0.3f, 0.3f, 0.3f}, {nan, 0.1f, 0.5f, 0.5f},
                                                     {-inf, 0.2f, inf, 0.4f}, {0.1f, 0.1f, 5.0f, 5.0f}};
        for (std::size_t j = 0; j < odd.size(); ++j) std::copy(odd[j].begin(), odd[j].end(), boxes.begin() + 4 * (7 * j + 3));
      }
      for (long b = 0; b < c.batches; ++b)
        for (long k = 0; k < c.classes; ++k)
          for (long i = 0; i < c.boxes; ++i) scores.push_back(std::round(next() * 64.0f) / 64.0f);  // ties
      OnnxModelBuilder m;
      m.input("boxes", {c.batches, c.boxes, 4}).input("scores", {c.batches, c.classes, c.boxes})
          .output("selected", {-1, 3}, 7);
      m.float_initializer("iou", {}, {c.iou});
      std::vector<std::string> ins = {"boxes", "scores", "max_out", "iou"};
      if (c.score >= 0) {
        m.float_initializer("score", {}, {c.score});
        ins.push_back("score");
      }
      m.input("max_out", {1}, 7);
      m.node("NonMaxSuppression", ins, {"selected"}).attr("center_point_box", c.center ? 1L : 0L);
      Session s(load_from_bytes(m.bytes()));
      const Tensor got = s.run({{"boxes", Tensor::from_vector(boxes, {c.batches, c.boxes, 4})},
                                {"scores", Tensor::from_vector(scores, {c.batches, c.classes, c.boxes})},
                                {"max_out", Tensor::from_vector(std::vector<std::int64_t>{c.max_out}, {1})}})
                             .at("selected");
      const std::vector<std::int64_t> want = plain_nms(c, boxes, scores);
      INFO("case " << c.batches << "x" << c.classes << "x" << c.boxes << " variant " << variant);
      REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
      CHECK(std::vector<std::int64_t>(got.data<std::int64_t>(), got.data<std::int64_t>() + got.numel()) == want);
      CHECK(want.size() > 3);  // the case keeps boxes
    }
}
