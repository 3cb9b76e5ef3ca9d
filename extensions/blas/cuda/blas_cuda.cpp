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
#include "blas_call.hpp"

#include "kernels_cu.hpp"
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
#include <vector>

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;

constexpr const char* bundle_name = "blas_cuda";
constexpr uint32_t reduce_block = 256; // RWG in kernels_cu.hpp
constexpr uint32_t max_reduce_blocks = 1024;
constexpr uint64_t guard_elements = 1u << 22; // the gemm guard's window, per cuBLAS call

// Every cuBLAS entry point we call, resolved once at initialisation.
// clang-format off
#define PARENCHYMA_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetPointerMode_v2) \
  X(cublasGetStatusString) X(cublasGetVersion_v2) X(cublasSasum_v2) X(cublasDasum_v2) \
  X(cublasSdot_v2) X(cublasDdot_v2) X(cublasSaxpy_v2) X(cublasDaxpy_v2) \
  X(cublasScopy_v2) X(cublasDcopy_v2) X(cublasSscal_v2) X(cublasDscal_v2) \
  X(cublasSswap_v2) X(cublasDswap_v2) X(cublasSgemv_v2) X(cublasDgemv_v2) \
  X(cublasSgemm_v2) X(cublasDgemm_v2)
// clang-format on

struct cublas_api {
#define PARENCHYMA_DECLARE(f) decltype(&::f) f = nullptr;
  PARENCHYMA_CUBLAS_FUNCTIONS(PARENCHYMA_DECLARE)
#undef PARENCHYMA_DECLARE
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
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
};

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// Our kernels for one dtype (kernels_cu.hpp, suffix _f32 / _f64).
struct own_kernels {
  pcy_kernel axpby = nullptr, axpy = nullptr, scale = nullptr, save = nullptr, restore = nullptr,
             nrm2_1 = nullptr, nrm2_2 = nullptr;
  std::array<pcy_kernel*, 7> all() {
    return {&axpby, &axpy, &scale, &save, &restore, &nrm2_1, &nrm2_2};
  }
};

// A device address as a kernel argument (8 bytes; the launch copies it).
pcy_kernel_arg ptr_arg(const void* const& p) { return {PCY_ARG_SCALAR, nullptr, &p, sizeof p}; }
template <class V> pcy_kernel_arg val(const V& v) {
  return {PCY_ARG_SCALAR, nullptr, &v, sizeof(V)};
}

struct cuda_context {
  const cublas_api* api = nullptr;
  const pcy_framework_api* fw = nullptr;
  pcy_context context = nullptr;
  uint32_t device = 0;
  pcy_queue queue = nullptr;
  cublasHandle_t handle = nullptr;
  CUcontext cu_ctx = nullptr;
  CUstream stream = nullptr;
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  pcy_memory scratch = nullptr;   // device scalars for calls mixing host and device scalars
  pcy_memory partials = nullptr;  // nrm2 stage 1: three sums per block
  pcy_memory guard_mem = nullptr; // the saved output window of a guarded gemm/gemv
  uint64_t guard_bytes = 0;
  pcy_program program = nullptr;
  own_kernels f32, f64;
  std::string kernels_reason; // why our kernels are missing (NVRTC absent, build failed)

  cuda_context() = default;
  cuda_context(const cuda_context&) = delete;
  cuda_context& operator=(const cuda_context&) = delete;
  ~cuda_context() {
    if (handle != nullptr) {
      current();
      api->cublasDestroy_v2(handle);
    }
    for (own_kernels* k : {&f32, &f64})
      for (pcy_kernel* kp : k->all())
        if (*kp != nullptr) fw->kernel_destroy(*kp);
    if (program != nullptr) fw->program_destroy(program);
    for (pcy_memory m : {scratch, partials, guard_mem})
      if (m != nullptr) fw->memory_free(m);
  }

