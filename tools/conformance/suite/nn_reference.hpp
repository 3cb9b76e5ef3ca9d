// parenchyma-conformance: the NN suite's double-precision reference, written from the semantics
// in parenchyma/abi/ext/pcy_nn.h (not from any bundle). Every function takes and returns plain
// row-major vectors of double; the ones that sum also return, per output element, the sum of
// the magnitudes of the terms and the number of terms, for the tolerance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace parenchyma::conformance::nn_ref {

using vec = std::vector<double>;

// A result with its error budget: mag[i] = sum of |terms|, terms[i] = their number.
struct summed {
  vec v, mag, terms;
  explicit summed(size_t n = 0) : v(n, 0.0), mag(n, 0.0), terms(n, 0.0) {}
};

// ---- activations ------------------------------------------------------------------------

enum class act { sigmoid, relu, tanh, elu };

inline double forward(act a, double x, double alpha) {
  switch (a) {
  case act::sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case act::relu: return std::isnan(x) ? x : x > 0 ? x : x == 0 ? x : 0.0; // -0 stays -0
  case act::tanh: return std::tanh(x);
  case act::elu: return x > 0 ? x : std::isnan(x) ? x : alpha * std::expm1(x);
  }
  return 0;
}
// f'(x) from the forward's output y, as pcy_nn.h writes it.
inline double derivative(act a, double y, double alpha) {
  switch (a) {
  case act::sigmoid: return y * (1 - y);
  case act::relu: return y > 0 ? 1.0 : 0.0;
  case act::tanh: return 1 - y * y;
  case act::elu: return y > 0 ? 1.0 : y + alpha;
  }
  return 0;
}
// The magnitude of the terms of f'(x) (for the tolerance of dy * f'(x)).
inline double derivative_mag(act a, double y, double alpha) {
  switch (a) {
  case act::sigmoid: return std::fabs(y) + y * y;
  case act::relu: return 1;
  case act::tanh: return 1 + y * y;
  case act::elu: return y > 0 ? 1.0 : std::fabs(y) + std::fabs(alpha);
  }
  return 0;
}

// ---- softmax ----------------------------------------------------------------------------

struct axis_view {
  int64_t outer = 1, len = 1, inner = 1;
  axis_view(const std::vector<int64_t>& shape, int64_t axis) {
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
      if (i < axis) outer *= shape[i];
      if (i > axis) inner *= shape[i];
    }
    len = shape[axis];
  }
  size_t at(int64_t o, int64_t l, int64_t i) const {
    return static_cast<size_t>((o * len + l) * inner + i);
  }
};

// y and, per element, the magnitude its error scales with. eps: the tested type's epsilon.
// log_softmax's error scales with |x - max| (one correctly rounded subtraction) and |log s|,
// plus the rounding of the row's sum s = 1 + r (r the sum of e^(x - max) over the others): an
// absolute term that shrinks with r below one ulp of 1, where s rounds to 1 exactly and a
// correct log gives 0. So a dominant logit's log-probability is held to about 0 (not to the
// magnitude of x).
inline summed softmax(const vec& x, const std::vector<int64_t>& shape, int64_t axis, bool log,
                      double eps) {
  const axis_view a(shape, axis);
  summed r(x.size());
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < a.len; ++l)
        m = std::max(m, x[a.at(o, l, i)]);
      double s = 0;
      for (int64_t l = 0; l < a.len; ++l)
        s += std::exp(x[a.at(o, l, i)] - m);
      const double ls = std::log(s);
      for (int64_t l = 0; l < a.len; ++l) {
        const size_t k = a.at(o, l, i);
        const double d = x[k] - m;
        if (log) {
          r.v[k] = d - ls;
          r.mag[k] = std::fabs(d) + std::fabs(ls) + std::min(1.0, (s - 1) / eps);
        } else {
          r.v[k] = std::exp(d) / s;
          r.mag[k] = r.v[k] * (1 + std::fabs(d)); // exp's error grows with its argument
        }
        r.terms[k] = static_cast<double>(a.len);
      }
    }
  return r;
}
// softmax_grad dx = y (dy - sum(dy y)); log_softmax_grad dx = dy - e^y sum(dy).
inline summed softmax_grad(const vec& y, const vec& dy, const std::vector<int64_t>& shape,
                           int64_t axis, bool log) {
  const axis_view a(shape, axis);
  summed r(y.size());
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      double s = 0, smag = 0;
      for (int64_t l = 0; l < a.len; ++l) {
        const size_t k = a.at(o, l, i);
        s += log ? dy[k] : dy[k] * y[k];
        smag += std::fabs(log ? dy[k] : dy[k] * y[k]);
      }
      for (int64_t l = 0; l < a.len; ++l) {
        const size_t k = a.at(o, l, i);
        if (log) {
          const double e = std::exp(y[k]);
          r.v[k] = dy[k] - e * s;
          r.mag[k] = std::fabs(dy[k]) + e * smag * (1 + std::fabs(y[k]));
        } else {
          r.v[k] = y[k] * (dy[k] - s);
          r.mag[k] = std::fabs(y[k]) * (std::fabs(dy[k]) + smag);
        }
        r.terms[k] = static_cast<double>(a.len) + 1;
      }
    }
  return r;
}

