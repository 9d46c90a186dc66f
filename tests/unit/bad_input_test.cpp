// Bad input gets a clear wpk::Error: never a crash, a hang or a silent wrong answer.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "fuzz/run_model.hpp"
#include "support/expect_error.hpp"
#include "support/onnx_model_builder.hpp"
#include "support/tensor_compare.hpp"
#include "wpk/wpk.hpp"

using namespace wpk;
using wpk::testing::expect_error;
using wpk::testing::OnnxModelBuilder;

namespace {

OnnxModelBuilder relu_model() {
  OnnxModelBuilder b;
  b.input("x", {-1, 4}).output("y", {-1, 4}).node("Relu", {"x"}, {"y"});
  return b;
}

}  // namespace

TEST_CASE("missing, empty, truncated and non-ONNX files", "[errors][import]") {
  const std::string dir = wpk::testing::temp_dir("files");
  expect_error([&] { load(dir + "/absent.onnx"); }, ErrorCode::NotFound, {"absent.onnx", "not found"});
  expect_error([&] { load(dir); }, ErrorCode::InvalidArgument, {"directory"});

  std::ofstream(dir + "/empty.onnx").close();
  expect_error([&] { load(dir + "/empty.onnx"); }, ErrorCode::InvalidModel, {"empty.onnx"});

  std::ofstream(dir + "/text.onnx") << "this is not a model, just some text\n";
  expect_error([&] { load(dir + "/text.onnx"); }, ErrorCode::InvalidModel, {"text.onnx"});

  const std::string full = relu_model().bytes();
  std::ofstream(dir + "/cut.onnx", std::ios::binary) << full.substr(0, full.size() / 2);
  expect_error([&] { load(dir + "/cut.onnx"); }, ErrorCode::InvalidModel, {"cut.onnx"});
}

TEST_CASE("unsupported ops, opsets and dtypes are named", "[errors][import]") {
  OnnxModelBuilder b;
  b.input("x", {2}).output("y", {2}).node("NoSuchOp", {"x"}, {"y"});
  expect_error([&] { Session s(load_from_bytes(b.bytes())); }, ErrorCode::Unsupported, {"unsupported op NoSuchOp (opset 17)"});

  OnnxModelBuilder newer(23);
  newer.input("x", {2}).output("y", {2}).node("Relu", {"x"}, {"y"});
  expect_error([&] { load_from_bytes(newer.bytes()); }, ErrorCode::Unsupported, {"opset 23", "1 to 22"});

  // Opsets 1-6 are rewritten to 7 where they differ; an op whose old meaning is not is named.
  OnnxModelBuilder old(6);
  old.input("x", {1, 1, 2, 2}).output("y", {1, 1, 4, 4}).node("Upsample", {"x"}, {"y"});
  expect_error([&] { load_from_bytes(old.bytes()); }, ErrorCode::Unsupported, {"opset 6", "Upsample", "does not convert"});

  OnnxModelBuilder complex;
  complex.input("c", {2}, onnx::TensorProto::COMPLEX64).output("y", {2}, onnx::TensorProto::COMPLEX64).node("Identity", {"c"}, {"y"});
  expect_error([&] { Session s(load_from_bytes(complex.bytes())); }, ErrorCode::Unsupported, {"'c'", "dtype"});
}

TEST_CASE("opset 6 models run with opset 6 semantics: PRelu's slope per channel", "[import]") {
  // Before opset 7 a [C] slope applied along axis 1; numpy-style broadcasting would refuse a [3]
  // slope against a [2, 3, 2] input.
  OnnxModelBuilder b(6);
  b.input("x", {2, 3, 2}).output("y", {2, 3, 2}).float_initializer("slope", {3}, {0.5f, 0.25f, 2.0f})
      .node("PRelu", {"x", "slope"}, {"y"});
  Session s(load_from_bytes(b.bytes()));
  // On a value of unknown rank the slope cannot be placed: refused, not misread.
  OnnxModelBuilder unknown(6);
  unknown.input("x", {2, 3, 2}).output("y", {2, 3, 2}).float_initializer("slope", {3}, {0.5f, 0.25f, 2.0f})
      .node("Relu", {"x"}, {"r"}).node("PRelu", {"r", "slope"}, {"y"});
  expect_error([&] { load_from_bytes(unknown.bytes()); }, ErrorCode::Unsupported, {"PRelu", "per channel"});
  std::vector<float> x(12, -4.0f);
  const Tensor y = s.run({{"x", Tensor::borrow(x.data(), {2, 3, 2})}}).at("y");
  REQUIRE(y.shape() == Shape{2, 3, 2});
  const float* v = y.data<float>();
  CHECK(std::vector<float>(v, v + 12) == std::vector<float>{-2, -2, -1, -1, -8, -8, -2, -2, -1, -1, -8, -8});
}

