// NN bundles, shared part: decodes an op call's arguments into plain structs, by argument name
// from the schemas in pcy_nn.h (indices resolved at compile time), re-checking every value with
// the SDK's decoder (sdk/op_schema.hpp) and the geometry rules of pcy_nn.h, so a bundle called
// by any host (not only through nn.hpp) never reads or writes outside a tensor. Errors name the
// op and the argument. Also the double-precision dropout decision every bundle shares.
#pragma once

#include <parenchyma/abi/ext/pcy_nn.h>
#include <parenchyma/sdk/op_schema.hpp>

#include <array>
#include <cmath>
#include <cstdint>

namespace parenchyma::nn_bundle {

using sdk::fail;
using sdk::str;

template <const pcy_op_schema& S> consteval uint32_t at(const char* name) {
  return sdk::arg_index(S, name);
}

// ---- elementwise (activations, dropout) ---------------------------------------------------

struct eltwise_call {
  const pcy_tensor* x = nullptr;  // input (or the forward's output y for gradients)
  const pcy_tensor* dy = nullptr; // gradients: the incoming gradient
  const pcy_tensor* y = nullptr;  // output (INOUT for the in-place forms)
  uint64_t n = 0;
  double alpha = 0; // elu
};

namespace detail {
template <const pcy_op_schema& S>
PCY_SDK_HOT inline uint64_t same_count(const sdk::decoder<S>& dc, const pcy_tensor& t, uint32_t k,
                                       uint64_t n) {
  const uint64_t m = dc.elements(t, k);
  if (m != n) dc.bad(PCY_ERR_INVALID_ARGUMENT, k, str(m, " elements, expected ", n));
  return m;
}
// Tensor t (argument k) has the shape of `like`; else an error ending in `why`.
template <const pcy_op_schema& S>
PCY_SDK_HOT inline void same_shape(const sdk::decoder<S>& dc, const pcy_tensor& t, uint32_t k,
                                   const pcy_tensor& like, const char* why) {
  bool same = t.ndim == like.ndim;
  for (int32_t i = 0; same && i < t.ndim; ++i)
    same = t.shape[i] == like.shape[i];
  if (!same) dc.bad(PCY_ERR_INVALID_ARGUMENT, k, why);
}
template <const pcy_op_schema& S> constexpr bool has(const char* name) {
  for (uint32_t i = 0; i < S.arg_count; ++i)
    if (std::string_view(S.args[i].name) == name) return true;
  return false;
}
} // namespace detail

// <act>(x, y[, alpha]) and <act>_pointwise(x[, alpha]).
template <const pcy_op_schema& S>
PCY_SDK_HOT inline eltwise_call decode_act(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  eltwise_call c;
  constexpr uint32_t X = at<S>("x");
  c.x = &dc.tensor(X);
  c.n = dc.elements(*c.x, X);
  if constexpr (detail::has<S>("y")) {
    constexpr uint32_t Y = at<S>("y");
    c.y = &dc.tensor(Y);
    detail::same_count(dc, *c.y, Y, c.n);
  } else {
    c.y = c.x;
  }
  if constexpr (detail::has<S>("alpha")) {
    c.alpha = a.f(at<S>("alpha"));
    if (!std::isfinite(c.alpha)) dc.bad(PCY_ERR_INVALID_ARGUMENT, at<S>("alpha"), "not finite");
  }
  return c;
}
// <act>_grad(y, dy, dx[, alpha]) and <act>_pointwise_grad(y, d[, alpha]): c.x = y, c.dy = dy
// (or d), c.y = dx (or d).
template <const pcy_op_schema& S>
PCY_SDK_HOT inline eltwise_call decode_act_grad(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  eltwise_call c;
  constexpr uint32_t Y = at<S>("y");
  c.x = &dc.tensor(Y);
  c.n = dc.elements(*c.x, Y);
  if constexpr (detail::has<S>("dx")) {
    constexpr uint32_t DY = at<S>("dy"), DX = at<S>("dx");
    c.dy = &dc.tensor(DY);
    detail::same_count(dc, *c.dy, DY, c.n);
    c.y = &dc.tensor(DX);
    detail::same_count(dc, *c.y, DX, c.n);
  } else {
    constexpr uint32_t D = at<S>("d");
    c.dy = &dc.tensor(D);
    detail::same_count(dc, *c.dy, D, c.n);
    c.y = c.dy;
  }
  if constexpr (detail::has<S>("alpha")) {
    c.alpha = a.f(at<S>("alpha"));
    if (!std::isfinite(c.alpha)) dc.bad(PCY_ERR_INVALID_ARGUMENT, at<S>("alpha"), "not finite");
  }
  return c;
}

// ---- softmax ------------------------------------------------------------------------------

struct softmax_call {
  const pcy_tensor* x = nullptr;  // forward: x; gradient: y
  const pcy_tensor* dy = nullptr; // gradient only
  const pcy_tensor* y = nullptr;  // forward: y; gradient: dx
  uint64_t outer = 0, len = 0, inner = 0;
};

template <const pcy_op_schema& S>
PCY_SDK_HOT inline softmax_call decode_softmax(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  softmax_call c;
  constexpr bool grad = detail::has<S>("dx");
  constexpr uint32_t IN = at<S>(grad ? "y" : "x"), OUT = at<S>(grad ? "dx" : "y"),
                     AX = at<S>("axis");
  c.x = &dc.tensor(IN);
  const uint64_t n = dc.elements(*c.x, IN);
  const int64_t axis = a.i(AX);
  if (axis < 0 || axis >= c.x->ndim)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, AX, str(axis, " is outside the ", c.x->ndim, " dimensions"));
  auto same_shape = [&](const pcy_tensor& t, uint32_t k) {
    detail::same_shape(dc, t, k, *c.x, "its shape differs from the input's");
  };
  c.y = &dc.tensor(OUT);
  same_shape(*c.y, OUT);
  if constexpr (grad) {
    constexpr uint32_t DY = at<S>("dy");
    c.dy = &dc.tensor(DY);
    same_shape(*c.dy, DY);
  }
  c.outer = 1;
  c.inner = 1;
  for (int32_t i = 0; i < c.x->ndim; ++i) {
    const auto e = static_cast<uint64_t>(c.x->shape[i]);
    if (i < axis) c.outer *= e; // no overflow: the product of all extents is n
    if (i > axis) c.inner *= e;
  }
  c.len = static_cast<uint64_t>(c.x->shape[axis]);
  (void)n;
  return c;
}

