// BLAS bundle for the Vulkan framework (plugins/vulkan): our own GLSL compute shaders
// (kernels.comp) for every op of the schema, each compiled by the framework's program_build (GLSL
// to SPIR-V through shaderc, kept in the SDK's kernel cache) on its first use in a context, per
// dtype: -DREAL=float always, -DREAL=double only where the device has shaderFloat64 (the device's
// "fp64" property); without it the f64 ops are unavailable with the reason, so the host routes
// them to another framework (fallback policy) or reports them unsupported.
// Kernel arguments follow the plugin's convention: buffers fill the bindings of set 0 in binding
// order (or, in a kernel's address form, its buffer_reference push constants in member order),
// scalars the other push-constant members in member order (docs/vulkan.md). Each kernel has two
// forms: descriptors, and device addresses (-DPCY_ADDRESSES), which an op takes when one of its
// tensors is larger than a descriptor can bind (maxStorageBufferRange; see run_op). Scalars come
// as a host value plus an optional one-element buffer (flags bit 0: alpha from the buffer, bit 1:
// beta), so device-resident scalars never round-trip to the host. The reference-BLAS edge cases
// (docs/blas.md, "Reference semantics") are decided here (quick returns) and in the kernels.
// The scratch buffers are made in create_context, with one shader per dtype (scal, which proves
// the GLSL compiler and the dtype work); an op decodes its arguments, fetches its kernels (built
// on first use) and records launches on the backend's queue.
#include "blas_call.hpp"

#include "blas_vulkan_kernels.hpp" // kernels.comp, embedded at build time (generated)

#include <parenchyma/sdk/glsl_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using namespace parenchyma;
using blas_bundle::blas_call;
using blas_bundle::to_int;

constexpr const char* bundle_name = "blas_vulkan";
// Work-group sizes, fixed by the shaders (kernels.comp: RWG, GWG, 256, TS / WPT).
// The shaders' work-group sizes are set at build time (-D): `wg` invocations for the element-wise
// kernels (EWG) and the reductions (RWG), 64 for gemv (GWG), gemm's tile TS (gemm: TS / 2
// invocations a dimension, each 2 x 2 outputs; gemm_direct: the same invocations, 4 x 4 outputs
// each, a tile of 2 TS). 256 invocations (TS 32) where the device allows them, else 128 (TS 16):
// Vulkan promises only 128 (maxComputeWorkGroupInvocations).
struct work_groups {
  uint32_t wg = 256, ts = 32;
  uint32_t threads() const { return ts / 2; }     // gemm's invocations a dimension
  uint32_t direct_tile() const { return 2 * ts; } // gemm_direct's tile of C
};
constexpr uint32_t gemv_wg = 64; // gemv_n and gemv_t (GWG)
// gemm_reg (the register-blocked GPU gemm): 16 x 16 invocations, a tile of C of 64 GCM squared,
// GCM 2 in f32 (128 x 128, 8 x 8 outputs an invocation) and 1 in f64 (64 x 64, 4 x 4: half the
// registers a double takes), k in slices of reg_slice, double-buffered in shared memory.
constexpr uint32_t reg_threads = 16, reg_slice = 8;
template <class T> constexpr uint32_t reg_chunks = std::is_same_v<T, float> ? 2 : 1;
template <class T> constexpr uint64_t reg_tile = 64 * reg_chunks<T>;
// Its shared memory: two operands, two slices each, GBK rows of GBM elements (+ a vector of
// padding a row where the device has room): 16 KiB unpadded in either dtype.
template <class T> constexpr uint64_t reg_shared(bool pad) {
  return 2 * 2 * reg_slice * (reg_tile<T> + (pad ? 4 : 0)) * sizeof(T);
}
// Element-wise kernels, gemv's rows, gemm's tiles and batch are grid-strided: their grids stop
// here, at most the 65535 work-groups per dimension every Vulkan device offers.
// PARENCHYMA_BLAS_VULKAN_GRID_CAP=N lowers every such cap (the reductions' groups too) to N
// work-groups, a test aid: small problems then take the strided loops of every kernel.
constexpr uint64_t max_groups_1d = 4096;
constexpr uint64_t max_batch_groups = 65535;