// ---- convolution ------------------------------------------------------------------------

struct conv_geom {
  int64_t N, C, H, W, K, R, S;
  int64_t str_h, str_w, pad_h, pad_w, dil_h, dil_w, groups;
  int64_t P() const { return (H + 2 * pad_h - dil_h * (R - 1) - 1) / str_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dil_w * (S - 1) - 1) / str_w + 1; }
  int64_t Cg() const { return C / groups; }
  int64_t Kg() const { return K / groups; }
  size_t xs() const { return static_cast<size_t>(N * C * H * W); }
  size_t ws() const { return static_cast<size_t>(K * Cg() * R * S); }
  size_t ys() const { return static_cast<size_t>(N * K * P() * Q()); }
  // Calls f(x index, w index, y index) for every term of the convolution (x inside the image).
  template <class F> void each_term(F&& f) const {
    const int64_t P_ = P(), Q_ = Q(), Cg_ = Cg(), Kg_ = Kg();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t g = k / Kg_;
        for (int64_t p = 0; p < P_; ++p)
          for (int64_t q = 0; q < Q_; ++q) {
            const size_t yi = static_cast<size_t>(((n * K + k) * P_ + p) * Q_ + q);
            for (int64_t c = 0; c < Cg_; ++c)
              for (int64_t r = 0; r < R; ++r) {
                const int64_t h = p * str_h - pad_h + r * dil_h;
                if (h < 0 || h >= H) continue;
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t w = q * str_w - pad_w + s * dil_w;
                  if (w < 0 || w >= W) continue;
                  const size_t xi = static_cast<size_t>(((n * C + g * Cg_ + c) * H + h) * W + w);
                  const size_t wi = static_cast<size_t>(((k * Cg_ + c) * R + r) * S + s);
                  f(xi, wi, yi);
                }
              }
          }
      }
  }
};

