// NN bundle for the OpenCL framework: every op of pcy_nn.h in f32 and f64 (f64 where the device
// has cl_khr_fp64) with our own OpenCL C kernels (kernels_cl.hpp). Each context builds one
// program per dtype through the framework (its kernel cache) and makes every kernel once in
// create_context; an op decodes and re-checks its arguments with the shared decoder
// (nn_call.hpp), then enqueues on the call's queue without waiting. Tensors may start at any
// byte offset that is a multiple of their element size (it reaches the kernels as an element
// offset). Convolution algorithms: 0 direct (one work-item per output element, the default), 1
// implicit GEMM with local-memory tiles; convolution_algorithm measures them once per shape,
// dtype and device (process-wide cache), or picks by heuristic. No op needs workspace but
// lrn_grad, which keeps the scale of every element there, and embedding_grad (its sort keys).
#include "kernels_cl.hpp"
#include "nn_call.hpp"

#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace {

using namespace parenchyma;
namespace nb = parenchyma::nn_bundle;

constexpr const char* bundle_name = "nn_opencl";

enum kernel_id {
  K_ACT_FWD,
  K_ACT_BWD,
  K_SM_ROW,
  K_SM_STRIDED,
  K_SMG_ROW,
  K_SMG_STRIDED,
  K_CONV_FWD_DIRECT,
  K_CONV_DATA_DIRECT,
  K_CONV_FILTER_DIRECT,
  K_CONV_FWD_GEMM,
  K_CONV_DATA_GEMM,
  K_CONV_FILTER_GEMM,
  K_BIAS,
  K_GRAD_BIAS,
  K_POOL_MAX,
  K_POOL_MAX_GRAD,
  K_POOL_MAX_GRAD_IDX,
  K_POOL_AVG,
  K_POOL_AVG_GRAD,
  K_LRN_FWD,
  K_LRN_SCALE,
  K_LRN_GRAD,
  K_DROP_FWD,
  K_DROP_BWD,
  K_NORM_FWD,
  K_NORM_BWD_ROW,
  K_NORM_BWD_COLS,
  K_XENT_FWD,
  K_XENT_BWD,
  K_EMB_FWD,
  K_EMB_KEYS,
  K_EMB_SORT_GLOBAL,
  K_EMB_SORT_LOCAL,
  K_EMB_ROWS,
  K_BN_FWD,
  K_BN_BWD,
  K_COUNT
};
constexpr std::array<const char*, K_COUNT> kernel_names{"act_fwd",
                                                        "act_bwd",
                                                        "softmax_row",
                                                        "softmax_strided",
                                                        "softmax_grad_row",
                                                        "softmax_grad_strided",
                                                        "conv_fwd_direct",
                                                        "conv_data_direct",
                                                        "conv_filter_direct",
                                                        "conv_fwd_gemm",
                                                        "conv_data_gemm",
                                                        "conv_filter_gemm",
                                                        "conv_bias",
                                                        "conv_grad_bias",
                                                        "pool_max",
                                                        "pool_max_grad",
                                                        "pool_max_grad_idx",
                                                        "pool_avg",
                                                        "pool_avg_grad",
                                                        "lrn_fwd",
                                                        "lrn_scale",
                                                        "lrn_grad",
                                                        "dropout_fwd",
                                                        "dropout_bwd",
                                                        "norm_fwd",
                                                        "norm_bwd_row",
                                                        "norm_bwd_cols",
                                                        "xent_fwd",
                                                        "xent_bwd",
                                                        "emb_fwd",
                                                        "emb_keys",
                                                        "emb_sort_global",
                                                        "emb_sort_local",
                                                        "emb_rows",
                                                        "bn_fwd",
                                                        "bn_bwd"};

constexpr int64_t algo_direct = 0, algo_gemm = 1, algo_count = 2;

struct dtype_state : sdk::dtype_program {
  std::array<pcy_kernel, K_COUNT> k{};
};

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

struct ocl_context : sdk::device_context {
  explicit ocl_context(const pcy_bundle_context_args& a) : device_context(a) {}
  void* device_id = nullptr; // cl_device_id: the key of the measured-algorithm cache
  bool cpu = false;
  uint32_t wg = 256;          // work-group size of the grid-stride kernels
  uint32_t swg = 256;         // SWG: work-group size of the row reductions
  uint32_t ts = 16;           // TS: tile edge of the implicit-GEMM convolutions
  uint32_t lanes = 64;        // work-items per plane in pooling_max_grad_indexed
  uint64_t max_groups = 4096; // cap on the groups of a grid-stride launch
  dtype_state f32, f64;
  pcy_memory dummy = nullptr; // stands in for the indices of plain max pooling

  template <class T> const dtype_state& state() const {
    const dtype_state& d = std::is_same_v<T, float> ? f32 : f64;
    if (!d.available) [[unlikely]]
      sdk::fail(PCY_ERR_UNSUPPORTED, d.reason);
    return d;
  }
  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !f64.available) {
      *reason = f64.reason.c_str();
      return false;
    }
    return true;
  }
  // A grid-stride kernel over `items` work items: whole groups of `local`, at most max_groups.
  void grid(pcy_queue q, pcy_kernel k, uint64_t items, uint32_t local,
            std::initializer_list<pcy_kernel_arg> args) const {
    const uint64_t groups = std::clamp<uint64_t>((items + local - 1) / local, 1, max_groups);
    launch(q, k, 1, {groups * local, 1, 1}, {local, 1, 1}, args);
  }
};

using sdk::mem;
using sdk::val;

// A tensor's byte_offset in elements of `size` bytes; one that is not a whole number of elements
// cannot be addressed by the kernels and is refused.
PCY_SDK_HOT inline int64_t elem_off(const pcy_tensor& t, uint64_t size, const pcy_op_schema& s,
                                    const char* arg) {
  if (t.byte_offset % size != 0) [[unlikely]]
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(s.extension, ".", s.name, ": argument ", arg, " starts at byte offset ",
                       t.byte_offset, ", not a multiple of its ", size,
                       "-byte elements; nn_opencl addresses whole elements"));
  return static_cast<int64_t>(t.byte_offset / size);
}
template <class T>
PCY_SDK_HOT inline int64_t off(const pcy_tensor& t, const pcy_op_schema& s, const char* arg) {
  return elem_off(t, sizeof(T), s, arg);
}

