// BLAS bundle for the native (host CPU) framework: every op through OpenBLAS's CBLAS, row-major,
// or through our own loops (own_blas.hpp): where OpenBLAS is absent at build time (mingw-w64),
// or chosen with PARENCHYMA_BLAS_NATIVE_IMPL=own (read when the bundle loads).
//
// Ops run on the calling thread. The host has synced every argument before the call, but the
// native framework's queue may still be running earlier work (an asynchronous write, a user
// kernel) on its pool, so each op first waits for that queue: cheap when it is idle, and it
// keeps ordering exact without our own threads. OpenBLAS threads itself (OPENBLAS_NUM_THREADS).
#include "blas_call.hpp"

#include <parenchyma/sdk/op_schema.hpp>

#include "own_blas.hpp"

#if PARENCHYMA_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <cmath>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;
namespace own = blas_bundle::own;

struct native_context {
  const pcy_framework_api* fw = nullptr;
  pcy_queue queue = nullptr;

  // Waits for work the framework queue may still be running on the op's tensors.
  void settle(pcy_queue q) const { sdk::check(fw->queue_finish(q)); }

  // The host pointer the host resolved once into pcy_tensor::data (sdk::native_of).
  template <class T> T* ptr(const pcy_tensor& t) const {
    return reinterpret_cast<T*>(static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset);
  }
  template <class T> T scalar(const blas_bundle::scalar_arg& s) const {
    return s.tensor != nullptr ? *ptr<T>(*s.tensor) : static_cast<T>(s.value);
  }
};

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// The library by dtype: Own = our loops, else OpenBLAS's CBLAS (where built with it). One
// interface: sizes as int64_t (the ops check that they fit OpenBLAS's int), `trans` as bool.
template <class T, bool Own> struct lib {
  static T asum(int64_t n, const T* x, int64_t inc) { return own::asum(n, x, inc); }
  static T dot(int64_t n, const T* x, int64_t ix, const T* y, int64_t iy) {
    return own::dot(n, x, ix, y, iy);
  }
  static T nrm2(int64_t n, const T* x, int64_t inc) { return own::nrm2(n, x, inc); }
  static void axpy(int64_t n, T a, const T* x, int64_t ix, T* y, int64_t iy) {
    own::axpy(n, a, x, ix, y, iy);
  }
  static void axpby(int64_t n, T a, const T* x, int64_t ix, T b, T* y, int64_t iy) {
    own::axpby(n, a, x, ix, b, y, iy);
  }
  static void copy(int64_t n, const T* x, int64_t ix, T* y, int64_t iy) {
    own::copy(n, x, ix, y, iy);
  }
  static void scal(int64_t n, T a, T* x, int64_t inc) { own::scal(n, a, x, inc); }
  static void swap(int64_t n, T* x, int64_t ix, T* y, int64_t iy) { own::swap(n, x, ix, y, iy); }
  static void gemv(bool t, int64_t m, int64_t n, T a, const T* A, int64_t lda, const T* x,
                   int64_t ix, T b, T* y, int64_t iy) {
    own::gemv(t, m, n, a, A, lda, x, ix, b, y, iy);
  }
  static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T a, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T b, T* C, int64_t ldc) {
    own::gemm(ta, tb, m, n, k, a, A, lda, B, ldb, b, C, ldc);
  }
};

#if PARENCHYMA_HAVE_OPENBLAS
template <class T> struct cblas;
template <> struct cblas<float> {
  static constexpr auto asum = cblas_sasum;
  static constexpr auto axpy = cblas_saxpy;
  static constexpr auto copy = cblas_scopy;
  static constexpr auto dot = cblas_sdot;
  static constexpr auto nrm2 = cblas_snrm2;
  static constexpr auto scal = cblas_sscal;
  static constexpr auto swap = cblas_sswap;
  static constexpr auto gemv = cblas_sgemv;
  static constexpr auto gemm = cblas_sgemm;
#ifdef PARENCHYMA_HAVE_CBLAS_AXPBY
  static constexpr auto axpby = cblas_saxpby;
#endif
};
template <> struct cblas<double> {
  static constexpr auto asum = cblas_dasum;
  static constexpr auto axpy = cblas_daxpy;
  static constexpr auto copy = cblas_dcopy;
  static constexpr auto dot = cblas_ddot;
  static constexpr auto nrm2 = cblas_dnrm2;
  static constexpr auto scal = cblas_dscal;
  static constexpr auto swap = cblas_dswap;
  static constexpr auto gemv = cblas_dgemv;
  static constexpr auto gemm = cblas_dgemm;
#ifdef PARENCHYMA_HAVE_CBLAS_AXPBY
  static constexpr auto axpby = cblas_daxpby;
#endif
};

