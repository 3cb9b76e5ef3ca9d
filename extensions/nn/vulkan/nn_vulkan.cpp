// NN bundle for the Vulkan framework (plugins/vulkan): our own GLSL compute shaders
// (kernels.comp), in f32 and, where the device has shaderFloat64 (its "fp64" property), f64.
// It serves every op of pcy_nn.h:
//   sigmoid, relu, tanh, elu: forward, _pointwise (in place), _grad, _pointwise_grad;
//   softmax, log_softmax and their _grad, along any axis;
//   dropout, dropout_grad (the exact splitmix64 mask of pcy_nn.h);
//   pooling_max, pooling_max_indexed, pooling_avg and their _grad (pooling_max_grad_indexed too);
//   lrn, lrn_grad; layer_norm, rms_norm and their _grad; cross_entropy, cross_entropy_grad;
//   embedding, embedding_grad; batch_norm, batch_norm_grad;
//   convolution, convolution_grad_data, convolution_grad_filter (one algorithm, 0: direct loops),
//   convolution_bias, convolution_grad_bias, convolution_algorithm.
// Every sum that crosses invocations is taken in a fixed order (no float atomics): the same bits
// every run (docs/vulkan.md, "The NN bundle").
// lavapipe ends an invocation's loops after 65535 iterations in all (found with embedding_grad
// under a grid cap of 2: the rest of its elements came back 0, no error): each kernel keeps an
// invocation's loop count small at the suite's sizes (batch_norm a work-group per channel,
// softmax along the last axis and the norms a work-group per row, embedding_grad 32 columns an
// invocation), but a single line (softmax along another axis) of ~20000+ elements would be cut
// short on lavapipe.
// Each shader is built by the framework's program_build (GLSL to SPIR-V through shaderc, kept in
// the kernel cache) on its first use in a context, per dtype and per form: buffers as
// descriptors, or by device address (-DPCY_ADDRESSES) when a tensor is larger than a descriptor
// can bind (maxStorageBufferRange; see run_op), as blas_vulkan does. Arguments follow the
// plugin's convention: buffers in binding order, scalars in push-constant member order. An op
// decodes and re-checks its arguments with the shared decoder (nn_call.hpp) and records its
// launch (and dropout's copies) on the call's queue without waiting.
#include "nn_call.hpp"

#include "nn_vulkan_kernels.hpp" // kernels.comp, embedded at build time (generated)

#include <parenchyma/sdk/dtype.hpp>
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
#include <type_traits>
#include <vector>

namespace {

using namespace parenchyma;
namespace nb = parenchyma::nn_bundle;

constexpr const char* bundle_name = "nn_vulkan";

// Grid-strided kernels stop at this many work-groups (Vulkan promises 65535 per dimension).
constexpr uint64_t max_groups_1d = 4096;

// The kernels of kernels.comp, by its `#kernel` names.
enum kernel_id {
  K_ACT_FWD,
  K_ACT_BWD,
  K_SM_FWD,
  K_SM_BWD,
  K_DROP_FWD,
  K_DROP_BWD,
  K_POOL_MAX,
  K_POOL_MAX_GRAD,
  K_POOL_MAX_GRAD_IDX,
  K_POOL_AVG,
  K_POOL_AVG_GRAD,
  K_LRN_FWD,
  K_LRN_GRAD,
  K_NORM_FWD,
  K_NORM_BWD_ROW,
  K_NORM_BWD_COLS,
  K_XENT_FWD,
  K_XENT_BWD,
  K_EMB_FWD,
  K_EMB_GRAD,
  K_BN_FWD,
  K_BN_BWD,
  K_CONV_FWD,
  K_CONV_DATA,
  K_CONV_FILTER,
  K_CONV_BIAS,
  K_CONV_GRAD_BIAS,
  K_SM_FWD_WG,
  K_SM_BWD_WG,
  K_NORM_FWD_WG,
  K_NORM_BWD_WG,
  K_COUNT
};
constexpr std::array<const char*, K_COUNT> kernel_names{
    "act_fwd",       "act_bwd",        "softmax_fwd",    "softmax_bwd",       "dropout_fwd",
    "dropout_bwd",   "pool_max",       "pool_max_grad",  "pool_max_grad_idx", "pool_avg",
    "pool_avg_grad", "lrn_fwd",        "lrn_grad",       "norm_fwd",          "norm_bwd_row",
    "norm_bwd_cols", "xent_fwd",       "xent_bwd",       "emb_fwd",           "emb_grad",
    "bn_fwd",        "bn_bwd",         "conv_fwd",       "conv_data",         "conv_filter",
    "conv_bias",     "conv_grad_bias", "softmax_fwd_wg", "softmax_bwd_wg",    "norm_fwd_wg",
    "norm_bwd_wg"};
// Every kernel named (a missing initialiser would leave a null name).
static_assert(std::ranges::none_of(kernel_names, [](const char* n) { return n == nullptr; }));

// kernels.comp cut into one source per kernel (sdk::kernel_sections): each kernel is its own
// program, built on its first use, so a process that calls one op compiles one shader. Cut once
// per process.
const std::vector<std::string>& kernel_sources() {
  static const std::vector<std::string> sources =
      sdk::kernel_sections(nn_vulkan::kernel_source, kernel_names);
  return sources;
}

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// The kernels of both dtypes, their two forms (descriptors; device addresses past
// maxStorageBufferRange) and the per-op checks: sdk::glsl_context (glsl_bundle.hpp).
struct vk_context : sdk::glsl_context<K_COUNT> {
  explicit vk_context(const pcy_bundle_context_args& a)
      : glsl_context(a, bundle_name, kernel_sources(), kernel_names) {}
  uint32_t wg = 256;    // EWG: invocations per work-group
  bool shuffle = false; // PCY_SHUFFLE: subgroup butterflies in the work-group sums
  uint64_t grid_cap = max_groups_1d;
  // One 4-byte word: the last, partial word of a dropout mask (4 does not divide its size).
  pcy_memory tail = nullptr;

