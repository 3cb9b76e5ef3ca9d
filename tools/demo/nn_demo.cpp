// parenchyma-nn-demo: trains a small convolutional network on the 1,797 8x8 handwritten digits
// that scikit-learn ships (sklearn/datasets/data/digits.csv.gz), on every backend present or on
// the one named, through the public API only: the NN front-end (convolution, relu, max pooling,
// layer_norm, log_softmax and their gradients), BLAS (the dense layer) and the array extension (the
// cross-entropy loss as one fused reduction, the accuracy by argmax, the Adam step as one fused
// program per parameter). Every computation runs on the backend's device; the host uploads
// each mini-batch's images and labels and reads back one loss and two counts per epoch.
//
//   x [N,1,8,8] -> conv 1->8 3x3 pad 1 + bias -> relu -> max pool 2x2 -> conv 8->16 3x3 pad 1
//   + bias -> relu -> max pool 2x2 -> flatten [N,64] -> layer norm (64 scales and shifts) ->
//   dense 64->10 (gemm + bias) ->
//   log_softmax -> mean negative log-likelihood; Adam with a cosine learning-rate schedule.
//
// The initial weights (He, uniform) and the shuffling come from one seeded generator, so every
// backend trains the same network on the same batches; at the end the per-epoch loss curves of
// the backends are compared.
//
// --data-parallel (under mpirun -np N) trains on one backend across the N ranks instead: each
// rank runs the network on its shard of every global batch, the gradients (each rank's share of
// the global batch's mean) are summed over the ranks with the coll extension's all_reduce
// before each Adam step, so every rank takes the single-process step (docs/distributed.md,
// "Data-parallel training"; ctest nn_data_parallel_np2/_np3 compare the two curves).
//
// Exit status: 0 when every backend reached the accuracy bar and the curves agree; 1 when not
// (or a backend failed); 2 on bad usage or a malformed data file; 77 (skipped) when the data set
// is not installed, no backend serves the NN ops or (--data-parallel) no coll bundle is there.
#include <parenchyma/array.hpp>
#include <parenchyma/blas.hpp>
#include <parenchyma/coll.hpp>
#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace parenchyma;
namespace blas = parenchyma::blas;
namespace coll = parenchyma::coll;
namespace nn = parenchyma::nn;
namespace pa = parenchyma::array;

namespace {

constexpr int64_t side = 8, pixels = side * side, classes = 10;
constexpr double pi = 3.14159265358979323846;
constexpr int exit_fail = 1, exit_usage = 2, exit_skip = 77;

struct Options {
  std::string data, backend;
  int epochs = 20;
  int64_t batch = 32;
  double lr = 0.01; // Adam's step of the first epoch; a cosine schedule takes it towards 0
  uint64_t seed = 1;
  double min_accuracy = 0.95;
  // The largest relative difference of two backends' per-epoch mean training loss. Two f32 runs
  // that sum in different orders stay within ~1e-6 of each other (seed 1: native against PoCL
  // 3e-7, f32 against f64 4e-7) until a near-tie, a max-pooling window whose two largest values
  // differ by a rounding error or a relu input at 0, goes the other way; SGD then carries the
  // runs apart by up to a few 1e-3 while they learn the same (seed 4: 6e-3, in both
  // comparisons). A wrong gradient moves the curve by more: dropping the first layer's bias
  // gradient alone moves it by 5e-2.
  double tolerance = 1e-2;
  // Each direction's convolution algorithm (forward, grad_data, grad_filter): measured by
  // default; --algorithm pins them (a bundle's numbers, as parenchyma-conformance lists them).
  std::array<int64_t, 3> algorithm{nn::algorithm_auto, nn::algorithm_auto, nn::algorithm_auto};
  // Data-parallel training over the ranks of an MPI job (the coll extension): each rank trains
  // on its shard of every global batch and the gradients are summed over the ranks before each
  // step. One backend (native unless --backend); rank 0 prints.
  bool data_parallel = false;
  // Also print each epoch as one machine-readable line ("curve <backend> epoch=E loss=X ...").
  bool curve = false;
};

// A failure that ends the program with `code`.
struct Exit : std::runtime_error {
  int code;
  Exit(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};

// ---- the data set ----------------------------------------------------------------------------

struct Digits {
  std::string path;
  std::vector<float> x; // size() x 64 pixels, scaled to [0, 1]
  std::vector<int> y;   // labels 0..9
  size_t size() const noexcept { return y.size(); }
};

constexpr const char* digits_file = "sklearn/datasets/data/digits.csv.gz";

// Where scikit-learn may be installed: Debian's python3-sklearn, pip (system, user, virtual
// environment, conda). Each entry is a glob pattern for the directory above sklearn/.
std::vector<std::string> site_patterns() {
  std::vector<std::string> p = {
      "/usr/lib/python3/dist-packages",        "/usr/local/lib/python3*/dist-packages",
      "/usr/local/lib/python3*/site-packages", "/usr/lib/python3*/site-packages",
      "/usr/lib64/python3*/site-packages",     "/opt/conda/lib/python3*/site-packages"};
  for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(env); v && *v)
      p.push_back(std::string(v) + "/lib/python3*/site-packages");
  if (const char* home = std::getenv("HOME"); home && *home)
    p.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  return p;
}

// The data file: --data, then PARENCHYMA_DIGITS, then the standard places. An explicit path that
// does not exist is an error; nothing found in the standard places is a skip.
std::string find_digits(const std::string& option) {
  auto exists = [](const std::string& f) {
    std::FILE* fp = std::fopen(f.c_str(), "rb");
    if (fp) std::fclose(fp);
    return fp != nullptr;
  };
  auto explicit_path = [&](const std::string& f, const char* from) {
    if (!exists(f))
      throw Exit(exit_usage, std::string(from) + " names " + f + ": " + std::strerror(errno) +
                                 "; pass the path of scikit-learn's digits.csv.gz");
    return f;
  };
  if (!option.empty()) return explicit_path(option, "--data");
  if (const char* env = std::getenv("PARENCHYMA_DIGITS"); env && *env)
    return explicit_path(env, "PARENCHYMA_DIGITS");
  std::string searched;
  for (const std::string& dir : site_patterns()) {
    const std::string pattern = dir + "/" + digits_file;
    searched += "\n  " + pattern;
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
      std::string found = g.gl_pathv[0];
      globfree(&g);
      return found;
    }
    globfree(&g);
  }
  // Last, the scikit-learn that the python3 on PATH imports (a virtual environment that is not
  // activated, say): its package directory, asked of Python itself.
  searched += "\n  (the sklearn package of the python3 on PATH)";
  if (std::FILE* py =
          popen("python3 -c 'import os, sklearn; print(os.path.dirname(sklearn.__file__))' "
                "2>/dev/null",
                "r")) {
    char line[4096] = {};
    const bool got = std::fgets(line, sizeof line, py) != nullptr;
    pclose(py);
    std::string dir = got ? std::string(line) : std::string();
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r'))
      dir.pop_back();
    if (!dir.empty()) {
      const std::string f = dir + "/datasets/data/digits.csv.gz";
      if (exists(f)) return f;
    }
  }
  throw Exit(exit_skip, std::string("skipped: the digits data set (scikit-learn's ") + digits_file +
                            ") is not installed; install python3-sklearn (Debian, Ubuntu) or "
                            "scikit-learn (pip), or pass --data PATH or PARENCHYMA_DIGITS. "
                            "Searched:" +
                            searched);
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Exit(exit_usage, path + ": cannot open: " + std::strerror(errno));
  constexpr size_t limit = size_t{64} << 20; // the real file is 270 kB unpacked
  std::string text;
  std::vector<char> buf(1 << 16);
  int n = 0;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    text.append(buf.data(), static_cast<size_t>(n));
    if (text.size() > limit) {
      gzclose(f);
      throw Exit(exit_usage, path + ": more than 64 MiB of text; this is not the digits file");
    }
  }
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  const std::string why = msg ? msg : "unknown error";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw Exit(exit_usage, path + ": cannot read: " + why + " (a truncated or corrupt gzip file?)");
  return text;
}

