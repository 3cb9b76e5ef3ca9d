// C5: the OpenCL BLAS bundle through the front-end against CLBlast called directly on the same
// cl_command_queue and the same cl_mem buffers (round trip: op + finish on both sides), and
// OpenCL sgemm against OpenBLAS on the host. Also the cold cost of each side's first call
// (CLBlast compiles its kernels on first use; ours are built, or loaded from the cache, when the
// backend first runs a BLAS op). Run with PARENCHYMA_BLAS_OPENCL_IMPL=own to measure our kernels
// alone (that run decides the per-op default recorded in docs/blas.md).
//   OPENBLAS_NUM_THREADS=2 bench_blas_opencl [--quick]
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cblas.h>
#include <clblast_c.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {
std::mt19937 rng{4242};
template <class T> SharedTensor<T> tensor(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
void ok(CLBlastStatusCode s, const char* what) {
  if (s != CLBlastSuccess) {
    std::printf("CLBlast %s failed: %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

struct ctx {
  const Backend& b;
  cl_command_queue q;
  bench::suite& s;
  int reps;
  cl_mem mem(const TensorStorage& t) const { return static_cast<cl_mem>(b.native_memory(t)); }
  void finish() const { clFinish(q); }
};

// Times the first call of f (cold), in ms.
template <class F> double cold(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return ms_since(t0);
}

template <class T> void level1(ctx& c, int n) {
  constexpr bool f32 = sizeof(T) == 4;
  const std::string p = f32 ? "s" : "d";
  const std::string sz = " n=" + std::to_string(n);
  auto x = tensor<T>({n}), y = tensor<T>({n});
  SharedTensor<T> r({1});
  blas::copy(c.b, x, y); // both on the device now
  blas::asum(c.b, x, r);
  const cl_mem xm = c.mem(x), ym = c.mem(y), rm = c.mem(r);
  cl_command_queue q = c.q;
  bench::options o{.reps = c.reps, .inner = 1, .warmup = 2};
  auto run = [&](const std::string& op, double bytes, auto peer, auto ours) {
    o.bytes = bytes;
    const double cold_peer = cold([&] {
      peer();
      c.finish();
    });
    c.s.meta("cold_clblast_" + p + op + "_ms", std::to_string(cold_peer));
    c.s.compare(
        p + op + sz,
        [&] {
          peer();
          c.finish();
        },
        [&] {
          ours();
          c.b.synchronize();
        },
        o, "clblast");
  };
  const double B = double(n) * sizeof(T);
  run(
      "dot", 2 * B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSdot(n, rm, 0, xm, 0, 1, ym, 0, 1, &q, nullptr), "dot");
        else
          ok(CLBlastDdot(n, rm, 0, xm, 0, 1, ym, 0, 1, &q, nullptr), "dot");
      },
      [&] { blas::dot(c.b, x, y, r); });
  run(
      "asum", B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSasum(n, rm, 0, xm, 0, 1, &q, nullptr), "asum");
        else
          ok(CLBlastDasum(n, rm, 0, xm, 0, 1, &q, nullptr), "asum");
      },
      [&] { blas::asum(c.b, x, r); });
  run(
      "nrm2", B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSnrm2(n, rm, 0, xm, 0, 1, &q, nullptr), "nrm2");
        else
          ok(CLBlastDnrm2(n, rm, 0, xm, 0, 1, &q, nullptr), "nrm2");
      },
      [&] { blas::nrm2(c.b, x, r); });
  run(
      "axpy", 3 * B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSaxpy(n, 1e-3f, xm, 0, 1, ym, 0, 1, &q, nullptr), "axpy");
        else
          ok(CLBlastDaxpy(n, 1e-3, xm, 0, 1, ym, 0, 1, &q, nullptr), "axpy");
      },
      [&] { blas::axpy(c.b, 1e-3, x, y); });
  run(
      "scal", 2 * B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSscal(n, 0.999999f, xm, 0, 1, &q, nullptr), "scal");
        else
          ok(CLBlastDscal(n, 0.999999, xm, 0, 1, &q, nullptr), "scal");
      },
      [&] { blas::scal(c.b, 0.999999, x); });
  run(
      "copy", 2 * B,
      [&] {
        if constexpr (f32)
          ok(CLBlastScopy(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "copy");
        else
          ok(CLBlastDcopy(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "copy");
      },
      [&] { blas::copy(c.b, x, y); });
  run(
      "swap", 4 * B,
      [&] {
        if constexpr (f32)
          ok(CLBlastSswap(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "swap");
        else
          ok(CLBlastDswap(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "swap");
      },
      [&] { blas::swap(c.b, x, y); });
}

template <class T> void level23(ctx& c, int n, bool with_openblas) {
  constexpr bool f32 = sizeof(T) == 4;
  const std::string p = f32 ? "s" : "d";
  auto A = tensor<T>({n, n}), B = tensor<T>({n, n}), C = tensor<T>({n, n});
  auto x = tensor<T>({n}), y = tensor<T>({n});
  blas::gemm(c.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C); // all on the device
  blas::gemv(c.b, blas::no_trans, 1.0, A, x, 0.0, y);
  const cl_mem am = c.mem(A), bm = c.mem(B), cm = c.mem(C), xm = c.mem(x), ym = c.mem(y);
  cl_command_queue q = c.q;
  const auto rm = CLBlastLayoutRowMajor;
  const auto nt = CLBlastTransposeNo;
  bench::options o{.reps = c.reps, .inner = 1, .warmup = 2};
  o.flops = 2.0 * n * n;
  auto gemv_peer = [&] {
    if constexpr (f32)
      ok(CLBlastSgemv(rm, nt, n, n, 1.0f, am, 0, n, xm, 0, 1, 0.0f, ym, 0, 1, &q, nullptr), "gemv");
    else
      ok(CLBlastDgemv(rm, nt, n, n, 1.0, am, 0, n, xm, 0, 1, 0.0, ym, 0, 1, &q, nullptr), "gemv");
    c.finish();
  };
  c.s.meta("cold_clblast_" + p + "gemv_ms", std::to_string(cold(gemv_peer)));
  c.s.compare(
      p + "gemv n=" + std::to_string(n), gemv_peer,
      [&] {
        blas::gemv(c.b, blas::no_trans, 1.0, A, x, 0.0, y);
        c.b.synchronize();
      },
      o, "clblast");
  o.flops = 2.0 * n * n * n;
  auto gemm_peer = [&] {
    if constexpr (f32)
      ok(CLBlastSgemm(rm, nt, nt, n, n, n, 1.0f, am, 0, n, bm, 0, n, 0.0f, cm, 0, n, &q, nullptr),
         "gemm");
    else
      ok(CLBlastDgemm(rm, nt, nt, n, n, n, 1.0, am, 0, n, bm, 0, n, 0.0, cm, 0, n, &q, nullptr),
         "gemm");
    c.finish();
  };
  auto gemm_ours = [&] {
    blas::gemm(c.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
    c.b.synchronize();
  };
  c.s.meta("cold_clblast_" + p + "gemm_" + std::to_string(n) + "_ms",
           std::to_string(cold(gemm_peer)));
  c.s.compare(p + "gemm n=" + std::to_string(n), gemm_peer, gemm_ours, o, "clblast");
  if (with_openblas && f32) {
    std::vector<float> pa(size_t(n) * n, 0.5f), pb(size_t(n) * n, 0.25f), pc(size_t(n) * n);
    c.s.compare(
        "sgemm n=" + std::to_string(n) + " vs OpenBLAS",
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa.data(), n,
                      pb.data(), n, 0.0f, pc.data(), n);
        },
        gemm_ours, o, "openblas");
  }
}
} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const auto t0 = std::chrono::steady_clock::now();
  Backend b("opencl");
  const double backend_ms = ms_since(t0);
  // Our first BLAS op builds (or loads from the disk cache) every kernel of the bundle context.
  auto x = tensor<float>({1024});
  SharedTensor<float> r({1});
  const auto t1 = std::chrono::steady_clock::now();
  blas::asum(b, x, r);
  b.synchronize();
  const double first_op_ms = ms_since(t1);

  const char* impl = std::getenv("PARENCHYMA_BLAS_OPENCL_IMPL");
  bench::suite s(std::string("c5_opencl_blas_") + (impl && *impl ? impl : "default"));
  s.meta("backend", b.name());
  s.meta("device", b.device().name);
  s.meta("impl", impl && *impl ? impl : "default");
  s.meta("openblas", openblas_get_config());
  s.meta("openblas_threads", std::to_string(openblas_get_num_threads()));
  s.meta("cold_backend_ms", std::to_string(backend_ms));
  s.meta("cold_first_blas_op_ms", std::to_string(first_op_ms));
  std::printf("# C5 OpenCL BLAS on %s (impl=%s): backend %.1f ms, first BLAS op %.1f ms "
              "(kernel build or cache load)\n",
              b.device().name.c_str(), impl && *impl ? impl : "default", backend_ms, first_op_ms);
  ctx c{b, static_cast<cl_command_queue>(b.native(PCY_NATIVE_QUEUE)), s, quick ? 15 : 21};
  level1<float>(c, 4 << 20);  // 16 MiB
  level1<double>(c, 2 << 20); // 16 MiB
  level23<float>(c, 1024, false);
  level23<double>(c, 1024, false);
  for (int n : {256, 512})
    level23<float>(c, n, true);
  level23<float>(c, 1024, true);
  s.write();
}
