// A4 on any backend: the host cost per call of a small array op through the public API, against
// the BLAS extension's axpy in the same run, and the heap allocations each call makes (counted by
// this program's operator new). Nothing synchronises inside the timed loop; the backend's queue
// is drained between repetitions.
//   bench_array_calls [--backend native] [--reps K] [--inner N]
// One JSON object per line: case, ns per call (median of K repetitions of N calls), allocations
// per call, and the ratio to axpy.
#include <parenchyma/array.hpp>
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace {
std::atomic<uint64_t> g_allocs{0};
}
void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace pa = parenchyma::array;
using parenchyma::SharedTensor;

int main(int argc, char** argv) {
  std::string backend = "native";
  int reps = 9, inner = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--backend")
      backend = argv[i + 1];
    else if (k == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (k == "--inner")
      inner = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  try {
    parenchyma::Backend b(backend);
    double axpy_ns = 0;
    auto run = [&](const char* name, const std::function<void()>& f) {
      for (int i = 0; i < 3; ++i)
        f(); // resolution, kernels, caches
      b.synchronize();
      std::vector<double> t;
      uint64_t allocs = 0;
      for (int r = 0; r < reps; ++r) {
        const uint64_t a0 = g_allocs.load();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < inner; ++i)
          f();
        const auto t1 = std::chrono::steady_clock::now();
        allocs = g_allocs.load() - a0;
        b.synchronize();
        t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / inner);
      }
      std::sort(t.begin(), t.end());
      const double ns = t[t.size() / 2];
      if (axpy_ns == 0) axpy_ns = ns;
      std::printf("{\"case\": \"%s\", \"ns\": %.0f, \"allocs_per_call\": %.2f, \"vs_axpy\": %.2f, "
                  "\"backend\": \"%s\"}\n",
                  name, ns, static_cast<double>(allocs) / inner, ns / axpy_ns, b.name().c_str());
      std::fflush(stdout);
    };
    SharedTensor<float> bx({1}), by({1});
    bx.write_only()[0] = 1;
    by.write_only()[0] = 1;
    run("axpy (n = 1)", [&] { parenchyma::blas::axpy(b, 1.0, bx, by); });
    pa::Array s1 = pa::ones(b, {1}), s2 = pa::ones(b, {1});
    run("assign y = x * 2 + 1 (n = 1)", [&] { s2.assign(s1 * 2.0f + 1.0f); });
    run("y = x + x, new array (n = 1)", [&] { (void)(s1 + s1).eval(); });
    // The last four results kept: each new one lies at another address, whatever the heap.
    std::vector<pa::Array> ring(4);
    size_t at = 0;
    run("y = x + x, new array, 4 kept (n = 1)", [&] { ring[at++ % 4] = (s1 + s1).eval(); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_array_calls: %s\n", e.what());
    return 1;
  }
  return 0;
}
