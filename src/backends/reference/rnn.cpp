// Recurrent layers: RNN, GRU and LSTM (the opset 7 forms, plus the opset 14 `layout` attribute).
// One shared driver validates the inputs and walks the sequence; the ops differ only in their
// gate count and in the per-step cell update.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {
namespace {

enum class Cell { Rnn, Gru, Lstm };

// One of the activation functions the ONNX recurrent ops allow in `activations`.
struct Activation {
  enum Kind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus };
  Kind kind = Tanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case Relu: return x > 0 ? x : 0.0;
      case Tanh: return std::tanh(x);
      case Sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case Affine: return alpha * x + beta;
      case LeakyRelu: return x >= 0 ? x : alpha * x;
      case ThresholdedRelu: return x > alpha ? x : 0.0;
      case ScaledTanh: return alpha * std::tanh(beta * x);
      case HardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
      case Elu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case Softsign: return x / (1.0 + std::abs(x));
      case Softplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

// Name, how many of activation_alpha/activation_beta it consumes, and the values it takes when
// those lists run out (the defaults of the matching standalone ONNX ops).
struct ActivationInfo {
  const char* name;
  Activation::Kind kind;
  int params;
  double alpha, beta;
};

const ActivationInfo kActivations[] = {
    {"relu", Activation::Relu, 0, 0, 0},
    {"tanh", Activation::Tanh, 0, 0, 0},
    {"sigmoid", Activation::Sigmoid, 0, 0, 0},
    {"affine", Activation::Affine, 2, 1.0, 0.0},
    {"leakyrelu", Activation::LeakyRelu, 1, 0.01, 0},
    {"thresholdedrelu", Activation::ThresholdedRelu, 1, 1.0, 0},
    {"scaledtanh", Activation::ScaledTanh, 2, 1.0, 1.0},
    {"hardsigmoid", Activation::HardSigmoid, 2, 0.2, 0.5},
    {"elu", Activation::Elu, 1, 1.0, 0},
    {"softsign", Activation::Softsign, 0, 0, 0},
    {"softplus", Activation::Softplus, 0, 0, 0},
};

// The `activations` list for all directions, forward's first. A list of one direction's worth
// on a bidirectional node is reused for both (exporters write either form). alpha/beta values
// are consumed in order, only by the functions that take them.
std::vector<Activation> parse_activations(const KernelContext& ctx, const std::vector<std::string>& defaults,
                                          int dirs) {
  const Node& node = ctx.node();
  std::vector<std::string> names;
  if (const Attribute* a = node.find_attr("activations")) {
    if (a->kind() != Attribute::Kind::Strings)
      ctx.fail(ErrorCode::InvalidModel, "attribute 'activations' must be a list of strings");
    names = a->strings();
  }
  const std::size_t per_dir = defaults.size();
  if (names.empty()) names = defaults;
  if (names.size() == per_dir && dirs == 2) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per_dir * std::size_t(dirs))
    ctx.fail(ErrorCode::InvalidModel, "attribute 'activations' must list " + std::to_string(per_dir) +
                                          " functions per direction (" + std::to_string(per_dir * dirs) +
                                          " in all), got " + std::to_string(names.size()));
  const std::vector<float> alphas = node.attr_floats("activation_alpha");
  const std::vector<float> betas = node.attr_floats("activation_beta");
  std::size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    std::string key = name;
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& cand : kActivations)
      if (key == cand.name) info = &cand;
    if (!info) ctx.fail(ErrorCode::Unsupported, "activation function '" + name + "' is not supported");
    Activation act;
    act.kind = info->kind;
    act.alpha = info->params >= 1 && ai < alphas.size() ? double(alphas[ai++]) : info->alpha;
    act.beta = info->params >= 2 && bi < betas.size() ? double(betas[bi++]) : info->beta;
    acts.push_back(act);
  }
  return acts;
}

// Everything the compute loop needs, validated.
struct Plan {
  Cell cell = Cell::Rnn;
  int gates = 1;
  int dirs = 1;
  bool reverse = false;  // direction == "reverse" (the bidirectional node's second pass is always reversed)
  bool layout1 = false;  // batch-major X, Y, initial/final states (opset 14 layout=1)
  std::int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool has_clip = false;
  double clip = 0;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  std::vector<std::int64_t> lens;    // per batch entry
  std::vector<Activation> acts;      // per_dir functions for each direction
  std::size_t per_dir = 1;
};

