// The native NN bundle's loops on several threads give the bits of one thread. Problems of at
// least 2^20 elements split their rows, planes, images or elements over the calling thread's
// OpenMP team (extensions/nn/native/nn_native.cpp, "the loops' threads"); no sum may span two
// blocks. OpenMP reads OMP_NUM_THREADS once, when it starts, so the test runs itself as a child
// per thread count (1, 2 and 3: blocks of unequal sizes), each child running every threaded
// loop on awkward sizes above the threshold (f32 and f64, with NaN and infinities sprinkled in
// so the non-finite paths run too) and writing a 64-bit digest of each output's bytes to a file;
// the parent compares the lists (a difference names the output).
#include "support/catch.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;

namespace {

std::mt19937 rng{20261207};

template <class T> SharedTensor<T> filled(std::vector<int64_t> shape, bool specials = false) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  auto w = t.write_only();
  for (T& v : w)
    v = static_cast<T>(u(rng));
  if (specials && w.size() > 1000) { // a few NaN and infinities, far apart
    w[17] = std::numeric_limits<T>::quiet_NaN();
    w[w.size() / 3] = std::numeric_limits<T>::infinity();
    w[w.size() / 2 + 5] = -std::numeric_limits<T>::infinity();
  }
  return t;
}

// Each output's digest: its bytes mixed eight at a time (any bit that differs changes it).
struct sink {
  std::ofstream out;
  int count = 0;
  template <class T> void add(const SharedTensor<T>& t) {
    auto r = t.read();
    const auto* p = reinterpret_cast<const unsigned char*>(r.data());
    const size_t n = r.size() * sizeof(T);
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    for (; i < n; ++i)
      h = (h ^ p[i]) * 0x94D049BB133111EBull;
    out << "output " << count++ << ": " << n << " bytes, digest " << std::hex << h << std::dec
        << "\n";
  }
};

