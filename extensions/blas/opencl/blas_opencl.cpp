// BLAS bundle for the OpenCL framework: our own OpenCL C kernels (kernels_cl.hpp) for every op,
// plus CLBlast on the backend's own cl_command_queue when CLBlast was found at build time. Per op
// and size the faster of the two on PoCL (measured by tools/bench/blas, measured_clblast_from
// below, docs/blas.md) is the default; PARENCHYMA_BLAS_OPENCL_IMPL=own|clblast forces one of
// them for every op and size. Ops whose scalars
// live on the device always use our kernels (CLBlast takes host scalars only), and so does nrm2
// (CLBlast sums plain squares: they overflow and underflow). The reference-BLAS edge cases
// (docs/blas.md, "Reference semantics") are decided here for CLBlast (quick returns, outputs
// cleared before a routine that reads them with beta == 0) and in our kernels for the rest.
// Everything per context (programs, kernels, scratch buffers, the cl_command_queue) is made once
// in context_init; an op decodes its arguments, looks up cl_mem handles and enqueues.
#include "blas_call.hpp"
#include "kernels_cl.hpp"

#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#ifdef PARENCHYMA_HAVE_CLBLAST
#include <clblast_c.h>
#endif

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;

constexpr const char* bundle_name = "blas_opencl";
constexpr uint32_t reduce_wg = 256; // RWG: work-group size of reductions and gemv_n

enum op_id { ASUM, AXPY, AXPBY, COPY, DOT, NRM2, SCAL, SWAP, GEMV, GEMM, GEMM_BATCHED, OP_COUNT };
constexpr std::array<const char*, OP_COUNT> op_names{
    "asum", "axpy", "axpby", "copy", "dot", "nrm2", "scal", "swap", "gemv", "gemm", "gemm_batched"};

// Which implementation serves a call, per op AND size: CLBlast from clblast_from[op] units of
// work on (n for BLAS-1, m n for gemv, m n k for gemm), our kernel below it; one compare per
// call. Measured on PoCL 3.1, 2-core EPYC, 2026-12-01 (bench_blas_opencl --crossover under
// PARENCHYMA_BLAS_OPENCL_IMPL=own: bursts of 16 calls + finish, f32, docs/blas.md "OpenCL: which
// implementation serves an op"): a CLBlast BLAS-1 call costs ~10-14 us on PoCL whatever its size
// (dot and asum ~300-550 us: two kernels and a large reduction grid) against ~3-7 us for one
// launch of ours, while CLBlast's vectorised kernels are 2-7x faster on large vectors. So ours
// serve axpy/scal/copy below 2^13 (4096: ours 6.7-10.9 us, CLBlast 12-14; 16384: CLBlast
// 10-12, ours 20-27), swap below 2^12 (equal at 4096), dot/asum below 2^17 (equal at 65536,
// CLBlast 1.2-1.3x faster at 262144). gemv: CLBlast at every size (ours, a work-group per row,
// is 5-6x slower at 64-256 and equal at 1024). never: our kernel at every size (axpby has no
// CLBlast routine; CLBlast's nrm2 overflows and underflows; gemm on a CPU device is our vector
// kernel, 4-10x faster than CLBlast's there; create_context sets CLBlast for gemm on other
// devices). gemm_batched follows gemm (our kernel's batch is a third grid dimension; not
// measured on its own). Calls with device-resident scalars always use our kernels.
constexpr double never = 1e300;
constexpr std::array<double, OP_COUNT> measured_clblast_from{
    /* asum */ 1 << 17, /* axpy */ 1 << 13, /* axpby */ never,       /* copy */ 1 << 13,
    /* dot */ 1 << 17,  /* nrm2 */ never,   /* scal */ 1 << 13,      /* swap */ 1 << 12,
    /* gemv */ 0,       /* gemm */ never,   /* gemm_batched */ never};

struct kernel_set {
  pcy_kernel axpby = nullptr, axpy = nullptr, scal = nullptr, copy = nullptr, swap = nullptr;
  pcy_kernel scale = nullptr, nrm2_1 = nullptr, nrm2_2 = nullptr;
  pcy_kernel reduce_1 = nullptr, reduce_2 = nullptr, gemv_n = nullptr, gemv_t = nullptr;
  std::array<pcy_kernel, 4> gemm{};  // nn, nt, tn, tt
  std::array<pcy_kernel, 4> gemmv{}; // CPU devices: the vector kernels, nn, nt, tn, tt
};

struct dtype_state : sdk::dtype_program {
  kernel_set k;
  int gemm_nr = 16; // columns of the CPU vector gemm's register tile (two vectors)
};

// gemm blocking: the tiled (local-memory) form for GPUs, the vector form for CPUs.
struct gemm_shape {
  bool tiled = true;
  int ts_m = 64, ts_n = 64, ts_k = 16, wpt_m = 4, wpt_n = 4;
  // The CPU vector kernel's register tile: mr rows x nr columns (two vectors of nr/2).
  int mr = 6, nr = 16;   // nr for f32; f64 takes nr / 2
  int mc = 96, kc = 128; // rows per work-item (a multiple of mr); k slice of B packed at once
};

