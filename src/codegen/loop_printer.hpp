#pragma once
// The statement printer the C++ and CUDA printers share (cpp_printer.hpp, cuda_printer.hpp): loop
// IR to the body of a kernel in a C-like dialect. Internal to src/codegen.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "codegen/loop_ir.hpp"

namespace wpk::codegen {

// What differs between the languages the loops are printed in.
struct Dialect {
  std::string name;
  int lanes = 1;                 // floats per vector (vector helpers v_* when above 1)
  std::string int64, uint64;     // index types
  std::string math_prefix, math_suffix;  // std::exp(x) or expf(x)
  bool openmp = false;           // parallel loops as OpenMP
  bool gpu = false;              // loops bound to blocks and threads
  static Dialect cpp(int lanes) { return {"C++", lanes, "std::int64_t", "std::uint64_t", "std::", "", true, false}; }
  // 32-bit indices where every buffer has fewer than 2^31 elements: a GPU does 64-bit integer
  // arithmetic in several instructions.
  static Dialect cuda(bool narrow_indices) {
    return {"CUDA", 1, narrow_indices ? "int" : "long long", narrow_indices ? "unsigned" : "unsigned long long", "", "f", false, true};
  }
};

inline std::string float_literal(float v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
  return std::string("(") + buf + ")";
}

// An affine index evaluated where some variables are constants: the constant part, runtime
// terms by C name, and the coefficient of the vector variable.
struct Evaluated {
  std::int64_t constant = 0;
  std::map<std::string, std::int64_t> terms;
  std::int64_t vector_coefficient = 0;
  std::string text() const {
    std::string s = std::to_string(constant);
    for (const auto& t : terms)
      if (t.second != 0) s += " + " + std::to_string(t.second) + " * " + t.first;
    return s;
  }
};

// The element operations one pass through `s` performs (stores and staged elements, each times
// its enclosing loops' trips), a loop over a dynamic extent counted as one trip: a measure of
// how long the statement runs on one thread, saturating rather than overflowing.
inline std::int64_t element_operations(const StmtPtr& s) {
  constexpr std::int64_t kMost = std::int64_t(1) << 60;
  const auto times = [&](std::int64_t a, std::int64_t b) { return a != 0 && b > kMost / a ? kMost : a * b; };
  std::int64_t n = 0;
  switch (s->kind) {
    case StmtKind::Store: return 1;
    case StmtKind::Stage: {
      n = 1;
      for (std::int64_t d : s->buffer->dims) n = times(n, d);
      break;
    }
    case StmtKind::For: return times(s->dynamic ? 1 : s->extent, s->body.empty() ? 0 : element_operations(s->body[0]));
    case StmtKind::Tail:
    case StmtKind::Guard: {
      for (const StmtPtr& b : s->body) n = std::max(n, element_operations(b));
      return n;
    }
    default: break;
  }
  for (const StmtPtr& b : s->body) n = std::min(kMost, n + element_operations(b));
  return n;
}

// The most element operations of a parallel loop that also gets a path outside a parallel region:
// a few microseconds of one core's vector work, about the parallel-region cost under which the
// cost model (search/cost_model.hpp) gives a node one thread.
constexpr std::int64_t kSerialPathOperations = std::int64_t(1) << 18;

class LoopPrinter {
 public:
  LoopPrinter(const LoweredKernel& k, Dialect dialect) : k_(k), d_(std::move(dialect)), lanes_(d_.lanes) {
    for (std::size_t i = 0; i < k.args.size(); ++i) arg_names_[k.args[i].get()] = "a" + std::to_string(i);
    for (const Buffer& b : k.shared) arg_names_[b.get()] = "s_" + b->name;
  }

  std::string body() {
    out_.clear();
    statement(k_.body, 1);
    return out_;
  }

 private:
  struct VectorAt {
    const VarNode* var = nullptr;
    std::int64_t start = 0;
    int lanes = 0;
  };

  void line(int depth, const std::string& text) { out_ += std::string(static_cast<std::size_t>(depth) * 2, ' ') + text + "\n"; }

  std::string c_name(const VarNode* v) {
    auto it = var_names_.find(v);
    if (it != var_names_.end()) return it->second;
    std::string safe;
    for (char c : v->name) safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    const std::string name = "v" + std::to_string(var_names_.size()) + "_" + safe;
    var_names_[v] = name;
    return name;
  }

