// Convolutions: Conv, ConvInteger and ConvTranspose, 1-D to 3-D, grouped and depthwise; Col2Im.
// Conv lowers each (image, group) to im2col + one GEMM; ConvTranspose to one GEMM + col2im.
#include <Eigen/Dense>
#include <algorithm>
#include <string>

#include "backends/reference/common.hpp"
#include "backends/reference/conv_pool.hpp"
#include "backends/reference/float_buffers.hpp"

namespace wpk::reference {
namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Sizes of one convolution: x is (N, C, in...), y is (N, M, out...), `group` splits C and M.
struct ConvDims {
  std::int64_t n = 0, c = 0, m = 0, group = 1;
  Window win;
};

// Unfolds one group's input (cg channels of in_size elements) into col (cg*K rows, out_size
// columns): col[(c, k), o] is the input under kernel tap k for output position o, 0 in padding.
template <typename T>
void im2col(const T* x, std::int64_t cg, const Window& w, T* col) {
  const std::int64_t L = w.out_size();
  for (std::int64_t c = 0; c < cg; ++c) {
    const T* xc = x + c * w.in_size();
    for (std::int64_t k0 = 0; k0 < w.kernel[0]; ++k0)
      for (std::int64_t k1 = 0; k1 < w.kernel[1]; ++k1)
        for (std::int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
          T* dst = col + (((c * w.kernel[0] + k0) * w.kernel[1] + k1) * w.kernel[2] + k2) * L;
          for (std::int64_t o0 = 0; o0 < w.out[0]; ++o0) {
            const std::int64_t i0 = o0 * w.stride[0] - w.pad_begin[0] + k0 * w.dilation[0];
            if (i0 < 0 || i0 >= w.in[0]) {
              std::fill(dst, dst + w.out[1] * w.out[2], T(0));
              dst += w.out[1] * w.out[2];
              continue;
            }
            for (std::int64_t o1 = 0; o1 < w.out[1]; ++o1) {
              const std::int64_t i1 = o1 * w.stride[1] - w.pad_begin[1] + k1 * w.dilation[1];
              if (i1 < 0 || i1 >= w.in[1]) {
                std::fill(dst, dst + w.out[2], T(0));
                dst += w.out[2];
                continue;
              }
              const T* src = xc + (i0 * w.in[1] + i1) * w.in[2];
              for (std::int64_t o2 = 0; o2 < w.out[2]; ++o2) {
                const std::int64_t i2 = o2 * w.stride[2] - w.pad_begin[2] + k2 * w.dilation[2];
                *dst++ = (i2 >= 0 && i2 < w.in[2]) ? src[i2] : T(0);
              }
            }
          }
        }
  }
}

// y = conv(x, w) + b (b may be null). T is float, double or int32 (ConvInteger).
template <typename T>
void conv_compute(const T* x, const T* w, const T* b, T* y, const ConvDims& d) {
  const Window& win = d.win;
  const std::int64_t cg = d.c / d.group, mg = d.m / d.group;
  const std::int64_t K = win.kernel_size(), L = win.out_size(), in_size = win.in_size();
  bool direct = K == 1;  // a 1x1 convolution with unit stride and no padding is a plain GEMM
  for (int i = 0; i < 3; ++i)
    direct = direct && win.stride[i] == 1 && win.pad_begin[i] == 0 && win.pad_end[i] == 0;
  std::vector<T> col(direct ? 0 : static_cast<std::size_t>(cg * K * L));
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t g = 0; g < d.group; ++g) {
      const T* xg = x + (n * d.c + g * cg) * in_size;
      if (!direct) im2col(xg, cg, win, col.data());
      Eigen::Map<const RowMatrix<T>> cols(direct ? xg : col.data(), cg * K, L);
      Eigen::Map<const RowMatrix<T>> wg(w + g * mg * cg * K, mg, cg * K);
      Eigen::Map<RowMatrix<T>> yg(y + (n * d.m + g * mg) * L, mg, L);
      yg.noalias() = wg * cols;
      if (b)
        for (std::int64_t m = 0; m < mg; ++m) yg.row(m).array() += b[g * mg + m];
    }
}

