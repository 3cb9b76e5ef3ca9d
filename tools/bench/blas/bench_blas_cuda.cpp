// G8/G9/G10 on a CUDA GPU: the CUDA BLAS bundle through the front-end against cuBLAS called
// directly on the same stream and buffers, timed with CUDA events on that stream (interleaved).
//   G8/G9: BLAS-1 (dot, axpy, scal, asum, nrm2, copy) at 256 MiB and 1 GiB, with the device-copy
//          bandwidth (cuMemcpyDtoDAsync) of the same size as the ceiling.
//   G10:   sgemm/dgemm 64..8192 (torch.matmul: tools/bench/blas/g10_torch.py).
//   P4:    the same per op and size 4 KiB-1 GiB (--g9), plus swap and axpby, each as ours vs
//          cuBLAS and as ours / cuBLAS vs a device copy moving the same bytes.
//   bench_blas_cuda [--quick] [--g9]  (one command; prints the table and writes JSON)
//   PARENCHYMA_BLAS_CUDA_IMPL=own|cublas bench_blas_cuda --g9   forces the bundle's choice: the
//          two runs give the crossover per op (docs/blas.md, "CUDA: which implementation").
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cublas_v2.h>
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {
void cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    std::printf("%s failed: %s\n", what, s ? s : "?");
    std::exit(1);
  }
}
void cb(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::printf("%s failed: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}
template <class T> SharedTensor<T> tensor(std::vector<int64_t> shape) {
  static std::mt19937 rng{7};
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}

struct gpu {
  const Backend& b;
  CUstream stream;
  cublasHandle_t h;
  CUevent e0, e1;
  // ns of `inner` calls of f, measured with events on the backend's stream.
  template <class F> double time(F&& f, int inner) {
    cu(cuEventRecord(e0, stream), "cuEventRecord");
    for (int i = 0; i < inner; ++i)
      f();
    cu(cuEventRecord(e1, stream), "cuEventRecord");
    cu(cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    cu(cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    return ms * 1e6 / inner;
  }
  CUdeviceptr ptr(const TensorStorage& t) const {
    return reinterpret_cast<CUdeviceptr>(b.native_memory(t));
  }
};

// BLAS-1 vectors of the largest size swept, for one dtype; smaller cells use their first n.
template <class T> struct l1_data {
  SharedTensor<T> x, y, r, rc; // r: our results, rc: cuBLAS's
  T *xp, *yp, *rp, *rcp;
  l1_data(gpu& g, size_t max_bytes)
      : x(tensor<T>({static_cast<int64_t>(max_bytes / sizeof(T))})),
        y(tensor<T>({static_cast<int64_t>(max_bytes / sizeof(T))})), r({1}), rc({1}) {
    blas::copy(g.b, x, y);
    blas::asum(g.b, x, r);
    blas::asum(g.b, x, rc);
    xp = reinterpret_cast<T*>(g.ptr(x));
    yp = reinterpret_cast<T*>(g.ptr(y));
    rp = reinterpret_cast<T*>(g.ptr(r));
    rcp = reinterpret_cast<T*>(g.ptr(rc));
    blas::axpy(g.b, 1.0, x, y); // y differs from x
    g.b.synchronize();
  }
};

// --only OP[,OP...]: the BLAS-1 ops to time (default all), e.g. for tuning one kernel.
std::string g_only;
bool wanted(const std::string& op) {
  return g_only.empty() || ("," + g_only + ",").find("," + op + ",") != std::string::npos;
}

std::string size_name(size_t bytes) {
  return bytes >= (size_t(1) << 30)   ? std::to_string(bytes >> 30) + " GiB"
         : bytes >= (size_t(1) << 20) ? std::to_string(bytes >> 20) + " MiB"
                                      : std::to_string(bytes >> 10) + " KiB";
}

// One size: per op, ours (the public API on SharedTensors) against cuBLAS called directly on the
// same stream and buffers (suite `s`), then each of them against a device copy moving the same
// number of bytes (suite `sc`: ratio = 1 / the fraction of device-copy bandwidth reached; a
// ratio <= 1.111 is >= 90 %). Results of the reductions are checked against cuBLAS's first.
template <class T>
void level1(bench::suite& s, bench::suite& sc, gpu& g, l1_data<T>& d, size_t bytes, int reps) {
  constexpr bool f32 = sizeof(T) == 4;
  const std::string p = f32 ? "s" : "d";
  const int n = static_cast<int>(bytes / sizeof(T));
  const int64_t n64 = n;
  const std::string sz = " " + size_name(bytes);
  T *xp = d.xp, *yp = d.yp, *rp = d.rp, *rcp = d.rcp;
  auto &x = d.x, &y = d.y, &r = d.r;
  // Enough back-to-back calls per sample that small cells are not one launch.
  const int inner = static_cast<int>(std::clamp<size_t>((size_t(64) << 20) / bytes, 5, 200));
  bench::options o{.reps = reps, .inner = 1, .warmup = 3};
  const double B = double(bytes);
  // The device copy of `bytes` (reads + writes 2 B), timed the same way: the ceiling.
  auto copy_ns = [&] {
    return g.time(
        [&] {
          cu(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(yp), reinterpret_cast<CUdeviceptr>(xp),
                               bytes, g.stream),
             "copy");
        },
        inner);
  };
  auto cmp = [&](const std::string& op, double moved, bool device_mode, auto peer, auto ours) {
    if (!wanted(op)) return;
    const std::string name = p + op + sz;
    o.bytes = moved;
    const auto mode = device_mode ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST;
    auto peer_ns = [&] {
      cb(cublasSetPointerMode(g.h, mode), "pointer mode");
      return g.time(peer, inner);
    };
    auto ours_ns = [&] { return g.time(ours, inner); };
    // The copy moving `moved` bytes: 2 B in its time, so scaled by moved / 2 B.
    auto ceiling_ns = [&] { return copy_ns() * moved / (2 * B); };
    const bench::result vs = s.compare_sampled(name, peer_ns, ours_ns, o, "cublas");
    const bench::result ov = sc.compare_sampled(name + " vs copy", ceiling_ns, ours_ns, o, "copy");
    const bench::result cv =
        sc.compare_sampled(name + " vs copy (cublas)", ceiling_ns, peer_ns, o, "copy", "cublas");
    std::printf("  => %s: ours %.1f %% of device-copy bandwidth, cuBLAS %.1f %%; ours/cuBLAS "
                "time %.3f\n",
                name.c_str(), 100 / ov.ratio, 100 / cv.ratio, vs.ratio);
  };
  // The reductions agree with cuBLAS (random data: relative 1e-3 in f32, 1e-9 in f64).
  auto check = [&](const char* op, auto peer, auto ours) {
    if (!wanted(op)) return;
    cb(cublasSetPointerMode(g.h, CUBLAS_POINTER_MODE_DEVICE), "pointer mode");
    peer();
    ours();
    T a = 0, b = 0;
    g.b.synchronize();
    cu(cuMemcpyDtoH(&a, reinterpret_cast<CUdeviceptr>(rcp), sizeof(T)), "cuMemcpyDtoH");
    cu(cuMemcpyDtoH(&b, reinterpret_cast<CUdeviceptr>(rp), sizeof(T)), "cuMemcpyDtoH");
    const double tol = f32 ? 1e-3 : 1e-9;
    if (!(std::fabs(double(a) - double(b)) <= tol * std::fabs(double(a)))) {
      std::printf("CHECK FAILED: %s%s%s: cuBLAS %.17g, ours %.17g\n", p.c_str(), op, sz.c_str(),
                  double(a), double(b));
      std::exit(1);
    }
  };
  const T a = T(1e-3), sc_ = T(0.999999);
  if constexpr (f32) {
    auto pdot = [&] { cublasSdot(g.h, n, xp, 1, yp, 1, rcp); };
    auto pasum = [&] { cublasSasum(g.h, n, xp, 1, rcp); };
    auto pnrm2 = [&] { cublasSnrm2(g.h, n, xp, 1, rcp); };
    auto odot = [&] { blas::dot(g.b, n64, x, 1, y, 1, r); };
    auto oasum = [&] { blas::asum(g.b, n64, x, 1, r); };
    auto onrm2 = [&] { blas::nrm2(g.b, n64, x, 1, r); };
    check("dot", pdot, odot);
    check("asum", pasum, oasum);
    check("nrm2", pnrm2, onrm2);
    cmp("dot", 2 * B, true, pdot, odot);
    cmp("asum", B, true, pasum, oasum);
    cmp("nrm2", B, true, pnrm2, onrm2);
    cmp(
        "axpy", 3 * B, false, [&] { cublasSaxpy(g.h, n, &a, xp, 1, yp, 1); },
        [&] { blas::axpy(g.b, n64, a, x, 1, y, 1); });
    cmp(
        "scal", 2 * B, false, [&] { cublasSscal(g.h, n, &sc_, xp, 1); },
        [&] { blas::scal(g.b, n64, sc_, x, 1); });
    cmp(
        "copy", 2 * B, false, [&] { cublasScopy(g.h, n, xp, 1, yp, 1); },
        [&] { blas::copy(g.b, n64, x, 1, y, 1); });
    cmp(
        "swap", 4 * B, false, [&] { cublasSswap(g.h, n, xp, 1, yp, 1); },
        [&] { blas::swap(g.b, n64, x, 1, y, 1); });
  } else {
    auto pdot = [&] { cublasDdot(g.h, n, xp, 1, yp, 1, rcp); };
    auto pasum = [&] { cublasDasum(g.h, n, xp, 1, rcp); };
    auto pnrm2 = [&] { cublasDnrm2(g.h, n, xp, 1, rcp); };
    auto odot = [&] { blas::dot(g.b, n64, x, 1, y, 1, r); };
    auto oasum = [&] { blas::asum(g.b, n64, x, 1, r); };
    auto onrm2 = [&] { blas::nrm2(g.b, n64, x, 1, r); };
    check("dot", pdot, odot);
    check("asum", pasum, oasum);
    check("nrm2", pnrm2, onrm2);
    cmp("dot", 2 * B, true, pdot, odot);
    cmp("asum", B, true, pasum, oasum);
    cmp("nrm2", B, true, pnrm2, onrm2);
    cmp(
        "axpy", 3 * B, false, [&] { cublasDaxpy(g.h, n, &a, xp, 1, yp, 1); },
        [&] { blas::axpy(g.b, n64, a, x, 1, y, 1); });
    cmp(
        "scal", 2 * B, false, [&] { cublasDscal(g.h, n, &sc_, xp, 1); },
        [&] { blas::scal(g.b, n64, sc_, x, 1); });
    cmp(
        "copy", 2 * B, false, [&] { cublasDcopy(g.h, n, xp, 1, yp, 1); },
        [&] { blas::copy(g.b, n64, x, 1, y, 1); });
    cmp(
        "swap", 4 * B, false, [&] { cublasDswap(g.h, n, xp, 1, yp, 1); },
        [&] { blas::swap(g.b, n64, x, 1, y, 1); });
  }
  if (!g_only.empty()) return; // the tuning runs stop here
  // axpby has no cuBLAS routine (always our kernel): against the device copy only.
  o.bytes = 3 * B;
  const bench::result ab = sc.compare_sampled(
      p + "axpby" + sz + " vs copy", [&] { return copy_ns() * 3 / 2; },
      [&] { return g.time([&] { blas::axpby(g.b, n64, a, x, 1, sc_, y, 1); }, inner); }, o, "copy");
  std::printf("  => %saxpby%s: ours %.1f %% of device-copy bandwidth\n", p.c_str(), sz.c_str(),
              100 / ab.ratio);
  // The ceiling itself against our copy (as before: the G9 row of docs/blas.md).
  o.bytes = 2 * B;
  s.compare_sampled(
      "device copy (ceiling)" + sz, copy_ns,
      [&] { return g.time([&] { blas::copy(g.b, n64, x, 1, y, 1); }, inner); }, o, "memcpy");
}

template <class T> void gemm(bench::suite& s, gpu& g, int n, int reps) {
  constexpr bool f32 = sizeof(T) == 4;
  auto A = tensor<T>({n, n}), B = tensor<T>({n, n}), C = tensor<T>({n, n});
  blas::gemm(g.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
  const T* ap = reinterpret_cast<const T*>(g.ptr(A));
  const T* bp = reinterpret_cast<const T*>(g.ptr(B));
  T* cp = reinterpret_cast<T*>(g.ptr(C));
  const T one = 1, zero = 0;
  cb(cublasSetPointerMode(g.h, CUBLAS_POINTER_MODE_HOST), "pointer mode");
  const int inner = n <= 512 ? 50 : n <= 2048 ? 5 : 1;
  bench::options o{.reps = reps, .inner = 1, .warmup = 3};
  o.flops = 2.0 * n * n * n;
  // The same call the bundle makes: row-major mapped onto column-major by swapping operands.
  auto peer = [&] {
    if constexpr (f32)
      cublasSgemm(g.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, bp, n, ap, n, &zero, cp, n);
    else
      cublasDgemm(g.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, bp, n, ap, n, &zero, cp, n);
  };
  auto ours = [&] { blas::gemm(g.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C); };
  s.compare_sampled(
      std::string(f32 ? "sgemm " : "dgemm ") + std::to_string(n),
      [&] { return g.time(peer, inner); }, [&] { return g.time(ours, inner); }, o, "cublas");
  // Host-side enqueue cost for small sizes (G10's "<= +1 us at 64-256").
  if (n <= 256)
    s.compare(
        std::string(f32 ? "sgemm " : "dgemm ") + std::to_string(n) + " op+sync (host)",
        [&] {
          peer();
          cuStreamSynchronize(g.stream);
        },
        [&] {
          ours();
          g.b.synchronize();
        },
        bench::options{.reps = reps, .inner = 20}, "cublas");
}
// gemm in f16 / bf16 through the public API against cublasGemmEx called directly (the same call
// the bundle makes: f32 accumulation, host scalars), same stream and buffers. PyTorch's
// torch.matmul on the same shapes: g10_torch.py ("hgemm" / "bgemm" rows).
template <class H> void gemm_half(bench::suite& s, gpu& g, int n, int reps) {
  constexpr bool f16 = std::is_same_v<H, parenchyma::f16>;
  auto A = tensor<H>({n, n}), B = tensor<H>({n, n}), C = tensor<H>({n, n});
  blas::gemm(g.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
  const void* ap = reinterpret_cast<const void*>(g.ptr(A));
  const void* bp = reinterpret_cast<const void*>(g.ptr(B));
  void* cp = reinterpret_cast<void*>(g.ptr(C));
  const float one = 1, zero = 0;
  const cudaDataType t = f16 ? CUDA_R_16F : CUDA_R_16BF;
  cb(cublasSetPointerMode(g.h, CUBLAS_POINTER_MODE_HOST), "pointer mode");
  const int inner = n <= 512 ? 50 : n <= 2048 ? 5 : 1;
  bench::options o{.reps = reps, .inner = 1, .warmup = 3};
  o.flops = 2.0 * n * n * n;
  auto peer = [&] {
    cb(cublasGemmEx(g.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, bp, t, n, ap, t, n, &zero, cp, t,
                    n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "cublasGemmEx");
  };
  auto ours = [&] { blas::gemm(g.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C); };
  s.compare_sampled(
      std::string(f16 ? "hgemm " : "bgemm ") + std::to_string(n),
      [&] { return g.time(peer, inner); }, [&] { return g.time(ours, inner); }, o, "cublas");
}
} // namespace

int main(int argc, char** argv) {
  bool quick = false, g9 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--g9") == 0)
      g9 = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      g_only = argv[++i];
    else {
      std::printf("usage: bench_blas_cuda [--quick] [--g9] [--only OP,OP...]\n");
      return 2;
    }
  }
  Backend b("cuda");
  gpu g{b, static_cast<CUstream>(b.native(PCY_NATIVE_QUEUE)), nullptr, nullptr, nullptr};
  cu(cuEventCreate(&g.e0, CU_EVENT_DEFAULT), "cuEventCreate");
  cu(cuEventCreate(&g.e1, CU_EVENT_DEFAULT), "cuEventCreate");
  cb(cublasCreate(&g.h), "cublasCreate");
  cb(cublasSetStream(g.h, g.stream), "cublasSetStream");
  int version = 0;
  cublasGetVersion(g.h, &version);
  const char* impl = std::getenv("PARENCHYMA_BLAS_CUDA_IMPL");
  const std::string tag = impl != nullptr && *impl ? std::string("_") + impl : std::string();
  bench::suite s(g9 ? "g9_cuda_blas1" + tag : "g8_g10_cuda_blas");
  bench::suite sc(g9 ? "g9_cuda_blas1_vs_copy" + tag : "g8_g9_cuda_blas1_vs_copy");
  for (bench::suite* x : {&s, &sc}) {
    x->meta("backend", b.name());
    x->meta("device", b.device().name);
    x->meta("cublas_version", std::to_string(version));
    x->meta("PARENCHYMA_BLAS_CUDA_IMPL", impl != nullptr ? impl : "(table)");
  }
  std::printf("# %s CUDA BLAS on %s vs cuBLAS %d direct (device events), "
              "PARENCHYMA_BLAS_CUDA_IMPL=%s\n",
              g9 ? "G9 sweep (BLAS-1, 4 KiB-1 GiB)" : "G8/G9/G10", b.device().name.c_str(), version,
              impl != nullptr ? impl : "(unset: the shipped table)");
  const int reps = quick ? 15 : 21;
  std::vector<size_t> sizes;
  if (g9)
    for (size_t bytes = size_t(4) << 10; bytes <= (size_t(1) << 30); bytes *= 4)
      sizes.push_back(bytes);
  else
    sizes = {size_t(256) << 20, size_t(1) << 30};
  {
    l1_data<float> d(g, sizes.back());
    for (size_t bytes : sizes)
      level1<float>(s, sc, g, d, bytes, reps);
  }
  {
    l1_data<double> d(g, sizes.back());
    for (size_t bytes : sizes)
      level1<double>(s, sc, g, d, bytes, reps);
  }
  if (!g9)
    for (int n : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) {
      gemm<float>(s, g, n, n >= 4096 ? 15 : reps);
      gemm<double>(s, g, n, n >= 4096 ? 15 : reps);
    }
  if (!g9)
    for (int n : {256, 1024, 4096, 8192}) {
      gemm_half<parenchyma::f16>(s, g, n, n >= 4096 ? 15 : reps);
      gemm_half<parenchyma::bf16>(s, g, n, n >= 4096 ? 15 : reps);
    }
  s.write();
  sc.write();
  cublasDestroy(g.h);
}