enum op_id { ASUM, AXPY, AXPBY, COPY, DOT, NRM2, SCAL, SWAP, GEMV, GEMM, GEMM_BATCHED, OP_COUNT };
constexpr std::array<const char*, OP_COUNT> op_names{
    "asum", "axpy", "axpby", "copy", "dot", "nrm2", "scal", "swap", "gemv", "gemm", "gemm_batched"};

// The kernels of kernels.comp, by its `#kernel` names.
enum kernel_id {
  K_AXPBY,
  K_AXPY,
  K_SCAL,
  K_COPY,
  K_SWAP,
  K_SCALE,
  K_NRM2_1,
  K_NRM2_2,
  K_REDUCE_1,
  K_REDUCE_2,
  K_GEMV_N,
  K_GEMV_T,
  K_GEMM,
  K_GEMM_REG,
  K_GEMM_DIRECT,
  K_COUNT
};
constexpr std::array<const char*, K_COUNT> kernel_names{
    "axpby_k",  "axpy_k",   "scal_k", "copy_k", "swap_k", "scale_k",  "nrm2_1",     "nrm2_2",
    "reduce_1", "reduce_2", "gemv_n", "gemv_t", "gemm",   "gemm_reg", "gemm_direct"};

// kernels.comp cut into one source per kernel (sdk::kernel_sections). Each kernel is then its
// own program, built on its first use: a process that calls one op compiles one shader (about
// 0.1 s with shaderc, against 2.3 s for all of them in both dtypes), and each lands in the
// kernel cache on its own. Cut once per process.
const std::vector<std::string>& kernel_sources() {
  static const std::vector<std::string> sources =
      sdk::kernel_sections(blas_vulkan::kernel_source, kernel_names);
  return sources;
}

// The kernels of both dtypes, their two forms (descriptors; device addresses past
// maxStorageBufferRange) and the per-op checks: sdk::glsl_context (glsl_bundle.hpp).
struct vk_context : sdk::glsl_context<K_COUNT> {
  explicit vk_context(const pcy_bundle_context_args& a)
      : glsl_context(a, bundle_name, kernel_sources(), kernel_names) {}
  pcy_memory dummy = nullptr;    // stands in for a scalar buffer when the scalar is a host value
  pcy_memory partials = nullptr; // stage-1 partial sums of the reductions (3 per group: nrm2)
  uint32_t max_groups = 64;      // work-groups of a reduction's first stage
  uint64_t grid_cap = max_groups_1d, batch_cap = max_batch_groups; // see max_groups_1d
  bool gemm_tiled = true;  // the shared-memory gemms; false: gemm_direct (CPU devices)
  bool gemm_reg = false;   // gemm_reg where the device's limits allow it (else gemm's 32 x 32)
  std::array<bool, 2> reg_pad{}; // f32, f64: room for gemm_reg's padded slices
  work_groups w;

  void launch1(pcy_queue q, pcy_kernel k, uint64_t global, uint32_t local,
               std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, k, 1, {global, 1, 1}, {local, 1, 1}, args);
  }
};

using sdk::mem;
using sdk::val;

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// A grid of whole work-groups covering n work-items, capped (the kernel strides over the rest).
uint64_t grid_1d(const vk_context& cx, uint64_t n, uint32_t wg) {
  return std::clamp<uint64_t>((n + wg - 1) / wg, 1, cx.grid_cap) * wg;
}

// A scalar as kernel arguments: host value, buffer (tensor or dummy) and its flag bit.
template <class T> struct kscalar {
  T value = 0;
  pcy_memory buffer = nullptr;
  int flag = 0;
};
template <class T>
kscalar<T> kernel_scalar(const vk_context& cx, const blas_bundle::scalar_arg& s, int bit) {
  if (s.tensor != nullptr) return {T(0), s.tensor->memory, bit};
  return {static_cast<T>(s.value), cx.dummy, 0};
}

// ---- level 1 ---------------------------------------------------------------------------------

