#pragma once
// A node attribute: one of the ONNX attribute kinds. Typed getters throw wpk::Error when the
// attribute holds another kind, so a malformed model fails loudly instead of reading garbage.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wpk/tensor.hpp"

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

class Graph;

class Attribute {
 public:
  enum class Kind { Int, Float, String, Tensor, Graph, Ints, Floats, Strings };

  Attribute(std::int64_t v) : kind_(Kind::Int), i_(v) {}
  Attribute(int v) : kind_(Kind::Int), i_(v) {}
  Attribute(float v) : kind_(Kind::Float), f_(v) {}
  Attribute(std::string v) : kind_(Kind::String), s_(std::move(v)) {}
  Attribute(const char* v) : kind_(Kind::String), s_(v) {}
  Attribute(wpk::Tensor v) : kind_(Kind::Tensor), t_(std::move(v)) {}
  Attribute(std::shared_ptr<const wpk::Graph> g) : kind_(Kind::Graph), g_(std::move(g)) {}
  Attribute(std::vector<std::int64_t> v) : kind_(Kind::Ints), ints_(std::move(v)) {}
  Attribute(std::initializer_list<std::int64_t> v) : kind_(Kind::Ints), ints_(v) {}
  Attribute(std::vector<float> v) : kind_(Kind::Floats), floats_(std::move(v)) {}
  Attribute(std::vector<std::string> v) : kind_(Kind::Strings), strings_(std::move(v)) {}

  Kind kind() const { return kind_; }
  std::int64_t i() const;
  float f() const;
  const std::string& s() const;
  const wpk::Tensor& t() const;
  const wpk::Graph& g() const;
  const std::vector<std::int64_t>& ints() const;
  const std::vector<float>& floats() const;
  const std::vector<std::string>& strings() const;

 private:
  void expect(Kind k) const;
  Kind kind_;
  std::int64_t i_ = 0;
  float f_ = 0;
  std::string s_;
  wpk::Tensor t_;
  std::shared_ptr<const wpk::Graph> g_;
  std::vector<std::int64_t> ints_;
  std::vector<float> floats_;
  std::vector<std::string> strings_;
};

const char* attribute_kind_name(Attribute::Kind k);

}  // namespace wpk

#pragma GCC visibility pop
