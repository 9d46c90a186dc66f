// Schedule -> loop IR (loop_ir.hpp).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <stdexcept>

#include "codegen/loop_ir.hpp"

namespace wpk::codegen {
namespace {

StmtPtr block(std::vector<StmtPtr> body) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::Block;
  s->body = std::move(body);
  return s;
}

StmtPtr store(Buffer b, std::vector<Affine> index, Expr value) {
  auto s = std::make_shared<Stmt>();
  s->kind = StmtKind::Store;
  s->buffer = std::move(b);
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

// Every load of buffer b in e.
void loads_of(const Expr& e, const BufferNode* b, std::vector<const ExprNode*>& out) {
  if (!e) return;
  if (e->op == Op::Load && e->buffer.get() == b) out.push_back(e.get());
  for (const Expr& a : e->args) loads_of(a, b, out);
}

class Lowering {
 public:
  // `acc`: the register tile's name (the stages of one kernel need their own).
  explicit Lowering(const Schedule& s, std::string acc = "acc")
      : s_(s), c_(s.compute()), loops_(s.loops()), acc_(std::move(acc)) {}

  LoweredKernel run() {
    check_rules();
    LoweredKernel k;
    k.name = c_.name;
    k.schedule = s_.describe();
    for (const Buffer& b : c_.inputs) {
      const StageRecord* staged = s_.stage_of(b.get());
      if (staged && staged->producer) {
        k.args.insert(k.args.end(), staged->producer->inputs.begin(), staged->producer->inputs.end());
        continue;
      }
      const PackRecord* p = s_.pack_of(b.get());
      k.args.push_back(p ? p->packed : b);
    }
    k.args.push_back(c_.output);
    k.dynamic = c_.dynamic();
    for (const StageRecord& r : s_.stages()) k.shared.push_back(plan_stage(r));
    for (const PrefetchRecord& r : s_.prefetches()) prefetches_.push_back(plan_prefetch(r));
    k.body = nest(0, first_reduction_, {}, [this](const Extents& e) { return section(e); });
    return k;
  }

 private:
  using Extents = std::map<const VarNode*, std::int64_t>;  // inner loops' extents in a remainder
  template <typename Leaf>
  StmtPtr nest(std::size_t from, std::size_t to, const Extents& extents, const Leaf& leaf) {
    if (from == to) return leaf(extents);
    StmtPtr loop = nest_loop(from, to, extents, leaf);
    const auto staged = staged_at_.find(loops_[from].var.get());
    if (staged == staged_at_.end()) return loop;
    // Copy this iteration's tiles once the previous iteration has read them, then compute.
    auto barrier = std::make_shared<Stmt>();
    barrier->kind = StmtKind::Barrier;
    std::vector<StmtPtr> body;
    if (block_threads_) body.push_back(barrier);
    body.insert(body.end(), staged->second.begin(), staged->second.end());
    if (block_threads_) body.push_back(barrier);
    body.push_back(loop->body[0]);
    auto wrapped = std::make_shared<Stmt>(*loop);
    wrapped->body = {block(std::move(body))};
    return wrapped;
  }

  template <typename Leaf>
  StmtPtr nest_loop(std::size_t from, std::size_t to, const Extents& extents, const Leaf& leaf) {
    const Loop& l = loops_[from];
    auto loop = std::make_shared<Stmt>();
    loop->kind = StmtKind::For;
    loop->var = l.var;
    loop->loop = l.kind;
    if (const FuseRecord* fused = s_.fuse_of(l.var.get())) {
      loop->extent = 1;
      for (const Var& p : fused->parts) {
        loop->vars.push_back(p);
        loop->bounds.push_back(extent(p.get(), extents));
        loop->extent *= loop->bounds.back();
      }
      loop->body = {fused_parts(fused->parts, 0, from, to, extents, leaf)};
      return loop;
    }
    const SplitRecord* split = s_.split_with_outer(l.var.get());
    if (!split) {
      loop->extent = extent(l.var.get(), extents);
      if (l.var->dynamic()) loop->dynamic = l.var;
      loop->body = {nest(from + 1, to, extents, leaf)};
      return loop;
    }
    if (split->parent->dynamic()) {
      // ceil(n / f) iterations, the last computing one of f - 1 remainders only known at run time.
      loop->dynamic = split->parent;
      loop->divisor = split->factor;
      Extents main = extents;
      main[split->inner.get()] = split->factor;
      if (split->factor == 1) {
        loop->body = {nest(from + 1, to, main, leaf)};
        return loop;
      }
      auto branch = std::make_shared<Stmt>();
      branch->kind = StmtKind::Tail;
      branch->var = l.var;
      branch->dynamic = split->parent;
      branch->divisor = split->factor;
      branch->body = {nest(from + 1, to, main, leaf)};
      for (std::int64_t r = 1; r < split->factor; ++r) {
        Extents tail = extents;
        tail[split->inner.get()] = r;
        branch->body.push_back(nest(from + 1, to, tail, leaf));
      }
      loop->body = {branch};
      return loop;
    }
    loop->extent = extent(l.var.get(), extents);
    loop->body = {remainder_branch(*split, extents, whole_tiles_ && !l.reduction,
                                   [&](const Extents& e) { return nest(from + 1, to, e, leaf); })};
    return loop;
  }

  // Inside a fused loop: for each part that is the outer loop of a split with a remainder, a
  // Tail picking the full or the short inner nest for this iteration's value of it.
  template <typename Leaf>
  StmtPtr fused_parts(const std::vector<Var>& parts, std::size_t k, std::size_t from, std::size_t to, const Extents& extents,
                      const Leaf& leaf) {
    if (k == parts.size()) return nest(from + 1, to, extents, leaf);
    const SplitRecord* split = s_.split_with_outer(parts[k].get());
    if (!split) return fused_parts(parts, k + 1, from, to, extents, leaf);
    return remainder_branch(*split, extents, whole_tiles_,
                            [&](const Extents& e) { return fused_parts(parts, k + 1, from, to, e, leaf); });
  }

  // What an iteration of a split's outer loop runs: body(extents with the inner loop whole), and
  // where the split has a remainder (computed apart unless `whole_tiles`), a Tail running
  // body(extents with the short inner loop) for the last iteration.
  template <typename Body>
  StmtPtr remainder_branch(const SplitRecord& split, const Extents& extents, bool whole_tiles, const Body& body) {
    const std::int64_t whole = extent(split.parent.get(), extents);
    const std::int64_t full = whole / split.factor, rest = whole % split.factor;
    Extents main = extents;
    main[split.inner.get()] = split.factor;
    if (!rest || whole_tiles) return body(main);
    Extents tail = extents;
    tail[split.inner.get()] = rest;
    auto branch = std::make_shared<Stmt>();
    branch->kind = StmtKind::Tail;
    branch->var = split.outer;
    branch->full = full;
    branch->body = {body(main), body(tail)};
    return branch;
  }

  std::int64_t extent(const VarNode* v, const Extents& extents) const {
    const auto set = extents.find(v);
    if (set != extents.end()) return set->second;
    if (const SplitRecord* split = s_.split_with_outer(v)) {
      const std::int64_t whole = extent(split->parent.get(), extents);
      return (whole + split->factor - 1) / split->factor;
    }
    return v->extent;
  }

  // v in terms of the loops that remain after every split.
  Affine leaf(const Var& v) const {
    const SplitRecord* split = s_.split_of(v.get());
    if (!split) return Affine(v);
    return leaf(split->outer) * split->factor + leaf(split->inner);
  }
  Affine rewrite(const Affine& a) const {
    Affine out(a.offset);
    for (const auto& t : a.terms) out = out + leaf(t.first) * t.second;
    return out;
  }
  Expr rewrite(const Expr& e, const Expr& acc_value, bool body = false) const {
    if (!e) return acc_value;
    if (e->op == Op::Acc) return acc_value;
    auto out = std::make_shared<ExprNode>(*e);
    const auto staged = e->op == Op::Load ? stage_reads_.find(e->buffer.get()) : stage_reads_.end();
    if (staged != stage_reads_.end()) {
      // The tile holds zeros where the index leaves the buffer: no check left to make.
      out->buffer = staged->second.tile;
      out->index = staged->second.index;
      out->checked = false;
      out->may_leave.clear();
    } else if (const PackRecord* p = e->op == Op::Load ? s_.pack_of(e->buffer.get()) : nullptr) {
      // [panel, the other dims..., lane] of the packed copy.
      const SplitRecord* split = s_.split_of(p->var.get());
      out->buffer = p->packed;
      out->index = {rewrite(Affine(split->outer))};
      for (std::size_t d = 0; d < e->index.size(); ++d)
        if (d != p->dim) out->index.push_back(rewrite(e->index[d]));
      out->index.push_back(rewrite(Affine(split->inner)));
      if (e->checked) {
        // The packed dimension is indexed by its variable alone: it never leaves.
        out->may_leave = {false};
        for (std::size_t d = 0; d < e->index.size(); ++d)
          if (d != p->dim) out->may_leave.push_back(e->may_leave[d]);
        out->may_leave.push_back(false);
      }
    } else {
      for (Affine& a : out->index) a = rewrite(a);
      if (e->op == Op::Load && body && whole_tiles_) {
        // Whole tiles compute points past the edges; their reads must stay inside the buffer.
        out->checked = true;
        out->may_leave.assign(out->index.size(), true);
      }
    }
    for (Expr& a : out->args) a = rewrite(a, acc_value, body);
    return out;
  }
  std::vector<Affine> output_index() const {
    std::vector<Affine> index;
    for (const Var& v : c_.axes) index.push_back(rewrite(Affine(v)));
    return index;
  }

  // The output store; with whole tiles, only at points inside every split variable.
  StmtPtr output_store(Expr value) const {
    StmtPtr st = store(c_.output, output_index(), std::move(value));
    if (!whole_tiles_) return st;
    auto guard = std::make_shared<Stmt>();
    guard->kind = StmtKind::Guard;
    for (const Var& v : c_.axes) guard_splits(v, *guard);
    if (guard->index.empty()) return st;
    guard->body = {st};
    return guard;
  }
  void guard_splits(const Var& v, Stmt& guard) const {
    const SplitRecord* split = s_.split_of(v.get());
    if (!split) return;
    if (v->extent % split->factor != 0) {
      guard.index.push_back(leaf(v));
      guard.bounds.push_back(v->extent);
    }
    guard_splits(split->outer, guard);
    guard_splits(split->inner, guard);
  }

  // Where the loads of a staged input read: the loops that vary within one copy (the block's
  // threads and the loops inside the staging loop) span the tile; the rest fix its origin.
  struct StageRead {
    Buffer tile;
    std::vector<Affine> index;  // into the tile
  };
  // Schedule::prefetch_next: the Prefetch that opens every step of the reductions. Its index
  // walks the loops between the panel loop and the register tile as one count (the reductions
  // included), so each step takes the next fraction of the next panel.
  StmtPtr plan_prefetch(const PrefetchRecord& r) {
    const std::string what = c_.name + ": prefetch '" + r.original->name + "' at '" + r.at->name + "'";
    std::size_t at = loops_.size();
    for (std::size_t i = 0; i < loops_.size(); ++i)
      if (loops_[i].var == r.at) at = i;
    if (at >= first_reduction_ || first_reduction_ == loops_.size())
      throw std::invalid_argument(what + ": the loop must lie outside the reductions of a compute that has some");
    auto pf = std::make_shared<Stmt>();
    pf->kind = StmtKind::Prefetch;
    pf->buffer = s_.pack_of(r.original.get())->packed;
    pf->var = r.at;
    pf->extent = pf->buffer->dims[0];
    Affine count(0);
    std::int64_t stride = 1;
    for (std::size_t i = first_tile_; i-- > at + 1;) {
      const Var& v = loops_[i].var;
      const SplitRecord* split = s_.split_with_outer(v.get());
      const Var dynamic = split ? (split->parent->dynamic() ? split->parent : Var()) : (v->dynamic() ? v : Var());
      if (dynamic) {
        if (i != at + 1)
          throw std::invalid_argument(what + ": a loop with a dynamic extent ('" + v->name + "') must come first after it");
        pf->dynamic = dynamic;
        pf->divisor = split ? split->factor : 1;
      }
      count = count + Affine(v) * stride;
      if (!dynamic) stride *= extent(v.get(), {});
    }
    pf->index = {count};
    pf->full = stride;
    return pf;
  }

  Buffer plan_stage(const StageRecord& r) {
    const std::string& name = c_.name;
    const std::size_t at = loop_position(r.at.get());
    // A CPU thread's tile lives in the loop's body: each iteration of a parallel loop has its own.
    if (loops_[at].kind != LoopKind::Serial && (block_threads_ || loops_[at].kind != LoopKind::Parallel))
      throw std::invalid_argument(name + ": stage '" + r.original->name + "' at '" + r.at->name + "': the loop must be serial (or a CPU kernel's parallel one)");
    if (block_threads_ && !loops_[at].reduction)
      throw std::invalid_argument(name + ": stage '" + r.original->name + "' at '" + r.at->name +
                                  "': a CUDA block stages at a reduction loop");
    if (s_.pack_of(r.original.get())) throw std::invalid_argument(name + ": '" + r.original->name + "' is packed and staged");
    std::vector<const ExprNode*> reads;
    loads_of(c_.epilogue, r.original.get(), reads);
    if (!reads.empty())
      throw std::invalid_argument(name + ": staged '" + r.original->name + "' is read by the epilogue, outside its loop");
    loads_of(c_.body, r.original.get(), reads);
    if (reads.empty()) throw std::invalid_argument(name + ": staged '" + r.original->name + "' is never read");
    for (const ExprNode* e : reads)
      if (e->checked && e->outside != 0)
        throw std::invalid_argument(name + ": staged '" + r.original->name + "' is read as " + std::to_string(e->outside) +
                                    " outside it; a staged tile holds 0 there");
    std::vector<Affine> first;
    for (const ExprNode* e : reads) {
      std::vector<Affine> index;
      for (const Affine& a : e->index) index.push_back(rewrite(a));
      if (e != reads.front() && !same(index, first))
        throw std::invalid_argument(name + ": staged '" + r.original->name + "' is read at more than one index");
      first = index;
    }
    std::set<const VarNode*> varying;
    for (std::size_t i = 0; i < loops_.size(); ++i)
      if (i > at || loops_[i].kind == LoopKind::GpuThread) varying.insert(loops_[i].var.get());
    auto tile = std::make_shared<BufferNode>();
    // A C name of its own, whatever the input's name (two inputs may share one).
    tile->name = "t" + std::to_string(stage_reads_.size()) + "_";
    for (char ch : r.original->name) tile->name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    tile->shared = true;
    auto copy = std::make_shared<Stmt>();
    copy->kind = StmtKind::Stage;
    copy->source = r.original;
    StageRead read;
    for (const Affine& a : first) {
      Affine origin(a.offset), within;
      std::int64_t span = 1;
      for (const auto& t : a.terms) {
        if (!varying.count(t.first.get())) {
          origin = origin + Affine(t.first) * t.second;
          continue;
        }
        if (t.second < 0)
          throw std::invalid_argument(name + ": staged '" + r.original->name + "' is indexed backwards by '" + t.first->name + "'");
        within = within + Affine(t.first) * t.second;
        span += t.second * (t.first->extent - 1);
      }
      copy->index.push_back(origin);
      read.index.push_back(within);
      tile->dims.push_back(span);
    }
    std::int64_t floats = 1;
    for (std::int64_t d : tile->dims) floats *= d;
    shared_floats_ += floats;
    if (shared_floats_ * 4 > kMaxSharedBytes)
      throw std::invalid_argument(name + ": staged tiles of " + std::to_string(shared_floats_ * 4) + " bytes, over " +
                                  std::to_string(kMaxSharedBytes) + " of shared memory");
    read.tile = tile;
    copy->buffer = tile;
    if (r.producer) {
      copy->value = r.producer->body;
      copy->vars = r.producer->axes;
      if (!block_threads_) copy->body = producer_nest(r, copy->index, tile);
    }
    staged_at_[r.at.get()].push_back(copy);
    stage_reads_[r.original.get()] = read;
    return tile;
  }
  // A CPU thread computes a producer's tile as a loop nest of its own, the tile's last dimension
  // (contiguous in the tile) in SIMD vectors: the tile is a producer's whole output for the loops
  // inside the stage, and a scalar walk over it would cost more than what keeping it in cache
  // saves. The last dimension is the outer loop, in chunks of the stage's `chunk` values (one
  // vector, say), each computed at every point of the other dimensions in turn: what the producer
  // reads along the last dimension alone (a depthwise conv's weights) then stays in registers
  // over those points. Points past the producer's output (a spatial remainder's) are skipped, as
  // no load of the tile reads them. Empty when the last dimension starts at an offset known only
  // at run time (the flat copy in the printer computes such tiles).
  std::vector<StmtPtr> producer_nest(const StageRecord& r, const std::vector<Affine>& origin, const Buffer& tile) const {
    const Compute& producer = *r.producer;
    const std::vector<std::int64_t>& full = producer.output->dims;
    const std::size_t rank = tile->dims.size();
    if (rank == 0 || !origin[rank - 1].terms.empty()) return {};
    std::vector<Var> t(rank);
    std::vector<std::int64_t> extent(rank);
    std::vector<Affine> guarded;
    std::vector<std::int64_t> bounds;
    std::map<const VarNode*, Affine> at;
    for (std::size_t d = 0; d < rank; ++d) {
      extent[d] = tile->dims[d];
      if (origin[d].terms.empty()) extent[d] = std::max<std::int64_t>(0, std::min(extent[d], full[d] - origin[d].offset));
      if (extent[d] == 0) return {std::make_shared<Stmt>()};
      t[d] = var(tile->name + "p" + std::to_string(d), extent[d]);
      at[producer.axes[d].get()] = origin[d] + Affine(t[d]);
      if (!origin[d].terms.empty() && max_value(origin[d]) + extent[d] > full[d]) {
        guarded.push_back(origin[d] + Affine(t[d]));
        bounds.push_back(full[d]);
      }
    }
    // The other dimensions' points, each computing `inner` (guarded where it may leave).
    auto at_every_point = [&](StmtPtr inner) {
      if (!guarded.empty()) {
        auto guard = std::make_shared<Stmt>();
        guard->kind = StmtKind::Guard;
        guard->index = guarded;
        guard->bounds = bounds;
        guard->body = {inner};
        inner = guard;
      }
      for (std::size_t d = rank - 1; d-- > 0;) {
        auto loop = std::make_shared<Stmt>();
        loop->kind = StmtKind::For;
        loop->var = t[d];
        loop->extent = extent[d];
        loop->body = {inner};
        inner = loop;
      }
      return inner;
    };
    const Var& last = t[rank - 1];
    const std::int64_t width = std::min<std::int64_t>(extent[rank - 1], std::max<std::int64_t>(1, r.chunk));
    auto element = [&](const Affine& last_index, const Var& vector_var, std::int64_t count, bool interior) {
      std::map<const VarNode*, Affine> point = at;
      point[producer.axes[rank - 1].get()] = origin[rank - 1] + last_index;
      std::vector<Affine> index;
      for (std::size_t d = 0; d + 1 < rank; ++d) index.push_back(Affine(t[d]));
      index.push_back(last_index);
      auto inner = std::make_shared<Stmt>();
      inner->kind = StmtKind::For;
      inner->var = vector_var;
      inner->extent = count;
      inner->loop = LoopKind::Vectorized;
      const Expr value = substitute(producer.body, point);
      inner->body = {store(tile, index, interior ? without_bounds_checks(value) : value)};
      return at_every_point(inner);
    };
    auto nest = [&](bool interior) {
      std::vector<StmtPtr> chunks;
      Var chunk = var(last->name + "o", extent[rank - 1] / width), lane = var(last->name + "i", width);
      auto whole = std::make_shared<Stmt>();
      whole->kind = StmtKind::For;
      whole->var = chunk;
      whole->extent = chunk->extent;
      whole->body = {element(Affine(chunk) * width + Affine(lane), lane, width, interior)};
      chunks.push_back(whole);
      if (const std::int64_t rest = extent[rank - 1] % width) {
        Var rest_lane = var(last->name + "r", rest);
        chunks.push_back(element(Affine(extent[rank - 1] - rest) + Affine(rest_lane), rest_lane, rest, interior));
      }
      return block(std::move(chunks));
    };
    // A tile whose every read lies inside the producer's inputs (a depthwise conv's pixels away
    // from the padding: most of them) takes a copy of the nest without the per-read checks.
    auto inside = std::make_shared<Stmt>();
    inside->kind = StmtKind::Guard;
    if (!interior_condition(substitute(producer.body, at), t, *inside)) return {nest(false)};
    inside->body = {nest(true), nest(false)};
    return {inside};
  }
  // The condition that every read of a checked load in `value` lies inside its buffer for
  // every value of the tile's variables `local`: per buffer dimension and combination of the
  // other (outer) variables, the least index at least 0 and the greatest below the dimension,
  // written as Guard entries in `guard`. False when there are no such reads or some tile never
  // stays inside.
  static bool interior_condition(const Expr& value, const std::vector<Var>& local, Stmt& guard) {
    std::vector<const ExprNode*> loads;
    collect_checked_loads(value, loads);
    struct Range {
      Affine outer;
      std::int64_t dim, lo, hi;
    };
    std::vector<Range> ranges;
    for (const ExprNode* l : loads)
      for (std::size_t d = 0; d < l->index.size(); ++d) {
        if (d >= l->may_leave.size() || !l->may_leave[d]) continue;
        Affine outer(0);
        std::int64_t lo = l->index[d].offset, hi = lo;
        for (const auto& term : l->index[d].terms) {
          const bool is_local = std::any_of(local.begin(), local.end(), [&](const Var& v) { return v.get() == term.first.get(); });
          if (!is_local) {
            outer = outer + Affine(term.first) * term.second;
            continue;
          }
          const std::int64_t reach = term.second * (term.first->extent - 1);
          lo += std::min<std::int64_t>(0, reach);
          hi += std::max<std::int64_t>(0, reach);
        }
        const std::int64_t dim = l->buffer->dims[d];
        auto it = std::find_if(ranges.begin(), ranges.end(), [&](const Range& r) { return r.dim == dim && same({r.outer}, {outer}); });
        if (it == ranges.end()) {
          ranges.push_back({outer, dim, lo, hi});
        } else {
          it->lo = std::min(it->lo, lo);
          it->hi = std::max(it->hi, hi);
        }
      }
    for (const Range& r : ranges) {
      const Affine index = r.outer + Affine(r.lo);
      const std::int64_t bound = r.dim - (r.hi - r.lo);
      if (!may_lie_within(index, bound)) return false;
      guard.index.push_back(index);
      guard.bounds.push_back(bound);
    }
    return !ranges.empty();
  }
  // Whether `index` takes a value in [0, bound) for some values of its variables: tried value by
  // value for one variable, by its range for more.
  static bool may_lie_within(const Affine& index, std::int64_t bound) {
    if (bound <= 0) return false;
    for (const auto& term : index.terms)
      if (term.first->dynamic()) return true;
    if (index.terms.size() == 1) {
      for (std::int64_t v = 0; v < index.terms[0].first->extent; ++v) {
        const std::int64_t at = index.offset + index.terms[0].second * v;
        if (at >= 0 && at < bound) return true;
      }
      return false;
    }
    std::int64_t least = index.offset;
    for (const auto& term : index.terms) least += std::min<std::int64_t>(0, term.second * (term.first->extent - 1));
    return least < bound && max_value(index) >= 0;
  }
  static void collect_checked_loads(const Expr& e, std::vector<const ExprNode*>& out) {
    if (!e) return;
    if (e->op == Op::Load && e->checked) out.push_back(e.get());
    for (const Expr& a : e->args) collect_checked_loads(a, out);
  }
  static Expr without_bounds_checks(const Expr& e) {
    auto out = std::make_shared<ExprNode>(*e);
    out->checked = false;
    out->may_leave.clear();
    for (Expr& a : out->args) a = without_bounds_checks(a);
    return out;
  }
  // The largest value `a` takes over its variables' extents.
  static std::int64_t max_value(const Affine& a) {
    std::int64_t m = a.offset;
    for (const auto& term : a.terms) m += std::max<std::int64_t>(0, term.second * (term.first->extent - 1));
    return m;
  }
  static Affine substitute(const Affine& a, const std::map<const VarNode*, Affine>& with) {
    Affine out(a.offset);
    for (const auto& term : a.terms) {
      const auto it = with.find(term.first.get());
      out = out + (it == with.end() ? Affine(term.first) : it->second) * term.second;
    }
    return out;
  }
  static Expr substitute(const Expr& e, const std::map<const VarNode*, Affine>& with) {
    auto out = std::make_shared<ExprNode>(*e);
    for (Affine& a : out->index) a = substitute(a, with);
    for (Expr& arg : out->args) arg = substitute(arg, with);
    return out;
  }

  static bool same(const std::vector<Affine>& a, const std::vector<Affine>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t d = 0; d < a.size(); ++d) {
      if (a[d].offset != b[d].offset || a[d].terms.size() != b[d].terms.size()) return false;
      for (const auto& t : a[d].terms)
        if (b[d].coefficient(t.first.get()) != t.second) return false;
    }
    return true;
  }
  std::size_t loop_position(const VarNode* v) const {
    for (std::size_t i = 0; i < loops_.size(); ++i)
      if (loops_[i].var.get() == v) return i;
    throw std::invalid_argument(c_.name + ": '" + v->name + "' is not a loop");
  }

  // The innermost part: an element-wise store, or the reduction with its register tile. A CPU
  // tile whose reads all lie inside their buffers (a padded conv's pixels away from the border:
  // most of them) takes a copy of the reduction without the per-read checks.
  StmtPtr section(const Extents& extents) {
    if (first_reduction_ == loops_.size())
      return nest(first_reduction_, loops_.size(), extents,
                  [this](const Extents&) { return output_store(rewrite(c_.body, nullptr, true)); });
    StmtPtr checked = reduction_section(extents, false);
    if (block_threads_ || whole_tiles_) return checked;
    std::vector<Var> local;
    for (std::size_t i = first_reduction_; i < loops_.size(); ++i) local.push_back(loops_[i].var);
    auto inside = std::make_shared<Stmt>();
    inside->kind = StmtKind::Guard;
    if (!interior_condition(rewrite(c_.body, nullptr, true), local, *inside)) return checked;
    inside->body = {reduction_section(extents, true), checked};
    return inside;
  }
  StmtPtr reduction_section(const Extents& extents, bool unchecked) {
    auto tile = std::make_shared<BufferNode>();
    tile->name = acc_;
    tile->registers = true;
    tile->vectors = loops_.back().kind == LoopKind::Vectorized;
    std::vector<Affine> at;
    for (std::size_t i = first_tile_; i < loops_.size(); ++i) {
      tile->dims.push_back(loops_[i].var->extent);
      at.push_back(Affine(loops_[i].var));
    }
    const Buffer acc_buffer = tile;
    const Expr sum = load(acc_buffer, at);
    auto alloc = std::make_shared<Stmt>();
    alloc->kind = StmtKind::Alloc;
    alloc->buffer = acc_buffer;
    const std::size_t n = loops_.size();
    auto tile_nest = [&](const Extents& e, Expr value, bool to_output) {
      return nest(first_tile_, n, e, [&](const Extents&) {
        return to_output ? output_store(value) : store(acc_buffer, at, value);
      });
    };
    StmtPtr start = tile_nest(extents, constant(reducer_identity(c_.reducer)), false);
    if (StmtPtr fetch = epilogue_prefetch(extents)) start = block({std::move(fetch), start});
    StmtPtr finish = tile_nest(extents, rewrite(c_.epilogue, sum), true);
    if (outer_reduction_ != kNone) {
      // The outer reduction's first block starts from the identity and each later one from the
      // partial result the block before it stored; only the last one applies the epilogue.
      const Var& outer = loops_[outer_reduction_].var;
      const std::int64_t blocks = extent(outer.get(), extents);
      start = on_outer_block(outer, 1, start, tile_nest(extents, load(c_.output, output_index()), false));
      if (blocks > 1) finish = on_outer_block(outer, blocks - 1, tile_nest(extents, sum, true), finish);
    }
    return block({alloc, start,
                  nest(first_reduction_, first_tile_, extents,
                       [&](const Extents& e) {
                         const Expr term = rewrite(c_.body, nullptr, true);
                         StmtPtr step = tile_nest(e, reducer_step(c_.reducer, sum, unchecked ? without_bounds_checks(term) : term), false);
                         if (prefetches_.empty()) return step;
                         std::vector<StmtPtr> steps = prefetches_;
                         steps.push_back(std::move(step));
                         return block(std::move(steps));
                       }),
                  finish});
  }
  // Schedule::prefetch_epilogue: at the top of a register tile, for each epilogue read of such an
  // input, one PrefetchLines per point of the tile's unrolled loops; the vectorized loop (the last,
  // walking the input's last dimension contiguously) is the run of elements each one covers.
  StmtPtr epilogue_prefetch(const Extents& extents) {
    std::vector<StmtPtr> out;
    const std::size_t n = loops_.size();
    const bool vectorized = n > first_tile_ && loops_.back().kind == LoopKind::Vectorized;
    const VarNode* run = vectorized ? loops_.back().var.get() : nullptr;
    for (const Buffer& b : s_.epilogue_prefetches()) {
      std::vector<const ExprNode*> reads;
      loads_of(c_.epilogue, b.get(), reads);
      for (const ExprNode* read : reads) {
        std::vector<Affine> index;
        for (std::size_t d = 0; d < read->index.size(); ++d) {
          const Affine a = rewrite(read->index[d]);
          const std::int64_t along = run ? a.coefficient(run) : 0;
          if (along != 0 && (along != 1 || d + 1 != read->index.size()))
            throw std::invalid_argument(c_.name + ": prefetch_epilogue '" + b->name + "': the vectorized loop '" + run->name +
                                        "' must walk its last dimension contiguously");
          Affine start(a.offset);
          for (const auto& t : a.terms)
            if (t.first.get() != run) start.terms.push_back(t);
          index.push_back(std::move(start));
        }
        out.push_back(nest(first_tile_, vectorized ? n - 1 : n, extents, [&](const Extents& e) {
          auto fetch = std::make_shared<Stmt>();
          fetch->kind = StmtKind::PrefetchLines;
          fetch->buffer = b;
          fetch->index = index;
          fetch->extent = run ? extent(run, e) : 1;
          return fetch;
        }));
      }
    }
    return out.empty() ? nullptr : block(std::move(out));
  }

  // outer < below ? before : after.
  static StmtPtr on_outer_block(const Var& outer, std::int64_t below, StmtPtr before, StmtPtr after) {
    auto branch = std::make_shared<Stmt>();
    branch->kind = StmtKind::Tail;
    branch->var = outer;
    branch->full = below;
    branch->body = {std::move(before), std::move(after)};
    return branch;
  }

  void check_rules() {
    const std::string& name = c_.name;
    // A block's threads share a staged tile: they copy it between barriers, which all of them must
    // meet. A CPU thread copies its own tile and needs neither.
    for (const Loop& l : loops_) block_threads_ = block_threads_ || l.kind == LoopKind::GpuThread;
    whole_tiles_ = !s_.stages().empty() && block_threads_;
    if (!s_.stages().empty() && !c_.dynamic().empty())
      throw std::invalid_argument(name + ": a schedule with staged inputs takes fixed extents");
    first_reduction_ = loops_.size();
    for (std::size_t i = 0; i < loops_.size(); ++i)
      if (loops_[i].reduction) {
        first_reduction_ = i;
        break;
      }
    first_tile_ = first_reduction_;
    while (first_tile_ < loops_.size() && loops_[first_tile_].reduction) ++first_tile_;
    std::size_t inner = first_tile_;
    while (inner < loops_.size() && !loops_[inner].reduction) ++inner;
    if (inner < loops_.size()) check_outer_reduction(inner);
    for (std::size_t i = first_tile_; i < loops_.size(); ++i) {
      if (loops_[i].reduction)
        throw std::invalid_argument(name + ": reduction loop '" + loops_[i].var->name +
                                    "' lies inside the register tile; reduction loops must be contiguous");
      if (loops_[i].kind == LoopKind::GpuBlock || loops_[i].kind == LoopKind::GpuThread)
        throw std::invalid_argument(name + ": '" + loops_[i].var->name +
                                    "' is bound to CUDA blocks or threads but lies inside a reduction");
      if (loops_[i].kind != LoopKind::Unrolled && loops_[i].kind != LoopKind::Vectorized)
        throw std::invalid_argument(name + ": '" + loops_[i].var->name +
                                    "' is in the register tile (inside the reductions) but neither unrolled nor vectorized");
    }
    int parallel = 0;
    for (std::size_t i = 0; i < loops_.size(); ++i) {
      const Loop& l = loops_[i];
      if (l.kind == LoopKind::Vectorized && i + 1 != loops_.size())
        throw std::invalid_argument(name + ": only the innermost loop may be vectorized, not '" + l.var->name + "'");
      if (l.kind == LoopKind::Vectorized && l.reduction)
        throw std::invalid_argument(name + ": reduction loop '" + l.var->name + "' cannot be vectorized");
      if (l.kind == LoopKind::Parallel && (++parallel > 1 || i >= first_reduction_))
        throw std::invalid_argument(name + ": one parallel loop, outside the reductions ('" + l.var->name + "')");
      const bool gpu = l.kind == LoopKind::GpuBlock || l.kind == LoopKind::GpuThread;
      if (gpu && (i >= first_reduction_ || l.var->dynamic()))
        throw std::invalid_argument(name + ": '" + l.var->name + "' is bound to CUDA " +
                                    (l.kind == LoopKind::GpuBlock ? "blocks" : "threads") +
                                    " but lies inside a reduction or has a dynamic extent");
      if ((l.kind == LoopKind::Unrolled || l.kind == LoopKind::Vectorized) && l.var->dynamic())
        throw std::invalid_argument(name + ": '" + l.var->name + "' has a dynamic extent and cannot be written out");
      if ((l.kind == LoopKind::Unrolled || l.kind == LoopKind::Vectorized) && l.var->extent > 64)
        throw std::invalid_argument(name + ": '" + l.var->name + "' spans " + std::to_string(l.var->extent) +
                                    ", too many iterations to write out (at most 64)");
      if (const SplitRecord* split = s_.split_of(l.var.get()); split != nullptr)
        throw std::invalid_argument(name + ": '" + l.var->name + "' was split but is still a loop");
      if (s_.fuse_of(l.var.get()) && l.kind != LoopKind::Serial && l.kind != LoopKind::Parallel)
        throw std::invalid_argument(name + ": the fused loop '" + l.var->name + "' is serial or parallel");
      // An inner loop ahead of its outer one would not know its remainder's extent.
      for (std::size_t j = i + 1; j < loops_.size(); ++j)
        for (const Var& outer : parts(loops_[j].var)) {
          const SplitRecord* split = s_.split_with_outer(outer.get());
          if (split && split->inner == l.var)
            throw std::invalid_argument(name + ": '" + l.var->name + "' lies outside its outer loop '" + outer->name + "'");
        }
    }
  }

  // Reductions at `inner` after spatial loops that follow the first one: that first one is an
  // outer reduction (Schedule::split's outer part of a reduction variable, alone), whose blocks
  // keep their partial results in the output between them.
  void check_outer_reduction(std::size_t inner) {
    const std::string& name = c_.name;
    const Loop& outer = loops_[first_reduction_];
    const SplitRecord* split = s_.split_with_outer(outer.var.get());
    if (first_tile_ != first_reduction_ + 1 || !split || split->parent->dynamic())
      throw std::invalid_argument(name + ": reduction loops must be contiguous, but for one outer part of a split reduction ('" +
                                  outer.var->name + "' is not one, or is not alone)");
    if (outer.kind != LoopKind::Serial || !s_.stages().empty() || !s_.prefetches().empty() ||
        !s_.epilogue_prefetches().empty() || block_threads_)
      throw std::invalid_argument(name + ": an outer reduction ('" + outer.var->name +
                                  "') is a serial CPU loop, in a schedule that neither stages nor prefetches");
    for (const Loop& l : loops_)
      if (l.kind == LoopKind::GpuBlock || l.kind == LoopKind::GpuThread)
        throw std::invalid_argument(name + ": an outer reduction ('" + outer.var->name + "') in a CUDA kernel");
    for (std::size_t i = first_tile_; i < inner; ++i)
      if (loops_[i].kind != LoopKind::Serial && loops_[i].kind != LoopKind::Parallel)
        throw std::invalid_argument(name + ": '" + loops_[i].var->name + "' lies between two reductions but is neither serial nor parallel");
    outer_reduction_ = first_reduction_;
    first_reduction_ = inner;
    first_tile_ = inner;
    while (first_tile_ < loops_.size() && loops_[first_tile_].reduction) ++first_tile_;
  }

  // The loops a loop stands for: its fused parts, or itself.
  std::vector<Var> parts(const Var& v) const {
    const FuseRecord* f = s_.fuse_of(v.get());
    return f ? f->parts : std::vector<Var>{v};
  }

  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const Schedule& s_;
  const Compute& c_;
  const std::vector<Loop>& loops_;
  const std::string acc_;
  std::size_t first_reduction_ = 0, first_tile_ = 0;
  std::size_t outer_reduction_ = kNone;  // check_outer_reduction
  std::vector<StmtPtr> prefetches_;
  bool block_threads_ = false;  // loops bound to a CUDA block's threads
  bool whole_tiles_ = false;    // spatial remainders computed as whole tiles (stages shared by threads)
  std::map<const VarNode*, std::vector<StmtPtr>> staged_at_;  // the copies at the top of a loop
  std::map<const BufferNode*, StageRead> stage_reads_;
  std::int64_t shared_floats_ = 0;
};

std::string affine_text(const Affine& a) {
  std::string s;
  for (const auto& t : a.terms) s += (s.empty() ? "" : " + ") + (t.second == 1 ? "" : std::to_string(t.second) + "*") + t.first->name;
  if (a.offset != 0 || s.empty()) s += (s.empty() ? "" : " + ") + std::to_string(a.offset);
  return s;
}

void dump_into(const StmtPtr& s, int depth, std::string& out) {
  const std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
  switch (s->kind) {
    case StmtKind::Block:
      for (const StmtPtr& b : s->body) dump_into(b, depth, out);
      return;
    case StmtKind::For: {
      static const char* kinds[] = {"", " parallel", " unrolled", " vectorized", " blocks", " threads"};
      const std::string bound = s->dynamic ? "ceil(" + s->dynamic->name + " / " + std::to_string(s->divisor) + ")"
                                           : std::to_string(s->extent);
      std::string parts;
      for (std::size_t k = 0; k < s->vars.size(); ++k)
        parts += (k ? ", " : " as ") + s->vars[k]->name + " < " + std::to_string(s->bounds[k]);
      out += pad + "for " + s->var->name + " < " + bound + kinds[static_cast<int>(s->loop)] + parts + "\n";
      dump_into(s->body[0], depth + 1, out);
      return;
    }
    case StmtKind::Tail:
      if (s->dynamic) {
        const std::string n = s->dynamic->name, f = std::to_string(s->divisor);
        out += pad + "if " + s->var->name + " < " + n + " / " + f + "\n";
        dump_into(s->body[0], depth + 1, out);
        for (std::size_t r = 1; r < s->body.size(); ++r) {
          out += pad + "else if " + n + " % " + f + " == " + std::to_string(r) + "\n";
          dump_into(s->body[r], depth + 1, out);
        }
        return;
      }
      out += pad + "if " + s->var->name + " < " + std::to_string(s->full) + "\n";
      dump_into(s->body[0], depth + 1, out);
      out += pad + "else\n";
      dump_into(s->body[1], depth + 1, out);
      return;
    case StmtKind::Alloc: {
      std::string dims;
      for (std::int64_t d : s->buffer->dims) dims += "[" + std::to_string(d) + "]";
      out += pad + "registers " + s->buffer->name + dims + "\n";
      return;
    }
    case StmtKind::Store: out += pad + to_string(load(s->buffer, s->index)) + " = " + to_string(s->value) + "\n"; return;
    case StmtKind::Guard: {
      std::string cond;
      for (std::size_t d = 0; d < s->index.size(); ++d)
        cond += (d ? " && " : "") + affine_text(s->index[d]) + " < " + std::to_string(s->bounds[d]);
      out += pad + "if " + cond + "\n";
      dump_into(s->body[0], depth + 1, out);
      if (s->body.size() > 1) {
        out += pad + "else\n";
        dump_into(s->body[1], depth + 1, out);
      }
      return;
    }
    case StmtKind::Barrier: out += pad + "barrier\n"; return;
    case StmtKind::Prefetch:
      out += pad + "prefetch " + s->buffer->name + "[" + s->var->name + " + 1] at " + affine_text(s->index[0]) + "\n";
      return;
    case StmtKind::PrefetchLines: {
      std::string at;
      for (const Affine& a : s->index) at += "[" + affine_text(a) + "]";
      out += pad + "prefetch " + s->buffer->name + at + " +" + std::to_string(s->extent) + "\n";
      return;
    }
    case StmtKind::Stage: {
      std::string dims;
      for (std::int64_t d : s->buffer->dims) dims += "[" + std::to_string(d) + "]";
      out += pad + "shared " + s->buffer->name + dims + " = " + (s->value ? "computed " : "") + to_string(load(s->source, s->index)) +
             " + t\n";
      if (!s->body.empty()) dump_into(s->body[0], depth + 1, out);
      return;
    }
  }
}

}  // namespace