inline summed conv_forward(const conv_geom& g, const vec& x, const vec& w) {
  summed r(g.ys());
  g.each_term([&](size_t xi, size_t wi, size_t yi) {
    r.v[yi] += x[xi] * w[wi];
    r.mag[yi] += std::fabs(x[xi] * w[wi]);
    r.terms[yi] += 1;
  });
  return r;
}
inline summed conv_grad_data(const conv_geom& g, const vec& w, const vec& dy) {
  summed r(g.xs());
  g.each_term([&](size_t xi, size_t wi, size_t yi) {
    r.v[xi] += dy[yi] * w[wi];
    r.mag[xi] += std::fabs(dy[yi] * w[wi]);
    r.terms[xi] += 1;
  });
  return r;
}
inline summed conv_grad_filter(const conv_geom& g, const vec& x, const vec& dy) {
  summed r(g.ws());
  g.each_term([&](size_t xi, size_t wi, size_t yi) {
    r.v[wi] += dy[yi] * x[xi];
    r.mag[wi] += std::fabs(dy[yi] * x[xi]);
    r.terms[wi] += 1;
  });
  return r;
}
inline summed conv_grad_bias(const conv_geom& g, const vec& dy) {
  summed r(static_cast<size_t>(g.K));
  const int64_t plane = g.P() * g.Q();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t i = 0; i < plane; ++i) {
        const double v = dy[static_cast<size_t>((n * g.K + k) * plane + i)];
        r.v[static_cast<size_t>(k)] += v;
        r.mag[static_cast<size_t>(k)] += std::fabs(v);
        r.terms[static_cast<size_t>(k)] += 1;
      }
  return r;
}

// ---- pooling ----------------------------------------------------------------------------

struct pool_geom {
  int64_t N, C, H, W, win_h, win_w, str_h, str_w, pad_h, pad_w;
  int64_t P() const { return (H + 2 * pad_h - win_h) / str_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - win_w) / str_w + 1; }
  size_t xs() const { return static_cast<size_t>(N * C * H * W); }
  size_t ys() const { return static_cast<size_t>(N * C * P() * Q()); }
  // Calls f(y index, plane offset of x, h, w) for every element of x in each window, in
  // row-major window order.
  template <class F> void each(F&& f) const {
    const int64_t P_ = P(), Q_ = Q();
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t p = 0; p < P_; ++p)
        for (int64_t q = 0; q < Q_; ++q) {
          const size_t yi = static_cast<size_t>((nc * P_ + p) * Q_ + q);
          for (int64_t r = 0; r < win_h; ++r) {
            const int64_t h = p * str_h - pad_h + r;
            if (h < 0 || h >= H) continue;
            for (int64_t s = 0; s < win_w; ++s) {
              const int64_t w = q * str_w - pad_w + s;
              if (w < 0 || w >= W) continue;
              f(yi, static_cast<size_t>(nc * H * W), h, w);
            }
          }
        }
  }
};

// y and indices (h W + w of the first maximum; NaN counts as larger than any number).
inline void pool_max(const pool_geom& g, const vec& x, vec& y, std::vector<int32_t>& idx) {
  y.assign(g.ys(), 0);
  idx.assign(g.ys(), -1);
  g.each([&](size_t yi, size_t plane, int64_t h, int64_t w) {
    const double v = x[plane + static_cast<size_t>(h * g.W + w)];
    const bool first = idx[yi] < 0;
    const bool greater = !std::isnan(y[yi]) && (std::isnan(v) || v > y[yi]);
    if (first || greater) {
      y[yi] = v;
      idx[yi] = static_cast<int32_t>(h * g.W + w);
    }
  });
}
// dx from dy added at idx (an index outside the plane adds nothing).
inline summed pool_max_grad(const pool_geom& g, const vec& dy, const std::vector<int32_t>& idx) {
  summed r(g.xs());
  const int64_t P_ = g.P(), Q_ = g.Q(), plane = g.H * g.W;
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t i = 0; i < P_ * Q_; ++i) {
      const size_t yi = static_cast<size_t>(nc * P_ * Q_ + i);
      const int64_t at = idx[yi];
      if (at < 0 || at >= plane) continue;
      const size_t xi = static_cast<size_t>(nc * plane + at);
      r.v[xi] += dy[yi];
      r.mag[xi] += std::fabs(dy[yi]);
      r.terms[xi] += 1;
    }
  return r;
}
inline summed pool_avg(const pool_geom& g, const vec& x, bool include_padding) {
  summed r(g.ys());
  vec count(g.ys(), 0);
  g.each([&](size_t yi, size_t plane, int64_t h, int64_t w) {
    const double v = x[plane + static_cast<size_t>(h * g.W + w)];
    r.v[yi] += v;
    r.mag[yi] += std::fabs(v);
    r.terms[yi] += 1;
    count[yi] += 1;
  });
  for (size_t i = 0; i < r.v.size(); ++i) {
    const double d = include_padding ? static_cast<double>(g.win_h * g.win_w) : count[i];
    r.v[i] /= d;
    r.mag[i] /= d;
  }
  return r;
}
inline summed pool_avg_grad(const pool_geom& g, const vec& dy, bool include_padding) {
  vec count(g.ys(), 0);
  g.each([&](size_t yi, size_t, int64_t, int64_t) { count[yi] += 1; });
  summed r(g.xs());
  g.each([&](size_t yi, size_t plane, int64_t h, int64_t w) {
    const double d = include_padding ? static_cast<double>(g.win_h * g.win_w) : count[yi];
    const size_t xi = plane + static_cast<size_t>(h * g.W + w);
    r.v[xi] += dy[yi] / d;
    r.mag[xi] += std::fabs(dy[yi] / d);
    r.terms[xi] += 1;
  });
  return r;
}