  Evaluated evaluate(const Affine& a, std::int64_t scale, Evaluated e) {
    e.constant += a.offset * scale;
    for (const auto& t : a.terms) {
      const VarNode* v = t.first.get();
      const std::int64_t c = t.second * scale;
      if (vector_.var == v) {
        e.constant += c * vector_.start;
        e.vector_coefficient += c;
      } else if (auto known = constants_.find(v); known != constants_.end()) {
        e.constant += c * known->second;
      } else {
        e.terms[c_name(v)] += c;
      }
    }
    return e;
  }

  Evaluated flat(const Buffer& b, const std::vector<Affine>& index) {
    Evaluated e;
    std::int64_t stride = 1;
    for (std::size_t d = b->dims.size(); d-- > 0;) {
      e = evaluate(index[d], stride, e);
      stride *= b->dims[d];
    }
    return e;
  }

  bool vector_mode() const { return vector_.var != nullptr; }

  // For a checked load: the condition that its index lies inside the buffer, over the
  // dimensions whose index can leave it (ExprNode::may_leave); "" when none can. The condition is
  // one for all lanes: a dimension the vectorized loop walks is the last one, contiguously, and
  // leaves only past its end, and its lanes are counted apart (`lanes_inside`: how many lie inside).
  std::string bounds_check(const ExprNode& e, std::string* lanes_inside = nullptr) {
    std::string all;
    for (std::size_t d = 0; d < e.index.size(); ++d) {
      if (d >= e.may_leave.size() || !e.may_leave[d]) continue;
      const Evaluated at = evaluate(e.index[d], 1, Evaluated{});
      if (at.vector_coefficient != 0) {
        std::int64_t least = e.index[d].offset;
        for (const auto& t : e.index[d].terms) least += std::min<std::int64_t>(0, t.second * (t.first->extent - 1));
        if (!lanes_inside || d + 1 != e.index.size() || at.vector_coefficient != 1 || least < 0)
          throw std::invalid_argument(k_.name + ": the vectorized loop '" + vector_.var->name + "' walks dimension " +
                                      std::to_string(d) + " of '" + e.buffer->name + "', which it may leave other than past its end");
        *lanes_inside = std::to_string(e.buffer->dims[d]) + " - (" + at.text() + ")";
        continue;
      }
      all += std::string(all.empty() ? "" : " && ") + "(" + d_.uint64 + ")(" + at.text() + ") < " +
             std::to_string(e.buffer->dims[d]) + "u";
    }
    return all;
  }

  // A register buffer's element (or vector of elements) as a variable name.
  std::string register_name(const Buffer& b, const std::vector<Affine>& index) {
    std::string name = "r_" + b->name;
    for (std::size_t d = 0; d < index.size(); ++d) {
      const Evaluated e = evaluate(index[d], 1, Evaluated{});
      const bool last = d + 1 == index.size();
      if (!e.terms.empty() || (e.vector_coefficient != 0 && !(last && e.vector_coefficient == 1)))
        throw std::invalid_argument(k_.name + ": register buffer '" + b->name + "' indexed by a loop that is not written out");
      name += "_" + std::to_string(last && in_vectors(*b) ? e.constant / lanes_ : e.constant);
    }
    return name;
  }