uint32_t reduce_groups(const vk_context& cx, int n) {
  return static_cast<uint32_t>(
      std::clamp<uint64_t>((static_cast<uint64_t>(n) + cx.w.wg - 1) / cx.w.wg, 1, cx.max_groups));
}

// Two stages on the device; n == 0 gives 0 (every invocation adds nothing).
template <class T>
void reduce(vk_context& cx, pcy_queue q, const char* op, int mode, const blas_call& c,
            const pcy_tensor& y, int incy) {
  const int n = to_int(c.n, op, "n"), incx = to_int(c.x.inc, op, "incx");
  const uint32_t groups = reduce_groups(cx, n);
  cx.launch1(q, cx.get<T>(K_REDUCE_1), uint64_t(groups) * cx.w.wg, cx.w.wg,
             {mem(c.x.t->memory), mem(y.memory), mem(cx.partials), val(n), val(mode), val(incx),
              val(incy)});
  const int g = static_cast<int>(groups);
  cx.launch1(q, cx.get<T>(K_REDUCE_2), cx.w.wg, cx.w.wg,
             {mem(cx.partials), mem(c.result->memory), val(g)});
}

// x = beta * x over a rows x cols window, ld apart (beta == 0: zeros, x not read); over `batch`
// such windows `stride` elements apart (gemm_batched), in the grid's dimension 1.
template <class T>
void scale_window(vk_context& cx, pcy_queue q, const char* op, int64_t rows, int64_t cols,
                  int64_t ld, const blas_bundle::scalar_arg& beta, pcy_memory x, int64_t batch = 1,
                  int64_t stride = 0) {
  const int64_t total64 = rows * cols; // <= the tensor's element count (checked by the decoder)
  if (total64 == 0 || batch == 0) return;
  const int total = to_int(total64, op, "m n"), ncols = to_int(cols, op, "n"),
            ild = to_int(ld, op, "ld"), istride = to_int(stride, op, "stride_c"),
            ibatch = to_int(batch, op, "batch");
  const kscalar<T> be = kernel_scalar<T>(cx, beta, 2);
  cx.launch(q, cx.get<T>(K_SCALE), 2,
            {grid_1d(cx, static_cast<uint64_t>(total), cx.w.wg),
             std::min<uint64_t>(static_cast<uint64_t>(batch), cx.batch_cap), 1},
            {cx.w.wg, 1, 1},
            {mem(be.buffer), mem(x), val(be.value), val(total), val(ncols), val(be.flag), val(ild),
             val(istride), val(ibatch)});
}

template <class T> void op_asum(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_asum(a, dt<T>);
  reduce<T>(cx, a.queue(), "asum", 0, c, *c.x.t, 1);
}
template <class T> void op_dot(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_dot(a, dt<T>);
  reduce<T>(cx, a.queue(), "dot", 1, c, *c.y.t, to_int(c.y.inc, "dot", "incy"));
}
// Blue's scaled sums of squares (kernels.comp, nrm2_1 / nrm2_2): no overflow, no underflow.
template <class T> void op_nrm2(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_nrm2(a, dt<T>);
  const int n = to_int(c.n, "nrm2", "n"), incx = to_int(c.x.inc, "nrm2", "incx");
  const int groups = static_cast<int>(reduce_groups(cx, n));
  cx.launch1(a.queue(), cx.get<T>(K_NRM2_1), uint64_t(groups) * cx.w.wg, cx.w.wg,
             {mem(c.x.t->memory), mem(cx.partials), val(n), val(incx), val(groups)});
  cx.launch1(a.queue(), cx.get<T>(K_NRM2_2), cx.w.wg, cx.w.wg,
             {mem(cx.partials), mem(c.result->memory), val(groups)});
}