// ---- LRN --------------------------------------------------------------------------------

struct lrn_params {
  int64_t n;
  double alpha, beta, k;
};

// s[c] for every element of x (N x C x H x W).
inline vec lrn_scale(const vec& x, int64_t N, int64_t C, int64_t HW, const lrn_params& p) {
  vec s(x.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t lo = std::max<int64_t>(0, c - p.n / 2),
                      hi = std::min<int64_t>(C - 1, c + (p.n - 1) / 2);
        double sum = 0;
        for (int64_t cc = lo; cc <= hi; ++cc) {
          const double v = x[static_cast<size_t>((b * C + cc) * HW + i)];
          sum += v * v;
        }
        s[static_cast<size_t>((b * C + c) * HW + i)] =
            p.k + p.alpha / static_cast<double>(p.n) * sum;
      }
  return s;
}
inline summed lrn(const vec& x, int64_t N, int64_t C, int64_t HW, const lrn_params& p) {
  const vec s = lrn_scale(x, N, C, HW, p);
  summed r(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    r.v[i] = x[i] * std::pow(s[i], -p.beta);
    // pow's error grows with beta |log s|; the sum of squares with the window.
    r.mag[i] = std::fabs(r.v[i]) * (1 + p.beta * (1 + std::fabs(std::log(s[i]))));
    r.terms[i] = static_cast<double>(std::min(p.n, C)) + 1;
  }
  return r;
}
inline summed lrn_grad(const vec& x, const vec& y, const vec& dy, int64_t N, int64_t C, int64_t HW,
                       const lrn_params& p) {
  const vec s = lrn_scale(x, N, C, HW, p);
  summed r(x.size());
  const double f = 2 * p.alpha * p.beta / static_cast<double>(p.n);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const size_t k = static_cast<size_t>((b * C + c) * HW + i);
        // c lies in W(c') for c - (n-1)/2 <= c' <= c + n/2.
        const int64_t lo = std::max<int64_t>(0, c - (p.n - 1) / 2),
                      hi = std::min<int64_t>(C - 1, c + p.n / 2);
        double sum = 0, mag = 0;
        for (int64_t cc = lo; cc <= hi; ++cc) {
          const size_t j = static_cast<size_t>((b * C + cc) * HW + i);
          sum += dy[j] * y[j] / s[j];
          mag += std::fabs(dy[j] * y[j] / s[j]);
        }
        const double first = dy[k] * std::pow(s[k], -p.beta);
        r.v[k] = first - f * x[k] * sum;
        r.mag[k] = std::fabs(first) * (1 + p.beta * (1 + std::fabs(std::log(s[k])))) +
                   std::fabs(f * x[k]) * mag * (p.beta + 2);
        r.terms[k] = static_cast<double>(std::min(p.n, C)) * 2 + 2;
      }
  return r;
}

// ---- dropout ----------------------------------------------------------------------------