  std::string expr(const Expr& e) {
    const bool vec = vector_mode();
    switch (e->op) {
      case Op::Const: return vec ? "v_set1(" + float_literal(e->value) + ")" : float_literal(e->value);
      case Op::Acc: throw std::invalid_argument(k_.name + ": acc() left after lowering");
      case Op::Load: {
        if (e->buffer->registers) return register_name(e->buffer, e->index);
        const Evaluated at = flat(e->buffer, e->index);
        const std::string p = arg_names_.at(e->buffer.get()) + " + (" + at.text() + ")";
        std::string value;
        if (!vec) value = "*(" + p + ")";
        else if (at.vector_coefficient == 0) value = "v_set1(*(" + p + "))";
        else if (at.vector_coefficient == 1)
          value = vector_.lanes == lanes_ ? "v_load(" + p + ")" : "v_load_n(" + p + ", " + std::to_string(vector_.lanes) + ")";
        else
          value = "v_gather_n(" + p + ", " + std::to_string(at.vector_coefficient) + ", " + std::to_string(vector_.lanes) + ")";
        std::string lanes_inside;
        const std::string inside = e->checked ? bounds_check(*e, vec && at.vector_coefficient == 1 ? &lanes_inside : nullptr) : "";
        const std::string outside = float_literal(e->outside);
        if (!lanes_inside.empty()) {
          // The lanes past the buffer's end read `outside`, and no memory.
          if (vector_.lanes != lanes_) {
            const std::string n = std::to_string(vector_.lanes);
            lanes_inside = "((" + lanes_inside + ") < " + n + " ? (" + lanes_inside + ") : " + n + ")";
          }
          value = "v_load_or(" + p + ", " + lanes_inside + ", " + outside + ")";
        }
        if (inside.empty()) return value;
        return "(" + inside + " ? " + value + " : " + (vec ? "v_set1(" + outside + ")" : outside) + ")";
      }
      default: break;
    }
    if (is_unary(e->op)) {
      const std::string a = expr(e->args[0]);
      if (vec) return std::string("v_") + op_name(e->op) + "(" + a + ")";
      switch (e->op) {
        case Op::Neg: return "(-" + a + ")";
        case Op::Abs: return d_.math_prefix + "fabs" + d_.math_suffix + "(" + a + ")";
        case Op::Sqrt: return d_.math_prefix + "sqrt" + d_.math_suffix + "(" + a + ")";
        case Op::Exp: return d_.math_prefix + "exp" + d_.math_suffix + "(" + a + ")";
        case Op::Tanh: return d_.math_prefix + "tanh" + d_.math_suffix + "(" + a + ")";
        default: return std::string("s_") + op_name(e->op) + "(" + a + ")";
      }
    }
    if (vec && e->op == Op::Add) {
      for (int m = 0; m < 2; ++m)
        if (e->args[m]->op == Op::Mul)
          return "v_fma(" + expr(e->args[m]->args[0]) + ", " + expr(e->args[m]->args[1]) + ", " + expr(e->args[1 - m]) + ")";
    }
    const std::string a = expr(e->args[0]), b = expr(e->args[1]);
    if (vec) return std::string("v_") + op_name(e->op) + "(" + a + ", " + b + ")";
    switch (e->op) {
      case Op::Add: return "(" + a + " + " + b + ")";
      case Op::Sub: return "(" + a + " - " + b + ")";
      case Op::Mul: return "(" + a + " * " + b + ")";
      case Op::Div: return "(" + a + " / " + b + ")";
      default: return std::string("s_") + op_name(e->op) + "(" + a + ", " + b + ")";
    }
  }

  void store(const StmtPtr& s, int depth) {
    const std::string value = expr(s->value);
    if (s->buffer->registers) {
      line(depth, register_name(s->buffer, s->index) + " = " + value + ";");
      return;
    }
    const Evaluated at = flat(s->buffer, s->index);
    const std::string p = arg_names_.at(s->buffer.get()) + " + (" + at.text() + ")";
    if (!vector_mode()) {
      line(depth, "*(" + p + ") = " + value + ";");
      return;
    }
    if (at.vector_coefficient != 1)
      throw std::invalid_argument(k_.name + ": the vectorized loop '" + vector_.var->name +
                                  "' does not walk the output '" + s->buffer->name + "' contiguously");
    line(depth, vector_.lanes == lanes_ ? "v_store(" + p + ", " + value + ");"
                                        : "v_store_n(" + p + ", " + value + ", " + std::to_string(vector_.lanes) + ");");
  }

  bool in_vectors(const BufferNode& b) const { return b.vectors && lanes_ > 1; }

  void alloc(const StmtPtr& s, int depth) {
    const std::vector<std::int64_t>& dims = s->buffer->dims;
    std::vector<std::int64_t> counts = dims;
    if (!s->buffer->registers) {  // an intermediate's part, on the thread's stack
      std::int64_t floats = 1;
      for (std::int64_t c : counts) floats *= c;
      if (d_.gpu) throw std::invalid_argument(k_.name + ": an intermediate array in a " + d_.name + " kernel");
      arg_names_[s->buffer.get()] = s->buffer->name;
      line(depth, "alignas(64) float " + s->buffer->name + "[" + std::to_string(floats) + "];");
      return;
    }
    const bool vectors = in_vectors(*s->buffer);
    if (!counts.empty() && vectors) counts.back() = (counts.back() + lanes_ - 1) / lanes_;
    std::int64_t total = 1;
    for (std::int64_t c : counts) total *= c;
    if (total > 1024) throw std::invalid_argument(k_.name + ": a register tile of " + std::to_string(total) + " variables");
    const std::string type = vectors ? "V" : "float";
    for (std::int64_t flat_index = 0; flat_index < total; ++flat_index) {
      std::string name = "r_" + s->buffer->name;
      std::int64_t rest = flat_index, stride = total;
      for (std::int64_t c : counts) {
        stride /= c;
        name += "_" + std::to_string(rest / stride);
        rest %= stride;
      }
      line(depth, type + " " + name + ";");
    }
  }

