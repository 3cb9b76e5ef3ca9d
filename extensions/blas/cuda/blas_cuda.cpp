// BLAS bundle for the CUDA framework: cuBLAS, loaded at run time (libcublas.so.13, then .12),
// on the backend's own CUstream. Nothing is linked: cublas_api.h gives only the types. Row-major
// tensors map onto cuBLAS's column-major view by swapping operands and flipping transposes.
// Without cuBLAS the bundle loads, serves no op and says why (the core then falls back per op).
//
// Reference-BLAS semantics (docs/blas.md) where cuBLAS differs: quick returns decided here, and
// our own CUDA C kernels (kernels_cu.hpp, built per context through the framework's
// program_build) for nrm2 (scaled: cuBLAS loses small f32 values and denormals), axpby, axpy
// with a device-resident alpha, beta-scaling of outputs (k == 0, alpha == 0), and a guard
// around gemm/gemv with a device-resident alpha (cuBLAS dgemm multiplies NaN in A by it).
//
// BLAS-1 at memory speed (PERFORMANCE.md P4): our vectorised kernels serve asum, dot, nrm2,
// axpy, scal, copy and swap wherever they beat cuBLAS, per op, dtype and size, from a table
// shipped as data (measured_own_from below); two integer compares per call.
#include "blas_call.hpp"

#include "kernels_cu.hpp"
#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <cublas_api.h>
#include <cuda.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;

constexpr const char* bundle_name = "blas_cuda";
constexpr uint32_t l1_block = 256;            // RWG in kernels_cu.hpp
constexpr uint32_t max_l1_blocks = 4096;      // the partials buffer's capacity, per component
constexpr uint32_t default_blocks_per_sm = 4; // __launch_bounds__(RWG, 4): <= 64 registers
constexpr uint64_t counter_bytes = 256;       // the reductions' counter, then the partials
// axpy, scal and copy of at most this many elements take the one-element-per-thread kernels
// (axpy_small_*, ...: a short kernel, cheaper per node of a replayed graph; see the table below).
constexpr int64_t small_max = int64_t(1) << 16;
// Early launch (PCY_KERNEL_WAITS_FOR_PRIOR) for calls of at most this many bytes of one vector
// or window. Above it a kernel's launch is a rounding error of its run time, and early launch
// cost the one-input reductions bandwidth: sasum and snrm2 took 1.06-1.21x their earlier time
// from 64 MiB to 1 GiB (80-86 % of a device copy instead of 92-103 %; H200, 2026-12-02b).
constexpr uint64_t early_max = uint64_t(16) << 20;

// Which implementation serves a BLAS-1 call: our kernel from own_from[op][dtype] elements of a
// contiguous (increment 1) vector on, cuBLAS below; one compare per call. The table is in
// bytes of one vector (n * sizeof(T)); `always`: ours at every size, `never`: cuBLAS at every
// size. Measured on the H200 (2026-12-02, `bench_blas_cuda --g9` under
// PARENCHYMA_BLAS_CUDA_IMPL=own: our kernel and cuBLAS on the same stream and buffers, device
// events, 4 KiB-1 GiB; docs/blas.md "CUDA: which implementation serves an op"): each threshold is
// the smallest size from which ours took less time than cuBLAS at every larger size. Ours are
// faster at every size for dot, asum, nrm2 (0.25-0.98 of cuBLAS's time: one launch, vectorised),
// scal and scopy (0.59-0.99); from 1 MiB for saxpy, 4 MiB for swap, 16 MiB for dcopy; daxpy
// stays cuBLAS (1.00-1.03: cuBLAS's f64 axpy already streams at 95-98 % of a device copy).
// Below a threshold the two differ by launch noise (0.94-1.08). nrm2 is ours at every size for
// its semantics (cuBLAS's loses small values). Strided calls (an increment > 1) stay cuBLAS; n
// beyond cuBLAS's int range is always ours.
// That sweep is launch-bound below a few MiB. Where the GPU rather than the launch is the
// bottleneck (a replayed graph, a queue that backs up), the kernel's own time decides: 100 saxpy,
// sscal or scopy recorded in a graph and replayed (`bench_graph_replay --op axpy|scal|copy --n N`,
// `gpu-round.sh p6-impl`). Before early launch our vectorised kernels lost there to cuBLAS's
// below 4 MiB (1.24-1.69 against 0.92-1.56 us a node). With early launch (every kernel of ours
// waits for prior work itself, PCY_KERNEL_WAITS_FOR_PRIOR) and the one-element-per-thread
// kernels up to small_max, ours cost less a node at every size (H200, 2026-12-02b): 0.59-0.66
// against 0.92-1.00 us at 4 KiB, 0.69-1.04 against 1.12-1.21 at 256 KiB, 1.30-1.42 against
// 1.47-1.58 at 1 MiB, 2.51-2.71 against 3.43-3.61 at 4 MiB, 6.5-7.4 against 10.8-11.2 at 16 MiB;
// one by one on a stream too (P1: 2.58-2.65 us an op against 3.5-4.0 with cuBLAS's). So f32
// axpy, scal and copy are ours at every size; f64 and swap by the stream sweep below.
enum l1_op { L1_ASUM, L1_DOT, L1_NRM2, L1_AXPY, L1_SCAL, L1_COPY, L1_SWAP, L1_COUNT };
constexpr uint64_t always = 0, never = UINT64_MAX, MiB = uint64_t(1) << 20;
// With early launch (2026-12-02b, `bench_blas_cuda --g9` under PARENCHYMA_BLAS_CUDA_IMPL=own):
// ours took 0.44-0.99 of cuBLAS's time in every f32 and f64 cell from 4 KiB to 1 GiB but daxpy
// at 256 MiB and 1 GiB (1.009-1.013): swap and dcopy are now ours at every size too, daxpy
// below 128 MiB (0.83-0.99 there; cuBLAS's daxpy streams at 98-99 % of a device copy above).
// `until`: bytes from which cuBLAS serves again (`never`: no upper bound).
struct own_from_bytes {
  const char* op;
  uint64_t f32, f64;
  uint64_t f32_until = never, f64_until = never;
};
constexpr std::array<own_from_bytes, L1_COUNT> measured_own_from{{
    {"asum", always, always},
    {"dot", always, always},
    {"nrm2", always, always},
    {"axpy", always, always, never, 128 * MiB},
    {"scal", always, always},
    {"copy", always, always},
    {"swap", always, always},
}};
// Per op, f32 / f64: elements from which (and below which) a contiguous call is ours, and from
// which a strided call is.
struct l1_choice {
  std::array<std::array<uint64_t, 2>, L1_COUNT> contiguous{}, until{}, strided{};
};
constexpr uint64_t guard_elements = 1u << 22; // the gemm guard's window, per cuBLAS call