struct ocl_context : sdk::device_context {
  explicit ocl_context(const pcy_bundle_context_args& a) : device_context(a) {}
  void* cl_queue = nullptr; // cl_command_queue, for CLBlast
  // CLBlast serves a call of op with host scalars from this much work on (see
  // measured_clblast_from): one compare per call.
  std::array<double, OP_COUNT> clblast_from{};
  // CLBlast routines (by op, f32/f64) that completed once in this context: see clblast_run.
  std::array<std::array<bool, 2>, OP_COUNT> clblast_warm{};
  dtype_state f32, f64;
  pcy_memory dummy = nullptr;    // stands in for a scalar buffer when the scalar is a host value
  pcy_memory partials = nullptr; // stage-1 partial sums of the reductions (3 per group: nrm2)
  uint32_t max_groups = 64;
  gemm_shape gs;

  template <class T> const dtype_state& state() const {
    const dtype_state& d = std::is_same_v<T, float> ? f32 : f64;
    if (!d.available) sdk::fail(PCY_ERR_UNSUPPORTED, d.reason);
    return d;
  }
  // The cl_mem the host resolved once into pcy_tensor::data.
  void* cl_mem_of(const pcy_tensor& t) const { return sdk::native_of(*fw, t); }
  // 1.1: f64 ops on a device without fp64 are unavailable here, so the host routes them to
  // another framework (fallback policy) instead of failing at call time.
  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !f64.available) {
      *reason = f64.reason.c_str();
      return false;
    }
    return true;
  }
  // Our kernels take one or two dimensions.
  void launch(pcy_queue q, pcy_kernel k, uint32_t dims, std::array<uint64_t, 2> global,
              std::array<uint32_t, 2> local, std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, k, dims, {global[0], global[1], 1}, {local[0], local[1], 1}, args);
  }
  // Two dimensions over a batch in the third (gemm_batched; local size 1 there).
  void launch(pcy_queue q, pcy_kernel k, std::array<uint64_t, 2> global, uint64_t batch,
              std::array<uint32_t, 2> local, std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, k, 3, {global[0], global[1], batch}, {local[0], local[1], 1}, args);
  }
};

// Kernel argument builders; values point at locals that outlive the launch call.
using sdk::mem;
using sdk::val;

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

// A scalar as kernel arguments: host value, buffer (tensor or dummy) and its flag bit.
template <class T> struct kscalar {
  T value = 0;
  pcy_memory buffer = nullptr;
  int flag = 0;
};
template <class T>
kscalar<T> kernel_scalar(const ocl_context& cx, const blas_bundle::scalar_arg& s, int bit) {
  if (s.tensor != nullptr) return {T(0), s.tensor->memory, bit};
  return {static_cast<T>(s.value), cx.dummy, 0};
}

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;
template <class T> bool host_scalars(const blas_call& c) {
  return c.alpha.tensor == nullptr && c.beta.tensor == nullptr;
}

#ifdef PARENCHYMA_HAVE_CLBLAST
// CLBlast's C API by dtype.
template <class T> struct clb;
template <> struct clb<float> {
  static constexpr auto asum = CLBlastSasum, nrm2 = CLBlastSnrm2;
  static constexpr auto dot = CLBlastSdot;
  static constexpr auto axpy = CLBlastSaxpy;
  static constexpr auto scal = CLBlastSscal;
  static constexpr auto copy = CLBlastScopy, swap = CLBlastSswap;
  static constexpr auto gemv = CLBlastSgemv;
  static constexpr auto gemm = CLBlastSgemm;
  static constexpr auto gemm_batched = CLBlastSgemmStridedBatched;
};
template <> struct clb<double> {
  static constexpr auto asum = CLBlastDasum, nrm2 = CLBlastDnrm2;
  static constexpr auto dot = CLBlastDdot;
  static constexpr auto axpy = CLBlastDaxpy;
  static constexpr auto scal = CLBlastDscal;
  static constexpr auto copy = CLBlastDcopy, swap = CLBlastDswap;
  static constexpr auto gemv = CLBlastDgemv;
  static constexpr auto gemm = CLBlastDgemm;
  static constexpr auto gemm_batched = CLBlastDgemmStridedBatched;
};