void expect_shape(const KernelContext& ctx, const Tensor& t, const Shape& want, const char* what) {
  if (t.shape() != want)
    ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " must have shape " + shape_to_string(want) + ", got " +
                                             shape_to_string(t.shape()));
}

// Offsets of one (t, b) row of X, one (t, d, b) row of Y and one (d, b) row of a state tensor.
struct Index {
  const Plan& p;
  std::int64_t x(std::int64_t t, std::int64_t b) const {
    return (p.layout1 ? b * p.seq + t : t * p.batch + b) * p.input;
  }
  std::int64_t y(std::int64_t t, std::int64_t d, std::int64_t b) const {
    return (p.layout1 ? (b * p.seq + t) * p.dirs + d : (t * p.dirs + d) * p.batch + b) * p.hidden;
  }
  std::int64_t state(std::int64_t d, std::int64_t b) const {
    return (p.layout1 ? b * p.dirs + d : d * p.batch + b) * p.hidden;
  }
};

template <typename T>
double dot(const T* a, const double* v, std::int64_t n) {
  double s = 0;
  for (std::int64_t k = 0; k < n; ++k) s += double(a[k]) * v[k];
  return s;
}

template <typename T>
void compute(KernelContext& ctx, const Plan& p) {
  const std::int64_t H = p.hidden, I = p.input, GH = p.gates * H;
  const T* X = ctx.input(0).data<T>();
  const T* W = ctx.input(1).data<T>();
  const T* R = ctx.input(2).data<T>();
  const T* B = ctx.has_input(3) ? ctx.input(3).data<T>() : nullptr;
  const T* H0 = ctx.has_input(5) ? ctx.input(5).data<T>() : nullptr;
  const bool lstm = p.cell == Cell::Lstm;
  const T* C0 = lstm && ctx.has_input(6) ? ctx.input(6).data<T>() : nullptr;
  const T* P = lstm && ctx.has_input(7) ? ctx.input(7).data<T>() : nullptr;

  const Shape state_shape = p.layout1 ? Shape{p.batch, p.dirs, H} : Shape{p.dirs, p.batch, H};
  T* Y = nullptr;
  T* Yh = nullptr;
  T* Yc = nullptr;
  if (ctx.wants_output(0)) {
    const Shape ys = p.layout1 ? Shape{p.batch, p.seq, p.dirs, H} : Shape{p.seq, p.dirs, p.batch, H};
    Tensor& y = ctx.allocate_output(0, ctx.input(0).dtype(), ys);
    Y = y.data<T>();
    // Steps past a batch entry's sequence length stay zero; output memory is not pre-zeroed.
    std::fill(Y, Y + y.numel(), T(0));
  }
  if (ctx.wants_output(1)) Yh = ctx.allocate_output(1, ctx.input(0).dtype(), state_shape).data<T>();
  if (lstm && ctx.wants_output(2)) Yc = ctx.allocate_output(2, ctx.input(0).dtype(), state_shape).data<T>();

  const Index ix{p};
  auto clip = [&](double v) { return p.has_clip ? std::max(-p.clip, std::min(p.clip, v)) : v; };
  // Per-entry state and scratch, in double so float32 models lose nothing across long sequences.
  std::vector<double> h(H), c(H), hn(H), cn(H), pre(GH), rec(GH), rh(H), xt(I), r_gate(H);
  for (int d = 0; d < p.dirs; ++d) {
    const bool rev = p.reverse || d == 1;
    const T* Wd = W + d * GH * I;
    const T* Rd = R + d * GH * H;
    const T* Wb = B ? B + d * 2 * GH : nullptr;
    const T* Rb = B ? Wb + GH : nullptr;
    const T* Pd = P ? P + d * 3 * H : nullptr;
    const Activation* act = p.acts.data() + d * p.per_dir;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const std::int64_t len = p.lens[b];
      for (std::int64_t j = 0; j < H; ++j) {
        h[j] = H0 ? double(H0[ix.state(d, b) + j]) : 0.0;
        c[j] = C0 ? double(C0[ix.state(d, b) + j]) : 0.0;
      }
      for (std::int64_t s = 0; s < len; ++s) {
        const std::int64_t t = rev ? len - 1 - s : s;
        for (std::int64_t k = 0; k < I; ++k) xt[k] = double(X[ix.x(t, b) + k]);
        // pre = W x + Wb and rec = R h + Rb for every gate row; the cells combine them.
        for (std::int64_t g = 0; g < GH; ++g) {
          pre[g] = dot(Wd + g * I, xt.data(), I) + (Wb ? double(Wb[g]) : 0.0);
          rec[g] = dot(Rd + g * H, h.data(), H) + (Rb ? double(Rb[g]) : 0.0);
        }
        if (p.cell == Cell::Rnn) {
          for (std::int64_t j = 0; j < H; ++j) hn[j] = act[0](clip(pre[j] + rec[j]));
        } else if (p.cell == Cell::Gru) {
          // Gate rows are ordered z, r, h.
          for (std::int64_t j = 0; j < H; ++j) r_gate[j] = act[0](clip(pre[H + j] + rec[H + j]));
          if (!p.linear_before_reset) {
            // The reset gate scales the state before it meets Rh, so that product is redone.
            for (std::int64_t j = 0; j < H; ++j) rh[j] = r_gate[j] * h[j];
            for (std::int64_t j = 0; j < H; ++j)
              rec[2 * H + j] = dot(Rd + (2 * H + j) * H, rh.data(), H) + (Rb ? double(Rb[2 * H + j]) : 0.0);
          } else {
            for (std::int64_t j = 0; j < H; ++j) rec[2 * H + j] *= r_gate[j];
          }
          for (std::int64_t j = 0; j < H; ++j) {
            const double z = act[0](clip(pre[j] + rec[j]));
            const double cand = act[1](clip(pre[2 * H + j] + rec[2 * H + j]));
            hn[j] = (1.0 - z) * cand + z * h[j];
          }
        } else {
          // Gate rows are ordered i, o, f, c; peepholes P are ordered i, o, f.
          for (std::int64_t j = 0; j < H; ++j) {
            const double pi = Pd ? double(Pd[j]) : 0.0, po = Pd ? double(Pd[H + j]) : 0.0;
            const double pf = Pd ? double(Pd[2 * H + j]) : 0.0;
            const double i = act[0](clip(pre[j] + rec[j] + pi * c[j]));
            // input_forget couples the gates: what is let in is what is forgotten.
            const double f = p.input_forget ? 1.0 - i : act[0](clip(pre[2 * H + j] + rec[2 * H + j] + pf * c[j]));
            const double cand = act[1](clip(pre[3 * H + j] + rec[3 * H + j]));
            cn[j] = f * c[j] + i * cand;
            const double o = act[0](clip(pre[H + j] + rec[H + j] + po * cn[j]));
            hn[j] = o * act[2](cn[j]);
          }
          c.swap(cn);
        }
        h.swap(hn);
        if (Y)
          for (std::int64_t j = 0; j < H; ++j) Y[ix.y(t, d, b) + j] = static_cast<T>(h[j]);
      }
      // An entry with no steps has no last state: report zeros, like its padding in Y
      // (onnxruntime does the same).
      for (std::int64_t j = 0; j < H; ++j) {
        if (Yh) Yh[ix.state(d, b) + j] = len == 0 ? T(0) : static_cast<T>(h[j]);
        if (Yc) Yc[ix.state(d, b) + j] = len == 0 ? T(0) : static_cast<T>(c[j]);
      }
    }
  }
}

