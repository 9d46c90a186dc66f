#include "codegen/tensor_expr.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace wpk::codegen {

Var var(std::string name, std::int64_t extent) {
  if (extent < 1) throw std::invalid_argument("index variable '" + name + "' needs an extent of at least 1");
  return std::make_shared<const VarNode>(VarNode{std::move(name), extent});
}

Var dynamic_var(std::string name) { return std::make_shared<const VarNode>(VarNode{std::move(name), kDynamic}); }

std::vector<Var> Compute::dynamic() const {
  std::vector<Var> out;
  for (const Var& v : axes)
    if (v->dynamic()) out.push_back(v);
  for (const Var& v : reduce)
    if (v->dynamic()) out.push_back(v);
  return out;
}

std::int64_t Affine::coefficient(const VarNode* v) const {
  std::int64_t c = 0;
  for (const auto& t : terms)
    if (t.first.get() == v) c += t.second;
  return c;
}

Affine operator+(Affine a, const Affine& b) {
  for (const auto& t : b.terms) a.terms.push_back(t);
  a.offset += b.offset;
  return a;
}
Affine operator-(Affine a, const Affine& b) { return std::move(a) + b * -1; }
Affine operator*(Affine a, std::int64_t c) {
  for (auto& t : a.terms) t.second *= c;
  a.offset *= c;
  return a;
}

Buffer buffer(std::string name, std::vector<std::int64_t> dims) {
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 1 && !(i == 0 && dims[i] == kDynamic))
      throw std::invalid_argument("buffer '" + name + "' has a dimension below 1 (only the first may be dynamic)");
  return std::make_shared<const BufferNode>(BufferNode{std::move(name), std::move(dims), false});
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Const: return "const";
    case Op::Load: return "load";
    case Op::Acc: return "acc";
    case Op::Neg: return "neg";
    case Op::Abs: return "abs";
    case Op::Relu: return "relu";
    case Op::Sqrt: return "sqrt";
    case Op::Exp: return "exp";
    case Op::Sigmoid: return "sigmoid";
    case Op::Tanh: return "tanh";
    case Op::Erf: return "erf";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Max: return "max";
    case Op::Min: return "min";
  }
  return "?";
}

bool is_unary(Op op) { return op >= Op::Neg && op <= Op::Erf; }
bool is_binary(Op op) { return op >= Op::Add; }

Expr constant(float v) {
  auto e = std::make_shared<ExprNode>();
  e->value = v;
  return e;
}

Expr load(Buffer b, std::vector<Affine> index) {
  if (!b) throw std::invalid_argument("load from no buffer");
  if (index.size() != b->dims.size())
    throw std::invalid_argument("load from '" + b->name + "' with " + std::to_string(index.size()) + " indices for " +
                                std::to_string(b->dims.size()) + " dimensions");
  auto e = std::make_shared<ExprNode>();
  e->op = Op::Load;
  e->buffer = std::move(b);
  e->index = std::move(index);
  return e;
}

Expr load_or_zero(Buffer b, std::vector<Affine> index) { return load_or(std::move(b), std::move(index), 0.0f); }

Expr load_or(Buffer b, std::vector<Affine> index, float outside) {
  Expr e = load(std::move(b), std::move(index));
  auto node = std::const_pointer_cast<ExprNode>(e);
  node->checked = true;
  node->outside = outside;
  // Over the variables' whole ranges (a dynamic one indexes its dimension alone: never leaves).
  for (std::size_t d = 0; d < node->index.size(); ++d) {
    std::int64_t lo = node->index[d].offset, hi = lo;
    bool dynamic = false;
    for (const auto& t : node->index[d].terms) {
      dynamic = dynamic || t.first->dynamic();
      const std::int64_t span = t.second * (t.first->extent - 1);
      (span < 0 ? lo : hi) += span;
    }
    node->may_leave.push_back(!dynamic && (lo < 0 || hi >= node->buffer->dims[d]));
  }
  return e;
}

Expr acc() {
  auto e = std::make_shared<ExprNode>();
  e->op = Op::Acc;
  return e;
}

Expr unary(Op op, Expr a) {
  if (!is_unary(op) || !a) throw std::invalid_argument(std::string("'") + op_name(op) + "' is not a unary operator");
  auto e = std::make_shared<ExprNode>();
  e->op = op;
  e->args = {std::move(a)};
  return e;
}

Expr binary(Op op, Expr a, Expr b) {
  if (!is_binary(op) || !a || !b) throw std::invalid_argument(std::string("'") + op_name(op) + "' is not a binary operator");
  auto e = std::make_shared<ExprNode>();
  e->op = op;
  e->args = {std::move(a), std::move(b)};
  return e;
}