template <class T> void op_axpy(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpy(a, dt<T>);
  // A host alpha of 0 returns here (reference axpy); a device one in the kernel.
  if (c.n == 0 || c.alpha.is_zero()) return;
  const int n = to_int(c.n, "axpy", "n"), incx = to_int(c.x.inc, "axpy", "incx"),
            incy = to_int(c.y.inc, "axpy", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1);
  cx.launch1(a.queue(), cx.get<T>(K_AXPY), grid_1d(cx, uint64_t(n), cx.w.wg), cx.w.wg,
             {mem(al.buffer), mem(c.x.t->memory), mem(c.y.t->memory), val(al.value), val(n),
              val(al.flag), val(incx), val(incy)});
}
template <class T> void op_axpby(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_axpby(a, dt<T>);
  if (c.n == 0) return;
  const int n = to_int(c.n, "axpby", "n"), incx = to_int(c.x.inc, "axpby", "incx"),
            incy = to_int(c.y.inc, "axpby", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  cx.launch1(a.queue(), cx.get<T>(K_AXPBY), grid_1d(cx, uint64_t(n), cx.w.wg), cx.w.wg,
             {mem(al.buffer), mem(be.buffer), mem(c.x.t->memory), mem(c.y.t->memory), val(al.value),
              val(be.value), val(n), val(flags), val(incx), val(incy)});
}
template <class T> void op_scal(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_scal(a, dt<T>);
  if (c.n == 0) return;
  const int n = to_int(c.n, "scal", "n"), incx = to_int(c.x.inc, "scal", "incx");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1);
  cx.launch1(a.queue(), cx.get<T>(K_SCAL), grid_1d(cx, uint64_t(n), cx.w.wg), cx.w.wg,
             {mem(al.buffer), mem(c.x.t->memory), val(al.value), val(n), val(al.flag), val(incx)});
}
template <class T, bool Swap> void copy_or_swap(vk_context& cx, const sdk::op_args& a) {
  const char* op = Swap ? "swap" : "copy";
  const blas_call c =
      Swap ? blas_bundle::decode_swap(a, dt<T>) : blas_bundle::decode_copy(a, dt<T>);
  if (c.n == 0) return;
  const int n = to_int(c.n, op, "n"), incx = to_int(c.x.inc, op, "incx"),
            incy = to_int(c.y.inc, op, "incy");
  cx.launch1(a.queue(), cx.get<T>(Swap ? K_SWAP : K_COPY), grid_1d(cx, uint64_t(n), cx.w.wg),
             cx.w.wg, {mem(c.x.t->memory), mem(c.y.t->memory), val(n), val(incx), val(incy)});
}
template <class T> void op_copy(vk_context& cx, const sdk::op_args& a) {
  copy_or_swap<T, false>(cx, a);
}
template <class T> void op_swap(vk_context& cx, const sdk::op_args& a) {
  copy_or_swap<T, true>(cx, a);
}

// ---- level 2 and 3 ---------------------------------------------------------------------------

template <class T> void op_gemv(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemv(a, dt<T>);
  if (c.m == 0 || c.n == 0) return; // reference BLAS: y stays exactly as it was
  const int64_t ny = c.ta ? c.n : c.m;
  if (c.alpha.is_zero()) { // y = beta * y; A and x are not read
    scale_window<T>(cx, a.queue(), "gemv", ny, 1, c.y.inc, c.beta, c.y.t->memory);
    return;
  }
  const int m = to_int(c.m, "gemv", "m"), n = to_int(c.n, "gemv", "n"),
            lda = to_int(c.lda, "gemv", "lda"), incx = to_int(c.x.inc, "gemv", "incx"),
            incy = to_int(c.y.inc, "gemv", "incy");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag;
  const std::initializer_list<pcy_kernel_arg> args{mem(al.buffer),
                                                   mem(be.buffer),
                                                   mem(c.A->memory),
                                                   mem(c.x.t->memory),
                                                   mem(c.y.t->memory),
                                                   val(al.value),
                                                   val(be.value),
                                                   val(m),
                                                   val(n),
                                                   val(flags),
                                                   val(lda),
                                                   val(incx),
                                                   val(incy)};
  if (c.ta) // an invocation per column of A
    cx.launch1(a.queue(), cx.get<T>(K_GEMV_T), grid_1d(cx, uint64_t(n), gemv_wg), gemv_wg, args);
  else // a work-group per row of A (grid-strided past grid_cap rows)
    cx.launch1(a.queue(), cx.get<T>(K_GEMV_N),
               std::min<uint64_t>(uint64_t(m), cx.grid_cap) * gemv_wg, gemv_wg, args);
}

