// parenchyma-conformance: the NN bundle suite. Every op of pcy_nn.h in f32 and f64 (and f16 /
// bf16 where the framework's bundle serves them) runs through the front-end parenchyma/nn.hpp on
// a backend of the framework under test, on fresh random data of awkward sizes (1, primes,
// non-square planes), and is compared with a double-precision reference written from the
// semantics in pcy_nn.h (nn_reference.hpp). Outputs start as NaN, so an element the op forgets
// shows. Edge cases: NaN, -0 and huge inputs of the activations; softmax along every axis, rows
// of length 1 and values whose exponentials overflow; convolutions over strides, paddings,
// dilations, groups, non-square and 1x1 filters and a filter as wide as the padded input, with
// every algorithm the bundle offers, gradients also checked by finite differences in f64;
// pooling with overlapping windows, padding up to half the window, ties and NaN; LRN windows
// even, odd and wider than C; dropout's exact splitmix64 mask; cross_entropy with ignored rows,
// label smoothing, every reduction, logits far from zero, NaN rows and labels outside the
// classes; embedding with repeated, padding and outside indices, its gradient bit for bit
// against the sum in position order; batch_norm in training and evaluation over awkward shapes,
// a large batch, data far from zero, NaN and infinite channels and absent statistics. Every op a
// bundle may hand to a vendor library (activations, softmax, LRN, average pooling, convolution)
// also runs on the input classes of input_classes.hpp (non-finite, huge, tiny, wide-range,
// cancellation) at sizes that take the library's path, in f32 and f64. A cell the bundle does not
// serve here (errc::unsupported, or an op that ran on another framework by fallback) skips its
// case, or fails it with --require-ops; f64 cells on a device that reports no fp64 and half cells
// the bundle does not register are optional: always skips, with the reason (extension_suite.hpp
// decides).
#include "nn_suite.hpp"

#include "extension_suite.hpp"
#include "input_classes.hpp"
#include "nn_reference.hpp"

#include <parenchyma/nn.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace parenchyma::conformance {

namespace {

using namespace nn_cases;

// ---- activations ---------------------------------------------------------------------------

struct act_info {
  nn_ref::act a;
  const char* name;
};
constexpr act_info acts[] = {{nn_ref::act::sigmoid, "sigmoid"},
                             {nn_ref::act::relu, "relu"},
                             {nn_ref::act::tanh, "tanh"},
                             {nn_ref::act::elu, "elu"}};

void act_forward(const Backend& b, nn_ref::act a, const TensorStorage& x, TensorStorage& y,
                 double alpha) {
  switch (a) {
  case nn_ref::act::sigmoid: nn::sigmoid(b, x, y); break;
  case nn_ref::act::relu: nn::relu(b, x, y); break;
  case nn_ref::act::tanh: nn::tanh(b, x, y); break;
  case nn_ref::act::elu: nn::elu(b, x, y, alpha); break;
  }
}
void act_pointwise(const Backend& b, nn_ref::act a, TensorStorage& x, double alpha) {
  switch (a) {
  case nn_ref::act::sigmoid: nn::sigmoid_pointwise(b, x); break;
  case nn_ref::act::relu: nn::relu_pointwise(b, x); break;
  case nn_ref::act::tanh: nn::tanh_pointwise(b, x); break;
  case nn_ref::act::elu: nn::elu_pointwise(b, x, alpha); break;
  }
}
void act_grad(const Backend& b, nn_ref::act a, const TensorStorage& y, const TensorStorage& dy,
              TensorStorage& dx, double alpha) {
  switch (a) {
  case nn_ref::act::sigmoid: nn::sigmoid_grad(b, y, dy, dx); break;
  case nn_ref::act::relu: nn::relu_grad(b, y, dy, dx); break;
  case nn_ref::act::tanh: nn::tanh_grad(b, y, dy, dx); break;
  case nn_ref::act::elu: nn::elu_grad(b, y, dy, dx, alpha); break;
  }
}
void act_pointwise_grad(const Backend& b, nn_ref::act a, const TensorStorage& y, TensorStorage& d,
                        double alpha) {
  switch (a) {
  case nn_ref::act::sigmoid: nn::sigmoid_pointwise_grad(b, y, d); break;
  case nn_ref::act::relu: nn::relu_pointwise_grad(b, y, d); break;
  case nn_ref::act::tanh: nn::tanh_pointwise_grad(b, y, d); break;
  case nn_ref::act::elu: nn::elu_pointwise_grad(b, y, d, alpha); break;
  }
}
template <class T> std::vector<const OpKey*> act_keys(nn_ref::act a) {
  static const OpKey* sig[] = {
      key<pcy_nn_sigmoid_schema, T>(), key<pcy_nn_sigmoid_pointwise_schema, T>(),
      key<pcy_nn_sigmoid_grad_schema, T>(), key<pcy_nn_sigmoid_pointwise_grad_schema, T>()};
  static const OpKey* rel[] = {key<pcy_nn_relu_schema, T>(), key<pcy_nn_relu_pointwise_schema, T>(),
                               key<pcy_nn_relu_grad_schema, T>(),
                               key<pcy_nn_relu_pointwise_grad_schema, T>()};
  static const OpKey* tan[] = {key<pcy_nn_tanh_schema, T>(), key<pcy_nn_tanh_pointwise_schema, T>(),
                               key<pcy_nn_tanh_grad_schema, T>(),
                               key<pcy_nn_tanh_pointwise_grad_schema, T>()};
  static const OpKey* elu[] = {key<pcy_nn_elu_schema, T>(), key<pcy_nn_elu_pointwise_schema, T>(),
                               key<pcy_nn_elu_grad_schema, T>(),
                               key<pcy_nn_elu_pointwise_grad_schema, T>()};
  const OpKey** k = a == nn_ref::act::sigmoid ? sig
                    : a == nn_ref::act::relu  ? rel
                    : a == nn_ref::act::tanh  ? tan
                                              : elu;
  return {k[0], k[1], k[2], k[3]};
}

// Checks the forward's output: relu exactly (and -0 keeps its sign), the others to a few ulps.
template <class T>
void check_act(const std::string& what, nn_ref::act a, const vec& x, const vec& got, double alpha) {
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = rounded<T>(nn_ref::forward(a, x[i], alpha));
    if (a == nn_ref::act::relu) {
      expect_exact<T>(what, i, got[i], ref);
      if (x[i] == 0 && std::signbit(x[i]) != std::signbit(got[i]))
        fail_check(str(tname<T>(), " ", what, ": element ", i, ": relu(", g10(x[i]), ") gave ",
                       g10(got[i]), " (-0 stays -0, +0 stays +0)"));
    } else {
      expect_func<T>(what, i, got[i], ref,
                     a == nn_ref::act::elu ? std::max(1.0, std::fabs(alpha)) : 1);
    }
  }
}
template <class T>
void check_act_grad(const std::string& what, nn_ref::act a, const vec& y, const vec& dy,
                    const vec& got, double alpha) {
  for (size_t i = 0; i < y.size(); ++i)
    expect_near<T>(what, i, got[i], dy[i] * nn_ref::derivative(a, y[i], alpha),
                   std::fabs(dy[i]) * nn_ref::derivative_mag(a, y[i], alpha), 2);
}

// Forward, in place, gradient and in-place gradient of one activation on x; y for the gradients
// is the reference forward of x rounded to T, dy random (with NaN where `nan_dy` says).
template <class T>
void act_all(const Backend& b, const std::string& tag, nn_ref::act a,
             const std::vector<int64_t>& shape, const vec& x, double alpha, const vec& dy) {
  auto xt = tensor_of<T>(shape, x);
  auto yt = poisoned<T>(shape);
  act_forward(b, a, xt, yt, alpha);
  check_act<T>(tag + " forward", a, x, values(yt), alpha);
  expect_true(same_bits(raw(xt), raw(tensor_of<T>(shape, x))), tag + ": the input x changed");
  auto pw = tensor_of<T>(shape, x);
  act_pointwise(b, a, pw, alpha);
  check_act<T>(tag + " pointwise", a, x, values(pw), alpha);

  vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = rounded<T>(nn_ref::forward(a, x[i], alpha));
    // Whether relu_grad gives NaN or 0 where y is NaN, pcy_nn.h does not say (y > 0 ? 1 : 0
    // reads 0, "NaN propagates" NaN): left out.
    if (a == nn_ref::act::relu && std::isnan(y[i])) y[i] = 1;
  }
  auto y_in = tensor_of<T>(shape, y), dyt = tensor_of<T>(shape, dy);
  auto dx = poisoned<T>(shape);
  act_grad(b, a, y_in, dyt, dx, alpha);
  check_act_grad<T>(tag + " grad", a, y, dy, values(dx), alpha);
  auto d = tensor_of<T>(shape, dy);
  act_pointwise_grad(b, a, y_in, d, alpha);
  check_act_grad<T>(tag + " pointwise_grad", a, y, dy, values(d), alpha);
}

