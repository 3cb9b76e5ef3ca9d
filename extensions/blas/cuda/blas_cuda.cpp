// BLAS bundle for the CUDA framework: cuBLAS, loaded at run time (libcublas.so.13, then .12),
// on the backend's own CUstream. Nothing is linked: cublas_api.h gives only the types. Row-major
// tensors map onto cuBLAS's column-major view by swapping operands and flipping transposes.
// Without cuBLAS the bundle loads, serves no op and says why (the core then falls back per op).
#include "blas_call.hpp"

#include <cublas_api.h>
#include <cuda.h>

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;

constexpr const char* bundle_name = "blas_cuda";

// Every cuBLAS entry point we call, resolved once at initialisation.
#define PARENCHYMA_CUBLAS_FUNCTIONS(X)                                                             \
  X(cublasCreate_v2)                                                                               \
  X(cublasDestroy_v2)                                                                              \
  X(cublasSetStream_v2) X(cublasSetPointerMode_v2) X(cublasGetStatusString) X(cublasGetVersion_v2) \
      X(cublasSasum_v2) X(cublasDasum_v2) X(cublasSnrm2_v2) X(cublasDnrm2_v2) X(cublasSdot_v2)     \
          X(cublasDdot_v2) X(cublasSaxpy_v2) X(cublasDaxpy_v2) X(cublasScopy_v2) X(cublasDcopy_v2) \
              X(cublasSscal_v2) X(cublasDscal_v2) X(cublasSswap_v2) X(cublasDswap_v2)              \
                  X(cublasSgemv_v2) X(cublasDgemv_v2) X(cublasSgemm_v2) X(cublasDgemm_v2)

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
  static auto nrm2(const cublas_api& a) { return a.cublasSnrm2_v2; }
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
  static auto nrm2(const cublas_api& a) { return a.cublasDnrm2_v2; }
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

struct cuda_context {
  const cublas_api* api = nullptr;
  const pcy_framework_api* fw = nullptr;
  cublasHandle_t handle = nullptr;
  CUcontext cu_ctx = nullptr;
  CUstream stream = nullptr;
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  pcy_memory scratch = nullptr; // device scalars for calls mixing host and device scalars

  cuda_context() = default;
  cuda_context(const cuda_context&) = delete;
  cuda_context& operator=(const cuda_context&) = delete;
  ~cuda_context() {
    if (handle != nullptr) {
      current();
      api->cublasDestroy_v2(handle);
    }
    if (scratch != nullptr) fw->memory_free(scratch);
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
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = PCY_NATIVE_MEMORY;
    a.memory = t.memory;
    sdk::check(fw->native_handle(&a));
    return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(a.handle) + t.byte_offset);
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
  // Zeroes a write-only output so that beta = 0 cannot multiply garbage (NaN) into it.
  template <class T> void clear(pcy_queue q, const pcy_tensor& t) const {
    pcy_memory_fill_args f{};
    f.struct_size = sizeof f;
    f.queue = q;
    f.memory = t.memory;
    f.offset = t.byte_offset;
    f.bytes = blas_bundle::elements(t) * sizeof(T);
    const T zero = 0;
    f.pattern = &zero;
    f.pattern_size = sizeof(T);
    sdk::check(fw->memory_fill(&f));
  }
};

