// NN bad input. Through the front-end (parenchyma/nn.hpp): every rule it states — dtypes,
// element counts and shapes, ranks, geometry (stride, padding, dilation, groups, windows that do
// not fit, padding beyond half the window, overflowing shapes), parameters (alpha, axis, LRN's n,
// beta and k, dropout's probability), aliasing and tensors never written — throws the right errc
// with origin "nn.<op>" and a message naming the argument, before anything runs: every tensor
// keeps its contents. Then each NN bundle present is called directly, as any host could call
// it, with hostile values; it must refuse each call (PCY_ERR_INVALID_ARGUMENT, or
// PCY_ERR_UNSUPPORTED for what it cannot address) naming the op and the argument, and leave
// memory untouched.
#include "support/catch.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/common.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;

namespace {

std::mt19937 rng{std::random_device{}()};

template <class T> SharedTensor<T> filled(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}
template <class T> std::vector<T> snapshot(const SharedTensor<T>& t) {
  auto s = t.read();
  return {s.begin(), s.end()};
}
template <class T> bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Runs f, which must throw errc `code` with origin "nn.<op>" and every piece of `needles` in
// its message.
template <class F>
void expect_error(F&& f, errc code, const std::string& op, std::vector<std::string> needles) {
  try {
    f();
    FAIL("no error thrown for nn." << op << " (expected " << needles.front() << ")");
  } catch (const parenchyma::error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK(e.origin() == "nn." + op);
    for (const auto& n : needles)
      CHECK(std::string(e.what()).find(n) != std::string::npos);
  }
}
void invalid(std::function<void()> f, const std::string& op, std::vector<std::string> needles) {
  expect_error(std::move(f), errc::invalid_argument, op, std::move(needles));
}

Backend& native() {
  static Backend b("native");
  return b;
}
// An NN bundle serves ops on this backend (possibly by fallback): the Convolution's
// configuration needs one.
bool have_nn(const Backend& b) {
  try {
    (void)b.route(ext::op_key<pcy_nn_convolution_algorithm_schema>(PCY_DTYPE_F32));
    return true;
  } catch (const parenchyma::error&) {
    return false;
  }
}

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

} // namespace

TEST_CASE("activations: dtypes, sizes, aliasing, alpha, unwritten tensors", "[nn]") {
  Backend& b = native();
  auto x = filled<float>({3, 4}), y = filled<float>({13});
  auto yd = filled<double>({12});
  auto dy = filled<float>({12}), dx = filled<float>({12}), good = filled<float>({2, 6});
  SharedTensor<int32_t> xi({12});
  for (int32_t& v : xi.write_only())
    v = 1;
  SharedTensor<float> unwritten({12});
  const auto yd0 = snapshot(yd);
  const auto x0 = snapshot(x), y0 = snapshot(y), dy0 = snapshot(dy), dx0 = snapshot(dx),
             g0 = snapshot(good);

  invalid([&] { nn::relu(b, x, y); }, "relu", {"argument y", "13", "12"});
  invalid([&] { nn::sigmoid(b, x, yd); }, "sigmoid", {"argument y", "f64", "f32"});
  invalid([&] { nn::tanh(b, xi, good); }, "tanh", {"argument x", "i32", "not supported"});
  invalid([&] { nn::elu(b, x, x); }, "elu", {"argument x", "same tensor"});
  invalid([&] { nn::elu(b, x, good, nan_v); }, "elu", {"argument alpha", "not finite"});
  invalid([&] { nn::elu_pointwise(b, x, inf_v); }, "elu_pointwise", {"argument alpha"});
  invalid([&] { nn::relu_pointwise(b, xi); }, "relu_pointwise", {"argument x", "i32"});
  expect_error([&] { nn::sigmoid(b, unwritten, good); }, errc::uninitialized, "sigmoid",
               {"argument x", "never written"});
  expect_error([&] { nn::tanh_pointwise(b, unwritten); }, errc::uninitialized, "tanh_pointwise",
               {"argument x"});
  // Gradients.
  invalid([&] { nn::relu_grad(b, x, y, dx); }, "relu_grad", {"argument dy", "13"});
  invalid([&] { nn::sigmoid_grad(b, x, dy, y); }, "sigmoid_grad", {"argument dx", "13"});
  invalid([&] { nn::tanh_grad(b, x, dy, yd); }, "tanh_grad", {"argument dx", "f64"});
  invalid([&] { nn::elu_grad(b, x, dy, dy); }, "elu_grad", {"argument dy", "same tensor"});
  invalid([&] { nn::relu_grad(b, dx, dy, dx); }, "relu_grad", {"argument y", "same tensor"});
  invalid([&] { nn::elu_grad(b, x, dy, dx, nan_v); }, "elu_grad", {"argument alpha"});
  expect_error([&] { nn::sigmoid_grad(b, x, unwritten, dx); }, errc::uninitialized, "sigmoid_grad",
               {"argument dy"});
  invalid([&] { nn::relu_pointwise_grad(b, x, y); }, "relu_pointwise_grad", {"argument d", "13"});
  invalid([&] { nn::tanh_pointwise_grad(b, x, x); }, "tanh_pointwise_grad", {"same tensor"});
  invalid([&] { nn::sigmoid_pointwise_grad(b, x, yd); }, "sigmoid_pointwise_grad",
          {"argument d", "f64"});
  invalid([&] { nn::elu_pointwise_grad(b, x, dx, -inf_v); }, "elu_pointwise_grad",
          {"argument alpha"});
  expect_error([&] { nn::relu_pointwise_grad(b, x, unwritten); }, errc::uninitialized,
               "relu_pointwise_grad", {"argument d"});
  expect_error([&] { nn::elu_pointwise_grad(b, unwritten, dx); }, errc::uninitialized,
               "elu_pointwise_grad", {"argument y"});

  CHECK(same(snapshot(x), x0));
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(yd), yd0));
  CHECK(same(snapshot(dy), dy0));
  CHECK(same(snapshot(dx), dx0));
  CHECK(same(snapshot(good), g0));
  CHECK(!unwritten.initialized());
}

TEST_CASE("softmax: axis, shapes, aliasing, unwritten tensors", "[nn]") {
  Backend& b = native();
  auto x = filled<float>({2, 3, 4}), y = filled<float>({2, 3, 4}), flat = filled<float>({24});
  auto dy = filled<float>({2, 3, 4}), dx = filled<float>({2, 3, 4});
  auto yd = filled<double>({2, 3, 4});
  SharedTensor<float> unwritten({2, 3, 4});
  const auto y0 = snapshot(y), f0 = snapshot(flat), dx0 = snapshot(dx);
  invalid([&] { nn::softmax(b, x, y, 3); }, "softmax", {"argument axis", "3"});
  invalid([&] { nn::log_softmax(b, x, y, -4); }, "log_softmax", {"argument axis", "-4"});
  invalid([&] { nn::softmax(b, x, flat, 1); }, "softmax", {"argument y", "[24]", "[2, 3, 4]"});
  invalid([&] { nn::log_softmax(b, x, yd); }, "log_softmax", {"argument y", "f64"});
  invalid([&] { nn::softmax(b, x, x); }, "softmax", {"same tensor"});
  expect_error([&] { nn::softmax(b, unwritten, y); }, errc::uninitialized, "softmax",
               {"argument x"});
  invalid([&] { nn::softmax_grad(b, y, flat, dx); }, "softmax_grad", {"argument dy", "[24]"});
  invalid([&] { nn::log_softmax_grad(b, y, dy, flat); }, "log_softmax_grad", {"argument dx"});
  invalid([&] { nn::softmax_grad(b, y, dy, dx, 5); }, "softmax_grad", {"argument axis"});
  invalid([&] { nn::softmax_grad(b, y, dx, dx); }, "softmax_grad", {"same tensor"});
  invalid([&] { nn::log_softmax_grad(b, y, dy, yd); }, "log_softmax_grad", {"argument dx", "f64"});
  expect_error([&] { nn::log_softmax_grad(b, y, unwritten, dx); }, errc::uninitialized,
               "log_softmax_grad", {"argument dy"});
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(flat), f0));
  CHECK(same(snapshot(dx), dx0));
}

