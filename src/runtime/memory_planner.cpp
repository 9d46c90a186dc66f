#include "runtime/memory_planner.hpp"

#include <algorithm>
#include <limits>

namespace wpk {
namespace {

std::size_t align_up(std::size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// Requests chained by in-place reuse occupy one block of bytes for their joint lifetime.
struct Group {
  std::size_t bytes = 0;
  int first = 0;
  int last = 0;
  int tail = -1;  // the request that last took the bytes over; only it may hand them on
  std::size_t offset = 0;
};

bool lifetimes_meet(const Group& a, const Group& b) { return a.first <= b.last && b.first <= a.last; }

std::vector<Group> group_requests(const std::vector<BufferRequest>& requests, std::vector<int>& group_of) {
  std::vector<Group> groups;
  group_of.assign(requests.size(), -1);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& r = requests[i];
    const int target = r.share_with;
    if (target >= 0 && static_cast<std::size_t>(target) < i) {
      Group& g = groups[group_of[target]];
      // Valid only when the shared bytes die exactly where this request is born, and nobody
      // else has taken them over since (a second taker would overwrite the first).
      if (g.tail == target && g.last == r.first_step && r.last_step >= r.first_step) {
        g.bytes = std::max(g.bytes, align_up(r.bytes));
        g.last = r.last_step;
        g.tail = static_cast<int>(i);
        group_of[i] = group_of[target];
        continue;
      }
    }
    group_of[i] = static_cast<int>(groups.size());
    groups.push_back({align_up(r.bytes), r.first_step, std::max(r.first_step, r.last_step), static_cast<int>(i), 0});
  }
  return groups;
}

// The lowest offset at which `g` fits among `placed` (sorted by offset), preferring the
// smallest gap that holds it, else the top of the stack.
std::size_t best_fit(const Group& g, const std::vector<const Group*>& placed) {
  std::size_t cursor = 0;
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::size_t best_gap = std::numeric_limits<std::size_t>::max();
  for (const Group* p : placed) {
    if (p->offset > cursor) {
      const std::size_t gap = p->offset - cursor;
      if (gap >= g.bytes && gap < best_gap) {
        best_gap = gap;
        best = cursor;
      }
    }
    cursor = std::max(cursor, p->offset + p->bytes);
  }
  return best != std::numeric_limits<std::size_t>::max() ? best : cursor;
}

}  // namespace

MemoryLayout assign_offsets(const std::vector<BufferRequest>& requests) {
  MemoryLayout layout;
  std::vector<int> group_of;
  std::vector<Group> groups = group_requests(requests, group_of);

  std::vector<std::size_t> order(groups.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Big first: they are the hardest to fit; ties by birth so the layout is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (groups[a].bytes != groups[b].bytes) return groups[a].bytes > groups[b].bytes;
    return groups[a].first < groups[b].first;
  });

  std::vector<const Group*> placed;  // kept sorted by offset
  for (std::size_t gi : order) {
    Group& g = groups[gi];
    if (g.bytes == 0) continue;
    std::vector<const Group*> meeting;
    for (const Group* p : placed)
      if (lifetimes_meet(*p, g)) meeting.push_back(p);
    g.offset = best_fit(g, meeting);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), &g,
                                   [](const Group* a, const Group* b) { return a->offset < b->offset; }),
                  &g);
    layout.arena_bytes = std::max(layout.arena_bytes, g.offset + g.bytes);
  }
  layout.offsets.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    layout.offsets[i] = groups[group_of[i]].offset;
    layout.naive_bytes += align_up(requests[i].bytes);
  }
  return layout;
}

}  // namespace wpk