cublasOperation_t op_of(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <class T, int Which> void reduction(cuda_context& cx, const sdk::op_args& a) {
  const char* name = Which == 0 ? "asum" : Which == 1 ? "nrm2" : "dot";
  const blas_call c = Which == 0   ? blas_bundle::decode_asum(a, dt<T>)
                      : Which == 1 ? blas_bundle::decode_nrm2(a, dt<T>)
                                   : blas_bundle::decode_dot(a, dt<T>);
  cx.current();
  cx.pointer_mode(CUBLAS_POINTER_MODE_DEVICE); // the result stays on the device
  const int n = to_int(c.n, name, "n"), incx = to_int(c.x.inc, name, "incx");
  T* r = cx.dptr<T>(*c.result);
  if constexpr (Which == 0)
    cx.check(cub<T>::asum(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, r), "cublas asum");
  else if constexpr (Which == 1)
    cx.check(cub<T>::nrm2(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, r), "cublas nrm2");
  else
    cx.check(cub<T>::dot(*cx.api)(cx.handle, n, cx.dptr<T>(*c.x.t), incx, cx.dptr<T>(*c.y.t),
                                  to_int(c.y.inc, name, "incy"), r),
             "cublas dot");
}
template <class T> void op_asum(cuda_context& cx, const sdk::op_args& a) { reduction<T, 0>(cx, a); }
template <class T> void op_nrm2(cuda_context& cx, const sdk::op_args& a) { reduction<T, 1>(cx, a); }
template <class T> void op_dot(cuda_context& cx, const sdk::op_args& a) { reduction<T, 2>(cx, a); }

template <class T> void op_axpy(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  if (c.n == 0) return;
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, nullptr);
  cx.check(cub<T>::axpy(*cx.api)(cx.handle, to_int(c.n, "axpy", "n"), s.ptr[0], cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "axpy", "incx"), cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "axpy", "incy")),
           "cublas axpy");
}
template <class T> void op_axpby(cuda_context& cx, const sdk::op_args& a) {
  // cuBLAS has no axpby: y = beta * y (or 0 for a write-only y), then y += alpha * x.
  const blas_call c = blas_bundle::decode_axpby(a, dt<T>);
  if (c.n == 0) return;
  cx.current();
  const int n = to_int(c.n, "axpby", "n"), incx = to_int(c.x.inc, "axpby", "incx"),
            incy = to_int(c.y.inc, "axpby", "incy");
  T* y = cx.dptr<T>(*c.y.t);
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  if (c.beta.is_zero() && a.intent(5) == PCY_INTENT_OUT)
    cx.clear<T>(a.queue(), *c.y.t);
  else if (!c.beta.is_one())
    cx.check(cub<T>::scal(*cx.api)(cx.handle, n, s.ptr[1], y, incy), "cublas scal (axpby)");
  cx.check(cub<T>::axpy(*cx.api)(cx.handle, n, s.ptr[0], cx.dptr<T>(*c.x.t), incx, y, incy),
           "cublas axpy (axpby)");
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
  const int64_t ny = c.ta ? c.n : c.m;
  if (ny == 0) return;
  cx.current();
  if (c.m == 0 || c.n == 0) { // y = beta * y
    if (c.beta.is_zero() && a.intent(9) == PCY_INTENT_OUT)
      cx.clear<T>(a.queue(), *c.y.t);
    else {
      const auto s = cx.prepare<T>(a.queue(), c.beta, nullptr);
      cx.check(cub<T>::scal(*cx.api)(cx.handle, to_int(ny, "gemv", "n"), s.ptr[0],
                                     cx.dptr<T>(*c.y.t), to_int(c.y.inc, "gemv", "incy")),
               "cublas scal (gemv)");
    }
    return;
  }
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  // Row-major A (m x n) is column-major A^T (n x m): flip the transpose.
  cx.check(cub<T>::gemv(*cx.api)(cx.handle, op_of(!c.ta), to_int(c.n, "gemv", "n"),
                                 to_int(c.m, "gemv", "m"), s.ptr[0], cx.dptr<T>(*c.A),
                                 to_int(c.lda, "gemv", "lda"), cx.dptr<T>(*c.x.t),
                                 to_int(c.x.inc, "gemv", "incx"), s.ptr[1], cx.dptr<T>(*c.y.t),
                                 to_int(c.y.inc, "gemv", "incy")),
           "cublas gemv");
}
template <class T> void op_gemm(cuda_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, dt<T>);
  if (c.m == 0 || c.n == 0) return;
  cx.current();
  const auto s = cx.prepare<T>(a.queue(), c.alpha, &c.beta);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  cx.check(cub<T>::gemm(*cx.api)(cx.handle, op_of(c.tb), op_of(c.ta), to_int(c.n, "gemm", "n"),
                                 to_int(c.m, "gemm", "m"), to_int(c.k, "gemm", "k"), s.ptr[0],
                                 cx.dptr<T>(*c.B), to_int(c.ldb, "gemm", "ldb"), cx.dptr<T>(*c.A),
                                 to_int(c.lda, "gemm", "lda"), s.ptr[1], cx.dptr<T>(*c.C),
                                 to_int(c.ldc, "gemm", "ldc")),
           "cublas gemm");
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

  explicit blas_cuda_bundle(const pcy_host_services& host) : log_(&host, bundle_name) {
    if (!load()) {
      log_.info(reason_);
      return; // loads, serves no op, says why
    }
    add<op_asum<float>, op_asum<double>>("asum", PCY_BLAS_ASUM_SIG, "asum");
    add<op_axpy<float>, op_axpy<double>>("axpy", PCY_BLAS_AXPY_SIG, "axpy");
    add<op_axpby<float>, op_axpby<double>>("axpby", PCY_BLAS_AXPBY_SIG, "scal+axpy");
    add<op_copy<float>, op_copy<double>>("copy", PCY_BLAS_COPY_SIG, "copy");
    add<op_dot<float>, op_dot<double>>("dot", PCY_BLAS_DOT_SIG, "dot");
    add<op_nrm2<float>, op_nrm2<double>>("nrm2", PCY_BLAS_NRM2_SIG, "nrm2");
    add<op_scal<float>, op_scal<double>>("scal", PCY_BLAS_SCAL_SIG, "scal");
    add<op_swap<float>, op_swap<double>>("swap", PCY_BLAS_SWAP_SIG, "swap");
    add<op_gemv<float>, op_gemv<double>>("gemv", PCY_BLAS_GEMV_SIG, "gemv");
    add<op_gemm<float>, op_gemm<double>>("gemm", PCY_BLAS_GEMM_SIG, "gemm");
  }
  blas_cuda_bundle(const blas_cuda_bundle&) = delete;
  blas_cuda_bundle& operator=(const blas_cuda_bundle&) = delete;
  ~blas_cuda_bundle() {
    // Left loaded on purpose: cuBLAS registers atexit work; unloading it early can crash.
    (void)lib_;
  }

  const char* reason() const { return reason_.empty() ? nullptr : reason_.c_str(); }
  std::span<const pcy_op_desc> ops() const { return ops_; }

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
    return cx.release();
  }

private:
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
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* root = std::getenv(var); root != nullptr && *root != '\0')
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
  void add(const char* op, const char* sig, const char* fn) {
    labels_.push_back(sdk::str("cuBLAS (", soname_, ") cublasS", fn));
    ops_.push_back(sdk::make_op(op, PCY_DTYPE_F32, sig, &sdk::op_entry<blas_cuda_bundle, F32>,
                                labels_.back().c_str()));
    labels_.push_back(sdk::str("cuBLAS (", soname_, ") cublasD", fn));
    ops_.push_back(sdk::make_op(op, PCY_DTYPE_F64, sig, &sdk::op_entry<blas_cuda_bundle, F64>,
                                labels_.back().c_str()));
  }

  sdk::logger log_;
  cublas_api api_;
  void* lib_ = nullptr;
  std::string soname_, reason_;
  std::deque<std::string> labels_;
  std::vector<pcy_op_desc> ops_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_cuda_bundle)