// gemm and gemm_batched: one kernel per form, the transposes in flags (bits 2 and 3), tiles of C
// in the grid's dimensions 0 and 1 (grid-strided past grid_cap), the batch in dimension 2
// (grid-strided past batch_cap).
template <class T>
void gemm_launch(vk_context& cx, pcy_queue q, const char* op, const blas_bundle::blas_call& c,
                 int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  const int m = to_int(c.m, op, "m"), n = to_int(c.n, op, "n"), k = to_int(c.k, op, "k"),
            lda = to_int(c.lda, op, "lda"), ldb = to_int(c.ldb, op, "ldb"),
            ldc = to_int(c.ldc, op, "ldc"), sa = to_int(stride_a, op, "stride_a"),
            sb = to_int(stride_b, op, "stride_b"), sc = to_int(stride_c, op, "stride_c"),
            nb = to_int(batch, op, "batch");
  const kscalar<T> al = kernel_scalar<T>(cx, c.alpha, 1), be = kernel_scalar<T>(cx, c.beta, 2);
  const int flags = al.flag | be.flag | (c.ta ? 4 : 0) | (c.tb ? 8 : 0);
  // The form: gemm_direct on CPU devices; else gemm's 32 x 32 tiles, or gemm_reg where it was
  // asked for (create_context).
  const bool reg = cx.gemm_tiled && cx.gemm_reg;
  const kernel_id kid = !cx.gemm_tiled ? K_GEMM_DIRECT : reg ? K_GEMM_REG : K_GEMM;
  const uint64_t ts = reg             ? reg_tile<T>
                      : cx.gemm_tiled ? uint64_t(cx.w.ts)
                                      : uint64_t(cx.w.direct_tile());
  const uint32_t gemm_threads = reg ? reg_threads : cx.w.threads();
  // The shaders stride over tiles past the grid (and over the batch): grids capped as BLAS-1's.
  const uint64_t gx =
      std::min<uint64_t>((static_cast<uint64_t>(n) + ts - 1) / ts, cx.grid_cap) * gemm_threads;
  const uint64_t gy =
      std::min<uint64_t>((static_cast<uint64_t>(m) + ts - 1) / ts, cx.grid_cap) * gemm_threads;
  const uint64_t gz = std::min<uint64_t>(static_cast<uint64_t>(batch), cx.batch_cap);
  cx.launch(q, cx.get<T>(kid), 3, {gx, gy, gz}, {gemm_threads, gemm_threads, 1},
            {mem(al.buffer), mem(be.buffer), mem(c.A->memory), mem(c.B->memory), mem(c.C->memory),
             val(al.value), val(be.value), val(m), val(n), val(k), val(flags), val(lda), val(ldb),
             val(ldc), val(sa), val(sb), val(sc), val(nb)});
}

template <class T> void op_gemm(vk_context& cx, const sdk::op_args& a) {
  const blas_call c = blas_bundle::decode_gemm(a, dt<T>);
  if (c.m == 0 || c.n == 0) return;
  if (c.k == 0 || c.alpha.is_zero()) { // C = beta * C; A and B are not read
    scale_window<T>(cx, a.queue(), "gemm", c.m, c.n, c.ldc, c.beta, c.C->memory);
    return;
  }
  gemm_launch<T>(cx, a.queue(), "gemm", c, 1, 0, 0, 0);
}

template <class T> void op_gemm_batched(vk_context& cx, const sdk::op_args& a) {
  const blas_bundle::gemm_batched_call c = blas_bundle::decode_gemm_batched(a, dt<T>);
  const char* op = "gemm_batched";
  if (c.m == 0 || c.n == 0 || c.batch == 0) return;
  if (c.k == 0 || c.alpha.is_zero()) { // C_i = beta * C_i; A and B are not read
    scale_window<T>(cx, a.queue(), op, c.m, c.n, c.ldc, c.beta, c.C->memory, c.batch, c.stride_c);
    return;
  }
  gemm_launch<T>(cx, a.queue(), op, c, c.batch, c.stride_a, c.stride_b, c.stride_c);
}

