// C5: the OpenCL BLAS bundle through the front-end against CLBlast called directly on the same
// cl_command_queue and the same cl_mem buffers (round trip: op + finish on both sides), and
// OpenCL sgemm against OpenBLAS on the host. Also the cold cost of each side's first call
// (CLBlast compiles its kernels on first use; ours are built, or loaded from the cache, when the
// backend first runs a BLAS op). Run with PARENCHYMA_BLAS_OPENCL_IMPL=own to measure our kernels
// alone (that run decides the per-op default recorded in docs/blas.md).
// P2: 1000 alternating blas::axpy / blas::scal on 1024 f32 then one synchronize, per op, against
// a burst of 1000 raw clEnqueueNDRangeKernel of a trivial kernel on the same queue then clFinish.
// --crossover (run it with PARENCHYMA_BLAS_OPENCL_IMPL=own): bursts of our kernels through the
// public path against CLBlast direct, per op and size, from which the per-op thresholds in
// blas_opencl.cpp (measured_clblast_from) are read off.
//   OPENBLAS_NUM_THREADS=2 bench_blas_opencl [--quick] [--p2] [--gemm] [--crossover]
// Built without CLBlast (the GPU machine has none), it runs P2 alone.
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cblas.h>
#if PCY_BENCH_CLBLAST
#include <clblast_c.h>
#endif