void clblast_check(CLBlastStatusCode s, const char* what) {
  if (s != CLBlastSuccess)
    sdk::fail(PCY_ERR_DEVICE, sdk::str(what, " failed with CLBlast status ", static_cast<int>(s),
                                       "; set PARENCHYMA_BLAS_OPENCL_IMPL=own to use our kernels"));
}
// CLBlast's first use of a routine in a context (compiling its kernel, querying its tuning
// database) is not safe against another thread doing the same: its static database is filled
// unlocked, and under ThreadSanitizer's timing a concurrent first dot failed inside CLBlast
// (std::length_error, status -2039). So every context's first call of each routine and dtype is
// serialised process-wide; later calls only read CLBlast's locked program cache and take no lock
// (the flag belongs to the bundle context, whose ops the host serialises): sdk::first_use.
sdk::first_use& clblast_first_use() {
  static sdk::first_use f;
  return f;
}
template <class T, class F> void clblast_run(ocl_context& cx, op_id op, const char* what, F&& f) {
  clblast_first_use().run(cx.clblast_warm[op][std::is_same_v<T, double> ? 1 : 0],
                          [&] { clblast_check(f(), what); });
}
// work: n for BLAS-1, m n for gemv, m n k for gemm (as a double: no overflow).
template <class T>
bool use_clblast(const ocl_context& cx, op_id op, const blas_call& c, double work) {
  return work >= cx.clblast_from[op] && host_scalars<T>(c);
}
cl_mem clm(const ocl_context& cx, const pcy_tensor& t) {
  return static_cast<cl_mem>(cx.cl_mem_of(t));
}
cl_command_queue* clq(ocl_context& cx) { return reinterpret_cast<cl_command_queue*>(&cx.cl_queue); }
#endif

// ---- level 1 ---------------------------------------------------------------------------------

uint32_t reduce_groups(const ocl_context& cx, int n) {
  return static_cast<uint32_t>(std::clamp<uint64_t>(
      (static_cast<uint64_t>(n) + reduce_wg - 1) / reduce_wg, 1, cx.max_groups));
}

// Two stages on the device; n == 0 gives 0 (every work-item adds nothing).
template <class T>
void reduce(ocl_context& cx, pcy_queue q, const char* op, int mode, const blas_call& c,
            const pcy_tensor& y, int incy) {
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, op, "n"), incx = to_int(c.x.inc, op, "incx");
  const uint32_t groups = reduce_groups(cx, n);
  cx.launch(q, d.k.reduce_1, 1, {uint64_t(groups) * reduce_wg, 1}, {reduce_wg, 1},
            {val(n), val(mode), mem(c.x.t->memory), val(incx), mem(y.memory), val(incy),
             mem(cx.partials)});
  const int g = static_cast<int>(groups);
  cx.launch(q, d.k.reduce_2, 1, {reduce_wg, 1}, {reduce_wg, 1},
            {val(g), mem(cx.partials), mem(c.result->memory)});
}

// x = beta * x over a rows x cols window, ld apart (beta == 0: zeros, x not read); over `batch`
// such windows `stride` elements apart (gemm_batched), in the grid's dimension 1.
template <class T>
void scale_window(ocl_context& cx, pcy_queue q, const char* op, int64_t rows, int64_t cols,
                  int64_t ld, const blas_bundle::scalar_arg& beta, pcy_memory x, int64_t batch = 1,
                  int64_t stride = 0) {
  const dtype_state& d = cx.state<T>();
  const int64_t total = rows * cols; // <= the tensor's element count (checked by the decoder)
  if (total == 0 || batch == 0) return;
  const int ncols = to_int(cols, op, "n"), ild = to_int(ld, op, "ld");
  const kscalar<T> be = kernel_scalar<T>(cx, beta, 2);
  cx.launch(q, d.k.scale, 2,
            {round_up(static_cast<uint64_t>(total), 256), static_cast<uint64_t>(batch)}, {256, 1},
            {val(total), val(ncols), val(be.value), mem(be.buffer), val(be.flag), mem(x), val(ild),
             val(stride)});
}

template <class T> void op_asum(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_asum(a, dt<T>);
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, ASUM, c, double(c.n)) && c.n > 0) {
    clblast_run<T>(cx, ASUM, "CLBlast asum", [&] {
      return clb<T>::asum(c.n, clm(cx, *c.result), 0, clm(cx, *c.x.t), 0, c.x.inc, clq(cx),
                          nullptr);
    });
    return;
  }
#endif
  reduce<T>(cx, a.queue(), "asum", 0, c, *c.x.t, 1);
}
// Always our kernels: CLBlast's Xnrm2 sums plain squares, which overflow above ~1e154 (f64) or
// ~1e19 (f32) and vanish below; ours scale them (kernels_cl.hpp, nrm2_1/nrm2_2).
template <class T> void op_nrm2(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_nrm2(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, "nrm2", "n"), incx = to_int(c.x.inc, "nrm2", "incx");
  const int groups = static_cast<int>(reduce_groups(cx, n));
  cx.launch(a.queue(), d.k.nrm2_1, 1, {uint64_t(groups) * reduce_wg, 1}, {reduce_wg, 1},
            {val(n), mem(c.x.t->memory), val(incx), val(groups), mem(cx.partials)});
  cx.launch(a.queue(), d.k.nrm2_2, 1, {reduce_wg, 1}, {reduce_wg, 1},
            {val(groups), mem(cx.partials), mem(c.result->memory)});
}
template <class T> void op_dot(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_dot(a, dt<T>);
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, DOT, c, double(c.n)) && c.n > 0) {
    clblast_run<T>(cx, DOT, "CLBlast dot", [&] {
      return clb<T>::dot(c.n, clm(cx, *c.result), 0, clm(cx, *c.x.t), 0, c.x.inc, clm(cx, *c.y.t),
                         0, c.y.inc, clq(cx), nullptr);
    });
    return;
  }
