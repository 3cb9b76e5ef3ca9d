// parenchyma NN front-end: activations (sigmoid, relu, tanh, elu), softmax and log_softmax,
// convolution, pooling, LRN, dropout, layer_norm, rms_norm, cross_entropy, embedding and
// batch_norm, each with its gradient, on SharedTensors, on any backend (header-only over the core;
// the ops run in the "nn" bundle plugin of the framework that serves them). The semantics of every
// op are in parenchyma/abi/ext/pcy_nn.h and docs/nn.md.
//
//   parenchyma::Backend backend;
//   parenchyma::SharedTensor<float> x({32, 3, 28, 28}), w({16, 3, 3, 3});
//   parenchyma::nn::Convolution conv(backend, x.shape(), w.shape(), {.padding = {1, 1}});
//   parenchyma::SharedTensor<float> y(conv.y_shape());
//   conv.forward(x, w, y);
//   parenchyma::nn::relu_pointwise(backend, y);
//
// Every argument is checked before anything runs (dtypes, shapes, geometry, written inputs): a
// bad one throws parenchyma::error(errc::invalid_argument or errc::uninitialized) with origin
// "nn.<op>" and a message naming the argument; no tensor is touched.
//
// Threads: the functions are free of state; a Convolution is immutable once made and may be
// shared between threads, and its calls follow the rules of the Backend it was made for
// (docs/threads.md). The Backend must outlive the Convolution.
#pragma once

#include <parenchyma/abi/ext/pcy_nn.h>
#include <parenchyma/backend.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/extension.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace parenchyma::nn {

using Shape = std::vector<int64_t>;
using Pair = std::array<int64_t, 2>; // (height, width)

namespace detail {

inline constexpr std::initializer_list<pcy_dtype> any_float = {PCY_DTYPE_F32, PCY_DTYPE_F64,
                                                               PCY_DTYPE_F16, PCY_DTYPE_BF16};
inline constexpr std::initializer_list<pcy_dtype> wide_float = {PCY_DTYPE_F32, PCY_DTYPE_F64};

inline void same_size(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                      const TensorStorage& like, const char* like_name) {
  if (t.size() != like.size())
    ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements (shape ",
              ext::shape_str(t), "), expected ", like.size(), " like ", like_name, " ",
              ext::shape_str(like), "; pass tensors of the same size");
}

inline std::string shape_of(const Shape& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

inline void exact_shape(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                        const Shape& want, const char* why) {
  if (t.shape() != want)
    ext::fail(s, errc::invalid_argument, "argument ", name, ": shape ", ext::shape_str(t),
              ", expected ", shape_of(want), " (", why, "); pass a tensor of that shape");
}

inline void rank4(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                  const char* what) {
  if (t.shape().size() != 4)
    ext::fail(s, errc::invalid_argument, "argument ", name, ": expected a 4-d tensor (", what,
              "), got shape ", ext::shape_str(t));
}

// Checks a geometry pair: every value >= lo.
inline void pair_at_least(const pcy_op_schema& s, const Pair& p, const char* name, int64_t lo) {
  for (int i = 0; i < 2; ++i)
    if (p[i] < lo)
      ext::fail(s, errc::invalid_argument, "argument ", name, ": ", name, "[", i, "] = ", p[i],
                " expected >= ", lo);
}

// One output extent: (in + 2 pad - span) / stride + 1 with span = dil (k - 1) + 1; refuses an
// extent below 1 (a window that does not fit) and arithmetic that would overflow.
inline int64_t out_extent(const pcy_op_schema& s, int64_t in, int64_t k, int64_t stride,
                          int64_t pad, int64_t dil, const char* axis, const char* window_name) {
  int64_t span = 0, padded = 0;
  if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
      __builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, in, &padded))
    ext::fail(s, errc::invalid_argument, "the ", axis, " geometry overflows 64 bits");
  if (padded < span)
    ext::fail(s, errc::invalid_argument, "argument ", window_name, ": the ", axis, " window (",
              span, " elements with dilation) is wider than the input plus padding (", in,
              " + 2 x ", pad, "); use a smaller window or more padding");
  return (padded - span) / stride + 1;
}

inline OpArg ints(const Pair& p) noexcept { return OpArg::integers(std::span<const int64_t>(p)); }

} // namespace detail

// ---- activations --------------------------------------------------------------------------

namespace detail {
template <const pcy_op_schema& S>
void act(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  ext::checker c(S, x, "x", any_float);
  c.same_dtype(y, "y", "x");
  same_size(S, y, "y", x, "x");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(x), OpArg::out(y)});
}
template <const pcy_op_schema& S> void act_pw(const Backend& b, TensorStorage& x) {
  ext::checker c(S, x, "x", any_float);
  c.written(x, "x");
  ext::invoke<S>(b, c.dtype(), {OpArg::inout(x)});
}
template <const pcy_op_schema& S>
void act_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
              TensorStorage& dx) {
  ext::checker c(S, y, "y", any_float);
  c.same_dtype(dy, "dy", "y");
  c.same_dtype(dx, "dx", "y");
  same_size(S, dy, "dy", y, "y");
  same_size(S, dx, "dx", y, "y");
  c.distinct(y, "y", dx, "dx");
  c.distinct(dy, "dy", dx, "dx");
  c.written(y, "y");
  c.written(dy, "dy");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(y), OpArg::in(dy), OpArg::out(dx)});
}
template <const pcy_op_schema& S>
void act_pw_grad(const Backend& b, const TensorStorage& y, TensorStorage& d) {
  ext::checker c(S, y, "y", any_float);
  c.same_dtype(d, "d", "y");
  same_size(S, d, "d", y, "y");
  c.distinct(y, "y", d, "d");
  c.written(y, "y");
  c.written(d, "d");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(y), OpArg::inout(d)});
}
inline void finite_alpha(const pcy_op_schema& s, double alpha) {
  if (!std::isfinite(alpha))
    ext::fail(s, errc::invalid_argument, "argument alpha: ", alpha, " is not finite");
}
template <const pcy_op_schema& S>
void elu_(const Backend& b, const TensorStorage& x, TensorStorage& y, double alpha) {
  ext::checker c(S, x, "x", any_float);
  c.same_dtype(y, "y", "x");
  same_size(S, y, "y", x, "x");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  finite_alpha(S, alpha);
  ext::invoke<S>(b, c.dtype(), {OpArg::in(x), OpArg::out(y), OpArg::real(alpha)});
}
} // namespace detail

