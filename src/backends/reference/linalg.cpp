// Matrix products: MatMul, MatMulInteger, Gemm (Eigen GEMM per batch) and Einsum.
#include <Eigen/Dense>
#include <algorithm>
#include <string>

#include "backends/reference/common.hpp"
#include "backends/reference/float_buffers.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {

void register_rnn(OpTable& t);  // rnn.cpp: RNN, GRU, LSTM

namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMap = Eigen::Map<const RowMatrix<T>>;

// numpy matmul of A (..., M, K) and B (..., K, N): the output shape and, per broadcast batch
// entry, the element offsets of its A and B matrices.
struct MatMulPlan {
  Shape out;
  std::int64_t m = 1, k = 1, n = 1;
  std::vector<std::int64_t> a_off, b_off;
};

MatMulPlan plan_matmul(const Shape& as, const Shape& bs, const KernelContext& ctx) {
  if (as.empty() || bs.empty()) ctx.fail(ErrorCode::InvalidArgument, "MatMul operands must have rank 1 or more");
  MatMulPlan p;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  p.m = a_vec ? 1 : as[as.size() - 2];
  p.k = as.back();
  const std::int64_t kb = b_vec ? bs[0] : bs[bs.size() - 2];
  p.n = b_vec ? 1 : bs.back();
  if (p.k != kb)
    ctx.fail(ErrorCode::InvalidArgument, "shapes " + shape_to_string(as) + " and " + shape_to_string(bs) +
                                             " cannot be multiplied (inner dims " + std::to_string(p.k) + " and " +
                                             std::to_string(kb) + ")");
  const Shape a_batch(as.begin(), as.end() - (a_vec ? 1 : 2));
  const Shape b_batch(bs.begin(), bs.end() - (b_vec ? 1 : 2));
  const Shape batch = broadcast_shapes({a_batch, b_batch}, ctx);
  p.out = batch;
  if (!a_vec) p.out.push_back(p.m);
  if (!b_vec) p.out.push_back(p.n);
  const std::int64_t count = shape_numel(p.out) == 0 ? 0 : shape_numel(batch);
  if (count == 0) return p;  // nothing to compute; a huge empty batch must not size the offsets
  p.a_off.reserve(static_cast<std::size_t>(count));
  p.b_off.reserve(static_cast<std::size_t>(count));
  auto sa = broadcast_strides(a_batch, batch), sb = broadcast_strides(b_batch, batch);
  for (auto& s : sa) s *= p.m * p.k;
  for (auto& s : sb) s *= p.k * p.n;
  for_each_index(batch, {sa, sb}, [&](const std::int64_t* off) {
    p.a_off.push_back(off[0]);
    p.b_off.push_back(off[1]);
  });
  // A batch of A's against one shared B is a single taller GEMM: (batch*M, K) x (K, N).
  const bool b_shared = std::all_of(p.b_off.begin(), p.b_off.end(), [](std::int64_t o) { return o == 0; });
  bool a_packed = true;
  for (std::size_t i = 0; i < p.a_off.size(); ++i) a_packed = a_packed && p.a_off[i] == std::int64_t(i) * p.m * p.k;
  if (count > 1 && b_shared && a_packed) {
    p.m *= count;
    p.a_off = {0};
    p.b_off = {0};
  }
  return p;
}

template <typename T>
void run_matmul(const MatMulPlan& p, const T* a, const T* b, T* y) {
  for (std::size_t i = 0; i < p.a_off.size(); ++i) {
    Eigen::Map<RowMatrix<T>> ym(y + std::int64_t(i) * p.m * p.n, p.m, p.n);
    if (p.k == 0) {
      ym.setZero();
      continue;
    }
    ym.noalias() = ConstMap<T>(a + p.a_off[i], p.m, p.k) * ConstMap<T>(b + p.b_off[i], p.k, p.n);
  }
}

// Calls f(TypeTag<T>) for the dtypes the product kernels compute natively.
template <typename F>
void dispatch_gemm_type(DType dtype, const KernelContext& ctx, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Int32: return f(TypeTag<std::int32_t>{});
    case DType::Int64: return f(TypeTag<std::int64_t>{});
    case DType::UInt32: return f(TypeTag<std::uint32_t>{});
    case DType::UInt64: return f(TypeTag<std::uint64_t>{});
    default: ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(dtype) + " is not supported");
  }
}

void matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype())
    ctx.fail(ErrorCode::InvalidModel, std::string("operands differ in dtype: ") + dtype_name(a.dtype()) + " and " +
                                          dtype_name(b.dtype()));
  const MatMulPlan p = plan_matmul(a.shape(), b.shape(), ctx);
  Tensor& y = ctx.allocate_output(0, a.dtype(), p.out);
  if (is_half_dtype(a.dtype())) {
    const std::vector<float> af = to_float_buffer(a), bf = to_float_buffer(b);
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    run_matmul<float>(p, af.data(), bf.data(), yf.data());
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_gemm_type(a.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_matmul<T>(p, a.data<T>(), b.data<T>(), y.data<T>());
  });
}

// An int8/uint8 operand minus its zero point, as int32. The zero point is a scalar or one value
// per row of A (`per_row`) / per column of B.
std::vector<std::int32_t> shifted(const KernelContext& ctx, const Tensor& t, const Tensor* zp, bool per_row,
                                  std::int64_t rows, std::int64_t cols, const char* what) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(t.numel()));
  const std::int64_t want = per_row ? rows : cols;
  if (zp && zp->numel() != 1 && !(zp->rank() == 1 && zp->numel() == want))
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " zero point must be a scalar or a 1-D tensor of " +
                                         std::to_string(want) + " values, got " + shape_to_string(zp->shape()));
  if (zp && zp->dtype() != t.dtype())
    ctx.fail(ErrorCode::InvalidModel, std::string(what) + " zero point must have the dtype of " + what);
  auto read = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    const T* z = zp ? zp->data<T>() : nullptr;
    const bool per = zp && zp->numel() != 1;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::int64_t e = std::int64_t(i);
      const std::int64_t zi = !per ? 0 : per_row ? (e / cols) % rows : e % cols;
      v[i] = std::int32_t(p[i]) - (z ? std::int32_t(z[zi]) : 0);
    }
  };
  if (t.dtype() == DType::UInt8)
    read(TypeTag<std::uint8_t>{});
  else if (t.dtype() == DType::Int8)
    read(TypeTag<std::int8_t>{});
  else
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " must be int8 or uint8, got " + dtype_name(t.dtype()));
  return v;
}

void matmul_integer(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const MatMulPlan p = plan_matmul(a.shape(), b.shape(), ctx);
  const std::int64_t a_rows = a.rank() == 1 ? 1 : a.dim(-2);
  const std::int64_t b_cols = b.rank() == 1 ? 1 : b.dim(-1);
  const std::vector<std::int32_t> as =
      shifted(ctx, a, ctx.has_input(2) ? &ctx.input(2) : nullptr, true, a_rows, a.dim(-1), "A");
  const std::vector<std::int32_t> bs =
      shifted(ctx, b, ctx.has_input(3) ? &ctx.input(3) : nullptr, false, b.rank() == 1 ? b.dim(0) : b.dim(-2), b_cols, "B");
  Tensor& y = ctx.allocate_output(0, DType::Int32, p.out);
  run_matmul<std::int32_t>(p, as.data(), bs.data(), y.data<std::int32_t>());
}

template <typename T>
void run_gemm(const T* a, const T* b, const T* c, const Shape& c_shape, T* y, std::int64_t m, std::int64_t k,
              std::int64_t n, bool trans_a, bool trans_b, double alpha, double beta) {
  Eigen::Map<RowMatrix<T>> ym(y, m, n);
  const T al = static_cast<T>(alpha);
  if (k == 0) {
    ym.setZero();
  } else {
    // The stored shapes are A (M, K) or (K, M) and B (K, N) or (N, K).
    const ConstMap<T> am(a, trans_a ? k : m, trans_a ? m : k);
    const ConstMap<T> bm(b, trans_b ? n : k, trans_b ? k : n);
    if (trans_a && trans_b)
      ym.noalias() = al * (am.transpose() * bm.transpose());
    else if (trans_a)
      ym.noalias() = al * (am.transpose() * bm);
    else if (trans_b)
      ym.noalias() = al * (am * bm.transpose());
    else
      ym.noalias() = al * (am * bm);
  }
  if (!c || beta == 0) return;
  const T be = static_cast<T>(beta);
  const auto cs = broadcast_strides(c_shape, {m, n});
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) ym(i, j) += be * c[i * cs[0] + j * cs[1]];
}