#endif
  reduce<T>(cx, a.queue(), "dot", 1, c, *c.y.t, to_int(c.y.inc, "dot", "incy"));
}

template <class T> void op_axpy(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  // A host alpha of 0 returns here (reference axpy); a device one in our kernel.
  if (c.n == 0 || c.alpha.is_zero()) return;
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, AXPY, c, double(c.n))) {
    clblast_run<T>(cx, AXPY, "CLBlast axpy", [&] {
      return clb<T>::axpy(c.n, static_cast<T>(c.alpha.value), clm(cx, *c.x.t), 0, c.x.inc,
                          clm(cx, *c.y.t), 0, c.y.inc, clq(cx), nullptr);
    });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, "axpy", "n"), incx = to_int(c.x.inc, "axpy", "incx"),
            incy = to_int(c.y.inc, "axpy", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1);
  cx.launch(a.queue(), d.k.axpy, 1, {round_up(uint64_t(n), 256), 1}, {256, 1},
            {val(n), val(al.value), mem(al.buffer), val(al.flag), mem(c.x.t->memory), val(incx),
             mem(c.y.t->memory), val(incy)});
}
template <class T> void op_axpby(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpby(a, dt<T>);
  if (c.n == 0) return;
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, "axpby", "n"), incx = to_int(c.x.inc, "axpby", "incx"),
            incy = to_int(c.y.inc, "axpby", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  cx.launch(a.queue(), d.k.axpby, 1, {round_up(uint64_t(n), 256), 1}, {256, 1},
            {val(n), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer), val(flags),
             mem(c.x.t->memory), val(incx), mem(c.y.t->memory), val(incy)});
}
template <class T> void op_scal(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_scal(a, dt<T>);
  if (c.n == 0) return;
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, SCAL, c, double(c.n))) {
    clblast_run<T>(cx, SCAL, "CLBlast scal", [&] {
      return clb<T>::scal(c.n, static_cast<T>(c.alpha.value), clm(cx, *c.x.t), 0, c.x.inc, clq(cx),
                          nullptr);
    });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, "scal", "n"), incx = to_int(c.x.inc, "scal", "incx");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1);
  cx.launch(a.queue(), d.k.scal, 1, {round_up(uint64_t(n), 256), 1}, {256, 1},
            {val(n), val(al.value), mem(al.buffer), val(al.flag), mem(c.x.t->memory), val(incx)});
}
template <class T, bool Swap> void copy_or_swap(ocl_context& cx, const sdk::op_args& a) {
  const char* op = Swap ? "swap" : "copy";
  const blas_call c =
      Swap ? blas_bundle::decode_swap(a, dt<T>) : blas_bundle::decode_copy(a, dt<T>);
  if (c.n == 0) return;
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, Swap ? SWAP : COPY, c, double(c.n))) {
    if constexpr (Swap)
      clblast_run<T>(cx, SWAP, "CLBlast swap", [&] {
        return clb<T>::swap(c.n, clm(cx, *c.x.t), 0, c.x.inc, clm(cx, *c.y.t), 0, c.y.inc, clq(cx),
                            nullptr);
      });
    else
      clblast_run<T>(cx, COPY, "CLBlast copy", [&] {
        return clb<T>::copy(c.n, clm(cx, *c.x.t), 0, c.x.inc, clm(cx, *c.y.t), 0, c.y.inc, clq(cx),
                            nullptr);
      });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int n = to_int(c.n, op, "n"), incx = to_int(c.x.inc, op, "incx"),
            incy = to_int(c.y.inc, op, "incy");
  cx.launch(a.queue(), Swap ? d.k.swap : d.k.copy, 1, {round_up(uint64_t(n), 256), 1}, {256, 1},
            {val(n), mem(c.x.t->memory), val(incx), mem(c.y.t->memory), val(incy)});
}
template <class T> void op_copy(ocl_context& cx, const sdk::op_args& a) {
  copy_or_swap<T, false>(cx, a);
}
template <class T> void op_swap(ocl_context& cx, const sdk::op_args& a) {
  copy_or_swap<T, true>(cx, a);
}

// ---- level 2 and 3 ---------------------------------------------------------------------------