template <class T> void activations(extension_suite& reg) {
  const std::vector<std::vector<int64_t>> shapes{{1}, {7}, {13, 77}, {4097}, {3, 1, 5, 2}};
  for (const act_info& ai : acts)
    for (const auto& shape : shapes) {
      const std::string tag = std::string(ai.name) + " " + tname<T>() + " " + shape_tag(shape);
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const size_t n = count_of(shape);
            const double alpha = 0.7;
            act_all<T>(b, tag, ai.a, shape, random_vec<T>(n, -6, 6), alpha, random_vec<T>(n));
          },
          act_keys<T>(ai.a));
    }
  // NaN, -0, +0, tiny, and values where exp over- or underflows; infinities.
  for (const act_info& ai : acts) {
    const std::string tag = std::string(ai.name) + " " + tname<T>() + " NaN, -0, huge |x|";
    reg.add<T>(
        tag,
        [=](const Backend& b) {
          const double inf = std::numeric_limits<double>::infinity();
          const double h = huge<T>();
          vec x{std::numeric_limits<double>::quiet_NaN(),
                -0.0,
                0.0,
                1e-30,
                -1e-30,
                20,
                -20,
                50,
                -50,
                100,
                -100,
                1e4,
                -1e4,
                h,
                -h,
                inf,
                -inf};
          for (double& v : x)
            v = rounded<T>(v);
          const vec more = random_vec<T>(30, -3, 3);
          x.insert(x.end(), more.begin(), more.end());
          vec dy = random_vec<T>(x.size());
          // NaN in dy propagates to dx; relu's factor 0 (y <= 0) is left out: whether 0 * NaN or a
          // select is meant, pcy_nn.h does not say.
          const double alpha = 1.0;
          for (size_t i = 0; i < x.size(); i += 7)
            if (ai.a != nn_ref::act::relu || nn_ref::forward(ai.a, x[i], alpha) > 0)
              dy[i] = std::numeric_limits<double>::quiet_NaN();
          act_all<T>(b, tag, ai.a, {static_cast<int64_t>(x.size())}, x, alpha, dy);
        },
        act_keys<T>(ai.a));
  }
}

// ---- softmax -------------------------------------------------------------------------------

template <class T> void softmax_cases(extension_suite& reg) {
  struct sm {
    std::vector<int64_t> shape;
    int64_t axis;
    double offset, spread; // x = offset + spread * U(-1, 1)
  };
  const std::vector<sm> cases{{{3, 5, 7}, 0, 0, 3},
                              {{3, 5, 7}, 1, 0, 3},
                              {{3, 5, 7}, 2, 0, 3},
                              {{3, 5, 7}, -1, 0, 3},
                              {{2, 1, 3}, 1, 0, 3},
                              {{1}, 0, 0, 3},
                              {{4, 257}, 1, 0, 10},
                              {{6, 33, 2}, 1, 1000, 20},
                              {{1000}, 0, -1000, 30},
                              {{2, 3, 1, 11}, 3, 0, 50},
                              // 4096 elements and more: the native bundle's oneDNN paths
                              {{64, 1000}, 1, 0, 10},
                              {{16, 300, 3}, 1, 0, 10},
                              // rows longer than a Vulkan work-group holds in registers
                              {{3, 2500}, 1, 0, 10}};
  for (const sm& c : cases) {
    const std::string tag = std::string("softmax/log_softmax ") + tname<T>() + " " +
                            shape_tag(c.shape) + " axis=" + std::to_string(c.axis) +
                            (c.offset != 0 ? " large values" : "");
    reg.add<T>(tag,
               [=](const Backend& b) {
                 const size_t n = count_of(c.shape);
                 const int64_t axis =
                     c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
                 vec x = random_vec<T>(n, -c.spread, c.spread);
                 for (double& v : x)
                   v = rounded<T>(v + c.offset);
                 const vec dy = random_vec<T>(n);
                 auto xt = tensor_of<T>(c.shape, x), dyt = tensor_of<T>(c.shape, dy);
                 for (const bool log : {false, true}) {
                   const std::string what = tag + (log ? " log_softmax" : " softmax");
                   auto yt = poisoned<T>(c.shape);
                   if (log)
                     nn::log_softmax(b, xt, yt, c.axis);
                   else
                     nn::softmax(b, xt, yt, c.axis);
                   const auto ref = nn_ref::softmax(x, c.shape, axis, log, eps<T>());
                   const vec got = values(yt);
                   for (size_t i = 0; i < n; ++i)
                     expect_near<T>(what, i, got[i], ref.v[i], ref.mag[i], ref.terms[i]);
                   // The gradient from the forward's output (the reference's, rounded to T).
                   vec y(n);
                   for (size_t i = 0; i < n; ++i)
                     y[i] = rounded<T>(ref.v[i]);
                   auto y_in = tensor_of<T>(c.shape, y);
                   auto dx = poisoned<T>(c.shape);
                   if (log)
                     nn::log_softmax_grad(b, y_in, dyt, dx, c.axis);
                   else
                     nn::softmax_grad(b, y_in, dyt, dx, c.axis);
                   expect_all<T>(what + "_grad", values(dx),
                                 nn_ref::softmax_grad(y, dy, c.shape, axis, log));
                 }
               },
               {key<pcy_nn_softmax_schema, T>(), key<pcy_nn_log_softmax_schema, T>(),
                key<pcy_nn_softmax_grad_schema, T>(), key<pcy_nn_log_softmax_grad_schema, T>()});
  }
}

// ---- convolution ---------------------------------------------------------------------------

