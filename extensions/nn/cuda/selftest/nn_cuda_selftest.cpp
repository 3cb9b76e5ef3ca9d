// nn-cuda-selftest: the quick GPU check of the CUDA NN bundle. Runs every op of pcy_nn.h through
// the public front-end (parenchyma/nn.hpp) on the cuda backend, in f32 and f64 (and f16/bf16
// where the bundle serves them), and compares each result with double-precision host loops on
// the same (rounded) inputs. Prints one line per op and dtype, PASS or FAIL with the largest
// error relative to its bound, and exits 1 on any failure (2 when there is no cuda backend).
// An op that ran elsewhere (fallback) fails: this checks the cuda bundle, not the host.
//
//   build-nn/bin/nn-cuda-selftest [request]      (request: a backend, default "cuda")
#include <parenchyma/abi/ext/pcy_nn.h>
#include <parenchyma/nn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace parenchyma;
using Vec = std::vector<double>;

int failures = 0, passes = 0;

template <class T> struct traits;
template <> struct traits<float> {
  static constexpr const char* name = "f32";
  static constexpr double eps = 0x1p-23, tiny = 0x1p-126;
  static float to(double v) { return static_cast<float>(v); }
  static double from(float v) { return v; }
};
template <> struct traits<double> {
  static constexpr const char* name = "f64";
  static constexpr double eps = 0x1p-52, tiny = 0x1p-1022;
  static double to(double v) { return v; }
  static double from(double v) { return v; }
};
template <> struct traits<f16> {
  static constexpr const char* name = "f16";
  static constexpr double eps = 0x1p-10, tiny = 0x1p-14;
  static f16 to(double v) { return f16(static_cast<float>(v)); }
  static double from(f16 v) { return static_cast<float>(v); }
};
template <> struct traits<bf16> {
  static constexpr const char* name = "bf16";
  static constexpr double eps = 0x1p-7, tiny = 0x1p-126;
  static bf16 to(double v) { return bf16(static_cast<float>(v)); }
  static double from(bf16 v) { return static_cast<float>(v); }
};

std::mt19937_64 rng(20261201);
Vec random_vec(size_t n, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  Vec v(n);
  for (double& e : v)
    e = u(rng);
  return v;
}

// Writes v into t, rounding v to what t holds.
template <class T> void put(SharedTensor<T>& t, Vec& v) {
  auto s = t.write_only();
  for (size_t i = 0; i < v.size(); ++i) {
    s[i] = traits<T>::to(v[i]);
    v[i] = traits<T>::from(s[i]);
  }
}
template <class T> Vec get(const SharedTensor<T>& t) {
  const auto s = t.read();
  Vec v(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    v[i] = traits<T>::from(s[i]);
  return v;
}
template <class T> SharedTensor<T> make(const nn::Shape& shape, Vec& v) {
  SharedTensor<T> t(shape);
  put(t, v);
  return t;
}
size_t count(const nn::Shape& s) {
  size_t n = 1;
  for (int64_t e : s)
    n *= static_cast<size_t>(e);
  return n;
}

// One line: PASS when every |got - want| <= bound (NaN matches NaN), with the largest ratio.
void report(const std::string& op, const char* dt, const Vec& got, const Vec& want,
            const Vec& bound, const std::string& note = {}) {
  double worst = 0;
  size_t bad = 0, at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    const double e = std::fabs(got[i] - want[i]);
    const double r = e == 0 ? 0 : bound[i] > 0 ? e / bound[i] : INFINITY;
    if (!(r <= 1)) {
      if (bad++ == 0) at = i;
    }
    if (!(r <= worst)) worst = r;
  }
  const bool ok = bad == 0 && got.size() == want.size();
  ok ? ++passes : ++failures;
  std::printf("%s %-34s %-4s max err/bound %.3g%s%s\n", ok ? "PASS" : "FAIL", op.c_str(), dt, worst,
              note.c_str(),
              ok ? ""
                 : (" (" + std::to_string(bad) + " bad, first at " + std::to_string(at) + ": got " +
                    std::to_string(got.empty() ? 0.0 : got[at]) + " want " +
                    std::to_string(want[at]) + ")")
                       .c_str());
}
void report_fail(const std::string& op, const char* dt, const std::string& why) {
  ++failures;
  std::printf("FAIL %-34s %-4s %s\n", op.c_str(), dt, why.c_str());
}

