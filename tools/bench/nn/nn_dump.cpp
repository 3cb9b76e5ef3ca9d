// nn_dump: runs every NN op family through the front-end (parenchyma/nn.hpp) on one backend, on
// inputs it generates from a seed, and writes inputs and outputs as raw little-endian files plus
// a manifest, so tools/bench/nn/torch_check.py can compare each output with PyTorch on the same
// inputs.
//   nn_dump --out DIR [--backend NAME] [--seed N]
// DIR/manifest.json lists the cases: {"name", "op", "params", "tensors": {arg: {"file", "dtype",
// "shape"}}}; tensors are f32 (data), i32 (indices) or u8 (masks). Exit 0 when every case ran,
// 1 when one failed (the error is printed), 2 on bad usage, 77 when the backend is absent.
#include "demo_step.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;

namespace {

// A deterministic generator (splitmix64): uniform floats in [lo, hi).
struct gen {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(static_cast<double>(next() >> 40) / 16777216.0);
  }
};

std::string shape_json(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i)
    o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

class dumper {
public:
  dumper(std::string dir, const Backend& b, uint64_t seed)
      : dir_(std::move(dir)), b_(b), seed_(seed) {}
  const Backend& b() const { return b_; }

  // One case: `run` fills the tensors; every tensor added with in/out is written afterwards.
  void begin(const std::string& name, const std::string& op, const std::string& params) {
    name_ = name;
    op_ = op;
    params_ = params;
    tensors_.clear();
    g_ = gen{seed_ ^ (0xD1B54A32D192ED03ull * (++index_))};
  }
  SharedTensor<float> input(const char* /*arg*/, std::vector<int64_t> shape, float lo = -1,
                            float hi = 1) {
    SharedTensor<float> t(std::move(shape));
    for (float& v : t.write_only())
      v = g_.uniform(lo, hi);
    return t;
  }
  void fill(std::span<float> v, float scale) {
    for (float& e : v)
      e = g_.uniform(-scale, scale);
  }
  template <class T> void record(const char* arg, const SharedTensor<T>& t) {
    const char* dt = std::is_same_v<T, float> ? "f32" : std::is_same_v<T, int32_t> ? "i32" : "u8";
    const std::string file = name_ + "__" + arg + "." + dt;
    auto data = t.read();
    std::ofstream os(dir_ + "/" + file, std::ios::binary);
    os.write(reinterpret_cast<const char*>(data.data()),
             static_cast<std::streamsize>(data.size() * sizeof(T)));
    if (!os) throw std::runtime_error("cannot write " + dir_ + "/" + file);
    tensors_ += std::string(tensors_.empty() ? "" : ", ") + "\"" + arg + "\": {\"file\": \"" +
                file + "\", \"dtype\": \"" + dt + "\", \"shape\": " + shape_json(t.shape()) + "}";
  }
  void end() {
    cases_.push_back("    {\"name\": \"" + name_ + "\", \"op\": \"" + op_ + "\", \"params\": {" +
                     params_ + "}, \"tensors\": {" + tensors_ + "}}");
    std::printf("ran %s\n", name_.c_str());
  }
  void write_manifest() const {
    std::ofstream os(dir_ + "/manifest.json");
    os << "{\n  \"backend\": \"" << b_.name() << "\",\n  \"seed\": " << seed_
       << ",\n  \"cases\": [\n";
    for (size_t i = 0; i < cases_.size(); ++i)
      os << cases_[i] << (i + 1 < cases_.size() ? ",\n" : "\n");
    os << "  ]\n}\n";
    if (!os) throw std::runtime_error("cannot write " + dir_ + "/manifest.json");
  }

private:
  std::string dir_;
  const Backend& b_;
  uint64_t seed_;
  uint64_t index_ = 0;
  gen g_{0};
  std::string name_, op_, params_, tensors_;
  std::vector<std::string> cases_;
};

void activations(dumper& d) {
  using fwd = void (*)(const Backend&, const TensorStorage&, TensorStorage&);
  using bwd = void (*)(const Backend&, const TensorStorage&, const TensorStorage&, TensorStorage&);
  struct act {
    const char* name;
    fwd f;
    bwd g;
  };
  for (const act& a :
       {act{"relu", &nn::relu, &nn::relu_grad}, act{"sigmoid", &nn::sigmoid, &nn::sigmoid_grad},
        act{"tanh", &nn::tanh, &nn::tanh_grad}}) {
    d.begin(a.name, a.name, "");
    auto x = d.input("x", {3, 5, 7, 11}, -4, 4), dy = d.input("dy", {3, 5, 7, 11});
    SharedTensor<float> y(x.shape()), dx(x.shape());
    a.f(d.b(), x, y);
    a.g(d.b(), y, dy, dx);
    d.record("x", x);
    d.record("dy", dy);
    d.record("y", y);
    d.record("dx", dx);
    d.end();
  }
  d.begin("elu", "elu", "\"alpha\": 0.7");
  auto x = d.input("x", {4, 6, 9}, -4, 4), dy = d.input("dy", {4, 6, 9});
  SharedTensor<float> y(x.shape()), dx(x.shape());
  nn::elu(d.b(), x, y, 0.7);
  nn::elu_grad(d.b(), y, dy, dx, 0.7);
  d.record("x", x);
  d.record("dy", dy);
  d.record("y", y);
  d.record("dx", dx);
  d.end();
}

