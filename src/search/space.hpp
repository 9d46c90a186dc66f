#pragma once
// A search space: the knobs a candidate's config may vary (tile sizes, loop order, algorithm,
// threads for the node, ...), each with its allowed values, and a constraint that rules points
// out (a tile that does not divide its extent and has no remainder path, scratch that does not
// fit the cache). A point picks one value per knob; it prints as "knob=value,knob=value", which
// is how tuning records store it and profiles show it.
//
// Plain data, no dependency on graphs or backends: a backend builds the space of one of its
// kernels for one node, the strategies (strategy.hpp) walk it. Thread-compatible (const methods
// may be called from many threads).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace wpk::search {

struct Knob {
  std::string name;                   // [a-z0-9_]+, unique within a space
  std::vector<std::int64_t> values;   // at least one; enumerations are small integers
};

// One index into each knob's values, in knob order.
using Point = std::vector<int>;

class Space {
 public:
  // Throws std::invalid_argument for an empty knob, a repeated or malformed name.
  explicit Space(std::vector<Knob> knobs, std::function<bool(const Space&, const Point&)> constraint = {});

  const std::vector<Knob>& knobs() const { return knobs_; }
  // Points in the space, valid or not (saturates at UINT64_MAX).
  std::uint64_t size() const;
  // In range for every knob and allowed by the constraint.
  bool valid(const Point& p) const;
  std::int64_t value(const Point& p, const std::string& knob) const;  // throws for an unknown knob
  // Throws std::out_of_range for a point that is not of this space.
  std::int64_t value(const Point& p, std::size_t knob) const {
    return knobs_.at(knob).values.at(static_cast<std::size_t>(p.at(knob)));
  }
  // The point with mixed-radix index `flat` (knob 0 varies slowest), for exhaustive enumeration.
  Point point_at(std::uint64_t flat) const;
  // "tile_m=6,tile_n=16"; parse() is its inverse, nullopt for text that names another space or
  // values this space does not have (a record written for another version of a kernel).
  std::string describe(const Point& p) const;
  std::optional<Point> parse(const std::string& text) const;

 private:
  std::vector<Knob> knobs_;
  std::function<bool(const Space&, const Point&)> constraint_;
};

}  // namespace wpk::search