// ---- normalisation (layer_norm, rms_norm and their gradients) ------------------------------

// The statistics dtype of an op's dtype (pcy_nn.h): f64 for f64, f32 otherwise.
constexpr pcy_dtype norm_stat_dtype(pcy_dtype d) { return PCY_NN_STATISTICS_DTYPE(d); }

namespace detail {
// A statistics tensor (argument k) of an op of dtype d: the statistics dtype, `want` elements
// (or none where `optional`: then null).
template <const pcy_op_schema& S>
PCY_SDK_HOT inline const pcy_tensor* stat_tensor(const sdk::decoder<S>& dc, uint32_t k, pcy_dtype d,
                                                 uint64_t want, bool optional,
                                                 const char* per = "one per row") {
  const pcy_tensor& t = dc.tensor(k);
  if (t.dtype != norm_stat_dtype(d))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k,
           str("dtype ", sdk::dtype_name(t.dtype), ", expected ",
               sdk::dtype_name(norm_stat_dtype(d)), " (the statistics dtype of ",
               sdk::dtype_name(d), ")"));
  const uint64_t m = dc.elements(t, k);
  if (optional && m == 0) return nullptr;
  if (m != want)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k,
           str(m, " elements, expected ", want, " (", per, ")", optional ? " or 0" : ""));
  return &t;
}
// An optional output of the op's dtype (argument k): `want` elements, or 0 (then null).
template <const pcy_op_schema& S>
PCY_SDK_HOT inline const pcy_tensor* optional_param(const sdk::decoder<S>& dc, uint32_t k,
                                                    uint64_t want) {
  const pcy_tensor& t = dc.tensor(k);
  const uint64_t m = dc.elements(t, k);
  if (m == 0 && want != 0) return nullptr;
  if (m != want)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k, str(m, " elements, expected ", want, " or 0 (absent)"));
  return &t;
}
} // namespace detail

struct norm_call {
  const pcy_tensor* x = nullptr;
  const pcy_tensor* weight = nullptr;
  const pcy_tensor* bias = nullptr;    // layer_norm only
  const pcy_tensor* y = nullptr;       // forward: y; gradient: dx
  const pcy_tensor* mean = nullptr;    // layer_norm's; null for rms_norm or when not saved
  const pcy_tensor* rstd = nullptr;    // null when not saved (forward)
  const pcy_tensor* dy = nullptr;      // gradient only
  const pcy_tensor* dweight = nullptr; // gradient only
  const pcy_tensor* dbias = nullptr;   // layer_norm_grad only
  uint64_t outer = 0, n = 0;
  double epsilon = 0; // forward only
};