// Every cuBLAS entry point we call, resolved once at initialisation.
// clang-format off
#define PARENCHYMA_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetPointerMode_v2) \
  X(cublasGetStatusString) X(cublasGetVersion_v2) X(cublasSasum_v2) X(cublasDasum_v2) \
  X(cublasSdot_v2) X(cublasDdot_v2) X(cublasSaxpy_v2) X(cublasDaxpy_v2) \
  X(cublasScopy_v2) X(cublasDcopy_v2) X(cublasSscal_v2) X(cublasDscal_v2) \
  X(cublasSswap_v2) X(cublasDswap_v2) X(cublasSgemv_v2) X(cublasDgemv_v2) \
  X(cublasSgemm_v2) X(cublasDgemm_v2) X(cublasSgemmStridedBatched) X(cublasDgemmStridedBatched)
// clang-format on

struct cublas_api {
#define PARENCHYMA_DECLARE(f) decltype(&::f) f = nullptr;
  PARENCHYMA_CUBLAS_FUNCTIONS(PARENCHYMA_DECLARE)
#undef PARENCHYMA_DECLARE
  // Optional: gemm in f16 / bf16 (tensor cores, f32 accumulation). Spelled out: C++ sees an
  // inline overload of the same name in cublas_api.h.
  using gemm_ex_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  gemm_ex_fn cublasGemmEx = nullptr;
  // Optional too: gemm_batched in f16 / bf16 (spelled out for the same reason).
  using gemm_strided_batched_ex_fn = cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
      cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  gemm_strided_batched_ex_fn cublasGemmStridedBatchedEx = nullptr;
  // The driver calls that put a context current for cuBLAS.
  sdk::cuda_driver<CUcontext, CUresult> driver;
};

// cuBLAS by dtype.
template <class T> struct cub;
template <> struct cub<float> {
  static auto asum(const cublas_api& a) { return a.cublasSasum_v2; }
  static auto dot(const cublas_api& a) { return a.cublasSdot_v2; }
  static auto axpy(const cublas_api& a) { return a.cublasSaxpy_v2; }
  static auto copy(const cublas_api& a) { return a.cublasScopy_v2; }
  static auto scal(const cublas_api& a) { return a.cublasSscal_v2; }
  static auto swap(const cublas_api& a) { return a.cublasSswap_v2; }
  static auto gemv(const cublas_api& a) { return a.cublasSgemv_v2; }
  static auto gemm(const cublas_api& a) { return a.cublasSgemm_v2; }
  static auto gemm_batched(const cublas_api& a) { return a.cublasSgemmStridedBatched; }
};
template <> struct cub<double> {
  static auto asum(const cublas_api& a) { return a.cublasDasum_v2; }
  static auto dot(const cublas_api& a) { return a.cublasDdot_v2; }
  static auto axpy(const cublas_api& a) { return a.cublasDaxpy_v2; }
  static auto copy(const cublas_api& a) { return a.cublasDcopy_v2; }
  static auto scal(const cublas_api& a) { return a.cublasDscal_v2; }
  static auto swap(const cublas_api& a) { return a.cublasDswap_v2; }
  static auto gemv(const cublas_api& a) { return a.cublasDgemv_v2; }
  static auto gemm(const cublas_api& a) { return a.cublasDgemm_v2; }
  static auto gemm_batched(const cublas_api& a) { return a.cublasDgemmStridedBatched; }
};

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// Our kernels for one dtype (kernels_cu.hpp, suffix _f32 / _f64), in the order of
// blas_cuda::kernel_names.
struct own_kernels {
  pcy_kernel axpby = nullptr, axpy = nullptr, scale = nullptr, save = nullptr, restore = nullptr,
             asum = nullptr, dot = nullptr, nrm2 = nullptr, scal = nullptr, copy = nullptr,
             swap = nullptr, axpy_small = nullptr, scal_small = nullptr, copy_small = nullptr;
  std::array<pcy_kernel*, std::size(blas_cuda::kernel_names)> all() {
    return {&axpby, &axpy, &scale, &save, &restore,    &asum,       &dot,
            &nrm2,  &scal, &copy,  &swap, &axpy_small, &scal_small, &copy_small};
  }
};

// Scalars and device addresses as kernel arguments (the launch copies them).
using sdk::val;

struct cuda_context : sdk::cuda_device_context<CUcontext, CUresult, CUstream> {
  explicit cuda_context(const pcy_bundle_context_args& a, const cublas_api& cublas)
      : cuda_device_context(a, cublas.driver, bundle_name), api(&cublas) {}
  const cublas_api* api;
  cublasHandle_t handle = nullptr;
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  pcy_memory scratch = nullptr;      // device scalars for calls mixing host and device scalars
  pcy_memory partials = nullptr;     // reductions: the counter, then up to 3 sums per block
  const void* counter_dev = nullptr; // its device addresses, resolved once
  const void* partials_dev = nullptr;
  uint64_t max_blocks = 132 * default_blocks_per_sm; // SMs x blocks per SM (create_context)
  l1_choice own_from;                                // copied from the bundle's table
  pcy_memory guard_mem = nullptr; // the saved output window of a guarded gemm/gemv
  uint64_t guard_bytes = 0;
  own_kernels f32, f64;           // created with PCY_KERNEL_WAITS_FOR_PRIOR: launched early
  own_kernels f32_late, f64_late; // the same kernels without it, for calls above early_max
  pcy_kernel scale_f16 = nullptr, scale_bf16 = nullptr; // the half gemm's k == 0 / alpha == 0
  std::string kernels_reason; // why our kernels are missing (NVRTC absent, build failed)

  ~cuda_context() { // the kernels, the program and the memory go with device_context
    if (handle != nullptr) {
      try {
        current();
      } catch (...) { // tearing down: nothing to report to
      }
      api->cublasDestroy_v2(handle);
    }
  }

