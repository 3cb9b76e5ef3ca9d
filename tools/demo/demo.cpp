// parenchyma-demo: a real computation on the backend the runtime selects (PARENCHYMA_BACKEND
// and the config are respected), checked against the same computation on the native backend.
//
//   C = A B / n;  C = C + 0.5 A;  y = C x;  checksums nrm2(y), nrm2(C), asum(y)
//
// with A, B n x n (default n = 4096: three 64 MiB matrices), filled with random data on the
// host. Prints where it runs and why, the time and the checksums; exits 1 when the check fails.
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {

struct checksums {
  double y_norm = 0, c_norm = 0, y_asum = 0;
};

// The computation, on backend b. The inputs move to b's device automatically.
checksums compute(const Backend& b, int64_t n, const SharedTensor<float>& A,
                  const SharedTensor<float>& B, const SharedTensor<float>& x, double& seconds) {
  SharedTensor<float> C({n, n}), y({n}), r1({1}), r2({1}), r3({1});
  // Inputs onto the device first, so the time is the computation's.
  (void)A.read(b);
  (void)B.read(b);
  (void)x.read(b);
  b.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  blas::gemm(b, blas::no_trans, blas::no_trans, 1.0 / static_cast<double>(n), A, B, 0.0, C);
  blas::axpy(b, n * n, 0.5, A, 1, C, 1);
  blas::gemv(b, blas::no_trans, 1.0, C, x, 0.0, y);
  blas::nrm2(b, y, r1); // results stay on the device until read
  blas::nrm2(b, C, r2);
  blas::asum(b, y, r3);
  checksums s;
  s.y_norm = r1.read()[0];
  s.c_norm = r2.read()[0];
  s.y_asum = r3.read()[0];
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

int usage(const char* argv0, int rc) {
  std::printf("usage: %s [--size N]\n"
              "  runs C = A B / N; C += 0.5 A; y = C x; nrm2/asum checksums on the selected\n"
              "  backend (PARENCHYMA_BACKEND=cuda|opencl|native chooses it) and checks them\n"
              "  against the native backend. N defaults to 4096 (about 200 MB of matrices).\n",
              argv0);
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  int64_t n = 4096;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      n = std::strtoll(argv[++i], nullptr, 10);
      if (n < 1 || n > 65536) {
        std::fprintf(stderr, "--size: %s is not in 1..65536\n", argv[i]);
        return 2;
      }
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      return usage(argv[0], 0);
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
      return usage(argv[0], 2);
    }
  }
  try {
    Backend b;
    std::printf("backend:   %s (%s)\n", b.name().c_str(), b.device().name.c_str());
    std::printf("why:       %s\n", b.selection().reason.c_str());
    for (const char* op : {"gemm", "axpy", "gemv", "nrm2"}) {
      const OpKey& k = std::strcmp(op, "gemm") == 0   ? blas::detail::gemm_key(PCY_DTYPE_F32)
                       : std::strcmp(op, "axpy") == 0 ? blas::detail::axpy_key(PCY_DTYPE_F32)
                       : std::strcmp(op, "gemv") == 0 ? blas::detail::gemv_key(PCY_DTYPE_F32)
                                                      : blas::detail::nrm2_key(PCY_DTYPE_F32);
      const OpRoute r = b.route(k);
      std::printf("  %-5s on %s: %s%s\n", op, r.framework.c_str(), r.implementation.c_str(),
                  r.fallback ? " (fallback)" : "");
    }

    const double mb = 3.0 * static_cast<double>(n * n) * sizeof(float) / 1e6;
    std::printf("problem:   n = %lld, f32, %.0f MB of matrices, %.1f GFLOP\n",
                static_cast<long long>(n), mb, 2.0 * n * n * n / 1e9);
    SharedTensor<float> A({n, n}), B({n, n}), x({n});
    std::mt19937 rng{2024};
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto* t : {&A, &B, &x})
      for (float& v : t->write_only())
        v = u(rng);

    // The first run includes one-time set-up (kernel builds or cache loads, library handles);
    // the second is the steady state.
    double cold = 0, secs = 0;
    (void)compute(b, n, A, B, x, cold);
    const checksums got = compute(b, n, A, B, x, secs);
    std::printf("time:      %.3f s on %s (%.1f GFLOP/s for the whole chain); first run %.3f s\n",
                secs, b.name().c_str(), 2.0 * n * n * n / secs / 1e9, cold);
    std::printf("checksum:  nrm2(y) = %.6g  nrm2(C) = %.6g  asum(y) = %.6g\n", got.y_norm,
                got.c_norm, got.y_asum);

    if (b.framework().name() == "native") {
      std::printf("check:     skipped (the selected backend is native itself)\n");
      return 0;
    }
    Backend nb("native");
    double nsecs = 0;
    const checksums ref = compute(nb, n, A, B, x, nsecs);
    // f32 with different summation orders: agree to a relative 1e-4 (sqrt(n) eps growth).
    const double tol = 1e-4;
    auto rel = [](double a, double r) { return std::fabs(a - r) / std::max(std::fabs(r), 1e-30); };
    const double worst = std::max(
        {rel(got.y_norm, ref.y_norm), rel(got.c_norm, ref.c_norm), rel(got.y_asum, ref.y_asum)});
    std::printf("native:    %.3f s; checksum nrm2(y) = %.6g  nrm2(C) = %.6g  asum(y) = %.6g\n",
                nsecs, ref.y_norm, ref.c_norm, ref.y_asum);
    if (worst > tol) {
      std::printf("check:     FAILED: relative difference %.3g > %.0e against native\n", worst,
                  tol);
      return 1;
    }
    std::printf("check:     OK (relative difference %.3g <= %.0e against native)\n", worst, tol);
    return 0;
  } catch (const parenchyma::error& e) {
    std::fprintf(stderr, "parenchyma-demo: %s\n", e.what());
    return 1;
  }
}
