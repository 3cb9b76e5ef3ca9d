// parenchyma-conformance: the NN suite's normalisation, cross-entropy, embedding and batch_norm
// cases (nn_suite.cpp registers them in its order; the header says why two sources).
#include "nn_suite.hpp"

namespace parenchyma::conformance::nn_cases {

// layer_norm and rms_norm with their gradients: rows short and long (one past a block of 4096;
// 1000 and 3001 take cuda's register-held kernels, 300 rows its fused gradient's many chunks),
// along every axis, rows far from zero (cancellation), a row holding NaN and one holding an
// infinity, no rows and empty rows, and the statistics not saved; then the refusals.
template <class T> void norm_cases(extension_suite& reg) {
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  struct nc {
    std::vector<int64_t> shape;
    int64_t axis;
    double offset, spread; // x = offset + spread * U(-1, 1)
    bool non_finite;       // row 1 holds a NaN, row 2 an infinity
  };
  const std::vector<nc> cases{{{3, 5, 7}, 1, 0, 2, false},
                              {{3, 5, 7}, 2, 0, 2, false},
                              {{3, 5, 7}, 0, 0, 2, false},
                              {{3, 5, 7}, -1, 0, 2, false},
                              {{1}, 0, 0, 1, false},
                              {{64, 100}, 1, 0, 3, false},
                              {{3, 4099}, 1, 0, 1, false},
                              {{7, 1000}, 1, 1000, 1, false},
                              {{9, 3001}, 1, 0, 1, false},
                              {{300, 70}, 1, 0, 2, false},
                              // n % 4 == 0 (4-element words on CUDA) in each row class; 129
                              // chunks of rows for the gradient's column sums
                              {{33, 516}, 1, 1000, 1, false},
                              {{5, 2048}, 1, 0, 2, false},
                              {{6, 3000}, 1, 0, 1, false},
                              {{1032, 520}, 1, 0, 1, false},
                              {{2, 3, 1, 11}, 3, 0, 50, false},
                              {{5, 33}, 1, 0, 1, true},
                              {{0, 5}, 1, 0, 1, false},
                              {{4, 0}, 1, 0, 1, false}};
  for (const nc& c : cases)
    for (const bool layer : {true, false}) {
      const std::string tag = std::string(layer ? "layer_norm " : "rms_norm ") + tname<T>() + " " +
                              shape_tag(c.shape) + " axis=" + std::to_string(c.axis) +
                              (c.offset != 0 ? " far from zero" : "") +
                              (c.non_finite ? " NaN and infinity rows" : "");
      reg.add<T>(
          tag,
          [=](const Backend& b) {
            const auto rank = static_cast<int64_t>(c.shape.size());
            const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
            size_t outer = 1, n = 1;
            for (int64_t i = 0; i < rank; ++i)
              (i < axis ? outer : n) *= static_cast<size_t>(c.shape[static_cast<size_t>(i)]);
            vec x = random_vec<T>(outer * n, -c.spread, c.spread);
            for (double& v : x)
              v = rounded<T>(v + c.offset);
            if (c.non_finite) {
              x[1 * n + 3] = std::numeric_limits<double>::quiet_NaN();
              x[2 * n + 5] = -std::numeric_limits<double>::infinity();
            }
            const vec w = random_vec<T>(n, 0.5, 1.5), bias = random_vec<T>(n),
                      dy = random_vec<T>(outer * n);
            const double epsilon = 1e-5;
            auto xt = tensor_of<T>(c.shape, x), wt = tensor_of<T>({static_cast<int64_t>(n)}, w),
                 bt = tensor_of<T>({static_cast<int64_t>(n)}, bias),
                 dyt = tensor_of<T>(c.shape, dy);
            const std::vector<int64_t> rows{static_cast<int64_t>(outer)};
            auto yt = poisoned<T>(c.shape);
            auto mt = poisoned<St>(rows), rt = poisoned<St>(rows);
            if (layer)
              nn::layer_norm(b, xt, wt, bt, yt, mt, rt, c.axis, epsilon);
            else
              nn::rms_norm(b, xt, wt, yt, rt, c.axis, epsilon);
            const auto ref = nn_ref::norm_forward(x, w, bias, outer, n, epsilon, layer);
            expect_all<T>(tag + " y", values(yt), ref.y);
            const vec gm = values(mt), gr = values(rt);
            for (size_t o = 0; o < outer; ++o) {
              double amu = 0;
              for (size_t j = 0; j < n; ++j)
                amu += std::fabs(x[o * n + j]) / static_cast<double>(n);
              if (layer)
                expect_near<St>(tag + " mean", o, gm[o], ref.mean[o], amu, static_cast<double>(n));
              expect_near<St>(tag + " rstd", o, gr[o], ref.rstd[o],
                              ref.rstd[o] * (1 + 4 * amu * ref.rstd[o]), static_cast<double>(n));
            }
            // Not saved: statistics tensors of 0 elements; y as before.
            auto y2 = poisoned<T>(c.shape);
            SharedTensor<St> none({0}), none2({0});
            if (layer)
              nn::layer_norm(b, xt, wt, bt, y2, none, none2, c.axis, epsilon);
            else
              nn::rms_norm(b, xt, wt, y2, none, c.axis, epsilon);
            expect_all<T>(tag + " y (statistics not saved)", values(y2), ref.y);
            // The gradients from the reference's statistics rounded to the statistics dtype.
            vec mean(outer), rstd(outer);
            for (size_t o = 0; o < outer; ++o) {
              mean[o] = rounded<St>(ref.mean[o]);
              rstd[o] = rounded<St>(ref.rstd[o]);
            }
            auto min = tensor_of<St>(rows, mean), rin = tensor_of<St>(rows, rstd);
            const std::vector<int64_t> ns{static_cast<int64_t>(n)};
            auto dx = poisoned<T>(c.shape), dw = poisoned<T>(ns), db = poisoned<T>(ns);
            if (layer)
              nn::layer_norm_grad(b, xt, wt, min, rin, dyt, dx, dw, db, c.axis);
            else
              nn::rms_norm_grad(b, xt, wt, rin, dyt, dx, dw, c.axis);
            const auto g = nn_ref::norm_backward(x, w, mean, rstd, dy, outer, n, layer);
            expect_all<T>(tag + " dx", values(dx), g.dx);
            expect_all<T>(tag + " dweight", values(dw), g.dw);
            if (layer) expect_all<T>(tag + " dbias", values(db), g.db);
          },
          layer ? std::vector<const OpKey*>{key<pcy_nn_layer_norm_schema, T>(),
                                            key<pcy_nn_layer_norm_grad_schema, T>()}
                : std::vector<const OpKey*>{key<pcy_nn_rms_norm_schema, T>(),
                                            key<pcy_nn_rms_norm_grad_schema, T>()});
    }
  reg.add<T>(
      std::string("layer_norm / rms_norm ") + tname<T>() + " refusals: y untouched",
      [](const Backend& b) {
        using Wrong = std::conditional_t<std::is_same_v<T, double>, float, double>;
        auto x = random_tensor<T>({4, 6}), w = random_tensor<T>({6}), bias = random_tensor<T>({6}),
             w5 = random_tensor<T>({5});
        auto y = poisoned<T>({4, 6});
        SharedTensor<St> m({4}), r({4}), r3({3});
        SharedTensor<Wrong> rw({4});
        const auto y0 = raw(y);
        expect_refused(
            "layer_norm weight of 5", [&] { nn::layer_norm(b, x, w5, bias, y, m, r, 1); },
            "layer_norm", "weight");
        expect_refused(
            "layer_norm rstd of 3", [&] { nn::layer_norm(b, x, w, bias, y, m, r3, 1); },
            "layer_norm", "rstd");
        expect_refused(
            "rms_norm rstd of the wrong dtype", [&] { nn::rms_norm(b, x, w, y, rw, 1); },
            "rms_norm", "rstd");
        expect_refused(
            "rms_norm axis 2 of a 2-d tensor", [&] { nn::rms_norm(b, x, w, y, r, 2); }, "rms_norm",
            "axis");
        expect_refused(
            "layer_norm negative epsilon",
            [&] { nn::layer_norm(b, x, w, bias, y, m, r, 1, -1e-5); }, "layer_norm", "epsilon");
        expect_refused(
            "rms_norm y aliasing x", [&] { nn::rms_norm(b, x, w, x, r, 1); }, "rms_norm", "y");
        expect_true(same_bits(raw(y), y0), "a refused norm changed y");
      },
      {key<pcy_nn_layer_norm_schema, T>(), key<pcy_nn_rms_norm_schema, T>()});
}

// ---- cross entropy -------------------------------------------------------------------------

// cross_entropy and its gradient: 1, 7, 1000 and 4099 classes over several rows (and leading
// dimensions), random labels with some rows ignored (ignore_index -100, and one inside the
// classes), label_smoothing 0 and 0.1, every reduction, logits far from zero (+1000), a row
// holding NaN and labels outside the classes (NaN rows), no rows; then the refusals.
template <class T> void xent_cases(extension_suite& reg) {
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  struct xc {
    std::vector<int64_t> shape; // the classes last
    int64_t ignore;
    double offset, spread;
    bool odd; // row 1 holds a NaN; labels C and -5 in rows 2 and 3; row 5 a -inf logit
  };
  const std::vector<xc> cases{{{5, 1}, -100, 0, 2, false},       {{3, 4, 7}, -100, 0, 3, false},
                              {{7}, -100, 0, 3, false},          {{9, 7}, 2, 0, 3, false},
                              {{6, 1000}, -100, 1000, 4, false}, {{3, 4099}, -100, 0, 5, false},
                              {{9, 7}, -100, 0, 3, true},        {{0, 7}, -100, 0, 1, false}};
  for (const xc& c : cases) {
    const std::string tag = std::string("cross_entropy ") + tname<T>() + " " + shape_tag(c.shape) +
                            " ignore_index=" + std::to_string(c.ignore) +
                            (c.offset != 0 ? " far from zero" : "") +
                            (c.odd ? " NaN row, labels outside the classes, a -inf logit" : "");
    reg.add<T>(tag,
               [=](const Backend& b) {
                 const size_t C = static_cast<size_t>(c.shape.back());
                 const size_t rows = count_of(c.shape) / std::max<size_t>(C, 1);
                 std::vector<int64_t> rshape(c.shape.begin(), c.shape.end() - 1);
                 if (rshape.empty()) rshape = {1};
                 vec x = random_vec<T>(rows * C, -c.spread, c.spread);
                 for (double& v : x)
                   v = rounded<T>(v + c.offset);
                 std::vector<int32_t> labels(rows);
                 std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(C) - 1);
                 for (size_t o = 0; o < rows; ++o)
                   labels[o] = o % 4 == 3 ? static_cast<int32_t>(c.ignore) : u(rng());
                 if (c.odd) {
                   x[1 * C + 3] = std::numeric_limits<double>::quiet_NaN();
                   labels[2] = static_cast<int32_t>(C);
                   labels[3] = -5;
                   // A masked logit (-inf) next to row 5's label: finite without smoothing.
                   x[5 * C + static_cast<size_t>(labels[5] + 1) % C] =
                       -std::numeric_limits<double>::infinity();
                 }
                 auto xt = tensor_of<T>(c.shape, x);
                 SharedTensor<int32_t> lt(rshape);
                 {
                   auto w = lt.write_only();
                   for (size_t o = 0; o < rows; ++o)
                     w[o] = labels[o];
                 }
                 const std::vector<int64_t> one{1};
                 for (const double ls : {0.0, 0.1})
                   for (const int red : {0, 1, 2}) {
                     const auto R = static_cast<nn::Reduction>(red);
                     const std::string what = tag + " label_smoothing=" + g3(ls) + " reduction " +
                                              (red == 0   ? "none"
                                               : red == 1 ? "mean"
                                                          : "sum");
                     const std::vector<int64_t> lshape = red == 0 ? rshape : one;
                     auto loss = poisoned<T>(lshape);
                     auto lse = poisoned<St>({static_cast<int64_t>(rows)});
                     nn::cross_entropy(b, xt, lt, loss, lse, c.ignore, ls, R);
                     const auto ref = nn_ref::xent_forward(x, labels, rows, C, c.ignore, ls, red);
                     expect_all<T>(what + " loss", values(loss), ref.loss);
                     const vec gl = values(lse);
                     for (size_t o = 0; o < rows; ++o) {
                       double ax = 0;
                       for (size_t j = 0; j < C; ++j)
                         ax = std::max(ax, std::fabs(x[o * C + j]));
                       expect_near<St>(what + " lse", o, gl[o], ref.lse[o], ax + 1,
                                       static_cast<double>(C));
                     }
                     // lse not saved: the loss as before.
                     auto loss2 = poisoned<T>(lshape);
                     SharedTensor<St> none({0});
                     nn::cross_entropy(b, xt, lt, loss2, none, c.ignore, ls, R);
                     expect_all<T>(what + " loss (lse not saved)", values(loss2), ref.loss);
                     // The gradient from the reference's lse rounded to the statistics dtype.
                     vec lr(rows);
                     for (size_t o = 0; o < rows; ++o)
                       lr[o] = rounded<St>(ref.lse[o]);
                     const vec dl = random_vec<T>(red == 0 ? rows : 1, 0.5, 2);
                     auto lin = tensor_of<St>({static_cast<int64_t>(rows)}, lr);
                     auto dlt = tensor_of<T>(lshape, dl);
                     auto dx = poisoned<T>(c.shape);
                     nn::cross_entropy_grad(b, xt, lt, lin, dlt, dx, c.ignore, ls, R);
                     expect_all<T>(
                         what + " dlogits", values(dx),
                         nn_ref::xent_backward(x, labels, lr, dl, rows, C, c.ignore, ls, red));
                   }
               },
               {key<pcy_nn_cross_entropy_schema, T>(), key<pcy_nn_cross_entropy_grad_schema, T>()});
  }
  reg.add<T>(
      std::string("cross_entropy ") + tname<T>() + " refusals: outputs untouched",
      [](const Backend& b) {
        auto x = random_tensor<T>({4, 6});
        SharedTensor<int32_t> labels({4});
        for (int32_t& v : labels.write_only())
          v = 1;
        SharedTensor<int64_t> wide({4});
        for (int64_t& v : wide.write_only())
          v = 1;
        auto loss = poisoned<T>({1}), loss4 = poisoned<T>({4});
        auto lse = poisoned<St>({4}), lse3 = poisoned<St>({3});
        auto dloss = random_tensor<T>({1});
        auto dx = poisoned<T>({4, 6});
        const auto l0 = raw(loss), l40 = raw(loss4), s0 = raw(lse), d0 = raw(dx);
        expect_refused(
            "cross_entropy i64 labels", [&] { nn::cross_entropy(b, x, wide, loss, lse); },
            "cross_entropy", "labels");
        expect_refused(
            "cross_entropy loss of 4 for reduction mean",
            [&] { nn::cross_entropy(b, x, labels, loss4, lse); }, "cross_entropy", "loss");
        expect_refused(
            "cross_entropy loss of 1 for reduction none",
            [&] { nn::cross_entropy(b, x, labels, loss, lse, -100, 0.0, nn::Reduction::none); },
            "cross_entropy", "loss");
        expect_refused(
            "cross_entropy label_smoothing 2",
            [&] { nn::cross_entropy(b, x, labels, loss, lse, -100, 2.0); }, "cross_entropy",
            "label_smoothing");
        expect_refused(
            "cross_entropy reduction 3",
            [&] {
              nn::cross_entropy(b, x, labels, loss, lse, -100, 0.0, static_cast<nn::Reduction>(3));
            },
            "cross_entropy", "reduction");
        expect_refused(
            "cross_entropy lse of 3", [&] { nn::cross_entropy(b, x, labels, loss, lse3); },
            "cross_entropy", "lse");
        expect_refused(
            "cross_entropy_grad lse of 0",
            [&] {
              SharedTensor<St> none({0});
              nn::cross_entropy_grad(b, x, labels, none, dloss, dx);
            },
            "cross_entropy_grad", "lse");
        expect_refused(
            "cross_entropy_grad label_smoothing 2",
            [&] { nn::cross_entropy_grad(b, x, labels, lse, dloss, dx, -100, 2.0); },
            "cross_entropy_grad", "label_smoothing");
        expect_refused(
            "cross_entropy_grad dloss of 1 for reduction none",
            [&] {
              nn::cross_entropy_grad(b, x, labels, lse, dloss, dx, -100, 0.0, nn::Reduction::none);
            },
            "cross_entropy_grad", "dloss");
        expect_true(same_bits(raw(loss), l0) && same_bits(raw(loss4), l40) &&
                        same_bits(raw(lse), s0) && same_bits(raw(dx), d0),
                    "a refused cross_entropy changed an output");
      },
      {key<pcy_nn_cross_entropy_schema, T>(), key<pcy_nn_cross_entropy_grad_schema, T>()});
}