// Runs f, failing the line when it throws or when an op ran elsewhere.
bool guarded(const Backend& b, const std::string& op, const char* dt,
             const std::function<void()>& f) {
  const uint64_t before = b.fallback_count();
  try {
    f();
  } catch (const std::exception& e) {
    report_fail(op, dt, std::string("threw: ") + e.what());
    return false;
  }
  if (b.fallback_count() != before) {
    report_fail(op, dt, "ran by fallback on another framework");
    return false;
  }
  return true;
}

// ---- activations --------------------------------------------------------------------------

double act_f(int a, double x, double alpha) {
  switch (a) {
  case 0: return 1 / (1 + std::exp(-x));
  case 1: return x < 0 ? 0.0 : x;
  case 2: return std::tanh(x);
  default: return x > 0 ? x : alpha * std::expm1(x);
  }
}
double act_d(int a, double y, double alpha) {
  switch (a) {
  case 0: return y * (1 - y);
  case 1: return y > 0 ? 1.0 : 0.0;
  case 2: return 1 - y * y;
  default: return y > 0 ? 1.0 : y + alpha;
  }
}

template <class T> void activations(const Backend& b) {
  using tr = traits<T>;
  const char* names[4] = {"sigmoid", "relu", "tanh", "elu"};
  const double alpha = 0.7;
  for (int a = 0; a < 4; ++a) {
    for (size_t n : {size_t(4097), size_t(1) << 20}) {
      const nn::Shape shape{static_cast<int64_t>(n)};
      Vec xv = random_vec(n, -6, 6), yv = random_vec(n, -1.2, 1.2), dv = random_vec(n);
      Vec want(n), bound(n), gwant(n), gbound(n);
      SharedTensor<T> x = make<T>(shape, xv), y(shape), yin = make<T>(shape, yv),
                      dy = make<T>(shape, dv), dx(shape);
      for (size_t i = 0; i < n; ++i) {
        want[i] = act_f(a, xv[i], alpha);
        bound[i] = 8 * tr::eps * std::fabs(want[i]) + 2 * tr::tiny;
        gwant[i] = dv[i] * act_d(a, yv[i], alpha);
        gbound[i] =
            8 * tr::eps * (std::fabs(gwant[i]) + std::fabs(dv[i]) * (1 + yv[i] * yv[i] + alpha)) +
            2 * tr::tiny;
      }
      const std::string sz = " n=" + std::to_string(n);
      const std::string nm = names[a];
      auto fwd = [&](TensorStorage& in, TensorStorage& out) {
        if (a == 0) nn::sigmoid(b, in, out);
        if (a == 1) nn::relu(b, in, out);
        if (a == 2) nn::tanh(b, in, out);
        if (a == 3) nn::elu(b, in, out, alpha);
      };
      if (guarded(b, nm + sz, tr::name, [&] { fwd(x, y); }))
        report(nm + sz, tr::name, get(y), want, bound);
      SharedTensor<T> xp = make<T>(shape, xv);
      if (guarded(b, nm + "_pointwise" + sz, tr::name, [&] {
            if (a == 0) nn::sigmoid_pointwise(b, xp);
            if (a == 1) nn::relu_pointwise(b, xp);
            if (a == 2) nn::tanh_pointwise(b, xp);
            if (a == 3) nn::elu_pointwise(b, xp, alpha);
          }))
        report(nm + "_pointwise" + sz, tr::name, get(xp), want, bound);
      if (guarded(b, nm + "_grad" + sz, tr::name, [&] {
            if (a == 0) nn::sigmoid_grad(b, yin, dy, dx);
            if (a == 1) nn::relu_grad(b, yin, dy, dx);
            if (a == 2) nn::tanh_grad(b, yin, dy, dx);
            if (a == 3) nn::elu_grad(b, yin, dy, dx, alpha);
          }))
        report(nm + "_grad" + sz, tr::name, get(dx), gwant, gbound);
      SharedTensor<T> d = make<T>(shape, dv);
      if (guarded(b, nm + "_pointwise_grad" + sz, tr::name, [&] {
            if (a == 0) nn::sigmoid_pointwise_grad(b, yin, d);
            if (a == 1) nn::relu_pointwise_grad(b, yin, d);
            if (a == 2) nn::tanh_pointwise_grad(b, yin, d);
            if (a == 3) nn::elu_pointwise_grad(b, yin, d, alpha);
          }))
        report(nm + "_pointwise_grad" + sz, tr::name, get(d), gwant, gbound);
    }
  }
}