LoweredKernel lower(const Schedule& schedule) { return Lowering(schedule).run(); }

namespace {

// Loads and stores of a kernel's intermediates moved to their thread-local arrays: the first
// index (the shared loop's variable) dropped.
struct LocalRewrite {
  std::map<const BufferNode*, Buffer> locals;

  static std::vector<Affine> inner(const std::vector<Affine>& index) {
    std::vector<Affine> out(index.begin() + 1, index.end());
    if (out.empty()) out.emplace_back(0);
    return out;
  }
  Expr expr(const Expr& e) const {
    auto out = std::make_shared<ExprNode>(*e);
    if (e->op == Op::Load) {
      const auto local = locals.find(e->buffer.get());
      if (local != locals.end()) {
        out->buffer = local->second;
        out->index = inner(e->index);
        if (!out->may_leave.empty()) {
          out->may_leave.erase(out->may_leave.begin());
          if (out->may_leave.empty()) out->may_leave.push_back(false);
        }
      }
    }
    for (Expr& a : out->args) a = expr(a);
    return out;
  }
  StmtPtr stmt(const StmtPtr& s) const {
    auto out = std::make_shared<Stmt>(*s);
    if (s->value) out->value = expr(s->value);
    if (s->kind == StmtKind::Store) {
      const auto local = locals.find(s->buffer.get());
      if (local != locals.end()) {
        out->buffer = local->second;
        out->index = inner(s->index);
      }
    }
    for (StmtPtr& b : out->body) b = stmt(b);
    return out;
  }
};

bool is_exactly(const Affine& a, const Var& v) {
  return a.offset == 0 && a.terms.size() == 1 && a.terms[0].first == v && a.terms[0].second == 1;
}

}  // namespace