  // Our kernels for a call over `elements` elements: launched early up to early_max bytes, the
  // usual way above (see early_max).
  template <class T> const own_kernels& kernels(const char* op, uint64_t elements = 0) const {
    if (!kernels_reason.empty())
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(op,
                         " on CUDA needs the bundle's own kernels for reference-BLAS "
                         "semantics, which are not available: ",
                         kernels_reason));
    const bool late = elements > early_max / sizeof(T);
    return std::is_same_v<T, float> ? (late ? f32_late : f32) : (late ? f64_late : f64);
  }
  void launch(pcy_queue q, pcy_kernel k, uint64_t global, uint32_t local,
              std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, k, 1, {global, 1, 1}, {local, 1, 1}, args);
  }
  // Whether our kernel serves a BLAS-1 call of n elements (two compares on the usual path).
  template <class T> bool own(l1_op op, int64_t n, int64_t inc) const {
    const size_t d = std::is_same_v<T, float> ? 0 : 1;
    if (!kernels_reason.empty()) return false; // cuBLAS, or the reason for what needs ours
    const uint64_t un = static_cast<uint64_t>(n);
    return (inc == 1 ? un >= own_from.contiguous[op][d] && un < own_from.until[op][d]
                     : un >= own_from.strided[op][d]) ||
           n > INT32_MAX;
  }
  // Our vector path applies: increments 1, element-aligned pointers, x and y misaligned alike.
  template <class T> static int vec_ok(int64_t incx, const void* x, int64_t incy, const void* y) {
    const auto ax = reinterpret_cast<uintptr_t>(x), ay = reinterpret_cast<uintptr_t>(y);
    return incx == 1 && incy == 1 && ax % sizeof(T) == 0 && (ax & 15) == (ay & 15) ? 1 : 0;
  }
  // Threads of a BLAS-1 kernel: one vector per thread, at most SMs x blocks per SM blocks (the
  // kernels loop with a grid stride).
  // `oversubscribe`: a grid that many times larger (swap's four streams keep more loads in
  // flight with more, shorter blocks: 88.5-89.2 % of device-copy bandwidth at 64 MiB-1 GiB with 4
  // blocks per SM, 91.0-93.8 % with 16; H200, 2026-12-02).
  uint64_t l1_threads(uint64_t n, uint64_t per_vector, uint64_t oversubscribe = 1) const {
    const uint64_t blocks = std::clamp<uint64_t>((n / per_vector + l1_block - 1) / l1_block, 1,
                                                 max_blocks * oversubscribe);
    return blocks * l1_block;
  }
  // result[0] = asum / nrm2 / dot on the device: one launch (the last block combines).
  template <class T>
  void reduce(pcy_queue q, pcy_kernel k, int64_t n, const T* x, int64_t incx, const T* y,
              int64_t incy, T* result) const {
    const long long ln = n, lix = incx, liy = incy;
    const int vec = vec_ok<T>(incx, x, y != nullptr ? incy : 1, y != nullptr ? y : x);
    const void *px = x, *py = y, *pr = result;
    const uint64_t threads = l1_threads(static_cast<uint64_t>(n), 16 / sizeof(T));
    if (y == nullptr)
      launch(q, k, threads, l1_block,
             {val(ln), val(px), val(lix), val(vec), val(partials_dev), val(counter_dev), val(pr)});
    else
      launch(q, k, threads, l1_block,
             {val(ln), val(px), val(lix), val(py), val(liy), val(vec), val(partials_dev),
              val(counter_dev), val(pr)});
  }
  // Threads for a grid-stride kernel over `count` elements: enough to fill the device.
  static uint64_t threads_for(uint64_t count) {
    return std::clamp<uint64_t>((count + 255) / 256 * 256, 256, uint64_t(256) * 4096);
  }
  // The guard buffer, grown to `bytes` (after the stream drained: work may still use it).
  void* guard_ptr(uint64_t bytes) {
    if (bytes > guard_bytes) {
      if (guard_mem != nullptr) {
        sdk::check(fw->queue_finish(queue));
        free(guard_mem);
        guard_mem = nullptr;
        guard_bytes = 0;
      }
      guard_mem = alloc(bytes);
      guard_bytes = bytes;
    }
    return native(guard_mem);
  }

  void check(cublasStatus_t s, const char* what) const {
    if (s != CUBLAS_STATUS_SUCCESS)
      sdk::fail(s == CUBLAS_STATUS_NOT_SUPPORTED ? PCY_ERR_UNSUPPORTED : PCY_ERR_DEVICE,
                sdk::str(what, " failed: ", api->cublasGetStatusString(s)));
  }
  void pointer_mode(cublasPointerMode_t m) {
    if (m == mode) return;
    check(api->cublasSetPointerMode_v2(handle, m), "cublasSetPointerMode");
    mode = m;
  }
  template <class T> T* dptr(const pcy_tensor& t) const {
    void* base = t.data != nullptr ? t.data : native(t.memory); // resolved once by the host
    return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(base) + t.byte_offset);
  }
  // A scalar as our kernels take it: host value plus a device pointer that replaces it.
  template <class T> std::pair<T, const void*> kscalar(const blas_bundle::scalar_arg& s) const {
    if (s.tensor != nullptr) return {T(0), dptr<T>(*s.tensor)};
    return {static_cast<T>(s.value), nullptr};
  }
  // Scalars for one call: both on the host (pointer mode host) or both on the device.
  template <class T> struct scalars {
    T host[2] = {0, 0};
    const T* ptr[2] = {nullptr, nullptr};
  };
  template <class T>
  scalars<T> prepare(const pcy_queue q, const blas_bundle::scalar_arg& s0,
                     const blas_bundle::scalar_arg* s1) {
    scalars<T> r;
    const bool t0 = s0.tensor != nullptr, t1 = s1 != nullptr && s1->tensor != nullptr;
    if (!t0 && !t1) {
      pointer_mode(CUBLAS_POINTER_MODE_HOST);
      r.host[0] = static_cast<T>(s0.value);
      r.host[1] = s1 ? static_cast<T>(s1->value) : T(0);
      r.ptr[0] = &r.host[0];
      r.ptr[1] = &r.host[1];
      return r;
    }
    pointer_mode(CUBLAS_POINTER_MODE_DEVICE);
    for (int i = 0; i < 2; ++i) {
      const blas_bundle::scalar_arg* s = i == 0 ? &s0 : s1;
      if (s == nullptr) continue;
      if (s->tensor != nullptr) {
        r.ptr[i] = dptr<T>(*s->tensor);
        continue;
      }
      // Mixed host/device scalars: stage the host one in device scratch (a blocking write, so
      // the host value need not outlive the call; rare, and documented as slower).
      const T v = static_cast<T>(s->value);
      pcy_memory_transfer_args w{};
      w.struct_size = sizeof w;
      w.queue = q;
      w.memory = scratch;
      w.offset = static_cast<uint64_t>(i) * sizeof(double);
      w.host_pointer = const_cast<T*>(&v);
      w.bytes = sizeof(T);
      w.blocking = true;
      sdk::check(fw->memory_write(&w));
      r.ptr[i] = reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(native(scratch)) +
                                            static_cast<uintptr_t>(i) * sizeof(double));
    }
    return r;
  }
  // Writes 0 to a one-element result (asum/dot/nrm2 of nothing).
  template <class T> void zero_result(pcy_queue q, const pcy_tensor& t) const {
    const T zero = 0;
    fill(q, t.memory, t.byte_offset, sizeof(T), &zero, sizeof(T));
  }
  // x = beta * x over a rows x cols window, ld apart (beta == 0: zeros, x not read).
  template <class T>
  void scale(pcy_queue q, const char* op, int64_t rows, int64_t cols, int64_t ld,
             const blas_bundle::scalar_arg& beta, T* x) const {
    const long long total = rows * cols; // <= the tensor's element count (decoder-checked)
    if (total == 0) return;
    const own_kernels& k = kernels<T>(op, static_cast<uint64_t>(total));
    const int ncols = to_int(cols, op, "n");
    const long long lld = ld;
    const auto [b, pb] = kscalar<T>(beta);
    const void* px = x;
    launch(q, k.scale, threads_for(static_cast<uint64_t>(total)), 256,
           {val(total), val(ncols), val(b), val(pb), val(px), val(lld)});
  }
  // The same in f16 / bf16 (beta applied in float, rounded once).
  void scale_half(pcy_queue q, pcy_dtype d, int64_t rows, int64_t cols, int64_t ld, float beta,
                  void* x) const {
    if (!kernels_reason.empty())
      sdk::fail(
          PCY_ERR_UNSUPPORTED,
          sdk::str("gemm with k == 0 or alpha == 0 in ", sdk::dtype_name(d),
                   " needs the bundle's own kernels, which are not available: ", kernels_reason));
    const long long total = rows * cols;
    if (total == 0) return;
    const int ncols = to_int(cols, "gemm", "n");
    const long long lld = ld;
    const void* px = x;
    launch(q, d == PCY_DTYPE_F16 ? scale_f16 : scale_bf16,
           threads_for(static_cast<uint64_t>(total)), 256,
           {val(total), val(ncols), val(beta), val(px), val(lld)});
  }
  // Around a cuBLAS call with a device-resident alpha: keeps beta * out of the window when
  // alpha is 0 (save) and puts it back afterwards (restore); both do nothing otherwise.
  template <class T>
  void guard_window(pcy_queue q, bool restore, const char* op, int64_t rows, int64_t cols,
                    int64_t ld, const T* alpha, const T* beta, T* out) {
    const long long total = rows * cols, lld = ld;
    const own_kernels& k = kernels<T>(op, static_cast<uint64_t>(total));
    const int ncols = to_int(cols, op, "n");
    const void* saved = guard_ptr(static_cast<uint64_t>(total) * sizeof(T));
    const void *pa = alpha, *pb = beta, *po = out;
    const T b = 0;
    if (!restore)
      launch(q, k.save, threads_for(static_cast<uint64_t>(total)), 256,
             {val(pa), val(b), val(pb), val(total), val(ncols), val(po), val(lld), val(saved)});
    else
      launch(q, k.restore, threads_for(static_cast<uint64_t>(total)), 256,
             {val(pa), val(total), val(ncols), val(saved), val(po), val(lld)});
  }
};