  // A kernel with a work-group per row, grid-strided over `n` rows (at most grid_cap groups).
  void rows(pcy_queue q, pcy_kernel k, uint64_t n,
            std::initializer_list<pcy_kernel_arg> args) const {
    const uint64_t groups = std::clamp<uint64_t>(n, 1, grid_cap);
    launch(q, k, 1, {groups * wg, 1, 1}, {wg, 1, 1}, args);
  }
  // A kernel over `n` rows: a work-group per row (rows) when `grouped`, else an invocation per
  // row (grid).
  void per_row(bool grouped, pcy_queue q, pcy_kernel k, uint64_t n,
               std::initializer_list<pcy_kernel_arg> args) const {
    if (grouped)
      rows(q, k, n, args);
    else
      grid(q, k, n, args);
  }
  // A grid-strided kernel over `items`: whole work-groups, at most grid_cap of them.
  void grid(pcy_queue q, pcy_kernel k, uint64_t items,
            std::initializer_list<pcy_kernel_arg> args) const {
    const uint64_t groups = std::clamp<uint64_t>((items + wg - 1) / wg, 1, grid_cap);
    launch(q, k, 1, {groups * wg, 1, 1}, {wg, 1, 1}, args);
  }
};

// Rows at least as long as a work-group (softmax along the last axis, layer_norm, rms_norm) take
// a work-group each (the *_wg kernels: coalesced reads, sums over the work-group); shorter rows,
// which would leave most of a work-group idle, an invocation each (their sums in row order, the
// native bundle's: the NN demo's loss curve, which Adam makes sensitive to the last bit of a
// gradient, stays on native's for its layer_norm of 64).
bool by_group(const vk_context& cx, uint64_t len) { return len >= cx.wg; }

using sdk::mem;
using sdk::val;

// A device-side copy of `bytes` bytes on the call's queue (ordered with the launches around it).
void copy(const vk_context& cx, pcy_queue q, pcy_memory src, uint64_t src_offset, pcy_memory dst,
          uint64_t dst_offset, uint64_t bytes) {
  pcy_memory_copy_args c{};
  c.struct_size = sizeof c;
  c.queue = q;
  c.src = src;
  c.src_offset = src_offset;
  c.dst = dst;
  c.dst_offset = dst_offset;
  c.bytes = bytes;
  sdk::check(cx.fw->memory_copy(&c));
}

// ---- activations ---------------------------------------------------------------------------

template <const pcy_op_schema& S, int Kind, bool Grad, class T>
void op_act(vk_context& cx, const sdk::op_args& a) {
  nb::eltwise_call c;
  if constexpr (Grad)
    c = nb::decode_act_grad<S>(a, dt<T>);
  else
    c = nb::decode_act<S>(a, dt<T>);
  if (c.n == 0) return;
  const int32_t n = nb::to_int(static_cast<int64_t>(c.n), S, "the element count");
  const int32_t kind = Kind;
  const T alpha = static_cast<T>(c.alpha);
  if constexpr (Grad)
    cx.grid(a.queue(), cx.get<T>(K_ACT_BWD), c.n,
            {mem(c.x->memory), mem(c.dy->memory), mem(c.y->memory), val(alpha), val(n), val(kind)});
  else
    cx.grid(a.queue(), cx.get<T>(K_ACT_FWD), c.n,
            {mem(c.x->memory), mem(c.y->memory), val(alpha), val(n), val(kind)});
}

// ---- softmax -------------------------------------------------------------------------------

// An invocation per line of the axis (outer x inner lines of len elements), or along the last axis
// (inner 1) a work-group per row at least as long as a work-group (by_group).
template <const pcy_op_schema& S, bool Log, class T>
void op_softmax(vk_context& cx, const sdk::op_args& a) {
  const nb::softmax_call c = nb::decode_softmax<S>(a, dt<T>);
  if (c.outer == 0 || c.len == 0 || c.inner == 0) return;
  constexpr bool grad = nb::detail::has<S>("dx");
  // outer x len x inner is the tensor's element count, below 2^31 (run_op): so is each factor.
  const uint64_t lines = c.outer * c.inner;
  const int32_t nl = static_cast<int32_t>(lines), len = static_cast<int32_t>(c.len),
                inner = static_cast<int32_t>(c.inner), logm = Log ? 1 : 0;
  if (c.inner == 1 && by_group(cx, c.len)) {
    if constexpr (grad)
      cx.rows(
          a.queue(), cx.get<T>(K_SM_BWD_WG), lines,
          {mem(c.x->memory), mem(c.dy->memory), mem(c.y->memory), val(nl), val(len), val(logm)});
    else
      cx.rows(a.queue(), cx.get<T>(K_SM_FWD_WG), lines,
              {mem(c.x->memory), mem(c.y->memory), val(nl), val(len), val(logm)});
    return;
  }
  if constexpr (grad)
    cx.grid(a.queue(), cx.get<T>(K_SM_BWD), lines,
            {mem(c.x->memory), mem(c.dy->memory), mem(c.y->memory), val(nl), val(len), val(inner),
             val(logm)});
  else
    cx.grid(a.queue(), cx.get<T>(K_SM_FWD), lines,
            {mem(c.x->memory), mem(c.y->memory), val(nl), val(len), val(inner), val(logm)});
}

// ---- dropout -------------------------------------------------------------------------------

// An invocation per 4 elements and their mask word (no 8-bit storage: the mask is written and
// read as 32-bit words). A mask of n bytes, 4 not dividing n, ends in a partial word that no
// shader may touch (it reaches past the buffer): it passes through the context's `tail` word,
// copied on the queue after the forward, before the gradient.
template <const pcy_op_schema& S, bool Grad, class T>
void op_dropout(vk_context& cx, const sdk::op_args& a) {
  const nb::dropout_call c = nb::decode_dropout<S>(a, dt<T>);
  if (c.n == 0) return;
  const int32_t n = nb::to_int(static_cast<int64_t>(c.n), S, "the element count");
  const T scale = static_cast<T>(c.scale);
  const uint64_t whole = c.n / 4 * 4, rest = c.n - whole;
  const uint64_t words = (c.n + 3) / 4;
  if constexpr (Grad) {
    if (rest != 0) copy(cx, a.queue(), c.mask->memory, whole, cx.tail, 0, rest);
    cx.grid(a.queue(), cx.get<T>(K_DROP_BWD), words,
            {mem(c.x->memory), mem(c.mask->memory), mem(cx.tail), mem(c.y->memory), val(scale),
             val(n)});
  } else {
    const uint32_t seed_lo = static_cast<uint32_t>(c.seed),
                   seed_hi = static_cast<uint32_t>(c.seed >> 32), thr = c.threshold;
    cx.grid(a.queue(), cx.get<T>(K_DROP_FWD), words,
            {mem(c.x->memory), mem(c.y->memory), mem(c.mask->memory), mem(cx.tail), val(scale),
             val(n), val(seed_lo), val(seed_hi), val(thr)});
    if (rest != 0) copy(cx, a.queue(), cx.tail, 0, c.mask->memory, whole, rest);
  }
}

// ---- pooling -------------------------------------------------------------------------------

// The geometry as the kernels take it (POOL_ARGS), every value a 32-bit int: planes H W P Q wh ww
// sh sw ph pw. Every tensor of the op is below 2^31 elements (run_op), and so are the window's
// coordinates, which stay within the padded plane.
struct pool_geo {
  std::array<int32_t, 11> v{};
};
pool_geo pool_geo_of(const nb::pool_call& c, const pcy_op_schema& s) {
  pool_geo g;
  const int64_t in[11] = {c.N * c.C, c.H,         c.W,         c.P,      c.Q,     c.win[0],
                          c.win[1],  c.stride[0], c.stride[1], c.pad[0], c.pad[1]};
  for (int i = 0; i < 11; ++i)
    g.v[i] = nb::to_int(in[i], s, "a pooling extent or geometry value");
  if (c.P * c.stride[0] + c.win[0] + 2 * c.pad[0] + c.H >= (int64_t{1} << 31) ||
      c.Q * c.stride[1] + c.win[1] + 2 * c.pad[1] + c.W >= (int64_t{1} << 31))
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(s.extension, ".", s.name,
                                            ": the geometry reaches coordinates beyond the 32-bit "
                                            "range of nn_vulkan's kernels; use smaller geometry"));
  return g;
}
#define PCY_POOL_ARGS                                                                              \
  val(g.v[0]), val(g.v[1]), val(g.v[2]), val(g.v[3]), val(g.v[4]), val(g.v[5]), val(g.v[6]),       \
      val(g.v[7]), val(g.v[8]), val(g.v[9]), val(g.v[10])

