// N5 on the CPU: the native NN bundle through the front-end (parenchyma/nn.hpp) against oneDNN
// called directly in the same process (same shapes, f32, plain NCHW / OIHW memory as a user
// holds it), interleaved (tools/bench/harness.hpp); the elementwise ops against memcpy of the
// same bytes (the bandwidth ceiling). Both sides share one OpenMP runtime (oneDNN's), so
// OMP_NUM_THREADS applies equally; the memcpy peer splits its copy over the same threads.
//   bench_nn_native [--quick]                      runs itself with 1 and 2 threads
//   OMP_NUM_THREADS=2 bench_nn_native --child       one thread count (suite n5_native_nn_t2)
#include "harness.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <dnnl.hpp>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;
using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

std::mt19937 rng{20261201};
void fill(std::span<float> s) {
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : s)
    v = u(rng);
}
SharedTensor<float> tensor(std::vector<int64_t> shape) {
  SharedTensor<float> t(std::move(shape));
  fill(t.write_only());
  return t;
}
// The peer's own copy of a tensor's data (oneDNN works on plain host buffers).
std::vector<float> copy_of(const SharedTensor<float>& t) {
  auto r = t.read();
  return {r.begin(), r.end()};
}
double max_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])) / (1 + std::fabs(double(b[i]))));
  return m;
}
void check(const char* what, std::span<const float> ours, std::span<const float> peer, double tol) {
  const double d = max_diff(ours, peer);
  if (d > tol)
    std::printf("WARNING: %s: parenchyma and oneDNN differ by %g (relative; tolerance %g)\n", what,
                d, tol);
}

struct dnn {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  dnnl::memory mem(const dims& d, tag t, float* p) { return dnnl::memory({d, dt::f32, t}, eng, p); }
};

// The memcpy peer over the same OpenMP threads (each copies one contiguous slice).
void par_copy(float* dst, const float* src, size_t n) {
  const int t = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(t)
  for (int i = 0; i < t; ++i) {
    const size_t lo = n * size_t(i) / size_t(t), hi = n * size_t(i + 1) / size_t(t);
    std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
  }
}

void convolution(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t N = 8, C = 64, H = 28, W = 28, K = 64, R = 3;
  const std::string shape = " 3x3 64->64 8x64x28x28";
  nn::Convolution conv(b, {N, C, H, W}, {K, C, R, R}, {.padding = {1, 1}});
  auto x = tensor({N, C, H, W}), w = tensor({K, C, R, R}), dy = tensor(conv.y_shape());
  SharedTensor<float> y(conv.y_shape()), dx({N, C, H, W}), dw({K, C, R, R});
  conv.forward(x, w, y);
  conv.grad_data(w, dy, dx);
  conv.grad_filter(x, dy, dw);
  auto px = copy_of(x), pw = copy_of(w), pdy = copy_of(dy);
  std::vector<float> py(y.size()), pdx(dx.size()), pdw(dw.size());
  const dims xd{N, C, H, W}, wd{K, C, R, R}, yd{N, K, H, W}, st{1, 1}, pad{1, 1};
  auto xm = d.mem(xd, tag::nchw, px.data()), wm = d.mem(wd, tag::oihw, pw.data()),
       ym = d.mem(yd, tag::nchw, py.data()), dym = d.mem(yd, tag::nchw, pdy.data()),
       dxm = d.mem(xd, tag::nchw, pdx.data()), dwm = d.mem(wd, tag::oihw, pdw.data());
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                     dnnl::algorithm::convolution_direct, xm.get_desc(),
                                     wm.get_desc(), ym.get_desc(), st, pad, pad);
  dnnl::convolution_forward::primitive_desc fpd(fd, d.eng);
  dnnl::convolution_forward fwd(fpd);
  dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, dxm.get_desc(),
                                           wm.get_desc(), dym.get_desc(), st, pad, pad);
  dnnl::convolution_backward_data bwd_data({bd, d.eng, fpd});
  dnnl::convolution_backward_weights::desc wdsc(dnnl::algorithm::convolution_direct, xm.get_desc(),
                                                dwm.get_desc(), dym.get_desc(), st, pad, pad);
  dnnl::convolution_backward_weights bwd_w({wdsc, d.eng, fpd});
  const std::unordered_map<int, dnnl::memory> fa{
      {DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}},
      da{{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dxm}},
      wa{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwm}};
  auto run = [&](dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& a) {
    p.execute(d.s, a);
    d.s.wait();
  };
  run(fwd, fa);
  run(bwd_data, da);
  run(bwd_w, wa);
  check("convolution forward", y.read(), py, 1e-4);
  check("convolution grad_data", dx.read(), pdx, 1e-4);
  check("convolution grad_filter", dw.read(), pdw, 1e-3);
  bench::options o{.reps = reps, .inner = 1, .warmup = 2};
  o.flops = 2.0 * N * K * H * W * C * R * R;
  s.compare(
      "conv fwd" + shape, [&] { run(fwd, fa); }, [&] { conv.forward(x, w, y); }, o, "onednn");
  s.compare(
      "conv grad_data" + shape, [&] { run(bwd_data, da); }, [&] { conv.grad_data(w, dy, dx); }, o,
      "onednn");
  s.compare(
      "conv grad_filter" + shape, [&] { run(bwd_w, wa); }, [&] { conv.grad_filter(x, dy, dw); }, o,
      "onednn");
}