// 65 comma-separated numbers a line: 64 pixels 0..16, then the label 0..9. Blank lines are
// skipped (as numpy.loadtxt, which scikit-learn reads the file with, does).
Digits parse_digits(const std::string& path, const std::string& text) {
  Digits d;
  d.path = path;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto bad = [&](const std::string& what) {
      return Exit(exit_usage, path + ":" + std::to_string(line_no) + ": " + what +
                                  "; every line must hold 65 comma-separated numbers (64 pixels "
                                  "0..16, then the label 0..9): is this scikit-learn's "
                                  "digits.csv.gz?");
    };
    float values[pixels + 1];
    size_t field = 0, start = 0;
    while (true) {
      size_t comma = line.find(',', start);
      std::string_view tok =
          line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
      while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t'))
        tok.remove_prefix(1);
      while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t'))
        tok.remove_suffix(1);
      if (field > static_cast<size_t>(pixels)) throw bad("more than 65 fields");
      double v = 0;
      const auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (tok.empty() || ec != std::errc() || ptr != tok.data() + tok.size() || !std::isfinite(v))
        throw bad("field " + std::to_string(field + 1) + " ('" + std::string(tok.substr(0, 20)) +
                  "') is not a number");
      if (field < static_cast<size_t>(pixels) && !(v >= 0 && v <= 16))
        throw bad("pixel " + std::to_string(field + 1) + " is " + std::string(tok) +
                  ", outside 0..16");
      if (field == static_cast<size_t>(pixels) && !(v >= 0 && v <= 9 && v == std::floor(v)))
        throw bad("the label (field 65) is " + std::string(tok) + ", not an integer 0..9");
      values[field++] = static_cast<float>(v);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (field != static_cast<size_t>(pixels) + 1) throw bad(std::to_string(field) + " fields");
    for (int64_t i = 0; i < pixels; ++i)
      d.x.push_back(values[i] / 16.0f);
    d.y.push_back(static_cast<int>(values[pixels]));
  }
  if (d.size() < 10)
    throw Exit(exit_usage, path + ": " + std::to_string(d.size()) +
                               " samples; the digits file has 1797 (too few to train on)");
  return d;
}

// ---- deterministic randomness (the same on every backend and machine) ------------------------

class Rng { // splitmix64
public:
  explicit Rng(uint64_t seed) noexcept : s_(seed) {}
  uint64_t next() noexcept {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)
  uint64_t below(uint64_t n) noexcept { // uniform in [0, n), without modulo bias
    const uint64_t reject = (0 - n) % n;
    uint64_t r = next();
    while (r < reject)
      r = next();
    return r % n;
  }

private:
  uint64_t s_;
};

// ---- the network -----------------------------------------------------------------------------

const nn::Shape w1_shape{8, 1, 3, 3}, w2_shape{16, 8, 3, 3};
constexpr int64_t hidden = 16 * 2 * 2; // the flattened features after the second pooling

struct HostParams {
  std::vector<float> w1, b1, w2, b2, w3, b3, lnw, lnb;
};