cublasOperation_t op_of(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <class T, int Which> void reduction(cuda_context& cx, const sdk::op_args& a) {
  const char* name = Which == 0 ? "asum" : "dot";
  const blas_call c =
      Which == 0 ? blas_bundle::decode_asum(a, dt<T>) : blas_bundle::decode_dot(a, dt<T>);
  if (c.n == 0) { // the sum of nothing is 0, whatever the library does with n == 0
    cx.zero_result<T>(a.queue(), *c.result);
    return;
  }
  T* r = cx.dptr<T>(*c.result);
  const bool two = Which != 0;
  const int64_t incy = two ? c.y.inc : 1;
  if (cx.own<T>(Which == 0 ? L1_ASUM : L1_DOT, c.n, std::max(c.x.inc, incy))) {
    const own_kernels& k = cx.kernels<T>(name, static_cast<uint64_t>(c.n));
    cx.reduce<T>(a.queue(), two ? k.dot : k.asum, c.n, cx.dptr<T>(*c.x.t), c.x.inc,
                 two ? cx.dptr<T>(*c.y.t) : nullptr, incy, r);
    return;
  }
  cx.current();
  cx.pointer_mode(CUBLAS_POINTER_MODE_DEVICE); // the result stays on the device
  const int n = to_int(c.n, name, "n"), incx = to_int(c.x.inc, name, "incx");
  if constexpr (Which == 0)
    cx.check(cub<T>::asum(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, r), "cublas asum");
  else
    cx.check(cub<T>::dot(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, cx.dptr<T>(*c.y.t),
                                  to_int(c.y.inc, name, "incy"), r),
             "cublas dot");
}
template <class T> void op_asum(cuda_context& cx, const sdk::op_args& a) { reduction<T, 0>(cx, a); }
template <class T> void op_dot(cuda_context& cx, const sdk::op_args& a) { reduction<T, 2>(cx, a); }

// Always our kernel (a scaled sum of squares): cuBLAS's nrm2 returns 0 for small f32 values
// and denormals. One launch, the result stays on the device; n == 0 gives 0.
template <class T> void op_nrm2(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_nrm2(a, dt<T>);
  const own_kernels& k = cx.kernels<T>("nrm2", static_cast<uint64_t>(c.n));
  if (c.n == 0) {
    cx.zero_result<T>(a.queue(), *c.result);
    return;
  }
  cx.reduce<T>(a.queue(), k.nrm2, c.n, cx.dptr<T>(*c.x.t), c.x.inc, nullptr, 1,
               cx.dptr<T>(*c.result));
}

// Our elementwise BLAS-1 kernels: (n, [a, pa,] x, incx, [y, incy,] vec).
template <class T>
void own_l1(cuda_context& cx, pcy_queue q, pcy_kernel k, int64_t n,
            const std::pair<T, const void*>* alpha, const T* x, int64_t incx, const T* y,
            int64_t incy, uint64_t oversubscribe = 1, pcy_kernel small = nullptr) {
  const long long ln = n, lix = incx, liy = incy;
  const void *px = x, *py = y;
  if (small != nullptr && n <= small_max) { // one element per thread, same arguments but vec
    const uint64_t threads = static_cast<uint64_t>(n);
    if (alpha != nullptr && y != nullptr) // axpy
      cx.launch(
          q, small, threads, l1_block,
          {val(ln), val(alpha->first), val(alpha->second), val(px), val(lix), val(py), val(liy)});
    else if (alpha != nullptr) // scal
      cx.launch(q, small, threads, l1_block,
                {val(ln), val(alpha->first), val(alpha->second), val(px), val(lix)});
    else // copy
      cx.launch(q, small, threads, l1_block, {val(ln), val(px), val(lix), val(py), val(liy)});
    return;
  }
  const int vec = cuda_context::vec_ok<T>(incx, x, y != nullptr ? incy : 1, y != nullptr ? y : x);
  const uint64_t threads = cx.l1_threads(static_cast<uint64_t>(n), 16 / sizeof(T), oversubscribe);
  if (alpha != nullptr && y != nullptr) // axpy
    cx.launch(q, k, threads, l1_block,
              {val(ln), val(alpha->first), val(alpha->second), val(px), val(lix), val(py), val(liy),
               val(vec)});
  else if (alpha != nullptr) // scal
    cx.launch(q, k, threads, l1_block,
              {val(ln), val(alpha->first), val(alpha->second), val(px), val(lix), val(vec)});
  else // copy, swap
    cx.launch(q, k, threads, l1_block, {val(ln), val(px), val(lix), val(py), val(liy), val(vec)});
}

template <class T> void op_axpy(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  if (c.n == 0 || c.alpha.is_zero()) return; // reference axpy: y untouched, x not read
  // A device alpha of 0 must return too: our kernel looks at it on the device.
  if (c.alpha.tensor != nullptr || cx.own<T>(L1_AXPY, c.n, std::max(c.x.inc, c.y.inc))) {
    const own_kernels& k = cx.kernels<T>("axpy", static_cast<uint64_t>(c.n));
    const auto al = cx.kscalar<T>(c.alpha);
    own_l1<T>(cx, a.queue(), k.axpy, c.n, &al, cx.dptr<T>(*c.x.t), c.x.inc, cx.dptr<T>(*c.y.t),
              c.y.inc, 1, k.axpy_small);
    return;
  }
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, nullptr);
  cx.check(cub<T>::axpy(*cx.api)(cx.handle, to_int(c.n, "axpy", "n"), s.ptr[0], cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "axpy", "incx"), cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "axpy", "incy")),
           "cublas axpy");
}
// cuBLAS has no axpby; scal + axpy read y with beta == 0 (NaN survives) and x with
// alpha == 0: our kernel does it in one pass, host or device scalars alike.
template <class T> void op_axpby(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpby(a, dt<T>);
  if (c.n == 0) return;
  const own_kernels& k = cx.kernels<T>("axpby", static_cast<uint64_t>(c.n));
  const long long n = c.n, incx = c.x.inc, incy = c.y.inc;
  const auto [al, pa] = cx.kscalar<T>(c.alpha);
  const auto [be, pb] = cx.kscalar<T>(c.beta);
  const T *x = cx.dptr<T>(*c.x.t), *y = cx.dptr<T>(*c.y.t);
  const int vec = cuda_context::vec_ok<T>(incx, x, incy, y);
  const void *px = x, *py = y;
  cx.launch(a.queue(), k.axpby, cx.l1_threads(static_cast<uint64_t>(n), 16 / sizeof(T)), l1_block,
            {val(n), val(al), val(pa), val(be), val(pb), val(px), val(incx), val(py), val(incy),
             val(vec)});
}
template <class T> void op_scal(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_scal(a, dt<T>);
  if (c.n == 0) return;
  if (cx.own<T>(L1_SCAL, c.n, c.x.inc)) {
    const own_kernels& k = cx.kernels<T>("scal", static_cast<uint64_t>(c.n));
    const auto al = cx.kscalar<T>(c.alpha);
    own_l1<T>(cx, a.queue(), k.scal, c.n, &al, cx.dptr<T>(*c.x.t), c.x.inc, nullptr, 1, 1,
              k.scal_small);
    return;
  }
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, nullptr);
  cx.check(cub<T>::scal(*cx.api)(cx.handle, to_int(c.n, "scal", "n"), s.ptr[0], cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "scal", "incx")),
           "cublas scal");
}
template <class T> void op_copy(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_copy(a, dt<T>);
  if (c.n == 0) return;
  if (cx.own<T>(L1_COPY, c.n, std::max(c.x.inc, c.y.inc))) {
    const own_kernels& k = cx.kernels<T>("copy", static_cast<uint64_t>(c.n));
    own_l1<T>(cx, a.queue(), k.copy, c.n, nullptr, cx.dptr<T>(*c.x.t), c.x.inc, cx.dptr<T>(*c.y.t),
              c.y.inc, 1, k.copy_small);
    return;
  }
  cx.current();
  cx.check(cub<T>::copy(*cx.api)(cx.handle, to_int(c.n, "copy", "n"), cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "copy", "incx"), cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "copy", "incy")),
           "cublas copy");
}
template <class T> void op_swap(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_swap(a, dt<T>);
  if (c.n == 0) return;
  if (cx.own<T>(L1_SWAP, c.n, std::max(c.x.inc, c.y.inc))) {
    own_l1<T>(cx, a.queue(), cx.kernels<T>("swap", static_cast<uint64_t>(c.n)).swap, c.n, nullptr,
              cx.dptr<T>(*c.x.t), c.x.inc, cx.dptr<T>(*c.y.t), c.y.inc, 4);
    return;
  }
  cx.current();
  cx.check(cub<T>::swap(*cx.api)(cx.handle, to_int(c.n, "swap", "n"), cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "swap", "incx"), cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "swap", "incy")),
           "cublas swap");
}
template <class T> void op_gemv(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemv(a, dt<T>);
  if (c.m == 0 || c.n == 0) return; // reference BLAS: y stays exactly as it was
  const int64_t ny = c.ta ? c.n : c.m;
  T* y = cx.dptr<T>(*c.y.t);
  if (c.alpha.is_zero()) { // y = beta * y; A and x are not read
    cx.scale<T>(a.queue(), "gemv", ny, 1, c.y.inc, c.beta, y);
    return;
  }
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  const bool guarded = c.alpha.tensor != nullptr;
  if (guarded) cx.guard_window<T>(a.queue(), false, "gemv", ny, 1, c.y.inc, s.ptr[0], s.ptr[1], y);
  // Row-major A (m x n) is column-major A^T (n x m): flip the transpose.
  cx.check(cub<T>::gemv(*cx.api)(
               cx.handle, op_of(!c.ta), to_int(c.n, "gemv", "n"), to_int(c.m, "gemv", "m"),
               s.ptr[0], cx.dptr<T>(*c.A), to_int(c.lda, "gemv", "lda"), cx.dptr<T>(*c.x.t),
               to_int(c.x.inc, "gemv", "incx"), s.ptr[1], y, to_int(c.y.inc, "gemv", "incy")),
           "cublas gemv");
  if (guarded) cx.guard_window<T>(a.queue(), true, "gemv", ny, 1, c.y.inc, s.ptr[0], s.ptr[1], y);
}
// One product C = alpha op(A) op(B) + beta C through cuBLAS, k > 0, the context current and
// the scalars prepared. A device alpha may be 0, which cuBLAS (dgemm) multiplies into NaN in A
// or B: the call is guarded, in blocks of rows of C so the saved window stays bounded (one
// block when it fits).
template <class T>
void gemm_product(cuda_context& cx, pcy_queue q, const blas_call& c,
                  const cuda_context::scalars<T>& s, const T* A, const T* B, T* C, const char* op) {
  const int n = to_int(c.n, op, "n"), k = to_int(c.k, op, "k");
  const int lda = to_int(c.lda, op, "lda"), ldb = to_int(c.ldb, op, "ldb"),
            ldc = to_int(c.ldc, op, "ldc");
  const bool guarded = c.alpha.tensor != nullptr;
  const int64_t rows =
      guarded ? std::max<int64_t>(1, static_cast<int64_t>(guard_elements) / c.n) : c.m;
  for (int64_t i0 = 0; i0 < c.m; i0 += rows) {
    const int64_t mb = std::min(rows, c.m - i0);
    T* Cb = C + i0 * c.ldc;
    // Rows i0.. of op(A): rows of A, or its columns when A is transposed.
    const T* Ab = A + (c.ta ? i0 : i0 * c.lda);
    if (guarded) cx.guard_window<T>(q, false, op, mb, c.n, c.ldc, s.ptr[0], s.ptr[1], Cb);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    cx.check(cub<T>::gemm(*cx.api)(cx.handle, op_of(c.tb), op_of(c.ta), n, to_int(mb, op, "m"), k,
                                   s.ptr[0], B, ldb, Ab, lda, s.ptr[1], Cb, ldc),
             "cublas gemm");
    if (guarded) cx.guard_window<T>(q, true, op, mb, c.n, c.ldc, s.ptr[0], s.ptr[1], Cb);
  }
}