// The kernels compute coordinates in 32-bit ints: refuse geometry whose coordinates could leave
// that range (each term is already below 2^31, so the sum cannot overflow int64).
void coords_fit(int64_t v, const pcy_op_schema& s, const char* what) {
  if (v >= (int64_t{1} << 31))
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(s.extension, ".", s.name, ": ", what,
                                            " reach coordinates beyond the 32-bit range of "
                                            "nn_opencl's kernels; use smaller geometry"));
}

// ---- activations ---------------------------------------------------------------------------

template <const pcy_op_schema& S, int Kind, bool Grad, class T>
void op_act(ocl_context& cx, const sdk::op_args& a) {
  nb::eltwise_call c;
  if constexpr (Grad)
    c = nb::decode_act_grad<S>(a, dt<T>);
  else
    c = nb::decode_act<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.n == 0) return;
  const int64_t n = static_cast<int64_t>(c.n);
  const int32_t kind = Kind;
  const T alpha = static_cast<T>(c.alpha);
  const uint64_t items = (c.n + 3) / 4;
  if constexpr (Grad) {
    const int64_t yo = off<T>(*c.x, S, "y"), dyo = off<T>(*c.dy, S, "dy"),
                  dxo = off<T>(*c.y, S, "dx");
    cx.grid(a.queue(), d.k[K_ACT_BWD], items, cx.wg,
            {val(n), val(kind), val(alpha), mem(c.x->memory), val(yo), mem(c.dy->memory), val(dyo),
             mem(c.y->memory), val(dxo)});
  } else {
    const int64_t xo = off<T>(*c.x, S, "x"), yo = off<T>(*c.y, S, "y");
    cx.grid(a.queue(), d.k[K_ACT_FWD], items, cx.wg,
            {val(n), val(kind), val(alpha), mem(c.x->memory), val(xo), mem(c.y->memory), val(yo)});
  }
}

// ---- softmax -------------------------------------------------------------------------------

template <const pcy_op_schema& S, bool Log, class T>
void op_softmax(ocl_context& cx, const sdk::op_args& a) {
  const nb::softmax_call c = nb::decode_softmax<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.outer == 0 || c.len == 0 || c.inner == 0) return;
  constexpr bool grad = nb::detail::has<S>("dx");
  const int64_t outer = static_cast<int64_t>(c.outer), len = static_cast<int64_t>(c.len),
                inner = static_cast<int64_t>(c.inner);
  const int32_t logm = Log ? 1 : 0;
  const int64_t xo = off<T>(*c.x, S, grad ? "y" : "x"), yo = off<T>(*c.y, S, grad ? "dx" : "y");
  const bool row = c.inner == 1;
  if constexpr (grad) {
    const int64_t dyo = off<T>(*c.dy, S, "dy");
    if (row)
      cx.launch(a.queue(), d.k[K_SMG_ROW], 1, {std::min<uint64_t>(c.outer, 65536) * cx.swg, 1, 1},
                {cx.swg, 1, 1},
                {val(outer), val(len), val(logm), mem(c.x->memory), val(xo), mem(c.dy->memory),
                 val(dyo), mem(c.y->memory), val(yo)});
    else
      cx.grid(a.queue(), d.k[K_SMG_STRIDED], c.outer * c.inner, cx.wg,
              {val(outer), val(len), val(inner), val(logm), mem(c.x->memory), val(xo),
               mem(c.dy->memory), val(dyo), mem(c.y->memory), val(yo)});
  } else {
    if (row)
      cx.launch(
          a.queue(), d.k[K_SM_ROW], 1, {std::min<uint64_t>(c.outer, 65536) * cx.swg, 1, 1},
          {cx.swg, 1, 1},
          {val(outer), val(len), val(logm), mem(c.x->memory), val(xo), mem(c.y->memory), val(yo)});
    else
      cx.grid(a.queue(), d.k[K_SM_STRIDED], c.outer * c.inner, cx.wg,
              {val(outer), val(len), val(inner), val(logm), mem(c.x->memory), val(xo),
               mem(c.y->memory), val(yo)});
  }
}

// ---- convolution ---------------------------------------------------------------------------

// The geometry as the kernels take it (CONV_ARGS), every value a 32-bit int.
struct conv_geo {
  std::array<int32_t, 16> v{}; // N C H W K R S P Q sh sw ph pw dh dw G
  int32_t N() const { return v[0]; }
  int32_t C() const { return v[1]; }
  int32_t H() const { return v[2]; }
  int32_t W() const { return v[3]; }
  int32_t K() const { return v[4]; }
  int32_t R() const { return v[5]; }
  int32_t S() const { return v[6]; }
  int32_t P() const { return v[7]; }
  int32_t Q() const { return v[8]; }
  int32_t G() const { return v[15]; }
};

conv_geo geo_of(const nb::conv_call& c, const pcy_op_schema& s) {
  conv_geo g;
  const int64_t in[16] = {c.N,      c.C,      c.H,      c.W,         c.K,         c.R,
                          c.S,      c.P,      c.Q,      c.stride[0], c.stride[1], c.pad[0],
                          c.pad[1], c.dil[0], c.dil[1], c.groups};
  for (int i = 0; i < 16; ++i)
    g.v[i] = nb::to_int(in[i], s, "a convolution extent or geometry value");
  coords_fit(c.P * c.stride[0] + c.R * c.dil[0] + 2 * c.pad[0] + c.H, s, "the heights");
  coords_fit(c.Q * c.stride[1] + c.S * c.dil[1] + 2 * c.pad[1] + c.W, s, "the widths");
  coords_fit(c.R * c.S, s, "the filter's planes");
  return g;
}

// Elements of (input a, input b, output) per direction: 0 (x, w, y), 1 (w, dy, dx), 2 (x, dy, dw).
std::array<uint64_t, 3> conv_sizes(int dir, const conv_geo& g) {
  const uint64_t x = uint64_t(g.N()) * g.C() * g.H() * g.W();
  const uint64_t w = uint64_t(g.K()) * (g.C() / g.G()) * g.R() * g.S();
  const uint64_t y = uint64_t(g.N()) * g.K() * g.P() * g.Q();
  if (dir == 0) return {x, w, y};
  if (dir == 1) return {w, y, x};
  return {x, y, w};
}

// The implicit GEMM's rows, columns and inner length per direction.
std::array<uint64_t, 3> gemm_dims(int dir, const conv_geo& g) {
  const uint64_t Cg = g.C() / g.G(), Kg = g.K() / g.G(), RS = uint64_t(g.R()) * g.S();
  const uint64_t PQ = uint64_t(g.P()) * g.Q(), HW = uint64_t(g.H()) * g.W();
  if (dir == 0) return {Kg, g.N() * PQ, Cg * RS};
  if (dir == 1) return {Cg, g.N() * HW, Kg * RS};
  return {Kg, Cg * RS, g.N() * PQ};
}