template <class T> void op_gemv(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemv(a, dt<T>);
  if (c.m == 0 || c.n == 0) return; // reference BLAS: y stays exactly as it was
  const int64_t ny = c.ta ? c.n : c.m;
  if (c.alpha.is_zero()) { // y = beta * y; A and x are not read
    scale_window<T>(cx, a.queue(), "gemv", ny, 1, c.y.inc, c.beta, c.y.t->memory);
    return;
  }
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, GEMV, c, double(c.m) * double(c.n))) {
    // CLBlast reads y even with beta == 0 (NaN there survives): clear the elements first.
    if (c.beta.is_zero())
      scale_window<T>(cx, a.queue(), "gemv", ny, 1, c.y.inc, c.beta, c.y.t->memory);
    clblast_run<T>(cx, GEMV, "CLBlast gemv", [&] {
      return clb<T>::gemv(CLBlastLayoutRowMajor, c.ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                          c.m, c.n, static_cast<T>(c.alpha.value), clm(cx, *c.A), 0, c.lda,
                          clm(cx, *c.x.t), 0, c.x.inc, static_cast<T>(c.beta.value),
                          clm(cx, *c.y.t), 0, c.y.inc, clq(cx), nullptr);
    });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int m = to_int(c.m, "gemv", "m"), n = to_int(c.n, "gemv", "n"),
            lda = to_int(c.lda, "gemv", "lda"), incx = to_int(c.x.inc, "gemv", "incx"),
            incy = to_int(c.y.inc, "gemv", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  if (c.ta)
    cx.launch(a.queue(), d.k.gemv_t, 1, {round_up(uint64_t(n), 64), 1}, {64, 1},
              {val(m), val(n), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
               val(flags), mem(c.A->memory), val(lda), mem(c.x.t->memory), val(incx),
               mem(c.y.t->memory), val(incy)});
  else
    cx.launch(a.queue(), d.k.gemv_n, 1, {uint64_t(m) * reduce_wg, 1}, {reduce_wg, 1},
              {val(m), val(n), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
               val(flags), mem(c.A->memory), val(lda), mem(c.x.t->memory), val(incx),
               mem(c.y.t->memory), val(incy)});
}

template <class T> void op_gemm(ocl_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, dt<T>);
  if (c.m == 0 || c.n == 0) return;
  if (c.k == 0 || c.alpha.is_zero()) { // C = beta * C; A and B are not read
    scale_window<T>(cx, a.queue(), "gemm", c.m, c.n, c.ldc, c.beta, c.C->memory);
    return;
  }
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, GEMM, c, double(c.m) * double(c.n) * double(c.k))) {
    // beta == 0 must not read C: clear the window rather than trust each CLBlast kernel.
    if (c.beta.is_zero())
      scale_window<T>(cx, a.queue(), "gemm", c.m, c.n, c.ldc, c.beta, c.C->memory);
    clblast_run<T>(cx, GEMM, "CLBlast gemm", [&] {
      return clb<T>::gemm(CLBlastLayoutRowMajor, c.ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                          c.tb ? CLBlastTransposeYes : CLBlastTransposeNo, c.m, c.n, c.k,
                          static_cast<T>(c.alpha.value), clm(cx, *c.A), 0, c.lda, clm(cx, *c.B), 0,
                          c.ldb, static_cast<T>(c.beta.value), clm(cx, *c.C), 0, c.ldc, clq(cx),
                          nullptr);
    });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int m = to_int(c.m, "gemm", "m"), n = to_int(c.n, "gemm", "n"),
            k = to_int(c.k, "gemm", "k"), lda = to_int(c.lda, "gemm", "lda"),
            ldb = to_int(c.ldb, "gemm", "ldb"), ldc = to_int(c.ldc, "gemm", "ldc");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  const int64_t no_stride = 0; // the kernels' batch strides: gemm is a batch of one
  const gemm_shape& g = cx.gs;
  if (!g.tiled) { // CPU device: the vector kernel (kernels_cl.hpp)
    const uint64_t gm = (static_cast<uint64_t>(m) + g.mc - 1) / g.mc;
    const uint64_t gn = (static_cast<uint64_t>(n) + d.gemm_nr - 1) / d.gemm_nr;
    cx.launch(a.queue(), d.k.gemmv[(c.ta ? 2 : 0) + (c.tb ? 1 : 0)], 2, {gn, gm}, {1, 1},
              {val(m), val(n), val(k), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
               val(flags), mem(c.A->memory), val(lda), mem(c.B->memory), val(ldb), mem(c.C->memory),
               val(ldc), val(no_stride), val(no_stride), val(no_stride)});
    return;
  }
  const uint32_t rts_n = static_cast<uint32_t>(g.ts_n / g.wpt_n);
  const uint64_t gx = (static_cast<uint64_t>(n) + g.ts_n - 1) / g.ts_n * rts_n;
  uint64_t gy;
  uint32_t ly;
  if (g.tiled) {
    ly = static_cast<uint32_t>(g.ts_m / g.wpt_m);
    gy = (static_cast<uint64_t>(m) + g.ts_m - 1) / g.ts_m * ly;
  } else {
    ly = 1;
    gy = (static_cast<uint64_t>(m) + g.wpt_m - 1) / g.wpt_m;
  }
  cx.launch(a.queue(), d.k.gemm[(c.ta ? 2 : 0) + (c.tb ? 1 : 0)], 2, {gx, gy}, {rts_n, ly},
            {val(m), val(n), val(k), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
             val(flags), mem(c.A->memory), val(lda), mem(c.B->memory), val(ldb), mem(c.C->memory),
             val(ldc), val(no_stride), val(no_stride), val(no_stride)});
}