// Checks X (N, C, ...) against W (M, C/group, k...) and returns the sizes and window.
ConvDims conv_dims(const KernelContext& ctx, const Tensor& x, const Tensor& w) {
  ConvDims d;
  if (w.rank() != x.rank())
    ctx.fail(ErrorCode::InvalidArgument, "weights " + shape_to_string(w.shape()) + " and input " +
                                             shape_to_string(x.shape()) + " differ in rank");
  d.group = ctx.node().attr_int("group", 1);
  if (d.group < 1) ctx.fail(ErrorCode::InvalidModel, "group must be positive");
  std::vector<std::int64_t> kernel(w.shape().begin() + std::min(2, w.rank()), w.shape().end());
  d.win = conv_window(ctx, x.shape(), kernel, false);
  d.n = x.dim(0);
  d.c = x.dim(1);
  d.m = w.dim(0);
  if (d.c % d.group != 0 || d.m % d.group != 0 || w.dim(1) * d.group != d.c)
    ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " and weights " +
                                             shape_to_string(w.shape()) + " do not fit group " +
                                             std::to_string(d.group));
  return d;
}

Shape conv_output_shape(const ConvDims& d, std::int64_t channels) {
  Shape s = {d.n, channels};
  for (int i = 3 - d.win.nd; i < 3; ++i) s.push_back(d.win.out[i]);
  return s;
}

void conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (w.dtype() != x.dtype()) ctx.fail(ErrorCode::InvalidModel, "input and weights differ in dtype");
  const ConvDims d = conv_dims(ctx, x, w);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (b && (b->dtype() != x.dtype() || b->rank() != 1 || b->dim(0) != d.m))
    ctx.fail(ErrorCode::InvalidArgument, "bias must be a 1-D tensor of " + std::to_string(d.m) + " " +
                                             dtype_name(x.dtype()) + " values, got " + shape_to_string(b->shape()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), conv_output_shape(d, d.m));
  if (y.numel() == 0) return;  // also keeps im2col from sizing a buffer for an empty batch
  if (is_half_dtype(x.dtype())) {
    const std::vector<float> xf = to_float_buffer(x), wf = to_float_buffer(w);
    const std::vector<float> bf = b ? to_float_buffer(*b) : std::vector<float>();
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    conv_compute<float>(xf.data(), wf.data(), b ? bf.data() : nullptr, yf.data(), d);
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_compute<T>(x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>(), d);
  });
}

// The values of an int8/uint8 tensor minus a zero point, as int32. `zp_per` > 1 gives one zero
// point per block of numel/zp_per elements (per output channel of the weights).
std::vector<std::int32_t> shifted_int32(const KernelContext& ctx, const Tensor& t, const Tensor* zp, const char* what) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(t.numel()));
  std::vector<std::int32_t> z(1, 0);
  if (zp) {
    if (zp->dtype() != t.dtype())
      ctx.fail(ErrorCode::InvalidModel, std::string(what) + " zero point must have the dtype of " + what);
    z.resize(static_cast<std::size_t>(zp->numel()));
  }
  auto read = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    if (zp)
      for (std::size_t i = 0; i < z.size(); ++i) z[i] = zp->data<T>()[i];
    if (z.empty()) ctx.fail(ErrorCode::InvalidArgument, std::string(what) + " zero point is empty");
    const std::size_t block = v.size() / z.size();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::int32_t(p[i]) - z[block ? i / block : 0];
  };
  if (t.dtype() == DType::UInt8)
    read(TypeTag<std::uint8_t>{});
  else if (t.dtype() == DType::Int8)
    read(TypeTag<std::int8_t>{});
  else
    ctx.fail(ErrorCode::Unsupported, std::string(what) + " must be int8 or uint8, got " + dtype_name(t.dtype()));
  return v;
}