  template <class T> const own_kernels& kernels(const char* op) const {
    if (!kernels_reason.empty())
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(op,
                         " on CUDA needs the bundle's own kernels for reference-BLAS "
                         "semantics, which are not available: ",
                         kernels_reason));
    return std::is_same_v<T, float> ? f32 : f64;
  }
  void launch(pcy_queue q, pcy_kernel k, uint64_t global, uint32_t local,
              std::initializer_list<pcy_kernel_arg> args) const {
    pcy_kernel_launch_args l{};
    l.struct_size = sizeof l;
    l.queue = q;
    l.kernel = k;
    l.dims = 1;
    l.global[0] = global;
    l.global[1] = l.global[2] = 1;
    l.local[0] = local;
    l.local[1] = l.local[2] = 1;
    l.args = args.begin();
    l.arg_count = static_cast<uint32_t>(args.size());
    sdk::check(fw->kernel_launch(&l));
  }
  // Threads for a grid-stride kernel over `count` elements: enough to fill the device.
  static uint64_t threads_for(uint64_t count) {
    return std::clamp<uint64_t>((count + 255) / 256 * 256, 256, uint64_t(256) * 4096);
  }
  pcy_memory alloc(uint64_t bytes) const {
    pcy_memory_alloc_args m{};
    m.struct_size = sizeof m;
    m.context = context;
    m.device = device;
    m.bytes = bytes;
    sdk::check(fw->memory_alloc(&m));
    return m.memory;
  }
  // The guard buffer, grown to `bytes` (after the stream drained: work may still use it).
  void* guard_ptr(uint64_t bytes) {
    if (bytes > guard_bytes) {
      if (guard_mem != nullptr) {
        sdk::check(fw->queue_finish(queue));
        fw->memory_free(guard_mem);
        guard_mem = nullptr;
        guard_bytes = 0;
      }
      guard_mem = alloc(bytes);
      guard_bytes = bytes;
    }
    return mem_ptr(guard_mem);
  }
  void* mem_ptr(pcy_memory m) const {
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = PCY_NATIVE_MEMORY;
    a.memory = m;
    sdk::check(fw->native_handle(&a));
    return a.handle;
  }

  // cuBLAS runs in the calling thread's current context: make it the backend's.
  void current() const {
    CUcontext c = nullptr;
    if (api->cuCtxGetCurrent(&c) != CUDA_SUCCESS || c != cu_ctx) api->cuCtxSetCurrent(cu_ctx);
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
    void* base = t.data != nullptr ? t.data : mem_ptr(t.memory); // resolved once by the host
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
      pcy_native_handle_args a{};
      a.struct_size = sizeof a;
      a.object = PCY_NATIVE_MEMORY;
      a.memory = scratch;
      sdk::check(fw->native_handle(&a));
      r.ptr[i] = reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(a.handle) +
                                            static_cast<uintptr_t>(i) * sizeof(double));
    }
    return r;
  }
  // Writes 0 to a one-element result (asum/dot/nrm2 of nothing).
  template <class T> void zero_result(pcy_queue q, const pcy_tensor& t) const {
    pcy_memory_fill_args f{};
    f.struct_size = sizeof f;
    f.queue = q;
    f.memory = t.memory;
    f.offset = t.byte_offset;
    f.bytes = sizeof(T);
    const T zero = 0;
    f.pattern = &zero;
    f.pattern_size = sizeof(T);
    sdk::check(fw->memory_fill(&f));
  }
  // x = beta * x over a rows x cols window, ld apart (beta == 0: zeros, x not read).
  template <class T>
  void scale(pcy_queue q, const char* op, int64_t rows, int64_t cols, int64_t ld,
             const blas_bundle::scalar_arg& beta, T* x) const {
    const own_kernels& k = kernels<T>(op);
    const long long total = rows * cols; // <= the tensor's element count (decoder-checked)
    if (total == 0) return;
    const int ncols = to_int(cols, op, "n");
    const long long lld = ld;
    const auto [b, pb] = kscalar<T>(beta);
    const void* px = x;
    launch(q, k.scale, threads_for(static_cast<uint64_t>(total)), 256,
           {val(total), val(ncols), val(b), ptr_arg(pb), ptr_arg(px), val(lld)});
  }
  // Around a cuBLAS call with a device-resident alpha: keeps beta * out of the window when
  // alpha is 0 (save) and puts it back afterwards (restore); both do nothing otherwise.
  template <class T>
  void guard_window(pcy_queue q, bool restore, const char* op, int64_t rows, int64_t cols,
                    int64_t ld, const T* alpha, const T* beta, T* out) {
    const own_kernels& k = kernels<T>(op);
    const long long total = rows * cols, lld = ld;
    const int ncols = to_int(cols, op, "n");
    const void* saved = guard_ptr(static_cast<uint64_t>(total) * sizeof(T));
    const void *pa = alpha, *pb = beta, *po = out;
    const T b = 0;
    if (!restore)
      launch(q, k.save, threads_for(static_cast<uint64_t>(total)), 256,
             {ptr_arg(pa), val(b), ptr_arg(pb), val(total), val(ncols), ptr_arg(po), val(lld),
              ptr_arg(saved)});
    else
      launch(q, k.restore, threads_for(static_cast<uint64_t>(total)), 256,
             {ptr_arg(pa), val(total), val(ncols), ptr_arg(saved), ptr_arg(po), val(lld)});
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
  cx.current();
  cx.pointer_mode(CUBLAS_POINTER_MODE_DEVICE); // the result stays on the device
  const int n = to_int(c.n, name, "n"), incx = to_int(c.x.inc, name, "incx");
  T* r = cx.dptr<T>(*c.result);
  if constexpr (Which == 0)
    cx.check(cub<T>::asum(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, r), "cublas asum");
  else
    cx.check(cub<T>::dot(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, cx.dptr<T>(*c.y.t),
                                  to_int(c.y.inc, name, "incy"), r),
             "cublas dot");
}
template <class T> void op_asum(cuda_context& cx, const sdk::op_args& a) { reduction<T, 0>(cx, a); }
template <class T> void op_dot(cuda_context& cx, const sdk::op_args& a) { reduction<T, 2>(cx, a); }