template <class T> void op_gemm(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, dt<T>);
  if (c.m == 0 || c.n == 0) return;
  T* C = cx.dptr<T>(*c.C);
  if (c.k == 0 || c.alpha.is_zero()) { // C = beta * C; A and B are not read
    cx.scale<T>(a.queue(), "gemm", c.m, c.n, c.ldc, c.beta, C);
    return;
  }
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  gemm_product<T>(cx, a.queue(), c, s, cx.dptr<T>(*c.A), cx.dptr<T>(*c.B), C, "gemm");
}

// gemm_batched: one cublas?gemmStridedBatched for the whole batch (stride 0 broadcasts an
// operand). The quick paths scale each C_i with our kernel (a launch per product: they are
// rare); a device-resident alpha runs the products one by one through gemm's guarded path.
template <class T> void op_gemm_batched(cuda_context& cx, const sdk::op_args& a) {
  const blas_bundle::gemm_batched_call c = blas_bundle::decode_gemm_batched(a, dt<T>);
  const char* op = "gemm_batched";
  if (c.m == 0 || c.n == 0 || c.batch == 0) return;
  T* C = cx.dptr<T>(*c.C);
  if (c.k == 0 || c.alpha.is_zero()) { // C_i = beta * C_i; A and B are not read
    for (int64_t i = 0; i < c.batch; ++i)
      cx.scale<T>(a.queue(), op, c.m, c.n, c.ldc, c.beta, C + i * c.stride_c);
    return;
  }
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  const T* A = cx.dptr<T>(*c.A);
  const T* B = cx.dptr<T>(*c.B);
  if (c.alpha.tensor != nullptr) {
    for (int64_t i = 0; i < c.batch; ++i)
      gemm_product<T>(cx, a.queue(), c, s, A + i * c.stride_a, B + i * c.stride_b,
                      C + i * c.stride_c, op);
    return;
  }
  // Row-major C_i = op(A_i) op(B_i) is column-major C_i^T = op(B_i)^T op(A_i)^T: swap operands.
  cx.check(cub<T>::gemm_batched(*cx.api)(
               cx.handle, op_of(c.tb), op_of(c.ta), to_int(c.n, op, "n"), to_int(c.m, op, "m"),
               to_int(c.k, op, "k"), s.ptr[0], B, to_int(c.ldb, op, "ldb"), c.stride_b, A,
               to_int(c.lda, op, "lda"), c.stride_a, s.ptr[1], C, to_int(c.ldc, op, "ldc"),
               c.stride_c, to_int(c.batch, op, "batch")),
           "cublas gemmStridedBatched");
}