TEST_CASE("opset 6 models run with opset 6 semantics: Add's legacy broadcast along an axis", "[import]") {
  // Before opset 7, Add broadcast B only when told (broadcast=1), aligned at `axis`: a [3] B
  // added along axis 1 of a [2, 3, 2] A, which numpy-style broadcasting would refuse.
  OnnxModelBuilder b(6);
  b.input("a", {2, 3, 2}).input("b", {3}).output("y", {2, 3, 2}).node("Add", {"a", "b"}, {"y"});
  auto* add = b.model.mutable_graph()->mutable_node(0);
  for (const auto& [name, value] : {std::pair<const char*, int>{"broadcast", 1}, {"axis", 1}}) {
    auto* a = add->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  Session s(load_from_bytes(b.bytes()));
  // An axis so large that counting B's trailing ones would overflow.
  OnnxModelBuilder far(6);
  far.model = b.model;
  for (auto& attr : *far.model.mutable_graph()->mutable_node(0)->mutable_attribute())
    if (attr.name() == "axis") attr.set_i(std::numeric_limits<std::int64_t>::max());
  expect_error([&] { load_from_bytes(far.bytes()); }, ErrorCode::InvalidModel, {"axis out of range"});
  std::vector<float> a(12, 0.0f), bias{10, 20, 30};
  const Tensor y = s.run({{"a", Tensor::borrow(a.data(), {2, 3, 2})}, {"b", Tensor::borrow(bias.data(), {3})}}).at("y");
  REQUIRE(y.shape() == Shape{2, 3, 2});
  const float* v = y.data<float>();
  CHECK(std::vector<float>(v, v + 12) == std::vector<float>{10, 10, 20, 20, 30, 30, 10, 10, 20, 20, 30, 30});
}

TEST_CASE("malformed graphs are rejected at load", "[errors][import]") {
  OnnxModelBuilder dangling;
  dangling.input("x", {2}).output("y", {2}).node("Relu", {"nowhere"}, {"y"});
  expect_error([&] { load_from_bytes(dangling.bytes()); }, ErrorCode::InvalidModel, {"'nowhere'"});

  OnnxModelBuilder no_producer;
  no_producer.input("x", {2}).output("y", {2}).node("Relu", {"x"}, {"z"});
  expect_error([&] { load_from_bytes(no_producer.bytes()); }, ErrorCode::InvalidModel, {"'y'"});
}

TEST_CASE("an initializer whose data does not match its shape", "[errors][import]") {
  OnnxModelBuilder b;
  b.input("x", {2}).output("y", {2}).node("Add", {"x", "w"}, {"y"}).float_initializer("w", {2}, {1, 2, 3});
  expect_error([&] { load_from_bytes(b.bytes()); }, ErrorCode::InvalidModel, {"'w'", "3 values", "needs 2"});

  OnnxModelBuilder raw;
  raw.input("x", {2}).output("y", {2}).node("Add", {"x", "w"}, {"y"}).float_initializer("w", {1000000000, 1000}, {});
  raw.model.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(8, '\0'));
  expect_error([&] { load_from_bytes(raw.bytes()); }, ErrorCode::InvalidModel, {"'w'", "raw data has 8 bytes"});
  // A count of elements whose bytes overflow 64 bits must not match a few raw bytes.
  OnnxModelBuilder wrap;
  wrap.input("x", {1}).output("y", {1}).node("Add", {"x", "w"}, {"y"}).float_initializer("w", {(1L << 62) + 1}, {});
  wrap.model.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(4, '\0'));
  expect_error([&] { load_from_bytes(wrap.bytes()); }, ErrorCode::InvalidModel, {"'w'"});
}