// He initialisation (uniform, bound sqrt(6 / fan_in)); biases zero.
HostParams init_params(uint64_t seed) {
  Rng r(seed);
  auto he = [&](size_t count, double fan_in) {
    std::vector<float> v(count);
    const double bound = std::sqrt(6.0 / fan_in);
    for (float& e : v)
      e = static_cast<float>((2 * r.uniform() - 1) * bound);
    return v;
  };
  HostParams p;
  p.w1 = he(8 * 1 * 3 * 3, 1 * 3 * 3);
  p.b1.assign(8, 0.0f);
  p.w2 = he(16 * 8 * 3 * 3, 8 * 3 * 3);
  p.b2.assign(16, 0.0f);
  p.w3 = he(classes * hidden, hidden);
  p.b3.assign(classes, 0.0f);
  p.lnw.assign(hidden, 1.0f); // layer norm: the identity scale and shift
  p.lnb.assign(hidden, 0.0f);
  return p;
}

void upload(SharedTensor<float>& t, const std::vector<float>& v) {
  std::span<float> dst = t.write_only();
  std::copy(v.begin(), v.end(), dst.begin());
}

// The trained parameters (and, with the same shapes, their gradients).
struct Params {
  SharedTensor<float> w1{8, 1, 3, 3}, b1{8}, w2{16, 8, 3, 3}, b2{16}, w3{classes, hidden},
      b3{1, classes}, lnw{hidden}, lnb{hidden};
  std::vector<SharedTensor<float>*> all() { return {&w1, &b1, &w2, &b2, &w3, &b3, &lnw, &lnb}; }
};

nn::ConvolutionParams conv_params(bool training, const std::array<int64_t, 3>& algorithm) {
  nn::ConvolutionParams p;
  p.padding = {1, 1};
  p.training = training;
  p.algorithm = algorithm;
  return p;
}

// Everything one batch size needs on a backend: the two convolutions configured for it and
// every activation and gradient tensor, made once.
class Pass {
public:
  Pass(const Backend& b, int64_t n, bool training, const std::array<int64_t, 3>& algorithm)
      : n_(n), c1_(b, {n, 1, side, side}, w1_shape, conv_params(training, algorithm)),
        c2_(b, {n, 8, side / 2, side / 2}, w2_shape, conv_params(training, algorithm)),
        x_(c1_.x_shape()), z1_(c1_.y_shape()), a1_(c1_.y_shape()), h1_(c2_.x_shape()),
        i1_(c2_.x_shape()), z2_(c2_.y_shape()), a2_(c2_.y_shape()), h2_(pooled_), i2_(pooled_),
        hn_(flat_), mean_({n}), rstd_({n}), dhn_(flat_), ones_({n, 1}), logits_({n, classes}),
        logp_({n, classes}), target_({n, classes}), labels_t_({n, 1}), dlogits_({n, classes}),
        dh2_(pooled_), da2_(c2_.y_shape()), dz2_(c2_.y_shape()), dh1_(c2_.x_shape()),
        da1_(c1_.y_shape()), dz1_(c1_.y_shape()) {
    std::span<float> one = ones_.write_only();
    std::fill(one.begin(), one.end(), 1.0f);
  }
  int64_t size() const noexcept { return n_; }
  bool training() const noexcept { return c1_.params().training; }
  // "fwd/data/filter" algorithm numbers of both convolutions, a '*' marking a transform (FFT,
  // Winograd) whose rounding differs most from the other backends'.
  std::string algorithms() const {
    std::string out;
    for (const nn::Convolution* c : {&c1_, &c2_}) {
      out += out.empty() ? "" : ", ";
      for (int d = 0; d < (training() ? 3 : 1); ++d) {
        const auto dir = static_cast<nn::direction>(d);
        out += (d ? "/" : "") + std::to_string(c->algorithm(dir)) +
               (c->numerics(dir) == nn::conv_numerics::transform ? "*" : "");
      }
    }
    return out;
  }

  // The batch: samples idx of d, and their labels (N x 1, i32).
  void load(const Digits& d, std::span<const uint32_t> idx) {
    std::span<float> x = x_.write_only();
    std::span<int32_t> l = labels_t_.write_only();
    for (size_t i = 0; i < idx.size(); ++i) {
      std::copy_n(d.x.begin() + static_cast<ptrdiff_t>(idx[i] * pixels), pixels,
                  x.begin() + static_cast<ptrdiff_t>(i * pixels));
      l[i] = d.y[idx[i]];
    }
  }