void gemm(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Node& node = ctx.node();
  const bool trans_a = node.attr_int("transA", 0) != 0, trans_b = node.attr_int("transB", 0) != 0;
  const double alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail(ErrorCode::InvalidArgument, "A and B must be matrices, got " + shape_to_string(a.shape()) + " and " +
                                             shape_to_string(b.shape()));
  if (a.dtype() != b.dtype() || (c && c->dtype() != a.dtype()))
    ctx.fail(ErrorCode::InvalidModel, "A, B and C must share one dtype");
  const std::int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const std::int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb)
    ctx.fail(ErrorCode::InvalidArgument, "A " + shape_to_string(a.shape()) + " and B " + shape_to_string(b.shape()) +
                                             " do not agree on K under transA/transB");
  if (c) {
    // C broadcasts one way only: to (M, N).
    const Shape& cs = c->shape();
    bool ok = cs.size() <= 2;
    for (std::size_t i = 0; ok && i < cs.size(); ++i) {
      const std::int64_t want = (cs.size() - i == 2) ? m : n;
      ok = cs[i] == 1 || cs[i] == want;
    }
    if (!ok)
      ctx.fail(ErrorCode::InvalidArgument, "C " + shape_to_string(cs) + " cannot be broadcast to (" + std::to_string(m) +
                                               ", " + std::to_string(n) + ")");
  }
  const Shape c_shape = c ? c->shape() : Shape{};
  Tensor& y = ctx.allocate_output(0, a.dtype(), {m, n});
  if (is_half_dtype(a.dtype())) {
    const std::vector<float> af = to_float_buffer(a), bf = to_float_buffer(b);
    const std::vector<float> cf = c ? to_float_buffer(*c) : std::vector<float>();
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    run_gemm<float>(af.data(), bf.data(), c ? cf.data() : nullptr, c_shape, yf.data(), m, k, n, trans_a, trans_b,
                    alpha, beta);
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_gemm_type(a.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_gemm<T>(a.data<T>(), b.data<T>(), c ? c->data<T>() : nullptr, c_shape, y.data<T>(), m, k, n, trans_a, trans_b,
                alpha, beta);
  });
}

// --- Einsum ----------------------------------------------------------------------------------
// Labels: 'A'-'Z' -> 0..25, 'a'-'z' -> 26..51, ellipsis dims -> 52.. (aligned from the right
// across operands, as numpy broadcasts them).
constexpr int kEllipsis = -1;
constexpr int kFirstEllipsisLabel = 52;

std::vector<int> parse_term(const std::string& term, const KernelContext& ctx) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (std::size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch >= 'A' && ch <= 'Z') {
      labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      labels.push_back(26 + (ch - 'a'));
    } else if (ch == '.' && term.compare(i, 3, "...") == 0 && !seen_ellipsis) {
      labels.push_back(kEllipsis);
      seen_ellipsis = true;
      i += 2;
    } else {
      ctx.fail(ErrorCode::InvalidModel, "malformed einsum term '" + term + "'");
    }
  }
  return labels;
}

// Replaces the ellipsis marker with `count` labels, the last `count` of `total` ellipsis labels.
std::vector<int> expand_ellipsis(const std::vector<int>& labels, int count, int total) {
  std::vector<int> out;
  for (int l : labels) {
    if (l != kEllipsis) {
      out.push_back(l);
      continue;
    }
    for (int j = total - count; j < total; ++j) out.push_back(kFirstEllipsisLabel + j);
  }
  return out;
}