void pooling(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t N = 8, C = 64, H = 56, W = 56;
  auto x = tensor({N, C, H, W});
  auto px = copy_of(x);
  struct cfg {
    const char* name;
    nn::PoolingParams p;
    dnnl::algorithm alg;
  };
  for (const cfg& c : {cfg{"max pool 3x3/2 pad 1 8x64x56x56",
                           {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
                           dnnl::algorithm::pooling_max},
                       cfg{"avg pool 2x2 8x64x56x56",
                           {.window = {2, 2}},
                           dnnl::algorithm::pooling_avg_include_padding}}) {
    const nn::Shape ys = nn::pooling_output_shape(x.shape(), c.p);
    SharedTensor<float> y(ys);
    std::vector<float> py(y.size());
    const bool max = c.alg == dnnl::algorithm::pooling_max;
    auto ours = [&] {
      if (max)
        nn::pooling_max(b, x, y, c.p);
      else
        nn::pooling_avg(b, x, y, c.p);
    };
    ours();
    const dims st{c.p.stride[0] ? c.p.stride[0] : c.p.window[0],
                  c.p.stride[1] ? c.p.stride[1] : c.p.window[1]};
    const dims pad{c.p.padding[0], c.p.padding[1]}, win{c.p.window[0], c.p.window[1]};
    auto xm = d.mem({N, C, H, W}, tag::nchw, px.data());
    auto ym = d.mem({ys[0], ys[1], ys[2], ys[3]}, tag::nchw, py.data());
    dnnl::pooling_forward::desc pd(dnnl::prop_kind::forward_inference, c.alg, xm.get_desc(),
                                   ym.get_desc(), st, win, pad, pad);
    dnnl::pooling_forward prim({pd, d.eng});
    const std::unordered_map<int, dnnl::memory> a{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}};
    auto peer = [&] {
      prim.execute(d.s, a);
      d.s.wait();
    };
    peer();
    check(c.name, y.read(), py, 1e-6);
    bench::options o{.reps = reps, .inner = 5, .warmup = 2};
    o.bytes = 4.0 * double(x.size() + y.size());
    s.compare(c.name, peer, ours, o, "onednn");
  }
}

void softmax(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t M = 256, L = 1000;
  auto x = tensor({M, L});
  SharedTensor<float> y({M, L});
  auto px = copy_of(x);
  std::vector<float> py(y.size());
  auto xm = d.mem({M, L}, tag::ab, px.data()), ym = d.mem({M, L}, tag::ab, py.data());
  for (bool log : {false, true}) {
    dnnl::primitive prim;
    if (log)
      prim =
          dnnl::logsoftmax_forward({{dnnl::prop_kind::forward_inference, xm.get_desc(), 1}, d.eng});
    else
      prim = dnnl::softmax_forward({{dnnl::prop_kind::forward_inference, xm.get_desc(), 1}, d.eng});
    const std::unordered_map<int, dnnl::memory> a{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}};
    auto peer = [&] {
      prim.execute(d.s, a);
      d.s.wait();
    };
    auto ours = [&] {
      if (log)
        nn::log_softmax(b, x, y, 1);
      else
        nn::softmax(b, x, y, 1);
    };
    ours();
    peer();
    check(log ? "log_softmax" : "softmax", y.read(), py, 1e-5);
    bench::options o{.reps = reps, .inner = 20, .warmup = 2};
    o.bytes = 8.0 * double(M * L);
    s.compare(log ? "log_softmax 256x1000" : "softmax 256x1000", peer, ours, o, "onednn");
  }
}

