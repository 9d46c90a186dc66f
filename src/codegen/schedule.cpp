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
  if (const SplitRecord* up = split_with_outer(v.get())) {
    if (v->dynamic())
      throw std::invalid_argument(compute_.name + ": '" + v->name + "' is the outer part of a dynamic variable; split the inner");
    // The inner loop of such a split would run whole tiles where its outer loop's last one is short.
    if (up->parent->extent % up->factor != 0)
      throw std::invalid_argument(compute_.name + ": '" + v->name + "' is the outer part of '" + up->parent->name +
                                  "', which has a remainder; split it only where the factor divides its extent");
  }
  if (fuse_of(v.get())) throw std::invalid_argument(compute_.name + ": '" + v->name + "' is a fused loop; split its parts before fusing them");
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

Var Schedule::fuse(const Var& outer, const Var& inner) {
  const std::size_t at = position(outer);
  if (position(inner) != at + 1)
    throw std::invalid_argument(compute_.name + ": fuse '" + outer->name + "' and '" + inner->name + "': the second must come right inside the first");
  std::vector<Var> parts;
  for (const Var& v : {outer, inner}) {
    if (loops_[position(v)].reduction || v->dynamic())
      throw std::invalid_argument(compute_.name + ": fuse '" + v->name + "': only spatial loops of fixed extent fuse");
    const FuseRecord* f = fuse_of(v.get());
    if (f) parts.insert(parts.end(), f->parts.begin(), f->parts.end());
    else parts.push_back(v);
  }
  // A part's extent must be one for every iteration: not the inner loop of a split whose short
  // last tile an outer part picks.
  for (const auto& kv : splits_) {
    const SplitRecord& s = kv.second;
    const bool has_outer = std::find(parts.begin(), parts.end(), s.outer) != parts.end();
    const bool has_inner = std::find(parts.begin(), parts.end(), s.inner) != parts.end();
    if (has_outer && has_inner && s.parent->extent % s.factor != 0)
      throw std::invalid_argument(compute_.name + ": fuse '" + s.inner->name + "' with its outer loop '" + s.outer->name +
                                  "': the split has a remainder");
  }
  std::string name;
  std::int64_t extent = 1;
  for (const Var& p : parts) {
    name += (name.empty() ? "" : "*") + p->name;
    extent *= p->extent;
  }
  Var fused = var(name, extent);
  loops_[at] = {fused, LoopKind::Serial, false};
  loops_.erase(loops_.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  fuses_.erase(outer.get());
  fuses_.erase(inner.get());
  fuses_[fused.get()] = {fused, parts};
  return fused;
}

const FuseRecord* Schedule::fuse_of(const VarNode* v) const {
  const auto it = fuses_.find(v);
  return it == fuses_.end() ? nullptr : &it->second;
}

void Schedule::kind(const Var& v, LoopKind k) { loops_[position(v)].kind = k; }

namespace {

// The dimension of b that every load of it in e indexes by v alone; -1 when none, -2 when loads
// disagree or index it otherwise.
int packed_dimension(const Expr& e, const BufferNode* b, const VarNode* v, int found) {
  if (!e) return found;
  if (e->op == Op::Load && e->buffer.get() == b) {
    int here = -1;
    for (std::size_t d = 0; d < e->index.size(); ++d) {
      const Affine& a = e->index[d];
      if (a.terms.size() == 1 && a.terms[0].first.get() == v && a.terms[0].second == 1 && a.offset == 0) here = static_cast<int>(d);
      else if (a.coefficient(v) != 0) return -2;
    }
    if (here < 0 || (found >= 0 && found != here)) return -2;
    return here;
  }
  for (const Expr& a : e->args) {
    found = packed_dimension(a, b, v, found);
    if (found == -2) return -2;
  }
  return found;
}

}  // namespace

void Schedule::pack(const Buffer& b, const Var& v) {
  const SplitRecord* split = split_of(v.get());
  if (!split) throw std::invalid_argument(compute_.name + ": pack '" + b->name + "' along '" + v->name + "': split it first");
  if (std::find(compute_.inputs.begin(), compute_.inputs.end(), b) == compute_.inputs.end())
    throw std::invalid_argument(compute_.name + ": '" + b->name + "' is not an input, nothing to pack");
  for (std::int64_t d : b->dims)
    if (d == kDynamic) throw std::invalid_argument(compute_.name + ": '" + b->name + "' has a dynamic dimension and cannot be packed");
  if (pack_of(b.get())) throw std::invalid_argument(compute_.name + ": '" + b->name + "' is packed already");
  const int dim = packed_dimension(compute_.epilogue, b.get(), v.get(), packed_dimension(compute_.body, b.get(), v.get(), -1));
  if (dim < 0)
    throw std::invalid_argument(compute_.name + ": pack '" + b->name + "' along '" + v->name +
                                "': every load of it must index one dimension by it alone");
  std::vector<std::int64_t> dims = {(b->dims[static_cast<std::size_t>(dim)] + split->factor - 1) / split->factor};
  for (std::size_t d = 0; d < b->dims.size(); ++d)
    if (d != static_cast<std::size_t>(dim)) dims.push_back(b->dims[d]);
  dims.push_back(split->factor);
  packs_.push_back({b, buffer(b->name + "_packed", dims), static_cast<std::size_t>(dim), v});
}

void Schedule::prefetch_next(const Buffer& b, const Var& at) {
  const PackRecord* p = pack_of(b.get());
  if (!p) throw std::invalid_argument(compute_.name + ": prefetch '" + b->name + "': pack it first");
  const SplitRecord* split = split_of(p->var.get());
  if (!split || split->outer != at)
    throw std::invalid_argument(compute_.name + ": prefetch '" + b->name + "' at '" + (at ? at->name : "?") +
                                "': that is not the outer loop of the split '" + b->name + "' is packed along");
  for (const PrefetchRecord& r : prefetches_)
    if (r.original == b) throw std::invalid_argument(compute_.name + ": '" + b->name + "' is prefetched already");
  prefetches_.push_back({b, at});
}

namespace {

bool reads(const Expr& e, const BufferNode* b) {
  if (!e) return false;
  if (e->op == Op::Load && e->buffer.get() == b) return true;
  for (const Expr& a : e->args)
    if (reads(a, b)) return true;
  return false;
}

}  // namespace

void Schedule::prefetch_epilogue(const Buffer& b) {
  if (std::find(compute_.inputs.begin(), compute_.inputs.end(), b) == compute_.inputs.end() || !reads(compute_.epilogue, b.get()))
    throw std::invalid_argument(compute_.name + ": prefetch_epilogue '" + b->name + "': not an input the epilogue reads");
  if (reads(compute_.body, b.get()) || pack_of(b.get()))
    throw std::invalid_argument(compute_.name + ": prefetch_epilogue '" + b->name + "': the reduction reads it too");
  if (std::find(epilogue_prefetches_.begin(), epilogue_prefetches_.end(), b) != epilogue_prefetches_.end())
    throw std::invalid_argument(compute_.name + ": '" + b->name + "' is prefetched for the epilogue already");
  epilogue_prefetches_.push_back(b);
}

void Schedule::stage_shared(const Buffer& b, const Var& at) {
  if (std::find(compute_.inputs.begin(), compute_.inputs.end(), b) == compute_.inputs.end())
    throw std::invalid_argument(compute_.name + ": '" + b->name + "' is not an input, nothing to stage");
  position(at);  // a loop of this schedule
  if (stage_of(b.get())) throw std::invalid_argument(compute_.name + ": '" + b->name + "' is staged already");
  stages_.push_back({b, at, nullptr});
}

void Schedule::stage_shared(const Buffer& b, const Var& at, const Compute& producer, std::int64_t chunk) {
  if (chunk < 1) throw std::invalid_argument(compute_.name + ": a stage's chunk must be positive");
  if (!producer.reduce.empty() || !producer.body || producer.epilogue)
    throw std::invalid_argument(compute_.name + ": the producer of '" + b->name + "' must be element-wise");
  if (producer.output->dims != b->dims || producer.axes.size() != b->dims.size())
    throw std::invalid_argument(compute_.name + ": the producer '" + producer.name + "' does not make '" + b->name + "'s shape");
  for (const Buffer& in : producer.inputs)
    if (std::find(compute_.inputs.begin(), compute_.inputs.end(), in) != compute_.inputs.end())
      throw std::invalid_argument(compute_.name + ": the producer's input '" + in->name + "' is also the kernel's");
  // Its axes stand for the tile element's coordinates: one that is also a loop here would mean two things.
  for (const Var& v : producer.axes)
    for (const Loop& l : loops_)
      if (l.var == v || split_of(v.get()))
        throw std::invalid_argument(compute_.name + ": the producer's axis '" + v->name + "' is a loop of this schedule; give it its own");
  stage_shared(b, at);
  stages_.back().producer = std::make_shared<const Compute>(producer);
  stages_.back().chunk = chunk;
}

const StageRecord* Schedule::stage_of(const BufferNode* b) const {
  for (const StageRecord& r : stages_)
    if (r.original.get() == b) return &r;
  return nullptr;
}

const PackRecord* Schedule::pack_of(const BufferNode* b) const {
  for (const PackRecord& p : packs_)
    if (p.original.get() == b) return &p;
  return nullptr;
}

std::vector<float> pack_input(const PackRecord& p, const Schedule& s, const float* data) {
  const std::vector<std::int64_t>& src = p.original->dims;
  const std::int64_t f = s.split_of(p.var.get())->factor, extent = src[p.dim];
  // Elements after the packed dimension (a row of it) and before it (how many such rows).
  std::int64_t after = 1, before = 1;
  for (std::size_t d = p.dim + 1; d < src.size(); ++d) after *= src[d];
  for (std::size_t d = 0; d < p.dim; ++d) before *= src[d];
  const std::int64_t panels = p.packed->dims.front();
  std::vector<float> out(static_cast<std::size_t>(panels * before * after * f), 0.0f);
  for (std::int64_t o = 0; o < before; ++o)
    for (std::int64_t x = 0; x < extent; ++x)
      for (std::int64_t r = 0; r < after; ++r) {
        const std::int64_t panel = x / f, lane = x % f;
        out[static_cast<std::size_t>(((panel * before + o) * after + r) * f + lane)] =
            data[static_cast<std::size_t>((o * extent + x) * after + r)];
      }
  return out;
}

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
      case LoopKind::GpuBlock: s += "(block)"; break;
      case LoopKind::GpuThread: s += "(thread)"; break;
      case LoopKind::Serial: break;
    }
  }
  for (const PackRecord& p : packs_) s += " pack(" + p.original->name + "@" + p.var->name + ")";
  for (const PrefetchRecord& r : prefetches_) s += " prefetch(" + r.original->name + "@" + r.at->name + ")";
  for (const Buffer& b : epilogue_prefetches_) s += " prefetch_epilogue(" + b->name + ")";
  for (const StageRecord& r : stages_)
    s += " shared(" + r.original->name + "@" + r.at->name + (r.producer ? "=" + r.producer->name : "") + ")";
  return s;
}

}  // namespace wpk::codegen
