// The array extension on a backend without device timers (native, or any): each case's median
// wall time per call, one JSON object per line on stdout, for a_numpy.py, which runs NumPy's same
// cases in its own process and interleaves the two.
//   bench_array_host [--backend native] [--n N] [--rows R --cols C] [--reps K]
// Cases (f32): chain8 y = sin(a c + d) 0.5 - |a| / d + c c (3 inputs, 8 operations, one program);
// sum_last, sum_first, max_last, argmax_last, var_last over an R x C matrix; normal (a random
// normal fill of n).
#include <parenchyma/array.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace pa = parenchyma::array;

int main(int argc, char** argv) {
  std::string backend = "native";
  int64_t n = int64_t{1} << 22, rows = 1024, cols = 4096;
  int reps = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--backend")
      backend = argv[i + 1];
    else if (k == "--n")
      n = std::atoll(argv[i + 1]);
    else if (k == "--rows")
      rows = std::atoll(argv[i + 1]);
    else if (k == "--cols")
      cols = std::atoll(argv[i + 1]);
    else if (k == "--reps")
      reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  try {
    parenchyma::Backend b(backend);
    auto run = [&](const char* name, const std::function<void()>& f) {
      f();
      b.synchronize();
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        b.synchronize();
        t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                        .count());
      }
      std::sort(t.begin(), t.end());
      std::printf("{\"case\": \"%s\", \"ns\": %.0f, \"backend\": \"%s\"}\n", name, t[t.size() / 2],
                  b.name().c_str());
      std::fflush(stdout);
    };
    pa::Array a = pa::random::uniform(b, {n}, 1, 0, -1, 1),
              c = pa::random::uniform(b, {n}, 2, 0, -1, 1),
              d = pa::random::uniform(b, {n}, 3, 0, 0.5, 2), y = pa::empty(b, {n});
    run("chain8", [&] { y.assign(pa::sin(a * c + d) * 0.5f - pa::abs(a) / d + c * c); });
    pa::Array x = pa::random::normal(b, {rows, cols}, 4);
    const int64_t last[] = {1}, first[] = {0};
    run("sum_last", [&] { (void)pa::sum(x, last); });
    run("sum_first", [&] { (void)pa::sum(x, first); });
    run("max_last", [&] { (void)pa::max(x, last); });
    run("argmax_last", [&] { (void)pa::argmax(x, int64_t{1}); });
    run("var_last", [&] { (void)pa::var(x, last); });
    run("normal", [&] { y.assign(pa::random::normal(b, {n}, 9)); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_array_host: %s\n", e.what());
    return 1;
  }
  return 0;
}
