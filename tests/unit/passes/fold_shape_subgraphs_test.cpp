// fold_shape_subgraphs: shape computations fixed before run time become constants; and the static
// shape propagation (static_shapes.hpp) that it and the fusions rely on.
#include "graph/passes/static_shapes.hpp"
#include "pass_test_util.hpp"

using namespace wpk;
using namespace wpk::testing;

namespace {

// The BERT export's head split: x [N, 6, 8] -> Reshape(x, Concat(Shape(x)[0], Shape(x)[1], 2,
// Shape(x)[2] / 2)) -> [N, 6, 2, 4], plus a scale Shape(x)[2] ** 0.5 cast to float.
Graph head_split_graph() {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 6, 8});
  for (std::int64_t i = 0; i < 3; ++i) {
    const std::string s = std::to_string(i);
    g.add_initializer("i" + s, Tensor::scalar<std::int64_t>(i));
    g.add_node("Shape", {"x"}, {"shape" + s});
    g.add_node("Gather", {"shape" + s, "i" + s}, {"dim" + s}, {{"axis", Attribute(0)}});
  }
  g.add_initializer("axis0", Tensor::from_vector<std::int64_t>({0}, {1}));
  g.add_initializer("heads", Tensor::from_vector<std::int64_t>({2}, {1}));
  g.add_initializer("two", Tensor::scalar<std::int64_t>(2));
  g.add_node("Div", {"dim2", "two"}, {"head_size"});
  g.add_node("Unsqueeze", {"dim0", "axis0"}, {"u0"});
  g.add_node("Unsqueeze", {"dim1", "axis0"}, {"u1"});
  g.add_node("Unsqueeze", {"head_size", "axis0"}, {"u3"});
  g.add_node("Concat", {"u0", "u1", "heads", "u3"}, {"target"}, {{"axis", Attribute(0)}});
  g.add_node("Reshape", {"x", "target"}, {"split"});
  g.add_node("Cast", {"dim2"}, {"dim2f"}, {{"to", Attribute(1)}});
  g.add_initializer("half", Tensor::scalar(0.5f));
  g.add_node("Pow", {"dim2f", "half"}, {"norm"});
  g.add_node("Div", {"split", "norm"}, {"y"});
  g.add_output("y");
  return g;
}

// PyTorch's export of token.expand(x.shape[0], -1, -1) before a Concat with x [batch, 4, 8]:
// the target [batch, -1, -1] goes through Where(Equal(t, -1 * ones), ones, t) -> [batch, 1, 1].
Graph class_token_graph(DimList x_dims) {
  Graph g;
  g.add_input("x", DType::Float32, std::move(x_dims));
  std::vector<float> token(8);
  for (std::size_t i = 0; i < token.size(); ++i) token[i] = 0.5f * static_cast<float>(i) - 1.f;
  g.add_initializer("token", Tensor::from_vector<float>(token, {1, 1, 8}));
  g.add_initializer("zero", Tensor::scalar<std::int64_t>(0));
  g.add_initializer("axis0", Tensor::from_vector<std::int64_t>({0}, {1}));
  g.add_initializer("keep", Tensor::from_vector<std::int64_t>({-1}, {1}));
  g.add_initializer("flat", Tensor::from_vector<std::int64_t>({-1}, {1}));
  g.add_initializer("minus_one", Tensor::scalar<std::int64_t>(-1));
  g.add_node("Shape", {"x"}, {"shape"});
  g.add_node("Gather", {"shape", "zero"}, {"batch"}, {{"axis", Attribute(0)}});
  g.add_node("Unsqueeze", {"batch", "axis0"}, {"batch1"});
  g.add_node("Concat", {"batch1", "keep", "keep"}, {"target"}, {{"axis", Attribute(0)}});
  g.add_node("Reshape", {"target", "flat"}, {"target_flat"});
  g.add_node("Shape", {"target_flat"}, {"target_shape"});
  g.add_node("ConstantOfShape", {"target_shape"}, {"ones"}, {{"value", Attribute(Tensor::from_vector<std::int64_t>({1}, {1}))}});
  g.add_node("Mul", {"ones", "minus_one"}, {"minus_ones"});
  g.add_node("Equal", {"target_flat", "minus_ones"}, {"kept"});
  g.add_node("Where", {"kept", "ones", "target_flat"}, {"expand_to"});
  g.add_node("Expand", {"token", "expand_to"}, {"tokens"});
  g.add_node("Concat", {"tokens", "x"}, {"y"}, {{"axis", Attribute(1)}});
  g.add_output("y");
  return g;
}

}  // namespace