// ---- softmax ------------------------------------------------------------------------------

template <class T> void softmaxes(const Backend& b) {
  using tr = traits<T>;
  struct sc {
    nn::Shape shape;
    int64_t axis;
  };
  // Warp rows, block rows (len > 1024), strided (inner > 1).
  const sc cases[] = {{{300, 10}, 1}, {{37, 1500}, 1}, {{4, 33, 5}, 1}, {{3, 2, 70}, 0}};
  for (const sc& s : cases) {
    const size_t n = count(s.shape);
    size_t outer = 1, inner = 1;
    const auto len = static_cast<size_t>(s.shape[static_cast<size_t>(s.axis)]);
    for (size_t i = 0; i < s.shape.size(); ++i) {
      if (static_cast<int64_t>(i) < s.axis) outer *= static_cast<size_t>(s.shape[i]);
      if (static_cast<int64_t>(i) > s.axis) inner *= static_cast<size_t>(s.shape[i]);
    }
    Vec xv = random_vec(n, -5, 5), pv = random_vec(n, 0, 1), lv = random_vec(n, -6, 0),
        dv = random_vec(n);
    SharedTensor<T> x = make<T>(s.shape, xv), ys(s.shape), yl(s.shape), p = make<T>(s.shape, pv),
                    l = make<T>(s.shape, lv), dy = make<T>(s.shape, dv), dxs(s.shape), dxl(s.shape);
    Vec ws(n), wl(n), bs(n), bl(n), wgs(n), wgl(n), bgs(n), bgl(n);
    for (size_t o = 0; o < outer; ++o)
      for (size_t in = 0; in < inner; ++in) {
        auto at = [&](size_t j) { return (o * len + j) * inner + in; };
        double m = -INFINITY, sum = 0, tp = 0, tpa = 0, tl = 0, tla = 0, ma = 0;
        for (size_t j = 0; j < len; ++j)
          m = std::max(m, xv[at(j)]);
        for (size_t j = 0; j < len; ++j) {
          sum += std::exp(xv[at(j)] - m);
          ma = std::max(ma, std::fabs(xv[at(j)]));
          tp += dv[at(j)] * pv[at(j)];
          tpa += std::fabs(dv[at(j)] * pv[at(j)]);
          tl += dv[at(j)];
          tla += std::fabs(dv[at(j)]);
        }
        for (size_t j = 0; j < len; ++j) {
          const size_t e = at(j);
          ws[e] = std::exp(xv[e] - m) / sum;
          bs[e] = 16 * tr::eps * ws[e] + 2 * tr::tiny;
          wl[e] = xv[e] - m - std::log(sum);
          bl[e] = 16 * tr::eps * (std::fabs(wl[e]) + 2 * ma + std::log(double(len)) + 1);
          wgs[e] = pv[e] * (dv[e] - tp);
          bgs[e] = 16 * tr::eps * pv[e] * (std::fabs(dv[e]) + tpa) + 2 * tr::tiny;
          wgl[e] = dv[e] - std::exp(lv[e]) * tl;
          bgl[e] = 16 * tr::eps * (std::fabs(dv[e]) + std::exp(lv[e]) * tla) + 2 * tr::tiny;
        }
      }
    std::string sh = " [";
    for (size_t i = 0; i < s.shape.size(); ++i)
      sh += (i ? "," : "") + std::to_string(s.shape[i]);
    sh += "] axis " + std::to_string(s.axis);
    if (guarded(b, "softmax" + sh, tr::name, [&] { nn::softmax(b, x, ys, s.axis); }))
      report("softmax" + sh, tr::name, get(ys), ws, bs);
    if (guarded(b, "log_softmax" + sh, tr::name, [&] { nn::log_softmax(b, x, yl, s.axis); }))
      report("log_softmax" + sh, tr::name, get(yl), wl, bl);
    if (guarded(b, "softmax_grad" + sh, tr::name, [&] { nn::softmax_grad(b, p, dy, dxs, s.axis); }))
      report("softmax_grad" + sh, tr::name, get(dxs), wgs, bgs);
    if (guarded(b, "log_softmax_grad" + sh, tr::name,
                [&] { nn::log_softmax_grad(b, l, dy, dxl, s.axis); }))
      report("log_softmax_grad" + sh, tr::name, get(dxl), wgl, bgl);
  }
}