template <class T>
void conv_run(const ocl_context& cx, pcy_queue q, int dir, int64_t algo, const conv_geo& g,
              pcy_memory a, int64_t ao, pcy_memory b, int64_t bo, pcy_memory out, int64_t oo) {
  const dtype_state& d = cx.state<T>();
  const auto n = conv_sizes(dir, g);
  if (n[2] == 0) return; // an empty output; an empty input gives zeros below
  const auto& v = g.v;
#define PCY_CONV_ARGS                                                                              \
  val(v[0]), val(v[1]), val(v[2]), val(v[3]), val(v[4]), val(v[5]), val(v[6]), val(v[7]),          \
      val(v[8]), val(v[9]), val(v[10]), val(v[11]), val(v[12]), val(v[13]), val(v[14]),            \
      val(v[15]), mem(a), val(ao), mem(b), val(bo), mem(out), val(oo)
  if (algo == algo_direct) {
    const kernel_id k = dir == 0   ? K_CONV_FWD_DIRECT
                        : dir == 1 ? K_CONV_DATA_DIRECT
                                   : K_CONV_FILTER_DIRECT;
    cx.grid(q, d.k[k], n[2], cx.wg, {PCY_CONV_ARGS});
  } else {
    const kernel_id k = dir == 0   ? K_CONV_FWD_GEMM
                        : dir == 1 ? K_CONV_DATA_GEMM
                                   : K_CONV_FILTER_GEMM;
    const auto m = gemm_dims(dir, g);
    const uint64_t ts = cx.ts;
    cx.launch(q, d.k[k], 3, {(m[1] + ts - 1) / ts * ts, (m[0] + ts - 1) / ts * ts, uint64_t(g.G())},
              {cx.ts, cx.ts, 1}, {PCY_CONV_ARGS});
  }
#undef PCY_CONV_ARGS
}

void check_algorithm(int64_t algo, const pcy_op_schema& s, const char* arg) {
  if (algo >= algo_count)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(s.extension, ".", s.name, ": argument ", arg, ": ", algo,
                       " is not an algorithm of nn_opencl (0 direct, 1 implicit GEMM); pass one "
                       "that convolution_algorithm returned"));
}

template <const pcy_op_schema& S, int Dir, class T>
void op_conv(ocl_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_conv<S>(a, dt<T>);
  check_algorithm(c.algorithm, S, "algorithm");
  const conv_geo g = geo_of(c, S);
  // c.x is x (or dx), c.w is w (or dw), c.y is y (or dy).
  if constexpr (Dir == 0)
    conv_run<T>(cx, a.queue(), 0, c.algorithm, g, c.x->memory, off<T>(*c.x, S, "x"), c.w->memory,
                off<T>(*c.w, S, "w"), c.y->memory, off<T>(*c.y, S, "y"));
  else if constexpr (Dir == 1)
    conv_run<T>(cx, a.queue(), 1, c.algorithm, g, c.w->memory, off<T>(*c.w, S, "w"), c.y->memory,
                off<T>(*c.y, S, "dy"), c.x->memory, off<T>(*c.x, S, "dx"));
  else
    conv_run<T>(cx, a.queue(), 2, c.algorithm, g, c.x->memory, off<T>(*c.x, S, "x"), c.y->memory,
                off<T>(*c.y, S, "dy"), c.w->memory, off<T>(*c.w, S, "dw"));
}

// Heuristic: the direct kernels on CPUs (PoCL runs them as vectorised loops; the tiles' barriers
// cost more than they save), the tiled GEMM on GPUs once its matrices fill a tile.
int64_t heuristic(const ocl_context& cx, int dir, const conv_geo& g) {
  if (cx.cpu) return algo_direct;
  const auto m = gemm_dims(dir, g);
  return m[0] >= 8 && m[2] >= 16 && m[1] >= 64 ? algo_gemm : algo_direct;
}

struct algo_key {
  void* device;
  pcy_dtype dtype;
  int dir;
  std::array<int32_t, 16> geo;
  auto operator<=>(const algo_key&) const = default;
};
std::mutex& algo_mutex() {
  static std::mutex m;
  return m;
}
std::map<algo_key, int64_t>& algo_cache() {
  // Destroyed when the plugin is unloaded or at exit: no bundle context outlives the plugin,
  // and a leaked map would be memory that an unloaded plugin can never free.
  static std::map<algo_key, int64_t> m;
  return m;
}

// Device memory for a measurement, freed on every path.
struct scratch {
  const pcy_framework_api* fw = nullptr;
  pcy_memory m = nullptr;
  scratch(const ocl_context& cx, pcy_queue q, uint64_t bytes) : fw(cx.fw) {
    const pcy_framework_api& f = *cx.fw;
    pcy_memory_alloc_args al{};
    al.struct_size = sizeof al;
    al.context = cx.context;
    al.device = cx.device;
    al.bytes = bytes;
    sdk::check(f.memory_alloc(&al));
    m = al.memory;
    const uint32_t zero = 0;
    cx.fill(q, m, 0, bytes, &zero, sizeof zero);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    if (m != nullptr) fw->memory_free(m);
  }
};

// Times both algorithms on zero-filled buffers of the call's shapes (a warm-up run, then a timed
// one, the queue drained around each); shapes too large to allocate lightly, or empty, take the
// heuristic.
template <class T> int64_t measure(const ocl_context& cx, pcy_queue q, int dir, const conv_geo& g) {
  const auto n = conv_sizes(dir, g);
  constexpr uint64_t cap = uint64_t{256} << 20; // bytes per buffer
  for (uint64_t e : n)
    if (e == 0 || e > cap / sizeof(T)) return heuristic(cx, dir, g);
  scratch a(cx, q, n[0] * sizeof(T)), b(cx, q, n[1] * sizeof(T)), o(cx, q, n[2] * sizeof(T));
  sdk::check(cx.fw->queue_finish(q));
  int64_t best = algo_direct;
  double best_s = 0;
  for (int64_t algo = 0; algo < algo_count; ++algo) {
    conv_run<T>(cx, q, dir, algo, g, a.m, 0, b.m, 0, o.m, 0);
    sdk::check(cx.fw->queue_finish(q));
    const auto t0 = std::chrono::steady_clock::now();
    conv_run<T>(cx, q, dir, algo, g, a.m, 0, b.m, 0, o.m, 0);
    sdk::check(cx.fw->queue_finish(q));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (algo == 0 || s < best_s) {
      best = algo;
      best_s = s;
    }
  }
  return best;
}