// splitmix64 of element i, spelled out from pcy_nn.h's text (not from its macro).
inline bool dropout_keep(uint64_t seed, uint64_t i, double probability) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  const auto t = static_cast<uint64_t>(std::floor(probability * 16777216.0 + 0.5));
  return (z >> 40) >= t;
}

// ---- normalisation (layer_norm, rms_norm) -------------------------------------------------
// Rows of n (outer rows). The forward: y with each element's magnitude (|x - mean| and |mean|
// scaled, plus |bias|: the error a sum of n terms in the statistics dtype leaves), and each
// row's mean and rstd.
struct norm_fwd_ref {
  summed y;
  vec mean, rstd;
};
inline norm_fwd_ref norm_forward(const vec& x, const vec& w, const vec& b, size_t outer, size_t n,
                                 double epsilon, bool layer) {
  norm_fwd_ref r{summed(outer * n), vec(outer), vec(outer)};
  for (size_t o = 0; o < outer; ++o) {
    const double* xr = x.data() + o * n;
    double mu = 0, amu = 0;
    if (layer) {
      for (size_t j = 0; j < n; ++j) {
        mu += xr[j];
        amu += std::fabs(xr[j]);
      }
      mu /= static_cast<double>(n);
      amu /= static_cast<double>(n);
    }
    double v = 0;
    for (size_t j = 0; j < n; ++j)
      v += (xr[j] - mu) * (xr[j] - mu);
    v /= static_cast<double>(n);
    const double rs = 1 / std::sqrt(v + epsilon);
    r.mean[o] = mu;
    r.rstd[o] = rs;
    for (size_t j = 0; j < n; ++j) {
      const size_t k = o * n + j;
      r.y.v[k] = (xr[j] - mu) * rs * w[j] + (layer ? b[j] : 0.0);
      r.y.mag[k] = (std::fabs(xr[j]) + amu) * rs * std::fabs(w[j]) + (layer ? std::fabs(b[j]) : 0);
      r.y.terms[k] = static_cast<double>(n);
    }
  }
  return r;
}
// The gradients from the statistics the op was given (mean, rstd as stored).
struct norm_bwd_ref {
  summed dx, dw, db;
};
inline norm_bwd_ref norm_backward(const vec& x, const vec& w, const vec& mean, const vec& rstd,
                                  const vec& dy, size_t outer, size_t n, bool layer) {
  norm_bwd_ref r{summed(outer * n), summed(n), summed(n)};
  const double dn = static_cast<double>(n);
  for (size_t o = 0; o < outer; ++o) {
    const double mu = layer ? mean[o] : 0, rs = rstd[o];
    double sg = 0, sgx = 0, ag = 0, agx = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t k = o * n + j;
      const double xh = (x[k] - mu) * rs, axh = (std::fabs(x[k]) + std::fabs(mu)) * rs;
      const double g = dy[k] * w[j];
      sg += g;
      ag += std::fabs(g);
      sgx += g * xh;
      agx += std::fabs(g) * axh;
      r.dw.v[j] += dy[k] * xh;
      r.dw.mag[j] += std::fabs(dy[k]) * axh;
      r.db.v[j] += dy[k];
      r.db.mag[j] += std::fabs(dy[k]);
    }
    for (size_t j = 0; j < n; ++j) {
      const size_t k = o * n + j;
      const double xh = (x[k] - mu) * rs, axh = (std::fabs(x[k]) + std::fabs(mu)) * rs;
      const double g = dy[k] * w[j];
      r.dx.v[k] = rs * (g - (layer ? sg / dn : 0) - xh * sgx / dn);
      r.dx.mag[k] = rs * (std::fabs(g) + (layer ? ag / dn : 0) + axh * agx / dn);
      r.dx.terms[k] = dn;
    }
  }
  for (size_t j = 0; j < n; ++j) {
    r.dw.terms[j] = static_cast<double>(outer);
    r.db.terms[j] = static_cast<double>(outer);
  }
  return r;
}