template <const pcy_op_schema& S, bool Indexed, class T>
void op_pool_max(vk_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const pool_geo g = pool_geo_of(c, S);
  const uint64_t total = uint64_t(c.N * c.C) * c.P * c.Q;
  if (total == 0) return;
  const int32_t with = Indexed ? 1 : 0;
  // Plain max pooling has no indices: the tail word stands in for the binding (not written).
  cx.grid(a.queue(), cx.get<T>(K_POOL_MAX), total,
          {mem(c.x->memory), mem(c.y->memory), mem(Indexed ? c.indices->memory : cx.tail),
           PCY_POOL_ARGS, val(with)});
}

template <class T> void op_pool_max_grad(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_pooling_max_grad_schema;
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const pool_geo g = pool_geo_of(c, S);
  const uint64_t total = uint64_t(c.N * c.C) * c.H * c.W;
  if (total == 0) return;
  cx.grid(a.queue(), cx.get<T>(K_POOL_MAX_GRAD), total,
          {mem(c.x->memory), mem(c.dy->memory), mem(c.dx->memory), PCY_POOL_ARGS});
}

// An invocation per plane: it zeroes its plane of dx and adds dy at the indices in order.
template <class T> void op_pool_max_grad_indexed(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_pooling_max_grad_indexed_schema;
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const int64_t planes = c.N * c.C, HW = c.H * c.W, PQ = c.P * c.Q;
  if (planes == 0 || HW == 0) return;
  const int32_t np = nb::to_int(planes, S, "the planes"), hw = nb::to_int(HW, S, "a plane"),
                pq = nb::to_int(PQ, S, "a pooled plane");
  cx.grid(
      a.queue(), cx.get<T>(K_POOL_MAX_GRAD_IDX), uint64_t(planes),
      {mem(c.dy->memory), mem(c.indices->memory), mem(c.dx->memory), val(np), val(hw), val(pq)});
}