struct conv_case {
  nn_ref::conv_geom g;
  bool bias;
  const char* what;
};
const std::vector<conv_case>& conv_cases() {
  // N, C, H, W, K, R, S, stride h/w, padding h/w, dilation h/w, groups
  static const std::vector<conv_case> c{
      {{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1}, false, "1x1 on 1x1"},
      {{3, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true, "3x3 pad 1"},
      {{1, 2, 9, 11, 3, 3, 2, 2, 2, 0, 0, 1, 1, 1}, false, "3x2 stride 2"},
      {{3, 4, 8, 7, 6, 3, 3, 3, 3, 2, 2, 1, 1, 2}, true, "stride 3 pad 2 groups 2"},
      {{1, 5, 10, 9, 5, 3, 3, 1, 1, 1, 1, 2, 2, 5}, true, "depthwise dilation 2"},
      {{3, 3, 6, 6, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1}, false, "1x1 stride 2"},
      {{1, 2, 5, 4, 3, 7, 6, 1, 1, 1, 1, 1, 1, 1}, true, "filter as wide as the padded input"},
      {{1, 6, 13, 11, 4, 5, 3, 2, 2, 2, 2, 2, 2, 2},
       false,
       "5x3 stride 2 pad 2 dilation 2 groups 2"},
      {{3, 1, 17, 3, 1, 2, 3, 1, 2, 0, 1, 2, 1, 1}, true, "mixed stride, padding and dilation"},
      {{2, 3, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3}, false, "depthwise multiplier 2"},
      {{2, 8, 15, 15, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true, "8 to 16 channels 3x3"},
  };
  return c;
}
std::string geom_tag(const nn_ref::conv_geom& g) {
  return str("N", g.N, " C", g.C, " ", g.H, "x", g.W, " K", g.K, " ", g.R, "x", g.S, " s", g.str_h,
             ",", g.str_w, " p", g.pad_h, ",", g.pad_w, " d", g.dil_h, ",", g.dil_w, " g",
             g.groups);
}
nn::ConvolutionParams conv_params(const nn_ref::conv_geom& g, std::array<int64_t, 3> algo,
                                  bool strict) {
  nn::ConvolutionParams p;
  p.stride = {g.str_h, g.str_w};
  p.padding = {g.pad_h, g.pad_w};
  p.dilation = {g.dil_h, g.dil_w};
  p.groups = g.groups;
  p.algorithm = algo;
  p.math = strict ? nn::math_mode::strict : nn::math_mode::by_setting;
  return p;
}

// sum(y * dy) with y from the bundle's forward, and the rounding error that sum can carry.
template <class T> struct loss { double value = 0, error = 0; };
template <class T>
loss<T> conv_loss(const nn::Convolution& conv, const nn_ref::conv_geom& g, const vec& x,
                  const vec& w, const vec& dy, const vec* bias) {
  const std::vector<int64_t> xs{g.N, g.C, g.H, g.W}, ws{g.K, g.Cg(), g.R, g.S},
      ys{g.N, g.K, g.P(), g.Q()};
  auto xt = tensor_of<T>(xs, x), wt = tensor_of<T>(ws, w);
  auto yt = poisoned<T>(ys);
  if (bias) {
    auto bt = tensor_of<T>({g.K}, *bias);
    conv.forward(xt, wt, bt, yt);
  } else {
    conv.forward(xt, wt, yt);
  }
  const vec y = values(yt);
  auto ref = nn_ref::conv_forward(g, x, w);
  loss<T> l;
  for (size_t i = 0; i < y.size(); ++i) {
    l.value += y[i] * dy[i];
    const double ymag =
        ref.mag[i] +
        (bias
             ? std::fabs((*bias)[i / static_cast<size_t>(g.P() * g.Q()) % static_cast<size_t>(g.K)])
             : 0);
    l.error += std::fabs(dy[i]) * 8 * eps<T>() * (std::sqrt(ref.terms[i] + 1) + 1) * ymag +
               4 * eps<T>() * std::fabs(y[i] * dy[i]);
  }
  return l;
}

// Finite differences (f64): the change of sum(y dy) when one element of x, w or the bias moves
// by h, against the analytic gradient the bundle computed.
template <class T>
void conv_finite_differences(const std::string& tag, const nn::Convolution& conv,
                             const nn_ref::conv_geom& g, const vec& x, const vec& w,
                             const vec& bias, const vec& dy, const vec& dx, const vec& dw,
                             const vec& db, bool with_bias) {
  const double h = 1e-6;
  std::uniform_int_distribution<size_t> px(0, x.size() - 1), pw(0, w.size() - 1),
      pb(0, bias.size() - 1);
  const auto compare = [&](const char* what, size_t i, const loss<T>& lp, const loss<T>& lm,
                           double analytic) {
    const double fd = (lp.value - lm.value) / (2 * h);
    const double tol = (lp.error + lm.error) / (2 * h) + 1e-9 * std::fabs(analytic) + 1e-12;
    if (std::fabs(fd - analytic) <= tol)
      pass_check();
    else
      fail_check(str(tname<T>(), " ", tag, " finite differences ", what, ": element ", i,
                     " analytic ", g10(analytic), ", (L(+h) - L(-h)) / 2h = ", g10(fd),
                     " (tolerance ", g3(tol), ")"));
  };
  const vec* bp = with_bias ? &bias : nullptr;
  for (int k = 0; k < 3; ++k) {
    const size_t i = px(rng());
    vec xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    compare("dx", i, conv_loss<T>(conv, g, xp, w, dy, bp), conv_loss<T>(conv, g, xm, w, dy, bp),
            dx[i]);
    const size_t j = pw(rng());
    vec wp = w, wm = w;
    wp[j] += h;
    wm[j] -= h;
    compare("dw", j, conv_loss<T>(conv, g, x, wp, dy, bp), conv_loss<T>(conv, g, x, wm, dy, bp),
            dw[j]);
  }
  if (with_bias) {
    const size_t k = pb(rng());
    vec bpv = bias, bmv = bias;
    bpv[k] += h;
    bmv[k] -= h;
    compare("db", k, conv_loss<T>(conv, g, x, w, dy, &bpv), conv_loss<T>(conv, g, x, w, dy, &bmv),
            db[k]);
  }
}

template <class T> void convolution_cases(extension_suite& reg) {
  for (const conv_case& cc : conv_cases()) {
    const std::string tag = std::string("convolution ") + tname<T>() + " " + geom_tag(cc.g) + " (" +
                            cc.what + (cc.bias ? ", bias" : "") + ")";
    reg.add<T>(
        tag,
        [=](const Backend& b) {
          const nn_ref::conv_geom& g = cc.g;
          const std::vector<int64_t> xs{g.N, g.C, g.H, g.W}, ws{g.K, g.Cg(), g.R, g.S},
              ys{g.N, g.K, g.P(), g.Q()};
          const vec x = random_vec<T>(g.xs()), w = random_vec<T>(g.ws()),
                    dy = random_vec<T>(g.ys()), bias = random_vec<T>(static_cast<size_t>(g.K));
          auto xt = tensor_of<T>(xs, x), wt = tensor_of<T>(ws, w), dyt = tensor_of<T>(ys, dy),
               bt = tensor_of<T>({g.K}, bias);
          auto yref = nn_ref::conv_forward(g, x, w);
          if (cc.bias)
            for (size_t i = 0; i < yref.v.size(); ++i) {
              const double bv =
                  bias[i / static_cast<size_t>(g.P() * g.Q()) % static_cast<size_t>(g.K)];
              yref.v[i] += bv;
              yref.mag[i] += std::fabs(bv);
              yref.terms[i] += 1;
            }
          const auto dxref = nn_ref::conv_grad_data(g, w, dy),
                     dwref = nn_ref::conv_grad_filter(g, x, dy),
                     dbref = nn_ref::conv_grad_bias(g, dy);

          // Every configuration the bundle can be asked for: measured, heuristic, its default 0,
          // and each other algorithm number it accepts for one direction.
          struct config {
            std::string name;
            std::array<int64_t, 3> algo;
            bool optional; // refused with errc::unsupported: not offered for these shapes
          };
          std::vector<config> configs{{"algorithm_auto", {-1, -1, -1}, false},
                                      {"algorithm_heuristic", {-2, -2, -2}, false},
                                      {"algorithm 0", {0, 0, 0}, false}};
          for (int64_t a = 1; a <= 7; ++a)
            for (int d = 0; d < 3; ++d) {
              std::array<int64_t, 3> al{0, 0, 0};
              al[static_cast<size_t>(d)] = a;
              static const char* dirs[] = {"forward", "grad_data", "grad_filter"};
              configs.push_back({str("algorithm ", a, " for ", dirs[d]), al, true});
            }
          const bool strict = !is_half<T>;
          bool fd_done = false;
          for (const config& cf : configs) {
            std::unique_ptr<nn::Convolution> conv;
            try {
              conv = std::make_unique<nn::Convolution>(b, xs, ws, conv_params(g, cf.algo, strict),
                                                       dtype_v<T>);
            } catch (const parenchyma::error& e) {
              // A number the bundle does not have (invalid_argument) or cannot run for these
              // shapes (unsupported): not offered here.
              if (!cf.optional ||
                  (e.code() != errc::unsupported && e.code() != errc::invalid_argument))
                throw;
              continue;
            }
            const std::string what = tag + " " + cf.name;
            note(str(cf.name, ": algorithms ", conv->algorithm(nn::direction::forward), ", ",
                     conv->algorithm(nn::direction::grad_data), ", ",
                     conv->algorithm(nn::direction::grad_filter), "; workspace ",
                     conv->workspace_bytes(nn::direction::forward), ", ",
                     conv->workspace_bytes(nn::direction::grad_data), ", ",
                     conv->workspace_bytes(nn::direction::grad_filter), " bytes; numerics ",
                     int(conv->numerics(nn::direction::forward)), ", ",
                     int(conv->numerics(nn::direction::grad_data)), ", ",
                     int(conv->numerics(nn::direction::grad_filter)), " (1: transform)"));
            for (int d = 0; d < 3; ++d) {
              const int64_t want = cf.algo[static_cast<size_t>(d)];
              const int64_t got = conv->algorithm(static_cast<nn::direction>(d));
              expect_true(want >= 0 ? got == want : got >= 0,
                          str(what, ": direction ", d, " chose algorithm ", got,
                              want >= 0 ? str(", asked for ", want) : std::string()));
            }
            expect_true(conv->y_shape() == ys, str(what, ": y_shape ", shape_tag(conv->y_shape()),
                                                   " expected ", shape_tag(ys)));
            auto yt = poisoned<T>(ys);
            if (cc.bias)
              conv->forward(xt, wt, bt, yt);
            else
              conv->forward(xt, wt, yt);
            expect_conv<T>(what + " forward", values(yt), yref,
                           conv->numerics(nn::direction::forward));
            auto dx = poisoned<T>(xs);
            conv->grad_data(wt, dyt, dx);
            const vec dxv = values(dx);
            expect_conv<T>(what + " grad_data", dxv, dxref,
                           conv->numerics(nn::direction::grad_data));
            auto dw = poisoned<T>(ws);
            conv->grad_filter(xt, dyt, dw);
            const vec dwv = values(dw);
            expect_conv<T>(what + " grad_filter", dwv, dwref,
                           conv->numerics(nn::direction::grad_filter));
            auto db = poisoned<T>({g.K});
            conv->grad_bias(dyt, db);
            const vec dbv = values(db);
            expect_all<T>(what + " grad_bias", dbv, dbref);
            if (std::is_same_v<T, double> && !fd_done) {
              conv_finite_differences<T>(what, *conv, g, x, w, bias, dy, dxv, dwv, dbv, cc.bias);
              fd_done = true;
            }
          }
          // The inputs are IN: untouched.
          expect_true(same_bits(raw(xt), raw(tensor_of<T>(xs, x))), tag + ": x changed");
          expect_true(same_bits(raw(wt), raw(tensor_of<T>(ws, w))), tag + ": w changed");
        },
        {key<pcy_nn_convolution_schema, T>(), key<pcy_nn_convolution_grad_data_schema, T>(),
         key<pcy_nn_convolution_grad_filter_schema, T>(), key<pcy_nn_convolution_bias_schema, T>(),
         key<pcy_nn_convolution_grad_bias_schema, T>(),
         key<pcy_nn_convolution_algorithm_schema, T>()});
  }
  // Without training, only the forward is configured; its gradients are refused.
  reg.add<T>(
      std::string("convolution ") + tname<T>() + " training = false",
      [](const Backend& b) {
        const nn_ref::conv_geom g{2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
        nn::ConvolutionParams p = conv_params(g, {-2, -2, -2}, !is_half<T>);
        p.training = false;
        nn::Convolution conv(b, {g.N, g.C, g.H, g.W}, {g.K, g.C, g.R, g.S}, p, dtype_v<T>);
        expect_true(conv.algorithm(nn::direction::grad_data) == -1, "grad_data was configured");
        const vec x = random_vec<T>(g.xs()), w = random_vec<T>(g.ws()), dy = random_vec<T>(g.ys());
        auto xt = tensor_of<T>({g.N, g.C, g.H, g.W}, x), wt = tensor_of<T>({g.K, g.C, g.R, g.S}, w),
             dyt = tensor_of<T>({g.N, g.K, g.P(), g.Q()}, dy);
        auto yt = poisoned<T>({g.N, g.K, g.P(), g.Q()});
        conv.forward(xt, wt, yt);
        expect_conv<T>("convolution training=false forward", values(yt),
                       nn_ref::conv_forward(g, x, w), conv.numerics(nn::direction::forward));
        auto dx = tensor_of<T>({g.N, g.C, g.H, g.W}, x);
        expect_refused(
            "grad_data without training", [&] { conv.grad_data(wt, dyt, dx); },
            "convolution_grad_data", "training");
        expect_true(same_bits(raw(dx), raw(tensor_of<T>({g.N, g.C, g.H, g.W}, x))),
                    "a refused grad_data changed dx");
      },
      {key<pcy_nn_convolution_schema, T>(), key<pcy_nn_convolution_algorithm_schema, T>()});
}

// ---- pooling -------------------------------------------------------------------------------

enum class pool_data { random, ties, nan };

template <class T> void pooling_cases(extension_suite& reg) {
  // N, C, H, W, window h/w, stride h/w, padding h/w
  const std::vector<nn_ref::pool_geom> geoms{
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},  {2, 3, 7, 9, 3, 3, 2, 2, 1, 1},
      {3, 2, 8, 8, 2, 2, 2, 2, 0, 0},  {1, 4, 11, 6, 3, 2, 1, 1, 1, 1},
      {2, 1, 5, 13, 5, 4, 3, 2, 2, 2}, {1, 2, 6, 5, 6, 5, 1, 1, 0, 0},
      {2, 3, 9, 10, 4, 3, 2, 3, 2, 1}, {1, 3, 12, 7, 3, 3, 1, 2, 0, 1}};
  for (const nn_ref::pool_geom& g : geoms)
    for (const pool_data data : {pool_data::random, pool_data::ties, pool_data::nan}) {
      const std::string tag =
          std::string("pooling ") + tname<T>() +
          str(" N", g.N, " C", g.C, " ", g.H, "x", g.W, " window ", g.win_h, "x", g.win_w,
              " stride ", g.str_h, ",", g.str_w, " padding ", g.pad_h, ",", g.pad_w) +
          (data == pool_data::ties  ? " ties"
           : data == pool_data::nan ? " NaN"
                                    : "");
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const std::vector<int64_t> xs{g.N, g.C, g.H, g.W}, ys{g.N, g.C, g.P(), g.Q()};
            nn::PoolingParams p;
            p.window = {g.win_h, g.win_w};
            p.stride = {g.str_h, g.str_w};
            p.padding = {g.pad_h, g.pad_w};
            expect_true(nn::pooling_output_shape(xs, p) == ys,
                        str(tag, ": pooling_output_shape ",
                            shape_tag(nn::pooling_output_shape(xs, p)), " expected ",
                            shape_tag(ys)));
            vec x;
            if (data == pool_data::ties) { // few distinct values, all negative here and there
              std::uniform_int_distribution<int> u(-3, 1);
              x.resize(g.xs());
              for (double& v : x)
                v = u(rng());
            } else {
              x = random_vec<T>(g.xs(), -2, 2);
              if (data == pool_data::nan)
                for (size_t i = 3; i < x.size(); i += 11)
                  x[i] = std::numeric_limits<double>::quiet_NaN();
            }
            const vec dy = random_vec<T>(g.ys());
            auto xt = tensor_of<T>(xs, x), dyt = tensor_of<T>(ys, dy);

            vec yref;
            std::vector<int32_t> iref;
            nn_ref::pool_max(g, x, yref, iref);
            auto y = poisoned<T>(ys);
            nn::pooling_max(b, xt, y, p);
            const vec yv = values(y);
            for (size_t i = 0; i < yv.size(); ++i)
              expect_exact<T>(tag + " pooling_max", i, yv[i], yref[i]);
            auto y2 = poisoned<T>(ys);
            SharedTensor<int32_t> idx(ys);
            for (int32_t& v : idx.write_only())
              v = -7;
            nn::pooling_max(b, xt, y2, idx, p);
            const vec y2v = values(y2);
            const auto iv = raw(idx);
            for (size_t i = 0; i < y2v.size(); ++i) {
              expect_exact<T>(tag + " pooling_max_indexed y", i, y2v[i], yref[i]);
              expect_true(iv[i] == iref[i],
                          str(tname<T>(), " ", tag, " pooling_max_indexed: index ", i, " is ",
                              iv[i], ", expected ", iref[i],
                              " (the first maximum in row-major window order)"));
            }
            // Gradients: from x and y (y as the forward gave it: the reference, which matched).
            auto y_in = tensor_of<T>(ys, yref);
            auto dx = poisoned<T>(xs);
            nn::pooling_max_grad(b, xt, y_in, dyt, dx, p);
            expect_all<T>(tag + " pooling_max_grad", values(dx),
                          nn_ref::pool_max_grad(g, dy, iref));
            // From indices, some of them outside the plane (they add nothing).
            std::vector<int32_t> hostile = iref;
            const int32_t plane = static_cast<int32_t>(g.H * g.W);
            for (size_t i = 0; i < hostile.size(); i += 5)
              hostile[i] = i % 3 == 0   ? -1
                           : i % 3 == 1 ? plane
                                        : std::numeric_limits<int32_t>::max();
            for (const auto* ind : {&iref, &hostile}) {
              SharedTensor<int32_t> it(ys);
              std::copy(ind->begin(), ind->end(), it.write_only().begin());
              auto dx2 = poisoned<T>(xs);
              nn::pooling_max_grad(b, dyt, it, dx2);
              expect_all<T>(tag + (ind == &iref ? " pooling_max_grad indexed"
                                                : " pooling_max_grad indexed, indices outside"),
                            values(dx2), nn_ref::pool_max_grad(g, dy, *ind));
            }
            if (data == pool_data::nan) return; // the mean of NaN is NaN: nothing more to learn
            expect_pool_avg<T>(b, g, x, dy, xt, dyt, xs, ys, p, tag + " avg");
            expect_true(same_bits(raw(xt), raw(tensor_of<T>(xs, x))), tag + ": x changed");
          },
          {key<pcy_nn_pooling_max_schema, T>(), key<pcy_nn_pooling_max_indexed_schema, T>(),
           key<pcy_nn_pooling_max_grad_schema, T>(),
           key<pcy_nn_pooling_max_grad_indexed_schema, T>(), key<pcy_nn_pooling_avg_schema, T>(),
           key<pcy_nn_pooling_avg_grad_schema, T>()});
    }
}