TEST_CASE("convolution: every configuration rule", "[nn]") {
  Backend& b = native();
  using P = nn::ConvolutionParams;
  const auto conv = [&](nn::Shape x, nn::Shape w, P p = {}, pcy_dtype d = PCY_DTYPE_F32) {
    return [&b, x, w, p, d] { (void)nn::Convolution(b, x, w, p, d); };
  };
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, {}, PCY_DTYPE_I32), "convolution",
          {"dtype i32", "not supported"});
  invalid(conv({3, 8, 8}, {4, 3, 3, 3}), "convolution", {"argument x", "N x C x H x W"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3}), "convolution", {"argument w"});
  invalid(conv({1, 3, -8, 8}, {4, 3, 3, 3}), "convolution", {"argument x", "negative"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 0, 3}), "convolution", {"argument w", ">= 1"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.stride = {0, 1}}), "convolution",
          {"argument stride", "stride[0] = 0"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.padding = {0, -1}}), "convolution",
          {"argument padding", "padding[1] = -1"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.dilation = {1, 0}}), "convolution",
          {"argument dilation"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.groups = 0}), "convolution", {"argument groups"});
  invalid(conv({1, 3, 8, 8}, {4, 1, 3, 3}, P{.groups = 2}), "convolution",
          {"argument groups", "divide"});
  invalid(conv({1, 4, 8, 8}, {6, 1, 3, 3}, P{.groups = 2}), "convolution",
          {"argument w", "channels per group"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.algorithm = {-1, -3, -1}}), "convolution",
          {"argument algorithm", "-3"});
  invalid(conv({1, 3, 4, 4}, {4, 3, 5, 3}), "convolution", {"argument w", "wider"});
  invalid(conv({1, 3, 4, 4}, {4, 3, 3, 3}, P{.dilation = {2, 1}}), "convolution",
          {"argument w", "height"});
  invalid(conv({1, 3, 8, 8}, {4, 3, 3, 3}, P{.padding = {int64_t{1} << 62, 0}}), "convolution",
          {"overflows"});
  invalid(conv({int64_t{1} << 40, int64_t{1} << 40, 1, 1}, {1, int64_t{1} << 40, 1, 1}),
          "convolution", {"overflows the element count"});

  if (!have_nn(b)) {
    WARN("no NN bundle serves convolution_algorithm here: the configured-call checks are skipped");
    return;
  }
  const nn::Shape xs{2, 3, 6, 5}, ws{4, 3, 3, 3};
  nn::Convolution c(b, xs, ws, P{.padding = {1, 1}});
  REQUIRE(c.y_shape() == nn::Shape{2, 4, 6, 5});
  auto x = filled<float>(xs), w = filled<float>(ws), y = filled<float>(c.y_shape());
  auto dy = filled<float>(c.y_shape()), dx = filled<float>(xs), dw = filled<float>(ws);
  auto bias = filled<float>({4}), db = filled<float>({4});
  auto xd = filled<double>(xs);
  auto wrong_x = filled<float>({2, 3, 5, 6}), short_b = filled<float>({3});
  auto bias_d = filled<double>({4});
  SharedTensor<float> unwritten_x(xs), unwritten_b({4});
  const auto y0 = snapshot(y), dx0 = snapshot(dx), dw0 = snapshot(dw), db0 = snapshot(db);
  invalid([&] { c.forward(xd, w, y); }, "convolution", {"dtype f64", "configuration"});
  invalid([&] { c.forward(x, filled<double>(ws), y); }, "convolution", {"argument w", "f64"});
  invalid([&] { c.forward(wrong_x, w, y); }, "convolution", {"argument x", "[2, 3, 5, 6]"});
  invalid([&] { c.forward(x, w, dx); }, "convolution", {"argument y"});
  invalid([&] { c.forward(x, x, y); }, "convolution", {"argument w"});
  expect_error([&] { c.forward(unwritten_x, w, y); }, errc::uninitialized, "convolution",
               {"argument x"});
  invalid([&] { c.forward(x, w, short_b, y); }, "convolution_bias", {"argument bias", "[3]"});
  invalid([&] { c.forward(x, w, bias_d, y); }, "convolution_bias", {"argument bias", "f64"});
  expect_error([&] { c.forward(x, w, unwritten_b, y); }, errc::uninitialized, "convolution_bias",
               {"argument bias"});
  invalid([&] { c.grad_data(w, dy, wrong_x); }, "convolution_grad_data", {"argument dx"});
  invalid([&] { c.grad_data(w, dx, dx); }, "convolution_grad_data", {"argument dy"});
  invalid([&] { c.grad_data(x, dy, dx); }, "convolution_grad_data", {"argument w"});
  expect_error([&] { c.grad_data(w, unwritten_x, dx); }, errc::invalid_argument,
               "convolution_grad_data", {"argument dy"});
  invalid([&] { c.grad_filter(x, dy, x); }, "convolution_grad_filter", {"argument dw"});
  invalid([&] { c.grad_filter(x, dy, filled<double>(ws)); }, "convolution_grad_filter",
          {"argument dw", "f64"});
  invalid([&] { c.grad_bias(dy, short_b); }, "convolution_grad_bias", {"argument db", "[3]"});
  invalid([&] { c.grad_bias(x, db); }, "convolution_grad_bias", {"argument dy"});
  // Without training, the gradients are refused.
  nn::Convolution inference(b, xs, ws, P{.padding = {1, 1}, .training = false});
  invalid([&] { inference.grad_data(w, dy, dx); }, "convolution_grad_data", {"training"});
  invalid([&] { inference.grad_filter(x, dy, dw); }, "convolution_grad_filter", {"training"});
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(dx), dx0));
  CHECK(same(snapshot(dw), dw0));
  CHECK(same(snapshot(db), db0));
  CHECK(!unwritten_x.initialized());
}