// gemm in f16 / bf16: cublasGemmEx with f32 accumulation (CUBLAS_COMPUTE_32F: tensor cores,
// no reduced-precision reduction), alpha and beta applied in f32, C rounded once to the storage
// type. Scalars are host values (the front-end refuses device-resident ones for these dtypes).
template <pcy_dtype D> void op_gemm_half(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, D);
  if (c.alpha.tensor != nullptr || c.beta.tensor != nullptr)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("blas.gemm (", sdk::dtype_name(D),
                       "): a device-resident alpha or beta is not supported in this dtype; pass "
                       "them as numbers (applied in f32)"));
  if (c.m == 0 || c.n == 0) return;
  void* C = cx.dptr<uint16_t>(*c.C);
  const float alpha = static_cast<float>(c.alpha.value), beta = static_cast<float>(c.beta.value);
  if (c.k == 0 || alpha == 0.f) { // C = beta * C; A and B are not read
    cx.scale_half(a.queue(), D, c.m, c.n, c.ldc, beta, C);
    return;
  }
  cx.current();
  cx.pointer_mode(CUBLAS_POINTER_MODE_HOST);
  const cudaDataType t = D == PCY_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  cx.check(cx.api->cublasGemmEx(cx.handle, op_of(c.tb), op_of(c.ta), to_int(c.n, "gemm", "n"),
                                to_int(c.m, "gemm", "m"), to_int(c.k, "gemm", "k"), &alpha,
                                cx.dptr<uint16_t>(*c.B), t, to_int(c.ldb, "gemm", "ldb"),
                                cx.dptr<uint16_t>(*c.A), t, to_int(c.lda, "gemm", "lda"), &beta, C,
                                t, to_int(c.ldc, "gemm", "ldc"), CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
           "cublasGemmEx");
}

// gemm_batched in f16 / bf16: cublasGemmStridedBatchedEx, as op_gemm_half per product.
template <pcy_dtype D> void op_gemm_batched_half(cuda_context& cx, const sdk::op_args& a) {
  const blas_bundle::gemm_batched_call c = blas_bundle::decode_gemm_batched(a, D);
  const char* op = "gemm_batched";
  if (c.alpha.tensor != nullptr || c.beta.tensor != nullptr)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("blas.gemm_batched (", sdk::dtype_name(D),
                       "): a device-resident alpha or beta is not supported in this dtype; pass "
                       "them as numbers (applied in f32)"));
  if (c.m == 0 || c.n == 0 || c.batch == 0) return;
  auto* C = cx.dptr<uint16_t>(*c.C);
  const float alpha = static_cast<float>(c.alpha.value), beta = static_cast<float>(c.beta.value);
  if (c.k == 0 || alpha == 0.f) { // C_i = beta * C_i; A and B are not read
    for (int64_t i = 0; i < c.batch; ++i)
      cx.scale_half(a.queue(), D, c.m, c.n, c.ldc, beta, C + i * c.stride_c);
    return;
  }
  cx.current();
  cx.pointer_mode(CUBLAS_POINTER_MODE_HOST);
  const cudaDataType t = D == PCY_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
  // Row-major C_i = op(A_i) op(B_i) is column-major C_i^T = op(B_i)^T op(A_i)^T: swap operands.
  cx.check(cx.api->cublasGemmStridedBatchedEx(
               cx.handle, op_of(c.tb), op_of(c.ta), to_int(c.n, op, "n"), to_int(c.m, op, "m"),
               to_int(c.k, op, "k"), &alpha, cx.dptr<uint16_t>(*c.B), t, to_int(c.ldb, op, "ldb"),
               c.stride_b, cx.dptr<uint16_t>(*c.A), t, to_int(c.lda, op, "lda"), c.stride_a, &beta,
               C, t, to_int(c.ldc, op, "ldc"), c.stride_c, to_int(c.batch, op, "batch"),
               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           "cublasGemmStridedBatchedEx");
}

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_BLAS_EXTENSION, "cuda",
    "BLAS on CUDA: cuBLAS (loaded at run time) and our own vectorised kernels"};