TEST_CASE("raw initializers keep the parsed bytes: values as written, bools as 0 and 1", "[import]") {
  OnnxModelBuilder b;
  b.input("x", {3}).output("y", {3}).node("Add", {"x", "w"}, {"y"}).float_initializer("w", {3}, {});
  const float values[3] = {1.5f, -2.0f, 1e-30f};
  b.model.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(reinterpret_cast<const char*>(values), sizeof values));
  auto* flags = b.model.mutable_graph()->add_initializer();
  flags->set_name("flags");
  flags->set_data_type(onnx::TensorProto::BOOL);
  flags->add_dims(4);
  flags->set_raw_data(std::string("\x00\x02\x01\xff", 4));
  const Graph g = load_from_bytes(b.bytes());
  const Tensor* w = g.initializer(g.value_id("w"));
  REQUIRE(w);
  REQUIRE(w->shape() == Shape{3});
  for (int i = 0; i < 3; ++i) CHECK(w->data<float>()[i] == values[i]);
  const Tensor* f = g.initializer(g.value_id("flags"));
  REQUIRE(f);
  const std::uint8_t* bytes = static_cast<const std::uint8_t*>(f->raw());
  CHECK(std::vector<int>(bytes, bytes + 4) == std::vector<int>{0, 1, 1, 1});
  Session s(load_from_bytes(b.bytes()));
  const Tensor y = s.run({{"x", Tensor::from_vector<float>({1, 1, 1}, {3})}}).at("y");
  CHECK(y.data<float>()[1] == -1.0f);
}