template <const pcy_op_schema& S, bool Grad, class T>
void op_pool_avg(vk_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const pool_geo g = pool_geo_of(c, S);
  const int32_t incl = c.include_padding ? 1 : 0;
  if constexpr (Grad) {
    const uint64_t total = uint64_t(c.N * c.C) * c.H * c.W;
    if (total == 0) return;
    cx.grid(a.queue(), cx.get<T>(K_POOL_AVG_GRAD), total,
            {mem(c.dy->memory), mem(c.dx->memory), PCY_POOL_ARGS, val(incl)});
  } else {
    const uint64_t total = uint64_t(c.N * c.C) * c.P * c.Q;
    if (total == 0) return;
    cx.grid(a.queue(), cx.get<T>(K_POOL_AVG), total,
            {mem(c.x->memory), mem(c.y->memory), PCY_POOL_ARGS, val(incl)});
  }
}
#undef PCY_POOL_ARGS

// ---- LRN -----------------------------------------------------------------------------------

// An invocation per element; the gradient recomputes the s of its window from x.
template <const pcy_op_schema& S, bool Grad, class T>
void op_lrn(vk_context& cx, const sdk::op_args& a) {
  const nb::lrn_call c = nb::decode_lrn<S>(a, dt<T>);
  const uint64_t total = uint64_t(c.N) * c.C * c.H * c.W;
  if (total == 0) return;
  // Every tensor is below 2^31 elements (run_op), so is each factor; n is below 2^31 (the
  // decoder), and the kernels clip the window to the channels before adding it to c.
  const int32_t t = static_cast<int32_t>(total), C = static_cast<int32_t>(c.C),
                HW = static_cast<int32_t>(c.H * c.W), n = static_cast<int32_t>(c.n);
  const T alpha = static_cast<T>(c.alpha), beta = static_cast<T>(c.beta), k = static_cast<T>(c.k);
  if constexpr (Grad)
    cx.grid(a.queue(), cx.get<T>(K_LRN_GRAD), total,
            {mem(c.x->memory), mem(c.y->memory), mem(c.dy->memory), mem(c.dx->memory), val(alpha),
             val(beta), val(k), val(t), val(C), val(HW), val(n)});
  else
    cx.grid(a.queue(), cx.get<T>(K_LRN_FWD), total,
            {mem(c.x->memory), mem(c.y->memory), val(alpha), val(beta), val(k), val(t), val(C),
             val(HW), val(n)});
}

// ---- layer_norm, rms_norm -----------------------------------------------------------------

// An invocation per row (its sums in row order), or a work-group per row of at least
// as many elements as a work-group has invocations (by_group; sums over the work-group); the
// statistics are `real` (the statistics dtype of f32 and f64 is the op's). A statistics tensor not
// saved, and rms_norm's absent mean and bias, are bound to the context's tail word and not touched.
template <const pcy_op_schema& S, bool Layer, class T>
void op_norm(vk_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  if (c.outer == 0) return;
  // outer x n is x's element count, below 2^31 (run_op).
  const int32_t outer = static_cast<int32_t>(c.outer), n = static_cast<int32_t>(c.n),
                layer = Layer ? 1 : 0, save = (c.mean ? 1 : 0) | (c.rstd ? 2 : 0);
  const T eps = static_cast<T>(c.epsilon);
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.tail); };
  const bool grouped = by_group(cx, c.n);
  cx.per_row(grouped, a.queue(), cx.get<T>(grouped ? K_NORM_FWD_WG : K_NORM_FWD), c.outer,
             {m(c.x), m(c.weight), m(c.bias), m(c.y), m(c.mean), m(c.rstd), val(eps), val(outer),
              val(n), val(layer), val(save)});
}

// dx by rows, then dweight and dbias by columns (each summing the rows in order).
template <const pcy_op_schema& S, bool Layer, class T>
void op_norm_grad(vk_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  if (c.n == 0) return;
  const int32_t outer = static_cast<int32_t>(c.outer), n = static_cast<int32_t>(c.n),
                layer = Layer ? 1 : 0;
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.tail); };
  const bool grouped = by_group(cx, c.n);
  if (c.outer != 0)
    cx.per_row(grouped, a.queue(), cx.get<T>(grouped ? K_NORM_BWD_WG : K_NORM_BWD_ROW), c.outer,
               {m(c.x), m(c.weight), m(c.mean), m(c.rstd), m(c.dy), m(c.y), val(outer), val(n),
                val(layer)});
  cx.grid(a.queue(), cx.get<T>(K_NORM_BWD_COLS), c.n,
          {m(c.x), m(c.mean), m(c.rstd), m(c.dy), m(c.dweight), m(c.dbias), val(outer), val(n),
           val(layer)});
}

// ---- cross_entropy -------------------------------------------------------------------------