// ---- batch normalisation ------------------------------------------------------------------
// x is N x C x sp (channel c's elements x[(n C + c) sp + s], M = N sp of them). The forward: y
// with each element's magnitude, the statistics used (mean, rstd), the running statistics after
// the call (rm, rv as given where not training), each with its magnitude for the tolerance.
struct bn_fwd_ref {
  summed y, mean, rstd, rm, rv;
};
inline bn_fwd_ref bn_forward(const vec& x, const vec& w, const vec& b, const vec& rm, const vec& rv,
                             size_t N, size_t C, size_t sp, bool training, double momentum,
                             double epsilon) {
  bn_fwd_ref r{summed(N * C * sp), summed(C), summed(C), summed(C), summed(C)};
  const size_t M = N * sp;
  const double dm = static_cast<double>(M);
  auto at = [&](size_t n, size_t c, size_t s) { return (n * C + c) * sp + s; };
  for (size_t c = 0; c < C; ++c) {
    double mu = 0, amu = 0, rs = 0, terms = 4;
    if (training) {
      for (size_t n = 0; n < N; ++n)
        for (size_t s = 0; s < sp; ++s) {
          mu += x[at(n, c, s)];
          amu += std::fabs(x[at(n, c, s)]);
        }
      mu /= dm;
      amu /= dm;
      double v = 0;
      for (size_t n = 0; n < N; ++n)
        for (size_t s = 0; s < sp; ++s)
          v += (x[at(n, c, s)] - mu) * (x[at(n, c, s)] - mu);
      v /= dm;
      rs = 1 / std::sqrt(v + epsilon);
      terms = dm;
      // The variance's error: each (x - mean) rounded (|x| + |mean|), then squared and summed.
      const double vmag = v + 4 * std::sqrt(v) * amu;
      r.rm.v[c] = (1 - momentum) * rm[c] + momentum * mu;
      r.rm.mag[c] = (1 - momentum) * std::fabs(rm[c]) + momentum * amu;
      r.rv.v[c] = (1 - momentum) * rv[c] + momentum * v * dm / (dm - 1);
      r.rv.mag[c] = (1 - momentum) * std::fabs(rv[c]) + momentum * vmag * dm / (dm - 1);
      r.rstd.mag[c] = rs * (1 + 4 * amu * rs);
    } else {
      mu = rm[c];
      amu = std::fabs(mu);
      rs = 1 / std::sqrt(rv[c] + epsilon);
      r.rm.v[c] = rm[c];
      r.rv.v[c] = rv[c];
      r.rstd.mag[c] = rs;
    }
    r.mean.v[c] = mu;
    r.mean.mag[c] = amu;
    r.rstd.v[c] = rs;
    for (summed* t : {&r.mean, &r.rstd, &r.rm, &r.rv})
      t->terms[c] = terms;
    for (size_t n = 0; n < N; ++n)
      for (size_t s = 0; s < sp; ++s) {
        const size_t k = at(n, c, s);
        r.y.v[k] = (x[k] - mu) * rs * w[c] + b[c];
        r.y.mag[k] = (std::fabs(x[k]) + amu) * rs * std::fabs(w[c]) + std::fabs(b[c]);
        r.y.terms[k] = terms;
      }
  }
  return r;
}
// The gradients from the statistics the op was given (mean, rstd as stored).
struct bn_bwd_ref {
  summed dx, dw, db;
};
inline bn_bwd_ref bn_backward(const vec& x, const vec& w, const vec& mean, const vec& rstd,
                              const vec& dy, size_t N, size_t C, size_t sp, bool training) {
  bn_bwd_ref r{summed(N * C * sp), summed(C), summed(C)};
  const double dm = static_cast<double>(N * sp);
  auto at = [&](size_t n, size_t c, size_t s) { return (n * C + c) * sp + s; };
  for (size_t c = 0; c < C; ++c) {
    const double mu = mean[c], rs = rstd[c];
    double sg = 0, sgx = 0, ag = 0, agx = 0;
    for (size_t n = 0; n < N; ++n)
      for (size_t s = 0; s < sp; ++s) {
        const size_t k = at(n, c, s);
        const double xh = (x[k] - mu) * rs, axh = (std::fabs(x[k]) + std::fabs(mu)) * rs;
        const double g = dy[k] * w[c];
        sg += g;
        ag += std::fabs(g);
        sgx += g * xh;
        agx += std::fabs(g) * axh;
        r.dw.v[c] += dy[k] * xh;
        r.dw.mag[c] += std::fabs(dy[k]) * axh;
        r.db.v[c] += dy[k];
        r.db.mag[c] += std::fabs(dy[k]);
      }
    r.dw.terms[c] = r.db.terms[c] = dm;
    for (size_t n = 0; n < N; ++n)
      for (size_t s = 0; s < sp; ++s) {
        const size_t k = at(n, c, s);
        const double xh = (x[k] - mu) * rs, axh = (std::fabs(x[k]) + std::fabs(mu)) * rs;
        const double g = dy[k] * w[c];
        if (training) {
          r.dx.v[k] = rs * (g - sg / dm - xh * sgx / dm);
          r.dx.mag[k] = rs * (std::fabs(g) + ag / dm + axh * agx / dm);
          r.dx.terms[k] = dm;
        } else {
          r.dx.v[k] = rs * g;
          r.dx.mag[k] = rs * std::fabs(g);
          r.dx.terms[k] = 2;
        }
      }
  }
  return r;
}