LoweredKernel lower(const std::vector<Schedule>& stages) {
  if (stages.empty()) throw std::invalid_argument("a kernel of no computes");
  if (stages.size() == 1) return lower(stages.front());
  const std::string name = stages.front().compute().name + "+" + std::to_string(stages.size() - 1);
  const Loop& first = stages.front().loops().front();
  const Var shared = first.var;
  LocalRewrite rewrite;
  std::vector<StmtPtr> allocs;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const Schedule& s = stages[k];
    const Compute& c = s.compute();
    if (s.loops().empty() || s.loops().front().var != shared || s.loops().front().kind != first.kind ||
        s.loops().front().reduction)
      throw std::invalid_argument(name + ": stage '" + c.name + "' does not start with the loop over '" + shared->name +
                                  "' the stages share (unsplit, of one kind, not a reduction)");
    if (!s.packs().empty() || !s.stages().empty())
      throw std::invalid_argument(name + ": stage '" + c.name + "' packs or stages an input; a kernel of several computes does neither");
    for (const Buffer& in : c.inputs)
      for (std::size_t later = k; later < stages.size(); ++later)
        if (in == stages[later].compute().output)
          throw std::invalid_argument(name + ": stage '" + c.name + "' reads '" + in->name + "', which stage '" +
                                      stages[later].compute().name + "' writes only then");
    if (k + 1 == stages.size()) break;
    // An intermediate: each iteration of the shared loop writes and reads only its own part.
    const Buffer& out = c.output;
    if (c.axes.front() != shared)
      throw std::invalid_argument(name + ": intermediate '" + out->name + "' is not indexed first by '" + shared->name + "'");
    bool read = false;
    for (std::size_t later = k + 1; later < stages.size(); ++later) {
      const Compute& l = stages[later].compute();
      std::vector<const ExprNode*> reads;
      loads_of(l.body, out.get(), reads);
      loads_of(l.epilogue, out.get(), reads);
      for (const ExprNode* r : reads)
        if (!is_exactly(r->index.front(), shared))
          throw std::invalid_argument(name + ": stage '" + l.name + "' reads intermediate '" + out->name +
                                      "' other than at the shared loop's own '" + shared->name + "'");
      read = read || !reads.empty();
    }
    if (!read) throw std::invalid_argument(name + ": intermediate '" + out->name + "' is never read");
    auto local = std::make_shared<BufferNode>();
    local->name = "l" + std::to_string(k) + "_";
    for (char ch : out->name) local->name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    local->dims.assign(out->dims.begin() + 1, out->dims.end());
    if (local->dims.empty()) local->dims.push_back(1);
    std::int64_t floats = 1;
    for (std::int64_t d : local->dims) floats *= d;
    if (floats > kMaxLocalFloats)
      throw std::invalid_argument(name + ": intermediate '" + out->name + "' takes " + std::to_string(floats) +
                                  " floats an iteration, over " + std::to_string(kMaxLocalFloats));
    rewrite.locals[out.get()] = local;
    auto alloc = std::make_shared<Stmt>();
    alloc->kind = StmtKind::Alloc;
    alloc->buffer = local;
    allocs.push_back(alloc);
  }
  LoweredKernel k;
  k.name = name;
  std::vector<StmtPtr> body = allocs;
  StmtPtr loop;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const LoweredKernel part = Lowering(stages[i], "acc" + std::to_string(i)).run();
    k.schedule += (i ? "; " : "") + part.schedule;
    for (const Buffer& b : part.args)
      if (!rewrite.locals.count(b.get()) && b != part.args.back() && std::find(k.args.begin(), k.args.end(), b) == k.args.end())
        k.args.push_back(b);
    for (const Var& v : part.dynamic)
      if (std::find(k.dynamic.begin(), k.dynamic.end(), v) == k.dynamic.end()) k.dynamic.push_back(v);
    if (!loop) loop = part.body;
    body.push_back(rewrite.stmt(part.body->body[0]));
  }
  k.args.push_back(stages.back().compute().output);
  auto shared_loop = std::make_shared<Stmt>(*loop);
  shared_loop->body = {block(std::move(body))};
  k.body = shared_loop;
  return k;
}

std::string dump(const StmtPtr& s) {
  std::string out;
  dump_into(s, 0, out);
  return out;
}

}  // namespace wpk::codegen
