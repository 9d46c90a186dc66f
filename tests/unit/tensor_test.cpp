#include <catch2/catch.hpp>

#include "wpk/wpk.hpp"

using namespace wpk;

TEST_CASE("owned tensors are zero-filled, shared on copy, deep on clone", "[tensor]") {
  Tensor t = Tensor::zeros(DType::Float32, {2, 3});
  REQUIRE(t.numel() == 6);
  REQUIRE(t.nbytes() == 24);
  REQUIRE_FALSE(t.is_borrowed());
  CHECK(t.data<float>()[5] == 0.0f);
  Tensor shared = t;
  Tensor deep = t.clone();
  t.data<float>()[0] = 4.0f;
  CHECK(shared.data<float>()[0] == 4.0f);
  CHECK(deep.data<float>()[0] == 0.0f);
}

TEST_CASE("borrowed tensors alias the caller's memory", "[tensor]") {
  std::vector<float> buf{1, 2, 3, 4};
  Tensor t = Tensor::borrow(buf.data(), {2, 2});
  REQUIRE(t.is_borrowed());
  buf[3] = 9;
  CHECK(t.data<float>()[3] == 9);
  CHECK(t.reshaped({4}).data<float>()[3] == 9);
}

TEST_CASE("tensor misuse throws wpk::Error", "[tensor][errors]") {
  Tensor t = Tensor::zeros(DType::Int64, {3});
  CHECK_THROWS_AS(t.data<float>(), Error);
  CHECK_THROWS_AS(t.reshaped({2}), Error);
  CHECK_THROWS_AS(Tensor::zeros(DType::Float32, {-1, 2}), Error);
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
  CHECK_THROWS_AS(Tensor::borrow(static_cast<float*>(nullptr), {4}), Error);
  CHECK_THROWS_AS(Tensor::zeros(DType::String, {1}), Error);
  // Absurd shapes fail cleanly instead of allocating.
  CHECK_THROWS_AS(Tensor::zeros(DType::Float32, {1 << 20, 1 << 20, 1 << 20}), Error);
  CHECK_THROWS_AS(Tensor::zeros(DType::Float32, {1 << 30, 1 << 30}), Error);
}

TEST_CASE("device tensors carry a device address the host never reads, and a CPU session refuses them", "[tensor][errors]") {
  // An address the host must not touch: nothing here may read it.
  void* address = reinterpret_cast<void*>(std::uintptr_t{0x7f0000001000});
  const Tensor d = Tensor::borrow_device(address, DType::Float32, {2, 3});
  CHECK(d.on_device());
  CHECK(d.raw() == address);
  CHECK(d.numel() == 6);
  CHECK_FALSE(Tensor::zeros(DType::Float32, {2}).on_device());
  CHECK_THROWS_WITH(d.data<float>(), Catch::Contains("GPU memory"));
  CHECK_THROWS_AS(d.clone(), Error);
  CHECK(d.reshaped({3, 2}).on_device());
  CHECK_THROWS_AS(Tensor::borrow_device(nullptr, DType::Float32, {2}), Error);
  CHECK_THROWS_AS(Tensor::wrap_device(nullptr, address, DType::Float32, {2}), Error);
  auto owner = std::make_shared<int>(1);
  const Tensor w = Tensor::wrap_device(owner, address, DType::Float32, {2});
  CHECK(w.on_device());
  CHECK(owner.use_count() == 2);

  Graph g;
  g.add_input("x", DType::Float32, {2, 3});
  g.add_node("Relu", {"x"}, {"y"});
  g.add_output("y");
  Session s(std::move(g));
  try {
    s.run({{"x", d}});
    FAIL("a CPU session ran a device tensor");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("input 'x' is in GPU memory") && Catch::Contains("runs on the CPU"));
  }
}

TEST_CASE("scalars have rank 0 and one element", "[tensor]") {
  Tensor s = Tensor::scalar<std::int64_t>(42);
  CHECK(s.rank() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.data<std::int64_t>()[0] == 42);
}
