#include "wpk/attribute.hpp"

namespace wpk {

const char* attribute_kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Graph: return "graph";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Strings: return "strings";
  }
  return "?";
}

void Attribute::expect(Kind k) const {
  if (k != kind_)
    throw Error(ErrorCode::InvalidModel, std::string("attribute holds ") + attribute_kind_name(kind_) +
                                             ", expected " + attribute_kind_name(k));
}

std::int64_t Attribute::i() const { expect(Kind::Int); return i_; }
float Attribute::f() const { expect(Kind::Float); return f_; }
const std::string& Attribute::s() const { expect(Kind::String); return s_; }
const Tensor& Attribute::t() const { expect(Kind::Tensor); return t_; }
const Graph& Attribute::g() const { expect(Kind::Graph); return *g_; }
const std::vector<std::int64_t>& Attribute::ints() const { expect(Kind::Ints); return ints_; }
const std::vector<float>& Attribute::floats() const { expect(Kind::Floats); return floats_; }
const std::vector<std::string>& Attribute::strings() const { expect(Kind::Strings); return strings_; }

}  // namespace wpk
