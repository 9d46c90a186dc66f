#include "codegen/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace wpk::codegen {

Schedule::Schedule(const Compute& c) : compute_(c) {
  for (const Var& v : c.axes) loops_.push_back({v, LoopKind::Serial, false});
  for (const Var& v : c.reduce) loops_.push_back({v, LoopKind::Serial, true});
}

std::size_t Schedule::position(const Var& v) const {
  for (std::size_t i = 0; i < loops_.size(); ++i)
    if (loops_[i].var == v) return i;
  throw std::invalid_argument(compute_.name + ": '" + (v ? v->name : "?") + "' is not a loop of this schedule");
}

std::pair<Var, Var> Schedule::split(const Var& v, std::int64_t factor) {
  const std::size_t at = position(v);
  if (split_with_outer(v.get()) && v->dynamic())
    throw std::invalid_argument(compute_.name + ": '" + v->name + "' is the outer part of a dynamic variable; split the inner");
  if (factor < 1 || (!v->dynamic() && factor > v->extent))
    throw std::invalid_argument(compute_.name + ": cannot split '" + v->name + "' (extent " + std::to_string(v->extent) +
                                ") by " + std::to_string(factor));
  Var outer = v->dynamic() ? dynamic_var(v->name + ".o") : var(v->name + ".o", (v->extent + factor - 1) / factor);
  Var inner = var(v->name + ".i", factor);
  const Loop old = loops_[at];
  loops_[at] = {outer, LoopKind::Serial, old.reduction};
  loops_.insert(loops_.begin() + static_cast<std::ptrdiff_t>(at) + 1, Loop{inner, LoopKind::Serial, old.reduction});
  splits_[v.get()] = {v, outer, inner, factor};
  return {outer, inner};
}

void Schedule::reorder(const std::vector<Var>& order) {
  if (order.size() != loops_.size())
    throw std::invalid_argument(compute_.name + ": reorder names " + std::to_string(order.size()) + " loops of " +
                                std::to_string(loops_.size()));
  std::vector<Loop> next;
  for (const Var& v : order) {
    const Loop& l = loops_[position(v)];
    for (const Loop& seen : next)
      if (seen.var == v) throw std::invalid_argument(compute_.name + ": reorder names '" + v->name + "' twice");
    next.push_back(l);
  }
  loops_ = std::move(next);
}

void Schedule::kind(const Var& v, LoopKind k) { loops_[position(v)].kind = k; }

const SplitRecord* Schedule::split_of(const VarNode* v) const {
  const auto it = splits_.find(v);
  return it == splits_.end() ? nullptr : &it->second;
}

const SplitRecord* Schedule::split_with_outer(const VarNode* v) const {
  for (const auto& kv : splits_)
    if (kv.second.outer.get() == v) return &kv.second;
  return nullptr;
}

std::string Schedule::describe() const {
  std::string s;
  for (const Loop& l : loops_) {
    s += (s.empty() ? "" : " ") + l.var->name;
    switch (l.kind) {
      case LoopKind::Parallel: s += "(par)"; break;
      case LoopKind::Unrolled: s += "(unroll)"; break;
      case LoopKind::Vectorized: s += "(vec)"; break;
      case LoopKind::Serial: break;
    }
  }
  return s;
}

}  // namespace wpk::codegen