TEST_CASE("fold_shape_subgraphs folds the static dims of a symbolic shape", "[optimizer][passes]") {
  const Graph g = head_split_graph();
  const Graph opt = optimized(g);
  // Shape(x)[1], Shape(x)[2] and what follows from them are constants. The batch is not, but the
  // Reshape target's batch is x's: a 0 (copy the input dim) in a constant target.
  REQUIRE(opt.nodes().size() == 2);  // Reshape, Div
  const Node* reshape = find_op(opt, "Reshape");
  REQUIRE(reshape != nullptr);
  REQUIRE(opt.initializer(reshape->inputs[1]) != nullptr);
  const Tensor& target = *opt.initializer(reshape->inputs[1]);
  CHECK(std::vector<std::int64_t>(target.data<std::int64_t>(), target.data<std::int64_t>() + target.numel()) ==
        std::vector<std::int64_t>{0, 6, 2, 4});
  const Node* div = find_op(opt, "Div");
  REQUIRE(div != nullptr);
  REQUIRE(opt.initializer(div->inputs[1]) != nullptr);
  CHECK(opt.initializer(div->inputs[1])->data<float>()[0] == Approx(std::sqrt(8.0f)));
  // Without the pass, constant folding alone cannot fold any of it.
  CHECK(count_op(optimized(g, {"fold_shape_subgraphs"}), "Shape") == 3);
  check_unchanged(g, {{"x", random_tensor({3, 6, 8}, 1)}}, "fold_shape_subgraphs");
}

TEST_CASE("fold_shape_subgraphs keeps a Reshape target whose batch moves", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 6});
  g.add_initializer("i0", Tensor::from_vector<std::int64_t>({0}, {1}));
  g.add_initializer("six", Tensor::from_vector<std::int64_t>({6}, {1}));
  g.add_node("Shape", {"x"}, {"s"});
  g.add_node("Gather", {"s", "i0"}, {"n"});
  g.add_node("Concat", {"six", "n"}, {"target"}, {{"axis", Attribute(0)}});  // [6, N]: a 0 would copy 6
  g.add_node("Reshape", {"x", "target"}, {"y"});
  g.add_output("y");
  CHECK(count_op(optimized(g), "Concat") == 1);
  check_unchanged(g, {{"x", random_tensor({3, 6}, 1)}}, "fold_shape_subgraphs", 0, 0);
}

TEST_CASE("fold_shape_subgraphs turns the Shape of a static value into a constant", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_node("Relu", {"x"}, {"r"});
  g.add_node("Shape", {"r"}, {"s"}, {{"start", Attribute(1)}});
  g.add_node("Expand", {"x", "s"}, {"y"});
  g.add_output("y");
  const Graph opt = optimized(g);
  CHECK(count_op(opt, "Shape") == 0);
  const Node* expand = find_op(opt, "Expand");
  REQUIRE(expand != nullptr);
  const Tensor* shape = opt.initializer(expand->inputs[1]);
  REQUIRE(shape != nullptr);
  CHECK(shape->numel() == 1);
  CHECK(shape->data<std::int64_t>()[0] == 3);
  check_unchanged(g, {{"x", random_tensor({2, 3}, 2)}}, "fold_shape_subgraphs");
}

TEST_CASE("static shapes follow dims through Reshape targets built from Shape", "[optimizer][passes]") {
  const Graph g = head_split_graph();
  const passes::StaticShapes shapes(g);
  const DimList* split = shapes.dims(g.value_id("split"));
  REQUIRE(split != nullptr);
  CHECK(dims_to_string(*split) == "[N, 6, 2, 4]");
  CHECK(shapes.same_shape(g.value_id("split"), g.value_id("y")));
  CHECK_FALSE(shapes.same_shape(g.value_id("x"), g.value_id("split")));
}

TEST_CASE("static shapes broadcast symbolic dims soundly", "[optimizer][passes]") {
  Graph g;
  g.add_input("a", DType::Float32, {Dim("N"), 1, 4});
  g.add_input("b", DType::Float32, {Dim("M"), 3, 4});
  g.add_input("c", DType::Float32, {Dim("N"), 3, Dim("K")});
  g.add_node("Add", {"a", "b"}, {"ab"});  // N vs M: unknown
  g.add_node("Add", {"a", "c"}, {"ac"});  // K is 1 or 4 at run time: 4
  g.add_output("ab");
  g.add_output("ac");
  const passes::StaticShapes shapes(g);
  CHECK(dims_to_string(*shapes.dims(g.value_id("ab"))) == "[?, 3, 4]");
  CHECK(dims_to_string(*shapes.dims(g.value_id("ac"))) == "[N, 3, 4]");
}