template <class T> void op_conv_algorithm(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_convolution_algorithm_schema;
  const nb::conv_algorithm_call c = nb::decode_conv_algorithm(a, dt<T>);
  cx.state<T>();
  const conv_geo g = geo_of(c.g, S);
  const int dir = static_cast<int>(c.direction);
  int64_t algo = algo_direct;
  if (c.requested >= 0) {
    check_algorithm(c.requested, S, "requested"); // both run every geometry
    algo = c.requested;
  } else if (c.requested == -2) {
    algo = heuristic(cx, dir, g);
  } else {
    const algo_key key{cx.device_id, dt<T>, dir, g.v};
    std::lock_guard lock(algo_mutex()); // configuration only: one measurement per key
    auto& cache = algo_cache();
    if (auto it = cache.find(key); it != cache.end()) {
      algo = it->second;
    } else {
      algo = measure<T>(cx, a.queue(), dir, g);
      cache.emplace(key, algo);
    }
  }
  // The result is device memory: a blocking write from this frame's array.
  const int64_t result[3] = {algo, 0, PCY_NN_NUMERICS_DIRECT}; // both kernels sum directly
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

template <const pcy_op_schema& S, class T>
void op_conv_bias(ocl_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_bias<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const uint64_t total = uint64_t(c.N) * c.K * c.P * c.Q;
  const int32_t K = nb::to_int(c.K, S, "the channels");
  const int64_t PQ = c.P * c.Q;
  if constexpr (nb::detail::has<S>("bias")) {
    if (total == 0) return;
    const int64_t t = static_cast<int64_t>(total), yo = off<T>(*c.y, S, "y"),
                  bo = off<T>(*c.w, S, "bias");
    cx.grid(a.queue(), d.k[K_BIAS], total, cx.wg,
            {val(t), val(K), val(PQ), mem(c.y->memory), val(yo), mem(c.w->memory), val(bo)});
  } else {
    if (K == 0) return; // db is empty; with N P Q == 0 it becomes zeros
    const int64_t N = c.N, dyo = off<T>(*c.y, S, "dy"), dbo = off<T>(*c.w, S, "db");
    cx.launch(a.queue(), d.k[K_GRAD_BIAS], 1,
              {std::min<uint64_t>(uint64_t(K), 65536) * cx.swg, 1, 1}, {cx.swg, 1, 1},
              {val(N), val(K), val(PQ), mem(c.y->memory), val(dyo), mem(c.w->memory), val(dbo)});
  }
}

// ---- pooling -------------------------------------------------------------------------------

struct pool_geo {
  int64_t planes = 0;
  std::array<int32_t, 10> v{}; // H W P Q wh ww sh sw ph pw
};
pool_geo pool_geo_of(const nb::pool_call& c, const pcy_op_schema& s) {
  pool_geo g;
  g.planes = c.N * c.C;
  const int64_t in[10] = {c.H,      c.W,         c.P,         c.Q,      c.win[0],
                          c.win[1], c.stride[0], c.stride[1], c.pad[0], c.pad[1]};
  for (int i = 0; i < 10; ++i)
    g.v[i] = nb::to_int(in[i], s, "a pooling extent or geometry value");
  coords_fit(c.P * c.stride[0] + c.win[0] + 2 * c.pad[0] + c.H, s, "the heights");
  coords_fit(c.Q * c.stride[1] + c.win[1] + 2 * c.pad[1] + c.W, s, "the widths");
  coords_fit(c.win[0] * c.win[1], s, "the window");
  return g;
}
#define PCY_POOL_ARGS                                                                              \
  val(g.planes), val(g.v[0]), val(g.v[1]), val(g.v[2]), val(g.v[3]), val(g.v[4]), val(g.v[5]),     \
      val(g.v[6]), val(g.v[7]), val(g.v[8]), val(g.v[9])

template <const pcy_op_schema& S, bool Indexed, class T>
void op_pool_max(ocl_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const pool_geo g = pool_geo_of(c, S);
  const uint64_t total = uint64_t(g.planes) * c.P * c.Q;
  if (total == 0) return;
  const int64_t xo = off<T>(*c.x, S, "x"), yo = off<T>(*c.y, S, "y");
  const int32_t with = Indexed ? 1 : 0;
  const int64_t io = Indexed ? elem_off(*c.indices, 4, S, "indices") : 0;
  cx.grid(a.queue(), d.k[K_POOL_MAX], total, cx.wg,
          {PCY_POOL_ARGS, mem(c.x->memory), val(xo), mem(c.y->memory), val(yo), val(with),
           mem(Indexed ? c.indices->memory : cx.dummy), val(io)});
}

template <class T> void op_pool_max_grad(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_pooling_max_grad_schema;
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const pool_geo g = pool_geo_of(c, S);
  const uint64_t total = uint64_t(g.planes) * c.H * c.W;
  if (total == 0) return;
  const int64_t xo = off<T>(*c.x, S, "x"), dyo = off<T>(*c.dy, S, "dy"),
                dxo = off<T>(*c.dx, S, "dx");
  cx.grid(a.queue(), d.k[K_POOL_MAX_GRAD], total, cx.wg,
          {PCY_POOL_ARGS, mem(c.x->memory), val(xo), mem(c.dy->memory), val(dyo), mem(c.dx->memory),
           val(dxo)});
}

template <class T> void op_pool_max_grad_indexed(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_pooling_max_grad_indexed_schema;
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const int64_t planes = c.N * c.C, HW = c.H * c.W, PQ = c.P * c.Q;
  if (planes == 0 || HW == 0) return;
  const int64_t dyo = off<T>(*c.dy, S, "dy"), io = elem_off(*c.indices, 4, S, "indices"),
                dxo = off<T>(*c.dx, S, "dx");
  const uint64_t groups = std::min<uint64_t>(uint64_t(planes), cx.cpu ? cx.max_groups : 65536);
  cx.launch(a.queue(), d.k[K_POOL_MAX_GRAD_IDX], 1, {groups * cx.lanes, 1, 1}, {cx.lanes, 1, 1},
            {val(planes), val(HW), val(PQ), mem(c.dy->memory), val(dyo), mem(c.indices->memory),
             val(io), mem(c.dx->memory), val(dxo)});
}

template <const pcy_op_schema& S, bool Grad, class T>
void op_pool_avg(ocl_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const pool_geo g = pool_geo_of(c, S);
  const int32_t incl = c.include_padding ? 1 : 0;
  if constexpr (Grad) {
    const uint64_t total = uint64_t(g.planes) * c.H * c.W;
    if (total == 0) return;
    const int64_t dyo = off<T>(*c.dy, S, "dy"), dxo = off<T>(*c.dx, S, "dx");
    cx.grid(a.queue(), d.k[K_POOL_AVG_GRAD], total, cx.wg,
            {PCY_POOL_ARGS, val(incl), mem(c.dy->memory), val(dyo), mem(c.dx->memory), val(dxo)});
  } else {
    const uint64_t total = uint64_t(g.planes) * c.P * c.Q;
    if (total == 0) return;
    const int64_t xo = off<T>(*c.x, S, "x"), yo = off<T>(*c.y, S, "y");
    cx.grid(a.queue(), d.k[K_POOL_AVG], total, cx.wg,
            {PCY_POOL_ARGS, val(incl), mem(c.x->memory), val(xo), mem(c.y->memory), val(yo)});
  }
}
#undef PCY_POOL_ARGS

// ---- LRN -----------------------------------------------------------------------------------

template <const pcy_op_schema& S, bool Grad, class T>
void op_lrn(ocl_context& cx, const sdk::op_args& a) {
  const nb::lrn_call c = nb::decode_lrn<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  const uint64_t total = uint64_t(c.N) * c.C * c.H * c.W;
  if (total == 0) return;
  const int64_t t = static_cast<int64_t>(total), HW = c.H * c.W;
  const int32_t C = static_cast<int32_t>(c.C), n = static_cast<int32_t>(c.n);
  const T alpha = static_cast<T>(c.alpha), beta = static_cast<T>(c.beta), k = static_cast<T>(c.k);
  const int64_t xo = off<T>(*c.x, S, "x"), yo = off<T>(*c.y, S, "y");
  if constexpr (Grad) {
    const int64_t dyo = off<T>(*c.dy, S, "dy"), dxo = off<T>(*c.dx, S, "dx");
    pcy_memory sc = a.workspace(total * sizeof(T));
    cx.grid(
        a.queue(), d.k[K_LRN_SCALE], total, cx.wg,
        {val(t), val(C), val(HW), val(n), val(alpha), val(k), mem(c.x->memory), val(xo), mem(sc)});
    cx.grid(a.queue(), d.k[K_LRN_GRAD], total, cx.wg,
            {val(t), val(C), val(HW), val(n), val(alpha), val(beta), mem(c.x->memory), val(xo),
             mem(c.y->memory), val(yo), mem(c.dy->memory), val(dyo), mem(c.dx->memory), val(dxo),
             mem(sc)});
  } else {
    cx.grid(a.queue(), d.k[K_LRN_FWD], total, cx.wg,
            {val(t), val(C), val(HW), val(n), val(alpha), val(beta), val(k), mem(c.x->memory),
             val(xo), mem(c.y->memory), val(yo)});
  }
}

// ---- dropout -------------------------------------------------------------------------------

template <const pcy_op_schema& S, bool Grad, class T>
void op_dropout(ocl_context& cx, const sdk::op_args& a) {
  const nb::dropout_call c = nb::decode_dropout<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.n == 0) return;
  const int64_t n = static_cast<int64_t>(c.n);
  const T scale = static_cast<T>(c.scale);
  const int64_t mo = elem_off(*c.mask, 1, S, "mask");
  if constexpr (Grad) {
    const int64_t dyo = off<T>(*c.x, S, "dy"), dxo = off<T>(*c.y, S, "dx");
    cx.grid(a.queue(), d.k[K_DROP_BWD], c.n, cx.wg,
            {val(n), val(scale), mem(c.x->memory), val(dyo), mem(c.mask->memory), val(mo),
             mem(c.y->memory), val(dxo)});
  } else {
    const uint64_t seed = c.seed;
    const uint32_t thr = c.threshold;
    const int64_t xo = off<T>(*c.x, S, "x"), yo = off<T>(*c.y, S, "y");
    cx.grid(a.queue(), d.k[K_DROP_FWD], c.n, cx.wg,
            {val(n), val(seed), val(thr), val(scale), mem(c.x->memory), val(xo), mem(c.y->memory),
             val(yo), mem(c.mask->memory), val(mo)});
  }
}