// ignore_index as the kernels take it: the value and whether an i32 label can equal it.
struct ignore_arg {
  int32_t value = 0, on = 0;
};
ignore_arg ignore_of(int64_t ignore) {
  ignore_arg g;
  if (ignore >= INT32_MIN && ignore <= INT32_MAX) {
    g.value = static_cast<int32_t>(ignore);
    g.on = 1;
  }
  return g;
}

// An invocation per row; 'mean' and 'sum' in one work-group (fixed-order partial sums). lse is
// `real` (the statistics dtype of f32 and f64 is the op's); not saved: the tail word.
template <class T> void op_xent(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_cross_entropy_schema;
  const nb::xent_call c = nb::decode_xent<S>(a, dt<T>);
  if (c.rows == 0 && c.reduction == 0) return;
  const int32_t rows = static_cast<int32_t>(c.rows), C = static_cast<int32_t>(c.classes),
                red = c.reduction, save = c.lse && c.rows != 0 ? 1 : 0;
  const ignore_arg ign = ignore_of(c.ignore_index);
  const T eps = static_cast<T>(c.smoothing);
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.tail); };
  const std::initializer_list<pcy_kernel_arg> args{
      m(c.logits), m(c.labels), m(c.loss), m(save ? c.lse : nullptr),
      val(eps),    val(rows),   val(C),    val(ign.value),
      val(ign.on), val(red),    val(save)};
  if (red == 0)
    cx.grid(a.queue(), cx.get<T>(K_XENT_FWD), c.rows, args);
  else
    cx.launch(a.queue(), cx.get<T>(K_XENT_FWD), 1, {cx.wg, 1, 1}, {cx.wg, 1, 1}, args);
}

template <class T> void op_xent_grad(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_cross_entropy_grad_schema;
  const nb::xent_call c = nb::decode_xent<S>(a, dt<T>);
  if (c.rows == 0 || c.classes == 0) return;
  const int32_t rows = static_cast<int32_t>(c.rows), C = static_cast<int32_t>(c.classes),
                red = c.reduction;
  const ignore_arg ign = ignore_of(c.ignore_index);
  const T eps = static_cast<T>(c.smoothing);
  cx.grid(a.queue(), cx.get<T>(K_XENT_BWD), c.rows,
          {mem(c.logits->memory), mem(c.labels->memory), mem(c.lse->memory), mem(c.dloss->memory),
           mem(c.dlogits->memory), val(eps), val(rows), val(C), val(ign.value), val(ign.on),
           val(red)});
}

// ---- embedding -----------------------------------------------------------------------------

// The forward gathers an element of y an invocation. The gradient is an invocation per row of
// dweight and chunk of 32 columns, each scanning every position in order (the same bits every
// run, no atomics, no sort; n x V x D / 32 index reads, slow for large inputs).
template <class T> void op_embedding(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_embedding_schema;
  const nb::embedding_call c = nb::decode_embedding<S>(a, dt<T>);
  const uint64_t total = c.n * c.D;
  if (total == 0) return;
  // n x D is y's element count and V x D the table's, below 2^31 (run_op); so are n and V.
  const int32_t n = static_cast<int32_t>(c.n), D = static_cast<int32_t>(c.D),
                V = static_cast<int32_t>(c.V);
  auto m = [&](const pcy_tensor* t) { return mem(t->memory ? t->memory : cx.tail); };
  cx.grid(a.queue(), cx.get<T>(K_EMB_FWD), total,
          {m(c.weight), m(c.indices), m(c.y), val(n), val(D), val(V)});
}

template <class T> void op_embedding_grad(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_embedding_grad_schema;
  const nb::embedding_call c = nb::decode_embedding<S>(a, dt<T>);
  const uint64_t total = c.V * c.D;
  if (total == 0) return;
  const int32_t n = static_cast<int32_t>(c.n), D = static_cast<int32_t>(c.D),
                V = static_cast<int32_t>(c.V), pad = static_cast<int32_t>(c.padding_idx);
  auto m = [&](const pcy_tensor* t) { return mem(t->memory ? t->memory : cx.tail); };
  cx.grid(a.queue(), cx.get<T>(K_EMB_GRAD), c.V * ((c.D + 31) / 32),
          {m(c.indices), m(c.y), m(c.weight), val(n), val(D), val(V), val(pad)});
}

// ---- batch_norm ----------------------------------------------------------------------------

// A work-group per channel (at most grid_cap of them, grid-strided), its sums in a fixed order.
// The statistics are `real` (the statistics dtype of f32 and f64 is the op's); those absent are
// bound to the tail word and not touched.
template <class T> void op_bn(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_batch_norm_schema;
  const nb::bn_call c = nb::decode_bn<S>(a, dt<T>);
  if (c.C == 0) return;
  // N x C x sp is x's element count, below 2^31 (run_op); C != 0, so N sp is too.
  const int32_t N = static_cast<int32_t>(c.N), C = static_cast<int32_t>(c.C),
                sp = static_cast<int32_t>(c.N == 0 ? 0 : c.spatial);
  const int32_t flags = (c.training ? 1 : 0) | (c.running_mean ? 2 : 0) | (c.running_var ? 4 : 0) |
                        (c.mean ? 8 : 0) | (c.rstd ? 16 : 0);
  const T momentum = static_cast<T>(c.momentum), eps = static_cast<T>(c.epsilon);
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.tail); };
  const uint64_t groups = std::min<uint64_t>(c.C, cx.grid_cap);
  cx.launch(a.queue(), cx.get<T>(K_BN_FWD), 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1},
            {m(c.x), m(c.weight), m(c.bias), m(c.running_mean), m(c.running_var), m(c.y), m(c.mean),
             m(c.rstd), val(momentum), val(eps), val(N), val(C), val(sp), val(flags)});
}

