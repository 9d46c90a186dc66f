// attention_heads: com.wpk Attention reads the head-split Transposes' inputs and writes the
// head-merge Transpose's output itself (interleaved_heads), and the Transposes go.
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

constexpr std::int64_t kSeq = 7, kHeads = 3, kDim = 5;

// A transformer layer's attention as exporters write it: x [N, 7, 15] projected to Q, K, V by
// MatMuls, each reshaped to [N, 7, 3, 5] and transposed to [N, 3, 7, 5] (the keys straight to
// [N, 3, 5, 7]); the output transposed back and reshaped to [N, 7, 15]. With `extra_reader`, the
// merge Transpose's input is also a graph output.
Graph layer_graph(bool extra_reader) {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), kSeq, kHeads * kDim});
  g.add_input("mask", DType::Float32, {Dim("N"), 1, 1, kSeq});
  g.add_initializer("heads", Tensor::from_vector(std::vector<std::int64_t>{0, kSeq, kHeads, kDim}, {4}));
  g.add_initializer("merged", Tensor::from_vector(std::vector<std::int64_t>{0, kSeq, kHeads * kDim}, {3}));
  g.add_initializer("c", Tensor::scalar(2.0f));
  unsigned seed = 11;
  for (const char* p : {"q", "k", "v"}) {
    const std::string name = p;
    g.add_initializer("w" + name, random_tensor({kHeads * kDim, kHeads * kDim}, seed++));
    g.add_node("MatMul", {"x", "w" + name}, {name + "_proj"});
    g.add_node("Reshape", {name + "_proj", "heads"}, {name + "_split"});
  }
  g.add_node("Transpose", {"q_split"}, {"q"}, {{"perm", Attribute({0, 2, 1, 3})}});
  g.add_node("Transpose", {"k_split"}, {"kt"}, {{"perm", Attribute({0, 2, 3, 1})}});
  g.add_node("Transpose", {"v_split"}, {"v"}, {{"perm", Attribute({0, 2, 1, 3})}});
  g.add_node("MatMul", {"q", "kt"}, {"qk"});
  g.add_node("Div", {"qk", "c"}, {"scaled"});
  g.add_node("Add", {"scaled", "mask"}, {"masked"});
  g.add_node("Softmax", {"masked"}, {"p"}, {{"axis", Attribute(-1)}});
  g.add_node("MatMul", {"p", "v"}, {"context"});
  g.add_node("Transpose", {"context"}, {"context_merged"}, {{"perm", Attribute({0, 2, 1, 3})}});
  g.add_node("Reshape", {"context_merged", "merged"}, {"y"});
  g.add_output("y");
  if (extra_reader) g.add_output("context");
  return g;
}

TensorMap layer_inputs() {
  Tensor mask = Tensor::zeros(DType::Float32, {2, 1, 1, kSeq});
  mask.data<float>()[5] = mask.data<float>()[6] = mask.data<float>()[13] = -10000.0f;  // padded keys
  return {{"x", random_tensor({2, kSeq, kHeads * kDim}, 1)}, {"mask", mask}};
}

}  // namespace

TEST_CASE("attention_heads: attention reads and writes interleaved heads, the Transposes go",
          "[optimizer][passes]") {
  const Graph g = layer_graph(false);
  const Graph before = optimized(g, {"attention_heads"});
  CHECK(count_op(before, "Transpose") == 4);  // Q, V, K (as fuse_attention leaves it) and the merge
  const Graph opt = optimized(g);
  const Node* att = find_op(opt, "Attention", kWpkDomain);
  REQUIRE(att != nullptr);
  CHECK(att->attr_ints("interleaved_heads") == std::vector<std::int64_t>{1, 1, 1, 1});
  CHECK(count_op(opt, "Transpose") == 0);
  // Q, K and V are the Reshapes' outputs; the output is the final Reshape's input.
  for (std::size_t i = 0; i < 3; ++i) CHECK(opt.value(att->inputs[i]).name == std::string("qkv").substr(i, 1) + "_split");
  CHECK(opt.value(att->outputs[0]).name == "context_merged");
  check_unchanged(g, layer_inputs(), "attention_heads");
}

TEST_CASE("attention_heads keeps the merge Transpose when something else reads the attention output",
          "[optimizer][passes]") {
  const Graph g = layer_graph(true);
  const Graph opt = optimized(g);
  const Node* att = find_op(opt, "Attention", kWpkDomain);
  REQUIRE(att != nullptr);
  CHECK(att->attr_ints("interleaved_heads") == std::vector<std::int64_t>{1, 1, 1, 0});
  CHECK(count_op(opt, "Transpose") == 1);
  check_unchanged(g, layer_inputs(), "attention_heads");
}

TEST_CASE("attention_heads leaves other permutations and ranks alone", "[optimizer][passes]") {
  // Q transposed (0, 1, 3, 2): not a head split; K^T undoes the same swap, so K is k as given.
  Graph g;
  g.add_input("q", DType::Float32, {2, 3, 5, 4});
  g.add_input("k", DType::Float32, {2, 3, 4, 5});
  g.add_input("v", DType::Float32, {2, 3, 4, 5});
  g.add_node("Transpose", {"q"}, {"qt"}, {{"perm", Attribute({0, 1, 3, 2})}});
  g.add_node("Transpose", {"k"}, {"kt"}, {{"perm", Attribute({0, 1, 3, 2})}});
  g.add_node("MatMul", {"qt", "kt"}, {"qk"});
  g.add_node("Softmax", {"qk"}, {"p"}, {{"axis", Attribute(-1)}});
  g.add_node("MatMul", {"p", "v"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  const Node* att = find_op(opt, "Attention", kWpkDomain);
  REQUIRE(att != nullptr);
  CHECK_FALSE(att->has_attr("interleaved_heads"));
  CHECK(count_op(opt, "Transpose") == 1);  // Q's; K is the input itself
  const TensorMap in = {{"q", random_tensor({2, 3, 5, 4}, 1)},
                        {"k", random_tensor({2, 3, 4, 5}, 2)},
                        {"v", random_tensor({2, 3, 4, 5}, 3)}};
  check_unchanged(g, in, "attention_heads");
}