// The batch is the kernels' third grid dimension (one launch for every product), or CLBlast's
// XgemmStridedBatched where CLBlast serves gemm; the quick paths and the beta == 0 clearing
// are gemm's, over every C_i at once.
template <class T> void op_gemm_batched(ocl_context& cx, const sdk::op_args& a) {
  const blas_bundle::gemm_batched_call c = blas_bundle::decode_gemm_batched(a, dt<T>);
  const char* op = "gemm_batched";
  if (c.m == 0 || c.n == 0 || c.batch == 0) return;
  if (c.k == 0 || c.alpha.is_zero()) { // C_i = beta * C_i; A and B are not read
    scale_window<T>(cx, a.queue(), op, c.m, c.n, c.ldc, c.beta, c.C->memory, c.batch, c.stride_c);
    return;
  }
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (use_clblast<T>(cx, GEMM_BATCHED, c, double(c.m) * double(c.n) * double(c.k))) {
    if (c.beta.is_zero()) // as gemm: C must not be read
      scale_window<T>(cx, a.queue(), op, c.m, c.n, c.ldc, c.beta, c.C->memory, c.batch, c.stride_c);
    clblast_run<T>(cx, GEMM_BATCHED, "CLBlast gemm_batched", [&] {
      return clb<T>::gemm_batched(
          CLBlastLayoutRowMajor, c.ta ? CLBlastTransposeYes : CLBlastTransposeNo,
          c.tb ? CLBlastTransposeYes : CLBlastTransposeNo, c.m, c.n, c.k,
          static_cast<T>(c.alpha.value), clm(cx, *c.A), 0, c.lda, c.stride_a, clm(cx, *c.B), 0,
          c.ldb, c.stride_b, static_cast<T>(c.beta.value), clm(cx, *c.C), 0, c.ldc, c.stride_c,
          c.batch, clq(cx), nullptr);
    });
    return;
  }
#endif
  const dtype_state& d = cx.state<T>();
  const int m = to_int(c.m, op, "m"), n = to_int(c.n, op, "n"), k = to_int(c.k, op, "k"),
            lda = to_int(c.lda, op, "lda"), ldb = to_int(c.ldb, op, "ldb"),
            ldc = to_int(c.ldc, op, "ldc");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  const int64_t sa = c.stride_a, sb = c.stride_b, sc = c.stride_c;
  const uint64_t batch = static_cast<uint64_t>(c.batch);
  const gemm_shape& g = cx.gs;
  const size_t which = (c.ta ? 2 : 0) + (c.tb ? 1 : 0);
  if (!g.tiled) { // CPU device: the vector kernel
    const uint64_t gm = (static_cast<uint64_t>(m) + g.mc - 1) / g.mc;
    const uint64_t gn = (static_cast<uint64_t>(n) + d.gemm_nr - 1) / d.gemm_nr;
    cx.launch(a.queue(), d.k.gemmv[which], {gn, gm}, batch, {1, 1},
              {val(m), val(n), val(k), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
               val(flags), mem(c.A->memory), val(lda), mem(c.B->memory), val(ldb), mem(c.C->memory),
               val(ldc), val(sa), val(sb), val(sc)});
    return;
  }
  const uint32_t rts_n = static_cast<uint32_t>(g.ts_n / g.wpt_n);
  const uint32_t rts_m = static_cast<uint32_t>(g.ts_m / g.wpt_m);
  const uint64_t gx = (static_cast<uint64_t>(n) + g.ts_n - 1) / g.ts_n * rts_n;
  const uint64_t gy = (static_cast<uint64_t>(m) + g.ts_m - 1) / g.ts_m * rts_m;
  cx.launch(a.queue(), d.k.gemm[which], {gx, gy}, batch, {rts_n, rts_m},
            {val(m), val(n), val(k), val(al.value), mem(al.buffer), val(be.value), mem(be.buffer),
             val(flags), mem(c.A->memory), val(lda), mem(c.B->memory), val(ldb), mem(c.C->memory),
             val(ldc), val(sa), val(sb), val(sc)});
}

// ---- the bundle ------------------------------------------------------------------------------

// Our kernels and the CLBlast calls address each cl_mem from its start: a tensor that begins
// elsewhere (byte_offset != 0, which no host in this tree passes) is refused rather than
// touching the memory before it.
template <void (*F)(ocl_context&, const sdk::op_args&)>
void at_offset_zero(ocl_context& cx, const sdk::op_args& a) {
  for (uint32_t k = 0; k < a.size(); ++k)
    if (a.is_tensor(k) && a.t(k).byte_offset != 0)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("argument ", k, " starts at byte offset ", a.t(k).byte_offset,
                         "; blas_opencl takes tensors at offset 0"));
  F(cx, a);
}