// ---- normalisation -------------------------------------------------------------------------

// layer_norm / rms_norm: one work-group per row; the statistics are `real` (the statistics dtype
// of f32 and f64 is the op's). A statistics tensor not saved (or an empty one) is bound to the
// dummy buffer and not written.
template <const pcy_op_schema& S, bool Layer, class T>
void op_norm(ocl_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.outer == 0) return;
  const int64_t outer = static_cast<int64_t>(c.outer), n = static_cast<int64_t>(c.n);
  const int32_t layer = Layer ? 1 : 0, save = (c.mean ? 1 : 0) | (c.rstd ? 2 : 0);
  const T eps = static_cast<T>(c.epsilon);
  const int64_t xo = off<T>(*c.x, S, "x"), wo = off<T>(*c.weight, S, "weight"),
                bo = Layer ? off<T>(*c.bias, S, "bias") : 0, yo = off<T>(*c.y, S, "y"),
                mo = c.mean ? off<T>(*c.mean, S, "mean") : 0,
                ro = c.rstd ? off<T>(*c.rstd, S, "rstd") : 0;
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.dummy); };
  cx.launch(a.queue(), d.k[K_NORM_FWD], 1, {std::min<uint64_t>(c.outer, 65536) * cx.swg, 1, 1},
            {cx.swg, 1, 1},
            {val(outer), val(n), val(layer), val(eps), m(c.x), val(xo), m(c.weight), val(wo),
             m(c.bias), val(bo), m(c.y), val(yo), m(c.mean), val(mo), m(c.rstd), val(ro),
             val(save)});
}
template <const pcy_op_schema& S, bool Layer, class T>
void op_norm_grad(ocl_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.n == 0) return;
  const int64_t outer = static_cast<int64_t>(c.outer), n = static_cast<int64_t>(c.n);
  const int32_t layer = Layer ? 1 : 0;
  const int64_t xo = off<T>(*c.x, S, "x"), wo = off<T>(*c.weight, S, "weight"),
                mo = Layer ? off<T>(*c.mean, S, "mean") : 0, ro = off<T>(*c.rstd, S, "rstd"),
                dyo = off<T>(*c.dy, S, "dy"), dxo = off<T>(*c.y, S, "dx"),
                dwo = off<T>(*c.dweight, S, "dweight"),
                dbo = Layer ? off<T>(*c.dbias, S, "dbias") : 0;
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.dummy); };
  if (c.outer != 0)
    cx.launch(a.queue(), d.k[K_NORM_BWD_ROW], 1,
              {std::min<uint64_t>(c.outer, 65536) * cx.swg, 1, 1}, {cx.swg, 1, 1},
              {val(outer), val(n), val(layer), m(c.x), val(xo), m(c.weight), val(wo), m(c.mean),
               val(mo), m(c.rstd), val(ro), m(c.dy), val(dyo), m(c.y), val(dxo)});
  cx.grid(a.queue(), d.k[K_NORM_BWD_COLS], c.n, cx.wg,
          {val(outer), val(n), val(layer), m(c.x), val(xo), m(c.mean), val(mo), m(c.rstd), val(ro),
           m(c.dy), val(dyo), m(c.dweight), val(dwo), m(c.dbias), val(dbo)});
}