// ---- convolution --------------------------------------------------------------------------

template <class T> void convolutions(const Backend& b) {
  using tr = traits<T>;
  struct cc {
    nn::Shape x, w;
    nn::ConvolutionParams p;
  };
  nn::ConvolutionParams g2;
  g2.stride = {2, 1};
  g2.padding = {1, 2};
  g2.dilation = {1, 2};
  g2.groups = 2;
  nn::ConvolutionParams plain;
  plain.padding = {1, 1};
  const cc cases[] = {{{2, 6, 9, 11}, {8, 3, 3, 3}, g2}, {{3, 16, 14, 14}, {32, 16, 3, 3}, plain}};
  for (const cc& c0 : cases)
    for (int mode = 0; mode < 3; ++mode) {
      // 0 auto, 1 parenchyma's direct kernels, 2 the first plan of cuDNN's graph API (f32 and
      // the half types: f64 has few graph engines, auto covers them where they win).
      if (mode == 2 && std::is_same_v<T, double>) continue;
      const bool own = mode == 1;
      cc c = c0;
      if (own) c.p.algorithm = {100, 100, 100};
      if (mode == 2) c.p.algorithm = {1000, 1000, 1000};
      const char* label[3] = {" (auto)", " (algorithm 100)", " (graph plan 1000)"};
      const std::string tag = std::string(label[mode]) + " x [" + std::to_string(c.x[0]) + "," +
                              std::to_string(c.x[1]) + "," + std::to_string(c.x[2]) + "," +
                              std::to_string(c.x[3]) + "]";
      std::unique_ptr<nn::Convolution> conv;
      if (!guarded(b, "convolution_algorithm" + tag, tr::name, [&] {
            conv = std::make_unique<nn::Convolution>(b, c.x, c.w, c.p, SharedTensor<T>::dtype);
          }))
        continue;
      const nn::Shape ys = conv->y_shape();
      const int N = int(c.x[0]), C = int(c.x[1]), H = int(c.x[2]), W = int(c.x[3]);
      const int K = int(c.w[0]), Cg = int(c.w[1]), R = int(c.w[2]), S = int(c.w[3]);
      const int P = int(ys[2]), Q = int(ys[3]), G = int(c.p.groups), Kg = K / G;
      Vec xv = random_vec(count(c.x)), wv = random_vec(count(c.w)), dv = random_vec(count(ys)),
          bv = random_vec(size_t(K));
      SharedTensor<T> x = make<T>(c.x, xv), w = make<T>(c.w, wv), dy = make<T>(ys, dv),
                      bias = make<T>({K}, bv), y(ys), yb(ys), dx(c.x), dw(c.w), db({K});
      Vec wy(count(ys), 0), my(count(ys), 0), wdx(count(c.x), 0), mdx(count(c.x), 0),
          wdw(count(c.w), 0), mdw(count(c.w), 0), wdb(size_t(K), 0), mdb(size_t(K), 0);
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          for (int p = 0; p < P; ++p)
            for (int q = 0; q < Q; ++q) {
              const size_t yi = ((size_t(n) * K + k) * P + p) * Q + q;
              wdb[size_t(k)] += dv[yi];
              mdb[size_t(k)] += std::fabs(dv[yi]);
              for (int cl = 0; cl < Cg; ++cl)
                for (int r = 0; r < R; ++r)
                  for (int s = 0; s < S; ++s) {
                    const int h =
                        p * int(c.p.stride[0]) - int(c.p.padding[0]) + r * int(c.p.dilation[0]);
                    const int u =
                        q * int(c.p.stride[1]) - int(c.p.padding[1]) + s * int(c.p.dilation[1]);
                    if (h < 0 || h >= H || u < 0 || u >= W) continue;
                    const int ch = (k / Kg) * Cg + cl;
                    const size_t xi = ((size_t(n) * C + ch) * H + h) * W + u;
                    const size_t wi = ((size_t(k) * Cg + cl) * R + r) * S + s;
                    wy[yi] += xv[xi] * wv[wi];
                    my[yi] += std::fabs(xv[xi] * wv[wi]);
                    wdx[xi] += dv[yi] * wv[wi];
                    mdx[xi] += std::fabs(dv[yi] * wv[wi]);
                    wdw[wi] += xv[xi] * dv[yi];
                    mdw[wi] += std::fabs(xv[xi] * dv[yi]);
                  }
            }
      auto bounds = [&](const Vec& m, double terms) {
        Vec out(m.size());
        for (size_t i = 0; i < m.size(); ++i)
          out[i] = 8 * tr::eps * (std::sqrt(terms) + 1) * m[i] + 4 * tr::tiny;
        return out;
      };
      Vec wyb = wy, myb = my;
      for (size_t i = 0; i < wyb.size(); ++i) {
        const size_t k = (i / (size_t(P) * Q)) % size_t(K);
        wyb[i] += bv[k];
        myb[i] += std::fabs(bv[k]);
      }
      const std::string al = " alg " + std::to_string(conv->algorithm(nn::direction::forward)) +
                             "/" + std::to_string(conv->algorithm(nn::direction::grad_data)) + "/" +
                             std::to_string(conv->algorithm(nn::direction::grad_filter));
      if (guarded(b, "convolution" + tag, tr::name, [&] { conv->forward(x, w, y); }))
        report("convolution" + tag, tr::name, get(y), wy, bounds(my, double(Cg * R * S)), al);
      if (guarded(b, "convolution+bias" + tag, tr::name, [&] { conv->forward(x, w, bias, yb); }))
        report("convolution+bias" + tag, tr::name, get(yb), wyb,
               bounds(myb, double(Cg * R * S + 1)));
      if (guarded(b, "convolution_grad_data" + tag, tr::name, [&] { conv->grad_data(w, dy, dx); }))
        report("convolution_grad_data" + tag, tr::name, get(dx), wdx,
               bounds(mdx, double(Kg * R * S)));
      if (guarded(b, "convolution_grad_filter" + tag, tr::name,
                  [&] { conv->grad_filter(x, dy, dw); }))
        report("convolution_grad_filter" + tag, tr::name, get(dw), wdw,
               bounds(mdw, double(N * P * Q)));
      if (!own &&
          guarded(b, "convolution_grad_bias" + tag, tr::name, [&] { conv->grad_bias(dy, db); }))
        report("convolution_grad_bias" + tag, tr::name, get(db), wdb,
               bounds(mdb, double(N * P * Q)));
    }
}