constexpr auto tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
inline int i32(int64_t v) { return static_cast<int>(v); } // checked by the op (to_int)
template <class T> struct lib<T, false> {
  using C = cblas<T>;
  static T asum(int64_t n, const T* x, int64_t inc) { return C::asum(i32(n), x, i32(inc)); }
  static T dot(int64_t n, const T* x, int64_t ix, const T* y, int64_t iy) {
    return C::dot(i32(n), x, i32(ix), y, i32(iy));
  }
  static T nrm2(int64_t n, const T* x, int64_t inc) { return C::nrm2(i32(n), x, i32(inc)); }
  static void axpy(int64_t n, T a, const T* x, int64_t ix, T* y, int64_t iy) {
    C::axpy(i32(n), a, x, i32(ix), y, i32(iy));
  }
  static void axpby(int64_t n, T a, const T* x, int64_t ix, T b, T* y, int64_t iy) {
#ifdef PARENCHYMA_HAVE_CBLAS_AXPBY
    C::axpby(i32(n), a, x, i32(ix), b, y, i32(iy));
#else
    C::scal(i32(n), b, y, i32(iy));
    C::axpy(i32(n), a, x, i32(ix), y, i32(iy));
#endif
  }
  static void copy(int64_t n, const T* x, int64_t ix, T* y, int64_t iy) {
    C::copy(i32(n), x, i32(ix), y, i32(iy));
  }
  static void scal(int64_t n, T a, T* x, int64_t inc) { C::scal(i32(n), a, x, i32(inc)); }
  static void swap(int64_t n, T* x, int64_t ix, T* y, int64_t iy) {
    C::swap(i32(n), x, i32(ix), y, i32(iy));
  }
  static void gemv(bool t, int64_t m, int64_t n, T a, const T* A, int64_t lda, const T* x,
                   int64_t ix, T b, T* y, int64_t iy) {
    C::gemv(CblasRowMajor, tr(t), i32(m), i32(n), a, A, i32(lda), x, i32(ix), b, y, i32(iy));
  }
  static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T a, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T b, T* Cm, int64_t ldc) {
    C::gemm(CblasRowMajor, tr(ta), tr(tb), i32(m), i32(n), i32(k), a, A, i32(lda), B, i32(ldb), b,
            Cm, i32(ldc));
  }
};
#endif

// x = beta * x over rows x cols elements (ld apart; a vector is cols = 1, ld = inc). beta == 0
// stores zeros without reading x (reference BLAS: NaN or Inf there never survive).
template <class T> void scale(int64_t rows, int64_t cols, T beta, T* x, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      x[i * ld + j] = beta == T(0) ? T(0) : beta * x[i * ld + j];
}