// Elementwise: against memcpy moving the same bytes (the ceiling), and against oneDNN's
// eltwise for the forward ops.
void elementwise(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t n = int64_t(8) << 20; // 32 MiB per tensor
  auto x = tensor({n}), dy = tensor({n});
  SharedTensor<float> y({n}), dx({n});
  std::vector<float> src(size_t(n) * 3 / 2), dst(size_t(n) * 3 / 2), py(static_cast<size_t>(n));
  fill(src);
  auto px = copy_of(x);
  auto xm = d.mem({n}, tag::a, px.data()), ym = d.mem({n}, tag::a, py.data());
  const std::string sz = " 8M";
  struct act {
    const char* name;
    void (*ours)(const Backend&, const TensorStorage&, TensorStorage&);
    dnnl::algorithm alg;
  };
  for (const act& a : {act{"relu", &nn::relu, dnnl::algorithm::eltwise_relu},
                       act{"sigmoid", &nn::sigmoid, dnnl::algorithm::eltwise_logistic},
                       act{"tanh", &nn::tanh, dnnl::algorithm::eltwise_tanh}}) {
    auto ours = [&] { a.ours(b, x, y); };
    ours();
    bench::options o{.reps = reps, .inner = 1, .warmup = 2};
    o.bytes = 8.0 * double(n);
    s.compare(
        std::string(a.name) + sz + " vs memcpy", [&] { par_copy(dst.data(), src.data(), n); }, ours,
        o, "memcpy");
    dnnl::eltwise_forward prim(
        {{dnnl::prop_kind::forward_inference, a.alg, xm.get_desc(), 0.f, 0.f}, d.eng});
    const std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}};
    auto peer = [&] {
      prim.execute(d.s, args);
      d.s.wait();
    };
    peer();
    check(a.name, y.read(), py, 1e-5);
    s.compare(std::string(a.name) + sz + " vs onednn", peer, ours, o, "onednn");
  }
  nn::relu(b, x, y);
  auto grad = [&] { nn::relu_grad(b, y, dy, dx); };
  grad();
  bench::options o{.reps = reps, .inner = 1, .warmup = 2};
  o.bytes = 12.0 * double(n); // reads y and dy, writes dx
  s.compare(
      "relu_grad" + sz + " vs memcpy", [&] { par_copy(dst.data(), src.data(), size_t(n) * 3 / 2); },
      grad, o, "memcpy");
}

// The gradients and the ops N5 did not cover (issue 27's CPU side): each against oneDNN where
// it has the op (the backward primitives with their forward hints and workspaces), else against
// memcpy of the bytes the op must move.
using args_t = std::unordered_map<int, dnnl::memory>;
auto runner(dnn& d, dnnl::primitive& p, const args_t& a) {
  return [&d, &p, &a] {
    p.execute(d.s, a);
    d.s.wait();
  };
}

void activation_grads(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t n = int64_t(8) << 20;
  auto x = tensor({n}), dy = tensor({n});
  SharedTensor<float> y({n}), dx({n});
  auto pdy = copy_of(dy);
  std::vector<float> pdx(static_cast<size_t>(n));
  struct act {
    const char* name;
    void (*fwd)(const Backend&, const TensorStorage&, TensorStorage&);
    void (*grad)(const Backend&, const TensorStorage&, const TensorStorage&, TensorStorage&);
    dnnl::algorithm alg; // the variant that takes the forward's output
  };
  for (const act& a :
       {act{"relu_grad", &nn::relu, &nn::relu_grad, dnnl::algorithm::eltwise_relu_use_dst_for_bwd},
        act{"sigmoid_grad", &nn::sigmoid, &nn::sigmoid_grad,
            dnnl::algorithm::eltwise_logistic_use_dst_for_bwd},
        act{"tanh_grad", &nn::tanh, &nn::tanh_grad,
            dnnl::algorithm::eltwise_tanh_use_dst_for_bwd}}) {
    a.fwd(b, x, y);
    auto py = copy_of(y);
    auto ym = d.mem({n}, tag::a, py.data()), dym = d.mem({n}, tag::a, pdy.data()),
         dxm = d.mem({n}, tag::a, pdx.data());
    dnnl::eltwise_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, a.alg, ym.get_desc(), 0.f, 0.f}, d.eng);
    dnnl::eltwise_backward::desc bd(a.alg, dxm.get_desc(), ym.get_desc(), 0.f, 0.f);
    dnnl::primitive prim = dnnl::eltwise_backward({bd, d.eng, hint});
    const args_t args{{DNNL_ARG_DST, ym}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_SRC, dxm}};
    auto peer = runner(d, prim, args);
    auto ours = [&] { a.grad(b, y, dy, dx); };
    ours();
    peer();
    check(a.name, dx.read(), pdx, 1e-5);
    bench::options o{.reps = reps, .inner = 1, .warmup = 2};
    o.bytes = 12.0 * double(n);
    s.compare(std::string(a.name) + " 8M vs onednn", peer, ours, o, "onednn");
  }
}

