// C2 + C3: the native BLAS bundle through the front-end against OpenBLAS called directly, in one
// process, interleaved (tools/bench/harness.hpp). Both sides use the same OpenBLAS instance, so
// OPENBLAS_NUM_THREADS applies equally; run it with 1 and with 2 threads.
//   OPENBLAS_NUM_THREADS=2 bench_blas_native [--quick]
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {
std::mt19937 rng{12345};
template <class T> void fill(std::span<T> s) {
  std::uniform_real_distribution<float> u(-1, 1);
  for (T& v : s)
    v = static_cast<T>(u(rng));
}
template <class T> SharedTensor<T> tensor(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  fill(t.write_only());
  return t;
}
std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

template <class T> void level1(bench::suite& s, const Backend& b, size_t bytes, int reps) {
  const int n = static_cast<int>(bytes / sizeof(T));
  const char* p = sizeof(T) == 4 ? "s" : "d";
  auto x = tensor<T>({n}), y = tensor<T>({n});
  SharedTensor<T> r({1});
  std::vector<T> px(n), py(n);
  fill<T>(px);
  fill<T>(py);
  T sink = 0;
  // Checked before timed: both sides agree on the same data.
  blas::dot(b, x, y, r);
  {
    auto xs = x.read(), ys = y.read();
    const double direct = sizeof(T) == 4
                              ? cblas_sdot(n, reinterpret_cast<const float*>(xs.data()), 1,
                                           reinterpret_cast<const float*>(ys.data()), 1)
                              : cblas_ddot(n, reinterpret_cast<const double*>(xs.data()), 1,
                                           reinterpret_cast<const double*>(ys.data()), 1);
    if (std::fabs(r.read()[0] - direct) > 1e-3 * (1 + std::fabs(direct)))
      std::printf("WARNING: dot mismatch %g vs %g\n", double(r.read()[0]), direct);
  }
  bench::options o{.reps = reps, .inner = 1, .warmup = 2};
  const std::string sz = " " + mib(bytes);
  if constexpr (sizeof(T) == 4) {
    o.bytes = 2.0 * bytes;
    s.compare(
        std::string(p) + "dot" + sz, [&] { sink += cblas_sdot(n, px.data(), 1, py.data(), 1); },
        [&] { blas::dot(b, x, y, r); }, o, "openblas");
    o.bytes = 3.0 * bytes;
    s.compare(
        std::string(p) + "axpy" + sz, [&] { cblas_saxpy(n, 1e-3f, px.data(), 1, py.data(), 1); },
        [&] { blas::axpy(b, 1e-3, x, y); }, o, "openblas");
    o.bytes = 2.0 * bytes;
    s.compare(
        std::string(p) + "scal" + sz, [&] { cblas_sscal(n, 0.999999f, px.data(), 1); },
        [&] { blas::scal(b, 0.999999, x); }, o, "openblas");
    o.bytes = 1.0 * bytes;
    s.compare(
        std::string(p) + "asum" + sz, [&] { sink += cblas_sasum(n, px.data(), 1); },
        [&] { blas::asum(b, x, r); }, o, "openblas");
    s.compare(
        std::string(p) + "nrm2" + sz, [&] { sink += cblas_snrm2(n, px.data(), 1); },
        [&] { blas::nrm2(b, x, r); }, o, "openblas");
  } else {
    o.bytes = 2.0 * bytes;
    s.compare(
        std::string(p) + "dot" + sz, [&] { sink += cblas_ddot(n, px.data(), 1, py.data(), 1); },
        [&] { blas::dot(b, x, y, r); }, o, "openblas");
    o.bytes = 3.0 * bytes;
    s.compare(
        std::string(p) + "axpy" + sz, [&] { cblas_daxpy(n, 1e-3, px.data(), 1, py.data(), 1); },
        [&] { blas::axpy(b, 1e-3, x, y); }, o, "openblas");
    o.bytes = 2.0 * bytes;
    s.compare(
        std::string(p) + "scal" + sz, [&] { cblas_dscal(n, 0.999999, px.data(), 1); },
        [&] { blas::scal(b, 0.999999, x); }, o, "openblas");
    o.bytes = 1.0 * bytes;
    s.compare(
        std::string(p) + "asum" + sz, [&] { sink += cblas_dasum(n, px.data(), 1); },
        [&] { blas::asum(b, x, r); }, o, "openblas");
    s.compare(
        std::string(p) + "nrm2" + sz, [&] { sink += cblas_dnrm2(n, px.data(), 1); },
        [&] { blas::nrm2(b, x, r); }, o, "openblas");
  }
  if (sink == T(12345.678)) std::printf(" "); // keep the peer's results alive
}

template <class T> void gemm(bench::suite& s, const Backend& b, int n, int reps) {
  auto A = tensor<T>({n, n}), B = tensor<T>({n, n}), C = tensor<T>({n, n});
  std::vector<T> pa(size_t(n) * n), pb(size_t(n) * n), pc(size_t(n) * n);
  fill<T>(pa);
  fill<T>(pb);
  fill<T>(pc);
  bench::options o{.reps = reps, .inner = 1, .warmup = 2};
  o.flops = 2.0 * n * n * n;
  const std::string name = std::string(sizeof(T) == 4 ? "sgemm " : "dgemm ") + std::to_string(n);
  s.compare(
      name,
      [&] {
        if constexpr (sizeof(T) == 4)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa.data(), n,
                      pb.data(), n, 0.0f, pc.data(), n);
        else
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, pa.data(), n,
                      pb.data(), n, 0.0, pc.data(), n);
      },
      [&] { blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C); }, o, "openblas");
}
} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Backend b("native");
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string t = threads ? threads : "default";
  bench::suite s("c2_c3_native_blas_t" + t);
  s.meta("backend", b.name());
  s.meta("openblas", openblas_get_config());
  s.meta("openblas_threads", std::to_string(openblas_get_num_threads()));
  std::printf("# C2/C3 native BLAS vs OpenBLAS direct, %d OpenBLAS thread(s)\n",
              openblas_get_num_threads());
  const int reps = quick ? 15 : 21;
  for (size_t bytes : {size_t(16) << 20, size_t(128) << 20}) {
    level1<float>(s, b, bytes, reps);
    level1<double>(s, b, bytes, reps);
  }
  for (int n : {64, 128, 256, 512, 1024, 2048}) {
    gemm<float>(s, b, n, n >= 1024 ? 15 : reps);
    gemm<double>(s, b, n, n >= 1024 ? 15 : reps);
  }
  s.write();
}
