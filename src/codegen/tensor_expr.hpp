#pragma once
// Tensor expressions: what a generated kernel computes, apart from how (schedule.hpp). An
// expression reads buffers at affine indices of index variables and combines the values with
// element-wise operators; a Compute writes it to an output buffer at every point of its axes,
// optionally summed (or maximised) over reduction variables first and passed through an epilogue (bias,
// residual, activation) after. Extents are fixed when the expression is built, but for dynamic
// variables (a batch of rows): their extent is an argument of the kernel, and they may index only
// the first dimension of buffers, which is then kDynamic.
//
//   Var i = var("i", M), j = var("j", N), k = var("k", K);
//   Buffer a = buffer("a", {M, K}), b = buffer("b", {K, N}), c = buffer("c", {M, N});
//   Compute mm = compute("matmul", c, {i, j}, {k}, load(a, {i, k}) * load(b, {k, j}), relu(acc()), {a, b});
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wpk::codegen {

constexpr std::int64_t kDynamic = -1;

struct VarNode {
  std::string name;
  std::int64_t extent;  // kDynamic: given when the kernel runs
  bool dynamic() const { return extent == kDynamic; }
};
// Variables are compared by identity: two vars named "i" are two vars.
using Var = std::shared_ptr<const VarNode>;
Var var(std::string name, std::int64_t extent);
Var dynamic_var(std::string name);

// sum(coefficient * var) + offset.
struct Affine {
  std::vector<std::pair<Var, std::int64_t>> terms;
  std::int64_t offset = 0;
  Affine() = default;
  Affine(std::int64_t constant) : offset(constant) {}  // NOLINT: indices read as arithmetic
  Affine(Var v) : terms{{std::move(v), 1}} {}          // NOLINT
  std::int64_t coefficient(const VarNode* v) const;
};
Affine operator+(Affine a, const Affine& b);
Affine operator-(Affine a, const Affine& b);
Affine operator*(Affine a, std::int64_t c);

struct BufferNode {
  std::string name;
  std::vector<std::int64_t> dims;  // row-major, the last dimension contiguous; dims[0] may be kDynamic
  // Register buffers are the schedule's accumulators: the printer gives each element (each
  // vector of the last dimension) a variable of its own.
  bool registers = false;
  bool vectors = false;  // registers: the last dimension held in SIMD vectors (the vectorized loop's)
  // Shared buffers are a CUDA block's staged tiles (Schedule::stage_shared).
  bool shared = false;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer buffer(std::string name, std::vector<std::int64_t> dims);

enum class Op { Const, Load, Acc, Neg, Abs, Relu, Sqrt, Exp, Sigmoid, Tanh, Erf, Add, Sub, Mul, Div, Max, Min };
const char* op_name(Op op);
bool is_unary(Op op);
bool is_binary(Op op);

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;
struct ExprNode {
  Op op = Op::Const;
  float value = 0;             // Const
  Buffer buffer;               // Load
  std::vector<Affine> index;   // Load: one per buffer dimension
  bool checked = false;        // Load: `outside` where the index leaves the buffer (padding)
  float outside = 0;           // checked: 0 for a convolution's padding, -inf for a max pool's
  std::vector<bool> may_leave;  // checked: per dimension, whether its index can leave it
  std::vector<Expr> args;      // operators' operands
};

Expr constant(float v);
Expr load(Buffer b, std::vector<Affine> index);
// A load that reads 0 where the index leaves the buffer; the vectorized loop may not walk a
// dimension that can leave it.
Expr load_or_zero(Buffer b, std::vector<Affine> index);
// The same, reading `outside` there (a max pool's padding is -inf).
Expr load_or(Buffer b, std::vector<Affine> index, float outside);
// The reduced value, inside a Compute's epilogue.
Expr acc();
Expr unary(Op op, Expr a);
Expr binary(Op op, Expr a, Expr b);
inline Expr relu(Expr a) { return unary(Op::Relu, std::move(a)); }
inline Expr exp(Expr a) { return unary(Op::Exp, std::move(a)); }
inline Expr sigmoid(Expr a) { return unary(Op::Sigmoid, std::move(a)); }
inline Expr max(Expr a, Expr b) { return binary(Op::Max, std::move(a), std::move(b)); }
inline Expr min(Expr a, Expr b) { return binary(Op::Min, std::move(a), std::move(b)); }
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);

// How a Compute's reduction combines its terms: their sum (from 0) or their largest (from -inf).
enum class Reducer { Sum, Max };

struct Compute {
  std::string name;
  Buffer output;
  std::vector<Var> axes;    // one per output dimension, extents equal to its dims
  std::vector<Var> reduce;  // summed over (none: an element-wise compute)
  Expr body;                // the value, or the summand
  Expr epilogue;            // applied to the sum, reading it as acc(); null: the sum itself
  std::vector<Buffer> inputs;  // the kernel's arguments in order; the output comes last
  Reducer reducer = Reducer::Sum;
  std::vector<Var> dynamic() const;  // the dynamic variables, axes then reductions: the kernel's extents argument
};

// Checks the pieces fit (axes match the output, every load's rank and every variable known,
// indices in bounds at the extents' corners) and throws std::invalid_argument naming the fault.
Compute compute(std::string name, Buffer output, std::vector<Var> axes, std::vector<Var> reduce, Expr body,
                Expr epilogue, std::vector<Buffer> inputs, Reducer reducer = Reducer::Sum);
// The reducer's starting value (0 or -inf) and its step combining `acc` with a term.
float reducer_identity(Reducer r);
Expr reducer_step(Reducer r, Expr acc, Expr term);

// Every buffer a expression loads, each once, in first-seen order.
void collect_loads(const Expr& e, std::vector<Buffer>& out);
// "relu(acc + b[j])": for names and error messages.
std::string to_string(const Expr& e);

}  // namespace wpk::codegen