  void forward(const Backend& b, const Params& p) {
    c1_.forward(x_, p.w1, p.b1, z1_);
    nn::relu(b, z1_, a1_);
    nn::pooling_max(b, a1_, h1_, i1_, pool_);
    c2_.forward(h1_, p.w2, p.b2, z2_);
    nn::relu(b, z2_, a2_);
    h2_.reshape(pooled_);
    nn::pooling_max(b, a2_, h2_, i2_, pool_);
    h2_.reshape(flat_);
    // Each sample's features normalised (mean and rstd kept for the gradient).
    nn::layer_norm(b, h2_, p.lnw, p.lnb, hn_, mean_, rstd_, 1);
    // logits = 1 b3 + hn w3^T: the bias as a rank-1 product with a ones column.
    blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, ones_, p.b3, 0.0, logits_);
    blas::gemm(b, blas::no_trans, blas::trans, 1.0, hn_, p.w3, 1.0, logits_);
    nn::log_softmax(b, logits_, logp_, 1);
  }

  // Adds weight * (the global batch's mean loss) to loss_sum and computes every gradient into g:
  // the loaded samples' part of the mean over a global batch of `global_n` samples (global_n
  // is size() in one process; in data-parallel training the ranks' parts are then summed).
  void backward(const Backend& b, const Params& p, Params& g, int64_t global_n, double weight,
                pa::Array& loss_sum) {
    // The one-hot mask of the labels, lazily: class index (1 x 10) == label (N x 1).
    const pa::Array hot =
        pa::arange(b, 0, classes, 1, PCY_DTYPE_I32).reshape({1, classes}) == pa::wrap(b, labels_t_);
    const pa::Array logp = pa::wrap(b, logp_);
    // The loss: -sum(log p(label)) / N, one fused reduction, accumulated on the device.
    const double scale = -weight / static_cast<double>(global_n);
    loss_sum.assign(loss_sum + pa::sum(pa::where(hot, logp, 0.0f)) * scale);
    // The gradient of the mean negative log-likelihood with respect to log p: -1/N at the label
    // (N the global batch: every rank scales by it, so the ranks' sum is the global mean's).
    pa::wrap(b, target_)
        .assign(pa::where(hot, -1.0 / static_cast<double>(global_n), 0.0, PCY_DTYPE_F32));
    nn::log_softmax_grad(b, logp_, target_, dlogits_, 1);
    blas::gemm(b, blas::trans, blas::no_trans, 1.0, dlogits_, hn_, 0.0, g.w3); // dW = dL^T hn
    blas::gemv(b, blas::trans, 1.0, dlogits_, ones_, 0.0, g.b3);               // db = dL^T 1
    blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, dlogits_, p.w3, 0.0, dhn_); // dhn = dL W
    dh2_.reshape(flat_);
    nn::layer_norm_grad(b, h2_, p.lnw, mean_, rstd_, dhn_, dh2_, g.lnw, g.lnb, 1);
    dh2_.reshape(pooled_);
    nn::pooling_max_grad(b, dh2_, i2_, da2_);
    nn::relu_grad(b, a2_, da2_, dz2_);
    c2_.grad_filter(h1_, dz2_, g.w2);
    c2_.grad_bias(dz2_, g.b2);
    c2_.grad_data(p.w2, dz2_, dh1_);
    nn::pooling_max_grad(b, dh1_, i1_, da1_);
    nn::relu_grad(b, a1_, da1_, dz1_);
    c1_.grad_filter(x_, dz1_, g.w1);
    c1_.grad_bias(dz1_, g.b1);
  }

  // Adds the number of samples of the loaded batch the network classified right to `right`
  // (argmax on the device; nothing is read back).
  void count_correct(const Backend& b, pa::Array& right) {
    const pa::Array guess = pa::argmax(pa::wrap(b, logp_), int64_t{1}, true); // N x 1, i64
    right.assign(right + pa::sum(guess == pa::wrap(b, labels_t_)));
  }

private:
  int64_t n_;
  std::vector<int64_t> pooled_{n_, 16, 2, 2}, flat_{n_, hidden};
  nn::PoolingParams pool_{};
  nn::Convolution c1_, c2_;
  SharedTensor<float> x_, z1_, a1_, h1_;
  SharedTensor<int32_t> i1_;
  SharedTensor<float> z2_, a2_, h2_;
  SharedTensor<int32_t> i2_;
  SharedTensor<float> hn_, mean_, rstd_, dhn_;
  SharedTensor<float> ones_, logits_, logp_, target_;
  SharedTensor<int32_t> labels_t_;
  SharedTensor<float> dlogits_, dh2_, da2_, dz2_, dh1_, da1_, dz1_;
};

// One Adam step (Kingma and Ba) on p with the gradients g (moments m, v; step t from 1), one
// fused program per parameter: m, v and the parameter written in one pass (assign_all), the bias
// corrections folded into the step size.
void adam_step(const Backend& b, Params& p, Params& g, Params& m, Params& v, int64_t t, double lr) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const double step = lr * std::sqrt(1 - std::pow(b2, static_cast<double>(t))) /
                      (1 - std::pow(b1, static_cast<double>(t)));
  const std::vector<SharedTensor<float>*> ps = p.all(), gs = g.all(), ms = m.all(), vs = v.all();
  for (size_t i = 0; i < ps.size(); ++i) {
    pa::Array pa_ = pa::wrap(b, *ps[i]), gi = pa::wrap(b, *gs[i]);
    pa::Array mi = pa::wrap(b, *ms[i]), vi = pa::wrap(b, *vs[i]);
    const pa::Array m_new = mi * b1 + gi * (1 - b1);
    const pa::Array v_new = vi * b2 + pa::square(gi) * (1 - b2);
    pa::assign_all({mi, vi, pa_}, {m_new, v_new, pa_ - m_new * step / (pa::sqrt(v_new) + eps)});
  }
}

// ---- training on one backend -----------------------------------------------------------------

struct Run {
  std::string backend;
  std::vector<double> loss, train_acc, test_acc;
  double seconds = 0;
  uint64_t fallbacks = 0;
  bool ranks_in_step = true; // data-parallel: every rank ended with the same parameters
};

struct Split {
  std::vector<uint32_t> train, test;
};