template <class T> void op_bn_grad(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_batch_norm_grad_schema;
  const nb::bn_call c = nb::decode_bn<S>(a, dt<T>);
  if (c.C == 0) return;
  const int32_t N = static_cast<int32_t>(c.N), C = static_cast<int32_t>(c.C),
                sp = static_cast<int32_t>(c.N == 0 ? 0 : c.spatial);
  const int32_t flags = (c.training ? 1 : 0) | (c.dweight ? 2 : 0) | (c.dbias ? 4 : 0);
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.tail); };
  const uint64_t groups = std::min<uint64_t>(c.C, cx.grid_cap);
  cx.launch(a.queue(), cx.get<T>(K_BN_BWD), 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1},
            {m(c.x), m(c.weight), m(c.mean), m(c.rstd), m(c.dy), m(c.y), m(c.dweight), m(c.dbias),
             val(N), val(C), val(sp), val(flags)});
}

// ---- convolution ---------------------------------------------------------------------------

// One algorithm, 0: direct loops, an invocation per output element (each summing its terms in a
// fixed order), no workspace.
constexpr int64_t algo_direct = 0, algo_count = 1;

void check_algorithm(int64_t algo, const pcy_op_schema& s, const char* arg) {
  if (algo >= algo_count)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(s.extension, ".", s.name, ": argument ", arg, ": ", algo,
                       " is not an algorithm of nn_vulkan (0 direct); pass one that "
                       "convolution_algorithm returned"));
}

// The geometry as the kernels take it (CONV_ARGS): N C H W K R S P Q sh sw ph pw dh dw groups,
// each a 32-bit int, and no coordinate the loops form reaching 2^31.
std::array<int32_t, 16> conv_geo_of(const nb::conv_call& c, const pcy_op_schema& s) {
  const int64_t in[16] = {c.N,      c.C,      c.H,      c.W,         c.K,         c.R,
                          c.S,      c.P,      c.Q,      c.stride[0], c.stride[1], c.pad[0],
                          c.pad[1], c.dil[0], c.dil[1], c.groups};
  std::array<int32_t, 16> g{};
  for (int i = 0; i < 16; ++i)
    g[i] = nb::to_int(in[i], s, "a convolution extent or geometry value");
  if (c.P * c.stride[0] + c.R * c.dil[0] + 2 * c.pad[0] + c.H >= (int64_t{1} << 31) ||
      c.Q * c.stride[1] + c.S * c.dil[1] + 2 * c.pad[1] + c.W >= (int64_t{1} << 31))
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(s.extension, ".", s.name,
                                            ": the geometry reaches coordinates beyond the 32-bit "
                                            "range of nn_vulkan's kernels; use smaller geometry"));
  return g;
}
#define PCY_CONV_ARGS                                                                              \
  val(g[0]), val(g[1]), val(g[2]), val(g[3]), val(g[4]), val(g[5]), val(g[6]), val(g[7]),          \
      val(g[8]), val(g[9]), val(g[10]), val(g[11]), val(g[12]), val(g[13]), val(g[14]), val(g[15])

template <const pcy_op_schema& S, int Dir, class T>
void op_conv(vk_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_conv<S>(a, dt<T>);
  check_algorithm(c.algorithm, S, "algorithm");
  const std::array<int32_t, 16> g = conv_geo_of(c, S);
  // c.x is x (or dx), c.w is w (or dw), c.y is y (or dy); every tensor below 2^31 elements.
  if constexpr (Dir == 0) {
    const uint64_t total = uint64_t(c.N) * c.K * c.P * c.Q;
    if (total == 0) return;
    cx.grid(a.queue(), cx.get<T>(K_CONV_FWD), total,
            {mem(c.x->memory), mem(c.w->memory), mem(c.y->memory), PCY_CONV_ARGS});
  } else if constexpr (Dir == 1) {
    const uint64_t total = uint64_t(c.N) * c.C * c.H * c.W;
    if (total == 0) return;
    cx.grid(a.queue(), cx.get<T>(K_CONV_DATA), total,
            {mem(c.w->memory), mem(c.y->memory), mem(c.x->memory), PCY_CONV_ARGS});
  } else {
    const uint64_t total = uint64_t(c.K) * (c.C / c.groups) * c.R * c.S;
    if (total == 0) return;
    auto m = [&](const pcy_tensor* t) { return mem(t->memory ? t->memory : cx.tail); };
    cx.grid(a.queue(), cx.get<T>(K_CONV_FILTER), total,
            {m(c.x), m(c.y), mem(c.w->memory), PCY_CONV_ARGS});
  }
}
#undef PCY_CONV_ARGS