template <const pcy_op_schema& S>
PCY_SDK_HOT inline norm_call decode_norm(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  norm_call c;
  constexpr bool grad = detail::has<S>("dx");
  constexpr bool layer = detail::has<S>("mean");
  constexpr uint32_t X = at<S>("x"), W = at<S>("weight"), AX = at<S>("axis");
  c.x = &dc.tensor(X);
  const uint64_t total = dc.elements(*c.x, X);
  const int64_t axis = a.i(AX);
  if (axis < 0 || axis >= c.x->ndim)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, AX, str(axis, " is outside the ", c.x->ndim, " dimensions"));
  c.outer = 1;
  c.n = 1;
  for (int32_t i = 0; i < c.x->ndim; ++i)
    (i < axis ? c.outer : c.n) *= static_cast<uint64_t>(c.x->shape[i]); // no overflow: total
  (void)total;
  auto same_shape = [&](const pcy_tensor& t, uint32_t k) {
    detail::same_shape(dc, t, k, *c.x, "its shape differs from the input's");
  };
  auto stat = [&](uint32_t k, bool optional) {
    return detail::stat_tensor(dc, k, d, c.outer, optional);
  };
  c.weight = &dc.tensor(W);
  detail::same_count(dc, *c.weight, W, c.n);
  if constexpr (!grad) {
    constexpr uint32_t Y = at<S>("y"), R = at<S>("rstd"), E = at<S>("epsilon");
    c.y = &dc.tensor(Y);
    same_shape(*c.y, Y);
    if constexpr (layer) {
      constexpr uint32_t B = at<S>("bias");
      c.bias = &dc.tensor(B);
      detail::same_count(dc, *c.bias, B, c.n);
      c.mean = stat(at<S>("mean"), true);
    }
    c.rstd = stat(R, true);
    c.epsilon = a.f(E);
    if (!(c.epsilon >= 0) || !std::isfinite(c.epsilon))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, E, str(c.epsilon, ", expected a finite value >= 0"));
  } else {
    constexpr uint32_t DY = at<S>("dy"), DX = at<S>("dx"), DW = at<S>("dweight");
    if constexpr (layer) {
      constexpr uint32_t DB = at<S>("dbias");
      c.mean = stat(at<S>("mean"), false);
      c.dbias = &dc.tensor(DB);
      detail::same_count(dc, *c.dbias, DB, c.n);
    }
    c.rstd = stat(at<S>("rstd"), false);
    c.dy = &dc.tensor(DY);
    same_shape(*c.dy, DY);
    c.y = &dc.tensor(DX);
    same_shape(*c.y, DX);
    c.dweight = &dc.tensor(DW);
    detail::same_count(dc, *c.dweight, DW, c.n);
  }
  return c;
}

// ---- cross entropy ----------------------------------------------------------------------------

struct xent_call {
  const pcy_tensor* logits = nullptr;
  const pcy_tensor* labels = nullptr;
  const pcy_tensor* loss = nullptr;    // forward only
  const pcy_tensor* lse = nullptr;     // forward: null when not saved
  const pcy_tensor* dloss = nullptr;   // gradient only
  const pcy_tensor* dlogits = nullptr; // gradient only
  uint64_t rows = 0, classes = 0;
  int64_t ignore_index = -100;
  double smoothing = 0;
  int reduction = 1; // 0 none, 1 mean, 2 sum
};

template <const pcy_op_schema& S>
PCY_SDK_HOT inline xent_call decode_xent(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  xent_call c;
  constexpr bool grad = detail::has<S>("dlogits");
  constexpr uint32_t L = at<S>("logits"), T = at<S>("labels"), E = at<S>("lse"),
                     II = at<S>("ignore_index"), LS = at<S>("label_smoothing"),
                     R = at<S>("reduction");
  c.logits = &dc.tensor(L);
  (void)dc.elements(*c.logits, L);
  if (c.logits->ndim < 1) dc.bad(PCY_ERR_INVALID_ARGUMENT, L, "a scalar, expected rank >= 1");
  c.classes = static_cast<uint64_t>(c.logits->shape[c.logits->ndim - 1]);
  c.rows = 1;
  for (int32_t i = 0; i + 1 < c.logits->ndim; ++i)
    c.rows *= static_cast<uint64_t>(c.logits->shape[i]); // no overflow: the element count
  c.labels = &dc.tensor(T);
  const uint64_t nl = dc.elements(*c.labels, T);
  if (nl != c.rows)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, T, str(nl, " elements, expected ", c.rows, " (one per row)"));
  c.ignore_index = a.i(II);
  c.smoothing = a.f(LS);
  if (!(c.smoothing >= 0 && c.smoothing <= 1))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, LS, str(c.smoothing, ", expected a value in [0, 1]"));
  const int64_t r = a.i(R);
  if (r < 0 || r > 2)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, R, str(r, ", expected 0 (none), 1 (mean) or 2 (sum)"));
  c.reduction = static_cast<int>(r);
  const uint64_t per = c.reduction == 0 ? c.rows : 1;
  auto loss_like = [&](uint32_t k) { // loss or dloss: one per row, or the reduced one
    const pcy_tensor& t = dc.tensor(k);
    const uint64_t m = dc.elements(t, k);
    if (m != per)
      dc.bad(PCY_ERR_INVALID_ARGUMENT, k,
             str(m, " elements, expected ", per,
                 c.reduction == 0 ? " (one per row: reduction none)" : " (a reduced loss)"));
    return &t;
  };
  if constexpr (!grad) {
    constexpr uint32_t LO = at<S>("loss");
    c.loss = loss_like(LO);
    c.lse = detail::stat_tensor(dc, E, d, c.rows, true);
  } else {
    constexpr uint32_t DL = at<S>("dloss"), DX = at<S>("dlogits");
    c.lse = detail::stat_tensor(dc, E, d, c.rows, false);
    c.dloss = loss_like(DL);
    c.dlogits = &dc.tensor(DX);
    detail::same_shape(dc, *c.dlogits, DX, *c.logits, "its shape differs from the logits'");
  }
  return c;
}