#include <CL/cl.h>

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
#if PCY_BENCH_CLBLAST
void ok(CLBlastStatusCode s, const char* what) {
  if (s != CLBlastSuccess) {
    std::printf("CLBlast %s failed: %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}
#endif

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

#if PCY_BENCH_CLBLAST
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
#endif // PCY_BENCH_CLBLAST

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// P2: small ops through the public path against raw launches of a trivial kernel, per op.
void p2_small_ops(ctx& c) {
  constexpr int n = 1024, burst = 1000;
  auto x = tensor<float>({n}), y = tensor<float>({n});
  blas::copy(c.b, x, y);
  c.b.synchronize();
  cl_context clctx = nullptr;
  cl_device_id dev = nullptr;
  clGetCommandQueueInfo(c.q, CL_QUEUE_CONTEXT, sizeof clctx, &clctx, nullptr);
  clGetCommandQueueInfo(c.q, CL_QUEUE_DEVICE, sizeof dev, &dev, nullptr);
  const char* src = "__kernel void tiny(int n, float a, __global float* y) {\n"
                    "  const int i = get_global_id(0); if (i < n) y[i] = a * y[i];\n}\n";
  cl_int err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(clctx, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(prog, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) {
    std::printf("raw program build failed\n");
    std::exit(1);
  }
  cl_kernel k = clCreateKernel(prog, "tiny", &err);
  const cl_mem ym = c.mem(y);
  const float a = 0.999999f;
  const size_t global = n, local = 256;
  clSetKernelArg(k, 0, sizeof n, &n);
  clSetKernelArg(k, 1, sizeof a, &a);
  clSetKernelArg(k, 2, sizeof ym, &ym);
  auto raw = [&] {
    const double t0 = now_ns();
    for (int i = 0; i < burst; ++i)
      clEnqueueNDRangeKernel(c.q, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
    clFinish(c.q);
    return (now_ns() - t0) / burst;
  };
  auto ours = [&] {
    const double t0 = now_ns();
    for (int i = 0; i < burst; i += 2) {
      blas::axpy(c.b, 1e-3, x, y);
      blas::scal(c.b, 0.999999, y);
    }
    c.b.synchronize();
    return (now_ns() - t0) / burst;
  };
  c.s.compare_sampled("P2 axpy/scal n=1024, per op (burst 1000 + sync)", raw, ours,
                      {.reps = c.reps, .inner = 1, .warmup = 2}, "raw enqueue", "parenchyma");
  // Enqueue only: the same bursts timed before the drain (the drain is not timed).
  auto raw_enq = [&] {
    const double t0 = now_ns();
    for (int i = 0; i < 200; ++i)
      clEnqueueNDRangeKernel(c.q, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
    const double t1 = now_ns();
    clFinish(c.q);
    return (t1 - t0) / 200;
  };
  auto ours_enq = [&] {
    const double t0 = now_ns();
    for (int i = 0; i < 200; i += 2) {
      blas::axpy(c.b, 1e-3, x, y);
      blas::scal(c.b, 0.999999, y);
    }
    const double t1 = now_ns();
    c.b.synchronize();
    return (t1 - t0) / 200;
  };
  c.s.compare_sampled("P2 axpy/scal n=1024, enqueue only (burst 200)", raw_enq, ours_enq,
                      {.reps = c.reps, .inner = 1, .warmup = 2}, "raw enqueue", "parenchyma");
  clReleaseKernel(k);
  clReleaseProgram(prog);
}

#if PCY_BENCH_CLBLAST
// Bursts of 16 calls + finish on each side: the throughput either implementation gives a
// stream of ops of this size (what decides the per-op threshold).
template <class F> double burst_ns(F&& f, const std::function<void()>& fin) {
  const double t0 = now_ns();
  for (int i = 0; i < 16; ++i)
    f();
  fin();
  return (now_ns() - t0) / 16;
}
void crossover(ctx& c) {
  cl_command_queue q = c.q;
  bench::options o{.reps = c.reps, .inner = 1, .warmup = 2};
  auto fin_peer = [&] { c.finish(); };
  auto fin_ours = [&] { c.b.synchronize(); };
  for (int n = 1 << 10; n <= 1 << 22; n <<= 2) {
    auto x = tensor<float>({n}), y = tensor<float>({n});
    SharedTensor<float> r({1});
    blas::copy(c.b, x, y);
    blas::asum(c.b, x, r);
    c.b.synchronize();
    const cl_mem xm = c.mem(x), ym = c.mem(y), rm = c.mem(r);
    const std::string sz = " n=" + std::to_string(n);
    auto cmp = [&](const std::string& op, auto peer, auto ours) {
      c.s.compare_sampled(
          "crossover s" + op + sz, [&] { return burst_ns(peer, fin_peer); },
          [&] { return burst_ns(ours, fin_ours); }, o, "clblast", "own");
    };
    cmp(
        "axpy", [&] { ok(CLBlastSaxpy(n, 1e-3f, xm, 0, 1, ym, 0, 1, &q, nullptr), "axpy"); },
        [&] { blas::axpy(c.b, 1e-3, x, y); });
    cmp(
        "scal", [&] { ok(CLBlastSscal(n, 0.999999f, xm, 0, 1, &q, nullptr), "scal"); },
        [&] { blas::scal(c.b, 0.999999, x); });
    cmp(
        "copy", [&] { ok(CLBlastScopy(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "copy"); },
        [&] { blas::copy(c.b, x, y); });
    cmp(
        "swap", [&] { ok(CLBlastSswap(n, xm, 0, 1, ym, 0, 1, &q, nullptr), "swap"); },
        [&] { blas::swap(c.b, x, y); });
    cmp(
        "dot", [&] { ok(CLBlastSdot(n, rm, 0, xm, 0, 1, ym, 0, 1, &q, nullptr), "dot"); },
        [&] { blas::dot(c.b, x, y, r); });
    cmp(
        "asum", [&] { ok(CLBlastSasum(n, rm, 0, xm, 0, 1, &q, nullptr), "asum"); },
        [&] { blas::asum(c.b, x, r); });
  }
  for (int n : {64, 256, 1024, 2048}) {
    auto A = tensor<float>({n, n}), x = tensor<float>({n}), y = tensor<float>({n});
    blas::gemv(c.b, blas::no_trans, 1.0, A, x, 0.0, y);
    c.b.synchronize();
    const cl_mem am = c.mem(A), xm = c.mem(x), ym = c.mem(y);
    c.s.compare_sampled(
        "crossover sgemv n=" + std::to_string(n),
        [&] {
          return burst_ns(
              [&] {
                ok(CLBlastSgemv(CLBlastLayoutRowMajor, CLBlastTransposeNo, n, n, 1.0f, am, 0, n, xm,
                                0, 1, 0.0f, ym, 0, 1, &q, nullptr),
                   "gemv");
              },
              fin_peer);
        },
        [&] {
          return burst_ns([&] { blas::gemv(c.b, blas::no_trans, 1.0, A, x, 0.0, y); }, fin_ours);
        },
        o, "clblast", "own");
  }
  for (int n : {16, 32, 64, 128}) { // gemm with B transposed (no vector kernel of ours on a CPU)
    auto A = tensor<float>({n, n}), B = tensor<float>({n, n}), C = tensor<float>({n, n});
    blas::gemm(c.b, blas::no_trans, blas::trans, 1.0, A, B, 0.0, C);
    c.b.synchronize();
    const cl_mem am = c.mem(A), bm = c.mem(B), cm = c.mem(C);
    c.s.compare_sampled(
        "crossover sgemm_nt n=" + std::to_string(n),
        [&] {
          return burst_ns(
              [&] {
                ok(CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, n,
                                n, n, 1.0f, am, 0, n, bm, 0, n, 0.0f, cm, 0, n, &q, nullptr),
                   "gemm");
              },
              fin_peer);
        },
        [&] {
          return burst_ns([&] { blas::gemm(c.b, blas::no_trans, blas::trans, 1.0, A, B, 0.0, C); },
                          fin_ours);
        },
        o, "clblast", "own");
  }
}
#endif // PCY_BENCH_CLBLAST
} // namespace

int main(int argc, char** argv) {
  bool quick = false, only_p2 = false, only_gemm = false, only_crossover = false;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    only_p2 |= std::strcmp(argv[i], "--p2") == 0;
    only_gemm |= std::strcmp(argv[i], "--gemm") == 0;
    only_crossover |= std::strcmp(argv[i], "--crossover") == 0;
  }
  const bool all = !only_p2 && !only_gemm && !only_crossover;
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
  bench::suite s(std::string(only_crossover ? "c5_opencl_blas_crossover_"
                             : only_p2      ? "p2_opencl_small_ops_"
                             : only_gemm    ? "p5_opencl_sgemm_"
                                            : "c5_opencl_blas_") +
                 (impl && *impl ? impl : "default"));
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
  if (all || only_p2) p2_small_ops(c);
#if PCY_BENCH_CLBLAST
  if (only_crossover) crossover(c);
  if (all) {
    level1<float>(c, 4 << 20);  // 16 MiB
    level1<double>(c, 2 << 20); // 16 MiB
    level23<float>(c, 1024, false);
    level23<double>(c, 1024, false);
  }
  if (all || only_gemm) {
    for (int n : {256, 512})
      level23<float>(c, n, true);
    level23<float>(c, 1024, true);
  }
#else
  if (!only_p2)
    std::printf("# built without CLBlast: only P2 (--p2) runs here; C5, --gemm and --crossover "
                "compare with CLBlast\n");
#endif
  s.write();
}