// ---- LRN -----------------------------------------------------------------------------------

template <class T> void lrn_cases(extension_suite& reg) {
  struct lc {
    std::vector<int64_t> shape;
    nn_ref::lrn_params p;
  };
  std::vector<lc> cases;
  for (const int64_t n : {1, 3, 4, 5, 9}) // 9: wider than C
    cases.push_back({{2, 7, 3, 5}, {n, 0.5, 0.75, 2.0}});
  cases.push_back({{1, 1, 4, 3}, {3, 0.9, 0.6, 1.5}});
  cases.push_back({{3, 4, 2, 2}, {5, 1e-4, 0.75, 1.0}}); // PyTorch's defaults
  cases.push_back({{1, 6, 1, 7}, {4, 1.3, 0.0, 1.5}});   // beta 0: y = x
  cases.push_back({{1, 5, 2, 3}, {2, 2.0, 1.5, 0.5}});
  for (const lc& c : cases) {
    const std::string tag =
        std::string("lrn ") + tname<T>() + " " + shape_tag(c.shape) +
        str(" n=", c.p.n, " alpha=", c.p.alpha, " beta=", c.p.beta, " k=", c.p.k);
    reg.add<T>(tag,
               [=](const Backend& b) {
                 const int64_t N = c.shape[0], C = c.shape[1], HW = c.shape[2] * c.shape[3];
                 const size_t n = count_of(c.shape);
                 const vec x = random_vec<T>(n, -2, 2), dy = random_vec<T>(n);
                 const nn::LrnParams p{c.p.n, c.p.alpha, c.p.beta, c.p.k};
                 auto xt = tensor_of<T>(c.shape, x), dyt = tensor_of<T>(c.shape, dy);
                 auto yt = poisoned<T>(c.shape);
                 nn::lrn(b, xt, yt, p);
                 const auto yref = nn_ref::lrn(x, N, C, HW, c.p);
                 expect_all<T>(tag + " forward", values(yt), yref);
                 vec y(n);
                 for (size_t i = 0; i < n; ++i)
                   y[i] = rounded<T>(yref.v[i]);
                 auto y_in = tensor_of<T>(c.shape, y);
                 auto dx = poisoned<T>(c.shape);
                 nn::lrn_grad(b, xt, y_in, dyt, dx, p);
                 const vec dxv = values(dx);
                 expect_all<T>(tag + " grad", dxv, nn_ref::lrn_grad(x, y, dy, N, C, HW, c.p));
                 if constexpr (std::is_same_v<T, double>) {
                   // Finite differences of sum(y dy) through the bundle's forward.
                   const double h = 1e-6;
                   std::uniform_int_distribution<size_t> pick(0, n - 1);
                   const auto L = [&](const vec& xv) {
                     auto xx = tensor_of<T>(c.shape, xv);
                     auto yy = poisoned<T>(c.shape);
                     nn::lrn(b, xx, yy, p);
                     const vec yv = values(yy);
                     double s = 0, mag = 0;
                     for (size_t i = 0; i < n; ++i) {
                       s += yv[i] * dy[i];
                       mag += std::fabs(yv[i] * dy[i]);
                     }
                     return std::pair<double, double>{s, mag};
                   };
                   for (int k = 0; k < 4; ++k) {
                     const size_t i = pick(rng());
                     vec xp = x, xm = x;
                     xp[i] += h;
                     xm[i] -= h;
                     const auto lp = L(xp), lm = L(xm);
                     const double fd = (lp.first - lm.first) / (2 * h);
                     const double tol = 64 * eps<T>() * (lp.second + lm.second) / (2 * h) +
                                        1e-6 * std::fabs(dxv[i]) + 1e-9;
                     if (std::fabs(fd - dxv[i]) <= tol)
                       pass_check();
                     else
                       fail_check(str("f64 ", tag, " finite differences: element ", i, " analytic ",
                                      g10(dxv[i]), ", (L(+h) - L(-h)) / 2h = ", g10(fd),
                                      " (tolerance ", g3(tol), ")"));
                   }
                 }
               },
               {key<pcy_nn_lrn_schema, T>(), key<pcy_nn_lrn_grad_schema, T>()});
  }
}