// ---- batch normalisation -------------------------------------------------------------------

struct bn_call {
  const pcy_tensor* x = nullptr;
  const pcy_tensor* weight = nullptr;
  const pcy_tensor* bias = nullptr;          // forward only
  const pcy_tensor* running_mean = nullptr;  // forward; null when absent
  const pcy_tensor* running_var = nullptr;   // forward; null when absent
  const pcy_tensor* y = nullptr;             // forward: y; gradient: dx
  const pcy_tensor* mean = nullptr;          // forward: save_mean (null: not saved); gradient
  const pcy_tensor* rstd = nullptr;          // forward: save_rstd (null: not saved); gradient
  const pcy_tensor* dy = nullptr;            // gradient only
  const pcy_tensor* dweight = nullptr;       // gradient; null when not computed
  const pcy_tensor* dbias = nullptr;         // gradient; null when not computed
  uint64_t N = 0, C = 0, spatial = 0, M = 0; // M = N spatial, the elements of a channel
  bool training = false;
  double momentum = 0, epsilon = 0; // forward only
};

template <const pcy_op_schema& S>
PCY_SDK_HOT inline bn_call decode_bn(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  bn_call c;
  constexpr bool grad = detail::has<S>("dx");
  constexpr uint32_t X = at<S>("x"), W = at<S>("weight"), TR = at<S>("training");
  c.x = &dc.tensor(X);
  (void)dc.elements(*c.x, X);
  if (c.x->ndim < 2)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, X,
           str("rank ", c.x->ndim, ", expected rank >= 2 (N x C x spatial)"));
  c.N = static_cast<uint64_t>(c.x->shape[0]);
  c.C = static_cast<uint64_t>(c.x->shape[1]);
  c.spatial = 1;
  for (int32_t i = 2; i < c.x->ndim; ++i)
    c.spatial *= static_cast<uint64_t>(c.x->shape[i]);
  // M = N spatial <= the element count where N, C > 0; where N == 0 the product of the spatial
  // extents may wrap, but M is 0 and no kernel indexes with it; where C == 0 nothing is read.
  c.M = c.C != 0 ? c.N * c.spatial : 0;
  c.training = dc.flag(TR);
  auto same_shape = [&](const pcy_tensor& t, uint32_t k) {
    detail::same_shape(dc, t, k, *c.x, "its shape differs from the input's");
  };
  auto stat = [&](uint32_t k, bool optional) {
    return detail::stat_tensor(dc, k, d, c.C, optional, "one per channel");
  };
  c.weight = &dc.tensor(W);
  detail::same_count(dc, *c.weight, W, c.C);
  if constexpr (!grad) {
    constexpr uint32_t B = at<S>("bias"), RM = at<S>("running_mean"), RV = at<S>("running_var"),
                       Y = at<S>("y"), SM = at<S>("save_mean"), SR = at<S>("save_rstd"),
                       MO = at<S>("momentum"), E = at<S>("epsilon");
    c.bias = &dc.tensor(B);
    detail::same_count(dc, *c.bias, B, c.C);
    c.running_mean = stat(RM, true);
    c.running_var = stat(RV, true);
    c.y = &dc.tensor(Y);
    same_shape(*c.y, Y);
    c.mean = stat(SM, true);
    c.rstd = stat(SR, true);
    c.momentum = a.f(MO);
    if (!(c.momentum >= 0 && c.momentum <= 1))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, MO, str(c.momentum, ", expected a value in [0, 1]"));
    c.epsilon = a.f(E);
    if (!(c.epsilon > 0) || !std::isfinite(c.epsilon))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, E, str(c.epsilon, ", expected a finite value > 0"));
    if (c.C != 0 && c.training && c.M < 2)
      dc.bad(PCY_ERR_INVALID_ARGUMENT, X,
             str(c.M, " value(s) per channel (N x spatial), expected more than 1 when training"));
    if (c.C != 0 && !c.training && (!c.running_mean || !c.running_var))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, c.running_mean ? RV : RM,
             "absent (0 elements), required when not training");
  } else {
    constexpr uint32_t MN = at<S>("mean"), R = at<S>("rstd"), DY = at<S>("dy"), DX = at<S>("dx"),
                       DW = at<S>("dweight"), DB = at<S>("dbias");
    c.mean = stat(MN, false);
    c.rstd = stat(R, false);
    c.dy = &dc.tensor(DY);
    same_shape(*c.dy, DY);
    c.y = &dc.tensor(DX);
    same_shape(*c.y, DX);
    c.dweight = detail::optional_param(dc, DW, c.C);
    c.dbias = detail::optional_param(dc, DB, c.C);
  }
  return c;
}

// ---- embedding ----------------------------------------------------------------------------

struct embedding_call {
  const pcy_tensor* weight = nullptr; // forward: weight; gradient: dweight
  const pcy_tensor* indices = nullptr;
  const pcy_tensor* y = nullptr; // forward: y; gradient: dy
  uint64_t V = 0, D = 0, n = 0;  // n: the number of indices
  int64_t padding_idx = -1;
};