// The per-op thresholds: the measured table, or one implementation at every size when
// PARENCHYMA_BLAS_OPENCL_IMPL=own|clblast forces it (axpby and nrm2 stay ours).
std::array<double, OP_COUNT> choose_thresholds(const sdk::settings& settings, bool& forced) {
  std::array<double, OP_COUNT> c = measured_clblast_from;
  forced = false;
#ifdef PARENCHYMA_HAVE_CLBLAST
  if (const char* e = settings.find("PARENCHYMA_BLAS_OPENCL_IMPL")) {
    const std::string_view v(e);
    if (v == "own" || v == "clblast") {
      c.fill(v == "own" ? never : 0.0);
      forced = true;
    }
  }
#else
  (void)settings;
  c.fill(never);
#endif
  c[AXPBY] = never; // CLBlast has no axpby
  c[NRM2] = never;  // CLBlast's nrm2 overflows and underflows (see op_nrm2)
  return c;
}

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_BLAS_EXTENSION, "opencl",
#ifdef PARENCHYMA_HAVE_CLBLAST
    "BLAS on OpenCL: own OpenCL C kernels and CLBlast " PARENCHYMA_CLBLAST_VERSION
#else
    "BLAS on OpenCL: own OpenCL C kernels (built without CLBlast)"
#endif
};

class blas_opencl_bundle : public sdk::bundle_base<identity, ocl_context> {
public:
  explicit blas_opencl_bundle(const pcy_host_services& host) : bundle_base(host) {
    clblast_from_ = choose_thresholds(settings_, forced_);
    if (const char* e = settings_.find("PARENCHYMA_BLAS_OPENCL_IMPL")) {
      const std::string_view v(e);
#ifdef PARENCHYMA_HAVE_CLBLAST
      if (v != "own" && v != "clblast")
#else
      if (v != "own")
#endif
        log_.warn("PARENCHYMA_BLAS_OPENCL_IMPL=", v, " ignored: expected ",
#ifdef PARENCHYMA_HAVE_CLBLAST
                  "'own' or 'clblast'"
#else
                  "'own' (this build has no CLBlast)"
#endif
        );
    }
    add<op_asum<float>, op_asum<double>>(ASUM, pcy_blas_asum_schema);
    add<op_axpy<float>, op_axpy<double>>(AXPY, pcy_blas_axpy_schema);
    add<op_axpby<float>, op_axpby<double>>(AXPBY, pcy_blas_axpby_schema);
    add<op_copy<float>, op_copy<double>>(COPY, pcy_blas_copy_schema, PCY_BLAS_COPY_SIG);
    add<op_dot<float>, op_dot<double>>(DOT, pcy_blas_dot_schema);
    add<op_nrm2<float>, op_nrm2<double>>(NRM2, pcy_blas_nrm2_schema);
    add<op_scal<float>, op_scal<double>>(SCAL, pcy_blas_scal_schema);
    add<op_swap<float>, op_swap<double>>(SWAP, pcy_blas_swap_schema);
    add<op_gemv<float>, op_gemv<double>>(GEMV, pcy_blas_gemv_schema);
    add<op_gemm<float>, op_gemm<double>>(GEMM, pcy_blas_gemm_schema);
    add<op_gemm_batched<float>, op_gemm_batched<double>>(GEMM_BATCHED,
                                                         pcy_blas_gemm_batched_schema);
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                        PCY_FRAMEWORK_SLOT_kernel_launch, PCY_FRAMEWORK_SLOT_native_handle,
                        PCY_FRAMEWORK_SLOT_memory_alloc});
    auto cx = std::make_unique<ocl_context>(a);
    cx->clblast_from = clblast_from_;
    cx->cl_queue = cx->native(PCY_NATIVE_QUEUE);

    // The device decides the gemm form and the reduction width (no properties: GPU-style
    // defaults, fp64 found out by building).
    const sdk::device_facts dev = sdk::device_facts_of(a);
    cx->gs.tiled = !dev.cpu;
    if (const char* e = settings_.find("PARENCHYMA_BLAS_OPENCL_GEMM"))
      cx->gs.tiled = std::string_view(e) != "direct";
    // gemm: on a CPU device our vector kernel beats CLBlast at every size measured (the
    // table's "never"); other devices keep CLBlast's gemm wherever it is built in (not measured).
    if (!forced_ && !dev.cpu) cx->clblast_from[GEMM] = cx->clblast_from[GEMM_BATCHED] = 0;
#ifndef PARENCHYMA_HAVE_CLBLAST
    cx->clblast_from[GEMM] = cx->clblast_from[GEMM_BATCHED] = never;