// ---- pooling ------------------------------------------------------------------------------

template <class T> void poolings(const Backend& b) {
  using tr = traits<T>;
  nn::PoolingParams pp;
  pp.window = {3, 3};
  pp.stride = {2, 2};
  pp.padding = {1, 1};
  const nn::Shape xs{2, 3, 11, 13};
  const nn::Shape ys = nn::pooling_output_shape(xs, pp);
  const int N = 2, C = 3, H = 11, W = 13, P = int(ys[2]), Q = int(ys[3]);
  Vec xv = random_vec(count(xs)), dv = random_vec(count(ys));
  xv[5] = NAN; // a window holding NaN yields NaN, and NaN is its first maximum
  SharedTensor<T> x = make<T>(xs, xv), dy = make<T>(ys, dv), y(ys), y2(ys), ya0(ys), ya1(ys),
                  dx(xs), dxi(xs), dxa0(xs), dxa1(xs);
  SharedTensor<int32_t> idx(ys);
  Vec wmax(count(ys)), widx(count(ys)), wa[2] = {Vec(count(ys)), Vec(count(ys))},
                                        ba[2] = {Vec(count(ys)), Vec(count(ys))};
  Vec wdx(count(xs), 0), mdx(count(xs), 0), wda[2] = {Vec(count(xs), 0), Vec(count(xs), 0)},
                                            mda[2] = {Vec(count(xs), 0), Vec(count(xs), 0)};
  for (int nc = 0; nc < N * C; ++nc)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const size_t o = (size_t(nc) * P + p) * Q + q;
        double best = 0, sum = 0, asum = 0;
        int bi = -1, cnt = 0;
        for (int h = p * 2 - 1; h < p * 2 - 1 + 3; ++h)
          for (int u = q * 2 - 1; u < q * 2 - 1 + 3; ++u) {
            if (h < 0 || h >= H || u < 0 || u >= W) continue;
            const double v = xv[size_t(nc) * H * W + size_t(h) * W + u];
            if (bi < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              bi = h * W + u;
            }
            sum += v;
            asum += std::fabs(v);
            ++cnt;
          }
        wmax[o] = best;
        widx[o] = bi;
        wdx[size_t(nc) * H * W + size_t(bi)] += dv[o];
        mdx[size_t(nc) * H * W + size_t(bi)] += std::fabs(dv[o]);
        for (int inc = 0; inc < 2; ++inc) {
          const int div = inc ? 9 : cnt;
          wa[inc][o] = sum / div;
          ba[inc][o] = 8 * tr::eps * asum / div + 2 * tr::tiny;
          for (int h = p * 2 - 1; h < p * 2 + 2; ++h)
            for (int u = q * 2 - 1; u < q * 2 + 2; ++u) {
              if (h < 0 || h >= H || u < 0 || u >= W) continue;
              const size_t e = size_t(nc) * H * W + size_t(h) * W + u;
              wda[inc][e] += dv[o] / div;
              mda[inc][e] += std::fabs(dv[o] / div);
            }
        }
      }
  auto scaled = [&](const Vec& m, double k) {
    Vec out(m.size());
    for (size_t i = 0; i < m.size(); ++i)
      out[i] = k * tr::eps * m[i] + 2 * tr::tiny;
    return out;
  };
  const Vec zero_bound(count(ys), 0);
  if (guarded(b, "pooling_max", tr::name, [&] { nn::pooling_max(b, x, y, pp); }))
    report("pooling_max", tr::name, get(y), wmax, zero_bound);
  if (guarded(b, "pooling_max_indexed", tr::name, [&] { nn::pooling_max(b, x, y2, idx, pp); })) {
    const auto iv = idx.read();
    report("pooling_max_indexed (values)", tr::name, get(y2), wmax, zero_bound);
    report("pooling_max_indexed (indices)", tr::name, Vec(iv.begin(), iv.end()), widx, zero_bound);
  }
  if (guarded(b, "pooling_max_grad", tr::name, [&] { nn::pooling_max_grad(b, x, y, dy, dx, pp); }))
    report("pooling_max_grad", tr::name, get(dx), wdx, scaled(mdx, 4));
  if (guarded(b, "pooling_max_grad_indexed", tr::name,
              [&] { nn::pooling_max_grad(b, dy, idx, dxi); }))
    report("pooling_max_grad_indexed", tr::name, get(dxi), wdx, scaled(mdx, 4));
  for (int inc = 0; inc < 2; ++inc) {
    nn::PoolingParams pa = pp;
    pa.include_padding = inc == 1;
    const std::string t = inc ? " include_padding" : " exclude_padding";
    SharedTensor<T>& ya = inc ? ya1 : ya0;
    SharedTensor<T>& dxa = inc ? dxa1 : dxa0;
    if (guarded(b, "pooling_avg" + t, tr::name, [&] { nn::pooling_avg(b, x, ya, pa); })) {
      Vec got = get(ya);
      report("pooling_avg" + t, tr::name, got, wa[inc], ba[inc]);
    }
    if (guarded(b, "pooling_avg_grad" + t, tr::name, [&] { nn::pooling_avg_grad(b, dy, dxa, pa); }))
      report("pooling_avg_grad" + t, tr::name, get(dxa), wda[inc], scaled(mda[inc], 8));
  }
}