// ---- cross entropy -------------------------------------------------------------------------

// A work-group per row; 'mean' and 'sum' in one work-group (the rows' losses added in row order).
// lse is `real` (the statistics dtype of f32 and f64 is the op's); not saved: the dummy buffer.
template <class T> void op_xent(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_cross_entropy_schema;
  const nb::xent_call c = nb::decode_xent<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.rows == 0 && c.reduction == 0) return;
  const int64_t rows = static_cast<int64_t>(c.rows), C = static_cast<int64_t>(c.classes);
  const int32_t red = c.reduction, save = c.lse && c.rows != 0 ? 1 : 0;
  const T eps = static_cast<T>(c.smoothing);
  const int64_t ign = c.ignore_index;
  const int64_t xo = off<T>(*c.logits, S, "logits"),
                lo = elem_off(*c.labels, sizeof(int32_t), S, "labels"),
                loso = off<T>(*c.loss, S, "loss"), so = save ? off<T>(*c.lse, S, "lse") : 0;
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.dummy); };
  const uint64_t groups = red == 0 ? std::min<uint64_t>(c.rows, 65536) : 1;
  cx.launch(a.queue(), d.k[K_XENT_FWD], 1, {groups * cx.swg, 1, 1}, {cx.swg, 1, 1},
            {val(rows), val(C), val(ign), val(eps), val(red), m(c.logits), val(xo), m(c.labels),
             val(lo), m(c.loss), val(loso), m(save ? c.lse : nullptr), val(so), val(save)});
}
template <class T> void op_xent_grad(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_cross_entropy_grad_schema;
  const nb::xent_call c = nb::decode_xent<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.rows == 0 || c.classes == 0) return;
  const int64_t rows = static_cast<int64_t>(c.rows), C = static_cast<int64_t>(c.classes);
  const int32_t red = c.reduction;
  const T eps = static_cast<T>(c.smoothing);
  const int64_t ign = c.ignore_index;
  const int64_t xo = off<T>(*c.logits, S, "logits"),
                lo = elem_off(*c.labels, sizeof(int32_t), S, "labels"),
                so = off<T>(*c.lse, S, "lse"), dlo = off<T>(*c.dloss, S, "dloss"),
                dxo = off<T>(*c.dlogits, S, "dlogits");
  cx.launch(a.queue(), d.k[K_XENT_BWD], 1, {std::min<uint64_t>(c.rows, 65536) * cx.swg, 1, 1},
            {cx.swg, 1, 1},
            {val(rows), val(C), val(ign), val(eps), val(red), mem(c.logits->memory), val(xo),
             mem(c.labels->memory), val(lo), mem(c.lse->memory), val(so), mem(c.dloss->memory),
             val(dlo), mem(c.dlogits->memory), val(dxo)});
}

// ---- embedding -----------------------------------------------------------------------------

// The forward: a grid-stride gather over the n x D elements of y.
template <class T> void op_embedding(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_embedding_schema;
  const nb::embedding_call c = nb::decode_embedding<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.n == 0 || c.D == 0) return;
  const int64_t n = static_cast<int64_t>(c.n), D = static_cast<int64_t>(c.D),
                V = static_cast<int64_t>(c.V);
  uint64_t total = 0;
  if (!sdk::mul_ok(c.n, c.D, total))
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(S.extension, ".", S.name, ": n x D overflows"));
  // An empty table (V = 0) has no buffer to bind: the dummy stands in (never read).
  const bool table = c.V != 0 && c.weight->memory != nullptr;
  const int64_t wo = table ? off<T>(*c.weight, S, "weight") : 0,
                io = elem_off(*c.indices, sizeof(int32_t), S, "indices"), yo = off<T>(*c.y, S, "y");
  cx.grid(a.queue(), d.k[K_EMB_FWD], total, cx.wg,
          {val(n), val(D), val(V), mem(table ? c.weight->memory : cx.dummy), val(wo),
           mem(c.indices->memory), val(io), mem(c.y->memory), val(yo)});
}
// The gradient without atomics: P = max(2^ceil(log2 n), 2 SWG) 64-bit keys (index << 32 |
// position; ~0 for positions that add nothing) in the workspace, sorted by a bitonic network
// (the steps inside a chunk of 2 SWG keys in local memory, the wider ones over the whole
// array), then a work-group per vocabulary row sums its segment's dy rows in position order.
template <class T> void op_embedding_grad(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_embedding_grad_schema;
  const nb::embedding_call c = nb::decode_embedding<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.V == 0 || c.D == 0) return;
  const int64_t n = static_cast<int64_t>(c.n), D = static_cast<int64_t>(c.D),
                V = static_cast<int64_t>(c.V), pad = c.padding_idx;
  const uint64_t chunk = 2 * uint64_t{cx.swg};
  uint64_t P = chunk;
  while (P < c.n)
    P *= 2; // n < 2^31: no overflow
  const int64_t Pl = static_cast<int64_t>(P);
  pcy_memory keys = a.workspace(P * sizeof(uint64_t));
  const bool any = c.n != 0;
  const int64_t io = any ? elem_off(*c.indices, sizeof(int32_t), S, "indices") : 0,
                dyo = any ? off<T>(*c.y, S, "dy") : 0, dwo = off<T>(*c.weight, S, "dweight");
  const pcy_memory im = any ? c.indices->memory : cx.dummy, dym = any ? c.y->memory : cx.dummy;
  cx.grid(a.queue(), d.k[K_EMB_KEYS], P, cx.wg,
          {val(n), val(Pl), val(V), val(pad), mem(im), val(io), mem(keys)});
  if (any) {
    const uint64_t groups = std::min<uint64_t>(P / chunk, 65536);
    auto local = [&](int64_t k0, int64_t k1, int64_t j0) {
      cx.launch(a.queue(), d.k[K_EMB_SORT_LOCAL], 1, {groups * cx.swg, 1, 1}, {cx.swg, 1, 1},
                {val(Pl), val(k0), val(k1), val(j0), mem(keys)});
    };
    const auto ch = static_cast<int64_t>(chunk);
    local(2, ch, 1);
    for (int64_t k = 2 * ch; k <= Pl; k *= 2) {
      for (int64_t j = k / 2; j >= ch; j /= 2)
        cx.grid(a.queue(), d.k[K_EMB_SORT_GLOBAL], P / 2, cx.wg,
                {val(Pl), val(k), val(j), mem(keys)});
      local(k, k, ch / 2);
    }
  }
  cx.launch(
      a.queue(), d.k[K_EMB_ROWS], 1, {std::min<uint64_t>(c.V, 65536) * cx.swg, 1, 1},
      {cx.swg, 1, 1},
      {val(V), val(D), val(Pl), mem(keys), mem(dym), val(dyo), mem(c.weight->memory), val(dwo)});
}