#endif
    cx->max_groups =
        dev.cpu ? static_cast<uint32_t>(std::clamp<int64_t>(dev.compute_units * 4, 4, 256)) : 1024;

    sdk::build_f32_f64(dev, cx->f32, cx->f64, "BLAS",
                       [&](sdk::dtype_program& d, const char* real, bool required) {
                         build(*cx, static_cast<dtype_state&>(d), real, required);
                       });

    cx->dummy = cx->alloc(16);
    cx->partials = cx->alloc(3 * uint64_t(cx->max_groups) * sizeof(double));
    return cx.release();
  }

private:
  void build(ocl_context& cx, dtype_state& d, const char* real, bool must) {
    const gemm_shape& g = cx.gs;
    // Two vectors of 8 floats or 4 doubles: one AVX2 register each (PoCL's CPU target here).
    d.gemm_nr = must ? g.nr : g.nr / 2;
    const std::string options = sdk::str(
        "-DREAL=", real, must ? "" : " -DPCY_FP64", " -DRWG=", reduce_wg,
        g.tiled ? " -DGEMM_TILED" : "", " -DTS_M=", g.ts_m, " -DTS_N=", g.ts_n, " -DTS_K=", g.ts_k,
        " -DWPT_M=", g.wpt_m, " -DWPT_N=", g.wpt_n, " -DGEMM_MR=", g.mr,
        " -DGEMM_VW=", d.gemm_nr / 2, " -DGEMM_MC=", g.mc, " -DGEMM_KC=", g.kc);
    // f64 is optional: a device without cl_khr_fp64 fails the build; keep f32 serving.
    if (!cx.build(d, blas_opencl::kernel_source, options, must,
                  must ? "f32 BLAS kernels" : "f64 BLAS kernels", log_))
      return;
    d.k.axpby = cx.kernel(d.program, "axpby_k");
    d.k.axpy = cx.kernel(d.program, "axpy_k");
    d.k.scal = cx.kernel(d.program, "scal_k");
    d.k.copy = cx.kernel(d.program, "copy_k");
    d.k.swap = cx.kernel(d.program, "swap_k");
    d.k.scale = cx.kernel(d.program, "scale_k");
    d.k.nrm2_1 = cx.kernel(d.program, "nrm2_1");
    d.k.nrm2_2 = cx.kernel(d.program, "nrm2_2");
    d.k.reduce_1 = cx.kernel(d.program, "reduce_1");
    d.k.reduce_2 = cx.kernel(d.program, "reduce_2");
    d.k.gemv_n = cx.kernel(d.program, "gemv_n");
    d.k.gemv_t = cx.kernel(d.program, "gemv_t");
    const char* gemm_names[4] = {"gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt"};
    if (g.tiled) {
      for (int i = 0; i < 4; ++i)
        d.k.gemm[i] = cx.kernel(d.program, gemm_names[i]);
    } else {
      const char* names[4] = {"gemmv_nn", "gemmv_nt", "gemmv_tn", "gemmv_tt"};
      for (int i = 0; i < 4; ++i)
        d.k.gemmv[i] = cx.kernel(d.program, names[i]);
    }
    d.available = true;
  }

  template <void (*F32)(ocl_context&, const sdk::op_args&),
            void (*F64)(ocl_context&, const sdk::op_args&)>
  void add(op_id op, const pcy_op_schema& schema, const char* sig_1_0 = nullptr) {
    auto label = [&](bool f64) -> std::string {
      const std::string own =
          sdk::str("parenchyma OpenCL C kernel ", op_names[op], f64 ? " (f64)" : " (f32)");
#ifdef PARENCHYMA_HAVE_CLBLAST
      if ((op == GEMM || op == GEMM_BATCHED) && !forced_) // create_context: ours on CPU devices
        return sdk::str(own, " on CPU devices; CLBlast ", PARENCHYMA_CLBLAST_VERSION, " CLBlast",
                        f64 ? "D" : "S", op == GEMM ? "gemm" : "gemmStridedBatched",
                        " on others (own kernel when a scalar is a tensor)");
#endif
      if (clblast_from_[op] >= never) return own;
      const std::string clblast = sdk::str(
          "CLBlast ",
#ifdef PARENCHYMA_HAVE_CLBLAST
          PARENCHYMA_CLBLAST_VERSION,
#endif
          " CLBlast", f64 ? "D" : "S", op == GEMM_BATCHED ? "gemmStridedBatched" : op_names[op]);
      if (clblast_from_[op] <= 0) return clblast + " (own kernel when a scalar is a tensor)";
      return sdk::str(clblast, " from ", static_cast<int64_t>(clblast_from_[op]),
                      op == GEMM || op == GEMM_BATCHED ? " m n k"
                      : op == GEMV                     ? " m n"
                                                       : " elements",
                      "; below: ", own);
    };
    table_.add<at_offset_zero<F32>, at_offset_zero<F64>>(schema, label(false), label(true),
                                                         sig_1_0);
  }

  std::array<double, OP_COUNT> clblast_from_{};
  bool forced_ = false; // PARENCHYMA_BLAS_OPENCL_IMPL chose one implementation for every size
  sdk::op_table<blas_opencl_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_opencl_bundle)