// Where the ops the network uses run; throws when one has nowhere to run.
void print_routes(const Backend& b) {
  struct Op {
    const char* name;
    const OpKey& key;
  };
  const Op ops[] = {
      {"convolution", ext::op_key<pcy_nn_convolution_schema>(PCY_DTYPE_F32)},
      {"convolution_grad_data", ext::op_key<pcy_nn_convolution_grad_data_schema>(PCY_DTYPE_F32)},
      {"convolution_grad_filter",
       ext::op_key<pcy_nn_convolution_grad_filter_schema>(PCY_DTYPE_F32)},
      {"convolution_bias", ext::op_key<pcy_nn_convolution_bias_schema>(PCY_DTYPE_F32)},
      {"convolution_grad_bias", ext::op_key<pcy_nn_convolution_grad_bias_schema>(PCY_DTYPE_F32)},
      {"relu", ext::op_key<pcy_nn_relu_schema>(PCY_DTYPE_F32)},
      {"relu_grad", ext::op_key<pcy_nn_relu_grad_schema>(PCY_DTYPE_F32)},
      {"pooling_max_indexed", ext::op_key<pcy_nn_pooling_max_indexed_schema>(PCY_DTYPE_F32)},
      {"pooling_max_grad_indexed",
       ext::op_key<pcy_nn_pooling_max_grad_indexed_schema>(PCY_DTYPE_F32)},
      {"layer_norm", ext::op_key<pcy_nn_layer_norm_schema>(PCY_DTYPE_F32)},
      {"layer_norm_grad", ext::op_key<pcy_nn_layer_norm_grad_schema>(PCY_DTYPE_F32)},
      {"log_softmax", ext::op_key<pcy_nn_log_softmax_schema>(PCY_DTYPE_F32)},
      {"log_softmax_grad", ext::op_key<pcy_nn_log_softmax_grad_schema>(PCY_DTYPE_F32)},
      {"gemm", blas::detail::gemm_key(PCY_DTYPE_F32)},
      {"gemv", blas::detail::gemv_key(PCY_DTYPE_F32)},
      {"array (fused f32)", ext::op_key<pcy_array_eval_3_schema>(PCY_DTYPE_F32)},
      {"array (reduce)", ext::op_key<pcy_array_reduce_2_schema>(PCY_DTYPE_F32)},
  };
  for (const Op& op : ops) {
    const OpRoute r = b.route(op.key);
    std::printf("  %-25s %s: %s%s\n", op.name, r.framework.c_str(), r.implementation.c_str(),
                r.fallback ? " (fallback)" : "");
  }
}

// Rank `rank`'s part [first, first + count) of a global batch of n samples split over `ranks`
// ranks: contiguous, sizes differing by at most one (a part may be empty when n < ranks).
struct Shard {
  int64_t first, count;
};
Shard shard_of(int64_t n, int rank, int ranks) {
  const int64_t lo = n * rank / ranks, hi = n * (rank + 1) / ranks;
  return {lo, hi - lo};
}