// ---- the bundle ------------------------------------------------------------------------------

// Before every op (sdk::glsl_context::choose_form): a tensor at a byte offset or too large for
// 32-bit indices is refused, and the op's form is chosen (descriptors, else device addresses).
template <void (*F)(vk_context&, const sdk::op_args&)>
void run_op(vk_context& cx, const sdk::op_args& a) {
  cx.choose_form(a, "", [](uint32_t k) { return k; });
  F(cx, a);
}

constexpr sdk::bundle_identity identity{bundle_name, PCY_BLAS_EXTENSION, "vulkan",
                                        "BLAS on Vulkan: own GLSL compute shaders"};

class blas_vulkan_bundle : public sdk::bundle_base<identity, vk_context> {
public:
  explicit blas_vulkan_bundle(const pcy_host_services& host) : bundle_base(host) {
    if (const char* e = settings_.find("PARENCHYMA_BLAS_VULKAN_GEMM")) {
      const std::string_view v = e;
      if (v == "tiled" || v == "tiled32" || v == "direct")
        gemm_form_ = e;
      else
        log_.warn("PARENCHYMA_BLAS_VULKAN_GEMM=", e,
                  " ignored: expected 'tiled', 'tiled32' or 'direct'");
    }
    if (const char* e = settings_.find("PARENCHYMA_BLAS_VULKAN_WORK_GROUP")) {
      if (std::string_view(e) == "128")
        small_groups_ = true;
      else if (std::string_view(e) != "256")
        log_.warn("PARENCHYMA_BLAS_VULKAN_WORK_GROUP=", e, " ignored: expected 128 or 256");
    }
    max_binding_ = sdk::setting_count(settings_, log_, "PARENCHYMA_BLAS_VULKAN_MAX_BINDING", 0,
                                      UINT64_MAX, "bytes", UINT64_MAX);
    grid_cap_ = sdk::setting_count(settings_, log_, "PARENCHYMA_BLAS_VULKAN_GRID_CAP", 1,
                                   max_batch_groups, "work-groups", 0);
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
                        PCY_FRAMEWORK_SLOT_kernel_launch, PCY_FRAMEWORK_SLOT_memory_alloc});
    auto cx = std::make_unique<vk_context>(a);
    const sdk::device_facts dev = sdk::device_facts_of(a);
    // A reduction's first stage: a few groups per core on a CPU device (lavapipe), more on GPUs.
    cx->max_groups = dev.cpu ? 16 : 1024;
    // 256 invocations a work-group where the device allows them (or does not say), else 128;
    // PARENCHYMA_BLAS_VULKAN_WORK_GROUP=128 takes the small sizes on any device (a test aid).
    if ((dev.max_work_group > 0 && dev.max_work_group < 256) || small_groups_)
      cx->w = work_groups{128, 16};
    // gemm: the barrier-free form on CPU devices (lavapipe), gemm's 32 x 32 shared-memory tiles
    // elsewhere. gemm_reg only on request: PARENCHYMA_BLAS_VULKAN_GEMM=tiled (at every size,
    // where the device allows 256 invocations, not lowered by PARENCHYMA_BLAS_VULKAN_WORK_GROUP,
    // and 16 KiB of shared memory; 0: not said), because on the H100's Vulkan driver it ran at a
    // fifth of gemm's speed (docs/vulkan.md, 2026-12-07 19:18); tiled32 (gemm) or direct picks
    // one for every device.
    cx->gemm_tiled = gemm_form_.empty() ? !dev.cpu : gemm_form_ != "direct";
    const int64_t shared = sdk::device_number(a, PCY_PROP_LOCAL_MEMORY, 0);
    const auto room = [&](uint64_t bytes) { return shared <= 0 || uint64_t(shared) >= bytes; };
    cx->gemm_reg = cx->w.wg == 256 && gemm_form_ == "tiled" &&
                   room(std::max(reg_shared<float>(false), reg_shared<double>(false)));
    cx->reg_pad = {shared > 0 && room(reg_shared<float>(true)),
                   shared > 0 && room(reg_shared<double>(true))};
    log_.debug("on ", dev.name.empty() ? "the device" : dev.name, ": work-groups of ", cx->w.wg,
               ", gemm ",
               !cx->gemm_tiled ? "barrier-free (gemm_direct)"
               : cx->gemm_reg  ? "register-blocked (gemm_reg, PARENCHYMA_BLAS_VULKAN_GEMM=tiled)"
                               : "in 32 x 32 shared-memory tiles (gemm)");
    // Tensors above maxStorageBufferRange take the address form of the kernels (see run_op).
    cx->read_binding_limits(a, max_binding_);
    if (grid_cap_ > 0) {
      cx->grid_cap = cx->batch_cap = grid_cap_;
      cx->max_groups = static_cast<uint32_t>(std::min<uint64_t>(cx->max_groups, grid_cap_));
    }

    // One kernel per dtype now (scal, the smallest), so that a device or a build without a GLSL
    // compiler fails the context (f32) or marks f64 unavailable at once; the others on first use.
    prepare(*cx, cx->f32, "float", true, cx->reg_pad[0]);
    if (dev.fp64)
      prepare(*cx, cx->f64, "double", false, cx->reg_pad[1]);
    else
      cx->f64.reason =
          "f64 BLAS on this device: the Vulkan device has no shaderFloat64 (its "
          "'fp64' property is false); f64 ops go to another framework where one serves them";

    cx->dummy = cx->alloc(16);
    cx->partials = cx->alloc(3 * uint64_t(cx->max_groups) * sizeof(double));
    return cx.release();
  }