TEST_CASE("pooling: geometry, shapes, indices, aliasing", "[nn]") {
  Backend& b = native();
  using P = nn::PoolingParams;
  const nn::Shape xs{2, 3, 7, 6};
  auto x = filled<float>(xs), y = filled<float>({2, 3, 3, 3}), dy = filled<float>({2, 3, 3, 3});
  auto dx = filled<float>(xs), x3 = filled<float>({3, 7, 6});
  auto yd = filled<double>({2, 3, 3, 3});
  SharedTensor<int32_t> idx({2, 3, 3, 3}), idx_short({2, 3, 3, 2});
  for (int32_t& v : idx.write_only())
    v = 0;
  for (int32_t& v : idx_short.write_only())
    v = 0;
  SharedTensor<int64_t> idx64({2, 3, 3, 3});
  for (int64_t& v : idx64.write_only())
    v = 0;
  SharedTensor<float> unwritten(xs);
  const P p{.window = {3, 2}, .stride = {2, 2}, .padding = {0, 0}};
  REQUIRE(nn::pooling_output_shape(xs, p) == nn::Shape{2, 3, 3, 3});
  const auto y0 = snapshot(y), dx0 = snapshot(dx);
  const auto i0 = snapshot(idx);

  invalid([&] { nn::pooling_max(b, x3, y, p); }, "pooling_max", {"argument x", "4-d"});
  invalid(
      [&] {
        nn::pooling_max(b, x, y, P{.window = {0, 2}});
      },
      "pooling_max", {"argument window", ">= 1"});
  invalid(
      [&] {
        nn::pooling_max(b, x, y, P{.window = {2, 2}, .stride = {-1, 1}});
      },
      "pooling_max", {"argument stride"});
  invalid(
      [&] {
        nn::pooling_avg(b, x, y, P{.window = {2, 2}, .padding = {-1, 0}});
      },
      "pooling_avg", {"argument padding", ">= 0"});
  invalid(
      [&] {
        nn::pooling_avg(b, x, y, P{.window = {3, 2}, .padding = {2, 0}});
      },
      "pooling_avg", {"argument padding", "half the window"});
  invalid(
      [&] {
        nn::pooling_max(b, x, y, P{.window = {8, 2}});
      },
      "pooling_max", {"argument window", "wider"});
  auto y_bad = filled<float>({2, 3, 3, 2});
  invalid([&] { nn::pooling_max(b, x, y_bad, p); }, "pooling_max", {"argument y", "pooled shape"});
  invalid([&] { nn::pooling_max(b, x, yd, p); }, "pooling_max", {"argument y", "f64"});
  invalid([&] { nn::pooling_max(b, x, x, P{.window = {1, 1}}); }, "pooling_max", {"same tensor"});
  expect_error([&] { nn::pooling_avg(b, unwritten, y, p); }, errc::uninitialized, "pooling_avg",
               {"argument x"});
  invalid([&] { nn::pooling_max(b, x, y, idx64, p); }, "pooling_max_indexed",
          {"argument indices", "i32"});
  invalid([&] { nn::pooling_max(b, x, y, idx_short, p); }, "pooling_max_indexed",
          {"argument indices", "[2, 3, 3, 2]"});
  invalid([&] { nn::pooling_max_grad(b, x, y, dy, x3, p); }, "pooling_max_grad", {"argument dx"});
  invalid([&] { nn::pooling_max_grad(b, x, y, x, dx, p); }, "pooling_max_grad", {"argument dy"});
  invalid([&] { nn::pooling_max_grad(b, x, y, dy, x, p); }, "pooling_max_grad", {"same tensor"});
  invalid([&] { nn::pooling_max_grad(b, dy, idx64, dx); }, "pooling_max_grad_indexed",
          {"argument indices", "i32"});
  invalid([&] { nn::pooling_max_grad(b, dy, idx_short, dx); }, "pooling_max_grad_indexed",
          {"argument indices"});
  invalid([&] { nn::pooling_max_grad(b, dy, idx, x3); }, "pooling_max_grad_indexed",
          {"argument dx", "4-d"});
  auto dx_other_c = filled<float>({2, 4, 7, 6});
  invalid([&] { nn::pooling_max_grad(b, dy, idx, dx_other_c); }, "pooling_max_grad_indexed",
          {"argument dx", "N and C"});
  SharedTensor<int32_t> unwritten_idx({2, 3, 3, 3});
  expect_error([&] { nn::pooling_max_grad(b, dy, unwritten_idx, dx); }, errc::uninitialized,
               "pooling_max_grad_indexed", {"argument indices"});
  invalid([&] { nn::pooling_avg_grad(b, dy, x3, p); }, "pooling_avg_grad", {"argument dx"});
  invalid([&] { nn::pooling_avg_grad(b, x, dx, p); }, "pooling_avg_grad", {"argument dy"});
  // dx of another dtype than dy: refused (by the front-end or by the core's schema check).
  auto dxd = filled<double>(xs);
  const auto dxd0 = snapshot(dxd);
  invalid([&] { nn::pooling_avg_grad(b, dy, dxd, p); }, "pooling_avg_grad", {"argument dx"});
  CHECK(same(snapshot(dxd), dxd0));
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(dx), dx0));
  CHECK(same(snapshot(idx), i0));
}

TEST_CASE("LRN and dropout: parameters, shapes, masks", "[nn]") {
  Backend& b = native();
  const nn::Shape xs{2, 5, 3, 3};
  auto x = filled<float>(xs), y = filled<float>(xs), dy = filled<float>(xs), dx = filled<float>(xs);
  auto flat = filled<float>({90}), x3 = filled<float>({5, 3, 3});
  const auto y0 = snapshot(y), dx0 = snapshot(dx), f0 = snapshot(flat);
  using L = nn::LrnParams;
  invalid([&] { nn::lrn(b, x3, y); }, "lrn", {"argument x", "4-d"});
  invalid([&] { nn::lrn(b, x, flat); }, "lrn", {"argument y", "[90]"});
  invalid([&] { nn::lrn(b, x, x); }, "lrn", {"same tensor"});
  invalid([&] { nn::lrn(b, x, y, L{.n = 0}); }, "lrn", {"argument n"});
  invalid([&] { nn::lrn(b, x, y, L{.alpha = nan_v}); }, "lrn", {"argument alpha"});
  invalid([&] { nn::lrn(b, x, y, L{.beta = -0.5}); }, "lrn", {"argument beta"});
  invalid([&] { nn::lrn(b, x, y, L{.k = 0}); }, "lrn", {"argument k"});
  auto xh = SharedTensor<f16>(xs);
  for (f16& v : xh.write_only())
    v = f16(1.0f);
  auto yh = SharedTensor<f16>(xs);
  invalid([&] { nn::lrn(b, xh, yh); }, "lrn", {"argument x", "f16"});
  invalid([&] { nn::lrn_grad(b, x, y, dy, flat); }, "lrn_grad", {"argument dx"});
  invalid([&] { nn::lrn_grad(b, x, flat, dy, dx); }, "lrn_grad", {"argument y"});
  invalid([&] { nn::lrn_grad(b, x, y, dx, dx); }, "lrn_grad", {"same tensor"});
  invalid([&] { nn::lrn_grad(b, x, y, dy, dx, L{.k = -1}); }, "lrn_grad", {"argument k"});
  SharedTensor<float> unwritten(xs);
  expect_error([&] { nn::lrn_grad(b, x, y, unwritten, dx); }, errc::uninitialized, "lrn_grad",
               {"argument dy"});

  auto m = SharedTensor<uint8_t>({2, 5, 3, 3}), m_short = SharedTensor<uint8_t>({89});
  for (uint8_t& v : m.write_only())
    v = 1;
  for (uint8_t& v : m_short.write_only())
    v = 1;
  auto m_f = filled<float>({90});
  const auto m0 = snapshot(m);
  invalid([&] { nn::dropout(b, x, y, m, 1.5, 7); }, "dropout", {"argument probability", "1.5"});
  invalid([&] { nn::dropout(b, x, y, m, -0.1, 7); }, "dropout", {"argument probability"});
  invalid([&] { nn::dropout(b, x, y, m, nan_v, 7); }, "dropout", {"argument probability"});
  invalid([&] { nn::dropout(b, x, y, m_short, 0.5, 7); }, "dropout", {"argument mask", "89"});
  invalid([&] { nn::dropout(b, x, y, m_f, 0.5, 7); }, "dropout", {"argument mask", "u8"});
  invalid([&] { nn::dropout(b, x, filled<float>({91}), m, 0.5, 7); }, "dropout", {"argument y"});
  invalid([&] { nn::dropout(b, x, x, m, 0.5, 7); }, "dropout", {"same tensor"});
  expect_error([&] { nn::dropout(b, unwritten, y, m, 0.5, 7); }, errc::uninitialized, "dropout",
               {"argument x"});
  invalid([&] { nn::dropout_grad(b, dy, m, dx, 2.0); }, "dropout_grad", {"argument probability"});
  invalid([&] { nn::dropout_grad(b, dy, m_short, dx, 0.5); }, "dropout_grad", {"argument mask"});
  invalid([&] { nn::dropout_grad(b, dy, m, filled<float>({89}), 0.5); }, "dropout_grad",
          {"argument dx", "89"});
  invalid([&] { nn::dropout_grad(b, dy, m, dy, 0.5); }, "dropout_grad", {"same tensor"});
  SharedTensor<uint8_t> unwritten_m(xs);
  expect_error([&] { nn::dropout_grad(b, dy, unwritten_m, dx, 0.5); }, errc::uninitialized,
               "dropout_grad", {"argument mask"});
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(dx), dx0));
  CHECK(same(snapshot(flat), f0));
  CHECK(same(snapshot(m), m0));
}