TEST_CASE("external data must stay inside the model's folder and be long enough", "[errors][import]") {
  const std::string dir = wpk::testing::temp_dir("external");
  auto with_external = [&](const std::string& location, std::size_t file_bytes) {
    OnnxModelBuilder b;
    b.input("x", {2}).output("y", {2}).node("Add", {"x", "w"}, {"y"}).float_initializer("w", {2}, {});
    auto* t = b.model.mutable_graph()->mutable_initializer(0);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    std::ofstream(dir + "/weights.bin", std::ios::binary) << std::string(file_bytes, '\0');
    return b.save(dir + "/model.onnx");
  };
  {
    float two[2] = {1.5f, -2.0f};
    const std::string path = with_external("weights.bin", 0);
    std::ofstream(dir + "/weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(two), sizeof two);
    Session s(load(path));
    float x[2] = {1, 1};
    auto out = s.run({{"x", Tensor::borrow(x, {2})}});
    CHECK(out.at("y").data<float>()[0] == 2.5f);
    CHECK(out.at("y").data<float>()[1] == -1.0f);
  }
  expect_error([&] { load(with_external("weights.bin", 4)); }, ErrorCode::InvalidModel, {"too short"});
  expect_error([&] { load(with_external("../weights.bin", 8)); }, ErrorCode::InvalidModel, {"leaves the model's folder"});
  expect_error([&] { load(with_external("/etc/passwd", 8)); }, ErrorCode::InvalidModel, {"relative"});
  expect_error([&] { load(with_external("absent.bin", 8)); }, ErrorCode::NotFound, {"absent.bin"});
  // A symbolic link inside the folder that leads out of it, and a location that is no file.
  const std::string outside = wpk::testing::temp_dir("external_outside") + "/secret.bin";
  std::ofstream(outside, std::ios::binary) << std::string(8, 'x');
  std::filesystem::create_symlink(outside, dir + "/link.bin");
  expect_error([&] { load(with_external("link.bin", 8)); }, ErrorCode::InvalidModel, {"leaves the model's folder"});
  std::filesystem::create_directory(dir + "/sub");
  expect_error([&] { load(with_external("sub", 8)); }, ErrorCode::InvalidModel, {"not a regular file"});
}

TEST_CASE("run() checks input names, dtypes and shapes", "[errors][session]") {
  Session s(load_from_bytes(relu_model().bytes()));
  std::vector<float> x(8, 1.0f);
  std::vector<double> xd(8, 1.0);
  expect_error([&] { s.run({}); }, ErrorCode::InvalidArgument, {"'x'", "missing"});
  expect_error([&] { s.run({{"x", Tensor::borrow(x.data(), {2, 4})}, {"extra", Tensor::borrow(x.data(), {8})}}); },
               ErrorCode::InvalidArgument, {"unknown input 'extra'", "x"});
  expect_error([&] { s.run({{"x", Tensor::borrow(xd.data(), {2, 4})}}); }, ErrorCode::InvalidArgument, {"float32", "float64"});
  expect_error([&] { s.run({{"x", Tensor::borrow(x.data(), {4, 2})}}); }, ErrorCode::InvalidArgument, {"[N, 4]", "[4, 2]"});
  expect_error([&] { s.run({{"x", Tensor::borrow(x.data(), {8})}}); }, ErrorCode::InvalidArgument, {"[N, 4]"});
  expect_error([&] { s.run({{"x", Tensor()}}); }, ErrorCode::InvalidArgument, {"'x'"});
  // The symbolic batch takes any size.
  CHECK(s.run({{"x", Tensor::borrow(x.data(), {2, 4})}}).at("y").shape() == Shape{2, 4});
  CHECK(s.run({{"x", Tensor::borrow(x.data(), {1, 4})}}).at("y").shape() == Shape{1, 4});
}

TEST_CASE("placeholder dim names tie nothing together, and a shared real name still must agree", "[errors][session]") {
  for (const std::string name : {"?", "p2o.DynamicDimension.0", "N"}) {
    INFO("dim_param '" << name << "'");
    OnnxModelBuilder b;
    b.input("x", {-1, 3}).input("z", {-1, 3}).output("y", {-1, 3}).output("w", {-1, 3})
        .node("Relu", {"x"}, {"y"}).node("Sigmoid", {"z"}, {"w"});
    for (int i = 0; i < 2; ++i)
      b.model.mutable_graph()->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(name);
    Session s(load_from_bytes(b.bytes()));
    std::vector<float> x(6, 1.0f), z(15, 1.0f);
    const TensorMap ins{{"x", Tensor::borrow(x.data(), {2, 3})}, {"z", Tensor::borrow(z.data(), {5, 3})}};
    if (name == "N") {
      expect_error([&] { s.run(ins); }, ErrorCode::InvalidArgument, {"dimension 'N' is", "in another input"});
    } else {
      const TensorMap out = s.run(ins);
      CHECK(out.at("y").shape() == Shape{2, 3});
      CHECK(out.at("w").shape() == Shape{5, 3});
    }
  }
}

TEST_CASE("SessionOptions::fixed_dims fixes symbolic dims at load and rejects other sizes", "[errors][session]") {
  SessionOptions fixed;
  fixed.fixed_dims = {{"N", 3}};
  Session s(load_from_bytes(relu_model().bytes()), fixed);
  REQUIRE(s.inputs().front().dims);
  CHECK(dims_to_string(*s.inputs().front().dims) == "[3, 4]");
  std::vector<float> x(12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 5.5f;
  const Tensor y = s.run({{"x", Tensor::borrow(x.data(), {3, 4})}}).at("y");
  REQUIRE(y.shape() == Shape{3, 4});
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y.data<float>()[i] == std::max(x[i], 0.0f));
  expect_error([&] { s.run({{"x", Tensor::borrow(x.data(), {2, 4})}}); }, ErrorCode::InvalidArgument, {"[3, 4]", "[2, 4]"});

  SessionOptions unknown;
  unknown.fixed_dims = {{"batch", 2}};
  expect_error([&] { Session(load_from_bytes(relu_model().bytes()), unknown); }, ErrorCode::InvalidArgument,
               {"'batch'", "symbolic input dims: N"});
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-4}, std::int64_t{1} << 40}) {
    SessionOptions o;
    o.fixed_dims = {{"N", bad}};
    expect_error([&] { Session(load_from_bytes(relu_model().bytes()), o); }, ErrorCode::InvalidArgument,
                 {"fixed_dims['N']", std::to_string(bad)});
  }
}