  void statement(const StmtPtr& s, int depth) {
    switch (s->kind) {
      case StmtKind::Block:
        for (const StmtPtr& b : s->body) statement(b, depth);
        return;
      case StmtKind::Alloc: alloc(s, depth); return;
      case StmtKind::Store: store(s, depth); return;
      case StmtKind::Tail: {
        const VarNode* v = s->var.get();
        if (s->dynamic) {
          const std::string n = dynamic_name(s->dynamic.get()), f = std::to_string(s->divisor);
          line(depth, "if (" + c_name(v) + " < " + n + " / " + f + ") {");
          statement(s->body[0], depth + 1);
          line(depth, "} else {");
          line(depth + 1, "switch (" + n + " % " + f + ") {");
          for (std::size_t r = 1; r < s->body.size(); ++r) {
            line(depth + 2, "case " + std::to_string(r) + ": {");
            statement(s->body[r], depth + 3);
            line(depth + 3, "break;");
            line(depth + 2, "}");
          }
          line(depth + 2, "default: break;");
          line(depth + 1, "}");
          line(depth, "}");
          return;
        }
        if (auto known = constants_.find(v); known != constants_.end()) {
          statement(s->body[known->second < s->full ? 0 : 1], depth);
          return;
        }
        line(depth, "if (" + c_name(v) + " < " + std::to_string(s->full) + ") {");
        statement(s->body[0], depth + 1);
        line(depth, "} else {");
        statement(s->body[1], depth + 1);
        line(depth, "}");
        return;
      }
      case StmtKind::For: loop(s, depth); return;
      case StmtKind::Guard: guard(s, depth); return;
      case StmtKind::Barrier:
        if (!d_.gpu) throw std::invalid_argument(k_.name + ": a barrier in a " + d_.name + " kernel");
        line(depth, "__syncthreads();");
        return;
      case StmtKind::Stage: stage(s, depth); return;
      case StmtKind::Prefetch: prefetch(s, depth); return;
      case StmtKind::PrefetchLines: prefetch_lines(s, depth); return;
    }
  }

  // Schedule::prefetch_epilogue on the CPU: each line the run of elements touches, into L1 (the
  // run need not start on a line: its last element is asked for too).
  void prefetch_lines(const StmtPtr& s, int depth) {
    if (d_.gpu) return;
    const std::string at = arg_names_.at(s->buffer.get()) + " + (" + flat(s->buffer, s->index).text() + ")";
    std::int64_t last = 0;
    for (std::int64_t k = 0; k < s->extent; k += 16) {
      line(depth, "__builtin_prefetch(" + at + " + " + std::to_string(k) + ", 0, 3);");
      last = k;
    }
    if (s->extent - 1 > last) line(depth, "__builtin_prefetch(" + at + " + " + std::to_string(s->extent - 1) + ", 0, 3);");
  }