void softmax_grads(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t M = 256, L = 1000;
  auto x = tensor({M, L}), dy = tensor({M, L});
  SharedTensor<float> y({M, L}), dx({M, L});
  auto pdy = copy_of(dy);
  std::vector<float> pdx(dx.size());
  for (bool log : {false, true}) {
    if (log)
      nn::log_softmax(b, x, y, 1);
    else
      nn::softmax(b, x, y, 1);
    auto py = copy_of(y);
    auto ym = d.mem({M, L}, tag::ab, py.data()), dym = d.mem({M, L}, tag::ab, pdy.data()),
         dxm = d.mem({M, L}, tag::ab, pdx.data());
    dnnl::primitive prim;
    if (log) {
      dnnl::logsoftmax_forward::primitive_desc hint(
          {dnnl::prop_kind::forward_training, ym.get_desc(), 1}, d.eng);
      prim = dnnl::logsoftmax_backward({{dxm.get_desc(), ym.get_desc(), 1}, d.eng, hint});
    } else {
      dnnl::softmax_forward::primitive_desc hint(
          {dnnl::prop_kind::forward_training, ym.get_desc(), 1}, d.eng);
      prim = dnnl::softmax_backward({{dxm.get_desc(), ym.get_desc(), 1}, d.eng, hint});
    }
    const args_t args{{DNNL_ARG_DST, ym}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_SRC, dxm}};
    auto peer = runner(d, prim, args);
    auto ours = [&] {
      if (log)
        nn::log_softmax_grad(b, y, dy, dx, 1);
      else
        nn::softmax_grad(b, y, dy, dx, 1);
    };
    ours();
    peer();
    check(log ? "log_softmax_grad" : "softmax_grad", dx.read(), pdx, 1e-5);
    bench::options o{.reps = reps, .inner = 20, .warmup = 2};
    o.bytes = 12.0 * double(M * L);
    s.compare(log ? "log_softmax_grad 256x1000" : "softmax_grad 256x1000", peer, ours, o, "onednn");
  }
}

void pooling_grads(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t N = 8, C = 64, H = 56, W = 56;
  auto x = tensor({N, C, H, W});
  auto px = copy_of(x);
  for (const bool max : {true, false}) {
    const nn::PoolingParams p =
        max ? nn::PoolingParams{.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}
            : nn::PoolingParams{.window = {2, 2}};
    const nn::Shape ys = nn::pooling_output_shape(x.shape(), p);
    SharedTensor<float> y(ys), dx({N, C, H, W});
    SharedTensor<int32_t> idx(ys);
    auto dy = tensor(ys);
    auto pdy = copy_of(dy);
    std::vector<float> py(y.size()), pdx(dx.size());
    const dims st{p.stride[0] ? p.stride[0] : p.window[0], p.stride[1] ? p.stride[1] : p.window[1]};
    const dims pad{p.padding[0], p.padding[1]}, win{p.window[0], p.window[1]};
    const dims yd{ys[0], ys[1], ys[2], ys[3]};
    auto xm = d.mem({N, C, H, W}, tag::nchw, px.data()), ym = d.mem(yd, tag::nchw, py.data()),
         dym = d.mem(yd, tag::nchw, pdy.data()), dxm = d.mem({N, C, H, W}, tag::nchw, pdx.data());
    const auto alg =
        max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
    dnnl::pooling_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, xm.get_desc(), ym.get_desc(), st, win, pad, pad},
        d.eng);
    dnnl::memory ws;
    args_t fa{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}};
    if (max) {
      ws = dnnl::memory(fpd.workspace_desc(), d.eng);
      fa[DNNL_ARG_WORKSPACE] = ws;
    }
    dnnl::pooling_forward fwd(fpd);
    fwd.execute(d.s, fa);
    d.s.wait();
    dnnl::primitive prim = dnnl::pooling_backward(
        {{alg, dxm.get_desc(), dym.get_desc(), st, win, pad, pad}, d.eng, fpd});
    args_t ba{{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_SRC, dxm}};
    if (max) ba[DNNL_ARG_WORKSPACE] = ws;
    auto peer = runner(d, prim, ba);
    if (max)
      nn::pooling_max(b, x, y, idx, p);
    else
      nn::pooling_avg(b, x, y, p);
    auto ours = [&] {
      if (max)
        nn::pooling_max_grad(b, dy, idx, dx);
      else
        nn::pooling_avg_grad(b, dy, dx, p);
    };
    ours();
    peer();
    check(max ? "max pool grad" : "avg pool grad", dx.read(), pdx, 1e-5);
    bench::options o{.reps = reps, .inner = 5, .warmup = 2};
    o.bytes = 4.0 * double(dx.size() + dy.size());
    s.compare(max ? "max pool 3x3/2 pad 1 grad 8x64x56x56" : "avg pool 2x2 grad 8x64x56x56", peer,
              ours, o, "onednn");
  }
}