// ---- input classes (vendor-backed ops) -----------------------------------------------------
// The classes of input_classes.hpp on every op a bundle may hand to a vendor library (oneDNN,
// cuDNN): activations, softmax and log_softmax, LRN, average pooling and convolution, at sizes
// that take the library's path (>= 4096 elements, channel counts that are multiples of 8).
// Outputs are held to the float64 reference (a NaN where it gives NaN, an infinity where it
// gives one, nothing leaking to the outputs that do not depend on a non-finite input).

namespace in = inputs;

// The scale of a transform algorithm's inputs on the classes with huge values (a power of two:
// exact where the result stays normal).
constexpr double transform_scale = 0x1p-16;

template <class T>
vec class_vec(in::input_class c, size_t n, double huge_v, const in::positions& at = {}) {
  vec v = in::make(c, n, {huge_v, tiny_normal<T>()}, rng(), at);
  for (double& e : v)
    e = rounded<T>(e);
  return v;
}
std::string class_tag(in::input_class c) { return std::string(" [") + in::class_name(c) + "]"; }

template <class T> void input_class_cases(extension_suite& reg) {
  for (const in::input_class ic : in::all_classes) {
    // Activations on oneDNN's path (>= 4096 elements); relu is ours everywhere.
    for (const act_info& ai : acts) {
      if (ai.a == nn_ref::act::relu) continue;
      const std::string tag = std::string(ai.name) + " " + tname<T>() + " 4099" + class_tag(ic);
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const size_t n = 4099;
            act_all<T>(b, tag, ai.a, {static_cast<int64_t>(n)}, class_vec<T>(ic, n, huge<T>()), 1.0,
                       random_vec<T>(n));
          },
          act_keys<T>(ai.a));
    }
    // softmax / log_softmax: 64 rows of 100 along the last axis, and along axis 0 (inner 64).
    // Non-finite values in rows 1, 2, 3 only: those rows are NaN (e^(x - max) with a NaN, or
    // Inf - Inf), -Inf gives 0 / -Inf; every other row is untouched by them.
    for (const int64_t axis : {1, 0}) {
      const std::vector<int64_t> shape =
          axis == 1 ? std::vector<int64_t>{64, 100} : std::vector<int64_t>{100, 64};
      const std::string tag = std::string("softmax/log_softmax ") + tname<T>() + " " +
                              shape_tag(shape) + " axis=" + std::to_string(axis) + class_tag(ic);
      reg.add<T>(tag,
                 [=](const Backend& b) {
                   const size_t n = count_of(shape);
                   const in::positions at = axis == 1
                                                ? in::positions{105, 207, 309}
                                                : in::positions{5 * 64 + 1, 7 * 64 + 2, 9 * 64 + 3};
                   // huge / 2: x - max stays finite.
                   const vec x = class_vec<T>(ic, n, huge<T>() / 2, at);
                   auto xt = tensor_of<T>(shape, x);
                   for (const bool log : {false, true}) {
                     const std::string what = tag + (log ? " log_softmax" : " softmax");
                     auto yt = poisoned<T>(shape);
                     if (log)
                       nn::log_softmax(b, xt, yt, axis);
                     else
                       nn::softmax(b, xt, yt, axis);
                     const vec got = values(yt);
                     expect_all<T>(what, got, nn_ref::softmax(x, shape, axis, log, eps<T>()));
                     if (log)
                       for (size_t i = 0; i < n; ++i)
                         if (got[i] > 0)
                           fail_check(str(tname<T>(), " ", what, ": element ", i, " is ",
                                          g10(got[i]), ": a log-probability above 0"));
                   }
                 },
                 {key<pcy_nn_softmax_schema, T>(), key<pcy_nn_log_softmax_schema, T>()});
    }
    // LRN: C a multiple of 8 (oneDNN's vector kernel), AlexNet's 96, and 17. Image 0 holds the
    // non-finite values (channel 0, 8 and C - 1); image 1 must not notice.
    struct lrn_shape {
      std::vector<int64_t> shape;
      nn_ref::lrn_params p;
    };
    for (const lrn_shape& ls : {lrn_shape{{2, 16, 3, 5}, {5, 1e-4, 0.75, 1.0}},
                                lrn_shape{{1, 96, 2, 3}, {5, 1e-4, 0.75, 2.0}},
                                lrn_shape{{2, 64, 2, 2}, {3, 0.5, 0.5, 1.0}},
                                lrn_shape{{2, 17, 2, 3}, {5, 0.1, 0.75, 1.0}}}) {
      const std::string tag = std::string("lrn ") + tname<T>() + " " + shape_tag(ls.shape) +
                              str(" n=", ls.p.n, " beta=", ls.p.beta) + class_tag(ic);
      reg.add<T>(tag,
                 [=](const Backend& b) {
                   const int64_t N = ls.shape[0], C = ls.shape[1], HW = ls.shape[2] * ls.shape[3];
                   const size_t n = count_of(ls.shape);
                   const auto at_ = [&](int64_t c, int64_t i) {
                     return static_cast<size_t>(c * HW + i);
                   };
                   const vec x =
                       // Huge for LRN: a window's sum of n squares stays finite in T.
                       class_vec<T>(ic, n,
                                    std::sqrt(static_cast<double>(std::numeric_limits<T>::max()) /
                                              static_cast<double>(2 * ls.p.n)),
                                    {at_(0, 0), at_(8 % C, HW - 1), at_(C - 1, HW / 2)});
                   auto xt = tensor_of<T>(ls.shape, x);
                   auto yt = poisoned<T>(ls.shape);
                   nn::lrn(b, xt, yt, nn::LrnParams{ls.p.n, ls.p.alpha, ls.p.beta, ls.p.k});
                   expect_all<T>(tag + " forward", values(yt), nn_ref::lrn(x, N, C, HW, ls.p));
                 },
                 {key<pcy_nn_lrn_schema, T>()});
    }
    // Average pooling (oneDNN's f32 sums a window in f32): windows of huge values whose mean is
    // finite, and the gradient from dy of the class.
    for (const nn_ref::pool_geom& g : {nn_ref::pool_geom{2, 16, 9, 8, 3, 3, 2, 2, 1, 1},
                                       nn_ref::pool_geom{1, 8, 8, 8, 2, 2, 2, 2, 0, 0}}) {
      const std::string tag =
          std::string("pooling_avg ") + tname<T>() +
          str(" N", g.N, " C", g.C, " ", g.H, "x", g.W, " window ", g.win_h, "x", g.win_w) +
          class_tag(ic);
      reg.add<T>(tag,
                 [=](const Backend& b) {
                   const std::vector<int64_t> xs{g.N, g.C, g.H, g.W}, ys{g.N, g.C, g.P(), g.Q()};
                   const size_t plane = static_cast<size_t>(g.H * g.W);
                   // Huge for pooling: a window's sum stays finite in T.
                   const double h = huge<T>() / static_cast<double>(2 * g.win_h * g.win_w);
                   const vec x = class_vec<T>(ic, g.xs(), h, {0, 5 * plane + 10, 7 * plane + 20});
                   const vec dy = class_vec<T>(ic, g.ys(), h, {0, 3, g.ys() - 1});
                   auto xt = tensor_of<T>(xs, x), dyt = tensor_of<T>(ys, dy);
                   nn::PoolingParams p;
                   p.window = {g.win_h, g.win_w};
                   p.stride = {g.str_h, g.str_w};
                   p.padding = {g.pad_h, g.pad_w};
                   expect_pool_avg<T>(b, g, x, dy, xt, dyt, xs, ys, p, tag);
                 },
                 {key<pcy_nn_pooling_avg_schema, T>(), key<pcy_nn_pooling_avg_grad_schema, T>()});
    }
    // Convolution, every algorithm the bundle offers: x of the class for the forward and
    // grad_filter, dy of the class for grad_data; w ordinary. A transform (Winograd, FFT) mixes
    // a tile's inputs, so a non-finite input reaches the tile's other outputs: those algorithms
    // are held to the reference on finite classes only. Their intermediate values are sums over
    // a tile (cuDNN's FFT: the padded plane), larger than the direct sums: on the classes with
    // huge values they get the inputs scaled by transform_scale (docs/nn.md "Input classes").
    for (const nn_ref::conv_geom& g :
         {nn_ref::conv_geom{2, 8, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},
          nn_ref::conv_geom{1, 3, 7, 7, 4, 3, 3, 2, 2, 0, 0, 1, 1, 1}}) {
      const std::string tag =
          std::string("convolution ") + tname<T>() + " " + geom_tag(g) + class_tag(ic);
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const std::vector<int64_t> xs{g.N, g.C, g.H, g.W}, ws{g.K, g.Cg(), g.R, g.S},
                ys{g.N, g.K, g.P(), g.Q()};
            // The largest sum: grad_filter's N P Q terms, or C R S, K R S.
            const double terms = static_cast<double>(
                std::max({g.N * g.P() * g.Q(), g.Cg() * g.R * g.S, g.Kg() * g.R * g.S}));
            const size_t plane = static_cast<size_t>(g.H * g.W);
            const vec x = class_vec<T>(ic, g.xs(), huge<T>() / (4 * terms),
                                       {plane + 9, 2 * plane + 20, g.xs() - 1});
            const vec dy = class_vec<T>(ic, g.ys(), huge<T>() / (4 * terms), {1, g.ys() / 2});
            const vec w = random_vec<T>(g.ws()), dy_plain = random_vec<T>(g.ys());
            auto xt = tensor_of<T>(xs, x), wt = tensor_of<T>(ws, w), dyt = tensor_of<T>(ys, dy),
                 dyp = tensor_of<T>(ys, dy_plain);
            const auto yref = nn_ref::conv_forward(g, x, w),
                       dxref = nn_ref::conv_grad_data(g, w, dy),
                       dwref = nn_ref::conv_grad_filter(g, x, dy_plain);
            // The transforms' inputs on the classes with huge values, and their references (from
            // the scaled values as rounded to T: tiny ones may round to subnormals).
            const bool scaled = ic == in::input_class::huge || ic == in::input_class::wide_range ||
                                ic == in::input_class::cancellation;
            const auto scale = [&](const vec& v) {
              vec r = v;
              for (double& e : r)
                e = rounded<T>(e * transform_scale);
              return r;
            };
            struct transformed {
              SharedTensor<T> x, dy;
              nn_ref::summed y, dx, dw;
            };
            std::optional<transformed> sc; // only on those classes
            if (scaled) {
              const vec xsc = scale(x), dysc = scale(dy);
              sc.emplace(transformed{
                  tensor_of<T>(xs, xsc), tensor_of<T>(ys, dysc), nn_ref::conv_forward(g, xsc, w),
                  nn_ref::conv_grad_data(g, w, dysc), nn_ref::conv_grad_filter(g, xsc, dy_plain)});
            }
            std::vector<std::array<int64_t, 3>> configs{{0, 0, 0}};
            for (int64_t a = 1; a <= 7; ++a)
              for (size_t d = 0; d < 3; ++d) {
                std::array<int64_t, 3> al{0, 0, 0};
                al[d] = a;
                configs.push_back(al);
              }
            for (const auto& al : configs) {
              std::unique_ptr<nn::Convolution> conv;
              try {
                conv = std::make_unique<nn::Convolution>(b, xs, ws, conv_params(g, al, !is_half<T>),
                                                         dtype_v<T>);
              } catch (const parenchyma::error& e) {
                if (al == configs.front() ||
                    (e.code() != errc::unsupported && e.code() != errc::invalid_argument))
                  throw;
                continue; // not offered for these shapes
              }
              const std::string what = str(tag, " algorithms ", al[0], ",", al[1], ",", al[2]);
              const auto check = [&](const char* dir, nn::direction d, const vec& got,
                                     const nn_ref::summed& ref) {
                const nn::conv_numerics num = conv->numerics(d);
                if (ic == in::input_class::non_finite && num == nn::conv_numerics::transform)
                  return;
                expect_conv<T>(what + " " + dir, got, ref, num);
              };
              const auto tr = [&](nn::direction d) {
                return sc && conv->numerics(d) == nn::conv_numerics::transform;
              };
              auto yt = poisoned<T>(ys);
              conv->forward(tr(nn::direction::forward) ? sc->x : xt, wt, yt);
              check("forward", nn::direction::forward, values(yt),
                    tr(nn::direction::forward) ? sc->y : yref);
              auto dx = poisoned<T>(xs);
              conv->grad_data(wt, tr(nn::direction::grad_data) ? sc->dy : dyt, dx);
              check("grad_data", nn::direction::grad_data, values(dx),
                    tr(nn::direction::grad_data) ? sc->dx : dxref);
              auto dw = poisoned<T>(ws);
              conv->grad_filter(tr(nn::direction::grad_filter) ? sc->x : xt, dyp, dw);
              check("grad_filter", nn::direction::grad_filter, values(dw),
                    tr(nn::direction::grad_filter) ? sc->dw : dwref);
            }
          },
          {key<pcy_nn_convolution_schema, T>(), key<pcy_nn_convolution_grad_data_schema, T>(),
           key<pcy_nn_convolution_grad_filter_schema, T>(),
           key<pcy_nn_convolution_algorithm_schema, T>()});
    }
  }
  // A dominant logit (issue 21): rows of 100 with one logit 100 and the rest 0, 64 rows. Its
  // log-probability is -log1p(99 e^-100), 0 to the type's precision: never above 0.
  reg.add<T>(std::string("log_softmax ") + tname<T>() + " 64x100 dominant logit",
             [](const Backend& b) {
               const std::vector<int64_t> shape{64, 100};
               vec x(6400, 0.0);
               for (size_t r = 0; r < 64; ++r)
                 x[r * 100 + r % 100] = 100;
               auto xt = tensor_of<T>(shape, x);
               auto yt = poisoned<T>(shape);
               nn::log_softmax(b, xt, yt, 1);
               const vec got = values(yt);
               expect_all<T>("log_softmax dominant logit", got,
                             nn_ref::softmax(x, shape, 1, true, eps<T>()));
               for (size_t i = 0; i < got.size(); ++i)
                 if (got[i] > 0)
                   fail_check(str(tname<T>(), " log_softmax dominant logit: element ", i, " is ",
                                  g10(got[i]), ": a log-probability above 0"));
             },
             {key<pcy_nn_log_softmax_schema, T>()});
  // LRN with one large value in channel 0 (issue 21: 0.8722 where 0.5946 is right).
  if constexpr (!is_half<T>)
    for (const int64_t C : {16, 24, 32, 64, 96, 256})
      reg.add<T>(str("lrn ", tname<T>(), " 1x", C, "x1x1 n=5 x[0] = 1e4, the rest 0.5"),
                 [C](const Backend& b) {
                   const std::vector<int64_t> shape{1, C, 1, 1};
                   vec x(static_cast<size_t>(C), 0.5);
                   x[0] = 1e4;
                   const nn_ref::lrn_params p{5, 1e-4, 0.75, 1.0};
                   auto xt = tensor_of<T>(shape, x);
                   auto yt = poisoned<T>(shape);
                   nn::lrn(b, xt, yt, nn::LrnParams{p.n, p.alpha, p.beta, p.k});
                   expect_all<T>(str("lrn C=", C, " x[0] = 1e4"), values(yt),
                                 nn_ref::lrn(x, 1, C, 1, p));
                 },
                 {key<pcy_nn_lrn_schema, T>()});
}