// y = f(x); x and y: the same element count and dtype, distinct tensors.
inline void sigmoid(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  detail::act<pcy_nn_sigmoid_schema>(b, x, y);
}
inline void relu(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  detail::act<pcy_nn_relu_schema>(b, x, y);
}
inline void tanh(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  detail::act<pcy_nn_tanh_schema>(b, x, y);
}
inline void elu(const Backend& b, const TensorStorage& x, TensorStorage& y, double alpha = 1.0) {
  detail::elu_<pcy_nn_elu_schema>(b, x, y, alpha);
}
// x = f(x) in place.
inline void sigmoid_pointwise(const Backend& b, TensorStorage& x) {
  detail::act_pw<pcy_nn_sigmoid_pointwise_schema>(b, x);
}
inline void relu_pointwise(const Backend& b, TensorStorage& x) {
  detail::act_pw<pcy_nn_relu_pointwise_schema>(b, x);
}
inline void tanh_pointwise(const Backend& b, TensorStorage& x) {
  detail::act_pw<pcy_nn_tanh_pointwise_schema>(b, x);
}
inline void elu_pointwise(const Backend& b, TensorStorage& x, double alpha = 1.0) {
  constexpr auto& S = pcy_nn_elu_pointwise_schema;
  ext::checker c(S, x, "x", detail::any_float);
  c.written(x, "x");
  detail::finite_alpha(S, alpha);
  ext::invoke<S>(b, c.dtype(), {OpArg::inout(x), OpArg::real(alpha)});
}
// dx = dy * f'(x), from the forward's output y.
inline void sigmoid_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                         TensorStorage& dx) {
  detail::act_grad<pcy_nn_sigmoid_grad_schema>(b, y, dy, dx);
}
inline void relu_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                      TensorStorage& dx) {
  detail::act_grad<pcy_nn_relu_grad_schema>(b, y, dy, dx);
}
inline void tanh_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                      TensorStorage& dx) {
  detail::act_grad<pcy_nn_tanh_grad_schema>(b, y, dy, dx);
}
inline void elu_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                     TensorStorage& dx, double alpha = 1.0) {
  constexpr auto& S = pcy_nn_elu_grad_schema;
  ext::checker c(S, y, "y", detail::any_float);
  c.same_dtype(dy, "dy", "y");
  c.same_dtype(dx, "dx", "y");
  detail::same_size(S, dy, "dy", y, "y");
  detail::same_size(S, dx, "dx", y, "y");
  c.distinct(y, "y", dx, "dx");
  c.distinct(dy, "dy", dx, "dx");
  c.written(y, "y");
  c.written(dy, "dy");
  detail::finite_alpha(S, alpha);
  ext::invoke<S>(b, c.dtype(), {OpArg::in(y), OpArg::in(dy), OpArg::out(dx), OpArg::real(alpha)});
}
// d = d * f'(x) in place (d holds dy and becomes dx).
inline void sigmoid_pointwise_grad(const Backend& b, const TensorStorage& y, TensorStorage& d) {
  detail::act_pw_grad<pcy_nn_sigmoid_pointwise_grad_schema>(b, y, d);
}
inline void relu_pointwise_grad(const Backend& b, const TensorStorage& y, TensorStorage& d) {
  detail::act_pw_grad<pcy_nn_relu_pointwise_grad_schema>(b, y, d);
}
inline void tanh_pointwise_grad(const Backend& b, const TensorStorage& y, TensorStorage& d) {
  detail::act_pw_grad<pcy_nn_tanh_pointwise_grad_schema>(b, y, d);
}
inline void elu_pointwise_grad(const Backend& b, const TensorStorage& y, TensorStorage& d,
                               double alpha = 1.0) {
  constexpr auto& S = pcy_nn_elu_pointwise_grad_schema;
  ext::checker c(S, y, "y", detail::any_float);
  c.same_dtype(d, "d", "y");
  detail::same_size(S, d, "d", y, "y");
  c.distinct(y, "y", d, "d");
  c.written(y, "y");
  c.written(d, "d");
  detail::finite_alpha(S, alpha);
  ext::invoke<S>(b, c.dtype(), {OpArg::in(y), OpArg::inout(d), OpArg::real(alpha)});
}

// ---- softmax ------------------------------------------------------------------------------

namespace detail {
inline int64_t axis_of(const pcy_op_schema& s, const TensorStorage& x, int64_t axis) {
  const auto r = static_cast<int64_t>(x.shape().size());
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    ext::fail(s, errc::invalid_argument, "argument axis: ", axis, " is outside the ", r,
              " dimensions of x ", ext::shape_str(x), "; pass -", r, " <= axis < ", r);
  return a;
}
template <const pcy_op_schema& S>
void softmax_(const Backend& b, const TensorStorage& x, TensorStorage& y, int64_t axis) {
  ext::checker c(S, x, "x", any_float);
  c.same_dtype(y, "y", "x");
  const int64_t a = axis_of(S, x, axis);
  exact_shape(S, y, "y", x.shape(), "the shape of x");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(x), OpArg::out(y), OpArg::integer(a)});
}
template <const pcy_op_schema& S>
void softmax_grad_(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                   TensorStorage& dx, int64_t axis) {
  ext::checker c(S, y, "y", any_float);
  c.same_dtype(dy, "dy", "y");
  c.same_dtype(dx, "dx", "y");
  const int64_t a = axis_of(S, y, axis);
  exact_shape(S, dy, "dy", y.shape(), "the shape of y");
  exact_shape(S, dx, "dx", y.shape(), "the shape of y");
  c.distinct(y, "y", dx, "dx");
  c.distinct(dy, "dy", dx, "dx");
  c.written(y, "y");
  c.written(dy, "dy");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(y), OpArg::in(dy), OpArg::out(dx), OpArg::integer(a)});
}
} // namespace detail

// Along `axis` (negative counts from the end); x and y of the same shape.
inline void softmax(const Backend& b, const TensorStorage& x, TensorStorage& y, int64_t axis = -1) {
  detail::softmax_<pcy_nn_softmax_schema>(b, x, y, axis);
}
inline void log_softmax(const Backend& b, const TensorStorage& x, TensorStorage& y,
                        int64_t axis = -1) {
  detail::softmax_<pcy_nn_log_softmax_schema>(b, x, y, axis);
}
// y: the forward's output.
inline void softmax_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                         TensorStorage& dx, int64_t axis = -1) {
  detail::softmax_grad_<pcy_nn_softmax_grad_schema>(b, y, dy, dx, axis);
}
inline void log_softmax_grad(const Backend& b, const TensorStorage& y, const TensorStorage& dy,
                             TensorStorage& dx, int64_t axis = -1) {
  detail::softmax_grad_<pcy_nn_log_softmax_grad_schema>(b, y, dy, dx, axis);
}

// ---- convolution --------------------------------------------------------------------------

// Algorithm requests: measure once per shape and device (cached), or the bundle's heuristic;
// any value >= 0 is a bundle's own algorithm number (Convolution::algorithm reports it).
inline constexpr int64_t algorithm_auto = -1;
inline constexpr int64_t algorithm_heuristic = -2;

// strict: the op's dtype throughout; tf32: reduced-precision inner products allowed (TF32
// tensor cores for f32 on CUDA); by_setting: the bundle's setting (PARENCHYMA_NN_MATH,
// docs/nn.md), strict unless it says otherwise.
enum class math_mode : int { by_setting = 0, strict = 1, tf32 = 2 };

enum class direction : int { forward = 0, grad_data = 1, grad_filter = 2 };

// How a chosen algorithm rounds: direct, each output a sum of its own products (its error
// bounded by those terms); transform, through an FFT or Winograd transform that spreads rounding
// error over a tile (each output's error bounded by the output's largest magnitude: an exact 0
// may come back as a tiny nonzero). cuDNN's FFT and Winograd algorithms are transforms.
enum class conv_numerics : int {
  direct = PCY_NN_NUMERICS_DIRECT,
  transform = PCY_NN_NUMERICS_TRANSFORM
};

struct ConvolutionParams {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  // Per direction (forward, grad_data, grad_filter).
  std::array<int64_t, 3> algorithm{algorithm_auto, algorithm_auto, algorithm_auto};
  math_mode math = math_mode::by_setting;
  bool training = true; // also choose the algorithms of both gradients
};

// A convolution configured once for given shapes (as cuDNN's descriptors): it checks the
// geometry, chooses each direction's algorithm on the backend and knows its workspace size.
class Convolution {
public:
  Convolution(const Backend& b, Shape x_shape, Shape w_shape, ConvolutionParams p = {},
              pcy_dtype dtype = PCY_DTYPE_F32)
      : b_(&b), x_(std::move(x_shape)), w_(std::move(w_shape)), p_(p), dtype_(dtype) {
    constexpr auto& S = pcy_nn_convolution_schema;
    bool ok_dtype = false;
    for (pcy_dtype d : detail::any_float)
      ok_dtype = ok_dtype || d == dtype_;
    if (!ok_dtype)
      ext::fail(S, errc::invalid_argument, "dtype ", ext::dtype_name(dtype_),
                " is not supported; convolution computes in f32, f64, f16 or bf16");
    if (x_.size() != 4)
      ext::fail(S, errc::invalid_argument, "argument x: expected an N x C x H x W shape, got ",
                detail::shape_of(x_));
    if (w_.size() != 4)
      ext::fail(S, errc::invalid_argument,
                "argument w: expected a K x C/groups x R x S shape, got ", detail::shape_of(w_));
    for (size_t i = 0; i < 4; ++i) {
      if (x_[i] < 0)
        ext::fail(S, errc::invalid_argument, "argument x: a negative extent in ",
                  detail::shape_of(x_));
      if (w_[i] < 1)
        ext::fail(S, errc::invalid_argument, "argument w: extents must be >= 1, got ",
                  detail::shape_of(w_));
    }
    detail::pair_at_least(S, p_.stride, "stride", 1);
    detail::pair_at_least(S, p_.dilation, "dilation", 1);
    detail::pair_at_least(S, p_.padding, "padding", 0);
    if (p_.groups < 1 || x_[1] % p_.groups != 0 || w_[0] % p_.groups != 0)
      ext::fail(S, errc::invalid_argument, "argument groups: ", p_.groups,
                " must be >= 1 and divide both the input channels (", x_[1],
                ") and the output channels (", w_[0], ")");
    if (w_[1] * p_.groups != x_[1])
      ext::fail(S, errc::invalid_argument, "argument w: ", w_[1], " input channels per group x ",
                p_.groups, " groups != the ", x_[1],
                " channels of x; w must be K x C/groups x R x S");
    for (int64_t a : p_.algorithm)
      if (a < algorithm_heuristic)
        ext::fail(S, errc::invalid_argument, "argument algorithm: ", a,
                  " (pass algorithm_auto, algorithm_heuristic or a bundle's algorithm >= 0)");
    const int64_t P = detail::out_extent(S, x_[2], w_[2], p_.stride[0], p_.padding[0],
                                         p_.dilation[0], "height", "w");
    const int64_t Q = detail::out_extent(S, x_[3], w_[3], p_.stride[1], p_.padding[1],
                                         p_.dilation[1], "width", "w");
    y_ = {x_[0], w_[0], P, Q};
    // The product of the extents must fit a tensor (refuse a shape that overflows).
    for (const Shape* s : {&x_, &w_, &y_}) {
      uint64_t n = 1;
      for (int64_t e : *s)
        if (__builtin_mul_overflow(n, static_cast<uint64_t>(e), &n))
          ext::fail(S, errc::invalid_argument, "the shape ", detail::shape_of(*s),
                    " overflows the element count");
    }
    choose(direction::forward);
    if (p_.training) {
      choose(direction::grad_data);
      choose(direction::grad_filter);
    }
  }