void recurrent(KernelContext& ctx, Cell cell) {
  const Node& node = ctx.node();
  Plan p;
  p.cell = cell;
  p.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const std::int64_t layout = node.attr_int("layout", 0);
  if (layout != 0 && layout != 1)
    ctx.fail(ErrorCode::InvalidModel, "attribute 'layout' must be 0 or 1, got " + std::to_string(layout));
  if (layout == 1 && ctx.opset() < 14)
    ctx.fail(ErrorCode::InvalidModel, "attribute 'layout' exists from opset 14 (model uses opset " +
                                          std::to_string(ctx.opset()) + ")");
  p.layout1 = layout == 1;
  const std::string direction = node.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ctx.fail(ErrorCode::InvalidModel,
             "attribute 'direction' must be forward, reverse or bidirectional, got '" + direction + "'");
  p.dirs = direction == "bidirectional" ? 2 : 1;
  p.reverse = direction == "reverse";

  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  const DType dt = x.dtype();
  if (dt != DType::Float32 && dt != DType::Float64)
    ctx.fail(ErrorCode::Unsupported, std::string("dtype ") + dtype_name(dt) + " is not supported");
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (std::size_t i : {1, 2, 3, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input(i).dtype() != dt)
      ctx.fail(ErrorCode::InvalidModel, std::string(names[i]) + " must have the dtype of X (" + dtype_name(dt) +
                                            "), got " + dtype_name(ctx.input(i).dtype()));
  if (x.rank() != 3) ctx.fail(ErrorCode::InvalidArgument, "X must have rank 3, got " + shape_to_string(x.shape()));
  if (r.rank() != 3) ctx.fail(ErrorCode::InvalidArgument, "R must have rank 3, got " + shape_to_string(r.shape()));
  p.seq = p.layout1 ? x.dim(1) : x.dim(0);
  p.batch = p.layout1 ? x.dim(0) : x.dim(1);
  p.input = x.dim(2);
  p.hidden = r.dim(2);
  // Bounds hidden so gates*hidden and the offsets below cannot overflow.
  if (p.hidden > (std::int64_t(1) << 40))
    ctx.fail(ErrorCode::InvalidArgument, "hidden size " + std::to_string(p.hidden) + " is too large");
  if (node.has_attr("hidden_size") && node.attr_int("hidden_size", 0) != p.hidden)
    ctx.fail(ErrorCode::InvalidModel, "attribute hidden_size = " + std::to_string(node.attr_int("hidden_size", 0)) +
                                          " does not match R's last dimension " + std::to_string(p.hidden));
  const std::int64_t GH = p.gates * p.hidden;
  expect_shape(ctx, w, {p.dirs, GH, p.input}, "W");
  expect_shape(ctx, r, {p.dirs, GH, p.hidden}, "R");
  if (ctx.has_input(3)) expect_shape(ctx, ctx.input(3), {p.dirs, 2 * GH}, "B");
  const Shape state_shape = p.layout1 ? Shape{p.batch, p.dirs, p.hidden} : Shape{p.dirs, p.batch, p.hidden};
  if (ctx.has_input(5)) expect_shape(ctx, ctx.input(5), state_shape, "initial_h");
  if (cell == Cell::Lstm && ctx.has_input(6)) expect_shape(ctx, ctx.input(6), state_shape, "initial_c");
  if (cell == Cell::Lstm && ctx.has_input(7)) expect_shape(ctx, ctx.input(7), {p.dirs, 3 * p.hidden}, "P");
  // Y has seq*dirs*batch*hidden elements; with an empty input size, seq and batch are not
  // bounded by X's storage, so the product is checked.
  std::int64_t y_numel = 1;
  for (std::int64_t v : {p.seq, std::int64_t(p.dirs), p.batch, p.hidden})
    if (__builtin_mul_overflow(y_numel, v, &y_numel))
      ctx.fail(ErrorCode::InvalidArgument, "output Y would have too many elements");

  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    if (sl.rank() != 1 || sl.dim(0) != p.batch)
      ctx.fail(ErrorCode::InvalidArgument, "sequence_lens must have shape [" + std::to_string(p.batch) + "], got " +
                                               shape_to_string(sl.shape()));
    p.lens = read_int_list(sl, ctx);
    for (std::int64_t v : p.lens)
      if (v < 0 || v > p.seq)
        ctx.fail(ErrorCode::InvalidArgument, "sequence_lens value " + std::to_string(v) + " is outside [0, " +
                                                 std::to_string(p.seq) + "]");
  } else {
    p.lens.assign(static_cast<std::size_t>(p.batch), p.seq);
  }

  if (node.has_attr("clip")) {
    p.has_clip = true;
    p.clip = node.attr_float("clip", 0.0f);
    if (!(p.clip > 0)) ctx.fail(ErrorCode::InvalidModel, "attribute 'clip' must be positive");
  }
  p.linear_before_reset = cell == Cell::Gru && node.attr_int("linear_before_reset", 0) != 0;
  p.input_forget = cell == Cell::Lstm && node.attr_int("input_forget", 0) != 0;
  const std::vector<std::string> defaults = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                            : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  p.per_dir = defaults.size();
  p.acts = parse_activations(ctx, defaults, p.dirs);

  dispatch_float(dt, ctx, [&](auto tag) { compute<typename decltype(tag)::type>(ctx, p); });
}

void rnn(KernelContext& ctx) { recurrent(ctx, Cell::Rnn); }
void gru(KernelContext& ctx) { recurrent(ctx, Cell::Gru); }
void lstm(KernelContext& ctx) { recurrent(ctx, Cell::Lstm); }

}  // namespace

void register_rnn(OpTable& t) {
  t.add("RNN", {rnn, 3, 6, 7});
  t.add("GRU", {gru, 3, 6, 7});
  t.add("LSTM", {lstm, 3, 8, 7});
}

}  // namespace wpk::reference