Run train(const std::string& request, const Digits& d, const Split& split, const Options& o,
          const HostParams& init) {
  Backend b(request);
  Run run;
  run.backend = b.name();
  std::printf("\n== %s (%s) ==\n", b.name().c_str(), b.device().name.c_str());
  print_routes(b);
  // Data-parallel: the ranks of MPI_COMM_WORLD, on this backend (collective: every rank).
  std::optional<coll::Communicator> comm;
  if (o.data_parallel) {
    comm.emplace(b);
    const OpRoute r = b.route(ext::op_key<pcy_coll_all_reduce_inplace_schema>(PCY_DTYPE_F32));
    std::printf("  %-25s %s: %s%s\n", "all_reduce (coll)", r.framework.c_str(),
                r.implementation.c_str(), r.fallback ? " (fallback)" : "");
  }
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;

  const auto t_setup = std::chrono::steady_clock::now();
  Params p, g, m, v;
  for (SharedTensor<float>* t : m.all())
    pa::wrap(b, *t).assign(0.0);
  for (SharedTensor<float>* t : v.all())
    pa::wrap(b, *t).assign(0.0);
  upload(p.w1, init.w1);
  upload(p.b1, init.b1);
  upload(p.w2, init.w2);
  upload(p.b2, init.b2);
  upload(p.w3, init.w3);
  upload(p.b3, init.b3);
  upload(p.lnw, init.lnw);
  upload(p.lnb, init.lnb);
  // Every rank starts from rank 0's weights (the same seed gives the same ones; the broadcast
  // is what a program whose ranks draw their own would need).
  if (comm)
    for (SharedTensor<float>* t : p.all())
      comm->broadcast(*t, 0);
  pa::Array loss_sum = pa::zeros(b, {}, PCY_DTYPE_F32);
  pa::Array right_train = pa::zeros(b, {}, PCY_DTYPE_I64),
            right_test = pa::zeros(b, {}, PCY_DTYPE_I64);
  int64_t step = 0;

  // One Pass per batch size: the full batch, and the last partial batch of each split.
  std::vector<std::unique_ptr<Pass>> passes;
  auto pass_for = [&](int64_t n, bool training) -> Pass& {
    for (auto& ps : passes)
      if (ps->size() == n && (ps->training() || !training)) return *ps;
    passes.push_back(std::make_unique<Pass>(b, n, training, o.algorithm));
    return *passes.back();
  };
  const int64_t n_train = static_cast<int64_t>(split.train.size());
  const int64_t n_test = static_cast<int64_t>(split.test.size());
  // This rank's part of each batch size (a data-parallel rank sees its shards only).
  auto local = [&](int64_t n) { return shard_of(n, rank, ranks).count; };
  for (const auto& [n, training] :
       {std::pair{std::min(o.batch, n_train), true}, std::pair{n_train % o.batch, true},
        std::pair{std::min(o.batch, n_test), false}, std::pair{n_test % o.batch, false}})
    if (local(n) > 0) (void)pass_for(local(n), training);
  b.synchronize();
  std::printf("  set-up %.3f s (convolution algorithms chosen for %zu batch sizes)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count(),
              passes.size());
  for (const auto& ps : passes)
    std::printf("    batch %3lld%s: convolution algorithms (fwd/data/filter) %s\n",
                static_cast<long long>(ps->size()), ps->training() ? "" : " (held-out)",
                ps->algorithms().c_str());
  std::printf("  epoch       loss   train  held-out    time\n");

  Rng shuffle(o.seed ^ 0x5DEECE66Dull);
  std::vector<uint32_t> order = split.train;
  const auto t_start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = order.size() - 1; i > 0; --i) // Fisher-Yates
      std::swap(order[i], order[shuffle.below(i + 1)]);
    // Cosine decay (SGDR without restarts): the later epochs settle instead of jumping around.
    const double lr = o.lr * 0.5 * (1 + std::cos(pi * (epoch - 1) / o.epochs));
    loss_sum.assign(0.0);
    right_train.assign(0.0);
    right_test.assign(0.0);
    for (int64_t at = 0; at < n_train; at += o.batch) {
      // The global batch: n samples; this rank's shard of it (all of it in one process).
      const int64_t n = std::min(o.batch, n_train - at);
      const Shard sh = shard_of(n, rank, ranks);
      if (sh.count > 0) {
        Pass& ps = pass_for(sh.count, true);
        ps.load(d, std::span<const uint32_t>(order).subspan(static_cast<size_t>(at + sh.first),
                                                            static_cast<size_t>(sh.count)));
        ps.forward(b, p);
        ps.count_correct(b, right_train); // the forward's prediction, before the step
        ps.backward(b, p, g, n, static_cast<double>(n) / static_cast<double>(n_train), loss_sum);
      } else {
        for (SharedTensor<float>* t : g.all()) // an empty shard adds nothing to the sum
          pa::wrap(b, *t).assign(0.0);
      }
      // Each rank's gradients are its shard's part of the global batch's mean (scaled by 1/n,
      // n the global batch): their sum over the ranks is the single-process gradient. Every
      // rank then takes the same Adam step.
      if (comm)
        for (SharedTensor<float>* t : g.all())
          comm->all_reduce(*t, coll::reduce_op::sum);
      adam_step(b, p, g, m, v, ++step, lr);
    }
    for (int64_t at = 0; at < n_test; at += o.batch) {
      const int64_t n = std::min(o.batch, n_test - at);
      const Shard sh = shard_of(n, rank, ranks);
      if (sh.count == 0) continue;
      Pass& ps = pass_for(sh.count, false);
      ps.load(d, std::span<const uint32_t>(split.test)
                     .subspan(static_cast<size_t>(at + sh.first), static_cast<size_t>(sh.count)));
      ps.forward(b, p);
      ps.count_correct(b, right_test);
    }
    // The ranks' partial sums: the epoch's loss and counts over the whole data set.
    if (comm)
      for (pa::Array* a : {&loss_sum, &right_train, &right_test})
        comm->all_reduce(a->storage(), coll::reduce_op::sum);
    // The epoch's three numbers: the only values read back.
    const double loss = loss_sum.item<float>();
    const int64_t right = right_train.item<int64_t>(), test_right = right_test.item<int64_t>();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.loss.push_back(loss);
    run.train_acc.push_back(static_cast<double>(right) / static_cast<double>(n_train));
    run.test_acc.push_back(static_cast<double>(test_right) / static_cast<double>(n_test));
    std::printf("  %5d  %9.6f  %5.1f %%  %5.1f %%  %5.2f s\n", epoch, loss,
                100 * run.train_acc.back(), 100 * run.test_acc.back(), secs);
    if (o.curve) // machine-readable (tests/coll/nn_data_parallel.sh compares these lines)
      std::printf("curve %s epoch=%d loss=%.9e train_right=%lld test_right=%lld\n",
                  run.backend.c_str(), epoch, loss, static_cast<long long>(right),
                  static_cast<long long>(test_right));
    std::fflush(stdout);
    if (!std::isfinite(loss)) {
      std::printf("  the loss diverged (try a smaller --lr)\n");
      break;
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  run.fallbacks = b.fallback_count();
  if (comm) {
    // Every rank took the same steps from the same all-reduced gradients, so the parameters must
    // be the same bits everywhere: their maximum and minimum over the ranks equal this rank's.
    for (SharedTensor<float>* t : p.all()) {
      SharedTensor<float> hi(t->shape()), lo(t->shape());
      comm->all_reduce(*t, hi, coll::reduce_op::max);
      comm->all_reduce(*t, lo, coll::reduce_op::min);
      const std::span<const float> mine = t->read(), h = hi.read(), l = lo.read();
      run.ranks_in_step = run.ranks_in_step &&
                          std::memcmp(mine.data(), h.data(), mine.size_bytes()) == 0 &&
                          std::memcmp(mine.data(), l.data(), mine.size_bytes()) == 0;
    }
    std::printf("  ranks in step: the parameters are %s on all %d ranks\n",
                run.ranks_in_step ? "bit for bit the same" : "NOT the same", ranks);
  }
  if (run.fallbacks)
    std::printf("  note: %llu op calls ran on another framework (fallback)\n",
                static_cast<unsigned long long>(run.fallbacks));
  return run;
}

// ---- command line ----------------------------------------------------------------------------

