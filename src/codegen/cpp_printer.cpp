#include "codegen/cpp_printer.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>

namespace wpk::codegen {

const char* cpp_prelude(CpuTarget target);

const char* target_name(CpuTarget t) {
  switch (t) {
    case CpuTarget::Avx2: return "avx2";
    case CpuTarget::Avx512: return "avx512";
    case CpuTarget::Scalar: break;
  }
  return "scalar";
}

int vector_lanes(CpuTarget t) { return t == CpuTarget::Avx512 ? 16 : t == CpuTarget::Avx2 ? 8 : 1; }

std::vector<std::string> target_flags(CpuTarget t) {
  std::vector<std::string> flags = {"-fopenmp"};
  if (t == CpuTarget::Avx2) flags.insert(flags.end(), {"-mavx2", "-mfma"});
  if (t == CpuTarget::Avx512) flags.insert(flags.end(), {"-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"});
  return flags;
}

namespace {

std::string float_literal(float v) {
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

class Printer {
 public:
  Printer(const LoweredKernel& k, CpuTarget target) : k_(k), lanes_(vector_lanes(target)) {
    for (std::size_t i = 0; i < k.args.size(); ++i) arg_names_[k.args[i].get()] = "a" + std::to_string(i);
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

  // For a zero_outside load: the condition that its index lies inside the buffer, over the
  // dimensions whose index can leave it (ExprNode::may_leave); "" when none can. The vectorized
  // loop must not walk such a dimension: the condition is one for all lanes.
  std::string bounds_check(const ExprNode& e) {
    std::string all;
    for (std::size_t d = 0; d < e.index.size(); ++d) {
      if (d >= e.may_leave.size() || !e.may_leave[d]) continue;
      const Evaluated at = evaluate(e.index[d], 1, Evaluated{});
      if (at.vector_coefficient != 0)
        throw std::invalid_argument(k_.name + ": the vectorized loop '" + vector_.var->name + "' walks dimension " +
                                    std::to_string(d) + " of '" + e.buffer->name + "', which may leave it");
      all += std::string(all.empty() ? "" : " && ") + "(std::uint64_t)(" + at.text() + ") < " +
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
      name += "_" + std::to_string(last && vectors_in_registers_ ? e.constant / lanes_ : e.constant);
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
        const std::string inside = e->zero_outside ? bounds_check(*e) : "";
        if (inside.empty()) return value;
        return "(" + inside + " ? " + value + " : " + (vec ? "v_set1(0.0f)" : "0.0f") + ")";
      }
      default: break;
    }
    if (is_unary(e->op)) {
      const std::string a = expr(e->args[0]);
      if (vec) return std::string("v_") + op_name(e->op) + "(" + a + ")";
      switch (e->op) {
        case Op::Neg: return "(-" + a + ")";
        case Op::Abs: return "std::fabs(" + a + ")";
        case Op::Sqrt: return "std::sqrt(" + a + ")";
        case Op::Exp: return "std::exp(" + a + ")";
        case Op::Tanh: return "std::tanh(" + a + ")";
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

  void alloc(const StmtPtr& s, int depth) {
    const std::vector<std::int64_t>& dims = s->buffer->dims;
    std::vector<std::int64_t> counts = dims;
    if (!counts.empty() && vectors_in_registers_) counts.back() = (counts.back() + lanes_ - 1) / lanes_;
    std::int64_t total = 1;
    for (std::int64_t c : counts) total *= c;
    if (total > 1024) throw std::invalid_argument(k_.name + ": a register tile of " + std::to_string(total) + " variables");
    const std::string type = vectors_in_registers_ ? "V" : "float";
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
    }
  }

  void loop(const StmtPtr& s, int depth) {
    const VarNode* v = s->var.get();
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
        statement(s->body[0], depth);
      }
      constants_.erase(v);
      return;
    }
    const std::string name = c_name(v);
    if (s->loop == LoopKind::Parallel) line(depth, "#pragma omp parallel for num_threads(threads) schedule(static)");
    const std::string bound =
        !s->dynamic ? std::to_string(s->extent)
        : s->divisor == 1
            ? dynamic_name(s->dynamic.get())
            : "(" + dynamic_name(s->dynamic.get()) + " + " + std::to_string(s->divisor - 1) + ") / " + std::to_string(s->divisor);
    line(depth, "for (std::int64_t " + name + " = 0; " + name + " < " + bound + "; ++" + name + ") {");
    statement(s->body[0], depth + 1);
    line(depth, "}");
  }

  std::string dynamic_name(const VarNode* v) const {
    for (std::size_t i = 0; i < k_.dynamic.size(); ++i)
      if (k_.dynamic[i].get() == v) return "n" + std::to_string(i);
    throw std::invalid_argument(k_.name + ": '" + v->name + "' is not one of the kernel's dynamic variables");
  }

  static bool has_vector_loop(const StmtPtr& s) {
    if (s->kind == StmtKind::For && s->loop == LoopKind::Vectorized) return true;
    for (const StmtPtr& b : s->body)
      if (has_vector_loop(b)) return true;
    return false;
  }

 public:
  void prepare() { vectors_in_registers_ = lanes_ > 1 && has_vector_loop(k_.body); }

 private:
  const LoweredKernel& k_;
  const int lanes_;
  bool vectors_in_registers_ = false;
  std::map<const BufferNode*, std::string> arg_names_;
  std::map<const VarNode*, std::string> var_names_;
  std::map<const VarNode*, std::int64_t> constants_;
  VectorAt vector_;
  std::string out_;
};

}  // namespace

PrintedKernel print_cpp(const LoweredKernel& k, CpuTarget target, const std::string& symbol,
                        const std::string& generator) {
  Printer printer(k, target);
  printer.prepare();
  const std::string body = printer.body();
  std::string src = "// Generated by wpk " + generator + " (src/codegen) from '" + k.name + "', schedule: " + k.schedule +
                    ", target " + target_name(target) + ".\n";
  src += "extern \"C\" void " + symbol + "(float* const* args, const std::int64_t* extents, int threads) {\n"
         "  (void)extents;\n  (void)threads;\n";
  for (std::size_t i = 0; i < k.dynamic.size(); ++i)
    src += "  const std::int64_t n" + std::to_string(i) + " = extents[" + std::to_string(i) + "];  // " + k.dynamic[i]->name + "\n";
  for (std::size_t i = 0; i < k.args.size(); ++i) {
    const bool output = i + 1 == k.args.size();
    src += std::string("  ") + (output ? "float*" : "const float*") + " __restrict a" + std::to_string(i) + " = args[" +
           std::to_string(i) + "];\n";
  }
  src += body + "}\n";
  return {symbol, cpp_prelude(target), src};
}

}  // namespace wpk::codegen