Expr operator+(Expr a, Expr b) { return binary(Op::Add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(Op::Sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(Op::Mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(Op::Div, std::move(a), std::move(b)); }

void collect_loads(const Expr& e, std::vector<Buffer>& out) {
  if (!e) return;
  if (e->op == Op::Load && std::find(out.begin(), out.end(), e->buffer) == out.end()) out.push_back(e->buffer);
  for (const Expr& a : e->args) collect_loads(a, out);
}

namespace {

std::string affine_text(const Affine& a) {
  std::string s;
  for (const auto& t : a.terms) {
    if (!s.empty()) s += t.second < 0 ? " - " : " + ";
    else if (t.second < 0) s += "-";
    const std::int64_t c = t.second < 0 ? -t.second : t.second;
    s += (c == 1 ? "" : std::to_string(c) + "*") + t.first->name;
  }
  if (a.offset != 0 || s.empty()) s += (s.empty() ? "" : a.offset < 0 ? " - " : " + ") +
                                       std::to_string(s.empty() ? a.offset : (a.offset < 0 ? -a.offset : a.offset));
  return s;
}

// Throws when a load's index can leave its buffer at some corner of the variables' ranges.
void check_loads(const Expr& e, const std::vector<Var>& known, bool in_epilogue, const std::string& where) {
  if (!e) return;
  if (e->op == Op::Acc && !in_epilogue) throw std::invalid_argument(where + ": acc() outside an epilogue");
  if (e->op == Op::Load) {
    for (std::size_t d = 0; d < e->index.size(); ++d) {
      const Affine& a = e->index[d];
      bool uses_dynamic = false;
      for (const auto& t : a.terms) uses_dynamic = uses_dynamic || t.first->dynamic();
      if (uses_dynamic || e->buffer->dims[d] == kDynamic) {
        // A dynamic dimension is walked by its dynamic variable alone: in bounds by construction.
        if (e->buffer->dims[d] != kDynamic || a.terms.size() != 1 || !a.terms[0].first->dynamic() ||
            a.terms[0].second != 1 || a.offset != 0)
          throw std::invalid_argument(where + ": a dynamic variable indexes a dynamic first dimension alone, not " +
                                      affine_text(a) + " of '" + e->buffer->name + "'");
        if (std::find(known.begin(), known.end(), a.terms[0].first) == known.end())
          throw std::invalid_argument(where + ": '" + a.terms[0].first->name + "' is not a variable here");
        continue;
      }
      std::int64_t lo = e->index[d].offset, hi = e->index[d].offset;
      for (const auto& t : e->index[d].terms) {
        if (std::find(known.begin(), known.end(), t.first) == known.end())
          throw std::invalid_argument(where + ": '" + e->buffer->name + "' is indexed by '" + t.first->name +
                                      "', which is neither an axis nor a reduction variable here");
        const std::int64_t span = t.second * (t.first->extent - 1);
        (span < 0 ? lo : hi) += span;
      }
      if (!e->checked && (lo < 0 || hi >= e->buffer->dims[d]))
        throw std::invalid_argument(where + ": index " + affine_text(e->index[d]) + " of '" + e->buffer->name +
                                    "' leaves its dimension " + std::to_string(d) + " (size " +
                                    std::to_string(e->buffer->dims[d]) + ")");
    }
  }
  for (const Expr& a : e->args) check_loads(a, known, in_epilogue, where);
}

}  // namespace

float reducer_identity(Reducer r) { return r == Reducer::Max ? -std::numeric_limits<float>::infinity() : 0.0f; }

Expr reducer_step(Reducer r, Expr acc, Expr term) {
  return r == Reducer::Max ? max(std::move(acc), std::move(term)) : std::move(acc) + std::move(term);
}

Compute compute(std::string name, Buffer output, std::vector<Var> axes, std::vector<Var> reduce, Expr body,
                Expr epilogue, std::vector<Buffer> inputs, Reducer reducer) {
  if (!output || !body) throw std::invalid_argument(name + ": a compute needs an output and a body");
  if (axes.size() != output->dims.size())
    throw std::invalid_argument(name + ": " + std::to_string(axes.size()) + " axes for an output of rank " +
                                std::to_string(output->dims.size()));
  for (std::size_t d = 0; d < axes.size(); ++d)
    if (axes[d]->extent != output->dims[d] || (axes[d]->dynamic() && d != 0))
      throw std::invalid_argument(name + ": axis '" + axes[d]->name + "' spans " + std::to_string(axes[d]->extent) +
                                  " but the output's dimension " + std::to_string(d) + " is " +
                                  std::to_string(output->dims[d]));
  std::vector<Var> all = axes;
  all.insert(all.end(), reduce.begin(), reduce.end());
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = i + 1; j < all.size(); ++j)
      if (all[i] == all[j]) throw std::invalid_argument(name + ": variable '" + all[i]->name + "' appears twice");
  check_loads(body, all, false, name);
  check_loads(epilogue, axes, true, name + " (epilogue)");
  std::vector<Buffer> loaded;
  collect_loads(body, loaded);
  collect_loads(epilogue, loaded);
  for (const Buffer& b : loaded)
    if (std::find(inputs.begin(), inputs.end(), b) == inputs.end())
      throw std::invalid_argument(name + ": '" + b->name + "' is loaded but not among the inputs");
  if (std::find(inputs.begin(), inputs.end(), output) != inputs.end())
    throw std::invalid_argument(name + ": the output is also an input");
  if (reducer != Reducer::Sum && reduce.empty()) throw std::invalid_argument(name + ": a reducer without reduction variables");
  return Compute{std::move(name),     std::move(output), std::move(axes),   std::move(reduce),
                 std::move(body),     std::move(epilogue), std::move(inputs), reducer};
}

std::string to_string(const Expr& e) {
  if (!e) return "acc";
  switch (e->op) {
    case Op::Const: {
      std::string s = std::to_string(e->value);
      return s;
    }
    case Op::Acc: return "acc";
    case Op::Load: {
      std::string s = e->buffer->name + "[";
      for (std::size_t d = 0; d < e->index.size(); ++d) s += (d ? ", " : "") + affine_text(e->index[d]);
      if (!e->checked) return s + "]";
      return s + "]?" + (e->outside == 0 ? std::string("0") : std::to_string(e->outside));
    }
    default: break;
  }
  std::string s = std::string(op_name(e->op)) + "(";
  for (std::size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + to_string(e->args[i]);
  return s + ")";
}

}  // namespace wpk::codegen