void conv_integer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const ConvDims d = conv_dims(ctx, x, w);
  const Tensor* xzp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* wzp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (xzp && xzp->numel() != 1)
    ctx.fail(ErrorCode::Unsupported, "x_zero_point must be a scalar (per-tensor quantization)");
  if (wzp && wzp->numel() != 1 && wzp->numel() != d.m)
    ctx.fail(ErrorCode::InvalidArgument, "w_zero_point must be a scalar or hold one value per output channel");
  // Shifting by the zero point first makes the padding value 0, as ConvInteger requires.
  const std::vector<std::int32_t> xs = shifted_int32(ctx, x, xzp, "x");
  const std::vector<std::int32_t> ws = shifted_int32(ctx, w, wzp, "w");
  Tensor& y = ctx.allocate_output(0, DType::Int32, conv_output_shape(d, d.m));
  if (y.numel() == 0) return;
  conv_compute<std::int32_t>(xs.data(), ws.data(), nullptr, y.data<std::int32_t>(), d);
}

// ConvTranspose: x (N, C, in...), w (C, M/group, k...), y (N, M, out...). Input position i and
// tap k land on output position i*stride + k*dilation - pad_begin.
template <typename T>
void conv_transpose_compute(const T* x, const T* w, const T* b, T* y, const ConvDims& d) {
  const Window& win = d.win;
  const std::int64_t cg = d.c / d.group, mg = d.m / d.group;
  const std::int64_t K = win.kernel_size(), Lin = win.in_size(), Lout = win.out_size();
  RowMatrix<T> col(mg * K, Lin);
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t g = 0; g < d.group; ++g) {
      Eigen::Map<const RowMatrix<T>> xg(x + (n * d.c + g * cg) * Lin, cg, Lin);
      Eigen::Map<const RowMatrix<T>> wg(w + g * cg * mg * K, cg, mg * K);
      col.noalias() = wg.transpose() * xg;
      for (std::int64_t m = 0; m < mg; ++m) {
        T* ym = y + (n * d.m + g * mg + m) * Lout;
        std::fill(ym, ym + Lout, b ? b[g * mg + m] : T(0));
        for (std::int64_t k0 = 0; k0 < win.kernel[0]; ++k0)
          for (std::int64_t k1 = 0; k1 < win.kernel[1]; ++k1)
            for (std::int64_t k2 = 0; k2 < win.kernel[2]; ++k2) {
              const T* src = col.data() + (((m * win.kernel[0] + k0) * win.kernel[1] + k1) * win.kernel[2] + k2) * Lin;
              for (std::int64_t i0 = 0; i0 < win.in[0]; ++i0) {
                const std::int64_t o0 = i0 * win.stride[0] + k0 * win.dilation[0] - win.pad_begin[0];
                if (o0 < 0 || o0 >= win.out[0]) continue;
                for (std::int64_t i1 = 0; i1 < win.in[1]; ++i1) {
                  const std::int64_t o1 = i1 * win.stride[1] + k1 * win.dilation[1] - win.pad_begin[1];
                  if (o1 < 0 || o1 >= win.out[1]) continue;
                  const T* s = src + (i0 * win.in[1] + i1) * win.in[2];
                  T* dst = ym + (o0 * win.out[1] + o1) * win.out[2];
                  for (std::int64_t i2 = 0; i2 < win.in[2]; ++i2) {
                    const std::int64_t o2 = i2 * win.stride[2] + k2 * win.dilation[2] - win.pad_begin[2];
                    if (o2 >= 0 && o2 < win.out[2]) dst[o2] += s[i2];
                  }
                }
              }
            }
      }
    }
}