// ---- dropout -------------------------------------------------------------------------------

template <class T> void dropout_cases(extension_suite& reg) {
  const std::vector<std::vector<int64_t>> shapes{{1}, {7}, {10, 101}, {4097}};
  for (const auto& shape : shapes)
    for (const double prob : {0.0, 0.3, 1.0}) {
      const std::string tag =
          std::string("dropout ") + tname<T>() + " " + shape_tag(shape) + " p=" + g10(prob);
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const size_t n = count_of(shape);
            vec x = random_vec<T>(n, -3, 3);
            for (size_t i = 2; i < n; i += 13)
              x[i] = std::numeric_limits<double>::quiet_NaN(); // kept: NaN; dropped: 0
            const double scale = prob >= 1 ? 0.0 : rounded<T>(1.0 / (1.0 - prob));
            for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xDEADBEEFCAFEBABEull},
                                        static_cast<uint64_t>(rng()())}) {
              const std::string what = tag + " seed=" + std::to_string(seed);
              auto xt = tensor_of<T>(shape, x);
              auto yt = poisoned<T>(shape);
              SharedTensor<uint8_t> mask(shape);
              for (uint8_t& m : mask.write_only())
                m = 0xAB;
              nn::dropout(b, xt, yt, mask, prob, seed);
              const vec yv = values(yt);
              const auto mv = raw(mask);
              size_t kept = 0;
              for (size_t i = 0; i < n; ++i) {
                const bool keep = nn_ref::dropout_keep(seed, i, prob);
                kept += keep ? 1 : 0;
                expect_true(mv[i] == (keep ? 1 : 0),
                            str(tname<T>(), " ", what, ": mask[", i, "] = ", int(mv[i]),
                                ", expected ", keep ? 1 : 0, " (splitmix64 of pcy_nn.h)"));
                const double ref = keep ? rounded<T>(x[i] * scale) : 0.0;
                report_element(matches(yv[i], ref, 2 * eps<T>() * std::fabs(ref)), what + " y",
                               tname<T>(), i, yv[i], ref, 2 * eps<T>() * std::fabs(ref));
              }
              if (n >= 1000 && prob == 0.3) // the mask really is random
                expect_true(kept > n / 2 && kept < n * 9 / 10,
                            str(what, ": ", kept, " of ", n, " kept with p = 0.3"));
              // The same seed gives the same mask and y; another seed another mask.
              auto y2 = poisoned<T>(shape);
              SharedTensor<uint8_t> m2(shape);
              nn::dropout(b, xt, y2, m2, prob, seed);
              expect_true(same_bits(raw(m2), mv), what + ": a second run gave another mask");
              expect_true(same_bits(raw(y2), raw(yt)), what + ": a second run gave another y");
              if (n >= 1000 && prob == 0.3) {
                SharedTensor<uint8_t> m3(shape);
                auto y3 = poisoned<T>(shape);
                nn::dropout(b, xt, y3, m3, prob, seed + 1);
                expect_true(!same_bits(raw(m3), mv), what + ": seed + 1 gave the same mask");
              }
            }
            // The gradient: any non-zero mask byte keeps.
            const vec dy = random_vec<T>(n);
            SharedTensor<uint8_t> mask(shape);
            std::vector<uint8_t> mv(n);
            std::uniform_int_distribution<int> byte(0, 3);
            for (size_t i = 0; i < n; ++i) {
              const int k = byte(rng());
              mv[i] = static_cast<uint8_t>(k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 2 : 255);
            }
            std::copy(mv.begin(), mv.end(), mask.write_only().begin());
            auto dyt = tensor_of<T>(shape, dy);
            auto dx = poisoned<T>(shape);
            nn::dropout_grad(b, dyt, mask, dx, prob);
            const vec dxv = values(dx);
            for (size_t i = 0; i < n; ++i) {
              const double ref = mv[i] ? rounded<T>(dy[i] * scale) : 0.0;
              report_element(matches(dxv[i], ref, 2 * eps<T>() * std::fabs(ref)), tag + " grad",
                             tname<T>(), i, dxv[i], ref, 2 * eps<T>() * std::fabs(ref));
            }
          },
          {key<pcy_nn_dropout_schema, T>(), key<pcy_nn_dropout_grad_schema, T>()});
    }
}