void softmaxes(dumper& d) {
  for (bool log : {false, true})
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 33}, {4, 10, 3, 5}}) {
      const std::string op = log ? "log_softmax" : "softmax";
      d.begin(op + "_" + std::to_string(shape.size()) + "d", op, "\"dim\": 1");
      auto x = d.input("x", shape, -6, 6), dy = d.input("dy", shape);
      SharedTensor<float> y(shape), dx(shape);
      if (log) {
        nn::log_softmax(d.b(), x, y, 1);
        nn::log_softmax_grad(d.b(), y, dy, dx, 1);
      } else {
        nn::softmax(d.b(), x, y, 1);
        nn::softmax_grad(d.b(), y, dy, dx, 1);
      }
      d.record("x", x);
      d.record("dy", dy);
      d.record("y", y);
      d.record("dx", dx);
      d.end();
    }
}

void convolutions(dumper& d) {
  struct cfg {
    const char* name;
    std::vector<int64_t> x, w;
    nn::Pair stride, padding, dilation;
    int64_t groups;
  };
  for (const cfg& c :
       {cfg{"conv_plain", {3, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
        cfg{"conv_strided_dilated_grouped", {2, 4, 9, 11}, {6, 2, 3, 3}, {2, 1}, {1, 2}, {1, 2}, 2},
        cfg{"conv_depthwise", {2, 8, 7, 7}, {8, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 8},
        cfg{"conv_1x1", {2, 16, 5, 6}, {12, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
        cfg{"conv_5x3_pad", {1, 2, 10, 7}, {3, 2, 5, 3}, {3, 2}, {2, 1}, {1, 1}, 1}}) {
    std::ostringstream p;
    p << "\"stride\": [" << c.stride[0] << ", " << c.stride[1] << "], \"padding\": ["
      << c.padding[0] << ", " << c.padding[1] << "], \"dilation\": [" << c.dilation[0] << ", "
      << c.dilation[1] << "], \"groups\": " << c.groups;
    d.begin(c.name, "conv2d", p.str());
    nn::Convolution conv(d.b(), c.x, c.w,
                         {.stride = c.stride,
                          .padding = c.padding,
                          .dilation = c.dilation,
                          .groups = c.groups,
                          .math = nn::math_mode::strict});
    auto x = d.input("x", c.x), w = d.input("w", c.w), dy = d.input("dy", conv.y_shape());
    SharedTensor<float> y(conv.y_shape()), dx(c.x), dw(c.w);
    conv.forward(x, w, y);
    conv.grad_data(w, dy, dx);
    conv.grad_filter(x, dy, dw);
    d.record("x", x);
    d.record("w", w);
    d.record("dy", dy);
    d.record("y", y);
    d.record("dx", dx);
    d.record("dw", dw);
    d.end();
  }
}

std::string pool_params(const nn::PoolingParams& p) {
  std::ostringstream o;
  o << "\"window\": [" << p.window[0] << ", " << p.window[1] << "], \"stride\": ["
    << (p.stride[0] ? p.stride[0] : p.window[0]) << ", "
    << (p.stride[1] ? p.stride[1] : p.window[1]) << "], \"padding\": [" << p.padding[0] << ", "
    << p.padding[1] << "], \"include_padding\": " << (p.include_padding ? 1 : 0);
  return o.str();
}

void poolings(dumper& d) {
  const std::vector<int64_t> xs{2, 3, 9, 10};
  int k = 0;
  for (const nn::PoolingParams& p :
       {nn::PoolingParams{.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
        nn::PoolingParams{.window = {2, 2}},
        nn::PoolingParams{.window = {3, 2}, .stride = {1, 2}, .padding = {1, 0}}}) {
    ++k;
    d.begin("max_pool_" + std::to_string(k), "max_pool2d", pool_params(p));
    auto x = d.input("x", xs);
    SharedTensor<float> y(nn::pooling_output_shape(xs, p)), dx(xs), dx2(xs);
    SharedTensor<int32_t> idx(y.shape());
    auto dy = d.input("dy", y.shape());
    nn::pooling_max(d.b(), x, y, idx, p);
    nn::pooling_max_grad(d.b(), dy, idx, dx);
    nn::pooling_max_grad(d.b(), x, y, dy, dx2, p);
    d.record("x", x);
    d.record("dy", dy);
    d.record("y", y);
    d.record("indices", idx);
    d.record("dx", dx);
    d.record("dx_recomputed", dx2);
    d.end();
    for (bool include : {true, false}) {
      nn::PoolingParams q = p;
      q.include_padding = include;
      d.begin("avg_pool_" + std::to_string(k) + (include ? "_incl" : "_excl"), "avg_pool2d",
              pool_params(q));
      auto ax = d.input("x", xs);
      SharedTensor<float> ay(nn::pooling_output_shape(xs, q)), adx(xs);
      auto ady = d.input("dy", ay.shape());
      nn::pooling_avg(d.b(), ax, ay, q);
      nn::pooling_avg_grad(d.b(), ady, adx, q);
      d.record("x", ax);
      d.record("dy", ady);
      d.record("y", ay);
      d.record("dx", adx);
      d.end();
    }
  }
}

void lrns(dumper& d) {
  for (const nn::LrnParams& p : {nn::LrnParams{.n = 5, .alpha = 0.5, .beta = 0.75, .k = 1.0},
                                 nn::LrnParams{.n = 4, .alpha = 1e-2, .beta = 0.6, .k = 2.0}}) {
    std::ostringstream o;
    o << "\"size\": " << p.n << ", \"alpha\": " << p.alpha << ", \"beta\": " << p.beta
      << ", \"k\": " << p.k;
    d.begin("lrn_n" + std::to_string(p.n), "local_response_norm", o.str());
    auto x = d.input("x", {2, 9, 4, 5}, -2, 2), dy = d.input("dy", {2, 9, 4, 5});
    SharedTensor<float> y(x.shape()), dx(x.shape());
    nn::lrn(d.b(), x, y, p);
    nn::lrn_grad(d.b(), x, y, dy, dx, p);
    d.record("x", x);
    d.record("dy", dy);
    d.record("y", y);
    d.record("dx", dx);
    d.end();
  }
}

void dropouts(dumper& d) {
  const double prob = 0.3;
  const uint64_t seed = 42;
  d.begin("dropout", "dropout", "\"p\": 0.3, \"seed\": 42");
  auto x = d.input("x", {256, 256}), dy = d.input("dy", {256, 256});
  SharedTensor<float> y(x.shape()), dx(x.shape());
  SharedTensor<uint8_t> mask(x.shape());
  nn::dropout(d.b(), x, y, mask, prob, seed);
  nn::dropout_grad(d.b(), dy, mask, dx, prob);
  d.record("x", x);
  d.record("dy", dy);
  d.record("y", y);
  d.record("mask", mask);
  d.record("dx", dx);
  d.end();
}

// One SGD step of the demo network at batch 64: the parameters before and after.
void train_step(dumper& d) {
  d.begin("train_step", "demo_step", "\"lr\": 0.05, \"batch\": 64");
  bench_nn::demo_step net(d.b(), 64, [&](std::span<float> v, float scale) { d.fill(v, scale); });
  d.record("x", net.x);
  const std::pair<const char*, SharedTensor<float>*> params[] = {{"w1", &net.w1}, {"b1", &net.b1},
                                                                 {"w2", &net.w2}, {"b2", &net.b2},
                                                                 {"wd", &net.wd}, {"bd", &net.bd}};
  for (const auto& [name, t] : params)
    d.record(name, *t);
  net.step();
  d.record("lsm", net.lsm);
  for (const auto& [name, t] : params)
    d.record((std::string(name) + "_after").c_str(), *t);
  d.end();
}

} // namespace

int main(int argc, char** argv) {
  std::string out, backend;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--out" || a == "--backend" || a == "--seed") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--out")
        out = v;
      else if (a == "--backend")
        backend = v;
      else
        seed = std::stoull(v);
    } else {
      std::fprintf(stderr, "usage: nn_dump --out DIR [--backend NAME] [--seed N]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: nn_dump --out DIR [--backend NAME] [--seed N]\n");
    return 2;
  }
  std::unique_ptr<Backend> b;
  try {
    b = backend.empty() ? std::make_unique<Backend>() : std::make_unique<Backend>(backend);
  } catch (const std::exception& e) {
    std::printf("skipped: no backend %s: %s\n", backend.c_str(), e.what());
    return 77;
  }
  try {
    dumper d(out, *b, seed);
    std::printf("nn_dump on %s into %s\n", b->name().c_str(), out.c_str());
    activations(d);
    softmaxes(d);
    convolutions(d);
    poolings(d);
    lrns(d);
    dropouts(d);
    train_step(d);
    d.write_manifest();
  } catch (const std::exception& e) {
    std::printf("nn_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