template <const pcy_op_schema& S, bool Grad, class T>
void op_conv_bias(vk_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_bias<S>(a, dt<T>);
  const uint64_t total = uint64_t(c.N) * c.K * c.P * c.Q;
  const int32_t K = nb::to_int(c.K, S, "the channels"), PQ = nb::to_int(c.P * c.Q, S, "a plane"),
                N = nb::to_int(c.N, S, "the batch");
  if constexpr (Grad) {
    if (c.K == 0) return;
    auto m = [&](const pcy_tensor* t) { return mem(t->memory ? t->memory : cx.tail); };
    const uint64_t groups = std::min<uint64_t>(uint64_t(c.K), cx.grid_cap);
    cx.launch(a.queue(), cx.get<T>(K_CONV_GRAD_BIAS), 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1},
              {m(c.y), mem(c.w->memory), val(N), val(K), val(PQ)});
  } else {
    if (total == 0) return;
    const int32_t t = static_cast<int32_t>(total);
    cx.grid(a.queue(), cx.get<T>(K_CONV_BIAS), total,
            {mem(c.y->memory), mem(c.w->memory), val(t), val(K), val(PQ)});
  }
}

// convolution_algorithm: the direct loops for every request (-1 measures nothing: there is one
// algorithm), no workspace, direct numerics; the result written from the host, blocking.
template <class T> void op_conv_algorithm(vk_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_convolution_algorithm_schema;
  const nb::conv_algorithm_call c = nb::decode_conv_algorithm(a, dt<T>);
  if (!(std::is_same_v<T, float> ? cx.f32 : cx.f64).available)
    sdk::fail(PCY_ERR_UNSUPPORTED, (std::is_same_v<T, float> ? cx.f32 : cx.f64).reason);
  if (c.requested >= 0) check_algorithm(c.requested, S, "requested");
  const int64_t result[3] = {algo_direct, 0, PCY_NN_NUMERICS_DIRECT};
  pcy_memory_transfer_args w{};
  w.struct_size = sizeof w;
  w.queue = a.queue();
  w.memory = c.result->memory;
  w.offset = c.result->byte_offset;
  w.host_pointer = const_cast<int64_t*>(result);
  w.bytes = c.result_count * sizeof result[0];
  w.blocking = true;
  sdk::check(cx.fw->memory_write(&w));
}

// ---- the bundle ----------------------------------------------------------------------------

// The name of argument k of op S (its index where the call has more arguments than S).
template <const pcy_op_schema& S> std::string arg_name(uint32_t k) {
  return k < S.arg_count ? std::string(S.args[k].name) : std::to_string(k);
}

// Before every op (sdk::glsl_context::choose_form), as blas_vulkan: a tensor at a byte offset or
// too large for 32-bit indices is refused, and the op's form is chosen (descriptors, else device
// addresses).
template <const pcy_op_schema& S, void (*F)(vk_context&, const sdk::op_args&)>
void run_op(vk_context& cx, const sdk::op_args& a) {
  static const std::string prefix = sdk::str(S.extension, ".", S.name, ": ");
  cx.choose_form(a, prefix, arg_name<S>);
  F(cx, a);
}

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_NN_EXTENSION, "vulkan",
    "NN on Vulkan: own GLSL compute shaders (activations, softmax, dropout, pooling, direct "
    "convolution, LRN, layer_norm, rms_norm, cross_entropy, embedding, batch_norm)"};