// embedding(weight, indices, y, padding_idx) and embedding_grad(indices, dy, dweight,
// padding_idx): the table (weight or dweight) V x D, y or dy of the shape of indices + [D].
// V and N below 2^31 (i32 indices; the kernels' 64-bit sort keys hold an index and a position
// in 32 bits each).
template <const pcy_op_schema& S>
PCY_SDK_HOT inline embedding_call decode_embedding(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  embedding_call c;
  constexpr bool grad = detail::has<S>("dweight");
  constexpr uint32_t W = at<S>(grad ? "dweight" : "weight"), I = at<S>("indices"),
                     Y = at<S>(grad ? "dy" : "y"), P = at<S>("padding_idx");
  c.weight = &dc.tensor(W);
  if (c.weight->ndim != 2 || c.weight->shape == nullptr)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, W, str(c.weight->ndim, " dimensions, expected 2 (V x D)"));
  (void)dc.elements(*c.weight, W);
  c.V = static_cast<uint64_t>(c.weight->shape[0]);
  c.D = static_cast<uint64_t>(c.weight->shape[1]);
  if (c.V >= (uint64_t{1} << 31))
    dc.bad(PCY_ERR_UNSUPPORTED, W, str(c.V, " rows, at most 2^31 - 1 (i32 indices)"));
  c.indices = &dc.tensor(I);
  c.n = dc.elements(*c.indices, I);
  if (c.n >= (uint64_t{1} << 31))
    dc.bad(PCY_ERR_UNSUPPORTED, I, str(c.n, " indices, at most 2^31 - 1"));
  c.y = &dc.tensor(Y);
  (void)dc.elements(*c.y, Y);
  bool same = c.y->ndim == c.indices->ndim + 1 && c.y->shape != nullptr &&
              static_cast<uint64_t>(c.y->shape[c.y->ndim - 1]) == c.D;
  for (int32_t i = 0; same && i < c.indices->ndim; ++i)
    same = c.y->shape[i] == c.indices->shape[i];
  if (!same)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, Y,
           str("its shape is not the shape of indices followed by D = ", c.D));
  c.padding_idx = a.i(P);
  if (c.padding_idx != -1 && (c.padding_idx < 0 || static_cast<uint64_t>(c.padding_idx) >= c.V))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, P,
           str(c.padding_idx, ", expected -1 (none) or a row in [0, ", c.V, ")"));
  return c;
}

// ---- geometry -----------------------------------------------------------------------------

// A geometry pair (height, width) with every value >= lo.
template <const pcy_op_schema& S>
PCY_SDK_HOT inline std::array<int64_t, 2> pair_arg(const sdk::decoder<S>& dc, uint32_t k,
                                                   int64_t lo) {
  const auto v = dc.ints(k, 2);
  if (v[0] < lo || v[1] < lo) dc.bad(PCY_ERR_INVALID_ARGUMENT, k, str("values must be >= ", lo));
  if (v[0] >= (int64_t{1} << 31) || v[1] >= (int64_t{1} << 31))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k, "values must be < 2^31");
  return {v[0], v[1]};
}

// The output extent (in + 2 pad - dil (k - 1) - 1) / stride + 1, or -1 where the window does not
// fit. Inputs are < 2^31 each (checked by the callers), so nothing overflows.
inline int64_t out_extent(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  const int64_t span = dil * (k - 1) + 1, padded = in + 2 * pad;
  return padded < span ? -1 : (padded - span) / stride + 1;
}

template <const pcy_op_schema& S>
void dims4(const sdk::decoder<S>& dc, const pcy_tensor& t, uint32_t k, int64_t (&d)[4]) {
  if (t.ndim != 4 || t.shape == nullptr)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k, str(t.ndim, " dimensions, expected 4"));
  (void)dc.elements(t, k); // negative or overflowing extents refused
  for (int i = 0; i < 4; ++i) {
    d[i] = t.shape[i];
    if (d[i] >= (int64_t{1} << 31)) dc.bad(PCY_ERR_UNSUPPORTED, k, "an extent of 2^31 or more");
  }
}

// ---- convolution --------------------------------------------------------------------------

struct conv_call {
  const pcy_tensor *x = nullptr, *w = nullptr, *y = nullptr; // x, w, y (or dx / dw / dy)
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, P = 0, Q = 0;
  std::array<int64_t, 2> stride{}, pad{}, dil{};
  int64_t groups = 1;
  int64_t algorithm = 0;
  int64_t math = 0;
};

