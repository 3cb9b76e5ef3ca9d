// One training step of the demo network (tools/demo/nn_demo.cpp's CNN) through the public API,
// shared by bench_nn_cuda (N6, timed) and nn_dump (its result checked against PyTorch):
//   conv 1->8 3x3 pad 1 (+bias), relu, max pool 2, conv 8->16 3x3 pad 1 (+bias), relu,
//   max pool 2, dense 64->10 (blas::gemm; the bias by a gemm with a column of ones),
//   log_softmax, the gradient of the mean negative log-likelihood (labels i % 10), every
//   parameter's gradient, and an SGD update of each parameter (blas::axpy).
#pragma once

#include <parenchyma/blas.hpp>
#include <parenchyma/nn.hpp>

#include <algorithm>
#include <cstdint>
#include <span>

namespace bench_nn {

namespace pc = parenchyma;

struct demo_step {
  static constexpr double lr = 0.05;
  const pc::Backend& b;
  int64_t N;
  pc::nn::Convolution c1, c2;
  pc::nn::PoolingParams pool{.window = {2, 2}};
  pc::SharedTensor<float> x, w1, b1, w2, b2, wd, bd, ones, dnll;
  pc::SharedTensor<float> a1, p1, a2, p2, logits, lsm, dlog, dp2, da2, dp1, da1;
  pc::SharedTensor<float> dw1, db1, dw2, db2, dwd, dbd;
  pc::SharedTensor<int32_t> i1, i2;

  // fill(span, scale): the inputs (scale 0.5) and the weights (He-like scales); biases start 0.
  template <class Fill>
  demo_step(const pc::Backend& backend, int64_t n, Fill fill)
      : b(backend), N(n), c1(b, {n, 1, 8, 8}, {8, 1, 3, 3}, {.padding = {1, 1}}),
        c2(b, {n, 8, 4, 4}, {16, 8, 3, 3}, {.padding = {1, 1}}), x({n, 1, 8, 8}), w1({8, 1, 3, 3}),
        b1({8}), w2({16, 8, 3, 3}), b2({16}), wd({10, 64}), bd({1, 10}), ones({n, 1}),
        dnll({n, 10}), a1({n, 8, 8, 8}), p1({n, 8, 4, 4}), a2({n, 16, 4, 4}), p2({n, 16, 2, 2}),
        logits({n, 10}), lsm({n, 10}), dlog({n, 10}), dp2({n, 64}), da2({n, 16, 4, 4}),
        dp1({n, 8, 4, 4}), da1({n, 8, 8, 8}), dw1({8, 1, 3, 3}), db1({8}), dw2({16, 8, 3, 3}),
        db2({16}), dwd({10, 64}), dbd({10, 1}), i1({n, 8, 4, 4}), i2({n, 16, 2, 2}) {
    fill(x.write_only(), 0.5f);
    fill(w1.write_only(), 0.47f);
    fill(w2.write_only(), 0.16f);
    fill(wd.write_only(), 0.17f);
    for (pc::SharedTensor<float>* t : {&b1, &b2, &bd}) {
      auto v = t->write_only();
      std::fill(v.begin(), v.end(), 0.f);
    }
    auto o = ones.write_only();
    std::fill(o.begin(), o.end(), 1.f);
    // d(mean NLL)/d(log_softmax) = -1/N at each sample's label.
    auto v = dnll.write_only();
    std::fill(v.begin(), v.end(), 0.f);
    for (int64_t i = 0; i < N; ++i)
      v[static_cast<size_t>(i * 10 + i % 10)] = -1.f / static_cast<float>(N);
  }

  void step() {
    namespace nn = pc::nn;
    namespace blas = pc::blas;
    c1.forward(x, w1, b1, a1);
    nn::relu_pointwise(b, a1);
    nn::pooling_max(b, a1, p1, i1, pool);
    c2.forward(p1, w2, b2, a2);
    nn::relu_pointwise(b, a2);
    nn::pooling_max(b, a2, p2, i2, pool);
    p2.reshape({N, 64});
    blas::gemm(b, blas::no_trans, blas::trans, 1.0, p2, wd, 0.0, logits);
    blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, ones, bd, 1.0, logits);
    nn::log_softmax(b, logits, lsm, 1);
    nn::log_softmax_grad(b, lsm, dnll, dlog, 1);
    blas::gemm(b, blas::trans, blas::no_trans, 1.0, dlog, p2, 0.0, dwd);
    blas::gemm(b, blas::trans, blas::no_trans, 1.0, dlog, ones, 0.0, dbd);
    blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, dlog, wd, 0.0, dp2);
    p2.reshape({N, 16, 2, 2});
    dp2.reshape({N, 16, 2, 2});
    nn::pooling_max_grad(b, dp2, i2, da2);
    dp2.reshape({N, 64});
    nn::relu_pointwise_grad(b, a2, da2);
    c2.grad_filter(p1, da2, dw2);
    c2.grad_bias(da2, db2);
    c2.grad_data(w2, da2, dp1);
    nn::pooling_max_grad(b, dp1, i1, da1);
    nn::relu_pointwise_grad(b, a1, da1);
    c1.grad_filter(x, da1, dw1);
    c1.grad_bias(da1, db1);
    blas::axpy(b, -lr, dw1, w1);
    blas::axpy(b, -lr, db1, b1);
    blas::axpy(b, -lr, dw2, w2);
    blas::axpy(b, -lr, db2, b2);
    blas::axpy(b, -lr, dwd, wd);
    blas::axpy(b, -lr, dbd, bd);
  }
};

} // namespace bench_nn