// Every loop the bundle threads, in T.
template <class T> void run_ops(const Backend& b, sink& s) {
  { // elementwise: 2^20 + 37 elements
    const int64_t n = (int64_t{1} << 20) + 37;
    auto x = filled<T>({n}, true), dy = filled<T>({n});
    SharedTensor<T> y({n}), dx({n});
    for (int a = 0; a < 4; ++a) {
      if (a == 0) {
        nn::relu(b, x, y);
        nn::relu_grad(b, y, dy, dx);
      } else if (a == 1) {
        nn::elu(b, x, y, 0.7);
        nn::elu_grad(b, y, dy, dx, 0.7);
      } else if (a == 2) {
        nn::sigmoid(b, x, y);
        nn::sigmoid_grad(b, y, dy, dx);
      } else {
        nn::tanh(b, x, y);
        nn::tanh_grad(b, y, dy, dx);
      }
      s.add(y);
      s.add(dx);
    }
    SharedTensor<uint8_t> mask({n});
    nn::dropout(b, x, y, mask, 0.3, 11);
    nn::dropout_grad(b, dy, mask, dx, 0.3);
    s.add(y);
    s.add(mask);
    s.add(dx);
  }
  { // softmax family: rows (1031 x 1019), and an inner axis (7 x 151 x 1001, axis 1)
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{1031, 1019}, std::vector<int64_t>{7, 151, 1001}}) {
      const int64_t axis = 1;
      for (bool specials : {false, true}) {
        auto x = filled<T>(shape, specials), dy = filled<T>(shape);
        SharedTensor<T> y(shape), dx(shape);
        nn::softmax(b, x, y, axis);
        s.add(y);
        nn::softmax_grad(b, y, dy, dx, axis);
        s.add(dx);
        nn::log_softmax(b, x, y, axis);
        s.add(y);
        nn::log_softmax_grad(b, y, dy, dx, axis);
        s.add(dx);
      }
    }
  }
  { // pooling: 3 x 37 planes of 97 x 101
    auto x = filled<T>({3, 37, 97, 101}, true);
    for (const nn::PoolingParams& p :
         {nn::PoolingParams{.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
          nn::PoolingParams{.window = {2, 3}, .stride = {1, 1}}}) {
      const nn::Shape ys = nn::pooling_output_shape(x.shape(), p);
      SharedTensor<T> y(ys), dx(x.shape());
      SharedTensor<int32_t> idx(ys);
      auto dy = filled<T>(ys);
      nn::pooling_max(b, x, y, p);
      s.add(y);
      nn::pooling_max(b, x, y, idx, p);
      s.add(y);
      s.add(idx);
      nn::pooling_max_grad(b, x, y, dy, dx, p);
      s.add(dx);
      nn::pooling_max_grad(b, dy, idx, dx);
      s.add(dx);
      nn::pooling_avg(b, x, y, p);
      s.add(y);
      nn::pooling_avg_grad(b, dy, dx, p);
      s.add(dx);
    }
  }
  { // LRN: 5 images of 23 x 97 x 101 (blocks of (image, channel) pairs; images for the grad)
    auto x = filled<T>({5, 23, 97, 101}, true), dy = filled<T>({5, 23, 97, 101});
    SharedTensor<T> y(x.shape()), dx(x.shape());
    for (double beta : {0.75, 0.6}) {
      const nn::LrnParams p{.n = 5, .alpha = 1e-3, .beta = beta, .k = 2.0};
      nn::lrn(b, x, y, p);
      s.add(y);
      nn::lrn_grad(b, x, y, dy, dx, p);
      s.add(dx);
    }
  }
  { // normalisation: 1031 rows of 1023
    const int64_t M = 1031, L = 1023;
    auto x = filled<T>({M, L}, true), w = filled<T>({L}), bias = filled<T>({L}),
         dy = filled<T>({M, L});
    SharedTensor<T> y({M, L}), mean({M}), rstd({M}), dx({M, L}), dw({L}), db({L});
    nn::layer_norm(b, x, w, bias, y, mean, rstd, 1, 1e-5);
    nn::layer_norm_grad(b, x, w, mean, rstd, dy, dx, dw, db, 1);
    for (const SharedTensor<T>* t : {&y, &mean, &rstd, &dx, &dw, &db})
      s.add(*t);
    nn::rms_norm(b, x, w, y, rstd, 1, 1e-6);
    nn::rms_norm_grad(b, x, w, rstd, dy, dx, dw, 1);
    for (const SharedTensor<T>* t : {&y, &rstd, &dx, &dw})
      s.add(*t);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

TEST_CASE("native NN loops: the same bits on 1, 2 and 3 threads", "[nn][threads]") {
  if (const char* out = std::getenv("PCY_NN_THREADS_OUT")) { // a child: one thread count
    Backend b("native");
    sink s{std::ofstream(out, std::ios::binary)};
    run_ops<float>(b, s);
    run_ops<double>(b, s);
    REQUIRE(s.out.good());
    return;
  }
  const std::string dir =
      std::getenv("PCY_NN_THREADS_DIR") ? std::getenv("PCY_NN_THREADS_DIR") : ".";
  // This program's own file (under qemu-user, /proc/self/exe is the guest program, while
  // /proc/<pid>/exe would be the emulator), run by the emulator that runs this test in a cross
  // build (tests/CMakeLists.txt).
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const char* emulator = std::getenv("PARENCHYMA_TEST_EMULATOR");
  // In a sanitizer build the children skip LeakSanitizer's exit check: with libgomp's worker
  // threads alive at exit its stop-the-world tracer crashes ("Tracer caught signal 11"); the
  // parent's own check still runs.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string no_leaks = "ASAN_OPTIONS='" +
                               std::string(asan != nullptr && *asan != '\0' ? asan : "") +
                               (asan != nullptr && *asan != '\0' ? ":" : "") + "detect_leaks=0' ";
  std::vector<std::string> files;
  for (int t : {1, 2, 3}) {
    const std::string file = dir + "/nn_threads_" + std::to_string(t) + ".txt";
    const std::string cmd = no_leaks + "OMP_NUM_THREADS=" + std::to_string(t) +
                            " PCY_NN_THREADS_OUT=" + file + " " +
                            (emulator != nullptr ? emulator : "") + " '" + self + "' >/dev/null";
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
    files.push_back(slurp(file));
    std::remove(file.c_str());
  }
  REQUIRE(files[0].find("output 100:") != std::string::npos); // every output was written
  CHECK(files[1] == files[0]);
  CHECK(files[2] == files[0]);
}