  const Shape& x_shape() const noexcept { return x_; }
  const Shape& w_shape() const noexcept { return w_; }
  const Shape& y_shape() const noexcept { return y_; }
  const ConvolutionParams& params() const noexcept { return p_; }
  pcy_dtype dtype() const noexcept { return dtype_; }
  // The chosen algorithm (the bundle's number) and its workspace, per direction; -1 where the
  // direction was not configured (training = false).
  int64_t algorithm(direction d) const noexcept { return algo_[static_cast<int>(d)]; }
  uint64_t workspace_bytes(direction d) const noexcept { return ws_[static_cast<int>(d)]; }
  conv_numerics numerics(direction d) const noexcept { return num_[static_cast<int>(d)]; }

  // y = x (*) w, optionally + bias (one value per output channel).
  void forward(const TensorStorage& x, const TensorStorage& w, TensorStorage& y) const {
    constexpr auto& S = pcy_nn_convolution_schema;
    ext::checker c(S, x, "x", detail::any_float);
    check_dtype(S, c);
    c.same_dtype(w, "w", "x");
    c.same_dtype(y, "y", "x");
    detail::exact_shape(S, x, "x", x_, "the configuration's x shape");
    detail::exact_shape(S, w, "w", w_, "the configuration's w shape");
    detail::exact_shape(S, y, "y", y_, "the configuration's y shape");
    c.distinct(x, "x", y, "y");
    c.distinct(w, "w", y, "y");
    c.written(x, "x");
    c.written(w, "w");
    ext::invoke<S>(*b_, dtype_,
                   {OpArg::in(x), OpArg::in(w), OpArg::out(y), detail::ints(p_.stride),
                    detail::ints(p_.padding), detail::ints(p_.dilation), OpArg::integer(p_.groups),
                    OpArg::integer(algorithm(direction::forward)),
                    OpArg::integer(static_cast<int>(p_.math))});
  }
  void forward(const TensorStorage& x, const TensorStorage& w, const TensorStorage& bias,
               TensorStorage& y) const {
    check_bias(bias, "bias");
    forward(x, w, y);
    constexpr auto& S = pcy_nn_convolution_bias_schema;
    ext::invoke<S>(*b_, dtype_, {OpArg::inout(y), OpArg::in(bias)});
  }
  // dx = the gradient with respect to x, from w and dy (the gradient with respect to y).
  void grad_data(const TensorStorage& w, const TensorStorage& dy, TensorStorage& dx) const {
    constexpr auto& S = pcy_nn_convolution_grad_data_schema;
    ext::checker c(S, w, "w", detail::any_float);
    check_dtype(S, c);
    c.same_dtype(dy, "dy", "w");
    c.same_dtype(dx, "dx", "w");
    trained(S, direction::grad_data);
    detail::exact_shape(S, w, "w", w_, "the configuration's w shape");
    detail::exact_shape(S, dy, "dy", y_, "the configuration's y shape");
    detail::exact_shape(S, dx, "dx", x_, "the configuration's x shape");
    c.distinct(w, "w", dx, "dx");
    c.distinct(dy, "dy", dx, "dx");
    c.written(w, "w");
    c.written(dy, "dy");
    ext::invoke<S>(*b_, dtype_,
                   {OpArg::in(w), OpArg::in(dy), OpArg::out(dx), detail::ints(p_.stride),
                    detail::ints(p_.padding), detail::ints(p_.dilation), OpArg::integer(p_.groups),
                    OpArg::integer(algorithm(direction::grad_data)),
                    OpArg::integer(static_cast<int>(p_.math))});
  }
  // dw = the gradient with respect to w, from x and dy.
  void grad_filter(const TensorStorage& x, const TensorStorage& dy, TensorStorage& dw) const {
    constexpr auto& S = pcy_nn_convolution_grad_filter_schema;
    ext::checker c(S, x, "x", detail::any_float);
    check_dtype(S, c);
    c.same_dtype(dy, "dy", "x");
    c.same_dtype(dw, "dw", "x");
    trained(S, direction::grad_filter);
    detail::exact_shape(S, x, "x", x_, "the configuration's x shape");
    detail::exact_shape(S, dy, "dy", y_, "the configuration's y shape");
    detail::exact_shape(S, dw, "dw", w_, "the configuration's w shape");
    c.distinct(x, "x", dw, "dw");
    c.distinct(dy, "dy", dw, "dw");
    c.written(x, "x");
    c.written(dy, "dy");
    ext::invoke<S>(*b_, dtype_,
                   {OpArg::in(x), OpArg::in(dy), OpArg::out(dw), detail::ints(p_.stride),
                    detail::ints(p_.padding), detail::ints(p_.dilation), OpArg::integer(p_.groups),
                    OpArg::integer(algorithm(direction::grad_filter)),
                    OpArg::integer(static_cast<int>(p_.math))});
  }
  // db[k] = the sum of dy over n, p, q.
  void grad_bias(const TensorStorage& dy, TensorStorage& db) const {
    constexpr auto& S = pcy_nn_convolution_grad_bias_schema;
    ext::checker c(S, dy, "dy", detail::any_float);
    check_dtype(S, c);
    c.same_dtype(db, "db", "dy");
    detail::exact_shape(S, dy, "dy", y_, "the configuration's y shape");
    detail::exact_shape(S, db, "db", Shape{w_[0]}, "one value per output channel");
    c.distinct(dy, "dy", db, "db");
    c.written(dy, "dy");
    ext::invoke<S>(*b_, dtype_, {OpArg::in(dy), OpArg::out(db)});
  }

private:
  void check_dtype(const pcy_op_schema& s, const ext::checker& c) const {
    if (c.dtype() != dtype_)
      ext::fail(s, errc::invalid_argument, "dtype ", ext::dtype_name(c.dtype()),
                ", but the configuration was made for ", ext::dtype_name(dtype_));
  }
  void trained(const pcy_op_schema& s, direction d) const {
    if (algorithm(d) < 0)
      ext::fail(s, errc::invalid_argument,
                "the configuration was made with training = false; make it with training = "
                "true to run the gradients");
  }
  void check_bias(const TensorStorage& bias, const char* name) const {
    constexpr auto& S = pcy_nn_convolution_bias_schema;
    if (bias.dtype() != dtype_)
      ext::fail(S, errc::invalid_argument, "argument ", name, ": dtype ",
                ext::dtype_name(bias.dtype()), " expected ", ext::dtype_name(dtype_));
    detail::exact_shape(S, bias, name, Shape{w_[0]}, "one value per output channel");
    if (!bias.initialized())
      ext::fail(S, errc::uninitialized, "argument ", name, ": the tensor was never written");
  }
  void choose(direction d) {
    constexpr auto& S = pcy_nn_convolution_algorithm_schema;
    SharedTensor<int64_t> result({3});
    const int i = static_cast<int>(d);
    ext::invoke<S>(*b_, dtype_,
                   {OpArg::integer(i), OpArg::integers(x_), OpArg::integers(w_),
                    detail::ints(p_.stride), detail::ints(p_.padding), detail::ints(p_.dilation),
                    OpArg::integer(p_.groups), OpArg::integer(p_.algorithm[i]),
                    OpArg::integer(static_cast<int>(p_.math)), OpArg::out(result.storage())});
    const auto r = result.read();
    if (r[0] < 0 || r[1] < 0)
      ext::fail(S, errc::internal, "the bundle returned algorithm ", r[0], " with a workspace of ",
                r[1], " bytes; report this to the bundle's vendor");
    if (r[2] != PCY_NN_NUMERICS_DIRECT && r[2] != PCY_NN_NUMERICS_TRANSFORM)
      ext::fail(S, errc::internal, "the bundle returned numerics ", r[2], " for algorithm ", r[0],
                "; report this to the bundle's vendor");
    algo_[i] = r[0];
    ws_[i] = static_cast<uint64_t>(r[1]);
    num_[i] = static_cast<conv_numerics>(r[2]);
  }