// ---- batch normalisation -------------------------------------------------------------------

// A work-group per channel (two passes in training, sums in a fixed order); the statistics are
// `real` (the statistics dtype of f32 and f64 is the op's). Absent tensors (and the empty x and
// y of an empty batch) are bound to the dummy buffer and not touched.
template <class T> void op_bn(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_batch_norm_schema;
  const nb::bn_call c = nb::decode_bn<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.C == 0) return;
  const auto N = static_cast<int64_t>(c.N), C = static_cast<int64_t>(c.C),
             sp = static_cast<int64_t>(c.spatial);
  const int32_t flags = (c.training ? 1 : 0) | (c.running_mean ? 2 : 0) | (c.running_var ? 4 : 0) |
                        (c.mean ? 8 : 0) | (c.rstd ? 16 : 0);
  const T momentum = static_cast<T>(c.momentum), eps = static_cast<T>(c.epsilon);
  auto o = [&](const pcy_tensor* t, const char* name) {
    return t && t->memory ? off<T>(*t, S, name) : int64_t{0};
  };
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.dummy); };
  const int64_t xo = o(c.x, "x"), wo = o(c.weight, "weight"), bo = o(c.bias, "bias"),
                rmo = o(c.running_mean, "running_mean"), rvo = o(c.running_var, "running_var"),
                yo = o(c.y, "y"), smo = o(c.mean, "save_mean"), sro = o(c.rstd, "save_rstd");
  cx.launch(a.queue(), d.k[K_BN_FWD], 1, {std::min<uint64_t>(c.C, 65536) * cx.swg, 1, 1},
            {cx.swg, 1, 1}, {val(N),    val(C),  val(sp),           val(flags),  val(momentum),
                             val(eps),  m(c.x),  val(xo),           m(c.weight), val(wo),
                             m(c.bias), val(bo), m(c.running_mean), val(rmo),    m(c.running_var),
                             val(rvo),  m(c.y),  val(yo),           m(c.mean),   val(smo),
                             m(c.rstd), val(sro)});
}
template <class T> void op_bn_grad(ocl_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_batch_norm_grad_schema;
  const nb::bn_call c = nb::decode_bn<S>(a, dt<T>);
  const dtype_state& d = cx.state<T>();
  if (c.C == 0) return;
  const auto N = static_cast<int64_t>(c.N), C = static_cast<int64_t>(c.C),
             sp = static_cast<int64_t>(c.spatial);
  const int32_t flags = (c.training ? 1 : 0) | (c.dweight ? 2 : 0) | (c.dbias ? 4 : 0);
  auto o = [&](const pcy_tensor* t, const char* name) {
    return t && t->memory ? off<T>(*t, S, name) : int64_t{0};
  };
  auto m = [&](const pcy_tensor* t) { return mem(t && t->memory ? t->memory : cx.dummy); };
  const int64_t xo = o(c.x, "x"), wo = o(c.weight, "weight"), mo = o(c.mean, "mean"),
                ro = o(c.rstd, "rstd"), dyo = o(c.dy, "dy"), dxo = o(c.y, "dx"),
                dwo = o(c.dweight, "dweight"), dbo = o(c.dbias, "dbias");
  cx.launch(a.queue(), d.k[K_BN_BWD], 1, {std::min<uint64_t>(c.C, 65536) * cx.swg, 1, 1},
            {cx.swg, 1, 1},
            {val(N),  val(C),    val(sp),      val(flags), m(c.x),     val(xo), m(c.weight),
             val(wo), m(c.mean), val(mo),      m(c.rstd),  val(ro),    m(c.dy), val(dyo),
             m(c.y),  val(dxo),  m(c.dweight), val(dwo),   m(c.dbias), val(dbo)});
}

// ---- the bundle ----------------------------------------------------------------------------

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_NN_EXTENSION, "opencl",
    "NN on OpenCL: own OpenCL C kernels (activations, softmax, direct and implicit-GEMM "
    "convolution, pooling, LRN, dropout, layer_norm, rms_norm, cross_entropy, embedding, "
    "batch_norm)"};

