// C1 — native dispatch: blas::scal/axpy on one-element tensors through Backend::invoke (core ->
// bundle -> plugin) against calling the same CBLAS function directly, interleaved in one run.
// Target (docs/performance.md): <= +50 ns per op.
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace pa = parenchyma;

int main() {
  pa::Backend native("native");
  bench::suite s("c1_native_dispatch");
  s.meta("backend", native.name());
  s.meta("device", native.device().name);
  s.meta("openblas", OPENBLAS_VERSION);
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  s.meta("openblas_threads", threads ? threads : "default");

  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);

  // Correctness first: one op through each path on the same random data.
  pa::SharedTensor<float> x({1}), y({1});
  x.write_only()[0] = dist(rng);
  y.write_only()[0] = dist(rng);
  const float a = dist(rng);
  const float y0 = y.read()[0];
  pa::blas::axpy(native, a, x, y);
  const float expect = y0 + a * x.read()[0];
  if (std::abs(y.read()[0] - expect) > 1e-6f * std::abs(expect)) {
    std::fprintf(stderr, "C1: axpy through parenchyma gave %g, expected %g\n", y.read()[0], expect);
    return 1;
  }

  // Device pointers for the direct calls: the native slot aliases the host copy.
  float* px = static_cast<float*>(native.native_memory(x.storage()));
  float* py = static_cast<float*>(native.native_memory(y.storage()));
  const long inner = 20000;
  const bench::options o{.reps = 31, .inner = inner, .warmup = 3};

  // Keep the values bounded: alternate scale factors whose product is 1.
  float f = 1.0009765625f;
  auto direct_scal = [&] {
    cblas_sscal(1, f, px, 1);
    f = 1.0f / f;
  };
  auto ours_scal = [&] {
    pa::blas::scal(native, f, x);
    f = 1.0f / f;
  };
  s.compare("scal n=1 (f32)", direct_scal, ours_scal, o, "cblas_sscal", "blas::scal");

  float sign = 1.0f;
  auto direct_axpy = [&] {
    cblas_saxpy(1, sign, px, 1, py, 1);
    sign = -sign;
  };
  auto ours_axpy = [&] {
    pa::blas::axpy(native, sign, x, y);
    sign = -sign;
  };
  s.compare("axpy n=1 (f32)", direct_axpy, ours_axpy, o, "cblas_saxpy", "blas::axpy");

  s.write();
  std::printf("C1 target: <= +50 ns per op over the direct call\n");
  return 0;
}