void lrn_cells(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t N = 8, C = 64, H = 28, W = 28;
  const nn::LrnParams p{.n = 5, .alpha = 1e-4, .beta = 0.75, .k = 1.0};
  auto x = tensor({N, C, H, W}), dy = tensor({N, C, H, W});
  SharedTensor<float> y({N, C, H, W}), dx({N, C, H, W});
  auto px = copy_of(x), pdy = copy_of(dy);
  std::vector<float> py(y.size()), pdx(dx.size());
  const dims xd{N, C, H, W};
  auto xm = d.mem(xd, tag::nchw, px.data()), ym = d.mem(xd, tag::nchw, py.data()),
       dym = d.mem(xd, tag::nchw, pdy.data()), dxm = d.mem(xd, tag::nchw, pdx.data());
  dnnl::lrn_forward::primitive_desc fpd({dnnl::prop_kind::forward_training,
                                         dnnl::algorithm::lrn_across_channels, xm.get_desc(), p.n,
                                         float(p.alpha), float(p.beta), float(p.k)},
                                        d.eng);
  dnnl::memory ws(fpd.workspace_desc(), d.eng);
  dnnl::primitive fwd = dnnl::lrn_forward(fpd);
  const args_t fa{{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}, {DNNL_ARG_WORKSPACE, ws}};
  dnnl::primitive bwd =
      dnnl::lrn_backward({{dnnl::algorithm::lrn_across_channels, xm.get_desc(), dxm.get_desc(), p.n,
                           float(p.alpha), float(p.beta), float(p.k)},
                          d.eng,
                          fpd});
  const args_t ba{{DNNL_ARG_SRC, xm},
                  {DNNL_ARG_DIFF_DST, dym},
                  {DNNL_ARG_WORKSPACE, ws},
                  {DNNL_ARG_DIFF_SRC, dxm}};
  auto peer_f = runner(d, fwd, fa);
  auto peer_b = runner(d, bwd, ba);
  auto ours_f = [&] { nn::lrn(b, x, y, p); };
  auto ours_b = [&] { nn::lrn_grad(b, x, y, dy, dx, p); };
  ours_f();
  peer_f();
  ours_b();
  peer_b();
  check("lrn", y.read(), py, 1e-5);
  check("lrn_grad", dx.read(), pdx, 1e-4);
  bench::options o{.reps = reps, .inner = 2, .warmup = 2};
  o.bytes = 8.0 * double(x.size());
  s.compare("lrn n=5 8x64x28x28", peer_f, ours_f, o, "onednn");
  o.bytes = 16.0 * double(x.size());
  s.compare("lrn_grad n=5 8x64x28x28", peer_b, ours_b, o, "onednn");
}