// ---- empty tensors and refused arguments ---------------------------------------------------

template <class T> void edge_cases(extension_suite& reg) {
  reg.add<T>(std::string("empty tensors ") + tname<T>(),
             [](const Backend& b) {
               SharedTensor<T> x({0}), y({0});
               (void)x.write_only();
               nn::relu(b, x, y);
               SharedTensor<T> s({0, 3}), t({0, 3});
               (void)s.write_only();
               nn::softmax(b, s, t, 1);
               expect_true(y.size() == 0 && t.size() == 0, "empty tensors grew");
             },
             {key<pcy_nn_relu_schema, T>(), key<pcy_nn_softmax_schema, T>()});
  reg.add<T>(std::string("refused arguments change nothing ") + tname<T>(), [](const Backend& b) {
    const vec xv = random_vec<T>(12);
    auto x = tensor_of<T>({12}, xv), y = tensor_of<T>({11}, random_vec<T>(11));
    const auto y0 = raw(y);
    expect_refused(
        "relu y of 11 elements", [&] { nn::relu(b, x, y); }, "relu", "argument y");
    auto x3 = tensor_of<T>({2, 3, 2}, xv), y3 = tensor_of<T>({2, 3, 2}, xv);
    const auto y30 = raw(y3);
    expect_refused(
        "softmax axis 3 of a 3-d tensor", [&] { nn::softmax(b, x3, y3, 3); }, "softmax",
        "argument axis");
    expect_refused(
        "convolution groups 2 of 3 channels",
        [&] {
          nn::ConvolutionParams p;
          p.groups = 2;
          (void)nn::Convolution(b, {1, 3, 5, 5}, {4, 1, 3, 3}, p, dtype_v<T>);
        },
        "convolution", "argument groups");
    auto px = tensor_of<T>({1, 1, 4, 4}, random_vec<T>(16));
    auto py = tensor_of<T>({1, 1, 2, 2}, random_vec<T>(4));
    const auto py0 = raw(py);
    nn::PoolingParams pp;
    pp.window = {2, 2};
    pp.padding = {2, 0};
    expect_refused(
        "pooling padding 2 with a window of 2", [&] { nn::pooling_max(b, px, py, pp); },
        "pooling_max", "argument padding");
    if constexpr (!is_half<T>) {
      SharedTensor<uint8_t> mask({12});
      auto dy = tensor_of<T>({12}, xv);
      expect_refused(
          "dropout probability 2", [&] { nn::dropout(b, x, dy, mask, 2.0, 1); }, "dropout",
          "argument probability");
      expect_true(same_bits(raw(dy), raw(tensor_of<T>({12}, xv))), "a refused dropout changed y");
    }
    expect_true(same_bits(raw(y), y0), "a refused relu changed y");
    expect_true(same_bits(raw(y3), y30), "a refused softmax changed y");
    expect_true(same_bits(raw(py), py0), "a refused pooling changed y");
  });
}