// ---- the bundles, called directly ----------------------------------------------------------

namespace {
constexpr uint32_t cells = 64; // floats in each memory

// One argument of a direct call: the ABI's pcy_op_arg and, for an INT_ARRAY, its values.
struct harg {
  pcy_op_arg a;
  const int64_t* ints = nullptr;
};

// One bundle's ops called by hand, as any host could call them (not through nn.hpp): a context,
// a queue and the bundle's per-context state on the framework's first device, and memories of
// 64 floats holding -32 .. 31.
class direct_bundle {
public:
  direct_bundle(const Framework& fw, const BundleInfo& bundle) : fw_(fw), bundle_(bundle) {
    const uint32_t dev = fw.devices().front().plugin_index;
    check(api().context_create(fw.plugin(), &dev, 1, &ctx_), "context_create");
    check(api().queue_create(ctx_, 0, &queue_), "queue_create");
    pcy_bundle_context_args a{};
    a.struct_size = sizeof a;
    a.plugin = bundle.plugin();
    a.framework = &api();
    a.framework_plugin = fw.plugin();
    a.context = ctx_;
    a.device = 0;
    a.plugin_device = dev;
    a.queue = queue_;
    check(bundle.api().context_init(&a), "context_init");
    bctx_ = a.bundle;
  }
  direct_bundle(const direct_bundle&) = delete;
  direct_bundle& operator=(const direct_bundle&) = delete;
  ~direct_bundle() {
    if (pcy_error* e = api().queue_finish(queue_)) e->destroy(e);
    bundle_.api().context_teardown(bctx_);
    for (pcy_memory m : memories_)
      api().memory_free(m);
    api().queue_destroy(queue_);
    api().context_destroy(ctx_);
  }
  const pcy_framework_api& api() const { return fw_.api(); }

  pcy_memory memory() {
    pcy_memory_alloc_args m{};
    m.struct_size = sizeof m;
    m.context = ctx_;
    m.device = 0;
    m.bytes = sizeof(float) * cells;
    check(api().memory_alloc(&m), "memory_alloc");
    memories_.push_back(m.memory);
    std::vector<float> v = initial();
    transfer(m.memory, v.data(), true);
    return m.memory;
  }
  static std::vector<float> initial() {
    std::vector<float> v(cells);
    for (uint32_t i = 0; i < cells; ++i)
      v[i] = static_cast<float>(i) - 32.0f;
    return v;
  }
  std::vector<float> contents(pcy_memory m) {
    std::vector<float> v(cells);
    transfer(m, v.data(), false);
    return v;
  }
  const std::vector<pcy_memory>& memories() const { return memories_; }
  bool has(const char* op) const { return bundle_.find_op(op, PCY_DTYPE_F32) != nullptr; }
  // Calls `op` (f32) and returns its error, or nullptr.
  pcy_error* call(const char* op, const std::vector<harg>& hargs) {
    const pcy_op_desc* d = bundle_.find_op(op, PCY_DTYPE_F32);
    REQUIRE(d != nullptr);
    std::vector<pcy_op_arg> args;
    std::vector<pcy_op_arg_ext> ext;
    for (const harg& h : hargs) {
      args.push_back(h.a);
      pcy_op_arg_ext e{};
      e.struct_size = sizeof e;
      e.ints = h.ints;
      e.count = h.ints ? static_cast<uint64_t>(h.a.i) : 0;
      ext.push_back(e);
    }
    pcy_op_call c{};
    c.struct_size = sizeof c;
    c.context = bctx_;
    c.queue = queue_;
    c.args = args.data();
    c.arg_count = static_cast<uint32_t>(args.size());
    c.arg_ext = ext.data();
    pcy_error* e = d->fn(&c);
    if (pcy_error* f = api().queue_finish(queue_)) f->destroy(f);
    return e;
  }

private:
  static void check(pcy_error* e, const char* what) {
    if (e == nullptr) return;
    const std::string msg = std::string(what) + ": " + (e->message ? e->message : "");
    e->destroy(e);
    FAIL(msg);
  }
  void transfer(pcy_memory m, float* host, bool write) {
    pcy_memory_transfer_args t{};
    t.struct_size = sizeof t;
    t.queue = queue_;
    t.memory = m;
    t.host_pointer = host;
    t.bytes = sizeof(float) * cells;
    t.blocking = true;
    check(write ? api().memory_write(&t) : api().memory_read(&t), "memory transfer");
  }
  const Framework& fw_;
  const BundleInfo& bundle_;
  pcy_context ctx_ = nullptr;
  pcy_queue queue_ = nullptr;
  pcy_bundle_context bctx_ = nullptr;
  std::vector<pcy_memory> memories_;
};

// Shapes live as long as the tensors that point at them.
struct tensor_maker {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<pcy_tensor> tensors;
  tensor_maker() {
    shapes.reserve(256);
    tensors.reserve(256);
  }
  const pcy_tensor& make(pcy_memory m, std::vector<int64_t> shape, pcy_dtype d = PCY_DTYPE_F32) {
    shapes.push_back(std::move(shape));
    pcy_tensor t{};
    t.struct_size = sizeof t;
    t.memory = m;
    t.dtype = d;
    t.ndim = static_cast<int32_t>(shapes.back().size());
    t.shape = shapes.back().data();
    tensors.push_back(t);
    return tensors.back();
  }
};
std::vector<std::vector<int64_t>> arrays; // int-array values, alive for the test

harg i_arg(int64_t v) { return {{PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, v, 0}}; }
harg f_arg(double v) { return {{PCY_OP_ARG_FLOAT, PCY_INTENT_IN, nullptr, 0, v}}; }
harg a_arg(std::vector<int64_t> v) {
  arrays.push_back(std::move(v));
  return {
      {PCY_OP_ARG_INT_ARRAY, PCY_INTENT_IN, nullptr, static_cast<int64_t>(arrays.back().size()), 0},
      arrays.back().data()};
}
harg in(const pcy_tensor& t) { return {{PCY_OP_ARG_TENSOR, PCY_INTENT_IN, &t, 0, 0}}; }
harg out(const pcy_tensor& t) { return {{PCY_OP_ARG_TENSOR, PCY_INTENT_OUT, &t, 0, 0}}; }
harg inout(const pcy_tensor& t) { return {{PCY_OP_ARG_TENSOR, PCY_INTENT_INOUT, &t, 0, 0}}; }

// The call must be refused: invalid argument (or unsupported), naming the op and the argument.
void expect_refused(pcy_error* e, const std::string& fw, const std::string& op,
                    const std::string& arg, const std::string& why) {
  INFO(fw << " nn." << op << ": expected the bundle to refuse argument " << arg << " (" << why
          << ")");
  REQUIRE(e != nullptr);
  const std::string msg = e->message ? e->message : "";
  const pcy_status code = e->code;
  e->destroy(e);
  INFO("message: " << msg);
  CHECK((code == PCY_ERR_INVALID_ARGUMENT || code == PCY_ERR_UNSUPPORTED));
  CHECK(msg.find(op) != std::string::npos);
  CHECK(msg.find("argument " + arg) != std::string::npos);
}
} // namespace