template <class T, bool Own> void op_asum(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_asum(a, dt<T>);
  cx.settle(a.queue());
  *cx.ptr<T>(*c.result) = lib<T, Own>::asum(to_int(c.n, "asum", "n"), cx.ptr<T>(*c.x.t),
                                            to_int(c.x.inc, "asum", "incx"));
}
template <class T, bool Own> void op_nrm2(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_nrm2(a, dt<T>);
  cx.settle(a.queue());
  const int n = to_int(c.n, "nrm2", "n"), inc = to_int(c.x.inc, "nrm2", "incx");
  const T* x = cx.ptr<T>(*c.x.t);
  T r = lib<T, Own>::nrm2(n, x, inc);
  // OpenBLAS 0.3.21's arm64 kernels (Debian 12) return NaN for a vector holding +Inf and -Inf
  // and no NaN (their scaling divides an infinity by an infinity); the norm is +Inf. A NaN result
  // is checked against the input, so only a NaN in x gives NaN.
  if (std::isnan(r) && inc > 0) {
    bool nan_in_x = false;
    for (int i = 0; i < n && !nan_in_x; ++i)
      nan_in_x = std::isnan(x[static_cast<size_t>(i) * static_cast<size_t>(inc)]);
    if (!nan_in_x) r = std::numeric_limits<T>::infinity();
  }
  *cx.ptr<T>(*c.result) = r;
}
template <class T, bool Own> void op_dot(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_dot(a, dt<T>);
  cx.settle(a.queue());
  *cx.ptr<T>(*c.result) =
      lib<T, Own>::dot(to_int(c.n, "dot", "n"), cx.ptr<T>(*c.x.t), to_int(c.x.inc, "dot", "incx"),
                       cx.ptr<T>(*c.y.t), to_int(c.y.inc, "dot", "incy"));
}
template <class T, bool Own> void op_axpy(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue()); // also before reading a device-resident alpha
  const T alpha = cx.scalar<T>(c.alpha);
  if (alpha == T(0)) return; // reference BLAS: y untouched, x (NaN or not) never read
  lib<T, Own>::axpy(to_int(c.n, "axpy", "n"), alpha, cx.ptr<T>(*c.x.t),
                    to_int(c.x.inc, "axpy", "incx"), cx.ptr<T>(*c.y.t),
                    to_int(c.y.inc, "axpy", "incy"));
}
template <class T, bool Own> void op_axpby(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpby(a, dt<T>);
  cx.settle(a.queue());
  const int n = to_int(c.n, "axpby", "n"), incx = to_int(c.x.inc, "axpby", "incx"),
            incy = to_int(c.y.inc, "axpby", "incy");
  const T alpha = cx.scalar<T>(c.alpha), beta = cx.scalar<T>(c.beta);
  T* x = cx.ptr<T>(*c.x.t);
  T* y = cx.ptr<T>(*c.y.t);
  if (alpha == T(0) || beta == T(0)) {
    // alpha == 0: x is not read (as axpy); beta == 0: y is not read (it may be write-only, never
    // written), so garbage cannot leak in as NaN. Our own loop decides both, not OpenBLAS.
    scale<T>(n, 1, beta, y, incy);
    if (alpha != T(0)) lib<T, Own>::axpy(n, alpha, x, incx, y, incy);
    return;
  }
  lib<T, Own>::axpby(n, alpha, x, incx, beta, y, incy);
}
template <class T, bool Own> void op_copy(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_copy(a, dt<T>);
  cx.settle(a.queue());
  lib<T, Own>::copy(to_int(c.n, "copy", "n"), cx.ptr<T>(*c.x.t), to_int(c.x.inc, "copy", "incx"),
                    cx.ptr<T>(*c.y.t), to_int(c.y.inc, "copy", "incy"));
}
template <class T, bool Own> void op_scal(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_scal(a, dt<T>);
  cx.settle(a.queue());
  const T alpha = cx.scalar<T>(c.alpha);
  const int n = to_int(c.n, "scal", "n"), incx = to_int(c.x.inc, "scal", "incx");
  T* x = cx.ptr<T>(*c.x.t);
  if (alpha == T(0)) {
    // OpenBLAS stores zeros for alpha == 0; we multiply, as reference dscal does, so NaN and
    // Inf give NaN and -v gives -0 (docs/blas.md, "Reference semantics").
    for (int64_t i = 0; i < n; ++i)
      x[i * incx] *= alpha;
    return;
  }
  lib<T, Own>::scal(n, alpha, x, incx);
}
template <class T, bool Own> void op_swap(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_swap(a, dt<T>);
  cx.settle(a.queue());
  lib<T, Own>::swap(to_int(c.n, "swap", "n"), cx.ptr<T>(*c.x.t), to_int(c.x.inc, "swap", "incx"),
                    cx.ptr<T>(*c.y.t), to_int(c.y.inc, "swap", "incy"));
}
template <class T, bool Own> void op_gemv(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemv(a, dt<T>);
  cx.settle(a.queue());
  const int m = to_int(c.m, "gemv", "m"), n = to_int(c.n, "gemv", "n");
  if (m == 0 || n == 0) return; // reference BLAS: y stays exactly as it was, whatever beta is
  const int incy = to_int(c.y.inc, "gemv", "incy");
  const T alpha = cx.scalar<T>(c.alpha), beta = cx.scalar<T>(c.beta);
  T* y = cx.ptr<T>(*c.y.t);
  const int ny = c.ta ? n : m;
  if (alpha == T(0) || beta == T(0)) {
    // beta == 0: y may be write-only, so clear it (0 * garbage must not turn into NaN);
    // alpha == 0: y = beta * y and A, x are not read.
    scale<T>(ny, 1, beta, y, incy);
    if (alpha == T(0)) return;
  }
  lib<T, Own>::gemv(c.ta, m, n, alpha, cx.ptr<T>(*c.A), to_int(c.lda, "gemv", "lda"),
                    cx.ptr<T>(*c.x.t), to_int(c.x.inc, "gemv", "incx"), beta, y, incy);
}
template <class T, bool Own> void op_gemm(native_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, dt<T>);
  cx.settle(a.queue());
  const int m = to_int(c.m, "gemm", "m"), n = to_int(c.n, "gemm", "n"),
            k = to_int(c.k, "gemm", "k"), ldc = to_int(c.ldc, "gemm", "ldc");
  if (m == 0 || n == 0) return;
  const T alpha = cx.scalar<T>(c.alpha), beta = cx.scalar<T>(c.beta);
  T* C = cx.ptr<T>(*c.C);
  if (k == 0 || alpha == T(0)) {
    // C = beta * C with A and B not read (OpenBLAS 0.3.26 multiplies NaN in A by alpha == 0;
    // it skips k == 0 entirely).
    scale<T>(m, n, beta, C, ldc);
    return;
  }
  lib<T, Own>::gemm(c.ta, c.tb, m, n, k, alpha, cx.ptr<T>(*c.A), to_int(c.lda, "gemm", "lda"),
                    cx.ptr<T>(*c.B), to_int(c.ldb, "gemm", "ldb"), beta, C, ldc);
}