  const Backend* b_;
  Shape x_, w_, y_;
  ConvolutionParams p_;
  pcy_dtype dtype_;
  std::array<int64_t, 3> algo_{-1, -1, -1};
  std::array<uint64_t, 3> ws_{0, 0, 0};
  std::array<conv_numerics, 3> num_{conv_numerics::direct, conv_numerics::direct,
                                    conv_numerics::direct};
};

// ---- pooling ------------------------------------------------------------------------------

struct PoolingParams {
  Pair window{2, 2};
  Pair stride{0, 0}; // 0: the window
  Pair padding{0, 0};
  bool include_padding = true; // average pooling: divide by the window's area
};

namespace detail {
inline Pair stride_of(const PoolingParams& p) noexcept {
  return {p.stride[0] ? p.stride[0] : p.window[0], p.stride[1] ? p.stride[1] : p.window[1]};
}
// The output shape of pooling x with p, every rule checked (errors from schema s).
inline Shape pooling_shape(const pcy_op_schema& s, const Shape& x, const PoolingParams& p) {
  if (x.size() != 4)
    ext::fail(s, errc::invalid_argument, "argument x: expected an N x C x H x W tensor, got ",
              shape_of(x));
  pair_at_least(s, p.window, "window", 1);
  pair_at_least(s, stride_of(p), "stride", 1);
  pair_at_least(s, p.padding, "padding", 0);
  for (int i = 0; i < 2; ++i)
    if (p.padding[i] > p.window[i] / 2)
      ext::fail(s, errc::invalid_argument, "argument padding: padding[", i, "] = ", p.padding[i],
                " is larger than half the window (", p.window[i],
                "); a window could then hold only padding");
  if (x[2] == 0 || x[3] == 0)
    ext::fail(s, errc::invalid_argument, "argument x: the plane of ", shape_of(x),
              " is empty, so every window would hold only padding; pool a plane of at least "
              "one element");
  const Pair st = stride_of(p);
  return {x[0], x[1], out_extent(s, x[2], p.window[0], st[0], p.padding[0], 1, "height", "window"),
          out_extent(s, x[3], p.window[1], st[1], p.padding[1], 1, "width", "window")};
}
inline void pool_io(const pcy_op_schema& s, const ext::checker& c, const TensorStorage& x,
                    const char* xn, const TensorStorage& y, const char* yn,
                    const PoolingParams& p) {
  rank4(s, x, xn, "N x C x H x W");
  c.same_dtype(y, yn, xn);
  exact_shape(s, y, yn, pooling_shape(s, x.shape(), p), "the pooled shape of x");
  c.distinct(x, xn, y, yn);
}
} // namespace detail

// The shape pooling gives for an input of shape x.
inline Shape pooling_output_shape(const Shape& x, const PoolingParams& p) {
  return detail::pooling_shape(pcy_nn_pooling_max_schema, x, p);
}

inline void pooling_max(const Backend& b, const TensorStorage& x, TensorStorage& y,
                        const PoolingParams& p = {}) {
  constexpr auto& S = pcy_nn_pooling_max_schema;
  ext::checker c(S, x, "x", detail::any_float);
  detail::pool_io(S, c, x, "x", y, "y", p);
  c.written(x, "x");
  const Pair st = detail::stride_of(p);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::out(y), detail::ints(p.window), detail::ints(st),
                  detail::ints(p.padding)});
}
// Also writes the position of each maximum in its plane (for the gradient).
inline void pooling_max(const Backend& b, const TensorStorage& x, TensorStorage& y,
                        TensorStorage& indices, const PoolingParams& p = {}) {
  constexpr auto& S = pcy_nn_pooling_max_indexed_schema;
  ext::checker c(S, x, "x", detail::any_float);
  detail::pool_io(S, c, x, "x", y, "y", p);
  if (indices.dtype() != PCY_DTYPE_I32)
    ext::fail(S, errc::invalid_argument, "argument indices: dtype ",
              ext::dtype_name(indices.dtype()), " expected i32");
  detail::exact_shape(S, indices, "indices", y.shape(), "the shape of y");
  c.distinct(x, "x", indices, "indices");
  c.distinct(y, "y", indices, "indices");
  c.written(x, "x");
  const Pair st = detail::stride_of(p);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::out(y), OpArg::out(indices), detail::ints(p.window),
                  detail::ints(st), detail::ints(p.padding)});
}
// From the forward's input x and output y.
inline void pooling_max_grad(const Backend& b, const TensorStorage& x, const TensorStorage& y,
                             const TensorStorage& dy, TensorStorage& dx,
                             const PoolingParams& p = {}) {
  constexpr auto& S = pcy_nn_pooling_max_grad_schema;
  ext::checker c(S, x, "x", detail::any_float);
  detail::pool_io(S, c, x, "x", y, "y", p);
  c.same_dtype(dy, "dy", "x");
  c.same_dtype(dx, "dx", "x");
  detail::exact_shape(S, dy, "dy", y.shape(), "the shape of y");
  detail::exact_shape(S, dx, "dx", x.shape(), "the shape of x");
  for (const TensorStorage* t : {&x, &y, &dy})
    c.distinct(*t, t == &x ? "x" : t == &y ? "y" : "dy", dx, "dx");
  c.written(x, "x");
  c.written(y, "y");
  c.written(dy, "dy");
  const Pair st = detail::stride_of(p);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(y), OpArg::in(dy), OpArg::out(dx), detail::ints(p.window),
                  detail::ints(st), detail::ints(p.padding)});
}
// From the indices the indexed forward wrote; dx has the forward's input shape.
inline void pooling_max_grad(const Backend& b, const TensorStorage& dy,
                             const TensorStorage& indices, TensorStorage& dx) {
  constexpr auto& S = pcy_nn_pooling_max_grad_indexed_schema;
  ext::checker c(S, dy, "dy", detail::any_float);
  detail::rank4(S, dy, "dy", "N x C x P x Q");
  detail::rank4(S, dx, "dx", "N x C x H x W");
  c.same_dtype(dx, "dx", "dy");
  if (indices.dtype() != PCY_DTYPE_I32)
    ext::fail(S, errc::invalid_argument, "argument indices: dtype ",
              ext::dtype_name(indices.dtype()), " expected i32");
  detail::exact_shape(S, indices, "indices", dy.shape(), "the shape of dy");
  if (dx.shape()[0] != dy.shape()[0] || dx.shape()[1] != dy.shape()[1])
    ext::fail(S, errc::invalid_argument, "argument dx: shape ", ext::shape_str(dx),
              " must have the N and C of dy ", ext::shape_str(dy));
  c.distinct(dy, "dy", dx, "dx");
  c.written(dy, "dy");
  c.written(indices, "indices");
  ext::invoke<S>(b, c.dtype(), {OpArg::in(dy), OpArg::in(indices), OpArg::out(dx)});
}
inline void pooling_avg(const Backend& b, const TensorStorage& x, TensorStorage& y,
                        const PoolingParams& p = {}) {
  constexpr auto& S = pcy_nn_pooling_avg_schema;
  ext::checker c(S, x, "x", detail::any_float);
  detail::pool_io(S, c, x, "x", y, "y", p);
  c.written(x, "x");
  const Pair st = detail::stride_of(p);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::out(y), detail::ints(p.window), detail::ints(st),
                  detail::ints(p.padding), OpArg::integer(p.include_padding ? 1 : 0)});
}
// dx has the forward's input shape.
inline void pooling_avg_grad(const Backend& b, const TensorStorage& dy, TensorStorage& dx,
                             const PoolingParams& p = {}) {
  constexpr auto& S = pcy_nn_pooling_avg_grad_schema;
  ext::checker c(S, dy, "dy", detail::any_float);
  c.same_dtype(dx, "dx", "dy");
  detail::pool_io(S, c, dx, "dx", dy, "dy", p);
  c.written(dy, "dy");
  const Pair st = detail::stride_of(p);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(dy), OpArg::out(dx), detail::ints(p.window), detail::ints(st),
                  detail::ints(p.padding), OpArg::integer(p.include_padding ? 1 : 0)});
}