// ---- embedding -----------------------------------------------------------------------------

// embedding and its gradient: tables of awkward V x D (1, 3, 129, 1000; an empty table, D = 0),
// indices of rank 0 to 2 and 0 to ~5000 positions with many repeats (V = 7 under 4099 indices),
// padding_idx, indices outside [0, V) (NaN rows, no contribution). The gradient's dy spans
// magnitudes 2^-8 to 2^6, so the order of its additions shows in the bits: besides the float64
// tolerance, each dweight element must equal, bit for bit, the sum in the compute dtype (f32;
// f64 for f64) in increasing position order, rounded once; and a second run the same bits.
// All the digits of a double (bit-exact checks: %.17g tells any two apart).
static std::string g17(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
template <class T> void embedding_cases(extension_suite& reg) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  struct ec {
    int64_t V, D;
    std::vector<int64_t> ishape;
    int64_t padding_idx;
    bool odd; // indices outside [0, V) at a few positions
  };
  const std::vector<ec> cases{{1, 1, {5}, -1, false},           {7, 3, {4099}, -1, false},
                              {7, 129, {41, 100}, 3, false},    {1000, 3, {5000}, 0, true},
                              {1000, 1000, {2, 37}, 999, true}, {129, 16, {}, -1, false},
                              {3000, 2, {17}, -1, false},       {5, 4, {0}, 2, false},
                              {5, 0, {3, 2}, 1, true},          {0, 4, {3}, -1, false},
                              {1, 3, {4, 4, 4}, 0, false}};
  for (const ec& c : cases) {
    const std::string tag = std::string("embedding ") + tname<T>() + " V=" + std::to_string(c.V) +
                            " D=" + std::to_string(c.D) + " indices " +
                            (c.ishape.empty() ? std::string("scalar") : shape_tag(c.ishape)) +
                            " padding_idx=" + std::to_string(c.padding_idx) +
                            (c.odd ? " indices outside the table" : "");
    reg.add<T>(tag,
               [=](const Backend& b) {
                 const size_t V = static_cast<size_t>(c.V), D = static_cast<size_t>(c.D);
                 const size_t n = count_of(c.ishape);
                 std::vector<int32_t> idx(n);
                 if (V != 0) {
                   std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(V) - 1);
                   for (int32_t& v : idx)
                     v = u(rng());
                   if (c.padding_idx >= 0)
                     for (size_t i = 0; i < n; i += 5)
                       idx[i] = static_cast<int32_t>(c.padding_idx);
                 } else {
                   for (size_t i = 0; i < n; ++i)
                     idx[i] = static_cast<int32_t>(i);
                 }
                 if (c.odd) {
                   const int32_t outside[] = {static_cast<int32_t>(V), -1,
                                              std::numeric_limits<int32_t>::max(),
                                              std::numeric_limits<int32_t>::min()};
                   for (size_t k = 0; k < 4 && k < n; ++k)
                     idx[(k * 7 + 1) % n] = outside[k];
                 }
                 SharedTensor<int32_t> it(c.ishape);
                 {
                   auto w = it.write_only();
                   for (size_t i = 0; i < n; ++i)
                     w[i] = idx[i];
                 }
                 std::vector<int64_t> yshape = c.ishape;
                 yshape.push_back(c.D);
                 // The forward.
                 const vec w = random_vec<T>(V * D, -2, 2);
                 auto wt = tensor_of<T>({c.V, c.D}, w);
                 auto y = poisoned<T>(yshape);
                 nn::embedding(b, wt, it, y, c.padding_idx);
                 const nn_ref::summed fr = nn_ref::embedding_forward(w, idx, V, D);
                 const vec gy = values(y);
                 expect_true(gy.size() == fr.v.size(), tag + " y: element count");
                 for (size_t k = 0; k < gy.size() && k < fr.v.size(); ++k)
                   expect_exact<T>(tag + " y", k, gy[k], fr.v[k]);
                 // The gradient.
                 vec dy = random_vec<T>(n * D, -1, 1);
                 std::uniform_int_distribution<int> e(-8, 6);
                 for (double& v : dy)
                   v = rounded<T>(std::ldexp(v, e(rng())));
                 auto dyt = tensor_of<T>(yshape, dy);
                 auto dw = poisoned<T>({c.V, c.D});
                 nn::embedding_grad(b, it, dyt, dw, c.padding_idx);
                 const std::vector<T> first = raw(dw);
                 const vec got = values(dw);
                 expect_all<T>(tag + " dweight", got,
                               nn_ref::embedding_backward(idx, dy, V, D, c.padding_idx));
                 const std::vector<C> exact =
                     nn_ref::embedding_backward_ordered<C>(idx, dy, V, D, c.padding_idx);
                 size_t bad = 0, at = 0;
                 for (size_t k = 0; k < got.size() && k < exact.size(); ++k) {
                   const double want = rounded<T>(static_cast<double>(exact[k]));
                   if (std::memcmp(&got[k], &want, sizeof(double)) != 0 && bad++ == 0) at = k;
                 }
                 expect_true(
                     bad == 0,
                     str(tname<T>(), " ", tag, " dweight: ", bad,
                         " elements differ from the sum in position order in the compute dtype "
                         "(first: element ",
                         at,
                         bad ? str(" got ", g17(got[at]), " expected ",
                                   g17(rounded<T>(static_cast<double>(exact[at]))))
                             : std::string(),
                         ")"));
                 // Run it again over a fresh poisoned output: the same bits.
                 auto dw2 = poisoned<T>({c.V, c.D});
                 nn::embedding_grad(b, it, dyt, dw2, c.padding_idx);
                 expect_true(same_bits(raw(dw2), first),
                             str(tname<T>(), " ", tag, " dweight: a second run gave other bits"));
               },
               {key<pcy_nn_embedding_schema, T>(), key<pcy_nn_embedding_grad_schema, T>()});
  }
  reg.add<T>(
      std::string("embedding ") + tname<T>() + " refusals: outputs untouched",
      [](const Backend& b) {
        auto w = random_tensor<T>({6, 4});
        SharedTensor<int32_t> idx({2, 3});
        for (int32_t& v : idx.write_only())
          v = 1;
        SharedTensor<int64_t> wide({2, 3});
        for (int64_t& v : wide.write_only())
          v = 1;
        auto w1 = random_tensor<T>({24});
        auto y = poisoned<T>({2, 3, 4}), y5 = poisoned<T>({2, 3, 5}), yflat = poisoned<T>({6, 4});
        auto dy = random_tensor<T>({2, 3, 4});
        auto dw = poisoned<T>({6, 4}), dw3 = poisoned<T>({1, 6, 4});
        const auto y0 = raw(y), y50 = raw(y5), yf0 = raw(yflat), dw0 = raw(dw), dw30 = raw(dw3);
        expect_refused(
            "embedding i64 indices", [&] { nn::embedding(b, w, wide, y); }, "embedding", "indices");
        expect_refused(
            "embedding weight of rank 1", [&] { nn::embedding(b, w1, idx, y); }, "embedding",
            "weight");
        expect_refused(
            "embedding y of D 5", [&] { nn::embedding(b, w, idx, y5); }, "embedding", "y");
        expect_refused(
            "embedding y flattened", [&] { nn::embedding(b, w, idx, yflat); }, "embedding", "y");
        expect_refused(
            "embedding padding_idx V", [&] { nn::embedding(b, w, idx, y, 6); }, "embedding",
            "padding_idx");
        expect_refused(
            "embedding padding_idx -2", [&] { nn::embedding(b, w, idx, y, -2); }, "embedding",
            "padding_idx");
        expect_refused(
            "embedding_grad i64 indices", [&] { nn::embedding_grad(b, wide, dy, dw); },
            "embedding_grad", "indices");
        expect_refused(
            "embedding_grad dweight of rank 3", [&] { nn::embedding_grad(b, idx, dy, dw3); },
            "embedding_grad", "dweight");
        expect_refused(
            "embedding_grad dy of D 5", [&] { nn::embedding_grad(b, idx, y5, dw); },
            "embedding_grad", "dy");
        expect_refused(
            "embedding_grad padding_idx 6", [&] { nn::embedding_grad(b, idx, dy, dw, 6); },
            "embedding_grad", "padding_idx");
        expect_true(same_bits(raw(y), y0) && same_bits(raw(y5), y50) &&
                        same_bits(raw(yflat), yf0) && same_bits(raw(dw), dw0) &&
                        same_bits(raw(dw3), dw30),
                    "a refused embedding changed an output");
      },
      {key<pcy_nn_embedding_schema, T>(), key<pcy_nn_embedding_grad_schema, T>()});
}

