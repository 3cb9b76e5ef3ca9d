// P1 / P2 — small ops through the public path: 10k alternating blas::axpy / blas::scal on 1024
// f32 SharedTensors, then one Backend::synchronize, time per op, on each backend asked for
// (default: the first device of every framework present). The peers run in the same GPU call:
// tools/bench/core/p1_torch.py alternates this program with PyTorch eager (and parenchyma's
// Python binding) and writes the ratios. Correctness is checked first against a double loop.
//   bench_small_ops [backend request ...]     e.g. bench_small_ops cuda opencl:1 native
#include "backends.hpp"
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace pa = parenchyma;

namespace {
constexpr int ops = 10000, n = 1024;

// One op pair on random data against a double-precision loop; false (and a message) when off.
bool check(const pa::Backend& b) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  pa::SharedTensor<float> x({n}), y({n});
  std::vector<double> rx(n), ry(n);
  {
    auto wx = x.write_only();
    auto wy = y.write_only();
    for (int i = 0; i < n; ++i)
      rx[i] = wx[i] = dist(rng), ry[i] = wy[i] = dist(rng);
  }
  const float a = 1.0001f, s = 0.9999f;
  pa::blas::axpy(b, a, x, y);
  pa::blas::scal(b, s, x);
  const auto gx = x.read(), gy = y.read();
  for (int i = 0; i < n; ++i) {
    const double ey = ry[i] + double(a) * rx[i], ex = double(s) * rx[i];
    if (std::fabs(gy[i] - ey) > 1e-6 * (std::fabs(ry[i]) + std::fabs(rx[i])) + 1e-30 ||
        std::fabs(gx[i] - ex) > 1e-6 * std::fabs(rx[i]) + 1e-30) {
      std::fprintf(stderr, "%s: element %d: y %g (expected %g), x %g (expected %g)\n",
                   b.name().c_str(), i, double(gy[i]), ey, double(gx[i]), ex);
      return false;
    }
  }
  return true;
}
} // namespace

int main(int argc, char** argv) {
  bench::suite s("small_ops_public");
  size_t asked = 0;
  const size_t ran = bench::for_each_backend(argc, argv, asked, [&](const pa::Backend& b) {
    if (!check(b)) std::exit(1); // wrong results: nothing is timed
    s.meta("device " + b.name(), b.device().name);
    pa::SharedTensor<float> x({n}), y({n});
    {
      auto wx = x.write_only();
      auto wy = y.write_only();
      for (int i = 0; i < n; ++i)
        wx[i] = 1.0f, wy[i] = 0.5f;
    }
    pa::blas::axpy(b, 1.0001f, x, y); // resident on the device, ops resolved
    pa::blas::scal(b, 0.9999f, x);
    b.synchronize();
    bench::options o;
    o.reps = 15;
    o.warmup = 2;
    // The "peer" side is an empty sample (the harness wants a pair): the ratio columns are
    // meaningless here; ours_ns is the figure, and p1_torch.py joins it with its peers.
    s.compare_sampled(
        "10k small ops (axpy/scal 1024 f32) " + b.name(), [] { return 1.0; },
        [&] {
          const double t0 = bench::now_ns();
          for (int i = 0; i < ops; i += 2) {
            pa::blas::axpy(b, 1.0001f, x, y);
            pa::blas::scal(b, 0.9999f, x);
          }
          b.synchronize();
          return (bench::now_ns() - t0) / ops;
        },
        o, "-", "public path");
  });
  s.write();
  if (ran == 0) {
    std::printf("SKIPPED: no backend of %zu asked for is present\n", asked);
    return 77;
  }
  return 0;
}