namespace detail {
// The geometry shared by the convolution ops and convolution_algorithm, from the shapes of x and
// w (arrays of 4): checks groups, channel counts and that the output has at least one element.
template <const pcy_op_schema& S>
void conv_geometry(const sdk::decoder<S>& dc, const sdk::op_args& a, conv_call& c, uint32_t xk,
                   uint32_t wk) {
  c.stride = pair_arg(dc, at<S>("stride"), 1);
  c.pad = pair_arg(dc, at<S>("padding"), 0);
  c.dil = pair_arg(dc, at<S>("dilation"), 1);
  constexpr uint32_t G = at<S>("groups");
  c.groups = a.i(G);
  if (c.groups < 1 || c.C % c.groups != 0 || c.K % c.groups != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, G,
           str(c.groups, " must be >= 1 and divide the ", c.C, " input and ", c.K,
               " output channels"));
  if (c.R < 1 || c.S < 1) dc.bad(PCY_ERR_INVALID_ARGUMENT, wk, "a filter extent below 1");
  (void)xk;
  c.P = out_extent(c.H, c.R, c.stride[0], c.pad[0], c.dil[0]);
  c.Q = out_extent(c.W, c.S, c.stride[1], c.pad[1], c.dil[1]);
  if (c.P < 1 || c.Q < 1)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, wk,
           "the filter (with dilation) is wider than the input plus padding");
}
template <const pcy_op_schema& S>
void conv_check_shape(const sdk::decoder<S>& dc, const pcy_tensor& t, uint32_t k, int64_t a0,
                      int64_t a1, int64_t a2, int64_t a3) {
  if (t.shape[0] != a0 || t.shape[1] != a1 || t.shape[2] != a2 || t.shape[3] != a3)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, k,
           str("shape [", t.shape[0], ", ", t.shape[1], ", ", t.shape[2], ", ", t.shape[3],
               "] expected [", a0, ", ", a1, ", ", a2, ", ", a3, "]"));
}
} // namespace detail

// convolution(x, w, y), convolution_grad_data(w, dy, dx), convolution_grad_filter(x, dy, dw):
// c.x is x (or dx), c.w is w (or dw), c.y is y (or dy).
template <const pcy_op_schema& S> conv_call decode_conv(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  conv_call c;
  constexpr bool fwd = detail::has<S>("y"), data = detail::has<S>("dx");
  constexpr uint32_t XK = at<S>(fwd || !data ? "x" : "dx");
  constexpr uint32_t WK = at<S>(data || fwd ? "w" : "dw");
  constexpr uint32_t YK = at<S>(fwd ? "y" : "dy");
  c.x = &dc.tensor(XK);
  c.w = &dc.tensor(WK);
  c.y = &dc.tensor(YK);
  int64_t xd[4], wd[4], yd[4];
  dims4(dc, *c.x, XK, xd);
  dims4(dc, *c.w, WK, wd);
  dims4(dc, *c.y, YK, yd);
  c.N = xd[0], c.C = xd[1], c.H = xd[2], c.W = xd[3];
  c.K = wd[0], c.R = wd[2], c.S = wd[3];
  detail::conv_geometry(dc, a, c, XK, WK);
  if (wd[1] * c.groups != c.C)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, WK,
           str(wd[1], " channels per group x ", c.groups, " groups != ", c.C, " input channels"));
  detail::conv_check_shape(dc, *c.y, YK, c.N, c.K, c.P, c.Q);
  constexpr uint32_t AL = at<S>("algorithm"), MA = at<S>("math");
  c.algorithm = a.i(AL);
  if (c.algorithm < 0) dc.bad(PCY_ERR_INVALID_ARGUMENT, AL, str(c.algorithm, " < 0"));
  c.math = a.i(MA);
  if (c.math < 0 || c.math > 2)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, MA, str(c.math, ", expected 0, 1 or 2"));
  return c;
}

struct conv_algorithm_call {
  conv_call g;           // geometry only (no tensors)
  int64_t direction = 0; // 0 forward, 1 grad_data, 2 grad_filter
  int64_t requested = -1;
  const pcy_tensor* result = nullptr;
  uint64_t result_count = 2; // 2: {algorithm, workspace}; 3: numerics too
};

inline conv_algorithm_call decode_conv_algorithm(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_nn_convolution_algorithm_schema;
  const sdk::decoder<S> dc(a, d);
  conv_algorithm_call c;
  constexpr uint32_t DIR = at<S>("direction"), XS = at<S>("x_shape"), WS = at<S>("w_shape"),
                     REQ = at<S>("requested"), MA = at<S>("math"), RES = at<S>("result");
  c.direction = a.i(DIR);
  if (c.direction < 0 || c.direction > 2)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, DIR, str(c.direction, ", expected 0, 1 or 2"));
  const auto xs = dc.ints(XS, 4), ws = dc.ints(WS, 4);
  for (int i = 0; i < 4; ++i) {
    if (xs[i] < 0 || xs[i] >= (int64_t{1} << 31))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, XS, "extents must be in [0, 2^31)");
    if (ws[i] < 1 || ws[i] >= (int64_t{1} << 31))
      dc.bad(PCY_ERR_INVALID_ARGUMENT, WS, "extents must be in [1, 2^31)");
  }
  c.g.N = xs[0], c.g.C = xs[1], c.g.H = xs[2], c.g.W = xs[3];
  c.g.K = ws[0], c.g.R = ws[2], c.g.S = ws[3];
  detail::conv_geometry(dc, a, c.g, XS, WS);
  if (ws[1] * c.g.groups != c.g.C)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, WS, "channels per group x groups != input channels");
  c.requested = a.i(REQ);
  if (c.requested < -2) dc.bad(PCY_ERR_INVALID_ARGUMENT, REQ, str(c.requested, " < -2"));
  c.g.math = a.i(MA);
  if (c.g.math < 0 || c.g.math > 2)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, MA, str(c.g.math, ", expected 0, 1 or 2"));
  c.result = &dc.tensor(RES);
  c.result_count = dc.elements(*c.result, RES);
  if (c.result_count != 2 && c.result_count != 3)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, RES,
           "expected 2 or 3 elements (algorithm, workspace bytes[, numerics])");
  return c;
}