TEST_CASE("batch_norm: shapes, statistics, training, aliasing, unwritten tensors", "[nn]") {
  Backend& b = native();
  const nn::Shape xs{4, 3, 5};
  auto x = filled<float>(xs), y = filled<float>(xs), dy = filled<float>(xs), dx = filled<float>(xs);
  auto w = filled<float>({3}), bias = filled<float>({3}), w2 = filled<float>({2});
  auto rm = filled<float>({3}), rv = filled<float>({3}), sm = filled<float>({3}),
       sr = filled<float>({3}), dw = filled<float>({3}), db = filled<float>({3});
  auto x1 = filled<float>({1, 3}), y1 = filled<float>({1, 3}), flat = filled<float>({60});
  SharedTensor<float> none({0}), unwritten({3});
  SharedTensor<double> rmd({3});
  const auto y0 = snapshot(y), rm0 = snapshot(rm), rv0 = snapshot(rv), dx0 = snapshot(dx);
  invalid([&] { nn::batch_norm(b, flat, w, bias, rm, rv, flat, sm, sr, false); }, "batch_norm",
          {"argument x", "rank >= 2"});
  invalid([&] { nn::batch_norm(b, x1, w, bias, rm, rv, y1, sm, sr, true); }, "batch_norm",
          {"argument x", "more than 1 value per channel"});
  invalid([&] { nn::batch_norm(b, x, w2, bias, rm, rv, y, sm, sr, true); }, "batch_norm",
          {"argument weight", "one per channel"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rmd, rv, y, sm, sr, true); }, "batch_norm",
          {"argument running_mean", "f64", "f32"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, none, y, sm, sr, false); }, "batch_norm",
          {"argument running_var", "absent"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, rv, flat, sm, sr, true); }, "batch_norm",
          {"argument y", "[60]"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, sr, true, 1.5); }, "batch_norm",
          {"argument momentum"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, sr, true, 0.1, 0.0); }, "batch_norm",
          {"argument epsilon"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, rv, y, sm, rm, true); }, "batch_norm",
          {"running_mean", "same tensor"});
  invalid([&] { nn::batch_norm(b, x, w, bias, rm, rv, x, sm, sr, true); }, "batch_norm",
          {"same tensor"});
  expect_error([&] { nn::batch_norm(b, x, w, bias, unwritten, rv, y, sm, sr, true); },
               errc::uninitialized, "batch_norm", {"argument running_mean"});
  invalid([&] { nn::batch_norm_grad(b, x, w, sm, sr, dy, dx, w2, db, true); }, "batch_norm_grad",
          {"argument dweight", "or 0 (absent)"});
  invalid([&] { nn::batch_norm_grad(b, x, w, none, sr, dy, dx, dw, db, true); }, "batch_norm_grad",
          {"argument mean"});
  invalid([&] { nn::batch_norm_grad(b, x, w, sm, sr, dy, dy, dw, db, true); }, "batch_norm_grad",
          {"same tensor"});
  expect_error([&] { nn::batch_norm_grad(b, x, w, unwritten, sr, dy, dx, dw, db, true); },
               errc::uninitialized, "batch_norm_grad", {"argument mean"});
  CHECK(same(snapshot(y), y0));
  CHECK(same(snapshot(rm), rm0));
  CHECK(same(snapshot(rv), rv0));
  CHECK(same(snapshot(dx), dx0));
}

// A bundle's message built with sdk::str keeps every piece after a null C string (streaming a
// null char pointer is undefined; libstdc++ dropped the rest of the message).
TEST_CASE("sdk::str: a null C string reads (null) and the message goes on", "[nn]") {
  const char* none = nullptr;
  const unsigned char* bytes = nullptr;
  CHECK(sdk::str("algorithm ", 99, ": ", none, " (algorithms: ", "0 default", ")") ==
        "algorithm 99: (null) (algorithms: 0 default)");
  CHECK(sdk::str(bytes, " then ", std::string("more")) == "(null) then more");
  const char text[] = "array";
  CHECK(sdk::str(text, '!', 1.5) == "array!1.5");
}