// ---- local response normalisation ---------------------------------------------------------

struct LrnParams { // PyTorch's LocalResponseNorm defaults
  int64_t n = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
};

namespace detail {
inline void lrn_params(const pcy_op_schema& s, const LrnParams& p) {
  if (p.n < 1)
    ext::fail(s, errc::invalid_argument, "argument n: ", p.n, " expected >= 1 (the window size)");
  if (!std::isfinite(p.alpha))
    ext::fail(s, errc::invalid_argument, "argument alpha: ", p.alpha, " is not finite");
  if (!(p.beta >= 0) || !std::isfinite(p.beta))
    ext::fail(s, errc::invalid_argument, "argument beta: ", p.beta, " expected finite and >= 0");
  if (!(p.k > 0) || !std::isfinite(p.k))
    ext::fail(s, errc::invalid_argument, "argument k: ", p.k, " expected finite and > 0");
}
} // namespace detail

inline void lrn(const Backend& b, const TensorStorage& x, TensorStorage& y,
                const LrnParams& p = {}) {
  constexpr auto& S = pcy_nn_lrn_schema;
  ext::checker c(S, x, "x");
  detail::rank4(S, x, "x", "N x C x H x W");
  c.same_dtype(y, "y", "x");
  detail::exact_shape(S, y, "y", x.shape(), "the shape of x");
  c.distinct(x, "x", y, "y");
  detail::lrn_params(S, p);
  c.written(x, "x");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::out(y), OpArg::integer(p.n), OpArg::real(p.alpha),
                  OpArg::real(p.beta), OpArg::real(p.k)});
}
// From the forward's input x and output y.
inline void lrn_grad(const Backend& b, const TensorStorage& x, const TensorStorage& y,
                     const TensorStorage& dy, TensorStorage& dx, const LrnParams& p = {}) {
  constexpr auto& S = pcy_nn_lrn_grad_schema;
  ext::checker c(S, x, "x");
  detail::rank4(S, x, "x", "N x C x H x W");
  for (const char* n : {"y", "dy", "dx"}) {
    const TensorStorage& t = n[0] == 'y' ? y : n[1] == 'y' ? dy : dx;
    c.same_dtype(t, n, "x");
    detail::exact_shape(S, t, n, x.shape(), "the shape of x");
  }
  c.distinct(x, "x", dx, "dx");
  c.distinct(y, "y", dx, "dx");
  c.distinct(dy, "dy", dx, "dx");
  detail::lrn_params(S, p);
  c.written(x, "x");
  c.written(y, "y");
  c.written(dy, "dy");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(y), OpArg::in(dy), OpArg::out(dx), OpArg::integer(p.n),
                  OpArg::real(p.alpha), OpArg::real(p.beta), OpArg::real(p.k)});
}

// ---- dropout ------------------------------------------------------------------------------

namespace detail {
inline void probability(const pcy_op_schema& s, double p) {
  if (!(p >= 0 && p <= 1))
    ext::fail(s, errc::invalid_argument, "argument probability: ", p, " expected 0 <= p <= 1");
}
inline void mask_of(const pcy_op_schema& s, const TensorStorage& mask, const TensorStorage& like,
                    const char* like_name) {
  if (mask.dtype() != PCY_DTYPE_U8)
    ext::fail(s, errc::invalid_argument, "argument mask: dtype ", ext::dtype_name(mask.dtype()),
              " expected u8");
  same_size(s, mask, "mask", like, like_name);
}
} // namespace detail

// y = x * mask / (1 - probability), mask drawn from seed (the same on every framework).
inline void dropout(const Backend& b, const TensorStorage& x, TensorStorage& y, TensorStorage& mask,
                    double probability, uint64_t seed) {
  constexpr auto& S = pcy_nn_dropout_schema;
  ext::checker c(S, x, "x");
  c.same_dtype(y, "y", "x");
  detail::same_size(S, y, "y", x, "x");
  detail::mask_of(S, mask, x, "x");
  c.distinct(x, "x", y, "y");
  c.distinct(x, "x", mask, "mask");
  c.distinct(y, "y", mask, "mask");
  detail::probability(S, probability);
  c.written(x, "x");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::out(y), OpArg::out(mask), OpArg::real(probability),
                  OpArg::integer(static_cast<int64_t>(seed))});
}
inline void dropout_grad(const Backend& b, const TensorStorage& dy, const TensorStorage& mask,
                         TensorStorage& dx, double probability) {
  constexpr auto& S = pcy_nn_dropout_grad_schema;
  ext::checker c(S, dy, "dy");
  c.same_dtype(dx, "dx", "dy");
  detail::same_size(S, dx, "dx", dy, "dy");
  detail::mask_of(S, mask, dy, "dy");
  c.distinct(dy, "dy", dx, "dx");
  detail::probability(S, probability);
  c.written(dy, "dy");
  c.written(mask, "mask");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(dy), OpArg::in(mask), OpArg::out(dx), OpArg::real(probability)});
}

// ---- normalisation ------------------------------------------------------------------------

namespace detail {
struct norm_rows {
  int64_t axis = 0;
  uint64_t outer = 1, n = 1;
};
inline norm_rows norm_rows_of(const pcy_op_schema& s, const TensorStorage& x, int64_t axis) {
  norm_rows r;
  r.axis = axis_of(s, x, axis);
  const Shape& sh = x.shape();
  for (size_t i = 0; i < sh.size(); ++i)
    (static_cast<int64_t>(i) < r.axis ? r.outer : r.n) *= static_cast<uint64_t>(sh[i]);
  return r;
}
inline void norm_param(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                       uint64_t n) {
  if (t.size() != n)
    ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements (shape ",
              ext::shape_str(t), "), expected ", n,
              " (the normalised dimensions of x from axis on)");
}
// A statistics tensor (pcy_nn.h's statistics dtype of `data`, the dtype of `input`; one per row
// of `of`, or 0 where `optional`: not saved).
inline void stat_arg(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                     pcy_dtype data, uint64_t rows, bool optional, const char* input,
                     const char* of) {
  const pcy_dtype want = PCY_NN_STATISTICS_DTYPE(data);
  if (t.dtype() != want)
    ext::fail(s, errc::invalid_argument, "argument ", name, ": dtype ", ext::dtype_name(t.dtype()),
              ", expected ", ext::dtype_name(want), " (the statistics dtype of ",
              ext::dtype_name(data), " ", input, ")");
  if (t.size() != rows && !(optional && t.size() == 0))
    ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements (shape ",
              ext::shape_str(t), "), expected ", rows, " (one per row of ", of, ")",
              optional ? " or 0 (not saved)" : "");
}
inline void norm_stat(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                      pcy_dtype data, uint64_t outer, bool optional) {
  stat_arg(s, t, name, data, outer, optional, "data", "x");
}
// What both gradients check of x, weight, dy, dx and dweight; the rows of x.
inline norm_rows norm_grad_common(const pcy_op_schema& s, const ext::checker& c,
                                  const TensorStorage& x, const TensorStorage& weight,
                                  const TensorStorage& dy, const TensorStorage& dx,
                                  const TensorStorage& dweight, int64_t axis) {
  c.same_dtype(weight, "weight", "x");
  c.same_dtype(dy, "dy", "x");
  c.same_dtype(dx, "dx", "x");
  c.same_dtype(dweight, "dweight", "x");
  const norm_rows r = norm_rows_of(s, x, axis);
  exact_shape(s, dy, "dy", x.shape(), "the shape of x");
  exact_shape(s, dx, "dx", x.shape(), "the shape of x");
  norm_param(s, weight, "weight", r.n);
  norm_param(s, dweight, "dweight", r.n);
  return r;
}
inline void norm_check_eps(const pcy_op_schema& s, double epsilon) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    ext::fail(s, errc::invalid_argument, "argument epsilon: ", epsilon,
              " expected a finite value >= 0");
}
} // namespace detail