TEST_CASE("kernel-level shape errors name the node and op", "[errors][session]") {
  OnnxModelBuilder b;
  b.input("a", {2, 3}).input("b", {3, 3}).output("y", {-1, 3}).node("Add", {"a", "b"}, {"y"});
  b.model.mutable_graph()->mutable_node(0)->set_name("the_add");
  Session s(load_from_bytes(b.bytes()));
  std::vector<float> a(6), c(9);
  expect_error([&] { s.run({{"a", Tensor::borrow(a.data(), {2, 3})}, {"b", Tensor::borrow(c.data(), {3, 3})}}); },
               ErrorCode::InvalidArgument, {"the_add", "Add", "broadcast"});
}

TEST_CASE("tensor files: corrupt and mismatched", "[errors][import]") {
  const std::string dir = wpk::testing::temp_dir("tensors");
  std::ofstream(dir + "/junk.pb") << "\xff\xff\xff\xff garbage";
  expect_error([&] { load_tensor(dir + "/junk.pb"); }, ErrorCode::InvalidModel, {"junk.pb"});
  Tensor t = Tensor::from_vector<float>({1, 2, 3}, {3});
  save_tensor(t, dir + "/ok.pb");
  Tensor back = load_tensor(dir + "/ok.pb");
  REQUIRE(back.shape() == Shape{3});
  CHECK(back.data<float>()[2] == 3.0f);
}

TEST_CASE("tensors in memory: bytes round-trip, truncated or corrupt bytes are an Error", "[errors][import]") {
  const Tensor t = Tensor::from_vector<std::int64_t>({7, -8, 9, 10, 11, 12}, {2, 3});
  const std::string bytes = tensor_to_bytes(t, "x");
  const Tensor back = tensor_from_bytes(bytes);
  REQUIRE(back.dtype() == DType::Int64);
  REQUIRE(back.shape() == Shape{2, 3});
  CHECK(back.data<std::int64_t>()[1] == -8);
  CHECK(back.data<std::int64_t>()[5] == 12);
  expect_error([&] { tensor_from_bytes(bytes.substr(0, bytes.size() - 5)); }, ErrorCode::InvalidModel, {"tensor"});
  expect_error([&] { tensor_from_bytes("\xff\xff\xff\xff garbage"); }, ErrorCode::InvalidModel, {"tensor"});
}

TEST_CASE("inputs the fuzzers once crashed on end in an Error or a result", "[errors][import]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(WPK_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++seen;
    INFO(entry.path().string());
    // Reaching the end of the loop is the test: these once crashed the process or exhausted
    // memory. A malformed model must be reported as the model's fault, not as a wpk bug.
    std::ifstream f(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      fuzz::load_and_run(bytes);
    } catch (const Error& e) {
      CHECK(e.code() != ErrorCode::Internal);
    }
  }
  CHECK(seen > 0);
}

TEST_CASE("a hand-written com.wpk ConcatBatchNorm with inconsistent inputs is an error, not a crash", "[errors][session]") {
  // Parameters for 6 channels, inputs with 4 + 3 = 7.
  Graph g;
  g.add_input("a", DType::Float32, {1, 4, 2, 2});
  g.add_input("b", DType::Float32, {1, 3, 2, 2});
  for (const char* p : {"scale", "bias", "mean", "var"})
    g.add_initializer(p, Tensor::from_vector<float>(std::vector<float>(6, 1.0f), {6}));
  g.add_node("ConcatBatchNorm", {"scale", "bias", "mean", "var", "a", "b"}, {"y"}).domain = "com.wpk";
  g.add_output("y");
  std::vector<float> a(16), b(12);
  Session s(g);
  expect_error([&] { s.run({{"a", Tensor::borrow(a.data(), {1, 4, 2, 2})}, {"b", Tensor::borrow(b.data(), {1, 3, 2, 2})}}); },
               ErrorCode::InvalidArgument, {"ConcatBatchNorm", "channels"});
}