std::int64_t floor_div2(std::int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

void conv_transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (w.dtype() != x.dtype()) ctx.fail(ErrorCode::InvalidModel, "input and weights differ in dtype");
  if (w.rank() != x.rank() || x.rank() < 3)
    ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " and weights " +
                                             shape_to_string(w.shape()) + " must both have shape (N, C, spatial...)");
  ConvDims d;
  d.group = ctx.node().attr_int("group", 1);
  if (d.group < 1) ctx.fail(ErrorCode::InvalidModel, "group must be positive");
  d.win = base_window(ctx, x.shape(), std::vector<std::int64_t>(w.shape().begin() + 2, w.shape().end()));
  d.n = x.dim(0);
  d.c = x.dim(1);
  d.m = w.dim(1) * d.group;
  if (w.dim(0) != d.c || d.c % d.group != 0)
    ctx.fail(ErrorCode::InvalidArgument, "input " + shape_to_string(x.shape()) + " and weights " +
                                             shape_to_string(w.shape()) + " do not fit group " +
                                             std::to_string(d.group));
  Window& win = d.win;
  const int nd = win.nd, off = 3 - nd;
  const Node& node = ctx.node();
  const std::vector<std::int64_t> out_pad = node.attr_ints("output_padding", std::vector<std::int64_t>(nd, 0));
  if (static_cast<int>(out_pad.size()) != nd) ctx.fail(ErrorCode::InvalidModel, "output_padding needs one value per spatial dim");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    ctx.fail(ErrorCode::InvalidModel, "unknown auto_pad '" + auto_pad + "'");
  std::vector<std::int64_t> out_shape = node.attr_ints("output_shape");
  if (static_cast<int>(out_shape.size()) == nd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && static_cast<int>(out_shape.size()) != nd)
    ctx.fail(ErrorCode::InvalidModel, "output_shape needs one value per spatial dim");
  std::vector<std::int64_t> pads = node.attr_ints("pads", std::vector<std::int64_t>(2 * nd, 0));
  if (static_cast<int>(pads.size()) != 2 * nd) ctx.fail(ErrorCode::InvalidModel, "pads needs two values per spatial dim");
  for (int i = 0; i < nd; ++i) {
    const int a = off + i;
    if (out_pad[i] < 0 || out_pad[i] > kMaxWindowValue)
      ctx.fail(ErrorCode::InvalidModel, "output_padding must be in [0, 2^31]");
    if (!out_shape.empty() && (out_shape[i] < 0 || out_shape[i] > kMaxWindowValue))
      ctx.fail(ErrorCode::InvalidModel, "output_shape must be in [0, 2^31]");
    const std::int64_t full = win.stride[a] * (win.in[a] - 1) + out_pad[i] + (win.kernel[a] - 1) * win.dilation[a] + 1;
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      // The pads follow from the requested size; a negative total means the output extends past
      // the last input tap (zeros, or the bias, there).
      win.out[a] = out_shape.empty() ? win.in[a] * win.stride[a] : out_shape[i];
      const std::int64_t total = full - win.out[a];
      win.pad_begin[a] = auto_pad == "SAME_UPPER" ? floor_div2(total) : total - floor_div2(total);
      win.pad_end[a] = total - win.pad_begin[a];
    } else {
      win.pad_begin[a] = auto_pad == "VALID" ? 0 : pads[i];
      win.pad_end[a] = auto_pad == "VALID" ? 0 : pads[nd + i];
      if (win.pad_begin[a] < 0 || win.pad_end[a] < 0 || win.pad_begin[a] > kMaxWindowValue ||
          win.pad_end[a] > kMaxWindowValue)
        ctx.fail(ErrorCode::InvalidModel, "pads must be in [0, 2^31]");
      win.out[a] = full - win.pad_begin[a] - win.pad_end[a];
    }
    if (win.out[a] < 1)
      ctx.fail(ErrorCode::InvalidArgument, "output size along spatial dim " + std::to_string(i) + " would be " +
                                               std::to_string(win.out[a]));
  }
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (b && (b->dtype() != x.dtype() || b->rank() != 1 || b->dim(0) != d.m))
    ctx.fail(ErrorCode::InvalidArgument, "bias must be a 1-D tensor of " + std::to_string(d.m) + " " +
                                             dtype_name(x.dtype()) + " values, got " + shape_to_string(b->shape()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), conv_output_shape(d, d.m));
  if (y.numel() == 0) return;
  if (is_half_dtype(x.dtype())) {
    const std::vector<float> xf = to_float_buffer(x), wf = to_float_buffer(w);
    const std::vector<float> bf = b ? to_float_buffer(*b) : std::vector<float>();
    std::vector<float> yf(static_cast<std::size_t>(y.numel()));
    conv_transpose_compute<float>(xf.data(), wf.data(), b ? bf.data() : nullptr, yf.data(), d);
    store_float_buffer(yf.data(), y);
    return;
  }
  dispatch_float(x.dtype(), ctx, [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_transpose_compute<T>(x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>(), d);
  });
}

