#include "search/space.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace wpk::search {
namespace {

bool good_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

Space::Space(std::vector<Knob> knobs, std::function<bool(const Space&, const Point&)> constraint)
    : knobs_(std::move(knobs)), constraint_(std::move(constraint)) {
  std::set<std::string> names;
  for (const Knob& k : knobs_) {
    if (!good_name(k.name)) throw std::invalid_argument("search space: bad knob name '" + k.name + "'");
    if (!names.insert(k.name).second) throw std::invalid_argument("search space: knob '" + k.name + "' twice");
    if (k.values.empty()) throw std::invalid_argument("search space: knob '" + k.name + "' has no values");
  }
}

std::uint64_t Space::size() const {
  std::uint64_t n = 1;
  for (const Knob& k : knobs_) {
    if (n > std::numeric_limits<std::uint64_t>::max() / k.values.size()) return std::numeric_limits<std::uint64_t>::max();
    n *= k.values.size();
  }
  return n;
}

bool Space::valid(const Point& p) const {
  if (p.size() != knobs_.size()) return false;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] < 0 || p[i] >= static_cast<int>(knobs_[i].values.size())) return false;
  return !constraint_ || constraint_(*this, p);
}

std::int64_t Space::value(const Point& p, const std::string& knob) const {
  for (std::size_t i = 0; i < knobs_.size(); ++i)
    if (knobs_[i].name == knob) return value(p, i);
  throw std::invalid_argument("search space: no knob '" + knob + "'");
}

Point Space::point_at(std::uint64_t flat) const {
  Point p(knobs_.size(), 0);
  for (std::size_t i = knobs_.size(); i-- > 0;) {
    const std::uint64_t radix = knobs_[i].values.size();
    p[i] = static_cast<int>(flat % radix);
    flat /= radix;
  }
  return p;
}

std::string Space::describe(const Point& p) const {
  std::string s;
  for (std::size_t i = 0; i < knobs_.size() && i < p.size(); ++i) {
    if (i) s += ',';
    s += knobs_[i].name + '=' + std::to_string(value(p, i));
  }
  return s;
}

std::optional<Point> Space::parse(const std::string& text) const {
  Point p;
  std::size_t pos = 0;
  for (const Knob& k : knobs_) {
    if (pos > text.size()) return std::nullopt;  // fewer items than knobs
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || item.substr(0, eq) != k.name) return std::nullopt;
    const std::string digits = item.substr(eq + 1);
    std::int64_t v = 0;
    try {
      std::size_t used = 0;
      v = std::stoll(digits, &used);
      if (used != digits.size()) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    int index = -1;
    for (std::size_t j = 0; j < k.values.size(); ++j)
      if (k.values[j] == v) index = static_cast<int>(j);
    if (index < 0) return std::nullopt;
    p.push_back(index);
    pos = end + 1;
  }
  // Every item consumed: nothing after the last knob.
  if (knobs_.empty() ? !text.empty() : pos != text.size() + 1) return std::nullopt;
  return valid(p) ? std::optional<Point>(p) : std::nullopt;
}

}  // namespace wpk::search