int usage(const char* argv0, int rc) {
  std::printf(
      "usage: %s [options]\n"
      "  Trains a small CNN (conv-relu-pool x2, layer_norm, dense, log_softmax) on scikit-learn's "
      "8x8\n"
      "  digits on every backend present, or on one, then compares the loss curves.\n"
      "  --backend NAME     train only there (native, opencl, cuda:1, ...)\n"
      "  --data PATH        digits.csv.gz (default: PARENCHYMA_DIGITS, then scikit-learn's\n"
      "                     usual install places)\n"
      "  --epochs N         default 20\n"
      "  --batch N          mini-batch size, default 32\n"
      "  --lr X             Adam step size of the first epoch (cosine decay), default 0.01\n"
      "  --seed N           initial weights and shuffling, default 1\n"
      "  --min-accuracy X   held-out accuracy every backend must reach, default 0.95\n"
      "  --algorithm F,D,W  the convolutions' algorithms (forward, grad_data, grad_filter):\n"
      "                     auto (measured, the default), heuristic, or a bundle's number\n"
      "  --tolerance X      largest relative difference of two backends' epoch losses,\n"
      "                     default 1e-2 (a near-tie that rounds the other way moves the\n"
      "                     curves apart by up to a few 1e-3; otherwise they agree to 1e-6)\n"
      "  --data-parallel    train across the ranks of an MPI job (start with mpirun -np N):\n"
      "                     each rank takes its shard of every global batch (--batch), the\n"
      "                     gradients are summed over the ranks (coll all_reduce) before each\n"
      "                     step; one backend (native unless --backend); rank 0 prints\n"
      "  --curve            print each epoch also as a line 'curve <backend> epoch=E loss=X\n"
      "                     train_right=N test_right=N' (loss with 10 significant digits)\n"
      "  exit: 0 ok, 1 accuracy or curves off (or a backend failed), 2 usage or bad data,\n"
      "  77 skipped (no data set, or no backend serves the NN ops)\n",
      argv0);
  return rc;
}

template <class T> bool parse_number(const char* s, T& out) {
  const char* end = s + std::strlen(s);
  const auto [ptr, ec] = std::from_chars(s, end, out);
  return *s && ec == std::errc() && ptr == end;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") throw Exit(usage(argv[0], 0), "");
    if (a == "--data-parallel" || a == "--curve") { // flags without a value
      (a == "--curve" ? o.curve : o.data_parallel) = true;
      continue;
    }
    static const char* const known[] = {"--backend",   "--data", "--epochs",
                                        "--batch",     "--lr",   "--min-accuracy",
                                        "--tolerance", "--seed", "--algorithm"};
    if (std::find(std::begin(known), std::end(known), a) == std::end(known))
      throw Exit(exit_usage, "unknown argument: " + a + " (see --help)");
    if (i + 1 >= argc) throw Exit(exit_usage, a + ": a value is missing");
    const char* v = argv[++i];
    auto bad = [&](const char* want) {
      return Exit(exit_usage, a + ": '" + v + "' is not " + want);
    };
    if (a == "--backend") {
      o.backend = v;
    } else if (a == "--data") {
      o.data = v;
    } else if (a == "--epochs") {
      if (!parse_number(v, o.epochs) || o.epochs < 1 || o.epochs > 10000)
        throw bad("an epoch count in 1..10000");
    } else if (a == "--batch") {
      if (!parse_number(v, o.batch) || o.batch < 1 || o.batch > 4096)
        throw bad("a batch size in 1..4096");
    } else if (a == "--lr") {
      if (!parse_number(v, o.lr) || !(o.lr > 0 && o.lr < 100)) throw bad("a rate in (0, 100)");
    } else if (a == "--seed") {
      if (!parse_number(v, o.seed)) throw bad("an unsigned 64-bit integer");
    } else if (a == "--algorithm") {
      std::string_view rest(v);
      for (int d = 0; d < 3; ++d) {
        const size_t comma = rest.find(',');
        if ((comma == std::string_view::npos) != (d == 2))
          throw bad("three comma-separated algorithms (forward,grad_data,grad_filter)");
        const std::string one(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        int64_t& out = o.algorithm[static_cast<size_t>(d)];
        if (one == "auto")
          out = nn::algorithm_auto;
        else if (one == "heuristic")
          out = nn::algorithm_heuristic;
        else if (!parse_number(one.c_str(), out) || out < 0)
          throw bad("three algorithms, each auto, heuristic or a number >= 0");
      }
    } else if (a == "--min-accuracy") {
      if (!parse_number(v, o.min_accuracy) || !(o.min_accuracy >= 0 && o.min_accuracy <= 1))
        throw bad("a fraction in [0, 1]");
    } else if (!parse_number(v, o.tolerance) || !(o.tolerance >= 0)) { // --tolerance
      throw bad("a number >= 0");
    }
  }
  return o;
}

// The backends to train on: the one asked for, or the first device of every framework with a
// device, in ranking order.
std::vector<std::string> backends_to_run(const Options& o) {
  if (!o.backend.empty()) return {o.backend};
  if (o.data_parallel) return {"native"};
  std::vector<std::string> out;
  for (const Framework* f : Registry::global().ranking())
    out.push_back(f->name());
  if (out.empty())
    throw Exit(exit_skip, "skipped: no framework with a device was found (parenchyma-info "
                          "says why)");
  return out;
}