// Opset 18's Col2Im: input [N, C * prod(block), L] holds, for each of the L block positions (the
// positions a Conv with these strides, dilations and pads visits in image_shape), the block's
// values; each is added back at its image position: [N, C, image...].
void col2im(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<std::int64_t> image = read_shape(ctx.input(1), ctx);
  const std::vector<std::int64_t> block = read_int_list(ctx.input(2), ctx);
  if (image.empty() || image.size() != block.size())
    ctx.fail(ErrorCode::InvalidArgument, "image_shape " + shape_to_string(image) + " and block_shape " +
                                             shape_to_string(block) + " must name the same spatial dims");
  if (x.rank() != 3) ctx.fail(ErrorCode::InvalidArgument, "input must be [N, C * prod(block_shape), L], got " + shape_to_string(x.shape()));
  std::int64_t k = 1;
  for (std::int64_t b : block) {
    if (b <= 0 || b > kMaxWindowValue) ctx.fail(ErrorCode::InvalidArgument, "block_shape " + shape_to_string(block) + " is not positive");
    k *= b;
  }
  if (x.dim(1) % k != 0)
    ctx.fail(ErrorCode::InvalidArgument, "input's dim 1 (" + std::to_string(x.dim(1)) + ") is not a multiple of the block size " + std::to_string(k));
  const std::int64_t n = x.dim(0), c = x.dim(1) / k;
  Shape image_in = {n, c};
  image_in.insert(image_in.end(), image.begin(), image.end());
  const Window w = conv_window(ctx, image_in, block, false);
  if (w.out_size() != x.dim(2))
    ctx.fail(ErrorCode::InvalidArgument, "input has " + std::to_string(x.dim(2)) + " blocks, the geometry gives " +
                                             std::to_string(w.out_size()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), image_in);
  const std::vector<double> xv = to_double_buffer(x, ctx);
  std::vector<double> yv(static_cast<std::size_t>(y.numel()), 0.0);
  const std::int64_t L = w.out_size();
  for (std::int64_t p = 0; p < n * c; ++p)
    for (std::int64_t k0 = 0; k0 < w.kernel[0]; ++k0)
      for (std::int64_t k1 = 0; k1 < w.kernel[1]; ++k1)
        for (std::int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
          const double* src = xv.data() + (p * k + (k0 * w.kernel[1] + k1) * w.kernel[2] + k2) * L;
          for (std::int64_t o0 = 0; o0 < w.out[0]; ++o0) {
            const std::int64_t i0 = o0 * w.stride[0] - w.pad_begin[0] + k0 * w.dilation[0];
            for (std::int64_t o1 = 0; o1 < w.out[1]; ++o1) {
              const std::int64_t i1 = o1 * w.stride[1] - w.pad_begin[1] + k1 * w.dilation[1];
              for (std::int64_t o2 = 0; o2 < w.out[2]; ++o2, ++src) {
                const std::int64_t i2 = o2 * w.stride[2] - w.pad_begin[2] + k2 * w.dilation[2];
                if (i0 < 0 || i0 >= w.in[0] || i1 < 0 || i1 >= w.in[1] || i2 < 0 || i2 >= w.in[2]) continue;
                yv[static_cast<std::size_t>(p * w.in_size() + (i0 * w.in[1] + i1) * w.in[2] + i2)] += *src;
              }
            }
          }
        }
  store_doubles(yv, y, ctx);
}

}  // namespace

void register_conv(OpTable& t) {
  t.add("Conv", {conv, 2, 3, 1});
  t.add("ConvInteger", {conv_integer, 2, 4, 10});
  t.add("ConvTranspose", {conv_transpose, 2, 3, 1});
  t.add("Col2Im", {col2im, 3, 3, 18});
  register_deform_conv(t);
}

}  // namespace wpk::reference