void norm_cells(bench::suite& s, const Backend& b, dnn& d, int reps) {
  const int64_t M = 2048, L = 768;
  const double eps = 1e-5;
  auto x = tensor({M, L}), w = tensor({L}), bias = tensor({L}), dy = tensor({M, L});
  SharedTensor<float> y({M, L}), mean({M}), rstd({M}), dx({M, L}), dw({L}), db({L});
  auto px = copy_of(x), pw = copy_of(w), pb = copy_of(bias), pdy = copy_of(dy);
  std::vector<float> py(y.size()), pmean(M), pvar(M), pdx(dx.size()), pdw(L), pdb(L);
  auto xm = d.mem({M, L}, tag::ab, px.data()), ym = d.mem({M, L}, tag::ab, py.data()),
       dym = d.mem({M, L}, tag::ab, pdy.data()), dxm = d.mem({M, L}, tag::ab, pdx.data()),
       mm = d.mem({M}, tag::a, pmean.data()), vm = d.mem({M}, tag::a, pvar.data()),
       wm = d.mem({L}, tag::a, pw.data()), bm = d.mem({L}, tag::a, pb.data()),
       dwm = d.mem({L}, tag::a, pdw.data()), dbm = d.mem({L}, tag::a, pdb.data());
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::primitive_desc fpd(
      {dnnl::prop_kind::forward_training, xm.get_desc(), float(eps), flags}, d.eng);
  dnnl::primitive fwd = dnnl::layer_normalization_forward(fpd);
  const args_t fa{{DNNL_ARG_SRC, xm},      {DNNL_ARG_DST, ym},   {DNNL_ARG_MEAN, mm},
                  {DNNL_ARG_VARIANCE, vm}, {DNNL_ARG_SCALE, wm}, {DNNL_ARG_SHIFT, bm}};
  dnnl::primitive bwd = dnnl::layer_normalization_backward(
      {{dnnl::prop_kind::backward, dxm.get_desc(), xm.get_desc(), float(eps), flags}, d.eng, fpd});
  const args_t ba{{DNNL_ARG_SRC, xm},         {DNNL_ARG_DIFF_DST, dym},   {DNNL_ARG_MEAN, mm},
                  {DNNL_ARG_VARIANCE, vm},    {DNNL_ARG_SCALE, wm},       {DNNL_ARG_DIFF_SRC, dxm},
                  {DNNL_ARG_DIFF_SCALE, dwm}, {DNNL_ARG_DIFF_SHIFT, dbm}, {DNNL_ARG_SHIFT, bm}};
  auto peer_f = runner(d, fwd, fa);
  auto peer_b = runner(d, bwd, ba);
  auto ours_f = [&] { nn::layer_norm(b, x, w, bias, y, mean, rstd, 1, eps); };
  auto ours_b = [&] { nn::layer_norm_grad(b, x, w, mean, rstd, dy, dx, dw, db, 1); };
  ours_f();
  peer_f();
  ours_b();
  peer_b();
  check("layer_norm", y.read(), py, 1e-4);
  check("layer_norm_grad dx", dx.read(), pdx, 1e-3);
  check("layer_norm_grad dweight", dw.read(), pdw, 1e-3);
  bench::options o{.reps = reps, .inner = 5, .warmup = 2};
  o.bytes = 8.0 * double(M * L);
  s.compare("layer_norm 2048x768", peer_f, ours_f, o, "onednn");
  o.bytes = 12.0 * double(M * L);
  s.compare("layer_norm_grad 2048x768", peer_b, ours_b, o, "onednn");
  // rms_norm and dropout: oneDNN 2.6 has neither; memcpy of the bytes they move is the peer.
  std::vector<float> src(size_t(M * L) * 3 / 2), dst(size_t(M * L) * 3 / 2);
  fill(src);
  SharedTensor<float> rs({M});
  auto rms_f = [&] { nn::rms_norm(b, x, w, y, rs, 1, eps); };
  auto rms_b = [&] { nn::rms_norm_grad(b, x, w, rs, dy, dx, dw, 1); };
  rms_f();
  rms_b();
  o.bytes = 8.0 * double(M * L);
  s.compare(
      "rms_norm 2048x768 vs memcpy", [&] { par_copy(dst.data(), src.data(), size_t(M * L)); },
      rms_f, o, "memcpy");
  o.bytes = 12.0 * double(M * L);
  s.compare(
      "rms_norm_grad 2048x768 vs memcpy",
      [&] { par_copy(dst.data(), src.data(), size_t(M * L) * 3 / 2); }, rms_b, o, "memcpy");
}