  // Schedule::prefetch_next on the CPU: the lines of the next panel at this step's fraction of it,
  // into L2 (the printed kernels' compilers take __builtin_prefetch; locality 2 is the L2 hint).
  void prefetch(const StmtPtr& s, int depth) {
    if (d_.gpu) return;
    std::int64_t panel = 1;
    for (std::size_t d = 1; d < s->buffer->dims.size(); ++d) panel *= s->buffer->dims[d];
    const std::int64_t lines = (panel + 15) / 16;  // of 64 bytes
    const std::string next = "(" + evaluate(Affine(s->var), 1, Evaluated{}).text() + " + 1)";
    const std::string count = "(" + evaluate(s->index[0], 1, Evaluated{}).text() + ")", l = std::to_string(lines);
    const std::string arg = arg_names_.at(s->buffer.get()) + " + " + next + " * " + std::to_string(panel);
    const auto fetch = [&](int at_depth, const std::string& at_line) {
      line(at_depth, "__builtin_prefetch(" + arg + " + (" + at_line + " < " + l + " ? " + at_line + " : " + std::to_string(lines - 1) +
                         ") * 16, 0, 2);");
    };
    line(depth, "if (" + next + " < " + std::to_string(s->extent) + ") {");
    if (s->dynamic) {
      // The steps known at run time: each step's share of the lines in 2^-20ths, which the
      // compiler computes once outside the loops.
      const std::string trips = std::to_string(s->full) + " * " + dynamic_trips(*s);
      fetch(depth + 1, "((" + count + " * ((" + d_.int64 + "(" + l + ") << 20) / (" + trips + "))) >> 20)");
    } else if (s->full >= 2 * lines) {
      // More steps than lines: a line every `every` steps (a power of two, so a mask decides).
      std::int64_t every = 1;
      while (every * 2 * lines <= s->full) every *= 2;
      int shift = 0;
      while ((std::int64_t(1) << shift) < every) ++shift;
      line(depth + 1, "if ((" + count + " & " + std::to_string(every - 1) + ") == 0) {");
      fetch(depth + 2, "(" + count + " >> " + std::to_string(shift) + ")");
      line(depth + 1, "}");
    } else {
      // As many lines a step as cover the panel over the steps.
      const std::int64_t per_step = (lines + s->full - 1) / s->full;
      for (std::int64_t k = 0; k < per_step; ++k)
        fetch(depth + 1, "(" + count + " * " + std::to_string(per_step) + " + " + std::to_string(k) + ")");
    }
    line(depth, "}");
  }

  // The points of a whole tile that exist; conditions known here are decided here.
  void guard(const StmtPtr& s, int depth) {
    std::string all;
    for (std::size_t d = 0; d < s->index.size(); ++d) {
      const Evaluated at = evaluate(s->index[d], 1, Evaluated{});
      bool runtime = at.vector_coefficient != 0;
      for (const auto& t : at.terms) runtime = runtime || t.second != 0;
      if (!runtime) {
        if (at.constant < 0 || at.constant >= s->bounds[d]) {
          if (s->body.size() > 1) statement(s->body[1], depth);
          return;
        }
        continue;
      }
      if (vector_mode()) throw std::invalid_argument(k_.name + ": a whole-tile guard inside a vectorized loop");
      all += std::string(all.empty() ? "" : " && ") + "(" + d_.uint64 + ")(" + at.text() + ") < " + std::to_string(s->bounds[d]) + "u";
    }
    if (all.empty()) {
      statement(s->body[0], depth);
      return;
    }
    line(depth, "if (" + all + ") {");
    statement(s->body[0], depth + 1);
    if (s->body.size() > 1) {
      line(depth, "} else {");
      statement(s->body[1], depth + 1);
    }
    line(depth, "}");
  }

  // The block's threads copy a tile together, element e by thread e mod threads; a CPU thread
  // copies its own into an array on its stack, in scope for the rest of the loop's body.
  void stage(const StmtPtr& s, int depth) {
    const Buffer& tile = s->buffer;
    const Buffer& src = s->source;
    std::int64_t total = 1;
    for (std::int64_t d : tile->dims) total *= d;
    const std::string e = "e_" + tile->name;
    if (d_.gpu) {
      line(depth, "for (" + d_.int64 + " " + e + " = threadIdx.x; " + e + " < " + std::to_string(total) + "; " + e + " += " +
                      std::to_string(threads()) + ") {");
    } else {
      line(depth, "alignas(64) float " + arg_names_.at(tile.get()) + "[" + std::to_string(total) + "];");
      if (!s->body.empty()) {
        statement(s->body[0], depth);
        return;
      }
      line(depth, "for (" + d_.int64 + " " + e + " = 0; " + e + " < " + std::to_string(total) + "; ++" + e + ") {");
    }
    std::string inside, flat_index;
    std::int64_t tile_stride = total, src_stride = 1;
    std::vector<std::string> coords(tile->dims.size());
    for (std::size_t d = 0; d < tile->dims.size(); ++d) {
      tile_stride /= tile->dims[d];
      const std::string g = "g" + std::to_string(d) + "_" + tile->name;
      const Evaluated origin = evaluate(s->index[d], 1, Evaluated{});
      line(depth + 1, "const " + d_.int64 + " " + g + " = " + origin.text() + " + (" + e + " / " + std::to_string(tile_stride) + ") % " +
                          std::to_string(tile->dims[d]) + ";");
      coords[d] = g;
      inside += std::string(inside.empty() ? "" : " && ") + "(" + d_.uint64 + ")" + g + " < " + std::to_string(src->dims[d]) + "u";
    }
    for (std::size_t d = src->dims.size(); d-- > 0;) {
      flat_index = std::to_string(src_stride) + " * " + coords[d] + (flat_index.empty() ? "" : " + " + flat_index);
      src_stride *= src->dims[d];
    }
    if (s->value) {
      // A producer's element: its axes are this element's coordinates.
      for (std::size_t d = 0; d < s->vars.size(); ++d) var_names_[s->vars[d].get()] = coords[d];
      line(depth + 1, arg_names_.at(tile.get()) + "[" + e + "] = " + inside + " ? " + expr(s->value) + " : 0.0f;");
      for (const Var& v : s->vars) var_names_.erase(v.get());
    } else {
      line(depth + 1, arg_names_.at(tile.get()) + "[" + e + "] = " + inside + " ? " + arg_names_.at(src.get()) + "[" + flat_index +
                          "] : 0.0f;");
    }
    line(depth, "}");
  }