// Layer normalisation over the dimensions of x from `axis` on (negative counts from the end):
// each row's mean and biased variance, y = (x - mean) / sqrt(var + epsilon) * weight + bias.
// weight and bias: one value per normalised element. mean and rstd (1 / sqrt(var + epsilon)):
// one per row, f32 (f64 for f64 data), for layer_norm_grad; tensors of 0 elements save nothing.
inline void layer_norm(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                       const TensorStorage& bias, TensorStorage& y, TensorStorage& mean,
                       TensorStorage& rstd, int64_t axis = -1, double epsilon = 1e-5) {
  constexpr auto& S = pcy_nn_layer_norm_schema;
  ext::checker c(S, x, "x", detail::any_float);
  c.same_dtype(weight, "weight", "x");
  c.same_dtype(bias, "bias", "x");
  c.same_dtype(y, "y", "x");
  const detail::norm_rows r = detail::norm_rows_of(S, x, axis);
  detail::exact_shape(S, y, "y", x.shape(), "the shape of x");
  detail::norm_param(S, weight, "weight", r.n);
  detail::norm_param(S, bias, "bias", r.n);
  detail::norm_stat(S, mean, "mean", c.dtype(), r.outer, true);
  detail::norm_stat(S, rstd, "rstd", c.dtype(), r.outer, true);
  detail::norm_check_eps(S, epsilon);
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&bias, "bias"}}) {
    c.distinct(*t, n, y, "y");
    if (mean.size() != 0) c.distinct(*t, n, mean, "mean");
    if (rstd.size() != 0) c.distinct(*t, n, rstd, "rstd");
  }
  if (mean.size() != 0) c.distinct(y, "y", mean, "mean");
  if (rstd.size() != 0) c.distinct(y, "y", rstd, "rstd");
  if (mean.size() != 0 && rstd.size() != 0) c.distinct(mean, "mean", rstd, "rstd");
  c.written(x, "x");
  c.written(weight, "weight");
  c.written(bias, "bias");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::in(bias), OpArg::out(y), OpArg::out(mean),
                  OpArg::out(rstd), OpArg::integer(r.axis), OpArg::real(epsilon)});
}
// dx, and dweight and dbias summed over the rows, from the forward's x, weight, mean and rstd.
inline void layer_norm_grad(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                            const TensorStorage& mean, const TensorStorage& rstd,
                            const TensorStorage& dy, TensorStorage& dx, TensorStorage& dweight,
                            TensorStorage& dbias, int64_t axis = -1) {
  constexpr auto& S = pcy_nn_layer_norm_grad_schema;
  ext::checker c(S, x, "x", detail::any_float);
  const detail::norm_rows r = detail::norm_grad_common(S, c, x, weight, dy, dx, dweight, axis);
  c.same_dtype(dbias, "dbias", "x");
  detail::norm_param(S, dbias, "dbias", r.n);
  detail::norm_stat(S, mean, "mean", c.dtype(), r.outer, false);
  detail::norm_stat(S, rstd, "rstd", c.dtype(), r.outer, false);
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&mean, "mean"},
                             {&rstd, "rstd"},
                             {&dy, "dy"}}) {
    c.distinct(*t, n, dx, "dx");
    c.distinct(*t, n, dweight, "dweight");
    c.distinct(*t, n, dbias, "dbias");
  }
  c.distinct(dx, "dx", dweight, "dweight");
  c.distinct(dx, "dx", dbias, "dbias");
  c.distinct(dweight, "dweight", dbias, "dbias");
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&mean, "mean"},
                             {&rstd, "rstd"},
                             {&dy, "dy"}})
    c.written(*t, n);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::in(mean), OpArg::in(rstd), OpArg::in(dy),
                  OpArg::out(dx), OpArg::out(dweight), OpArg::out(dbias), OpArg::integer(r.axis)});
}
// Root-mean-square normalisation over the dimensions of x from `axis` on:
// y = x / sqrt(mean(x^2) + epsilon) * weight; rstd as for layer_norm (0 elements: not saved).
inline void rms_norm(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                     TensorStorage& y, TensorStorage& rstd, int64_t axis = -1,
                     double epsilon = 1e-6) {
  constexpr auto& S = pcy_nn_rms_norm_schema;
  ext::checker c(S, x, "x", detail::any_float);
  c.same_dtype(weight, "weight", "x");
  c.same_dtype(y, "y", "x");
  const detail::norm_rows r = detail::norm_rows_of(S, x, axis);
  detail::exact_shape(S, y, "y", x.shape(), "the shape of x");
  detail::norm_param(S, weight, "weight", r.n);
  detail::norm_stat(S, rstd, "rstd", c.dtype(), r.outer, true);
  detail::norm_check_eps(S, epsilon);
  c.distinct(x, "x", y, "y");
  c.distinct(weight, "weight", y, "y");
  if (rstd.size() != 0) {
    c.distinct(x, "x", rstd, "rstd");
    c.distinct(weight, "weight", rstd, "rstd");
    c.distinct(y, "y", rstd, "rstd");
  }
  c.written(x, "x");
  c.written(weight, "weight");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::out(y), OpArg::out(rstd),
                  OpArg::integer(r.axis), OpArg::real(epsilon)});
}
inline void rms_norm_grad(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                          const TensorStorage& rstd, const TensorStorage& dy, TensorStorage& dx,
                          TensorStorage& dweight, int64_t axis = -1) {
  constexpr auto& S = pcy_nn_rms_norm_grad_schema;
  ext::checker c(S, x, "x", detail::any_float);
  const detail::norm_rows r = detail::norm_grad_common(S, c, x, weight, dy, dx, dweight, axis);
  detail::norm_stat(S, rstd, "rstd", c.dtype(), r.outer, false);
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&rstd, "rstd"},
                             {&dy, "dy"}}) {
    c.distinct(*t, n, dx, "dx");
    c.distinct(*t, n, dweight, "dweight");
    c.written(*t, n);
  }
  c.distinct(dx, "dx", dweight, "dweight");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::in(rstd), OpArg::in(dy), OpArg::out(dx),
                  OpArg::out(dweight), OpArg::integer(r.axis)});
}

// ---- cross entropy ------------------------------------------------------------------------

// How cross_entropy reduces the per-row losses (pcy_nn.h: 0, 1, 2).
enum class Reduction : int64_t { none = 0, mean = 1, sum = 2 };

namespace detail {
struct xent_rows {
  uint64_t rows = 1, classes = 0;
};
inline xent_rows xent_common(const pcy_op_schema& s, const TensorStorage& logits,
                             const TensorStorage& labels, double label_smoothing,
                             Reduction reduction) {
  xent_rows r;
  const Shape& sh = logits.shape();
  if (sh.empty())
    ext::fail(s, errc::invalid_argument,
              "argument logits: a scalar, expected rank >= 1 (rows x classes, the classes last)");
  r.classes = static_cast<uint64_t>(sh.back());
  for (size_t i = 0; i + 1 < sh.size(); ++i)
    r.rows *= static_cast<uint64_t>(sh[i]);
  if (labels.dtype() != PCY_DTYPE_I32)
    ext::fail(s, errc::invalid_argument, "argument labels: dtype ", ext::dtype_name(labels.dtype()),
              " expected i32");
  if (labels.size() != r.rows)
    ext::fail(s, errc::invalid_argument, "argument labels: ", labels.size(), " elements (shape ",
              ext::shape_str(labels), "), expected ", r.rows, " (one per row of logits)");
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    ext::fail(s, errc::invalid_argument, "argument label_smoothing: ", label_smoothing,
              " expected a value in [0, 1]");
  const auto red = static_cast<int64_t>(reduction);
  if (red < 0 || red > 2)
    ext::fail(s, errc::invalid_argument, "argument reduction: ", red,
              " expected 0 (none), 1 (mean) or 2 (sum)");
  return r;
}
inline void xent_loss_shape(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                            uint64_t rows, Reduction reduction) {
  const uint64_t want = reduction == Reduction::none ? rows : 1;
  if (t.size() != want)
    ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements (shape ",
              ext::shape_str(t), "), expected ", want,
              reduction == Reduction::none ? " (one per row: reduction none)"
                                           : " (a reduced loss: one element)");
}
inline void xent_lse(const pcy_op_schema& s, const TensorStorage& t, pcy_dtype data, uint64_t rows,
                     bool optional) {
  stat_arg(s, t, "lse", data, rows, optional, "logits", "logits");
}
} // namespace detail