void dropout_cells(bench::suite& s, const Backend& b, int reps) {
  const int64_t n = int64_t(8) << 20;
  auto x = tensor({n});
  SharedTensor<float> y({n}), dx({n});
  SharedTensor<uint8_t> mask({n});
  std::vector<float> src(size_t(n) * 9 / 8 + 1), dst(size_t(n) * 9 / 8 + 1);
  fill(src);
  auto f = [&] { nn::dropout(b, x, y, mask, 0.1, 7); };
  auto g = [&] { nn::dropout_grad(b, y, mask, dx, 0.1); };
  f();
  g();
  bench::options o{.reps = reps, .inner = 1, .warmup = 2};
  o.bytes = 9.0 * double(n); // reads x, writes y and the byte mask
  s.compare(
      "dropout 8M vs memcpy", [&] { par_copy(dst.data(), src.data(), size_t(n) * 9 / 8); }, f, o,
      "memcpy");
  s.compare(
      "dropout_grad 8M vs memcpy", [&] { par_copy(dst.data(), src.data(), size_t(n) * 9 / 8); }, g,
      o, "memcpy");
}

int child(bool quick) {
  const int threads = omp_get_max_threads();
  Backend b("native");
  const dnnl_version_t* v = dnnl_version();
  const std::string version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  bench::suite s("n5_native_nn_t" + std::to_string(threads));
  s.meta("backend", b.name());
  s.meta("device", b.device().name);
  s.meta("onednn", version);
  s.meta("threads", std::to_string(threads));
  s.meta("layout", "NCHW / OIHW plain memory on both sides");
  {
    std::ifstream la("/proc/loadavg");
    std::string l1, l5;
    if (la >> l1 >> l5) s.meta("load_average_at_start", l1 + " " + l5);
  }
  s.meta("thread_model", "oneDNN (both sides) takes OMP_NUM_THREADS; the bundle's own loops split "
                         "problems of >= 2^20 elements over OMP_NUM_THREADS (smaller ones: the "
                         "calling thread); the memcpy peer splits over OMP_NUM_THREADS");
  std::printf("# N5 native NN vs oneDNN %s direct, %d thread(s)\n", version.c_str(), threads);
  const auto route = b.route(ext::op_key<pcy_nn_convolution_schema>(PCY_DTYPE_F32));
  s.meta("convolution_impl", route.implementation);
  std::printf("# convolution runs: %s\n", route.implementation.c_str());
  const int reps = quick ? 15 : 21;
  dnn d;
  // PCY_N5_ONLY=group,group: only those groups (conv, pool, softmax, act, act_grad,
  // softmax_grad, pool_grad, lrn, norm, dropout); unset: all.
  const char* only = std::getenv("PCY_N5_ONLY");
  auto on = [&](std::string_view group) {
    if (only == nullptr || *only == '\0') return true;
    std::string_view list(only);
    while (!list.empty()) {
      const auto comma = list.find(',');
      if (list.substr(0, comma) == group) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    return false;
  };
  if (on("conv")) convolution(s, b, d, reps);
  if (on("pool")) pooling(s, b, d, reps);
  if (on("softmax")) softmax(s, b, d, reps);
  if (on("act")) elementwise(s, b, d, reps);
  if (on("act_grad")) activation_grads(s, b, d, reps);
  if (on("softmax_grad")) softmax_grads(s, b, d, reps);
  if (on("pool_grad")) pooling_grads(s, b, d, reps);
  if (on("lrn")) lrn_cells(s, b, d, reps);
  if (on("norm")) norm_cells(s, b, d, reps);
  if (on("dropout")) dropout_cells(s, b, reps);
  s.write();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false, is_child = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    is_child = is_child || std::strcmp(argv[i], "--child") == 0;
  }
  try {
    if (is_child || std::getenv("OMP_NUM_THREADS") != nullptr) return child(quick);
    // OpenMP reads OMP_NUM_THREADS when it starts: one process per thread count.
    int rc = 0;
    for (int t : {1, 2}) {
      const std::string cmd = "OMP_NUM_THREADS=" + std::to_string(t) + " /proc/" +
                              std::to_string(getpid()) + "/exe --child" + (quick ? " --quick" : "");
      std::fflush(stdout);
      if (std::system(cmd.c_str()) != 0) rc = 1;
    }
    return rc;
  } catch (const std::exception& e) {
    std::printf("bench_nn_native: %s\n", e.what());
    return 1;
  }
}