void einsum(KernelContext& ctx) {
  std::string eq;
  for (char ch : ctx.node().attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const std::size_t n_in = ctx.num_inputs();
  std::vector<std::vector<int>> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma - start), ctx));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != n_in)
    ctx.fail(ErrorCode::InvalidModel, "equation '" + eq + "' has " + std::to_string(terms.size()) + " operands, node has " +
                                          std::to_string(n_in) + " inputs");
  const DType dtype = ctx.input(0).dtype();
  // Ellipsis dims per operand, and the label -> size map (size-1 dims broadcast).
  int n_ell = 0;
  std::vector<int> ell_count(n_in, 0);
  for (std::size_t i = 0; i < n_in; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dtype) ctx.fail(ErrorCode::InvalidModel, "einsum operands must share one dtype");
    const int named = static_cast<int>(std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l != kEllipsis; }));
    const bool has_ell = named != static_cast<int>(terms[i].size());
    if (t.rank() < named || (!has_ell && t.rank() != named))
      ctx.fail(ErrorCode::InvalidArgument, "operand " + std::to_string(i) + " of shape " + shape_to_string(t.shape()) +
                                               " does not fit its einsum term");
    ell_count[i] = t.rank() - named;
    n_ell = std::max(n_ell, ell_count[i]);
  }
  std::vector<std::int64_t> size(kFirstEllipsisLabel + n_ell, -1);
  std::vector<int> uses(size.size(), 0);
  for (std::size_t i = 0; i < n_in; ++i) {
    terms[i] = expand_ellipsis(terms[i], ell_count[i], n_ell);
    const Shape& s = ctx.input(i).shape();
    for (std::size_t a = 0; a < terms[i].size(); ++a) {
      std::int64_t& sz = size[terms[i][a]];
      ++uses[terms[i][a]];
      if (sz == -1 || sz == 1)
        sz = s[a];
      else if (s[a] != sz && s[a] != 1)
        ctx.fail(ErrorCode::InvalidArgument, "einsum label sizes disagree: " + std::to_string(sz) + " vs " +
                                                 std::to_string(s[a]));
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    const std::vector<int> rhs = parse_term(eq.substr(arrow + 2), ctx);
    // As in numpy, broadcast dims are kept or dropped only by naming "..." in the output.
    if (n_ell > 0 && std::find(rhs.begin(), rhs.end(), kEllipsis) == rhs.end())
      ctx.fail(ErrorCode::InvalidModel, "equation '" + eq + "' has ellipsis dims in the inputs but no '...' in the output");
    out_labels = expand_ellipsis(rhs, n_ell, n_ell);
    for (std::size_t i = 0; i < out_labels.size(); ++i) {
      if (size[out_labels[i]] == -1) ctx.fail(ErrorCode::InvalidModel, "einsum output label is not in any input");
      if (std::count(out_labels.begin(), out_labels.end(), out_labels[i]) > 1)
        ctx.fail(ErrorCode::InvalidModel, "einsum output repeats a label");
    }
  } else {
    // Implicit output: the broadcast ellipsis dims, then labels used once, alphabetically.
    for (int j = 0; j < n_ell; ++j) out_labels.push_back(kFirstEllipsisLabel + j);
    for (int l = 0; l < kFirstEllipsisLabel; ++l)
      if (uses[l] == 1) out_labels.push_back(l);
  }
  // The joint index space: output labels first, then the summed-over ones.
  std::vector<int> joint = out_labels;
  for (int l = 0; l < static_cast<int>(size.size()); ++l)
    if (size[l] != -1 && std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) joint.push_back(l);
  Shape joint_shape, out_shape;
  for (int l : joint) joint_shape.push_back(size[l]);
  for (int l : out_labels) out_shape.push_back(size[l]);
  // Strides per operand along each joint label; a label repeated in one term adds its strides,
  // which walks the diagonal.
  std::vector<std::vector<std::int64_t>> strides(n_in + 1, std::vector<std::int64_t>(joint.size(), 0));
  for (std::size_t i = 0; i < n_in; ++i) {
    const Shape& s = ctx.input(i).shape();
    const auto cs = contiguous_strides(s);
    for (std::size_t a = 0; a < terms[i].size(); ++a) {
      const std::size_t j = std::find(joint.begin(), joint.end(), terms[i][a]) - joint.begin();
      if (s[a] != 1 || size[terms[i][a]] == 1) strides[i][j] += cs[a];
    }
  }
  const auto out_cs = contiguous_strides(out_shape);
  for (std::size_t j = 0; j < out_labels.size(); ++j) strides[n_in][j] = out_cs[j];
  Tensor& y = ctx.allocate_output(0, dtype, out_shape);
  dispatch_numeric(dtype, ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<const T*> in(n_in);
    for (std::size_t i = 0; i < n_in; ++i) in[i] = ctx.input(i).data<T>();
    T* py = y.data<T>();
    std::fill(py, py + y.numel(), T(0));
    for_each_index(joint_shape, strides, [&](const std::int64_t* off) {
      T prod = in[0][off[0]];
      for (std::size_t i = 1; i < n_in; ++i) prod *= in[i][off[i]];
      py[off[n_in]] += prod;
    });
  });
}

}  // namespace

void register_linalg(OpTable& t) {
  t.add("MatMul", {matmul, 2, 2, 1});
  t.add("MatMulInteger", {matmul_integer, 2, 4, 10});
  t.add("Gemm", {gemm, 2, 3, 7});
  t.add("Einsum", {einsum, 1, -1, 12});
  register_rnn(t);
}

}  // namespace wpk::reference