  void loop(const StmtPtr& s, int depth) {
    const VarNode* v = s->var.get();
    if (s->loop == LoopKind::GpuBlock || s->loop == LoopKind::GpuThread) {
      bound_loop(s, depth);
      return;
    }
    const bool vectorized = s->loop == LoopKind::Vectorized && lanes_ > 1;
    if (vectorized) {
      const VectorAt outer = vector_;
      for (std::int64_t start = 0; start < s->extent; start += lanes_) {
        vector_ = {v, start, static_cast<int>(std::min<std::int64_t>(lanes_, s->extent - start))};
        statement(s->body[0], depth);
      }
      vector_ = outer;
      return;
    }
    if (!s->dynamic && (s->extent == 1 || s->loop == LoopKind::Unrolled || s->loop == LoopKind::Vectorized)) {
      for (std::int64_t i = 0; i < s->extent; ++i) {
        constants_[v] = i;
        for (std::size_t d = 0; d < s->vars.size(); ++d) constants_[s->vars[d].get()] = (i / later_bounds(*s, d)) % s->bounds[d];
        statement(s->body[0], depth);
      }
      constants_.erase(v);
      for (const Var& part : s->vars) constants_.erase(part.get());
      return;
    }
    const std::string name = c_name(v);
    const std::string bound = !s->dynamic ? std::to_string(s->extent) : dynamic_trips(*s);
    const std::string header = "for (" + d_.int64 + " " + name + " = 0; " + name + " < " + bound + "; ++" + name + ") {";
    if (s->loop == LoopKind::Parallel) {
      if (!d_.openmp) throw std::invalid_argument(k_.name + ": a parallel loop ('" + v->name + "') in a " + d_.name + " kernel; bind it to blocks");
      // Entering a parallel region costs about as much as a small node's whole work (~0.2 us
      // with one thread), and the cost model gives small nodes one thread: a small loop also
      // runs outside a region on one thread. Its body is printed for each loop (called from
      // both as a function, it ran a few percent slower inside the region), so only where the
      // loop's work is small enough for one thread to be a likely choice, not to double every
      // kernel's compile time.
      const bool serial_too = element_operations(s) <= kSerialPathOperations;
      if (serial_too) line(depth, "if (threads > 1) {");
      const int inner = depth + (serial_too ? 1 : 0);
      line(inner, "#pragma omp parallel for num_threads(threads) schedule(static)");
      line(inner, header);
      loop_body(*s, inner + 1);
      line(inner, "}");
      if (serial_too) {
        line(depth, "} else {");
        line(depth + 1, header);
        loop_body(*s, depth + 2);
        line(depth + 1, "}");
        line(depth, "}");
      }
      return;
    }
    line(depth, header);
    loop_body(*s, depth + 1);
    line(depth, "}");
  }