// Our kernels (a scaled sum of squares): cuBLAS's nrm2 returns 0 for small f32 values and
// denormals. Two stages, the result stays on the device; n == 0 gives 0.
template <class T> void op_nrm2(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_nrm2(a, dt<T>);
  const own_kernels& k = cx.kernels<T>("nrm2");
  const int n = to_int(c.n, "nrm2", "n");
  const long long incx = c.x.inc;
  const int groups = static_cast<int>(std::clamp<uint64_t>(
      (static_cast<uint64_t>(n) + reduce_block - 1) / reduce_block, 1, max_reduce_blocks));
  const void* x = cx.dptr<T>(*c.x.t);
  const void* part = cx.mem_ptr(cx.partials);
  const void* r = cx.dptr<T>(*c.result);
  cx.launch(a.queue(), k.nrm2_1, uint64_t(groups) * reduce_block, reduce_block,
            {val(n), ptr_arg(x), val(incx), val(groups), ptr_arg(part)});
  cx.launch(a.queue(), k.nrm2_2, reduce_block, reduce_block,
            {val(groups), ptr_arg(part), ptr_arg(r)});
}

template <class T> void op_axpy(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  if (c.n == 0 || c.alpha.is_zero()) return; // reference axpy: y untouched, x not read
  if (c.alpha.tensor != nullptr) {
    // A device alpha of 0 must return too: our kernel looks at it on the device.
    const own_kernels& k = cx.kernels<T>("axpy");
    const int n = to_int(c.n, "axpy", "n");
    const long long incx = c.x.inc, incy = c.y.inc;
    const void *pa = cx.dptr<T>(*c.alpha.tensor), *x = cx.dptr<T>(*c.x.t), *y = cx.dptr<T>(*c.y.t);
    cx.launch(a.queue(), k.axpy, cuda_context::threads_for(static_cast<uint64_t>(n)), 256,
              {val(n), ptr_arg(pa), ptr_arg(x), val(incx), ptr_arg(y), val(incy)});
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
  const own_kernels& k = cx.kernels<T>("axpby");
  const int n = to_int(c.n, "axpby", "n");
  const long long incx = c.x.inc, incy = c.y.inc;
  const auto [al, pa] = cx.kscalar<T>(c.alpha);
  const auto [be, pb] = cx.kscalar<T>(c.beta);
  const void *x = cx.dptr<T>(*c.x.t), *y = cx.dptr<T>(*c.y.t);
  cx.launch(a.queue(), k.axpby, cuda_context::threads_for(static_cast<uint64_t>(n)), 256,
            {val(n), val(al), ptr_arg(pa), val(be), ptr_arg(pb), ptr_arg(x), val(incx), ptr_arg(y),
             val(incy)});
}
template <class T> void op_scal(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_scal(a, dt<T>);
  if (c.n == 0) return;
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, nullptr);
  cx.check(cub<T>::scal(*cx.api)(cx.handle, to_int(c.n, "scal", "n"), s.ptr[0], cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "scal", "incx")),
           "cublas scal");
}
template <class T> void op_copy(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_copy(a, dt<T>);
  if (c.n == 0) return;
  cx.current();
  cx.check(cub<T>::copy(*cx.api)(cx.handle, to_int(c.n, "copy", "n"), cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "copy", "incx"), cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "copy", "incy")),
           "cublas copy");
}
template <class T> void op_swap(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_swap(a, dt<T>);
  if (c.n == 0) return;
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
  const int n = to_int(c.n, "gemm", "n"), k = to_int(c.k, "gemm", "k");
  const int lda = to_int(c.lda, "gemm", "lda"), ldb = to_int(c.ldb, "gemm", "ldb"),
            ldc = to_int(c.ldc, "gemm", "ldc");
  const T* A = cx.dptr<T>(*c.A);
  const T* B = cx.dptr<T>(*c.B);
  // A device alpha may be 0, which cuBLAS (dgemm) multiplies into NaN in A or B: guard the
  // call, in blocks of rows of C so the saved window stays bounded (one block when it fits).
  const bool guarded = c.alpha.tensor != nullptr;
  const int64_t rows =
      guarded ? std::max<int64_t>(1, static_cast<int64_t>(guard_elements) / c.n) : c.m;
  for (int64_t i0 = 0; i0 < c.m; i0 += rows) {
    const int64_t mb = std::min(rows, c.m - i0);
    T* Cb = C + i0 * c.ldc;
    // Rows i0.. of op(A): rows of A, or its columns when A is transposed.
    const T* Ab = A + (c.ta ? i0 : i0 * c.lda);
    if (guarded)
      cx.guard_window<T>(a.queue(), false, "gemm", mb, c.n, c.ldc, s.ptr[0], s.ptr[1], Cb);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    cx.check(cub<T>::gemm(*cx.api)(cx.handle, op_of(c.tb), op_of(c.ta), n, to_int(mb, "gemm", "m"),
                                   k, s.ptr[0], B, ldb, Ab, lda, s.ptr[1], Cb, ldc),
             "cublas gemm");
    if (guarded)
      cx.guard_window<T>(a.queue(), true, "gemm", mb, c.n, c.ldc, s.ptr[0], s.ptr[1], Cb);
  }
}