TEST_CASE("static shapes follow an Expand to a target built with Where and Equal", "[optimizer][passes]") {
  const Graph g = class_token_graph({Dim("N"), 4, 8});
  const passes::StaticShapes shapes(g);
  const passes::IntData* to = shapes.data(g.value_id("expand_to"));
  REQUIRE(to != nullptr);
  REQUIRE(to->size() == 3);
  CHECK((*to)[0].symbol == "N");
  CHECK((*to)[1].value == std::optional<std::int64_t>(1));
  CHECK((*to)[2].value == std::optional<std::int64_t>(1));
  REQUIRE(shapes.dims(g.value_id("y")) != nullptr);
  CHECK(dims_to_string(*shapes.dims(g.value_id("y"))) == "[N, 5, 8]");

  // A symbol compared with a size it may equal stays unknown.
  Graph h = class_token_graph({Dim("N"), 4, 8});
  h.add_initializer("three", Tensor::from_vector<std::int64_t>({3, 3, 3}, {3}));
  h.add_node("Equal", {"target_flat", "three"}, {"maybe"});
  h.add_output("maybe");
  CHECK(passes::StaticShapes(h).data(h.value_id("maybe")) == nullptr);

  // Run as declared (symbolic) and with a fixed batch (folded to constants): the token row
  // leads each image's rows.
  for (const DimList& dims : {DimList{Dim("N"), 4, 8}, DimList{2, 4, 8}}) {
    const Session s(class_token_graph(dims));
    std::vector<float> x(2 * 4 * 8);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    const TensorMap out = s.run({{"x", Tensor::from_vector<float>(x, {2, 4, 8})}});
    const Tensor& y = out.at("y");
    REQUIRE(y.shape() == Shape{2, 5, 8});
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t c = 0; c < 8; ++c) {
        CHECK(y.data<float>()[b * 40 + c] == 0.5f * static_cast<float>(c) - 1.f);
        CHECK(y.data<float>()[b * 40 + 8 + c] == x[static_cast<std::size_t>(b * 32 + c)]);
      }
  }
}

TEST_CASE("static shapes give Resize its sizes, or its constant scales times static dims", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {1, 3, 10, 7});
  g.add_input("s", DType::Float32, {Dim("N"), 3, 10, 7});
  g.add_initializer("lead", Tensor::from_vector<std::int64_t>({1, 3}, {2}));
  g.add_initializer("side", Tensor::from_vector<std::int64_t>({16, 16}, {2}));
  g.add_node("Concat", {"lead", "side"}, {"sizes"}, {{"axis", Attribute(0)}});
  g.add_node("Resize", {"x", "", "", "sizes"}, {"sized"}, {{"mode", Attribute("linear")}});
  g.add_initializer("scales", Tensor::from_vector<float>({1.f, 1.f, 1.5f, 2.5f}, {4}));
  g.add_node("Resize", {"x", "", "scales"}, {"scaled"});
  g.add_node("Resize", {"s", "", "scales"}, {"batched"});  // N times 1 stays N
  g.add_initializer("half", Tensor::from_vector<float>({0.5f, 1.f, 1.f, 1.f}, {4}));
  g.add_node("Resize", {"s", "", "half"}, {"halved"});  // half of N: unknown
  g.add_output("sized");
  g.add_output("scaled");
  g.add_output("batched");
  g.add_output("halved");
  const passes::StaticShapes shapes(g);
  REQUIRE(shapes.dims(g.value_id("sized")) != nullptr);
  CHECK(dims_to_string(*shapes.dims(g.value_id("sized"))) == "[1, 3, 16, 16]");
  REQUIRE(shapes.dims(g.value_id("scaled")) != nullptr);
  CHECK(dims_to_string(*shapes.dims(g.value_id("scaled"))) == "[1, 3, 15, 17]");  // floor(17.5)
  REQUIRE(shapes.dims(g.value_id("batched")) != nullptr);
  CHECK(dims_to_string(*shapes.dims(g.value_id("batched"))) == "[N, 3, 15, 17]");
  CHECK(shapes.dims(g.value_id("halved")) == nullptr);
  // What a run produces agrees.
  const Session session(g);
  const TensorMap out = session.run({{"x", Tensor::zeros(DType::Float32, {1, 3, 10, 7})},
                                     {"s", Tensor::zeros(DType::Float32, {2, 3, 10, 7})}});
  CHECK(out.at("sized").shape() == Shape{1, 3, 16, 16});
  CHECK(out.at("scaled").shape() == Shape{1, 3, 15, 17});
  CHECK(out.at("batched").shape() == Shape{2, 3, 15, 17});
  CHECK(out.at("halved").shape() == Shape{1, 3, 10, 7});
}