// OpenBLAS 0.3.21 (Debian 12) has no strided-batch CBLAS call: one cblas_?gemm per product,
// on the calling thread (OpenBLAS threads each product itself). The quick paths are gemm's,
// per product.
template <class T, bool Own> void op_gemm_batched(native_context& cx, const sdk::op_args& a) {
  const blas_bundle::gemm_batched_call c = blas_bundle::decode_gemm_batched(a, dt<T>);
  cx.settle(a.queue());
  const char* op = "gemm_batched";
  const int m = to_int(c.m, op, "m"), n = to_int(c.n, op, "n"), k = to_int(c.k, op, "k"),
            ldc = to_int(c.ldc, op, "ldc");
  if (m == 0 || n == 0 || c.batch == 0) return;
  const T alpha = cx.scalar<T>(c.alpha), beta = cx.scalar<T>(c.beta);
  T* C = cx.ptr<T>(*c.C);
  if (k == 0 || alpha == T(0)) { // C_i = beta * C_i; A and B are not read
    for (int64_t i = 0; i < c.batch; ++i)
      scale<T>(m, n, beta, C + i * c.stride_c, ldc);
    return;
  }
  const T* A = cx.ptr<T>(*c.A);
  const T* B = cx.ptr<T>(*c.B);
  const int lda = to_int(c.lda, op, "lda"), ldb = to_int(c.ldb, op, "ldb");
  for (int64_t i = 0; i < c.batch; ++i)
    lib<T, Own>::gemm(c.ta, c.tb, m, n, k, alpha, A + i * c.stride_a, lda, B + i * c.stride_b, ldb,
                      beta, C + i * c.stride_c, ldc);
}

#if PARENCHYMA_HAVE_OPENBLAS
constexpr const char* description =
    "BLAS on the host CPU through OpenBLAS (CBLAS), or our own loops "
    "(PARENCHYMA_BLAS_NATIVE_IMPL=own)";
#else
constexpr const char* description =
    "BLAS on the host CPU through our own loops (built without OpenBLAS)";
#endif
constexpr sdk::bundle_identity identity{"blas_native", PCY_BLAS_EXTENSION, "native", description};