class blas_cuda_bundle {
public:
  using context_type = cuda_context;
  static constexpr const char* name = bundle_name;
  static constexpr const char* version = "1.0";
  static constexpr const char* description = "BLAS on CUDA through cuBLAS (loaded at run time)";
  static constexpr const char* extension = PCY_BLAS_EXTENSION;
  static constexpr const char* framework = "cuda";
  static constexpr uint32_t min_framework_abi_minor = 0;

  explicit blas_cuda_bundle(const pcy_host_services& host)
      : log_(&host, bundle_name), host_(&host) {
    if (!load()) {
      log_.info(reason_);
      return; // loads, serves no op, says why
    }
    add<op_asum<float>, op_asum<double>>(pcy_blas_asum_schema, "asum");
    add<op_axpy<float>, op_axpy<double>>(pcy_blas_axpy_schema, "axpy");
    add<op_axpby<float>, op_axpby<double>>(pcy_blas_axpby_schema, nullptr);
    add<op_copy<float>, op_copy<double>>(pcy_blas_copy_schema, "copy", PCY_BLAS_COPY_SIG);
    add<op_dot<float>, op_dot<double>>(pcy_blas_dot_schema, "dot");
    add<op_nrm2<float>, op_nrm2<double>>(pcy_blas_nrm2_schema, nullptr);
    add<op_scal<float>, op_scal<double>>(pcy_blas_scal_schema, "scal");
    add<op_swap<float>, op_swap<double>>(pcy_blas_swap_schema, "swap");
    add<op_gemv<float>, op_gemv<double>>(pcy_blas_gemv_schema, "gemv");
    add<op_gemm<float>, op_gemm<double>>(pcy_blas_gemm_schema, "gemm");
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
    const pcy_framework_api& fw = *a.framework;
    if (fw.native_handle == nullptr || fw.memory_alloc == nullptr || fw.memory_fill == nullptr ||
        fw.memory_write == nullptr)
      sdk::fail(
          PCY_ERR_UNSUPPORTED,
          sdk::str("framework '", fw.name, "' lacks native_handle/memory slots blas_cuda needs"));
    auto cx = std::make_unique<cuda_context>();
    cx->api = &api_;
    cx->fw = &fw;
    cx->context = a.context;
    cx->device = a.device;
    cx->queue = a.queue;
    cx->cu_ctx = static_cast<CUcontext>(
        sdk::native_handle(fw, PCY_NATIVE_CONTEXT, a.context, a.device, nullptr, nullptr));
    cx->stream = static_cast<CUstream>(
        sdk::native_handle(fw, PCY_NATIVE_QUEUE, a.context, a.device, a.queue, nullptr));
    cx->current();
    cublasHandle_t h = nullptr;
    cx->check(api_.cublasCreate_v2(&h), "cublasCreate");
    cx->handle = h;
    cx->check(api_.cublasSetStream_v2(h, cx->stream), "cublasSetStream");
    cx->check(api_.cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    pcy_memory_alloc_args m{};
    m.struct_size = sizeof m;
    m.context = a.context;
    m.device = a.device;
    m.bytes = 2 * sizeof(double);
    sdk::check(fw.memory_alloc(&m));
    cx->scratch = m.memory;
    cx->partials = cx->alloc(3 * uint64_t(max_reduce_blocks) * sizeof(double));
    build_kernels(*cx, a);
    return cx.release();
  }

private:
  // Our kernels, once per context (the framework caches the cubin on disk). Without them
  // (no NVRTC, a failed build) the context still serves what cuBLAS does the reference way;
  // the ops that need them fail with the reason.
  void build_kernels(cuda_context& cx, const pcy_bundle_context_args& a) {
    const pcy_framework_api& fw = *a.framework;
    if (fw.program_build == nullptr || fw.kernel_create == nullptr || fw.kernel_launch == nullptr) {
      cx.kernels_reason = sdk::str("framework '", fw.name, "' cannot build or launch programs");
      log_.warn(cx.kernels_reason);
      return;
    }
    pcy_program_build_args b{};
    b.struct_size = sizeof b;
    b.context = a.context;
    b.source = blas_cuda::kernel_source;
    if (pcy_error* e = fw.program_build(&b)) {
      cx.kernels_reason = sdk::str("building them failed: ", e->message);
      e->destroy(e);
      log_.warn("our CUDA kernels are missing (", cx.kernels_reason, ")",
                "; nrm2, axpby, and axpy/gemv/gemm with a "
                "device-resident alpha or a zero alpha/k will fail");
      return;
    }
    cx.program = b.program;
    log_.debug("built the CUDA kernels", b.cache_hit ? " (from the cache)" : "");
    static constexpr std::array<const char*, 7> names{
        "axpby", "axpy", "scale", "save_if_alpha0", "restore_if_alpha0", "nrm2_1", "nrm2_2"};
    for (const bool f64 : {false, true}) {
      own_kernels& k = f64 ? cx.f64 : cx.f32;
      auto slots = k.all();
      for (size_t i = 0; i < names.size(); ++i) {
        const std::string kname = sdk::str(names[i], f64 ? "_f64" : "_f32");
        pcy_kernel_create_args kc{};
        kc.struct_size = sizeof kc;
        kc.program = cx.program;
        kc.name = kname.c_str();
        sdk::check(fw.kernel_create(&kc));
        *slots[i] = kc.kernel;
      }
    }
  }

  bool load() {
    // The driver is already loaded by the CUDA framework plugin; we need two of its calls.
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == nullptr) {
      reason_ = sdk::str("libcuda.so.1 not found: ", dlerror());
      return false;
    }
    api_.cuCtxGetCurrent =
        reinterpret_cast<decltype(api_.cuCtxGetCurrent)>(dlsym(cuda, "cuCtxGetCurrent"));
    api_.cuCtxSetCurrent =
        reinterpret_cast<decltype(api_.cuCtxSetCurrent)>(dlsym(cuda, "cuCtxSetCurrent"));
    if (api_.cuCtxGetCurrent == nullptr || api_.cuCtxSetCurrent == nullptr) {
      reason_ = "libcuda.so.1 lacks cuCtxGetCurrent/cuCtxSetCurrent: update the NVIDIA driver";
      return false;
    }
    std::vector<std::string> candidates{"libcublas.so.13", "libcublas.so.12"};
    // Through the host, so the set-uid rule and a replaced environment hold here too.
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* root = sdk::host_setting(host_, var))
        for (const char* v : {"13", "12"})
          candidates.push_back(sdk::str(root, "/lib64/libcublas.so.", v));
    for (const char* v : {"13", "12"})
      candidates.push_back(sdk::str("/usr/local/cuda/lib64/libcublas.so.", v));
    std::string first_error;
    for (const std::string& c : candidates) {
      lib_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib_ != nullptr) {
        soname_ = c.substr(c.rfind('/') == std::string::npos ? 0 : c.rfind('/') + 1);
        break;
      }
      if (first_error.empty()) first_error = dlerror();
    }
    if (lib_ == nullptr) {
      reason_ = sdk::str("libcublas.so.13 not found: ", first_error,
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
    return true;
  }

  template <void (*F32)(cuda_context&, const sdk::op_args&),
            void (*F64)(cuda_context&, const sdk::op_args&)>
  void add(const pcy_op_schema& schema, const char* fn, const char* sig_1_0 = nullptr) {
    // fn == nullptr: our own CUDA C kernel serves the op.
    const auto label = [&](const char* t) {
      return fn != nullptr ? sdk::str("cuBLAS (", soname_, ") cublas", t, fn)
                           : sdk::str("parenchyma CUDA C kernel ", schema.name, " (",
                                      t[0] == 'S' ? "f32" : "f64", ")");
    };
    table_.add<F32, F64>(schema, label("S"), label("D"), sig_1_0);
  }

  sdk::logger log_;
  const pcy_host_services* host_;
  cublas_api api_;
  void* lib_ = nullptr;
  std::string soname_, reason_;
  sdk::op_table<blas_cuda_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_cuda_bundle)