TEST_CASE("each NN bundle re-checks its arguments: hostile values from any host are refused",
          "[nn]") {
  Registry& reg = Registry::global();
  int tested = 0;
  for (const char* name : {"native", "opencl", "cuda", "vulkan"}) {
    const Framework* fw = reg.find_framework(name);
    const BundleInfo* bundle = nullptr;
    for (const auto& b : reg.bundles())
      if (b->extension() == "nn" && b->framework() == name && !b->ops().empty()) bundle = b.get();
    if (fw == nullptr || fw->devices().empty() || bundle == nullptr) continue;
    INFO("framework " << name);
    ++tested;
    direct_bundle db(*fw, *bundle);
    const pcy_memory m1 = db.memory(), m2 = db.memory(), m3 = db.memory(), m4 = db.memory();
    tensor_maker tm;
    const int64_t big = int64_t{1} << 40, two31 = int64_t{1} << 31;
    // Each call: op, the argument it must name, why, and the arguments.
    struct hostile {
      const char* op;
      const char* arg;
      const char* why;
      std::vector<harg> args;
    };
    const auto& x4 = tm.make(m1, {4});
    const auto geometry = [&](std::vector<int64_t> stride, std::vector<int64_t> pad,
                              std::vector<int64_t> dil, int64_t groups) {
      return std::vector<harg>{a_arg(std::move(stride)), a_arg(std::move(pad)),
                               a_arg(std::move(dil)), i_arg(groups)};
    };
    const auto conv = [&](const pcy_tensor& x, const pcy_tensor& w, const pcy_tensor& y,
                          std::vector<harg> geom, int64_t algo, int64_t math) {
      std::vector<harg> a{in(x), in(w), out(y)};
      a.insert(a.end(), geom.begin(), geom.end());
      a.push_back(i_arg(algo));
      a.push_back(i_arg(math));
      return a;
    };
    // A valid convolution: x 1x1x4x4, w 2x1x3x3, y 1x2x2x2.
    const auto &cx = tm.make(m1, {1, 1, 4, 4}), &cw = tm.make(m2, {2, 1, 3, 3}),
               &cy = tm.make(m3, {1, 2, 2, 2});
    const auto g1 = geometry({1, 1}, {0, 0}, {1, 1}, 1);
    const auto pool = [&](const pcy_tensor& x, const pcy_tensor& y, std::vector<int64_t> win,
                          std::vector<int64_t> stride, std::vector<int64_t> pad) {
      return std::vector<harg>{in(x), out(y), a_arg(std::move(win)), a_arg(std::move(stride)),
                               a_arg(std::move(pad))};
    };
    const auto &px = tm.make(m1, {1, 2, 4, 4}), &py = tm.make(m2, {1, 2, 2, 2});
    const auto lrn = [&](const pcy_tensor& x, const pcy_tensor& y, int64_t n, double alpha,
                         double beta, double k) {
      return std::vector<harg>{in(x), out(y), i_arg(n), f_arg(alpha), f_arg(beta), f_arg(k)};
    };
    const auto &lx = tm.make(m1, {1, 4, 2, 2}), &ly = tm.make(m2, {1, 4, 2, 2});
    const auto &u8 = tm.make(m3, {4}, PCY_DTYPE_U8), &y4 = tm.make(m2, {4});
    const auto &i64_2 = tm.make(m4, {2}, PCY_DTYPE_I64), &i64_4 = tm.make(m4, {4}, PCY_DTYPE_I64);
    const auto algo_call = [&](int64_t dir, std::vector<int64_t> xs, std::vector<int64_t> ws,
                               std::vector<int64_t> stride, int64_t requested,
                               const pcy_tensor& result) {
      return std::vector<harg>{i_arg(dir),
                               a_arg(std::move(xs)),
                               a_arg(std::move(ws)),
                               a_arg(std::move(stride)),
                               a_arg({0, 0}),
                               a_arg({1, 1}),
                               i_arg(1),
                               i_arg(requested),
                               i_arg(0),
                               out(result)};
    };

    // cross_entropy: logits 2 x 2, i32 labels, a loss of 1 (mean), lse of 2.
    const auto &xl = tm.make(m1, {2, 2}), &xlab = tm.make(m4, {2}, PCY_DTYPE_I32),
               &xs1 = tm.make(m2, {1}), &xst = tm.make(m3, {2});
    const auto xent = [&](const pcy_tensor& lg, const pcy_tensor& lab, const pcy_tensor& loss,
                          const pcy_tensor& lse, int64_t red, double ls) {
      return std::vector<harg>{in(lg),      in(lab),   out(loss), out(lse),
                               i_arg(-100), f_arg(ls), i_arg(red)};
    };

    // embedding: weight 3 x 2, i32 indices of 2, y 2 x 2; embedding_grad's dy 2 x 2, dweight 3 x 2.
    const auto &ew = tm.make(m1, {3, 2}), &eidx = tm.make(m4, {2}, PCY_DTYPE_I32),
               &ey = tm.make(m2, {2, 2});
    const auto emb = [&](const pcy_tensor& w, const pcy_tensor& idx, const pcy_tensor& y,
                         int64_t pad) {
      return std::vector<harg>{in(w), in(idx), out(y), i_arg(pad)};
    };
    const auto emb_grad = [&](const pcy_tensor& idx, const pcy_tensor& dy, const pcy_tensor& dw,
                              int64_t pad) {
      return std::vector<harg>{in(idx), in(dy), out(dw), i_arg(pad)};
    };

    // batch_norm: x 2 x 3 x 2, weight, bias and statistics of 3.
    const auto &bx = tm.make(m1, {2, 3, 2}), &bw = tm.make(m2, {3}), &bs = tm.make(m3, {3}),
               &bs2 = tm.make(m4, {3}), &by = tm.make(m4, {2, 3, 2});
    const auto bn = [&](const pcy_tensor& x, const pcy_tensor& w, const pcy_tensor& rm,
                        const pcy_tensor& rv, const pcy_tensor& y, const pcy_tensor& sr,
                        int64_t training, double momentum, double eps) {
      return std::vector<harg>{in(x),           in(w),           in(w),     inout(rm),
                               inout(rv),       out(y),          out(bs2),  out(sr),
                               i_arg(training), f_arg(momentum), f_arg(eps)};
    };
    const auto bn_grad = [&](const pcy_tensor& mean, const pcy_tensor& dx, const pcy_tensor& dw,
                             int64_t training) {
      return std::vector<harg>{in(bx),  in(bw),  in(mean), in(bs),         in(by),
                               out(dx), out(dw), out(bs2), i_arg(training)};
    };

    std::vector<hostile> calls{
        {"batch_norm", "x", "rank 1",
         bn(tm.make(m1, {6}), bw, bs, bs, tm.make(m4, {6}), bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "x", "one value per channel in training",
         bn(tm.make(m1, {1, 3}), bw, bs, bs, tm.make(m4, {1, 3}), bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "x", "an empty batch in training",
         bn(tm.make(m1, {0, 3, 2}), bw, bs, bs, tm.make(m4, {0, 3, 2}), bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "weight", "weight of 2",
         bn(bx, tm.make(m2, {2}), bs, bs, by, bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "running_mean", "running_mean of 2",
         bn(bx, bw, tm.make(m3, {2}), bs, by, bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "running_var", "an f64 running_var",
         bn(bx, bw, bs, tm.make(m3, {3}, PCY_DTYPE_F64), by, bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "running_mean", "absent in evaluation",
         bn(bx, bw, tm.make(m3, {0}), bs, by, bs2, 0, 0.1, 1e-5)},
        {"batch_norm", "save_rstd", "save_rstd of 4",
         bn(bx, bw, bs, bs, by, tm.make(m4, {4}), 1, 0.1, 1e-5)},
        {"batch_norm", "y", "another shape", bn(bx, bw, bs, bs, tm.make(m4, {3, 2, 2}), bs2, 1, 0.1, 1e-5)},
        {"batch_norm", "training", "training 2", bn(bx, bw, bs, bs, by, bs2, 2, 0.1, 1e-5)},
        {"batch_norm", "momentum", "momentum 1.5", bn(bx, bw, bs, bs, by, bs2, 1, 1.5, 1e-5)},
        {"batch_norm", "momentum", "momentum NaN", bn(bx, bw, bs, bs, by, bs2, 1, std::nan(""), 1e-5)},
        {"batch_norm", "epsilon", "epsilon 0", bn(bx, bw, bs, bs, by, bs2, 0, 0.1, 0.0)},
        {"batch_norm", "epsilon", "epsilon inf", bn(bx, bw, bs, bs, by, bs2, 1, 0.1, HUGE_VAL)},
        {"batch_norm_grad", "mean", "mean of 0 (required)",
         bn_grad(tm.make(m3, {0}), tm.make(m4, {2, 3, 2}), tm.make(m2, {3}), 1)},
        {"batch_norm_grad", "dweight", "dweight of 2",
         bn_grad(bs, tm.make(m4, {2, 3, 2}), tm.make(m2, {2}), 1)},
        {"batch_norm_grad", "dx", "another shape",
         bn_grad(bs, tm.make(m4, {12}), tm.make(m2, {3}), 1)},
        {"batch_norm_grad", "training", "training -1",
         bn_grad(bs, tm.make(m4, {2, 3, 2}), tm.make(m2, {3}), -1)},
        {"relu", "x", "a negative extent", {in(tm.make(m1, {-1})), out(y4)}},
        {"relu", "x", "extents whose product overflows", {in(tm.make(m1, {big, big})), out(y4)}},
        {"relu", "y", "5 elements for 4", {in(x4), out(tm.make(m2, {5}))}},
        {"sigmoid_grad", "dx", "3 elements for 4", {in(x4), in(y4), out(tm.make(m3, {3}))}},
        {"elu", "alpha", "NaN", {in(x4), out(y4), f_arg(std::nan(""))}},
        {"softmax", "axis", "axis 1 of a 1-d tensor", {in(x4), out(y4), i_arg(1)}},
        {"softmax", "axis", "a negative axis", {in(x4), out(y4), i_arg(-1)}},
        {"log_softmax", "y", "another shape", {in(x4), out(tm.make(m2, {2, 2})), i_arg(0)}},
        {"convolution", "x", "rank 3", conv(tm.make(m1, {1, 4, 4}), cw, cy, g1, 0, 0)},
        {"convolution", "x", "a negative extent", conv(tm.make(m1, {1, 1, -4, 4}), cw, cy, g1, 0, 0)},
        {"convolution", "x", "extents that overflow",
         conv(tm.make(m1, {big, big, 1, 1}), cw, cy, g1, 0, 0)},
        {"convolution", "x", "an extent of 2^31", conv(tm.make(m1, {1, 1, two31, 1}), cw, cy, g1, 0, 0)},
        {"convolution", "groups", "3 groups of 1 channel",
         conv(cx, cw, cy, geometry({1, 1}, {0, 0}, {1, 1}, 3), 0, 0)},
        {"convolution", "groups", "0 groups", conv(cx, cw, cy, geometry({1, 1}, {0, 0}, {1, 1}, 0), 0, 0)},
        {"convolution", "stride", "3 values", conv(cx, cw, cy, geometry({1, 1, 1}, {0, 0}, {1, 1}, 1), 0, 0)},
        {"convolution", "stride", "stride 0", conv(cx, cw, cy, geometry({0, 1}, {0, 0}, {1, 1}, 1), 0, 0)},
        {"convolution", "padding", "negative padding",
         conv(cx, cw, cy, geometry({1, 1}, {-1, 0}, {1, 1}, 1), 0, 0)},
        {"convolution", "dilation", "1 value", conv(cx, cw, cy, geometry({1, 1}, {0, 0}, {1}, 1), 0, 0)},
        {"convolution", "stride", "a stride beyond 2^31",
         conv(cx, cw, cy, geometry({big, 1}, {0, 0}, {1, 1}, 1), 0, 0)},
        {"convolution", "w", "a filter wider than the input",
         conv(cx, tm.make(m2, {2, 1, 5, 5}), tm.make(m3, {1, 2, 1, 1}), g1, 0, 0)},
        {"convolution", "w", "channels per group", conv(cx, tm.make(m2, {2, 2, 3, 3}), cy, g1, 0, 0)},
        {"convolution", "y", "the wrong output shape", conv(cx, cw, tm.make(m3, {1, 2, 3, 3}), g1, 0, 0)},
        {"convolution", "algorithm", "algorithm -3", conv(cx, cw, cy, g1, -3, 0)},
        {"convolution", "math", "math 3", conv(cx, cw, cy, g1, 0, 3)},
        {"convolution_grad_data", "dx", "rank 3",
         {in(cw), in(cy), out(tm.make(m1, {1, 4, 4})), a_arg({1, 1}), a_arg({0, 0}),
          a_arg({1, 1}), i_arg(1), i_arg(0), i_arg(0)}},
        {"convolution_grad_filter", "dw", "rank 2",
         {in(cx), in(cy), out(tm.make(m2, {2, 9})), a_arg({1, 1}), a_arg({0, 0}), a_arg({1, 1}),
          i_arg(1), i_arg(0), i_arg(0)}},
        {"convolution_bias", "bias", "a bias of 3 for 2 channels",
         {inout(cy), in(tm.make(m1, {3}))}},
        {"convolution_grad_bias", "db", "a 2-d db", {in(cy), out(tm.make(m1, {2, 1}))}},
        {"convolution_algorithm", "direction", "direction 3",
         algo_call(3, {1, 1, 4, 4}, {2, 1, 3, 3}, {1, 1}, -2, i64_2)},
        {"convolution_algorithm", "requested", "requested -3",
         algo_call(0, {1, 1, 4, 4}, {2, 1, 3, 3}, {1, 1}, -3, i64_2)},
        {"convolution_algorithm", "x_shape", "3 values",
         algo_call(0, {1, 4, 4}, {2, 1, 3, 3}, {1, 1}, -2, i64_2)},
        {"convolution_algorithm", "x_shape", "a negative extent",
         algo_call(0, {1, 1, -4, 4}, {2, 1, 3, 3}, {1, 1}, -2, i64_2)},
        {"convolution_algorithm", "w_shape", "a filter extent 0",
         algo_call(0, {1, 1, 4, 4}, {2, 1, 0, 3}, {1, 1}, -2, i64_2)},
        {"convolution_algorithm", "stride", "stride 0",
         algo_call(0, {1, 1, 4, 4}, {2, 1, 3, 3}, {0, 1}, -2, i64_2)},
        {"convolution_algorithm", "result", "4 elements",
         algo_call(0, {1, 1, 4, 4}, {2, 1, 3, 3}, {1, 1}, -2, i64_4)},
        {"pooling_max", "x", "rank 3", pool(tm.make(m1, {2, 4, 4}), py, {2, 2}, {2, 2}, {0, 0})},
        {"pooling_max", "padding", "padding 2 for a window of 2",
         pool(px, tm.make(m2, {1, 2, 4, 4}), {2, 2}, {2, 2}, {2, 0})},
        {"pooling_max", "window", "a window that does not fit",
         pool(px, tm.make(m2, {1, 2, 1, 1}), {5, 2}, {1, 1}, {0, 0})},
        {"pooling_max", "window", "a pooled plane the geometry does not give",
         pool(px, tm.make(m2, {1, 2, 3, 3}), {2, 2}, {2, 2}, {0, 0})},
        {"pooling_max", "window", "1 value", pool(px, py, {2}, {2, 2}, {0, 0})},
        {"pooling_max", "stride", "stride -1", pool(px, py, {2, 2}, {-1, 2}, {0, 0})},
        {"pooling_max", "y", "another C", pool(px, tm.make(m2, {1, 3, 2, 2}), {2, 2}, {2, 2}, {0, 0})},
        {"pooling_avg", "include_padding", "include_padding 2",
         [&] {
           auto a = pool(px, py, {2, 2}, {2, 2}, {0, 0});
           a.push_back(i_arg(2));
           return a;
         }()},
        {"pooling_max_grad_indexed", "indices", "indices of another shape",
         {in(py), in(tm.make(m3, {1, 2, 2, 1}, PCY_DTYPE_I32)), out(tm.make(m4, {1, 2, 4, 4}))}},
        {"lrn", "x", "rank 2", lrn(tm.make(m1, {4, 4}), tm.make(m2, {4, 4}), 3, 1e-4, 0.75, 1)},
        {"lrn", "y", "another shape", lrn(lx, tm.make(m2, {1, 4, 4, 1}), 3, 1e-4, 0.75, 1)},
        {"lrn", "n", "n = 0", lrn(lx, ly, 0, 1e-4, 0.75, 1)},
        {"lrn", "n", "n = -3", lrn(lx, ly, -3, 1e-4, 0.75, 1)},
        {"lrn", "beta", "beta < 0", lrn(lx, ly, 3, 1e-4, -0.75, 1)},
        {"lrn", "k", "k = 0", lrn(lx, ly, 3, 1e-4, 0.75, 0)},
        {"lrn", "alpha", "alpha infinite", lrn(lx, ly, 3, HUGE_VAL, 0.75, 1)},
        {"dropout", "probability", "probability 2", {in(x4), out(y4), out(u8), f_arg(2.0), i_arg(1)}},
        {"dropout", "probability", "probability NaN",
         {in(x4), out(y4), out(u8), f_arg(std::nan("")), i_arg(1)}},
        {"dropout", "mask", "a mask of 3", {in(x4), out(y4), out(tm.make(m3, {3}, PCY_DTYPE_U8)),
                                             f_arg(0.5), i_arg(1)}},
        {"dropout", "mask", "an f32 mask", {in(x4), out(y4), out(tm.make(m3, {4})), f_arg(0.5), i_arg(1)}},
        {"dropout_grad", "probability", "probability -0.5",
         {in(x4), in(u8), out(y4), f_arg(-0.5)}},
        {"cross_entropy", "labels", "f32 labels", xent(xl, tm.make(m3, {2}), xs1, xst, 1, 0.0)},
        {"cross_entropy", "labels", "3 labels for 2 rows",
         xent(xl, tm.make(m3, {3}, PCY_DTYPE_I32), xs1, xst, 1, 0.0)},
        {"cross_entropy", "logits", "a scalar", xent(tm.make(m1, {}), xlab, xs1, xst, 1, 0.0)},
        {"cross_entropy", "loss", "2 elements for mean", xent(xl, xlab, xst, xst, 1, 0.0)},
        {"cross_entropy", "loss", "1 element for none", xent(xl, xlab, xs1, xst, 0, 0.0)},
        {"cross_entropy", "label_smoothing", "label_smoothing 2", xent(xl, xlab, xs1, xst, 1, 2.0)},
        {"cross_entropy", "label_smoothing", "label_smoothing NaN",
         xent(xl, xlab, xs1, xst, 1, std::nan(""))},
        {"cross_entropy", "reduction", "reduction 3", xent(xl, xlab, xs1, xst, 3, 0.0)},
        {"cross_entropy", "lse", "lse of 3", xent(xl, xlab, xs1, tm.make(m2, {3}), 1, 0.0)},
        {"cross_entropy", "lse", "an f64 lse",
         xent(xl, xlab, xs1, tm.make(m2, {2}, PCY_DTYPE_F64), 1, 0.0)},
        {"cross_entropy_grad", "lse", "lse of 0 (required)",
         {in(xl), in(xlab), in(tm.make(m2, {0})), in(xs1), out(tm.make(m3, {2, 2})), i_arg(-100),
          f_arg(0.0), i_arg(2)}},
        {"cross_entropy_grad", "dlogits", "another shape",
         {in(xl), in(xlab), in(xst), in(xs1), out(tm.make(m3, {4})), i_arg(-100), f_arg(0.0),
          i_arg(2)}},
        {"embedding", "weight", "rank 1", emb(tm.make(m1, {6}), eidx, ey, -1)},
        {"embedding", "weight", "a negative extent", emb(tm.make(m1, {-3, 2}), eidx, ey, -1)},
        {"embedding", "weight", "2^31 rows", emb(tm.make(m1, {int64_t{1} << 31, 0}), eidx, ey, -1)},
        {"embedding", "indices", "f32 indices", emb(ew, tm.make(m4, {2}), ey, -1)},
        {"embedding", "indices", "i64 indices", emb(ew, tm.make(m4, {2}, PCY_DTYPE_I64), ey, -1)},
        {"embedding", "indices", "2^31 indices",
         emb(ew, tm.make(m4, {int64_t{1} << 31}, PCY_DTYPE_I32), tm.make(m2, {int64_t{1} << 31, 2}),
             -1)},
        {"embedding", "y", "D 3", emb(ew, eidx, tm.make(m2, {2, 3}), -1)},
        {"embedding", "y", "flattened", emb(ew, eidx, tm.make(m2, {4}), -1)},
        {"embedding", "y", "3 rows for 2 indices", emb(ew, eidx, tm.make(m2, {3, 2}), -1)},
        {"embedding", "y", "a scalar", emb(ew, eidx, tm.make(m2, {}), -1)},
        {"embedding", "y", "f64", emb(ew, eidx, tm.make(m2, {2, 2}, PCY_DTYPE_F64), -1)},
        {"embedding", "padding_idx", "padding_idx V", emb(ew, eidx, ey, 3)},
        {"embedding", "padding_idx", "padding_idx -2", emb(ew, eidx, ey, -2)},
        {"embedding", "padding_idx", "padding_idx 2^40", emb(ew, eidx, ey, int64_t{1} << 40)},
        {"embedding_grad", "dweight", "rank 3", emb_grad(eidx, ey, tm.make(m3, {1, 3, 2}), -1)},
        {"embedding_grad", "dweight", "f64", emb_grad(eidx, ey, tm.make(m3, {3, 2}, PCY_DTYPE_F64), -1)},
        {"embedding_grad", "indices", "u8 indices",
         emb_grad(tm.make(m4, {2}, PCY_DTYPE_U8), ey, tm.make(m3, {3, 2}), -1)},
        {"embedding_grad", "dy", "D 3", emb_grad(eidx, tm.make(m2, {2, 3}), tm.make(m3, {3, 2}), -1)},
        {"embedding_grad", "dy", "a negative extent",
         emb_grad(eidx, tm.make(m2, {2, -2}), tm.make(m3, {3, 2}), -1)},
        {"embedding_grad", "padding_idx", "padding_idx V",
         emb_grad(eidx, ey, tm.make(m3, {3, 2}), 3)},
        {"cross_entropy_grad", "dloss", "1 element for none",
         {in(xl), in(xlab), in(xst), in(xs1), out(tm.make(m3, {2, 2})), i_arg(-100), f_arg(0.0),
          i_arg(0)}},
    };
    // An algorithm the bundle does not have: the message keeps the number, the reason and the
    // bundle's list of algorithms (a null C string streamed into it once cut it short after
    // "algorithm 99: ").
    for (const char* op : {"convolution", "convolution_algorithm"}) {
      if (!db.has(op)) continue;
      INFO(name << ": nn." << op << " with algorithm 99");
      pcy_error* e = std::string(op) == "convolution"
                         ? db.call(op, conv(cx, cw, cy, g1, 99, 0))
                         : db.call(op, algo_call(0, {1, 1, 4, 4}, {2, 1, 3, 3}, {1, 1}, 99, i64_2));
      REQUIRE(e != nullptr);
      const std::string msg = e->message ? e->message : "";
      e->destroy(e);
      INFO("message: " << msg);
      const size_t at = msg.find("99");
      REQUIRE(at != std::string::npos);
      CHECK(msg.find("(null)") == std::string::npos);
      // After the number: the reason, then the list, which names algorithm 0.
      CHECK(msg.find('0', at + 2) != std::string::npos);
      CHECK(msg.size() > at + 20);
    }
    for (const hostile& h : calls) {
      if (!db.has(h.op)) {
        WARN(name << ": nn." << h.op << " f32 is not registered; its hostile call is skipped");
        continue;
      }
      expect_refused(db.call(h.op, h.args), name, h.op, h.arg, h.why);
    }
    const std::vector<float> untouched = direct_bundle::initial();
    for (pcy_memory m : db.memories())
      CHECK(db.contents(m) == untouched);
    // The same bundle context serves a good call afterwards: relu of -32 .. -29 is 0.
    REQUIRE(db.has("relu"));
    pcy_error* ok = db.call("relu", {in(x4), out(y4)});
    CHECK(ok == nullptr);
    if (ok != nullptr) ok->destroy(ok);
    std::vector<float> want = untouched;
    for (int i = 0; i < 4; ++i)
      want[static_cast<size_t>(i)] = 0;
    CHECK(db.contents(m2) == want);
  }
  if (tested == 0) {
    WARN("no NN bundle with ops is present: nothing to call directly");
    return;
  }
  SUCCEED();
}
