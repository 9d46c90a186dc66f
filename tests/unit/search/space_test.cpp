#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>

#include "search/space.hpp"

using namespace wpk::search;

namespace {

// Tiles whose product must stay under a budget, as a kernel's scratch must fit a cache.
Space tile_space() {
  return Space({{"tile_m", {1, 2, 4, 8}}, {"tile_n", {8, 16, 32}}, {"order", {-1, 0, 1}}},
               [](const Space& s, const Point& p) { return s.value(p, 0) * s.value(p, 1) <= 64; });
}

}  // namespace

TEST_CASE("space size counts every point, valid or not, and saturates", "[search][space]") {
  CHECK(tile_space().size() == 4 * 3 * 3);
  CHECK(Space({}).size() == 1);
  std::vector<Knob> many;
  for (int i = 0; i < 20; ++i) many.push_back({"k" + std::to_string(i), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
  CHECK(Space(many).size() == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("point_at enumerates every point once, knob 0 slowest", "[search][space]") {
  const Space s = tile_space();
  CHECK(s.point_at(0) == Point{0, 0, 0});
  CHECK(s.point_at(1) == Point{0, 0, 1});
  CHECK(s.point_at(3) == Point{0, 1, 0});
  CHECK(s.point_at(9) == Point{1, 0, 0});
  CHECK(s.point_at(s.size() - 1) == Point{3, 2, 2});
  std::set<Point> seen;
  for (std::uint64_t f = 0; f < s.size(); ++f) seen.insert(s.point_at(f));
  CHECK(seen.size() == s.size());
}

TEST_CASE("valid checks shape, ranges and the constraint", "[search][space]") {
  const Space s = tile_space();
  CHECK(s.valid({0, 0, 0}));
  CHECK(s.valid({3, 0, 2}));       // 8 * 8 = 64 fits
  CHECK_FALSE(s.valid({3, 1, 0}));  // 8 * 16 does not
  CHECK_FALSE(s.valid({0, 0}));
  CHECK_FALSE(s.valid({0, 0, 0, 0}));
  CHECK_FALSE(s.valid({4, 0, 0}));
  CHECK_FALSE(s.valid({0, -1, 0}));
  CHECK(Space({}).valid({}));
}

TEST_CASE("value looks knobs up by name", "[search][space]") {
  const Space s = tile_space();
  CHECK(s.value({2, 1, 0}, "tile_m") == 4);
  CHECK(s.value({2, 1, 0}, "tile_n") == 16);
  CHECK(s.value({2, 1, 0}, "order") == -1);
  CHECK_THROWS_AS(s.value({2, 1, 0}, "tile_k"), std::invalid_argument);
}

TEST_CASE("describe and parse round-trip every valid point", "[search][space]") {
  const Space s = tile_space();
  CHECK(s.describe({1, 2, 0}) == "tile_m=2,tile_n=32,order=-1");
  std::size_t valid = 0;
  for (std::uint64_t f = 0; f < s.size(); ++f) {
    const Point p = s.point_at(f);
    if (!s.valid(p)) continue;
    ++valid;
    const auto back = s.parse(s.describe(p));
    REQUIRE(back);
    CHECK(*back == p);
  }
  CHECK(valid == 27);  // 36 points less the 9 whose tiles overflow
  CHECK(Space({}).parse("") == Point{});
}

TEST_CASE("parse rejects text written for another space", "[search][space]") {
  const Space s = tile_space();
  REQUIRE(s.parse("tile_m=2,tile_n=32,order=1"));
  const char* bad[] = {
      "",                                     // nothing
      "tile_m=2,tile_n=32",                   // a knob missing
      "tile_m=2,tile_n=32,order=1,unroll=4",  // a knob this space lacks
      "tile_m=2,tile_n=32,order=1,",          // a trailing item
      "tile_n=32,tile_m=2,order=1",           // knobs out of order
      "tile_m=2,tile_x=32,order=1",           // a renamed knob
      "tile_m=3,tile_n=32,order=1",           // a value the knob does not have
      "tile_m=2,tile_n=32,order=2",           // ... at the end too
      "tile_m=2,tile_n=32,order=",            // no value
      "tile_m=2,tile_n=32,order=1x",          // not a number
      "tile_m=2,tile_n,order=1",              // no '='
      "tile_m=8,tile_n=16,order=0",           // every value known, but the point is invalid
      "tile_m=99999999999999999999,tile_n=32,order=1",  // out of int64 range
  };
  for (const char* text : bad) {
    INFO(text);
    CHECK_FALSE(s.parse(text));
  }
  CHECK_FALSE(Space({}).parse("tile_m=2"));
}

TEST_CASE("the constructor rejects malformed knobs", "[search][space]") {
  CHECK_NOTHROW(Space({{"a_1", {1}}, {"b", {1, 2}}}));
  CHECK_THROWS_AS(Space({{"", {1}}}), std::invalid_argument);
  CHECK_THROWS_AS(Space({{"Tile", {1}}}), std::invalid_argument);
  CHECK_THROWS_AS(Space({{"tile-m", {1}}}), std::invalid_argument);
  CHECK_THROWS_AS(Space({{"tile m", {1}}}), std::invalid_argument);
  CHECK_THROWS_AS(Space({{"a", {1}}, {"a", {2}}}), std::invalid_argument);
  CHECK_THROWS_AS(Space({{"a", {1}}, {"b", {}}}), std::invalid_argument);
}