// ---- LRN and dropout (f32, f64) -----------------------------------------------------------

template <class T> void lrns(const Backend& b) {
  using tr = traits<T>;
  const nn::Shape xs{2, 7, 5, 4};
  const int N = 2, C = 7, HW = 20;
  for (int64_t wn : {int64_t(5), int64_t(2), int64_t(9)}) {
    nn::LrnParams lp;
    lp.n = wn;
    lp.alpha = 0.05;
    lp.beta = 0.75;
    lp.k = 2;
    auto at = [&](int n, int c, int j) { return (size_t(n) * C + c) * HW + j; };
    Vec xv = random_vec(count(xs)), dv = random_vec(count(xs));
    if (wn == 5) {
      // A huge square before small ones (a running window sum would cancel them away) and a
      // NaN (NaN s in the windows holding it, and only there).
      xv[at(0, 0, 3)] = 1e8;
      xv[at(1, 2, 7)] = NAN;
    }
    SharedTensor<T> x = make<T>(xs, xv), y(xs), dy = make<T>(xs, dv), dx(xs);
    Vec s(count(xs)), wy(count(xs)), by(count(xs)), wdx(count(xs)), bdx(count(xs));
    const int lo = int(wn / 2), hi = int((wn - 1) / 2);
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < HW; ++j)
        for (int c = 0; c < C; ++c) {
          double sum = 0;
          for (int c2 = std::max(0, c - lo); c2 <= std::min(C - 1, c + hi); ++c2)
            sum += xv[at(n, c2, j)] * xv[at(n, c2, j)];
          s[at(n, c, j)] = lp.k + lp.alpha / double(wn) * sum;
          wy[at(n, c, j)] = xv[at(n, c, j)] * std::pow(s[at(n, c, j)], -lp.beta);
          by[at(n, c, j)] = 16 * tr::eps * std::fabs(wy[at(n, c, j)]) + 2 * tr::tiny;
        }
    Vec yv = wy; // the forward's output, as the gradient takes it (rounded to T)
    SharedTensor<T> yin = make<T>(xs, yv);
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < HW; ++j)
        for (int c = 0; c < C; ++c) {
          double t = 0, ta = 0;
          // c in W(c') <=> c - hi <= c' <= c + lo
          for (int c2 = std::max(0, c - hi); c2 <= std::min(C - 1, c + lo); ++c2) {
            const double v = dv[at(n, c2, j)] * yv[at(n, c2, j)] / s[at(n, c2, j)];
            t += v;
            ta += std::fabs(v);
          }
          const size_t e = at(n, c, j);
          const double f = 2 * lp.alpha * lp.beta / double(wn);
          const double a = dv[e] * std::pow(s[e], -lp.beta);
          wdx[e] = a - f * xv[e] * t;
          bdx[e] = 32 * tr::eps * (std::fabs(a) + f * std::fabs(xv[e]) * ta) + 2 * tr::tiny;
        }
    const std::string t = " n=" + std::to_string(wn);
    if (guarded(b, "lrn" + t, tr::name, [&] { nn::lrn(b, x, y, lp); }))
      report("lrn" + t, tr::name, get(y), wy, by);
    if (guarded(b, "lrn_grad" + t, tr::name, [&] { nn::lrn_grad(b, x, yin, dy, dx, lp); }))
      report("lrn_grad" + t, tr::name, get(dx), wdx, bdx);
  }
}

