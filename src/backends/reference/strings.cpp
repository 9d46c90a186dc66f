// String tensors: Cast to and from string, Equal of strings, StringNormalizer, StringConcat,
// StringSplit and RegexFullMatch.
//
// Case changes are ASCII only (the locale attribute is read but only its ASCII letters change);
// RegexFullMatch takes the pattern as an ECMAScript regular expression, which agrees with RE2,
// the syntax ONNX names, on the common constructs (classes, \w \d \s \b, groups, alternation,
// counted repetition) and refuses what it cannot parse.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>
#include <set>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/misc_internal.hpp"

namespace wpk::reference {
namespace {

const std::vector<std::string>& strings_input(const KernelContext& ctx, std::size_t i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::String)
    ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " must be string, got " + dtype_name(t.dtype()));
  return t.strings();
}

// out[i] = f(a[i'], b[i'']) over the broadcast shape of two string tensors.
template <typename Out, typename F>
std::vector<Out> broadcast_strings(const KernelContext& ctx, Shape& shape, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const auto& sa = strings_input(ctx, 0);
  const auto& sb = strings_input(ctx, 1);
  shape = broadcast_shapes({a.shape(), b.shape()}, ctx);
  std::vector<Out> out;
  out.reserve(static_cast<std::size_t>(shape_numel(shape)));
  for_each_index(shape, {broadcast_strides(a.shape(), shape), broadcast_strides(b.shape(), shape)},
                 [&](const std::int64_t* off) { out.push_back(f(sa[off[0]], sb[off[1]])); });
  return out;
}

std::vector<std::string> string_list(const KernelContext& ctx, const char* name) {
  const Attribute* a = ctx.node().find_attr(name);
  return a ? a->strings() : std::vector<std::string>{};
}

std::string to_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string to_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A number as ONNX's Cast writes it: the shortest text that reads back to the same value, with
// numpy's spellings of the special values.
template <typename T>
std::string number_text(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  } else {
    return std::to_string(v);
  }
}

// Text to a number, as ONNX's Cast reads it (decimal or scientific; "inf", "INF", "NaN", ...).
double parse_number(const std::string& s, const KernelContext& ctx) {
  std::string t = to_lower(s);
  if (t == "nan" || t == "+nan" || t == "-nan") return NAN;
  if (t == "inf" || t == "+inf" || t == "infinity" || t == "+infinity") return INFINITY;
  if (t == "-inf" || t == "-infinity") return -INFINITY;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size())
    ctx.fail(ErrorCode::InvalidArgument, "'" + s + "' is not a number");
  return v;
}

void equal_strings(KernelContext& ctx) {
  Shape shape;
  std::vector<char> eq = broadcast_strings<char>(ctx, shape, [](const std::string& a, const std::string& b) { return a == b; });
  Tensor& y = ctx.allocate_output(0, DType::Bool, shape);
  std::copy(eq.begin(), eq.end(), y.data<bool>());
}

void string_concat(KernelContext& ctx) {
  Shape shape;
  std::vector<std::string> out =
      broadcast_strings<std::string>(ctx, shape, [](const std::string& a, const std::string& b) { return a + b; });
  ctx.set_output(0, Tensor::from_strings(std::move(out), shape));
}

// [C] or [1, C] strings: stopwords removed, then the case changed; nothing left is one "".
void string_normalizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& in = strings_input(ctx, 0);
  if (!(x.rank() == 1 || (x.rank() == 2 && x.shape()[0] == 1)))
    ctx.fail(ErrorCode::InvalidArgument, "input must be [C] or [1, C], got " + shape_to_string(x.shape()));
  const std::string action = ctx.node().attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    ctx.fail(ErrorCode::InvalidModel, "case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
  const bool sensitive = ctx.node().attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  for (const std::string& w : string_list(ctx, "stopwords")) stop.insert(sensitive ? w : to_lower(w));
  std::vector<std::string> kept;
  for (const std::string& s : in)
    if (!stop.count(sensitive ? s : to_lower(s)))
      kept.push_back(action == "LOWER" ? to_lower(s) : action == "UPPER" ? to_upper(s) : s);
  if (kept.empty()) kept.emplace_back();
  Shape shape = x.rank() == 1 ? Shape{static_cast<std::int64_t>(kept.size())} : Shape{1, static_cast<std::int64_t>(kept.size())};
  ctx.set_output(0, Tensor::from_strings(std::move(kept), std::move(shape)));
}