class blas_native_bundle : public sdk::bundle_base<identity, native_context> {
public:
  explicit blas_native_bundle(const pcy_host_services& host) : bundle_base(host) {
#if PARENCHYMA_HAVE_OPENBLAS
    bool own = false;
    if (const char* e = settings_.find("PARENCHYMA_BLAS_NATIVE_IMPL")) {
      const std::string_view v(e);
      if (v == "own" || v == "openblas") {
        own = v == "own";
        log_.info("PARENCHYMA_BLAS_NATIVE_IMPL=", v, ": every op by ",
                  own ? "our own loops" : "OpenBLAS");
      } else {
        log_.warn("PARENCHYMA_BLAS_NATIVE_IMPL=", v, " ignored: expected 'own' or 'openblas'");
      }
    }
    if (own)
      register_ops<true>("own loops ");
    else
      register_ops<false>(openblas_label() + " cblas_");
#else
    if (settings_.find("PARENCHYMA_BLAS_NATIVE_IMPL") != nullptr)
      log_.info("PARENCHYMA_BLAS_NATIVE_IMPL ignored: built without OpenBLAS, every op is ours");
    register_ops<true>("own loops ");
#endif
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    // Native memory handles are the tensors' host pointers; queue_finish settles them.
    sdk::require_slots(*a.framework, name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_queue_finish});
    auto* c = new native_context;
    c->fw = a.framework;
    c->queue = a.queue;
    return c;
  }

private:
  // Every op through lib<T, Own>; `lib` labels the implementation ("own loops sasum").
  template <bool Own> void register_ops(const std::string& lib) {
    auto add = [&]<auto F32, auto F64>(const pcy_op_schema& s, const char* fn,
                                       const char* sig_1_0 = nullptr) {
      table_.add<F32, F64>(s, lib + "s" + fn, lib + "d" + fn, sig_1_0);
    };
    add.template operator()<op_asum<float, Own>, op_asum<double, Own>>(pcy_blas_asum_schema,
                                                                       "asum");
    add.template operator()<op_axpy<float, Own>, op_axpy<double, Own>>(pcy_blas_axpy_schema,
                                                                       "axpy");
#ifdef PARENCHYMA_HAVE_CBLAS_AXPBY
    const char* axpby = "axpby";
#else
    const char* axpby = Own ? "axpby" : "scal+axpy";
#endif
    add.template operator()<op_axpby<float, Own>, op_axpby<double, Own>>(pcy_blas_axpby_schema,
                                                                         axpby);
    add.template operator()<op_copy<float, Own>, op_copy<double, Own>>(pcy_blas_copy_schema, "copy",
                                                                       PCY_BLAS_COPY_SIG);
    add.template operator()<op_dot<float, Own>, op_dot<double, Own>>(pcy_blas_dot_schema, "dot");
    add.template operator()<op_nrm2<float, Own>, op_nrm2<double, Own>>(pcy_blas_nrm2_schema,
                                                                       "nrm2");
    add.template operator()<op_scal<float, Own>, op_scal<double, Own>>(pcy_blas_scal_schema,
                                                                       "scal");
    add.template operator()<op_swap<float, Own>, op_swap<double, Own>>(pcy_blas_swap_schema,
                                                                       "swap");
    add.template operator()<op_gemv<float, Own>, op_gemv<double, Own>>(pcy_blas_gemv_schema,
                                                                       "gemv");
    add.template operator()<op_gemm<float, Own>, op_gemm<double, Own>>(pcy_blas_gemm_schema,
                                                                       "gemm");
    table_.add<op_gemm_batched<float, Own>, op_gemm_batched<double, Own>>(
        pcy_blas_gemm_batched_schema, lib + "sgemm per product", lib + "dgemm per product");
  }
#if PARENCHYMA_HAVE_OPENBLAS
  static std::string openblas_label() {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" -> first two words.
    std::string cfg = openblas_get_config();
    size_t sp = cfg.find(' ');
    if (sp != std::string::npos) sp = cfg.find(' ', sp + 1);
    return cfg.substr(0, sp);
  }
#endif
  sdk::op_table<blas_native_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_native_bundle)