class nn_opencl_bundle : public sdk::bundle_base<identity, ocl_context> {
public:
  explicit nn_opencl_bundle(const pcy_host_services& host) : bundle_base(host) {
#define PCY_ACT(a, K)                                                                              \
  add<op_act<pcy_nn_##a##_schema, K, false, float>,                                                \
      op_act<pcy_nn_##a##_schema, K, false, double>>(pcy_nn_##a##_schema);                         \
  add<op_act<pcy_nn_##a##_pointwise_schema, K, false, float>,                                      \
      op_act<pcy_nn_##a##_pointwise_schema, K, false, double>>(pcy_nn_##a##_pointwise_schema);     \
  add<op_act<pcy_nn_##a##_grad_schema, K, true, float>,                                            \
      op_act<pcy_nn_##a##_grad_schema, K, true, double>>(pcy_nn_##a##_grad_schema);                \
  add<op_act<pcy_nn_##a##_pointwise_grad_schema, K, true, float>,                                  \
      op_act<pcy_nn_##a##_pointwise_grad_schema, K, true, double>>(                                \
      pcy_nn_##a##_pointwise_grad_schema);
    PCY_ACT(sigmoid, 0)
    PCY_ACT(relu, 1)
    PCY_ACT(tanh, 2)
    PCY_ACT(elu, 3)
#undef PCY_ACT
#define PCY_ADD2(F, s, ...) add<F<s, __VA_ARGS__, float>, F<s, __VA_ARGS__, double>>(s)
    PCY_ADD2(op_softmax, pcy_nn_softmax_schema, false);
    PCY_ADD2(op_softmax, pcy_nn_log_softmax_schema, true);
    PCY_ADD2(op_softmax, pcy_nn_softmax_grad_schema, false);
    PCY_ADD2(op_softmax, pcy_nn_log_softmax_grad_schema, true);
    PCY_ADD2(op_conv, pcy_nn_convolution_schema, 0);
    PCY_ADD2(op_conv, pcy_nn_convolution_grad_data_schema, 1);
    PCY_ADD2(op_conv, pcy_nn_convolution_grad_filter_schema, 2);
    add<op_conv_bias<pcy_nn_convolution_bias_schema, float>,
        op_conv_bias<pcy_nn_convolution_bias_schema, double>>(pcy_nn_convolution_bias_schema);
    add<op_conv_bias<pcy_nn_convolution_grad_bias_schema, float>,
        op_conv_bias<pcy_nn_convolution_grad_bias_schema, double>>(
        pcy_nn_convolution_grad_bias_schema);
    add<op_conv_algorithm<float>, op_conv_algorithm<double>>(pcy_nn_convolution_algorithm_schema);
    PCY_ADD2(op_pool_max, pcy_nn_pooling_max_schema, false);
    PCY_ADD2(op_pool_max, pcy_nn_pooling_max_indexed_schema, true);
    add<op_pool_max_grad<float>, op_pool_max_grad<double>>(pcy_nn_pooling_max_grad_schema);
    add<op_pool_max_grad_indexed<float>, op_pool_max_grad_indexed<double>>(
        pcy_nn_pooling_max_grad_indexed_schema);
    PCY_ADD2(op_pool_avg, pcy_nn_pooling_avg_schema, false);
    PCY_ADD2(op_pool_avg, pcy_nn_pooling_avg_grad_schema, true);
    PCY_ADD2(op_lrn, pcy_nn_lrn_schema, false);
    PCY_ADD2(op_lrn, pcy_nn_lrn_grad_schema, true);
    PCY_ADD2(op_dropout, pcy_nn_dropout_schema, false);
    PCY_ADD2(op_dropout, pcy_nn_dropout_grad_schema, true);
    PCY_ADD2(op_norm, pcy_nn_layer_norm_schema, true);
    PCY_ADD2(op_norm_grad, pcy_nn_layer_norm_grad_schema, true);
    PCY_ADD2(op_norm, pcy_nn_rms_norm_schema, false);
    PCY_ADD2(op_norm_grad, pcy_nn_rms_norm_grad_schema, false);
    add<op_xent<float>, op_xent<double>>(pcy_nn_cross_entropy_schema);
    add<op_xent_grad<float>, op_xent_grad<double>>(pcy_nn_cross_entropy_grad_schema);
    add<op_embedding<float>, op_embedding<double>>(pcy_nn_embedding_schema);
    add<op_embedding_grad<float>, op_embedding_grad<double>>(pcy_nn_embedding_grad_schema);
    add<op_bn<float>, op_bn<double>>(pcy_nn_batch_norm_schema);
    add<op_bn_grad<float>, op_bn_grad<double>>(pcy_nn_batch_norm_grad_schema);
#undef PCY_ADD2
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                        PCY_FRAMEWORK_SLOT_kernel_launch, PCY_FRAMEWORK_SLOT_memory_alloc,
                        PCY_FRAMEWORK_SLOT_memory_write, PCY_FRAMEWORK_SLOT_memory_fill,
                        PCY_FRAMEWORK_SLOT_queue_finish});
    auto cx = std::make_unique<ocl_context>(a);
    cx->device_id = cx->native(PCY_NATIVE_DEVICE);

    // No properties: GPU-style defaults, fp64 found out by building.
    const sdk::device_facts dev = sdk::device_facts_of(a);
    cx->cpu = dev.cpu;
    const int64_t max_wg = dev.max_work_group > 0 ? dev.max_work_group : 256;
    uint32_t wg = 1;
    while (wg * 2 <= std::min<int64_t>(max_wg, 256))
      wg *= 2;
    cx->wg = wg;
    cx->swg = cx->cpu ? std::min<uint32_t>(wg, 64) : wg;
    cx->ts = wg >= 256 ? 16 : wg >= 64 ? 8 : wg >= 16 ? 4 : 1;
    cx->lanes = cx->cpu ? 1 : std::min<uint32_t>(wg, 64);
    cx->max_groups =
        cx->cpu ? static_cast<uint64_t>(std::clamp<int64_t>(dev.compute_units * 4, 4, 1024)) : 4096;

    sdk::build_f32_f64(dev, cx->f32, cx->f64, "NN ops",
                       [&](sdk::dtype_program& d, const char* real, bool required) {
                         build(*cx, static_cast<dtype_state&>(d), real, required);
                       });
    cx->dummy = cx->alloc(16);
    return cx.release();
  }

private:
  void build(ocl_context& cx, dtype_state& d, const char* real, bool must) {
    const std::string options =
        sdk::str("-DREAL=", real, must ? "" : " -DPCY_FP64", " -DSWG=", cx.swg, " -DTS=", cx.ts);
    // f64 is optional: a device without cl_khr_fp64 fails the build; keep f32 serving.
    if (!cx.build(d, nn_opencl::kernel_source, options, must,
                  must ? "f32 NN kernels" : "f64 NN kernels", log_))
      return;
    for (int i = 0; i < K_COUNT; ++i)
      d.k[i] = cx.kernel(d.program, kernel_names[i]);
    d.available = true;
  }

  template <void (*F32)(ocl_context&, const sdk::op_args&),
            void (*F64)(ocl_context&, const sdk::op_args&)>
  void add(const pcy_op_schema& schema) {
    table_.add<F32, F64>(schema, sdk::str("parenchyma OpenCL C kernels nn.", schema.name, " (f32)"),
                         sdk::str("parenchyma OpenCL C kernels nn.", schema.name, " (f64)"));
  }

  sdk::op_table<nn_opencl_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(nn_opencl_bundle)