class blas_cuda_bundle : public sdk::bundle_base<identity, cuda_context> {
public:
  explicit blas_cuda_bundle(const pcy_host_services& host) : bundle_base(host) {
    if (!load()) {
      log_.info(reason_);
      return; // loads, serves no op, says why
    }
    choose();
    add<op_asum<float>, op_asum<double>>(pcy_blas_asum_schema, "asum", nullptr, L1_ASUM);
    add<op_axpy<float>, op_axpy<double>>(pcy_blas_axpy_schema, "axpy", nullptr, L1_AXPY);
    add<op_axpby<float>, op_axpby<double>>(pcy_blas_axpby_schema, nullptr);
    add<op_copy<float>, op_copy<double>>(pcy_blas_copy_schema, "copy", PCY_BLAS_COPY_SIG, L1_COPY);
    add<op_dot<float>, op_dot<double>>(pcy_blas_dot_schema, "dot", nullptr, L1_DOT);
    add<op_nrm2<float>, op_nrm2<double>>(pcy_blas_nrm2_schema, nullptr);
    add<op_scal<float>, op_scal<double>>(pcy_blas_scal_schema, "scal", nullptr, L1_SCAL);
    add<op_swap<float>, op_swap<double>>(pcy_blas_swap_schema, "swap", nullptr, L1_SWAP);
    add<op_gemv<float>, op_gemv<double>>(pcy_blas_gemv_schema, "gemv");
    add<op_gemm<float>, op_gemm<double>>(pcy_blas_gemm_schema, "gemm");
    add<op_gemm_batched<float>, op_gemm_batched<double>>(pcy_blas_gemm_batched_schema,
                                                         "gemmStridedBatched");
    if (api_.cublasGemmEx != nullptr) {
      const std::string half =
          sdk::str("cuBLAS (", soname_, ") cublasGemmEx, f32 accumulation (CUBLAS_COMPUTE_32F)");
      table_.add<op_gemm_half<PCY_DTYPE_F16>>(pcy_blas_gemm_schema, PCY_DTYPE_F16, half);
      table_.add<op_gemm_half<PCY_DTYPE_BF16>>(pcy_blas_gemm_schema, PCY_DTYPE_BF16, half);
    }
    if (api_.cublasGemmStridedBatchedEx != nullptr) {
      const std::string half = sdk::str("cuBLAS (", soname_,
                                        ") cublasGemmStridedBatchedEx, f32 accumulation "
                                        "(CUBLAS_COMPUTE_32F)");
      table_.add<op_gemm_batched_half<PCY_DTYPE_F16>>(pcy_blas_gemm_batched_schema, PCY_DTYPE_F16,
                                                      half);
      table_.add<op_gemm_batched_half<PCY_DTYPE_BF16>>(pcy_blas_gemm_batched_schema, PCY_DTYPE_BF16,
                                                       half);
    }
  }
  blas_cuda_bundle(const blas_cuda_bundle&) = delete;
  blas_cuda_bundle& operator=(const blas_cuda_bundle&) = delete;
  ~blas_cuda_bundle() {
    // Left loaded on purpose: cuBLAS registers atexit work; unloading it early can crash.
    (void)lib_;
  }

  const char* reason() const { return reason_.empty() ? nullptr : reason_.c_str(); }
  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    if (!reason_.empty()) sdk::fail(PCY_ERR_UNAVAILABLE, reason_);
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_memory_alloc,
                        PCY_FRAMEWORK_SLOT_memory_fill, PCY_FRAMEWORK_SLOT_memory_write,
                        PCY_FRAMEWORK_SLOT_queue_finish});
    auto cx = std::make_unique<cuda_context>(a, api_);
    cx->current(); // cuBLAS runs in the calling thread's current context: the backend's
    cublasHandle_t h = nullptr;
    cx->check(api_.cublasCreate_v2(&h), "cublasCreate");
    cx->handle = h;
    cx->check(api_.cublasSetStream_v2(h, cx->stream), "cublasSetStream");
    cx->check(api_.cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    cx->scratch = cx->alloc(2 * sizeof(double));
    // The reductions' counter (0 between reductions: each last block resets it) and partials.
    cx->partials = cx->alloc(counter_bytes + 3 * uint64_t(max_l1_blocks) * sizeof(double));
    const uint32_t zero = 0;
    cx->fill(a.queue, cx->partials, 0, counter_bytes, &zero, sizeof zero);
    sdk::check(a.framework->queue_finish(a.queue));
    const auto base = reinterpret_cast<uintptr_t>(cx->native(cx->partials));
    cx->counter_dev = reinterpret_cast<const void*>(base);
    cx->partials_dev = reinterpret_cast<const void*>(base + counter_bytes);
    // BLAS-1 grids: SMs x blocks per SM (a grid-stride loop does the rest); the H200's 132 SMs
    // where the device does not say.
    const int64_t units = sdk::device_facts_of(a).compute_units;
    const uint64_t sms = units > 0 ? static_cast<uint64_t>(units) : 132;
    cx->max_blocks = std::clamp<uint64_t>(sms * blocks_per_sm_, 1, max_l1_blocks);
    cx->own_from = own_from_;
    build_kernels(*cx);
    return cx.release();
  }