private:
  // must: the f32 shaders (a context needs them; f64 is optional).
  void prepare(vk_context& cx, sdk::glsl_dtype_kernels<K_COUNT>& d, const char* real, bool must,
               bool reg_pad) {
    cx.prepare(d,
               sdk::str("-DREAL=", real, must ? "" : " -DPCY_FP64", " -DRWG=", cx.w.wg,
                        " -DEWG=", cx.w.wg, " -DGWG=", gemv_wg, " -DTS=", cx.w.ts, " -DTSK=16",
                        " -DGCM=", must ? reg_chunks<float> : reg_chunks<double>,
                        " -DGBK=", reg_slice, " -DGPAD=", reg_pad ? 1 : 0),
               K_SCAL, must, log_, "f64 BLAS shaders");
  }

  template <void (*F32)(vk_context&, const sdk::op_args&),
            void (*F64)(vk_context&, const sdk::op_args&)>
  void add(op_id op, const pcy_op_schema& schema, const char* sig_1_0 = nullptr) {
    auto label = [&](bool f64) {
      const char* dtype = f64 ? " (f64)" : " (f32)";
      if (op == GEMM || op == GEMM_BATCHED) // create_context picks the form per device
        return sdk::str("parenchyma GLSL compute shader ", op_names[op], dtype,
                        ": gemm_direct on CPU devices, gemm's 32 x 32 tiles on others "
                        "(gemm_reg, register-blocked, on request)");
      return sdk::str("parenchyma GLSL compute shader ", op_names[op], dtype);
    };
    table_.add<run_op<F32>, run_op<F64>>(schema, label(false), label(true), sig_1_0);
  }

  uint64_t grid_cap_ = 0;             // PARENCHYMA_BLAS_VULKAN_GRID_CAP; 0: the defaults
  uint64_t max_binding_ = UINT64_MAX; // PARENCHYMA_BLAS_VULKAN_MAX_BINDING (a test aid)
  std::string gemm_form_;             // PARENCHYMA_BLAS_VULKAN_GEMM; empty: by the device
  bool small_groups_ = false;         // PARENCHYMA_BLAS_VULKAN_WORK_GROUP=128
  sdk::op_table<blas_vulkan_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_vulkan_bundle)