// ---- batch normalisation -------------------------------------------------------------------

// batch_norm and its gradient: shapes from one channel ([7, 1, 300]) to many of one element
// ([3, 64, 1, 1]), a large batch (M = 113088 values a channel: cuda's chunked sums), data far
// from zero (cancellation), a channel holding NaN and one an infinity, training and evaluation,
// spatial extents that are multiples of 8 (cuda's 16-byte words for y and dx in every dtype),
// the running and saved statistics present or absent, dweight / dbias absent, no batch in
// evaluation, no channels; the gradient run twice (the same bits); then the refusals.
template <class T> void bn_cases(extension_suite& reg) {
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  struct bc {
    std::vector<int64_t> shape;
    double offset, spread; // x = offset + spread * U(-1, 1)
    bool training;
    bool non_finite = false; // channel 1 holds a NaN, channel 2 an infinity (C >= 3)
    bool absent = false;     // running (training) and saved statistics, dweight, dbias absent
    double momentum = 0.1;
  };
  const std::vector<bc> cases{{{2, 5, 7}, 0, 2, true},
                              {{4, 3, 17, 13}, 0, 2, true},
                              {{3, 64, 1, 1}, 0, 1, true},
                              {{7, 1, 300}, 0, 1, true, false, false, 0.3},
                              {{2, 3}, 0, 1, true, false, false, 1.0},
                              {{64, 3, 57, 31}, 0, 1, true},
                              {{16, 4, 33}, 1000, 1, true},
                              {{5, 4, 9}, 0, 1, true, true},
                              {{6, 4, 5}, 0, 1, true, false, true, 0.0},
                              {{1, 3}, 0, 1, false},
                              {{2, 5, 7}, 0, 2, false},
                              {{4, 3, 17, 13}, 0, 2, false, true},
                              {{8, 6, 2, 3}, 0, 1, false, false, true},
                              {{0, 3, 5}, 0, 1, false},
                              {{2, 0, 5}, 0, 1, true},
                              {{4, 5, 8, 6}, 0, 1, true},
                              {{3, 2, 16}, 0, 1, false}};
  for (const bc& c : cases) {
    const std::string tag = std::string("batch_norm ") + tname<T>() + " " + shape_tag(c.shape) +
                            (c.training ? " training" : " evaluation") +
                            (c.offset != 0 ? " far from zero" : "") +
                            (c.non_finite ? " NaN and infinity channels" : "") +
                            (c.absent ? " optional tensors absent" : "") +
                            (c.momentum != 0.1 ? " momentum " + g3(c.momentum) : "");
    reg.add<T>(
        tag,
        [=](const Backend& b) {
          const size_t N = static_cast<size_t>(c.shape[0]), C = static_cast<size_t>(c.shape[1]);
          size_t sp = 1;
          for (size_t i = 2; i < c.shape.size(); ++i)
            sp *= static_cast<size_t>(c.shape[i]);
          const size_t total = N * C * sp;
          vec x = random_vec<T>(total, -c.spread, c.spread);
          for (double& v : x)
            v = rounded<T>(v + c.offset);
          if (c.non_finite && N * sp >= 2) {
            x[(0 * C + 1) * sp + (sp > 1 ? 1 : 0)] = std::numeric_limits<double>::quiet_NaN();
            x[((N - 1) * C + 2) * sp] = std::numeric_limits<double>::infinity();
          }
          const vec w = random_vec<T>(C, 0.5, 1.5), bias = random_vec<T>(C),
                    dy = random_vec<T>(total);
          const vec rm0 = random_vec<St>(C, -0.5, 0.5), rv0 = random_vec<St>(C, 0.5, 1.5);
          const double epsilon = 1e-5;
          const int64_t Ci = static_cast<int64_t>(C);
          const std::vector<int64_t> cs{Ci};
          auto xt = tensor_of<T>(c.shape, x), wt = tensor_of<T>(cs, w), bt = tensor_of<T>(cs, bias),
               dyt = tensor_of<T>(c.shape, dy);
          SharedTensor<St> rm = tensor_of<St>(cs, rm0), rv = tensor_of<St>(cs, rv0);
          auto yt = poisoned<T>(c.shape);
          auto sm = poisoned<St>(cs), sr = poisoned<St>(cs);
          SharedTensor<St> none1({0}), none2({0}), none3({0}), none4({0});
          const bool keep_running = !c.training || !c.absent;
          if (c.absent)
            nn::batch_norm(b, xt, wt, bt, keep_running ? rm : none1, keep_running ? rv : none2, yt,
                           none3, none4, c.training, c.momentum, epsilon);
          else
            nn::batch_norm(b, xt, wt, bt, rm, rv, yt, sm, sr, c.training, c.momentum, epsilon);
          const auto ref =
              nn_ref::bn_forward(x, w, bias, rm0, rv0, N, C, sp, c.training, c.momentum, epsilon);
          expect_all<T>(tag + " y", values(yt), ref.y);
          if (!c.absent) {
            expect_all<St>(tag + " save_mean", values(sm), ref.mean);
            expect_all<St>(tag + " save_rstd", values(sr), ref.rstd);
          }
          if (keep_running) {
            expect_all<St>(tag + " running_mean", values(rm), ref.rm);
            expect_all<St>(tag + " running_var", values(rv), ref.rv);
          }
          // The gradients from the reference's statistics rounded to the statistics dtype.
          vec mean(C), rstd(C);
          for (size_t k = 0; k < C; ++k) {
            mean[k] = rounded<St>(ref.mean.v[k]);
            rstd[k] = rounded<St>(ref.rstd.v[k]);
          }
          auto mt = tensor_of<St>(cs, mean), rt = tensor_of<St>(cs, rstd);
          const auto g = nn_ref::bn_backward(x, w, mean, rstd, dy, N, C, sp, c.training);
          auto dx = poisoned<T>(c.shape), dw = poisoned<T>(cs), db = poisoned<T>(cs);
          SharedTensor<T> nw({0}), nb({0});
          if (c.absent)
            nn::batch_norm_grad(b, xt, wt, mt, rt, dyt, dx, nw, nb, c.training);
          else
            nn::batch_norm_grad(b, xt, wt, mt, rt, dyt, dx, dw, db, c.training);
          expect_all<T>(tag + " dx", values(dx), g.dx);
          if (c.absent) return;
          expect_all<T>(tag + " dweight", values(dw), g.dw);
          expect_all<T>(tag + " dbias", values(db), g.db);
          auto dx2 = poisoned<T>(c.shape), dw2 = poisoned<T>(cs), db2 = poisoned<T>(cs);
          nn::batch_norm_grad(b, xt, wt, mt, rt, dyt, dx2, dw2, db2, c.training);
          expect_true(same_bits(raw(dx2), raw(dx)) && same_bits(raw(dw2), raw(dw)) &&
                          same_bits(raw(db2), raw(db)),
                      tag + ": a second gradient gave other bits");
        },
        {key<pcy_nn_batch_norm_schema, T>(), key<pcy_nn_batch_norm_grad_schema, T>()});
  }
  // f64: the gradient against finite differences of the op's own forward (L = sum(y dy)),
  // every element of x, weight and bias, in training (the batch statistics move with x) and in
  // evaluation (the running statistics do not).
  if constexpr (std::is_same_v<T, double>)
    for (const bool training : {true, false})
      reg.add<T>(
          std::string("batch_norm f64 3x4x5 ") + (training ? "training" : "evaluation") +
              " gradient by finite differences",
          [=](const Backend& b) {
            const std::vector<int64_t> xs{3, 4, 5}, cs{4};
            const vec x = random_vec<T>(60, -2, 2), w = random_vec<T>(4, 0.5, 1.5),
                      bias = random_vec<T>(4), dy = random_vec<T>(60),
                      rm0 = random_vec<T>(4, -0.5, 0.5), rv0 = random_vec<T>(4, 0.5, 1.5);
            auto loss = [&](const vec& xv, const vec& wv, const vec& bv) {
              auto xt = tensor_of<T>(xs, xv), wt = tensor_of<T>(cs, wv), bt = tensor_of<T>(cs, bv);
              auto rm = tensor_of<T>(cs, rm0), rv = tensor_of<T>(cs, rv0), y = poisoned<T>(xs);
              SharedTensor<T> n1({0}), n2({0}), n3({0}), n4({0}); // absent statistics
              if (training)
                nn::batch_norm(b, xt, wt, bt, n1, n2, y, n3, n4, true);
              else
                nn::batch_norm(b, xt, wt, bt, rm, rv, y, n3, n4, false);
              const vec yv = values(y);
              double l = 0, mag = 0;
              for (size_t i = 0; i < yv.size(); ++i) {
                l += yv[i] * dy[i];
                mag += std::fabs(yv[i] * dy[i]);
              }
              return std::pair<double, double>{l, 16 * eps<T>() * (mag + 1)};
            };
            auto xt = tensor_of<T>(xs, x), wt = tensor_of<T>(cs, w), bt = tensor_of<T>(cs, bias),
                 dyt = tensor_of<T>(xs, dy), rm = tensor_of<T>(cs, rm0), rv = tensor_of<T>(cs, rv0);
            auto y = poisoned<T>(xs), sm = poisoned<T>(cs), sr = poisoned<T>(cs);
            nn::batch_norm(b, xt, wt, bt, rm, rv, y, sm, sr, training, 0.0);
            auto dx = poisoned<T>(xs), dw = poisoned<T>(cs), db = poisoned<T>(cs);
            nn::batch_norm_grad(b, xt, wt, sm, sr, dyt, dx, dw, db, training);
            const vec gx = values(dx), gw = values(dw), gb = values(db);
            const double h = 1e-6;
            auto compare = [&](const char* what, size_t i, std::pair<double, double> lp,
                               std::pair<double, double> lm, double analytic) {
              const double fd = (lp.first - lm.first) / (2 * h);
              const double tol =
                  (lp.second + lm.second) / (2 * h) + 1e-8 * std::fabs(analytic) + 1e-9;
              report_element(std::fabs(fd - analytic) <= tol,
                             str("batch_norm ", training ? "training" : "evaluation",
                                 " finite differences ", what),
                             tname<T>(), i, analytic, fd, tol);
            };
            for (size_t i = 0; i < x.size(); ++i) {
              vec xp = x, xm = x;
              xp[i] += h;
              xm[i] -= h;
              compare("dx", i, loss(xp, w, bias), loss(xm, w, bias), gx[i]);
            }
            for (size_t c = 0; c < 4; ++c) {
              vec wp = w, wm = w, bp = bias, bm = bias;
              wp[c] += h;
              wm[c] -= h;
              bp[c] += h;
              bm[c] -= h;
              compare("dweight", c, loss(x, wp, bias), loss(x, wm, bias), gw[c]);
              compare("dbias", c, loss(x, w, bp), loss(x, w, bm), gb[c]);
            }
          },
          {key<pcy_nn_batch_norm_schema, T>(), key<pcy_nn_batch_norm_grad_schema, T>()});
  reg.add<T>(
      std::string("batch_norm ") + tname<T>() + " refusals: outputs untouched",
      [](const Backend& b) {
        using Wrong = std::conditional_t<std::is_same_v<T, double>, float, double>;
        auto x = random_tensor<T>({4, 3, 5}), x1 = random_tensor<T>({1, 3}),
             xv = random_tensor<T>({12}), w = random_tensor<T>({3}), bias = random_tensor<T>({3}),
             w4 = random_tensor<T>({4}), dy = random_tensor<T>({4, 3, 5});
        SharedTensor<T> x0({0, 3, 5}), y0t({0, 3, 5});
        auto y = poisoned<T>({4, 3, 5}), y1 = poisoned<T>({1, 3}), dx = poisoned<T>({4, 3, 5});
        auto dw = poisoned<T>({3}), dw4 = poisoned<T>({4});
        auto rm = tensor_of<St>({3}, {0.1, 0.2, 0.3}), rv = tensor_of<St>({3}, {1, 2, 3});
        auto m = tensor_of<St>({3}, {0, 0, 0}), r = tensor_of<St>({3}, {1, 1, 1});
        SharedTensor<St> sm({3}), sr({3}), none({0}), none2({0}), r2({2});
        SharedTensor<T> no_dbias({0}); // absent, in the op's dtype (dbias's)
        SharedTensor<Wrong> rw({3});
        const auto y_0 = raw(y), y1_0 = raw(y1), dx_0 = raw(dx), rm0 = raw(rm), rv0 = raw(rv);
        expect_refused(
            "batch_norm training on one value per channel",
            [&] { nn::batch_norm(b, x1, w, bias, rm, rv, y1, sm, sr, true); }, "batch_norm",
            "more than 1 value per channel");
        expect_refused(
            "batch_norm training on an empty batch",
            [&] { nn::batch_norm(b, x0, w, bias, rm, rv, y0t, sm, sr, true); }, "batch_norm",
            "more than 1 value per channel");
        expect_refused(
            "batch_norm evaluation without running_var",
            [&] { nn::batch_norm(b, x, w, bias, rm, none, y, sm, sr, false); }, "batch_norm",
            "running_var");
        expect_refused(
            "batch_norm momentum 1.5",
            [&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, sr, true, 1.5); }, "batch_norm",
            "momentum");
        expect_refused(
            "batch_norm epsilon 0",
            [&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, sr, true, 0.1, 0.0); }, "batch_norm",
            "epsilon");
        expect_refused(
            "batch_norm weight of 4",
            [&] { nn::batch_norm(b, x, w4, bias, rm, rv, y, sm, sr, true); }, "batch_norm",
            "weight");
        expect_refused(
            "batch_norm save_rstd of the wrong dtype",
            [&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, rw, true); }, "batch_norm",
            "save_rstd");
        expect_refused(
            "batch_norm running_mean of 2",
            [&] { nn::batch_norm(b, x, w, bias, r2, rv, y, sm, sr, true); }, "batch_norm",
            "running_mean");
        expect_refused(
            "batch_norm x of rank 1",
            [&] { nn::batch_norm(b, xv, w, bias, rm, rv, xv, sm, sr, false); }, "batch_norm", "x");
        expect_refused(
            "batch_norm y aliasing x",
            [&] { nn::batch_norm(b, x, w, bias, rm, rv, x, sm, sr, true); }, "batch_norm", "y");
        expect_refused(
            "batch_norm save_mean aliasing running_mean",
            [&] { nn::batch_norm(b, x, w, bias, rm, rv, y, rm, sr, true); }, "batch_norm",
            "running_mean");
        expect_refused(
            "batch_norm_grad dweight of 4",
            [&] { nn::batch_norm_grad(b, x, w, m, r, dy, dx, dw4, dw, true); }, "batch_norm_grad",
            "dweight");
        expect_refused(
            "batch_norm_grad mean absent",
            [&] { nn::batch_norm_grad(b, x, w, none2, r, dy, dx, dw, no_dbias, true); },
            "batch_norm_grad", "mean");
        expect_true(same_bits(raw(y), y_0) && same_bits(raw(y1), y1_0) &&
                        same_bits(raw(dx), dx_0) && same_bits(raw(rm), rm0) &&
                        same_bits(raw(rv), rv0),
                    "a refused batch_norm changed an output or a running statistic");
      },
      {key<pcy_nn_batch_norm_schema, T>(), key<pcy_nn_batch_norm_grad_schema, T>()});
}

template void norm_cases<float>(extension_suite&);
template void norm_cases<double>(extension_suite&);
template void norm_cases<f16>(extension_suite&);
template void norm_cases<bf16>(extension_suite&);
template void xent_cases<float>(extension_suite&);
template void xent_cases<double>(extension_suite&);
template void xent_cases<f16>(extension_suite&);
template void xent_cases<bf16>(extension_suite&);
template void embedding_cases<float>(extension_suite&);
template void embedding_cases<double>(extension_suite&);
template void embedding_cases<f16>(extension_suite&);
template void embedding_cases<bf16>(extension_suite&);
template void bn_cases<float>(extension_suite&);
template void bn_cases<double>(extension_suite&);
template void bn_cases<f16>(extension_suite&);
template void bn_cases<bf16>(extension_suite&);

} // namespace parenchyma::conformance::nn_cases