// Whether b can run the network: every op has somewhere to run (its framework, or a fallback the
// policy allows). Empty when it can, else the reason.
std::string cannot_run(const std::string& request) {
  try {
    Backend b(request);
    for (const OpKey* k : {&ext::op_key<pcy_nn_convolution_schema>(PCY_DTYPE_F32),
                           &ext::op_key<pcy_nn_pooling_max_indexed_schema>(PCY_DTYPE_F32),
                           &ext::op_key<pcy_nn_log_softmax_schema>(PCY_DTYPE_F32),
                           &blas::detail::gemm_key(PCY_DTYPE_F32)})
      (void)b.route(*k);
    return {};
  } catch (const parenchyma::error& e) {
    if (e.code() == errc::unsupported || e.code() == errc::not_found) return e.what();
    throw;
  }
}

} // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_args(argc, argv);
    // Data-parallel: join the MPI job first (every rank), then only rank 0 prints; errors still
    // go to stderr on every rank.
    int ranks = 1;
    if (o.data_parallel) {
      try {
        const coll::Communicator world(Backend("native"));
        ranks = world.size();
        if (world.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
          throw Exit(exit_fail, "cannot silence rank " + std::to_string(world.rank()) +
                                    "'s output: " + std::strerror(errno));
      } catch (const parenchyma::error& e) {
        if (e.code() == errc::unsupported || e.code() == errc::not_found)
          throw Exit(exit_skip, std::string("skipped: --data-parallel needs the coll extension's "
                                            "native bundle (MPI): ") +
                                    e.what());
        throw;
      }
    }
    const std::string path = find_digits(o.data);
    const Digits d = parse_digits(path, gunzip(path));

    // The held-out fifth: every fifth sample (the file cycles through the classes, so each
    // class is represented), the same whatever the seed.
    Split split;
    for (size_t i = 0; i < d.size(); ++i)
      (i % 5 == 4 ? split.test : split.train).push_back(static_cast<uint32_t>(i));
    std::printf("data:      %zu digits from %s: %zu to train on, %zu held out\n", d.size(),
                path.c_str(), split.train.size(), split.test.size());
    std::printf("network:   conv 1->8 3x3 - relu - maxpool 2 - conv 8->16 3x3 - relu - maxpool 2 "
                "- layer_norm 64 - dense 64->10 - log_softmax (f32)\n");
    std::printf("training:  %d epochs, batch %lld, Adam lr %g (cosine decay), seed %llu\n",
                o.epochs, static_cast<long long>(o.batch), o.lr,
                static_cast<unsigned long long>(o.seed));
    if (o.data_parallel)
      std::printf("parallel:  data-parallel over %d MPI ranks: each takes its shard of every "
                  "global batch of %lld; gradients summed over the ranks before each step\n",
                  ranks, static_cast<long long>(o.batch));

    std::vector<std::string> requests;
    std::string skipped;
    for (const std::string& r : backends_to_run(o)) {
      const std::string why = cannot_run(r);
      if (why.empty())
        requests.push_back(r);
      else
        skipped += "\n  " + r + ": " + why;
    }
    if (!skipped.empty()) std::printf("not trained on:%s\n", skipped.c_str());
    if (requests.empty())
      throw Exit(exit_skip, "skipped: no backend can run the network's ops (is an nn bundle "
                            "plugin installed? parenchyma-info --ops lists them)");

    const HostParams init = init_params(o.seed);
    std::vector<Run> runs;
    bool failed = false;
    for (const std::string& r : requests) {
      try {
        runs.push_back(train(r, d, split, o, init));
      } catch (const parenchyma::error& e) {
        std::fprintf(stderr, "parenchyma-nn-demo: %s: %s\n", r.c_str(), e.what());
        failed = true;
      }
    }

    // The comparison: every curve against the reference (native where it ran, else the first).
    size_t ref = 0;
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i].backend.rfind("native", 0) == 0) {
        ref = i;
        break;
      }
    std::printf("\n== summary (%d epochs) ==\n", o.epochs);
    std::printf("  %-12s %10s %8s %9s %9s  %s\n", "backend", "last loss", "train", "held-out",
                "time", runs.empty() ? "" : ("max rel. loss diff vs " + runs[ref].backend).c_str());
    bool accurate = true, agree = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      double worst = 0;
      int worst_epoch = 0;
      if (r.loss.size() != runs[ref].loss.size()) worst = std::numeric_limits<double>::infinity();
      for (size_t e = 0; e < std::min(r.loss.size(), runs[ref].loss.size()); ++e) {
        const double a = r.loss[e], x = runs[ref].loss[e];
        const double rel = std::fabs(a - x) / std::max(std::fabs(x), 1e-30);
        if (rel > worst || std::isnan(rel)) {
          worst = std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel;
          worst_epoch = static_cast<int>(e) + 1;
        }
      }
      const bool ok_acc = r.test_acc.back() >= o.min_accuracy;
      const bool ok_curve = worst <= o.tolerance;
      accurate = accurate && ok_acc;
      agree = agree && ok_curve;
      char diff[96];
      if (i == ref)
        std::snprintf(diff, sizeof diff, "(reference)");
      else if (worst == 0)
        std::snprintf(diff, sizeof diff, "0 (identical)");
      else
        std::snprintf(diff, sizeof diff, "%.2e (epoch %d)%s", worst, worst_epoch,
                      ok_curve ? "" : "  > tolerance");
      std::printf("  %-12s %10.5f %6.1f %% %7.1f %% %7.2f s  %s%s\n", r.backend.c_str(),
                  r.loss.back(), 100 * r.train_acc.back(), 100 * r.test_acc.back(), r.seconds, diff,
                  ok_acc ? "" : "  (accuracy below the bar)");
    }
    std::printf("check:     held-out accuracy >= %.1f %%: %s; loss curves within %.0e relative: "
                "%s\n",
                100 * o.min_accuracy, accurate ? "yes" : "NO", o.tolerance,
                runs.size() < 2 ? "only one backend"
                : agree         ? "yes"
                                : "NO");
    if (failed) std::printf("check:     FAILED: a backend failed (see above)\n");
    const bool in_step =
        std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.ranks_in_step; });
    if (o.data_parallel)
      std::printf("check:     every rank ended with the same parameters: %s\n",
                  in_step ? "yes" : "NO");
    return failed || !accurate || !agree || !in_step || runs.empty() ? exit_fail : 0;
  } catch (const Exit& e) {
    if (e.code == exit_skip)
      std::printf("%s\n", e.what());
    else if (*e.what())
      std::fprintf(stderr, "parenchyma-nn-demo: %s\n", e.what());
    return e.code;
  } catch (const parenchyma::error& e) {
    std::fprintf(stderr, "parenchyma-nn-demo: %s\n", e.what());
    return exit_fail;
  }
}
