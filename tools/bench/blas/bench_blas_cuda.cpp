// G8/G9/G10 on a CUDA GPU: the CUDA BLAS bundle through the front-end against cuBLAS called
// directly on the same stream and buffers, timed with CUDA events on that stream (interleaved).
//   G8/G9: BLAS-1 (dot, axpy, scal, asum, nrm2, copy) at 256 MiB and 1 GiB, with the device-copy
//          bandwidth (cuMemcpyDtoDAsync) of the same size as the ceiling.
//   G10:   sgemm/dgemm 64..8192 (torch.matmul: tools/bench/blas/g10_torch.py).
//   bench_blas_cuda [--quick]        (one command; prints the table and writes JSON)
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cublas_v2.h>
#include <cuda.h>

#include <cstdio>
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

template <class T> void level1(bench::suite& s, gpu& g, size_t bytes, int reps) {
  constexpr bool f32 = sizeof(T) == 4;
  const std::string p = f32 ? "s" : "d";
  const int n = static_cast<int>(bytes / sizeof(T));
  const std::string sz = " " + std::to_string(bytes >> 20) + " MiB";
  auto x = tensor<T>({n}), y = tensor<T>({n});
  SharedTensor<T> r({1});
  blas::copy(g.b, x, y);
  blas::asum(g.b, x, r);
  T* xp = reinterpret_cast<T*>(g.ptr(x));
  T* yp = reinterpret_cast<T*>(g.ptr(y));
  T* rp = reinterpret_cast<T*>(g.ptr(r));
  const int inner = 5;
  bench::options o{.reps = reps, .inner = 1, .warmup = 3};
  auto cmp = [&](const std::string& op, double moved, auto peer, auto ours) {
    o.bytes = moved;
    s.compare_sampled(
        p + op + sz, [&] { return g.time(peer, inner); }, [&] { return g.time(ours, inner); }, o,
        "cublas");
  };
  const T a = T(1e-3), sc = T(0.999999);
  const double B = double(bytes);
  cb(cublasSetPointerMode(g.h, CUBLAS_POINTER_MODE_DEVICE), "pointer mode");
  if constexpr (f32) {
    cmp(
        "dot", 2 * B, [&] { cublasSdot(g.h, n, xp, 1, yp, 1, rp); },
        [&] { blas::dot(g.b, x, y, r); });
    cmp(
        "asum", B, [&] { cublasSasum(g.h, n, xp, 1, rp); }, [&] { blas::asum(g.b, x, r); });
    cmp(
        "nrm2", B, [&] { cublasSnrm2(g.h, n, xp, 1, rp); }, [&] { blas::nrm2(g.b, x, r); });
  } else {
    cmp(
        "dot", 2 * B, [&] { cublasDdot(g.h, n, xp, 1, yp, 1, rp); },
        [&] { blas::dot(g.b, x, y, r); });
    cmp(
        "asum", B, [&] { cublasDasum(g.h, n, xp, 1, rp); }, [&] { blas::asum(g.b, x, r); });
    cmp(
        "nrm2", B, [&] { cublasDnrm2(g.h, n, xp, 1, rp); }, [&] { blas::nrm2(g.b, x, r); });
  }
  cb(cublasSetPointerMode(g.h, CUBLAS_POINTER_MODE_HOST), "pointer mode");
  if constexpr (f32) {
    cmp(
        "axpy", 3 * B, [&] { cublasSaxpy(g.h, n, &a, xp, 1, yp, 1); },
        [&] { blas::axpy(g.b, a, x, y); });
    cmp(
        "scal", 2 * B, [&] { cublasSscal(g.h, n, &sc, xp, 1); }, [&] { blas::scal(g.b, sc, x); });
    cmp(
        "copy", 2 * B, [&] { cublasScopy(g.h, n, xp, 1, yp, 1); }, [&] { blas::copy(g.b, x, y); });
  } else {
    cmp(
        "axpy", 3 * B, [&] { cublasDaxpy(g.h, n, &a, xp, 1, yp, 1); },
        [&] { blas::axpy(g.b, a, x, y); });
    cmp(
        "scal", 2 * B, [&] { cublasDscal(g.h, n, &sc, xp, 1); }, [&] { blas::scal(g.b, sc, x); });
    cmp(
        "copy", 2 * B, [&] { cublasDcopy(g.h, n, xp, 1, yp, 1); }, [&] { blas::copy(g.b, x, y); });
  }
  // The bandwidth ceiling: a device-to-device copy of the same size (reads + writes).
  o.bytes = 2 * B;
  s.compare_sampled(
      "device copy (ceiling)" + sz,
      [&] {
        return g.time(
            [&] {
              cu(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(yp),
                                   reinterpret_cast<CUdeviceptr>(xp), bytes, g.stream),
                 "copy");
            },
            inner);
      },
      [&] { return g.time([&] { blas::copy(g.b, x, y); }, inner); }, o, "memcpy");
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
} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Backend b("cuda");
  gpu g{b, static_cast<CUstream>(b.native(PCY_NATIVE_QUEUE)), nullptr, nullptr, nullptr};
  cu(cuEventCreate(&g.e0, CU_EVENT_DEFAULT), "cuEventCreate");
  cu(cuEventCreate(&g.e1, CU_EVENT_DEFAULT), "cuEventCreate");
  cb(cublasCreate(&g.h), "cublasCreate");
  cb(cublasSetStream(g.h, g.stream), "cublasSetStream");
  int version = 0;
  cublasGetVersion(g.h, &version);
  bench::suite s("g8_g10_cuda_blas");
  s.meta("backend", b.name());
  s.meta("device", b.device().name);
  s.meta("cublas_version", std::to_string(version));
  std::printf("# G8/G9/G10 CUDA BLAS on %s vs cuBLAS %d direct (device events)\n",
              b.device().name.c_str(), version);
  const int reps = quick ? 15 : 21;
  for (size_t bytes : {size_t(256) << 20, size_t(1) << 30}) {
    level1<float>(s, g, bytes, reps);
    level1<double>(s, g, bytes, reps);
  }
  for (int n : {64, 128, 256, 512, 1024, 2048, 4096, 8192}) {
    gemm<float>(s, g, n, n >= 4096 ? 15 : reps);
    gemm<double>(s, g, n, n >= 4096 ? 15 : reps);
  }
  s.write();
  cublasDestroy(g.h);
}
