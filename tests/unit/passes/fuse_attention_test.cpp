// fuse_attention: MatMul(Q, K^T) [scaled] [+ mask] -> Softmax -> MatMul(., V) -> com.wpk Attention.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// Q, V [N, 2, 5, 4]; the keys arrive as [N, 5, 2, 4] and are transposed to [N, 2, 4, 5] in one
// step, the way BERT's export folds the head split into the key transpose.
Graph attention_graph(bool divide, bool with_mask) {
  Graph g;
  g.add_input("q", DType::Float32, {Dim("N"), 2, 5, 4});
  g.add_input("k", DType::Float32, {Dim("N"), 5, 2, 4});
  g.add_input("v", DType::Float32, {Dim("N"), 2, 5, 4});
  g.add_node("Transpose", {"k"}, {"kt"}, {{"perm", Attribute({0, 2, 3, 1})}});
  g.add_node("MatMul", {"q", "kt"}, {"qk"});
  if (divide) {
    g.add_initializer("c", Tensor::scalar(2.0f));
    g.add_node("Div", {"qk", "c"}, {"scaled"});
  } else {
    g.add_initializer("c", Tensor::scalar(0.3f));
    g.add_node("Mul", {"c", "qk"}, {"scaled"});
  }
  if (with_mask) {
    g.add_input("mask", DType::Float32, {Dim("N"), 1, 1, 5});
    g.add_node("Add", {"mask", "scaled"}, {"masked"});
  }
  g.add_node("Softmax", {with_mask ? "masked" : "scaled"}, {"p"}, {{"axis", Attribute(-1)}});
  g.add_node("MatMul", {"p", "v"}, {"y"});
  g.add_output("y");
  return g;
}

TensorMap inputs(bool with_mask) {
  TensorMap in = {{"q", random_tensor({2, 2, 5, 4}, 1)},
                  {"k", random_tensor({2, 5, 2, 4}, 2)},
                  {"v", random_tensor({2, 2, 5, 4}, 3)}};
  if (with_mask) {
    Tensor mask = Tensor::zeros(DType::Float32, {2, 1, 1, 5});
    mask.data<float>()[3] = mask.data<float>()[4] = mask.data<float>()[9] = -10000.0f;  // padded keys
    in["mask"] = mask;
  }
  return in;
}

}  // namespace

TEST_CASE("fuse_attention fuses scaled, masked attention", "[optimizer][passes]") {
  for (bool divide : {true, false})
    for (bool with_mask : {true, false}) {
      INFO((divide ? "Div" : "Mul") << (with_mask ? " with mask" : ""));
      const Graph g = attention_graph(divide, with_mask);
      const Graph opt = optimized(g, {"attention_heads"});  // which would take the key transpose in
      const Node* att = find_op(opt, "Attention", kWpkDomain);
      REQUIRE(att != nullptr);
      CHECK(att->attr_float("scale", 0) == (divide ? 0.5f : 0.3f));
      CHECK(att->inputs.size() == (with_mask ? 4u : 3u));
      CHECK(count_op(opt, "Softmax") == 0);
      CHECK(count_op(opt, "MatMul") == 0);
      // K = the keys with the heads moved forward: one Transpose (0, 2, 1, 3).
      REQUIRE(count_op(opt, "Transpose") == 1);
      CHECK(find_op(opt, "Transpose")->attr_ints("perm") == std::vector<std::int64_t>{0, 2, 1, 3});
      check_unchanged(g, inputs(with_mask), "fuse_attention");
    }
}

TEST_CASE("fuse_attention leaves the scores alone when something else reads them", "[optimizer][passes]") {
  Graph g = attention_graph(true, true);
  g.add_output("p");  // attention probabilities requested by the caller
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Attention", kWpkDomain) == 0);
  check_unchanged(g, inputs(true), "fuse_attention");
}

TEST_CASE("fuse_attention needs a mask that does not grow the scores", "[optimizer][passes]") {
  for (std::int64_t mask_batch : {1, 3}) {
    INFO("mask batch " << mask_batch);
    Graph g;
    g.add_input("q", DType::Float32, {1, 5, 4});
    g.add_input("k", DType::Float32, {1, 5, 4});
    g.add_input("v", DType::Float32, {1, 5, 4});
    g.add_input("mask", DType::Float32, {mask_batch, 5, 5});  // batch 3 grows the scores' batch
    g.add_node("Transpose", {"k"}, {"kt"}, {{"perm", Attribute({0, 2, 1})}});
    g.add_node("MatMul", {"q", "kt"}, {"qk"});
    g.add_node("Add", {"qk", "mask"}, {"masked"});
    g.add_node("Softmax", {"masked"}, {"p"}, {{"axis", Attribute(-1)}});
    g.add_node("MatMul", {"p", "v"}, {"y"});
    g.add_output("y");
    const Graph opt = optimized(g);
    CHECK(count_op(opt, "Attention", kWpkDomain) == (mask_batch == 1 ? 1 : 0));
    CHECK(count_op(opt, "Transpose") == (mask_batch == 1 ? 0 : 1));  // K is the input itself
    const TensorMap in = {{"q", random_tensor({1, 5, 4}, 1)},
                          {"k", random_tensor({1, 5, 4}, 2)},
                          {"v", random_tensor({1, 5, 4}, 3)},
                          {"mask", random_tensor({mask_batch, 5, 5}, 4)}};
    if (mask_batch == 1) check_unchanged(g, in, "fuse_attention");
  }
}