private:
  // Our kernels, once per context (the framework caches the cubin on disk). Without them
  // (no NVRTC, a failed build) the context still serves what cuBLAS does the reference way;
  // the ops that need them fail with the reason.
  void build_kernels(cuda_context& cx) {
    const pcy_framework_api& fw = *cx.fw;
    if (fw.program_build == nullptr || fw.kernel_create == nullptr || fw.kernel_launch == nullptr) {
      cx.kernels_reason = sdk::str("framework '", fw.name, "' cannot build or launch programs");
      log_.warn(cx.kernels_reason);
      return;
    }
    sdk::device_context::build_failure failed;
    bool cache_hit = false;
    const pcy_program program = cx.build(blas_cuda::kernel_source(), nullptr, &failed, &cache_hit);
    if (program == nullptr) {
      cx.kernels_reason = sdk::str("building them failed: ", failed.message);
      log_.warn("our CUDA kernels are missing (", cx.kernels_reason, ")",
                "; nrm2, axpby, and axpy/gemv/gemm with a "
                "device-resident alpha or a zero alpha/k will fail; the other BLAS-1 ops use "
                "cuBLAS at every size");
      return;
    }
    log_.debug("built the CUDA kernels", cache_hit ? " (from the cache)" : "");
    for (const bool f64 : {false, true})
      for (const bool late : {false, true}) {
        own_kernels& k = f64 ? (late ? cx.f64_late : cx.f64) : (late ? cx.f32_late : cx.f32);
        auto slots = k.all();
        for (size_t i = 0; i < slots.size(); ++i)
          // Each begins with PCY_WAIT_PRIOR(): it may start early.
          *slots[i] = cx.kernel(program,
                                sdk::str(blas_cuda::kernel_names[i], f64 ? "_f64" : "_f32").c_str(),
                                late ? 0u : static_cast<uint32_t>(PCY_KERNEL_WAITS_FOR_PRIOR));
      }
    cx.scale_f16 = cx.kernel(program, "scale_f16", PCY_KERNEL_WAITS_FOR_PRIOR);
    cx.scale_bf16 = cx.kernel(program, "scale_bf16", PCY_KERNEL_WAITS_FOR_PRIOR);
  }

  bool load() {
    // The driver is already loaded by the CUDA framework plugin; we need two of its calls.
    reason_ = api_.driver.load();
    if (!reason_.empty()) return false;
    const sdk::cuda_library cublas = sdk::open_cuda_library(
        settings_, {"libcublas.so.13", "libcublas.so.12"}, {"libcublas.so.13", "libcublas.so.12"});
    lib_ = cublas.handle;
    soname_ = cublas.soname;
    if (lib_ == nullptr) {
      reason_ = sdk::str("libcublas.so.13 not found: ", cublas.first_error,
                         " (also tried libcublas.so.12 and /usr/local/cuda/lib64); install cuBLAS "
                         "or add its directory to LD_LIBRARY_PATH");
      return false;
    }
#define PARENCHYMA_RESOLVE(f)                                                                      \
  api_.f = reinterpret_cast<decltype(api_.f)>(dlsym(lib_, #f));                                    \
  if (api_.f == nullptr) {                                                                         \
    reason_ = sdk::str(soname_, " lacks ", #f, ": use cuBLAS 12 or newer");                        \
    return false;                                                                                  \
  }
    PARENCHYMA_CUBLAS_FUNCTIONS(PARENCHYMA_RESOLVE)
#undef PARENCHYMA_RESOLVE
    api_.cublasGemmEx = reinterpret_cast<cublas_api::gemm_ex_fn>(dlsym(lib_, "cublasGemmEx"));
    if (api_.cublasGemmEx == nullptr)
      log_.info(soname_, " lacks cublasGemmEx: gemm in f16 and bf16 is not served on CUDA");
    api_.cublasGemmStridedBatchedEx = reinterpret_cast<cublas_api::gemm_strided_batched_ex_fn>(
        dlsym(lib_, "cublasGemmStridedBatchedEx"));
    if (api_.cublasGemmStridedBatchedEx == nullptr)
      log_.info(soname_, " lacks cublasGemmStridedBatchedEx: gemm_batched in f16 and bf16 is not "
                         "served on CUDA");
    return true;
  }

  // The BLAS-1 choice (measured_own_from), read once: PARENCHYMA_BLAS_CUDA_IMPL=own|cublas
  // forces one implementation at every size and increment (nrm2, axpby and device-resident
  // alphas of axpy stay ours: cuBLAS does not give the reference semantics there);
  // PARENCHYMA_BLAS_CUDA_BLOCKS_PER_SM (1-32) sizes the BLAS-1 grids, for tuning.
  void choose() {
    for (size_t op = 0; op < L1_COUNT; ++op)
      for (size_t d = 0; d < 2; ++d) {
        const uint64_t bytes = d == 0 ? measured_own_from[op].f32 : measured_own_from[op].f64;
        const uint64_t until =
            d == 0 ? measured_own_from[op].f32_until : measured_own_from[op].f64_until;
        const uint64_t size = d == 0 ? sizeof(float) : sizeof(double);
        own_from_.contiguous[op][d] = bytes == never ? never : (bytes + size - 1) / size;
        own_from_.until[op][d] = until == never ? never : until / size;
        own_from_.strided[op][d] = op == L1_NRM2 ? always : never;
      }
    if (const char* e = settings_.find("PARENCHYMA_BLAS_CUDA_IMPL")) {
      const std::string_view v(e);
      if (v == "own" || v == "cublas") {
        log_.info("PARENCHYMA_BLAS_CUDA_IMPL=", v, ": BLAS-1 by ",
                  v == "own" ? "our kernels" : "cuBLAS", " at every size");
        for (size_t op = 0; op < L1_COUNT; ++op)
          if (op != L1_NRM2)
            for (size_t d = 0; d < 2; ++d) {
              own_from_.contiguous[op][d] = own_from_.strided[op][d] = v == "own" ? always : never;
              own_from_.until[op][d] = never;
            }
      } else {
        log_.warn("PARENCHYMA_BLAS_CUDA_IMPL=", v, " ignored: expected 'own' or 'cublas'");
      }
    }
    if (const char* e = settings_.find("PARENCHYMA_BLAS_CUDA_BLOCKS_PER_SM")) {
      const long v = std::strtol(e, nullptr, 10);
      if (v >= 1 && v <= 32)
        blocks_per_sm_ = static_cast<uint32_t>(v);
      else
        log_.warn("PARENCHYMA_BLAS_CUDA_BLOCKS_PER_SM=", e, " ignored: expected 1 to 32");
    }
  }

  template <void (*F32)(cuda_context&, const sdk::op_args&),
            void (*F64)(cuda_context&, const sdk::op_args&)>
  void add(const pcy_op_schema& schema, const char* fn, const char* sig_1_0 = nullptr,
           int l1 = -1) {
    // fn == nullptr: our own CUDA C kernel serves the op; l1 >= 0: ours or cuBLAS by size.
    const auto label = [&](const char* t) {
      const std::string ours = sdk::str("parenchyma CUDA C kernel ", schema.name, " (",
                                        t[0] == 'S' ? "f32" : "f64", ")");
      if (fn == nullptr) return ours;
      const std::string cublas = sdk::str("cuBLAS (", soname_, ") cublas", t, fn);
      if (l1 < 0) return cublas;
      const size_t d = t[0] == 'S' ? 0 : 1;
      const uint64_t from = own_from_.contiguous[static_cast<size_t>(l1)][d];
      const uint64_t until = own_from_.until[static_cast<size_t>(l1)][d];
      if (from == never) return cublas;
      if (from == always && until == never) return ours;
      if (until == never)
        return sdk::str(ours, " from ", from, " elements (increment 1), else ", cublas);
      return sdk::str(ours, " from ", from, " to ", until, " elements (increment 1), else ",
                      cublas);
    };
    table_.add<F32, F64>(schema, label("S"), label("D"), sig_1_0);
  }

  cublas_api api_;
  void* lib_ = nullptr;
  std::string soname_, reason_;
  l1_choice own_from_;
  uint32_t blocks_per_sm_ = default_blocks_per_sm;
  sdk::op_table<blas_cuda_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_cuda_bundle)