// convolution_bias(y, bias) and convolution_grad_bias(dy, db): c.y the image, c.w the vector
// (K = its length; C, H, W unused; P, Q the image's plane).
template <const pcy_op_schema& S> conv_call decode_bias(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  conv_call c;
  constexpr bool fwd = detail::has<S>("bias");
  constexpr uint32_t YK = at<S>(fwd ? "y" : "dy"), BK = at<S>(fwd ? "bias" : "db");
  c.y = &dc.tensor(YK);
  c.w = &dc.tensor(BK);
  int64_t yd[4];
  dims4(dc, *c.y, YK, yd);
  c.N = yd[0], c.K = yd[1], c.P = yd[2], c.Q = yd[3];
  if (c.w->ndim != 1 || c.w->shape == nullptr || c.w->shape[0] != c.K)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, BK, str("expected a vector of ", c.K, " values"));
  return c;
}

// ---- pooling ------------------------------------------------------------------------------

struct pool_call {
  // forward: x, y (and indices); pooling_max_grad: x, y, dy, dx; pooling_max_grad_indexed: dy,
  // indices, dx; pooling_avg_grad: dy, dx. Absent ones stay null.
  const pcy_tensor *x = nullptr, *y = nullptr, *dy = nullptr, *dx = nullptr;
  const pcy_tensor* indices = nullptr;
  int64_t N = 0, C = 0, H = 0, W = 0, P = 0, Q = 0; // input plane H x W, pooled P x Q
  std::array<int64_t, 2> win{1, 1}, stride{1, 1}, pad{0, 0};
  bool include_padding = true;
};

namespace detail {
template <const pcy_op_schema& S> void pool_geometry(const sdk::decoder<S>& dc, pool_call& c) {
  constexpr uint32_t WI = at<S>("window"), ST = at<S>("stride"), PA = at<S>("padding");
  c.win = pair_arg(dc, WI, 1);
  c.stride = pair_arg(dc, ST, 1);
  c.pad = pair_arg(dc, PA, 0);
  if (2 * c.pad[0] > c.win[0] || 2 * c.pad[1] > c.win[1])
    dc.bad(PCY_ERR_INVALID_ARGUMENT, PA, "larger than half the window");
  const int64_t P = out_extent(c.H, c.win[0], c.stride[0], c.pad[0], 1),
                Q = out_extent(c.W, c.win[1], c.stride[1], c.pad[1], 1);
  if (P < 0 || Q < 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, WI, "the window is wider than the input plus padding");
  if (c.H == 0 || c.W == 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, WI,
           "the input plane is empty: every window would hold only padding");
  if (P != c.P || Q != c.Q)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, WI,
           str("the pooled plane is ", c.P, " x ", c.Q, ", the geometry gives ", P, " x ", Q));
}
template <const pcy_op_schema& S>
void same4(const sdk::decoder<S>& dc, const pcy_tensor& t, uint32_t k, const pcy_tensor& like,
           const char* like_name) {
  for (int i = 0; i < 4; ++i)
    if (t.shape[i] != like.shape[i])
      dc.bad(PCY_ERR_INVALID_ARGUMENT, k, str("its shape differs from ", like_name, "'s"));
}
} // namespace detail

// Every pooling op.
template <const pcy_op_schema& S> pool_call decode_pool(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  pool_call c;
  constexpr bool grad = detail::has<S>("dx");
  constexpr uint32_t PLANE = at<S>(grad ? "dx" : "x"), POOLED = at<S>(grad ? "dy" : "y");
  const pcy_tensor& plane = dc.tensor(PLANE);
  const pcy_tensor& pooled = dc.tensor(POOLED);
  int64_t xd[4], yd[4];
  dims4(dc, plane, PLANE, xd);
  dims4(dc, pooled, POOLED, yd);
  c.N = xd[0], c.C = xd[1], c.H = xd[2], c.W = xd[3], c.P = yd[2], c.Q = yd[3];
  if (yd[0] != c.N || yd[1] != c.C)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, POOLED, "its N and C differ from the input plane's");
  if (c.H * c.W >= (int64_t{1} << 31))
    dc.bad(PCY_ERR_UNSUPPORTED, PLANE, "a plane of 2^31 elements or more (i32 indices)");
  if constexpr (grad) {
    c.dx = &plane;
    c.dy = &pooled;
  } else {
    c.x = &plane;
    c.y = &pooled;
  }
  if constexpr (detail::has<S>("window")) detail::pool_geometry(dc, c);
  if constexpr (detail::has<S>("indices")) {
    constexpr uint32_t IK = at<S>("indices");
    c.indices = &dc.tensor(IK);
    detail::same4(dc, *c.indices, IK, pooled, grad ? "dy" : "y");
  }
  if constexpr (grad && detail::has<S>("x")) { // pooling_max_grad(x, y, dy, dx)
    constexpr uint32_t FX = at<S>("x"), FY = at<S>("y");
    c.x = &dc.tensor(FX);
    detail::same4(dc, *c.x, FX, plane, "dx");
    c.y = &dc.tensor(FY);
    detail::same4(dc, *c.y, FY, pooled, "dy");
  }
  if constexpr (detail::has<S>("include_padding"))
    c.include_padding = dc.flag(at<S>("include_padding"));
  return c;
}