TEST_CASE("a model file cannot switch its convolutions to bf16: only SessionOptions::precision does", "[errors][bf16]") {
  auto model = [](bool marked) {
    Graph g;
    g.add_input("x", DType::Float32, {1, 16, 8, 8});
    std::vector<float> w(32 * 16 * 9);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
    g.add_initializer("w", Tensor::from_vector(w, {32, 16, 3, 3}));
    std::map<std::string, Attribute> attrs = {{"pads", Attribute(std::vector<std::int64_t>{1, 1, 1, 1})}};
    if (marked) attrs.emplace("compute_precision", Attribute(std::string("bf16")));
    g.add_node("Conv", {"x", "w"}, {"y"}, attrs);
    g.add_output("y");
    return g;
  };
  std::vector<float> x(16 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 53) % 97) / 97.0f - 0.5f;
  const TensorMap in = {{"x", Tensor::from_vector(x, {1, 16, 8, 8})}};
  const Tensor plain = Session(model(false)).run(in).at("y");
  const Tensor marked = Session(model(true)).run(in).at("y");
  REQUIRE(plain.numel() == marked.numel());
  for (std::int64_t i = 0; i < plain.numel(); ++i) CHECK(marked.data<float>()[i] == plain.data<float>()[i]);
}

TEST_CASE("a model declaring a conv's or product's output bf16 gets float32 kernels, not a bf16-sized output", "[errors][bf16]") {
  // x -> Conv -> c -> Relu -> r -> MatMul -> m -> Relu -> y, c and m declared bfloat16 by the
  // model (value_info can say anything): no kernel may take them for bf16 activations.
  Graph g;
  g.add_input("x", DType::Float32, {1, 8, 6, 6});
  std::vector<float> w(8 * 8 * 9), b(6 * 5);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 13) % 17) / 17.0f - 0.5f;
  g.add_initializer("w", Tensor::from_vector(w, {8, 8, 3, 3}));
  g.add_initializer("b", Tensor::from_vector(b, {6, 5}));
  g.add_node("Conv", {"x", "w"}, {"c"}, {{"pads", Attribute(std::vector<std::int64_t>{1, 1, 1, 1})}});
  g.add_node("Relu", {"c"}, {"r"});
  g.add_node("MatMul", {"r", "b"}, {"m"});
  g.add_node("Relu", {"m"}, {"y"});
  g.add_output("y");
  std::vector<float> x(8 * 36);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 53) % 97) / 97.0f - 0.5f;
  const TensorMap in = {{"x", Tensor::from_vector(x, {1, 8, 6, 6})}};
  const Tensor want = Session(g).run(in).at("y");
  for (const char* v : {"c", "m"}) g.mutable_value(g.value_id(v)).dtype = DType::BFloat16;
  for (Precision precision : {Precision::FP32, Precision::BF16}) {
    SessionOptions options;
    options.precision = precision;
    const Tensor got = Session(g, options).run(in).at("y");
    REQUIRE(got.dtype() == DType::Float32);
    CHECK(wpk::testing::relative_l2_error(got, want) < (precision == Precision::FP32 ? 1e-6 : 2e-2));
  }
}

TEST_CASE("an integer product with an empty inner dimension gives zeros, not a crash", "[errors][int8]") {
  Graph g;
  g.add_input("x", DType::Float32, {3, 0});
  g.add_initializer("b", Tensor::zeros(DType::Int8, {0, 5}));
  g.add_initializer("bs", Tensor::scalar(0.5f));
  g.add_initializer("bz", Tensor::scalar(std::int8_t{0}));
  g.add_node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  g.add_node("MatMulInteger", {"xq", "b", "xz", "bz"}, {"acc"});
  g.add_node("Cast", {"acc"}, {"accf"}, {{"to", Attribute(std::int64_t(DType::Float32))}});
  g.add_node("Mul", {"xs", "bs"}, {"s"});
  g.add_node("Mul", {"accf", "s"}, {"y"});
  g.add_output("y");
  const Tensor y = Session(std::move(g)).run({{"x", Tensor::zeros(DType::Float32, {3, 0})}}).at("y");
  REQUIRE(y.shape() == Shape{3, 5});
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y.data<float>()[i] == 0.0f);
}