TEST_CASE("static shapes give Split's outputs and DynamicQuantizeLinear's scalars", "[optimizer][passes]") {
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 4, 12});
  g.add_initializer("sizes", Tensor::from_vector<std::int64_t>({2, 4, 6}, {3}));
  g.add_node("Split", {"x", "sizes"}, {"a", "b", "c"}, {{"axis", Attribute(-1)}});
  g.add_node("Split", {"x"}, {"h0", "h1"}, {{"axis", Attribute(1)}});     // equal halves
  g.add_initializer("bad", Tensor::from_vector<std::int64_t>({5, 5}, {2}));
  g.add_node("Split", {"x", "bad"}, {"u", "v"}, {{"axis", Attribute(2)}});  // 10 of 12: not a split
  g.add_node("DynamicQuantizeLinear", {"x"}, {"q", "scale", "zero"});
  for (const char* o : {"a", "b", "c", "h0", "h1", "u", "v", "q", "scale", "zero"}) g.add_output(o);
  const passes::StaticShapes shapes(g);
  const auto dims = [&](const char* v) {
    const DimList* d = shapes.dims(g.value_id(v));
    return d ? dims_to_string(*d) : std::string("unknown");
  };
  CHECK(dims("a") == "[N, 4, 2]");
  CHECK(dims("b") == "[N, 4, 4]");
  CHECK(dims("c") == "[N, 4, 6]");
  CHECK(dims("h0") == "[N, 2, 12]");
  CHECK(dims("h1") == "[N, 2, 12]");
  CHECK(dims("u") == "unknown");
  CHECK(dims("q") == "[N, 4, 12]");
  CHECK(dims("scale") == "[]");
  CHECK(dims("zero") == "[]");
}

TEST_CASE("static shapes follow data of scalars and vectors only, and of no element at all", "[optimizer][passes]") {
  Graph g;
  g.add_input("s", DType::Float32, DimList{});  // a scalar: its Shape is an empty vector
  g.add_input("v", DType::Float32, {Dim("N"), 3});
  g.add_initializer("minus_one", Tensor::scalar<std::int64_t>(-1));
  g.add_initializer("flat", Tensor::from_vector<std::int64_t>({-1}, {1}));
  g.add_initializer("axis1", Tensor::from_vector<std::int64_t>({1}, {1}));
  g.add_node("Shape", {"s"}, {"none"});
  g.add_node("Equal", {"none", "minus_one"}, {"none_eq"});
  g.add_node("Where", {"none_eq", "none", "minus_one"}, {"none_where"});
  g.add_node("Add", {"none", "minus_one"}, {"none_add"});
  // [3] unsqueezed to [3, 1] plus [3]: a [3, 3] value, 9 elements, not 3.
  g.add_node("Shape", {"v"}, {"shape"});
  g.add_node("Unsqueeze", {"shape", "axis1"}, {"column"});
  g.add_node("Add", {"column", "shape"}, {"square"});
  g.add_node("Reshape", {"square", "flat"}, {"square_flat"});
  for (const char* o : {"none_eq", "none_where", "none_add", "square_flat"}) g.add_output(o);
  const passes::StaticShapes shapes(g);  // no out-of-bounds read on the empty data
  REQUIRE(shapes.data(g.value_id("none_eq")) != nullptr);
  CHECK(shapes.data(g.value_id("none_eq"))->empty());
  CHECK(shapes.data(g.value_id("none_add"))->empty());
  CHECK(shapes.data(g.value_id("square")) == nullptr);
  CHECK(shapes.data(g.value_id("square_flat")) == nullptr);
}

TEST_CASE("an output dim the model names but the walk proves static is annotated as the number", "[optimizer][passes]") {
  // As BERT's export declares its output: [N, LayerNormalizationoutput_dim_1, 768].
  Graph g;
  g.add_input("x", DType::Float32, {Dim("N"), 128, 8});
  g.add_node("Relu", {"x"}, {"y"});
  g.add_node("Transpose", {"x"}, {"t"}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  g.add_output("y");
  g.add_output("t");
  g.mutable_value(g.value_id("y")).dims = DimList{Dim("N"), Dim("y_dim_1"), Dim(8)};
  g.mutable_value(g.value_id("t")).dims = DimList{Dim("t_dim_0"), Dim("t_dim_1")};  // a rank the walk contradicts
  passes::annotate_static_shapes(g);
  CHECK(dims_to_string(*g.value(g.value_id("y")).dims) == "[N, 128, 8]");
  CHECK(dims_to_string(*g.value(g.value_id("t")).dims) == "[t_dim_0, t_dim_1]");
}