// Softmax cross entropy with integer labels over the LAST axis of logits (rows x classes; the
// other dimensions are rows): loss per row (1 - s) (lse - x[label]) + s (lse - mean(x)), with
// s = label_smoothing; rows whose label is ignore_index count for nothing. loss: one per row
// (Reduction::none) or one element (mean over the rows not ignored, or sum). lse: each row's
// log-sum-exp, f32 (f64 for f64 logits), for cross_entropy_grad; 0 elements saves nothing. A
// label outside [0, classes) that is not ignore_index gives a NaN loss.
inline void cross_entropy(const Backend& b, const TensorStorage& logits,
                          const TensorStorage& labels, TensorStorage& loss, TensorStorage& lse,
                          int64_t ignore_index = -100, double label_smoothing = 0.0,
                          Reduction reduction = Reduction::mean) {
  constexpr auto& S = pcy_nn_cross_entropy_schema;
  ext::checker c(S, logits, "logits", detail::any_float);
  c.same_dtype(loss, "loss", "logits");
  const detail::xent_rows r = detail::xent_common(S, logits, labels, label_smoothing, reduction);
  detail::xent_loss_shape(S, loss, "loss", r.rows, reduction);
  detail::xent_lse(S, lse, c.dtype(), r.rows, true);
  for (const auto& [t, n] :
       {std::pair<const TensorStorage*, const char*>{&logits, "logits"}, {&labels, "labels"}}) {
    c.distinct(*t, n, loss, "loss");
    if (lse.size() != 0) c.distinct(*t, n, lse, "lse");
    c.written(*t, n);
  }
  if (lse.size() != 0) c.distinct(loss, "loss", lse, "lse");
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(logits), OpArg::in(labels), OpArg::out(loss), OpArg::out(lse),
                  OpArg::integer(ignore_index), OpArg::real(label_smoothing),
                  OpArg::integer(static_cast<int64_t>(reduction))});
}
// dlogits (the shape of logits) from the forward's lse and the loss's gradient dloss (the
// loss's shape): g (softmax(x) - (1 - s) onehot(label) - s / classes) per row, g = dloss[row]
// (none), dloss[0] (sum) or dloss[0] / the rows not ignored (mean); ignored rows get 0.
inline void cross_entropy_grad(const Backend& b, const TensorStorage& logits,
                               const TensorStorage& labels, const TensorStorage& lse,
                               const TensorStorage& dloss, TensorStorage& dlogits,
                               int64_t ignore_index = -100, double label_smoothing = 0.0,
                               Reduction reduction = Reduction::mean) {
  constexpr auto& S = pcy_nn_cross_entropy_grad_schema;
  ext::checker c(S, logits, "logits", detail::any_float);
  c.same_dtype(dloss, "dloss", "logits");
  c.same_dtype(dlogits, "dlogits", "logits");
  const detail::xent_rows r = detail::xent_common(S, logits, labels, label_smoothing, reduction);
  detail::xent_loss_shape(S, dloss, "dloss", r.rows, reduction);
  detail::xent_lse(S, lse, c.dtype(), r.rows, false);
  detail::exact_shape(S, dlogits, "dlogits", logits.shape(), "the shape of logits");
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&logits, "logits"},
                             {&labels, "labels"},
                             {&lse, "lse"},
                             {&dloss, "dloss"}}) {
    c.distinct(*t, n, dlogits, "dlogits");
    c.written(*t, n);
  }
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(logits), OpArg::in(labels), OpArg::in(lse), OpArg::in(dloss),
                  OpArg::out(dlogits), OpArg::integer(ignore_index), OpArg::real(label_smoothing),
                  OpArg::integer(static_cast<int64_t>(reduction))});
}

// ---- embedding ----------------------------------------------------------------------------

namespace detail {
// The checks shared by embedding and embedding_grad: table V x D (weight or dweight), i32
// indices of any shape, rows (y or dy) of the shape of indices + [D], padding_idx -1 or in
// [0, V).
inline void embedding_common(const pcy_op_schema& s, const TensorStorage& table,
                             const char* table_name, const TensorStorage& indices,
                             const TensorStorage& rows, const char* rows_name,
                             int64_t padding_idx) {
  const Shape& ts = table.shape();
  if (ts.size() != 2)
    ext::fail(s, errc::invalid_argument, "argument ", table_name, ": shape ", ext::shape_str(table),
              ", expected 2 dimensions (V rows x D values)");
  if (indices.dtype() != PCY_DTYPE_I32)
    ext::fail(s, errc::invalid_argument, "argument indices: dtype ",
              ext::dtype_name(indices.dtype()), " expected i32");
  if (ts[0] >= (int64_t{1} << 31))
    ext::fail(s, errc::invalid_argument, "argument ", table_name, ": ", ts[0],
              " rows, at most 2^31 - 1 (i32 indices)");
  if (indices.size() >= (uint64_t{1} << 31))
    ext::fail(s, errc::invalid_argument, "argument indices: ", indices.size(),
              " elements, at most 2^31 - 1");
  Shape want = indices.shape();
  want.push_back(ts[1]);
  exact_shape(s, rows, rows_name, want, "the shape of indices followed by D");
  if (padding_idx != -1 && (padding_idx < 0 || padding_idx >= ts[0]))
    ext::fail(s, errc::invalid_argument, "argument padding_idx: ", padding_idx,
              " expected -1 (none) or a row in [0, ", ts[0], ")");
}
} // namespace detail

// A table lookup: y (the shape of indices + [D]) gets row indices[i] of weight (V x D) for each
// position i; an index outside [0, V) gives a row of NaN. padding_idx (-1: none) does not change
// the forward (PyTorch's semantics); it matters to embedding_grad.
inline void embedding(const Backend& b, const TensorStorage& weight, const TensorStorage& indices,
                      TensorStorage& y, int64_t padding_idx = -1) {
  constexpr auto& S = pcy_nn_embedding_schema;
  ext::checker c(S, weight, "weight", detail::any_float);
  c.same_dtype(y, "y", "weight");
  detail::embedding_common(S, weight, "weight", indices, y, "y", padding_idx);
  c.distinct(weight, "weight", y, "y");
  c.distinct(indices, "indices", y, "y");
  c.written(weight, "weight");
  c.written(indices, "indices");
  ext::invoke<S>(
      b, c.dtype(),
      {OpArg::in(weight), OpArg::in(indices), OpArg::out(y), OpArg::integer(padding_idx)});
}
// dweight (V x D, overwritten) = for each row v the sum of the dy rows (dy: the shape of
// indices + [D]) at the positions whose index is v, added in increasing position order in f32
// (f64 for f64) and rounded once: the same bits on every run and framework. Rows never indexed,
// padding_idx's row and indices outside [0, V) give or add nothing.
inline void embedding_grad(const Backend& b, const TensorStorage& indices, const TensorStorage& dy,
                           TensorStorage& dweight, int64_t padding_idx = -1) {
  constexpr auto& S = pcy_nn_embedding_grad_schema;
  ext::checker c(S, dy, "dy", detail::any_float);
  c.same_dtype(dweight, "dweight", "dy");
  detail::embedding_common(S, dweight, "dweight", indices, dy, "dy", padding_idx);
  c.distinct(indices, "indices", dweight, "dweight");
  c.distinct(dy, "dy", dweight, "dweight");
  c.written(indices, "indices");
  c.written(dy, "dy");
  ext::invoke<S>(
      b, c.dtype(),
      {OpArg::in(indices), OpArg::in(dy), OpArg::out(dweight), OpArg::integer(padding_idx)});
}