template <class T> void dropouts(const Backend& b) {
  using tr = traits<T>;
  for (double prob : {0.0, 0.3, 1.0}) {
    const size_t n = 10007;
    const nn::Shape s{int64_t(n)};
    const uint64_t seed = 0x1234567890abcdefull;
    Vec xv = random_vec(n), dv = random_vec(n);
    SharedTensor<T> x = make<T>(s, xv), y(s), dy = make<T>(s, dv), dx(s);
    SharedTensor<uint8_t> mask(s), mask_in(s);
    const T scale = tr::to(prob >= 1 ? 0.0 : 1.0 / (1.0 - prob));
    const uint32_t thr = PCY_NN_DROPOUT_THRESHOLD(prob);
    Vec wy(n), wm(n), wdx(n), bound(n), zero(n, 0);
    {
      auto mi = mask_in.write_only();
      for (size_t i = 0; i < n; ++i)
        mi[i] = static_cast<uint8_t>(i % 3 == 0 ? 0 : i % 3); // 2 counts as kept too
    }
    for (size_t i = 0; i < n; ++i) {
      uint64_t z = 0;
      PCY_NN_DROPOUT_MIX(seed, i, z);
      const bool keep = (z >> 40) >= thr;
      wm[i] = keep ? 1 : 0;
      wy[i] = keep ? tr::from(tr::to(xv[i] * tr::from(scale))) : 0.0;
      wdx[i] = i % 3 != 0 ? tr::from(tr::to(dv[i] * tr::from(scale))) : 0.0;
      bound[i] = tr::eps * std::fabs(wy[i]);
    }
    Vec gbound(n);
    for (size_t i = 0; i < n; ++i)
      gbound[i] = tr::eps * std::fabs(wdx[i]);
    char t[32];
    std::snprintf(t, sizeof t, " p=%.1f", prob);
    if (guarded(b, std::string("dropout") + t, tr::name,
                [&] { nn::dropout(b, x, y, mask, prob, seed); })) {
      report(std::string("dropout") + t, tr::name, get(y), wy, bound);
      const auto mv = mask.read();
      report(std::string("dropout (mask)") + t, tr::name, Vec(mv.begin(), mv.end()), wm, zero);
    }
    if (guarded(b, std::string("dropout_grad") + t, tr::name,
                [&] { nn::dropout_grad(b, dy, mask_in, dx, prob); }))
      report(std::string("dropout_grad") + t, tr::name, get(dx), wdx, gbound);
  }
}

template <class T> void all(const Backend& b, bool wide) {
  activations<T>(b);
  softmaxes<T>(b);
  convolutions<T>(b);
  poolings<T>(b);
  if (wide) {
    lrns<T>(b);
    dropouts<T>(b);
  }
}

} // namespace

int main(int argc, char** argv) {
  std::unique_ptr<Backend> b;
  try {
    b = std::make_unique<Backend>(argc > 1 ? argv[1] : "cuda");
  } catch (const std::exception& e) {
    std::printf("nn-cuda-selftest: no cuda backend: %s\n", e.what());
    return 2;
  }
  std::printf("nn-cuda-selftest on %s\n", b->name().c_str());
  try {
    const OpRoute r = b->route(ext::op_key<pcy_nn_convolution_schema>(PCY_DTYPE_F32));
    std::printf("convolution f32: bundle %s, %s\n", r.bundle.c_str(), r.implementation.c_str());
  } catch (const std::exception& e) {
    std::printf("convolution f32: no route: %s\n", e.what());
  }
  all<float>(*b, true);
  all<double>(*b, true);
  all<f16>(*b, false);
  all<bf16>(*b, false);
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