// Y [..., max parts] (padded with ""), Z [...] the part counts. Without a delimiter, runs of
// whitespace separate and leading/trailing whitespace is dropped; with one, every occurrence
// separates. maxsplit bounds the splits (the rest stays in the last part).
void string_split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& in = strings_input(ctx, 0);
  const std::string delim = ctx.node().attr_string("delimiter", "");
  const std::int64_t maxsplit = ctx.node().attr_int("maxsplit", -1);
  std::vector<std::vector<std::string>> parts;
  std::size_t widest = 0;
  for (const std::string& s : in) {
    std::vector<std::string> p;
    std::int64_t splits = 0;
    if (delim.empty()) {
      std::size_t i = 0;
      while (true) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size()) break;
        if (maxsplit >= 0 && splits == maxsplit) {
          std::size_t end = s.size();
          while (end > i && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
          p.push_back(s.substr(i, end - i));
          break;
        }
        std::size_t j = i;
        while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
        p.push_back(s.substr(i, j - i));
        ++splits;
        i = j;
      }
    } else if (!s.empty()) {
      std::size_t i = 0;
      while (true) {
        const std::size_t j = s.find(delim, i);
        if (j == std::string::npos || (maxsplit >= 0 && splits == maxsplit)) {
          p.push_back(s.substr(i));
          break;
        }
        p.push_back(s.substr(i, j - i));
        ++splits;
        i = j + delim.size();
      }
    }
    widest = std::max(widest, p.size());
    parts.push_back(std::move(p));
  }
  Shape y_shape = x.shape();
  y_shape.push_back(static_cast<std::int64_t>(widest));
  std::vector<std::string> y;
  Tensor& z = ctx.allocate_output(1, DType::Int64, x.shape());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    z.data<std::int64_t>()[i] = static_cast<std::int64_t>(parts[i].size());
    for (std::size_t k = 0; k < widest; ++k) y.push_back(k < parts[i].size() ? parts[i][k] : std::string());
  }
  ctx.set_output(0, Tensor::from_strings(std::move(y), std::move(y_shape)));
}

void regex_full_match(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& in = strings_input(ctx, 0);
  if (!ctx.node().has_attr("pattern")) ctx.fail(ErrorCode::InvalidModel, "attribute 'pattern' is required");
  const std::string pattern = ctx.node().attr_string("pattern", "");
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    ctx.fail(ErrorCode::Unsupported, "pattern '" + pattern + "' is not a regular expression wpk reads: " + e.what());
  }
  Tensor& y = ctx.allocate_output(0, DType::Bool, x.shape());
  for (std::size_t i = 0; i < in.size(); ++i) y.data<bool>()[i] = std::regex_match(in[i], re);
}

}  // namespace

bool cast_strings(KernelContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::String && to != DType::String) return false;
  if (x.dtype() == DType::String && to == DType::String) {
    ctx.set_output(0, x);
  } else if (to == DType::String) {
    std::vector<std::string> out(static_cast<std::size_t>(x.numel()));
    if (is_half_dtype(x.dtype())) {
      const std::vector<float> f = to_float_buffer(x);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = number_text(f[i]);
    } else if (x.dtype() == DType::Bool) {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = number_text(x.data<bool>()[i]);
    } else {
      dispatch_numeric(x.dtype(), ctx, [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = number_text(x.data<T>()[i]);
      });
    }
    ctx.set_output(0, Tensor::from_strings(std::move(out), x.shape()));
  } else {
    const auto& in = x.strings();
    Tensor& y = ctx.allocate_output(0, to, x.shape());
    if (is_half_dtype(to)) {
      std::vector<float> f(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) f[i] = static_cast<float>(parse_number(in[i], ctx));
      store_float_buffer(f.data(), y);
    } else if (to == DType::Bool) {
      for (std::size_t i = 0; i < in.size(); ++i) y.data<bool>()[i] = parse_number(in[i], ctx) != 0;
    } else {
      dispatch_numeric(to, ctx, [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (std::size_t i = 0; i < in.size(); ++i) {
          const double v = parse_number(in[i], ctx);
          if constexpr (std::is_integral_v<T>) {
            if (!(v >= static_cast<double>(std::numeric_limits<T>::lowest()) && v <= static_cast<double>(std::numeric_limits<T>::max())))
              ctx.fail(ErrorCode::InvalidArgument, "'" + in[i] + "' does not fit " + dtype_name(to));
          }
          y.data<T>()[i] = static_cast<T>(v);
        }
      });
    }
  }
  return true;
}

bool equal_if_strings(KernelContext& ctx) {
  if (ctx.input(0).dtype() != DType::String && ctx.input(1).dtype() != DType::String) return false;
  equal_strings(ctx);
  return true;
}

void register_strings(OpTable& t) {
  t.add("StringNormalizer", {string_normalizer, 1, 1, 10});
  t.add("StringConcat", {string_concat, 2, 2, 20});
  t.add("StringSplit", {string_split, 1, 1, 20});
  t.add("RegexFullMatch", {regex_full_match, 1, 1, 20});
}

}  // namespace wpk::reference