// ---- batch normalisation ------------------------------------------------------------------

namespace detail {
struct bn_dims {
  uint64_t C = 0, M = 0; // channels; elements per channel (N x spatial)
};
inline bn_dims bn_dims_of(const pcy_op_schema& s, const TensorStorage& x) {
  const Shape& sh = x.shape();
  if (sh.size() < 2)
    ext::fail(s, errc::invalid_argument, "argument x: shape ", ext::shape_str(x),
              ", expected rank >= 2 (N x C x spatial, the channels on axis 1)");
  bn_dims d;
  d.C = static_cast<uint64_t>(sh[1]);
  d.M = static_cast<uint64_t>(sh[0]);
  for (size_t i = 2; i < sh.size(); ++i)
    d.M *= static_cast<uint64_t>(sh[i]);
  if (d.C == 0) d.M = 0;
  return d;
}
inline void bn_param(const pcy_op_schema& s, const TensorStorage& t, const char* name, uint64_t C,
                     bool optional) {
  if (t.size() != C && !(optional && t.size() == 0))
    ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements (shape ",
              ext::shape_str(t), "), expected ", C, " (one per channel, x.shape[1])",
              optional ? " or 0 (absent)" : "");
}
inline void bn_stat(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                    pcy_dtype data, uint64_t C, bool optional) {
  stat_arg(s, t, name, data, C, optional, "x", "channel of x");
}
// Every pair of the named tensors (those of 0 elements are absent) is distinct, where one of
// the two is written.
struct bn_arg {
  const TensorStorage* t;
  const char* name;
  bool written_by_op;
};
inline void bn_distinct(const ext::checker& c, std::initializer_list<bn_arg> args) {
  for (auto i = args.begin(); i != args.end(); ++i)
    for (auto j = i + 1; j != args.end(); ++j)
      if ((i->written_by_op || j->written_by_op) && i->t->size() != 0 && j->t->size() != 0)
        c.distinct(*i->t, i->name, *j->t, j->name);
}
} // namespace detail

// Batch normalisation as PyTorch's BatchNorm (pcy_nn.h): x is N x C x spatial (rank >= 2), the
// statistics per channel over N x spatial. weight, bias: one per channel. running_mean and
// running_var (f32, f64 for f64 data; one per channel or 0 elements: absent): training updates
// them with `momentum` (the variance unbiased), evaluation (training false) normalises with
// them (both required). save_mean and save_rstd (0 elements: not saved) receive the mean and
// 1 / sqrt(var + epsilon) used, for batch_norm_grad. Training needs more than one value per
// channel.
inline void batch_norm(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                       const TensorStorage& bias, TensorStorage& running_mean,
                       TensorStorage& running_var, TensorStorage& y, TensorStorage& save_mean,
                       TensorStorage& save_rstd, bool training, double momentum = 0.1,
                       double epsilon = 1e-5) {
  constexpr auto& S = pcy_nn_batch_norm_schema;
  ext::checker c(S, x, "x", detail::any_float);
  c.same_dtype(weight, "weight", "x");
  c.same_dtype(bias, "bias", "x");
  c.same_dtype(y, "y", "x");
  const detail::bn_dims d = detail::bn_dims_of(S, x);
  detail::exact_shape(S, y, "y", x.shape(), "the shape of x");
  detail::bn_param(S, weight, "weight", d.C, false);
  detail::bn_param(S, bias, "bias", d.C, false);
  detail::bn_stat(S, running_mean, "running_mean", c.dtype(), d.C, true);
  detail::bn_stat(S, running_var, "running_var", c.dtype(), d.C, true);
  detail::bn_stat(S, save_mean, "save_mean", c.dtype(), d.C, true);
  detail::bn_stat(S, save_rstd, "save_rstd", c.dtype(), d.C, true);
  if (!(momentum >= 0 && momentum <= 1))
    ext::fail(S, errc::invalid_argument, "argument momentum: ", momentum,
              " expected a value in [0, 1]");
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    ext::fail(S, errc::invalid_argument, "argument epsilon: ", epsilon,
              " expected a finite value > 0");
  if (d.C != 0 && training && d.M < 2)
    ext::fail(S, errc::invalid_argument, "argument x: shape ", ext::shape_str(x), " gives ", d.M,
              " value(s) per channel (N x spatial); training expects more than 1 value per "
              "channel (pass a larger batch, or training=false)");
  if (d.C != 0 && !training && (running_mean.size() == 0 || running_var.size() == 0))
    ext::fail(S, errc::invalid_argument, "argument ",
              running_mean.size() == 0 ? "running_mean" : "running_var",
              ": absent (0 elements), but evaluation (training false) normalises with the "
              "running statistics; pass both");
  detail::bn_distinct(c, {{&x, "x", false},
                          {&weight, "weight", false},
                          {&bias, "bias", false},
                          {&running_mean, "running_mean", training},
                          {&running_var, "running_var", training},
                          {&y, "y", true},
                          {&save_mean, "save_mean", true},
                          {&save_rstd, "save_rstd", true}});
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&bias, "bias"},
                             {&running_mean, "running_mean"},
                             {&running_var, "running_var"}})
    if (t->size() != 0) c.written(*t, n); // empty ones are absent (or hold nothing)
  // The running statistics (OVERWRITE in the schema): read (and updated in training) where
  // present; absent ones (0 elements) hold nothing to read.
  auto running = [](TensorStorage& t) { return t.size() == 0 ? OpArg::out(t) : OpArg::inout(t); };
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::in(bias), running(running_mean),
                  running(running_var), OpArg::out(y), OpArg::out(save_mean), OpArg::out(save_rstd),
                  OpArg::integer(training ? 1 : 0), OpArg::real(momentum), OpArg::real(epsilon)});
}
// dx, and dweight and dbias (one per channel, or 0 elements: not computed) summed over N x
// spatial, from the forward's x, weight and save_mean / save_rstd; `training` as in the forward
// (true: the batch statistics' own gradient enters dx).
inline void batch_norm_grad(const Backend& b, const TensorStorage& x, const TensorStorage& weight,
                            const TensorStorage& mean, const TensorStorage& rstd,
                            const TensorStorage& dy, TensorStorage& dx, TensorStorage& dweight,
                            TensorStorage& dbias, bool training) {
  constexpr auto& S = pcy_nn_batch_norm_grad_schema;
  ext::checker c(S, x, "x", detail::any_float);
  c.same_dtype(weight, "weight", "x");
  c.same_dtype(dy, "dy", "x");
  c.same_dtype(dx, "dx", "x");
  c.same_dtype(dweight, "dweight", "x");
  c.same_dtype(dbias, "dbias", "x");
  const detail::bn_dims d = detail::bn_dims_of(S, x);
  detail::exact_shape(S, dy, "dy", x.shape(), "the shape of x");
  detail::exact_shape(S, dx, "dx", x.shape(), "the shape of x");
  detail::bn_param(S, weight, "weight", d.C, false);
  detail::bn_param(S, dweight, "dweight", d.C, true);
  detail::bn_param(S, dbias, "dbias", d.C, true);
  detail::bn_stat(S, mean, "mean", c.dtype(), d.C, false);
  detail::bn_stat(S, rstd, "rstd", c.dtype(), d.C, false);
  detail::bn_distinct(c, {{&x, "x", false},
                          {&weight, "weight", false},
                          {&mean, "mean", false},
                          {&rstd, "rstd", false},
                          {&dy, "dy", false},
                          {&dx, "dx", true},
                          {&dweight, "dweight", true},
                          {&dbias, "dbias", true}});
  for (const auto& [t, n] : {std::pair<const TensorStorage*, const char*>{&x, "x"},
                             {&weight, "weight"},
                             {&mean, "mean"},
                             {&rstd, "rstd"},
                             {&dy, "dy"}})
    if (t->size() != 0) c.written(*t, n);
  ext::invoke<S>(b, c.dtype(),
                 {OpArg::in(x), OpArg::in(weight), OpArg::in(mean), OpArg::in(rstd), OpArg::in(dy),
                  OpArg::out(dx), OpArg::out(dweight), OpArg::out(dbias),
                  OpArg::integer(training ? 1 : 0)});
}

} // namespace parenchyma::nn