class nn_vulkan_bundle : public sdk::bundle_base<identity, vk_context> {
public:
  explicit nn_vulkan_bundle(const pcy_host_services& host) : bundle_base(host) {
    max_binding_ = sdk::setting_count(settings_, log_, "PARENCHYMA_NN_VULKAN_MAX_BINDING", 0,
                                      UINT64_MAX, "bytes", UINT64_MAX);
    grid_cap_ = sdk::setting_count(settings_, log_, "PARENCHYMA_NN_VULKAN_GRID_CAP", 1,
                                   max_groups_1d, "work-groups", 0);
    subgroups_ = sdk::setting_count(settings_, log_, "PARENCHYMA_NN_VULKAN_SUBGROUP", 0, 1,
                                    "(0: off, 1: where the device has them)", 1) != 0;
#define PCY_ACT1(s, K, G) add<s, op_act<s, K, G, float>, op_act<s, K, G, double>>();
#define PCY_ACT(a, K)                                                                              \
  PCY_ACT1(pcy_nn_##a##_schema, K, false)                                                          \
  PCY_ACT1(pcy_nn_##a##_pointwise_schema, K, false)                                                \
  PCY_ACT1(pcy_nn_##a##_grad_schema, K, true)                                                      \
  PCY_ACT1(pcy_nn_##a##_pointwise_grad_schema, K, true)
    PCY_ACT(sigmoid, 0)
    PCY_ACT(relu, 1)
    PCY_ACT(tanh, 2)
    PCY_ACT(elu, 3)
#undef PCY_ACT
#undef PCY_ACT1
#define PCY_ADD2(F, s, ...) add<s, F<s, __VA_ARGS__, float>, F<s, __VA_ARGS__, double>>()
    PCY_ADD2(op_softmax, pcy_nn_softmax_schema, false);
    PCY_ADD2(op_softmax, pcy_nn_log_softmax_schema, true);
    PCY_ADD2(op_softmax, pcy_nn_softmax_grad_schema, false);
    PCY_ADD2(op_softmax, pcy_nn_log_softmax_grad_schema, true);
    PCY_ADD2(op_dropout, pcy_nn_dropout_schema, false);
    PCY_ADD2(op_dropout, pcy_nn_dropout_grad_schema, true);
    PCY_ADD2(op_pool_max, pcy_nn_pooling_max_schema, false);
    PCY_ADD2(op_pool_max, pcy_nn_pooling_max_indexed_schema, true);
    add<pcy_nn_pooling_max_grad_schema, op_pool_max_grad<float>, op_pool_max_grad<double>>();
    add<pcy_nn_pooling_max_grad_indexed_schema, op_pool_max_grad_indexed<float>,
        op_pool_max_grad_indexed<double>>();
    PCY_ADD2(op_pool_avg, pcy_nn_pooling_avg_schema, false);
    PCY_ADD2(op_pool_avg, pcy_nn_pooling_avg_grad_schema, true);
    PCY_ADD2(op_lrn, pcy_nn_lrn_schema, false);
    PCY_ADD2(op_lrn, pcy_nn_lrn_grad_schema, true);
    PCY_ADD2(op_norm, pcy_nn_layer_norm_schema, true);
    PCY_ADD2(op_norm, pcy_nn_rms_norm_schema, false);
    PCY_ADD2(op_norm_grad, pcy_nn_layer_norm_grad_schema, true);
    PCY_ADD2(op_norm_grad, pcy_nn_rms_norm_grad_schema, false);
    add<pcy_nn_cross_entropy_schema, op_xent<float>, op_xent<double>>();
    add<pcy_nn_cross_entropy_grad_schema, op_xent_grad<float>, op_xent_grad<double>>();
    add<pcy_nn_embedding_schema, op_embedding<float>, op_embedding<double>>();
    add<pcy_nn_embedding_grad_schema, op_embedding_grad<float>, op_embedding_grad<double>>();
    add<pcy_nn_batch_norm_schema, op_bn<float>, op_bn<double>>();
    add<pcy_nn_batch_norm_grad_schema, op_bn_grad<float>, op_bn_grad<double>>();
    PCY_ADD2(op_conv, pcy_nn_convolution_schema, 0);
    PCY_ADD2(op_conv, pcy_nn_convolution_grad_data_schema, 1);
    PCY_ADD2(op_conv, pcy_nn_convolution_grad_filter_schema, 2);
    PCY_ADD2(op_conv_bias, pcy_nn_convolution_bias_schema, false);
    PCY_ADD2(op_conv_bias, pcy_nn_convolution_grad_bias_schema, true);
    add<pcy_nn_convolution_algorithm_schema, op_conv_algorithm<float>, op_conv_algorithm<double>>();
#undef PCY_ADD2
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                        PCY_FRAMEWORK_SLOT_kernel_launch, PCY_FRAMEWORK_SLOT_memory_alloc,
                        PCY_FRAMEWORK_SLOT_memory_copy, PCY_FRAMEWORK_SLOT_memory_write});
    auto cx = std::make_unique<vk_context>(a);
    const sdk::device_facts dev = sdk::device_facts_of(a);
    // 256 invocations a work-group where the device allows them (or does not say), else 128:
    // Vulkan promises 128 (maxComputeWorkGroupInvocations).
    if (dev.max_work_group > 0 && dev.max_work_group < 256) cx->wg = 128;
    // Work-group sums start with a butterfly inside each subgroup where compute shaders have
    // subgroup shuffles and the subgroup size divides the work-group (whole subgroups).
    const int64_t sg = sdk::device_number(a, "subgroup_size", 0);
    cx->shuffle = subgroups_ && sdk::device_number(a, "subgroup_shuffle", 0) != 0 && sg > 0 &&
                  cx->wg % sg == 0;
    if (grid_cap_ > 0) cx->grid_cap = grid_cap_;
    cx->read_binding_limits(a, max_binding_);

    // One kernel per dtype now (act_fwd), so that a device or a build without a GLSL compiler
    // fails the context (f32) or marks f64 unavailable at once; the others on first use.
    prepare(*cx, cx->f32, "float", true);
    if (dev.fp64)
      prepare(*cx, cx->f64, "double", false);
    else
      cx->f64.reason =
          "f64 NN on this device: the Vulkan device has no shaderFloat64 (its 'fp64' property "
          "is false); f64 ops go to another framework where one serves them";
    cx->tail = cx->alloc(16);
    return cx.release();
  }

private:
  void prepare(vk_context& cx, sdk::glsl_dtype_kernels<K_COUNT>& d, const char* real, bool must) {
    cx.prepare(d,
               sdk::str("-DREAL=", real, must ? "" : " -DPCY_FP64", " -DEWG=", cx.wg,
                        cx.shuffle ? " -DPCY_SHUFFLE" : ""),
               K_ACT_FWD, must, log_, "f64 NN shaders");
  }

  template <const pcy_op_schema& schema, void (*F32)(vk_context&, const sdk::op_args&),
            void (*F64)(vk_context&, const sdk::op_args&)>
  void add() {
    table_.add<run_op<schema, F32>, run_op<schema, F64>>(
        schema, sdk::str("parenchyma GLSL compute shader nn.", schema.name, " (f32)"),
        sdk::str("parenchyma GLSL compute shader nn.", schema.name, " (f64)"));
  }

  uint64_t grid_cap_ = 0;             // PARENCHYMA_NN_VULKAN_GRID_CAP; 0: the default
  bool subgroups_ = true;             // PARENCHYMA_NN_VULKAN_SUBGROUP=0: shared-memory trees only
  uint64_t max_binding_ = UINT64_MAX; // PARENCHYMA_NN_VULKAN_MAX_BINDING (a test aid)
  sdk::op_table<nn_vulkan_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(nn_vulkan_bundle)