// ---- normalisation -------------------------------------------------------------------------

template <class T> void all_cases(extension_suite& reg) {
  activations<T>(reg);
  softmax_cases<T>(reg);
  convolution_cases<T>(reg);
  pooling_cases<T>(reg);
  if constexpr (!is_half<T>) { // nn.hpp takes LRN and dropout in f32 and f64 only
    lrn_cases<T>(reg);
    dropout_cases<T>(reg);
  }
  norm_cases<T>(reg);
  xent_cases<T>(reg);
  bn_cases<T>(reg);
  embedding_cases<T>(reg);
  edge_cases<T>(reg);
  if constexpr (!is_half<T>) input_class_cases<T>(reg);
}

// ---- routes --------------------------------------------------------------------------------

using key_fn = const OpKey& (*)(pcy_dtype) noexcept;
#define PCY_NN_SUITE_KEY(op) &ext::op_key<pcy_nn_##op##_schema>
const key_fn all_keys[] = {PCY_NN_SUITE_KEY(sigmoid),
                           PCY_NN_SUITE_KEY(sigmoid_pointwise),
                           PCY_NN_SUITE_KEY(sigmoid_grad),
                           PCY_NN_SUITE_KEY(sigmoid_pointwise_grad),
                           PCY_NN_SUITE_KEY(relu),
                           PCY_NN_SUITE_KEY(relu_pointwise),
                           PCY_NN_SUITE_KEY(relu_grad),
                           PCY_NN_SUITE_KEY(relu_pointwise_grad),
                           PCY_NN_SUITE_KEY(tanh),
                           PCY_NN_SUITE_KEY(tanh_pointwise),
                           PCY_NN_SUITE_KEY(tanh_grad),
                           PCY_NN_SUITE_KEY(tanh_pointwise_grad),
                           PCY_NN_SUITE_KEY(elu),
                           PCY_NN_SUITE_KEY(elu_pointwise),
                           PCY_NN_SUITE_KEY(elu_grad),
                           PCY_NN_SUITE_KEY(elu_pointwise_grad),
                           PCY_NN_SUITE_KEY(softmax),
                           PCY_NN_SUITE_KEY(log_softmax),
                           PCY_NN_SUITE_KEY(softmax_grad),
                           PCY_NN_SUITE_KEY(log_softmax_grad),
                           PCY_NN_SUITE_KEY(convolution),
                           PCY_NN_SUITE_KEY(convolution_grad_data),
                           PCY_NN_SUITE_KEY(convolution_grad_filter),
                           PCY_NN_SUITE_KEY(convolution_bias),
                           PCY_NN_SUITE_KEY(convolution_grad_bias),
                           PCY_NN_SUITE_KEY(convolution_algorithm),
                           PCY_NN_SUITE_KEY(pooling_max),
                           PCY_NN_SUITE_KEY(pooling_max_indexed),
                           PCY_NN_SUITE_KEY(pooling_max_grad),
                           PCY_NN_SUITE_KEY(pooling_max_grad_indexed),
                           PCY_NN_SUITE_KEY(pooling_avg),
                           PCY_NN_SUITE_KEY(pooling_avg_grad),
                           PCY_NN_SUITE_KEY(lrn),
                           PCY_NN_SUITE_KEY(lrn_grad),
                           PCY_NN_SUITE_KEY(dropout),
                           PCY_NN_SUITE_KEY(dropout_grad),
                           PCY_NN_SUITE_KEY(layer_norm),
                           PCY_NN_SUITE_KEY(layer_norm_grad),
                           PCY_NN_SUITE_KEY(rms_norm),
                           PCY_NN_SUITE_KEY(rms_norm_grad),
                           PCY_NN_SUITE_KEY(cross_entropy),
                           PCY_NN_SUITE_KEY(cross_entropy_grad),
                           PCY_NN_SUITE_KEY(embedding),
                           PCY_NN_SUITE_KEY(embedding_grad),
                           PCY_NN_SUITE_KEY(batch_norm),
                           PCY_NN_SUITE_KEY(batch_norm_grad)};
#undef PCY_NN_SUITE_KEY
static_assert(std::size(all_keys) == PCY_NN_OP_COUNT, "an op of pcy_nn.h is missing here");

// The ops the first case routes: every op in f32, f64, f16 and bf16 (the half ones reported where
// served).
std::vector<const OpKey*> nn_keys(pcy_dtype d) {
  std::vector<const OpKey*> keys;
  if (d != PCY_DTYPE_F32 && d != PCY_DTYPE_F64 && d != PCY_DTYPE_F16 && d != PCY_DTYPE_BF16)
    return keys; // pcy_nn.h's ops are floating point
  for (const key_fn kf : all_keys)
    keys.push_back(&kf(d));
  return keys;
}

} // namespace

suite nn_suite() {
  extension_suite reg("nn", PCY_NN_EXTENSION,
                      "the NN bundle of the framework: every op and dtype against a "
                      "double-precision reference, gradients also by finite differences, "
                      "pcy_nn.h's edge cases",
                      nn_keys);
  all_cases<float>(reg);
  all_cases<double>(reg);
  all_cases<f16>(reg);
  all_cases<bf16>(reg);
  return reg.finish();
}

} // namespace parenchyma::conformance