  // A loop's body; a fused loop's first sets its parts from the iteration.
  void loop_body(const Stmt& s, int depth) {
    const std::string k = c_name(s.var.get());
    for (std::size_t d = 0; d < s.vars.size(); ++d) {
      std::string value = k;
      if (const std::int64_t stride = later_bounds(s, d); stride > 1) value = "(" + value + " / " + std::to_string(stride) + ")";
      if (d > 0) value += " % " + std::to_string(s.bounds[d]);
      line(depth, "const " + d_.int64 + " " + c_name(s.vars[d].get()) + " = " + value + ";");
    }
    statement(s.body[0], depth);
  }
  static std::int64_t later_bounds(const Stmt& s, std::size_t d) {
    std::int64_t n = 1;
    for (std::size_t e = d + 1; e < s.bounds.size(); ++e) n *= s.bounds[e];
    return n;
  }

  // ceil(dynamic / divisor) of a loop (or a Prefetch walking one) over a dynamic extent.
  std::string dynamic_trips(const Stmt& s) const {
    const std::string n = dynamic_name(s.dynamic.get());
    if (s.divisor == 1) return n;
    return "((" + n + " + " + std::to_string(s.divisor - 1) + ") / " + std::to_string(s.divisor) + ")";
  }

  std::string dynamic_name(const VarNode* v) const {
    for (std::size_t i = 0; i < k_.dynamic.size(); ++i)
      if (k_.dynamic[i].get() == v) return "n" + std::to_string(i);
    throw std::invalid_argument(k_.name + ": '" + v->name + "' is not one of the kernel's dynamic variables");
  }

 public:
  // A CUDA kernel's launch: each bound variable's iterations (the most any of its loops has) and
  // its place in the flattened block or thread index.
  struct Binding {
    std::int64_t extent = 1, stride = 1;
    bool block = false;
  };
  std::int64_t grid() const { return launch(true); }
  std::int64_t threads() const { return launch(false); }

 private:
  std::int64_t launch(bool block) const {
    std::int64_t n = 1;
    for (const auto& b : bindings_)
      if (b.second.block == block) n *= b.second.extent;
    return n;
  }
  void collect_bindings(const StmtPtr& s, std::vector<const VarNode*>& order) {
    if (s->kind == StmtKind::For && (s->loop == LoopKind::GpuBlock || s->loop == LoopKind::GpuThread)) {
      if (!d_.gpu) throw std::invalid_argument(k_.name + ": '" + s->var->name + "' is bound to CUDA blocks or threads; the " + d_.name + " printer runs none");
      auto [it, fresh] = bindings_.try_emplace(s->var.get());
      if (fresh) order.push_back(s->var.get());
      it->second.block = s->loop == LoopKind::GpuBlock;
      it->second.extent = std::max(it->second.extent, s->extent);
    }
    for (const StmtPtr& b : s->body) collect_bindings(b, order);
  }
  // A bound loop: this block's or thread's own iteration, skipped where a remainder has fewer.
  void bound_loop(const StmtPtr& s, int depth) {
    const Binding& b = bindings_.at(s->var.get());
    const std::string name = c_name(s->var.get());
    const std::string index = b.block ? "blockIdx.x" : "threadIdx.x";
    line(depth, "{");
    line(depth + 1, "const " + d_.int64 + " " + name + " = (" + d_.int64 + ")((" + index + " / " + std::to_string(b.stride) +
                        "u) % " + std::to_string(b.extent) + "u);");
    if (s->extent < b.extent) {
      line(depth + 1, "if (" + name + " < " + std::to_string(s->extent) + ") {");
      statement(s->body[0], depth + 2);
      line(depth + 1, "}");
    } else {
      statement(s->body[0], depth + 1);
    }
    line(depth, "}");
  }

 public:
  void prepare() {
    std::vector<const VarNode*> order;
    collect_bindings(k_.body, order);
    // Later variables vary fastest, in blocks as in threads.
    std::int64_t block_stride = 1, thread_stride = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Binding& b = bindings_.at(*it);
      std::int64_t& stride = b.block ? block_stride : thread_stride;
      b.stride = stride;
      stride *= b.extent;
    }
  }

 private:
  const LoweredKernel& k_;
  const Dialect d_;
  const int lanes_;
  std::map<const VarNode*, Binding> bindings_;
  std::map<const BufferNode*, std::string> arg_names_;
  std::map<const VarNode*, std::string> var_names_;
  std::map<const VarNode*, std::int64_t> constants_;
  VectorAt vector_;
  std::string out_;
};

}  // namespace wpk::codegen