// ---- LRN ----------------------------------------------------------------------------------

struct lrn_call {
  const pcy_tensor *x = nullptr, *y = nullptr, *dy = nullptr, *dx = nullptr;
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t n = 1;
  double alpha = 0, beta = 0, k = 1;
};

template <const pcy_op_schema& S> lrn_call decode_lrn(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  lrn_call c;
  constexpr uint32_t XK = at<S>("x"), YK = at<S>("y"), NK = at<S>("n"), AK = at<S>("alpha"),
                     BK = at<S>("beta"), KK = at<S>("k");
  c.x = &dc.tensor(XK);
  int64_t xd[4];
  dims4(dc, *c.x, XK, xd);
  c.N = xd[0], c.C = xd[1], c.H = xd[2], c.W = xd[3];
  auto like_x = [&](const pcy_tensor& t, uint32_t k) {
    for (int i = 0; i < 4; ++i)
      if (t.shape[i] != xd[i]) dc.bad(PCY_ERR_INVALID_ARGUMENT, k, "its shape differs from x's");
  };
  c.y = &dc.tensor(YK);
  like_x(*c.y, YK);
  if constexpr (detail::has<S>("dx")) {
    constexpr uint32_t DYK = at<S>("dy"), DXK = at<S>("dx");
    c.dy = &dc.tensor(DYK);
    like_x(*c.dy, DYK);
    c.dx = &dc.tensor(DXK);
    like_x(*c.dx, DXK);
  }
  c.n = a.i(NK);
  if (c.n < 1 || c.n >= (int64_t{1} << 31))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, NK, str(c.n, ", expected >= 1"));
  c.alpha = a.f(AK);
  c.beta = a.f(BK);
  c.k = a.f(KK);
  if (!std::isfinite(c.alpha)) dc.bad(PCY_ERR_INVALID_ARGUMENT, AK, "not finite");
  if (!(c.beta >= 0) || !std::isfinite(c.beta))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, BK, "expected finite and >= 0");
  if (!(c.k > 0) || !std::isfinite(c.k))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, KK, "expected finite and > 0");
  return c;
}

// ---- dropout ------------------------------------------------------------------------------

struct dropout_call {
  const pcy_tensor *x = nullptr, *y = nullptr, *mask = nullptr; // grad: x = dy, y = dx
  uint64_t n = 0;
  double probability = 0;
  uint64_t seed = 0;
  uint32_t threshold = 0; // keep iff (mix >> 40) >= threshold
  double scale = 1;       // 1 / (1 - p), 0 when p == 1
};

template <const pcy_op_schema& S> dropout_call decode_dropout(const sdk::op_args& a, pcy_dtype d) {
  const sdk::decoder<S> dc(a, d);
  dropout_call c;
  constexpr bool grad = detail::has<S>("dx");
  constexpr uint32_t XK = at<S>(grad ? "dy" : "x"), YK = at<S>(grad ? "dx" : "y"),
                     MK = at<S>("mask"), PK = at<S>("probability");
  c.x = &dc.tensor(XK);
  c.n = dc.elements(*c.x, XK);
  c.y = &dc.tensor(YK);
  detail::same_count(dc, *c.y, YK, c.n);
  c.mask = &dc.tensor(MK);
  detail::same_count(dc, *c.mask, MK, c.n);
  c.probability = a.f(PK);
  if (!(c.probability >= 0 && c.probability <= 1))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, PK, str(c.probability, ", expected 0 <= p <= 1"));
  if constexpr (!grad) c.seed = static_cast<uint64_t>(a.i(at<S>("seed")));
  c.threshold = PCY_NN_DROPOUT_THRESHOLD(c.probability);
  c.scale = c.probability >= 1 ? 0.0 : 1.0 / (1.0 - c.probability);
  return c;
}

// The dropout decision for element i (pcy_nn.h), on the host.
inline bool dropout_keep(uint64_t seed, uint64_t i, uint32_t threshold) noexcept {
  uint64_t z = 0;
  PCY_NN_DROPOUT_MIX(seed, i, z);
  return (z >> 40) >= threshold;
}

// Vendor APIs index with 32-bit ints: refuse what does not fit instead of wrapping.
PCY_SDK_HOT inline int to_int(int64_t v, const pcy_op_schema& s, const char* what) {
  return sdk::to_int(v, s, what);
}

} // namespace parenchyma::nn_bundle