// ---- cross entropy ------------------------------------------------------------------------
// Rows of C classes. The forward: each row's lse, and the loss ('none': per row; 'mean' /
// 'sum': one element) with its magnitude (|lse|, |x_t|, the row's mean |x| and 1 for the
// exponentials' sum, each C terms).
struct xent_fwd_ref {
  summed loss;
  vec lse;
};
inline bool xent_valid(int32_t t, size_t C) { return t >= 0 && static_cast<size_t>(t) < C; }
inline xent_fwd_ref xent_forward(const vec& x, const std::vector<int32_t>& labels, size_t rows,
                                 size_t C, int64_t ignore, double eps, int reduction) {
  xent_fwd_ref r{summed(reduction == 0 ? rows : 1), vec(rows)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double total = 0, tmag = 0, count = 0;
  for (size_t o = 0; o < rows; ++o) {
    const double* xr = x.data() + o * C;
    bool has_nan = false;
    double m = -std::numeric_limits<double>::infinity(), sx = 0, ax = 0;
    for (size_t j = 0; j < C; ++j) {
      has_nan = has_nan || std::isnan(xr[j]);
      m = std::max(m, xr[j]);
      sx += xr[j];
      if (std::isfinite(xr[j])) ax += std::fabs(xr[j]);
    }
    double se = 0;
    for (size_t j = 0; j < C; ++j)
      se += std::exp(xr[j] - m);
    const double l = has_nan ? nan : m + std::log(se);
    r.lse[o] = l;
    double v = 0, mag = 0;
    const int32_t t = labels[o];
    if (static_cast<int64_t>(t) != ignore) {
      count += 1;
      if (!xent_valid(t, C)) {
        v = nan;
      } else {
        v = (1 - eps) * (l - xr[t]) + (eps > 0 ? eps * (l - sx / static_cast<double>(C)) : 0.0);
        mag = 2 * std::fabs(l) + std::fabs(xr[t]) + ax / static_cast<double>(C) + 1;
      }
      total += v;
      tmag += mag;
    }
    if (reduction == 0) {
      r.loss.v[o] = v;
      r.loss.mag[o] = mag;
      r.loss.terms[o] = static_cast<double>(C);
    }
  }
  if (reduction != 0) {
    r.loss.v[0] = reduction == 1 ? total / count : total; // 0 / 0: NaN
    r.loss.mag[0] = reduction == 1 ? tmag / count : tmag;
    r.loss.terms[0] = static_cast<double>(C + rows);
  }
  return r;
}
// dlogits from the lse the op was given (as stored) and dloss.
inline summed xent_backward(const vec& x, const std::vector<int32_t>& labels, const vec& lse,
                            const vec& dloss, size_t rows, size_t C, int64_t ignore, double eps,
                            int reduction) {
  summed r(rows * C);
  double g0 = reduction == 0 ? 0 : dloss[0];
  if (reduction == 1) {
    double count = 0;
    for (size_t o = 0; o < rows; ++o)
      count += static_cast<int64_t>(labels[o]) == ignore ? 0 : 1;
    g0 /= count;
  }
  const double off = eps / static_cast<double>(C);
  for (size_t o = 0; o < rows; ++o) {
    const int32_t t = labels[o];
    const bool ignored = static_cast<int64_t>(t) == ignore, ok = xent_valid(t, C);
    const double g = reduction == 0 ? dloss[o] : g0;
    for (size_t j = 0; j < C; ++j) {
      const size_t k = o * C + j;
      r.terms[k] = 1;
      if (ignored) continue; // 0
      if (!ok) {
        r.v[k] = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      const double p = std::exp(x[k] - lse[o]);
      const double h = static_cast<int32_t>(j) == t ? 1 - eps : 0.0;
      r.v[k] = g * (p - off - h);
      r.mag[k] =
          std::fabs(g) * ((p == 0 ? 0 : p * (2 + std::fabs(x[k]) + std::fabs(lse[o]))) + off + h);
    }
  }
  return r;
}

// ---- embedding ------------------------------------------------------------------------------
// The forward: y[i, :] = w[idx[i], :] (exact), NaN rows for indices outside [0, V).
inline summed embedding_forward(const vec& w, const std::vector<int32_t>& idx, size_t V, size_t D) {
  summed r(idx.size() * D);
  for (size_t i = 0; i < idx.size(); ++i)
    for (size_t j = 0; j < D; ++j) {
      const bool ok = idx[i] >= 0 && static_cast<size_t>(idx[i]) < V;
      r.v[i * D + j] =
          ok ? w[static_cast<size_t>(idx[i]) * D + j] : std::numeric_limits<double>::quiet_NaN();
      r.terms[i * D + j] = 1;
    }
  return r;
}
// The gradient in double: dw[v, :] = the sum of the dy rows indexed v (magnitude: the sum of
// their absolute values; terms: how many); padding_idx's row and indices outside add nothing.
inline summed embedding_backward(const std::vector<int32_t>& idx, const vec& dy, size_t V, size_t D,
                                 int64_t padding_idx) {
  summed r(V * D);
  for (size_t i = 0; i < idx.size(); ++i) {
    const int32_t v = idx[i];
    if (v < 0 || static_cast<size_t>(v) >= V || static_cast<int64_t>(v) == padding_idx) continue;
    for (size_t j = 0; j < D; ++j) {
      const size_t k = static_cast<size_t>(v) * D + j;
      r.v[k] += dy[i * D + j];
      r.mag[k] += std::fabs(dy[i * D + j]);
      r.terms[k] += 1;
    }
  }
  return r;
}
// The gradient exactly as pcy_nn.h specifies its bits: each row summed in the compute type C
// (float for f16, bf16 and f32; double for f64) in increasing position order from +0; the caller
// rounds each sum once to the op's dtype.
template <class C>
std::vector<C> embedding_backward_ordered(const std::vector<int32_t>& idx, const vec& dy, size_t V,
                                          size_t D, int64_t padding_idx) {
  std::vector<C> r(V * D, C(0));
  for (size_t i = 0; i < idx.size(); ++i) {
    const int32_t v = idx[i];
    if (v < 0 || static_cast<size_t>(v) >= V || static_cast<int64_t>(v) == padding_idx) continue;
    for (size_t j = 0; j < D; ++j)
      r[static_cast<size_t>(v) * D + j] += static_cast<C>(dy[i * D + j]);
  }
  return r;
}

} // namespace parenchyma::conformance::nn_ref
