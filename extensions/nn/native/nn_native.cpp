// NN bundle for the native (host CPU) framework: every op of pcy_nn.h in f32 and f64.
//
// f32 runs on oneDNN where oneDNN has the op with our semantics (convolution in its three
// directions, average pooling forward and backward, softmax forward, the sigmoid / tanh
// forward), with the inputs it would get wrong sent to our loops (a softmax over NaN or
// infinities). Everything else (LRN and log_softmax: oneDNN 2.6 gets them wrong, see op_lrn and
// op_softmax; log_softmax uses only oneDNN's exp), every f64 cell, and every cell of a build
// without oneDNN runs on the loops of nn_loops.hpp. oneDNN threads itself (its OpenMP runtime),
// and so do the loops, on the same runtime and with the same rule: problems of at least 2^20
// elements split their independent rows, planes, images or elements over the calling thread's
// OpenMP team (split below), smaller ones run on the calling thread alone.
//
// Ops run on the calling thread (large loops on its OpenMP team). The host has synced every
// argument before the call, but the native framework's queue may still be running earlier work
// on its pool, so each op first waits for that queue (as blas_native does).
//
// oneDNN state is per bundle context: one engine and stream, and for each op a small cache of
// primitives keyed by the op's geometry (a linear search over a few keys; the first call for a
// shape builds the primitive and its memory objects, later calls set the data pointers and
// execute through the C API with the arguments on the stack: no allocation per call). Their
// scratchpad is the host's op workspace.
//
// Convolution algorithms (convolution_algorithm's result and the ops' `algorithm`): 0 the
// default (oneDNN for f32 where it takes the shapes, else im2col + gemm, or direct when the
// im2col buffer would exceed 256 MiB), 1 oneDNN (f32 only), 2 im2col + our gemm (workspace: one
// column matrix), 3 direct loops (no workspace). Requested -1 measures 1-3 once per geometry and
// dtype (process-wide cache), -2 is the default's choice.
#include "nn_call.hpp"
#include "nn_loops.hpp"

#include <parenchyma/sdk/op_schema.hpp>

#ifdef PARENCHYMA_NN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#if defined(PARENCHYMA_NN_HAVE_OMP) && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define PCY_NN_NATIVE_OMP 1
#endif
#include <dlfcn.h> // pin_runtime_libraries (oneDNN builds only: Linux)
#endif

#include <cmath>

#include <array>
#include <bit>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace parenchyma;
using namespace parenchyma::nn_native;
namespace nb = parenchyma::nn_bundle;

template <class T>
constexpr pcy_dtype dt = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

enum class act { sigmoid, relu, tanh, elu };

// Convolution algorithms.
constexpr int64_t alg_default = 0, alg_onednn = 1, alg_im2col = 2, alg_direct = 3, alg_count = 4;
constexpr uint64_t im2col_default_limit = uint64_t{256} << 20;
constexpr const char* alg_names = "0 default, 1 oneDNN (f32), 2 im2col + gemm, 3 direct";

// Below this many elements (or multiply-adds / 16 for a convolution) an op runs on the calling
// thread alone, on oneDNN and on our loops: an OpenMP team costs more than it gains there, and on
// a loaded machine its spinning workers slow everything else down.
constexpr uint64_t single_thread_elements = uint64_t{1} << 20;
// The softmax family and LRN cost several times a copy per element (an exp or a log, a window of
// channels, sums in double): their problems count this many units per element against
// single_thread_elements, so 256 x 1000 rows (2^18 elements) take the team.
constexpr uint64_t heavy_element = 8;

#ifdef PARENCHYMA_NN_HAVE_DNNL
// Below this many elements an activation or softmax runs on our loop: oneDNN's call costs more.
constexpr uint64_t dnnl_min_elements = 4096;

using dn_key = std::array<int64_t, 16>;

// One oneDNN primitive with its memory objects (data pointers set per call).
struct dn_prim {
  dn_key key{};
  bool used = false, ok = false;
  dnnl::primitive prim;
  std::array<dnnl::memory, 3> mem;
  std::array<int, 3> arg{};
  int nargs = 0;
  dnnl::memory scratch;
  uint64_t scratch_bytes = 0;
  bool single = false; // a small problem: built and run on one thread (no OpenMP team)

  void reset(const dn_key& k) {
    key = k;
    single = false;
    used = true;
    ok = false;
    prim = dnnl::primitive();
    for (dnnl::memory& m : mem)
      m = dnnl::memory();
    nargs = 0;
    scratch = dnnl::memory();
    scratch_bytes = 0;
  }
};

template <size_t N> struct dn_cache {
  std::array<dn_prim, N> e;
  size_t next = 0;
};

struct dn_state {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dn_cache<8> eltwise, softmax, pool_fwd, pool_bwd;
  std::array<dn_cache<8>, 3> conv;

  // The cached primitive for key k, built by build(p) on the first call (p.ok false where
  // oneDNN refuses the shapes: the caller then runs its loop).
  // work: the problem's size (elements or multiply-adds); below single_thread_elements oneDNN runs
  // it on the calling thread alone: an OpenMP team costs more than it gains there, and on a
  // loaded machine its spinning workers slow everything else down.
  template <size_t N, class Build>
  dn_prim& get(dn_cache<N>& c, const dn_key& k, uint64_t work, Build&& build) {
    for (dn_prim& p : c.e)
      if (p.used && p.key == k) return p;
    dn_prim& p = c.e[c.next];
    c.next = (c.next + 1) % N;
    p.reset(k);
    const bool single = work < single_thread_elements;
    try {
      const threads t(single);
      build(p);
      p.ok = true;
      p.single = single;
    } catch (const dnnl::error&) {
      p.reset(k); // remembered as refused: the loop serves this shape
    }
    return p;
  }
  // One OpenMP thread for this (user) thread's regions while it lives (omp_set_num_threads sets
  // the calling thread's own setting only).
  struct threads {
    int prev = 0;
#ifdef PCY_NN_NATIVE_OMP
    explicit threads(bool single) {
      if (single) {
        prev = omp_get_max_threads();
        omp_set_num_threads(1);
      }
    }
    ~threads() {
      if (prev != 0) omp_set_num_threads(prev);
    }
#else
    explicit threads(bool) {}
#endif
    threads(const threads&) = delete;
    threads& operator=(const threads&) = delete;
  };
  static dnnl::primitive_attr attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }
  void finish(dn_prim& p, const dnnl::primitive_desc_base& pd, dnnl::primitive prim,
              std::initializer_list<std::pair<int, dnnl::memory::desc>> args) {
    p.nargs = 0;
    for (const auto& [arg, md] : args) {
      p.mem[p.nargs] = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
      p.arg[p.nargs] = arg;
      ++p.nargs;
    }
    const dnnl::memory::desc sd = pd.scratchpad_desc();
    p.scratch_bytes = sd.get_size();
    if (p.scratch_bytes != 0) p.scratch = dnnl::memory(sd, eng, DNNL_MEMORY_NONE);
    p.prim = std::move(prim);
  }
  // Runs p on the given pointers (in the order of finish's arguments) and waits.
  void run(dn_prim& p, std::initializer_list<const void*> ptrs, void* scratch) {
    dnnl_exec_arg_t args[4];
    int n = 0;
    for (const void* ptr : ptrs) {
      p.mem[n].set_data_handle(const_cast<void*>(ptr));
      args[n] = {p.arg[n], p.mem[n].get()};
      ++n;
    }
    if (p.scratch_bytes != 0) {
      p.scratch.set_data_handle(scratch);
      args[n++] = {DNNL_ARG_SCRATCHPAD, p.scratch.get()};
    }
    const threads t(p.single);
    dnnl_status_t st = dnnl_primitive_execute(p.prim.get(), strm.get(), n, args);
    if (st == dnnl_success) st = dnnl_stream_wait(strm.get());
    if (st != dnnl_success)
      sdk::fail(PCY_ERR_INTERNAL,
                sdk::str("nn_native: oneDNN execution failed (status ", static_cast<int>(st), ")"));
  }
};

using dtag = dnnl::memory::format_tag;
using dtype_dn = dnnl::memory::data_type;

dnnl::memory::desc md4(int64_t a, int64_t b, int64_t c, int64_t d) {
  return dnnl::memory::desc({a, b, c, d}, dtype_dn::f32, dtag::nchw);
}
#endif

struct native_context {
  const pcy_framework_api* fw = nullptr;
  pcy_queue queue = nullptr;
  std::vector<double> scratch; // the loops' scratch, grown on demand
#ifdef PARENCHYMA_NN_HAVE_DNNL
  std::unique_ptr<dn_state> dn; // null where oneDNN could not make a CPU engine
#endif

  void settle(pcy_queue q) const { sdk::check(fw->queue_finish(q)); }
  template <class T> T* ptr(const pcy_tensor& t) const {
    return reinterpret_cast<T*>(static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset);
  }
  double* doubles(uint64_t n) {
    if (scratch.size() < n) scratch.resize(n);
    return scratch.data();
  }
};

// The host's op workspace as a host pointer.
void* workspace(const sdk::op_args& a, uint64_t bytes) {
  void* p = nullptr;
  a.workspace(bytes, &p);
  if (p == nullptr) sdk::fail(PCY_ERR_INTERNAL, "nn_native: the op workspace has no host pointer");
  return p;
}

// ---- the loops' threads ---------------------------------------------------------------------
// A loop over at least single_thread_elements elements splits its independent items (elements,
// rows, planes, images, channels) into one contiguous block per thread of an OpenMP team as large
// as the calling thread's OpenMP setting (oneDNN's runtime: OMP_NUM_THREADS and
// omp_set_num_threads apply to both alike). No sum spans two blocks and each item is computed as
// on one thread, so the bits do not depend on the thread count (tests/nn/threads_test.cpp).
// Without OpenMP (a build without oneDNN) every loop runs on the calling thread. The team is
// the runtime's, whose workers the bundle already keeps for oneDNN (pin_runtime_libraries).

// ThreadSanitizer does not see the OpenMP runtime's barriers (libgomp is not instrumented), so it
// would report every block's writes as racing with the calling thread's later reads: in a TSan
// build the loops stay on the calling thread (oneDNN, uninstrumented, keeps its threads).
#if defined(__SANITIZE_THREAD__)
#define PCY_NN_LOOPS_ONE_THREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PCY_NN_LOOPS_ONE_THREAD 1
#endif
#endif

// The blocks for `items` items of a problem of `elements` elements (1: the calling thread).
int loop_threads(uint64_t items, uint64_t elements) {
#if defined(PCY_NN_NATIVE_OMP) && !defined(PCY_NN_LOOPS_ONE_THREAD)
  if (elements < single_thread_elements || items < 2 || omp_in_parallel() != 0) return 1;
  return static_cast<int>(
      std::min(items, static_cast<uint64_t>(std::max(omp_get_max_threads(), 1))));
#else
  (void)items;
  (void)elements;
  return 1;
#endif
}

// f(lo, hi, slot) for t contiguous blocks [lo, hi) of [0, items), slot < t naming the block's
// scratch; t 1 runs f(0, items, 0) on the calling thread. f must not throw.
template <class F> void split(uint64_t items, int t, F&& f) {
#if defined(PCY_NN_NATIVE_OMP) && !defined(PCY_NN_LOOPS_ONE_THREAD)
  if (t > 1) {
#pragma omp parallel num_threads(t)
    {
      const auto i = static_cast<uint64_t>(omp_get_thread_num());
      const auto nt = static_cast<uint64_t>(omp_get_num_threads());
      f(items * i / nt, items * (i + 1) / nt, i);
    }
    return;
  }
#endif
  (void)t;
  f(uint64_t{0}, items, uint64_t{0});
}

// Elementwise loops: f(lo, hi) over [0, n) in blocks of whole cache lines.
template <class F> void split_elements(uint64_t n, F&& f) {
  constexpr uint64_t line = 16;
  const uint64_t lines = (n + line - 1) / line;
  split(lines, loop_threads(lines, n),
        [&](uint64_t lo, uint64_t hi, uint64_t) { f(lo * line, std::min(hi * line, n)); });
}

uint64_t count(const pcy_tensor& t) {
  uint64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i)
    n *= static_cast<uint64_t>(t.shape[i]); // checked by the decoder
  return n;
}

// ---- activations --------------------------------------------------------------------------

template <act A, class T>
void act_forward(native_context& cx, const sdk::op_args& a, const T* x, T* y, uint64_t n,
                 double alpha) {
#ifdef PARENCHYMA_NN_HAVE_DNNL
  // relu: oneDNN gives -0 for negative inputs; elu: oneDNN computes alpha (e^x - 1) in f32,
  // which loses every digit near 0 (our loop uses expm1). Both stay on our loops.
  if constexpr (std::is_same_v<T, float> && (A == act::sigmoid || A == act::tanh)) {
    if (n >= dnnl_min_elements && cx.dn) {
      const auto alg =
          A == act::sigmoid ? dnnl::algorithm::eltwise_logistic : dnnl::algorithm::eltwise_tanh;
      const float fa = static_cast<float>(alpha);
      const dn_key k{static_cast<int64_t>(A), static_cast<int64_t>(n),
                     static_cast<int64_t>(std::bit_cast<uint32_t>(fa))};
      dn_state& d = *cx.dn;
      dn_prim& p = d.get(d.eltwise, k, n, [&](dn_prim& q) {
        const dnnl::memory::desc md({static_cast<int64_t>(n)}, dtype_dn::f32, dtag::a);
        const dnnl::eltwise_forward::primitive_desc pd(
            {dnnl::prop_kind::forward_inference, alg, md, fa, 0.f}, dn_state::attr(), d.eng);
        d.finish(q, pd, dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}});
      });
      if (p.ok) {
        d.run(p, {x, y}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
        return;
      }
    }
  }
#endif
  (void)cx;
  (void)a;
  split_elements(n, [&](uint64_t lo, uint64_t hi) {
    if constexpr (A == act::sigmoid) sigmoid_fwd(x + lo, y + lo, hi - lo);
    if constexpr (A == act::relu) relu_fwd(x + lo, y + lo, hi - lo);
    if constexpr (A == act::tanh) tanh_fwd(x + lo, y + lo, hi - lo);
    if constexpr (A == act::elu) elu_fwd(x + lo, y + lo, hi - lo, static_cast<T>(alpha));
  });
}

template <const pcy_op_schema& S, act A, class T>
void op_act(native_context& cx, const sdk::op_args& a) {
  const nb::eltwise_call c = nb::decode_act<S>(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue());
  act_forward<A, T>(cx, a, cx.ptr<const T>(*c.x), cx.ptr<T>(*c.y), c.n, c.alpha);
}

template <const pcy_op_schema& S, act A, class T>
void op_act_grad(native_context& cx, const sdk::op_args& a) {
  const nb::eltwise_call c = nb::decode_act_grad<S>(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue());
  const T* y = cx.ptr<const T>(*c.x);
  const T* dy = cx.ptr<const T>(*c.dy);
  T* dx = cx.ptr<T>(*c.y);
  split_elements(c.n, [&](uint64_t lo, uint64_t hi) {
    if constexpr (A == act::sigmoid) sigmoid_bwd(y + lo, dy + lo, dx + lo, hi - lo);
    if constexpr (A == act::relu) relu_bwd(y + lo, dy + lo, dx + lo, hi - lo);
    if constexpr (A == act::tanh) tanh_bwd(y + lo, dy + lo, dx + lo, hi - lo);
    if constexpr (A == act::elu)
      elu_bwd(y + lo, dy + lo, dx + lo, hi - lo, static_cast<T>(c.alpha));
  });
}

// ---- softmax ------------------------------------------------------------------------------


#ifdef PARENCHYMA_NN_HAVE_DNNL
// log_softmax of finite rows: our max per row and y = x - max, oneDNN's exp of y in place, our
// sum per row in double and its log (std::log: correctly rounded to a few ulps, 0 for a sum of
// exactly 1), then y = (x - max) - log(sum), as the loop computes it. False where oneDNN has
// no exp for this size or x holds a NaN or an infinity (found in the maximum's pass, before the
// exp): the caller then runs the loop.
// oneDNN's exp over n f32 elements (its cached primitive; ok false where it refused).
dn_prim& dn_exp(native_context& cx, uint64_t n) {
  dn_state& d = *cx.dn;
  const dn_key k{99, static_cast<int64_t>(n)}; // 99: exp (the activations use 0-3)
  return d.get(d.eltwise, k, n * heavy_element, [&](dn_prim& q) {
    const dnnl::memory::desc md({static_cast<int64_t>(n)}, dtype_dn::f32, dtag::a);
    const dnnl::eltwise_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_exp, md, 0.f, 0.f},
        dn_state::attr(), d.eng);
    d.finish(q, pd, dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}});
  });
}
bool dn_log_softmax_rows(native_context& cx, const sdk::op_args& a, const float* x, float* y,
                         uint64_t rows, uint64_t len) {
  const uint64_t n = rows * len;
  dn_state& d = *cx.dn;
  dn_prim& p = dn_exp(cx, n);
  if (!p.ok) return false;
  double* mx = cx.doubles(rows); // each row's maximum
  const int t = loop_threads(rows, n * heavy_element);
  const int blocks = std::min(t, 64);
  bool finite[64]; // per block
  std::fill(finite, finite + blocks, true);
  split(rows, blocks, [&](uint64_t r0, uint64_t r1, uint64_t slot) {
    finite[slot] = log_softmax_rows_max(x + r0 * len, y + r0 * len, mx + r0, r1 - r0, len);
  });
  for (int i = 0; i < blocks; ++i)
    if (!finite[i]) return false; // a NaN or an infinity: the loop's semantics
  d.run(p, {y, y}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
  split(rows, t, [&](uint64_t r0, uint64_t r1, uint64_t) {
    log_softmax_rows_finish(x + r0 * len, y + r0 * len, mx + r0, r1 - r0, len);
  });
  return true;
}
#endif

// oneDNN 2.6's softmax forward on aarch64 gave FLT_MIN (1.18e-38), not 0, for every probability
// that underflows (rows with a wide range; seen under qemu-aarch64, whose CPU has SVE): there the
// op runs on our loops (log_softmax, which takes only oneDNN's exp, keeps it).
#if defined(__aarch64__)
constexpr bool dnnl_softmax = false;
#define PCY_NN_DNNL_SOFTMAX ""
#else
constexpr bool dnnl_softmax = true;
#define PCY_NN_DNNL_SOFTMAX "softmax, "
#endif

template <const pcy_op_schema& S, bool LOG, class T>
void op_softmax(native_context& cx, const sdk::op_args& a) {
  const nb::softmax_call c = nb::decode_softmax<S>(a, dt<T>);
  if (c.outer == 0 || c.len == 0 || c.inner == 0) return;
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
#ifdef PARENCHYMA_NN_HAVE_DNNL
  // oneDNN's softmax drops NaN and infinities from a row's maximum and sum (a row holding one is
  // not all NaN, as e^(x - max) / sum gives): such inputs run on our loop. oneDNN 2.6's
  // logsoftmax (f32) takes the log of the row's sum with an absolute error near 1.4e-6, so a
  // dominant logit got +1.43e-6, a positive log-probability: never used. log_softmax rows
  // (along the last axis) take only oneDNN's vectorised exp (dn_log_softmax_rows).
  if constexpr (std::is_same_v<T, float> && LOG) {
    const uint64_t n = c.outer * c.len * c.inner;
    if (cx.dn && c.inner == 1 && n >= dnnl_min_elements &&
        dn_log_softmax_rows(cx, a, x, y, c.outer, c.len))
      return;
  }
  if constexpr (std::is_same_v<T, float> && !LOG && dnnl_softmax) {
    const uint64_t n = c.outer * c.len * c.inner;
    if (cx.dn && n >= dnnl_min_elements && all_finite(x, n)) {
      dn_state& d = *cx.dn;
      const dn_key k{static_cast<int64_t>(c.outer), static_cast<int64_t>(c.len),
                     static_cast<int64_t>(c.inner)};
      dn_prim& p = d.get(d.softmax, k, n * heavy_element, [&](dn_prim& q) {
        const dnnl::memory::desc md({static_cast<int64_t>(c.outer), static_cast<int64_t>(c.len),
                                     static_cast<int64_t>(c.inner)},
                                    dtype_dn::f32, dtag::abc);
        const dnnl::softmax_forward::primitive_desc pd({dnnl::prop_kind::forward_inference, md, 1},
                                                       dn_state::attr(), d.eng);
        d.finish(q, pd, dnnl::softmax_forward(pd), {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}});
      });
      if (p.ok) {
        d.run(p, {x, y}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
        return;
      }
    }
  }
#endif
  const uint64_t per = c.inner > 1 ? 2 * c.inner : 0, block = c.len * c.inner;
  const int t = loop_threads(c.outer, c.outer * block * heavy_element);
  double* sc = cx.doubles(per * static_cast<uint64_t>(t));
  split(c.outer, t, [&](uint64_t lo, uint64_t hi, uint64_t slot) {
    softmax_fwd(x + lo * block, y + lo * block, hi - lo, c.len, c.inner, LOG, sc + slot * per);
  });
}

template <const pcy_op_schema& S, bool LOG, class T>
void op_softmax_grad(native_context& cx, const sdk::op_args& a) {
  const nb::softmax_call c = nb::decode_softmax<S>(a, dt<T>);
  if (c.outer == 0 || c.len == 0 || c.inner == 0) return;
  cx.settle(a.queue());
  const T* y = cx.ptr<const T>(*c.x);
  const T* dy = cx.ptr<const T>(*c.dy);
  T* dx = cx.ptr<T>(*c.y);
#ifdef PARENCHYMA_NN_HAVE_DNNL
  // log_softmax rows with finite y: e^y by oneDNN's vectorised exp into dx, then
  // dx = dy - e^y sum(dy) with the row's sum in lanes (as our loop).
  if constexpr (std::is_same_v<T, float> && LOG) {
    const uint64_t n = c.outer * c.len;
    if (cx.dn && c.inner == 1 && n >= dnnl_min_elements && all_finite(y, n)) {
      dn_prim& p = dn_exp(cx, n);
      if (p.ok) {
        cx.dn->run(p, {y, dx}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
        split(c.outer, loop_threads(c.outer, n * heavy_element),
              [&](uint64_t r0, uint64_t r1, uint64_t) {
                log_softmax_grad_rows(dy + r0 * c.len, dx + r0 * c.len, r1 - r0, c.len);
              });
        return;
      }
    }
  }
#endif
  const uint64_t block = c.len * c.inner;
  const int t = loop_threads(c.outer, c.outer * block * heavy_element);
  double* sc = cx.doubles(c.inner * static_cast<uint64_t>(t));
  split(c.outer, t, [&](uint64_t lo, uint64_t hi, uint64_t slot) {
    softmax_bwd(y + lo * block, dy + lo * block, dx + lo * block, hi - lo, c.len, c.inner, LOG,
                sc + slot * c.inner);
  });
}

// ---- convolution --------------------------------------------------------------------------

enum conv_dir : int { dir_fwd = 0, dir_data = 1, dir_filter = 2 };

conv_geom geom_of(const nb::conv_call& c) {
  conv_geom g;
  g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.K = c.K, g.R = c.R, g.S = c.S, g.P = c.P, g.Q = c.Q;
  g.sh = c.stride[0], g.sw = c.stride[1], g.ph = c.pad[0], g.pw = c.pad[1], g.dh = c.dil[0],
  g.dw = c.dil[1], g.G = c.groups;
  return g;
}

// Whether any tensor of the convolution is empty (then our loops serve it: oneDNN refuses
// zero extents, and there is nothing to measure).
bool degenerate(const conv_geom& g) {
  return g.N == 0 || g.C == 0 || g.H == 0 || g.W == 0 || g.K == 0;
}

#ifdef PARENCHYMA_NN_HAVE_DNNL
// The oneDNN primitive of one direction for g (f32).
dn_prim& dn_conv(dn_state& d, int dir, const conv_geom& g) {
  const dn_key k{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.G};
  const uint64_t work =
      static_cast<uint64_t>(g.N * g.K * g.P * g.Q) * static_cast<uint64_t>(g.Cg() * g.R * g.S) / 16;
  return d.get(d.conv[static_cast<size_t>(dir)], k, work, [&](dn_prim& p) {
    const auto src = md4(g.N, g.C, g.H, g.W), dst = md4(g.N, g.K, g.P, g.Q);
    const auto wei =
        g.G == 1 ? md4(g.K, g.C, g.R, g.S)
                 : dnnl::memory::desc({g.G, g.Kg(), g.Cg(), g.R, g.S}, dtype_dn::f32, dtag::goihw);
    const dnnl::memory::dims st{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
    const auto attr = dn_state::attr();
    const auto alg = dnnl::algorithm::convolution_direct;
    if (dir == dir_fwd) {
      const dnnl::convolution_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, alg, src, wei, dst, st, dil, pad, pad}, attr, d.eng);
      d.finish(p, pd, dnnl::convolution_forward(pd),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
      return;
    }
    const dnnl::convolution_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, alg, src, wei, dst, st, dil, pad, pad}, d.eng);
    if (dir == dir_data) {
      const dnnl::convolution_backward_data::primitive_desc pd(
          {alg, src, wei, dst, st, dil, pad, pad}, attr, d.eng, hint);
      d.finish(p, pd, dnnl::convolution_backward_data(pd),
               {{DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_DIFF_SRC, src}});
    } else {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {alg, src, wei, dst, st, dil, pad, pad}, attr, d.eng, hint);
      d.finish(p, pd, dnnl::convolution_backward_weights(pd),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_DIFF_WEIGHTS, wei}});
    }
  });
}
#endif

// The bytes of one im2col matrix (CRS x PQ), or false where that overflows.
template <class T> bool im2col_bytes(const conv_geom& g, uint64_t& bytes) {
  uint64_t n = 0;
  return !__builtin_mul_overflow(static_cast<uint64_t>(g.CRS()), static_cast<uint64_t>(g.PQ()),
                                 &n) &&
         !__builtin_mul_overflow(n, sizeof(T), &bytes) && bytes < (uint64_t{1} << 62);
}

// Whether algorithm alg (>= 1) runs g in T, and its workspace; why says why not.
template <class T>
bool conv_can(native_context& cx, int dir, const conv_geom& g, int64_t alg, uint64_t& ws,
              const char*& why) {
  ws = 0;
  switch (alg) {
  case alg_onednn:
#ifdef PARENCHYMA_NN_HAVE_DNNL
    if constexpr (!std::is_same_v<T, float>) {
      why = "algorithm 1 (oneDNN) computes in f32 only";
      return false;
    } else {
      if (!cx.dn) {
        why = "algorithm 1 (oneDNN): oneDNN made no CPU engine in this process";
        return false;
      }
      if (degenerate(g)) {
        why = "algorithm 1 (oneDNN) takes no empty tensors";
        return false;
      }
      dn_prim& p = dn_conv(*cx.dn, dir, g);
      if (!p.ok) {
        why = "algorithm 1 (oneDNN) has no implementation for these shapes";
        return false;
      }
      ws = p.scratch_bytes;
      return true;
    }
#else
    (void)cx;
    (void)dir;
    why = "algorithm 1 (oneDNN): this bundle was built without oneDNN";
    return false;
#endif
  case alg_im2col:
    if (!im2col_bytes<T>(g, ws)) {
      why = "algorithm 2 (im2col): the column matrix overflows 64 bits";
      return false;
    }
    return true;
  case alg_direct: return true;
  default: why = "not one of this bundle's algorithms"; return false;
  }
}

// The default's (and the heuristic's) choice.
template <class T> int64_t conv_choose(native_context& cx, int dir, const conv_geom& g) {
  uint64_t ws = 0;
  const char* why = "";
  if (conv_can<T>(cx, dir, g, alg_onednn, ws, why)) return alg_onednn;
  if (conv_can<T>(cx, dir, g, alg_im2col, ws, why) && ws <= im2col_default_limit) return alg_im2col;
  return alg_direct;
}

// Runs algorithm alg (>= 1, conv_can true): fwd (x, w) -> y, data (w, dy) -> dx, filter
// (x, dy) -> dw.
template <class T>
void conv_run(native_context& cx, int dir, const conv_geom& g, int64_t alg, const T* in0,
              const T* in1, T* out, void* ws) {
  if (alg == alg_onednn) {
#ifdef PARENCHYMA_NN_HAVE_DNNL
    if constexpr (std::is_same_v<T, float>) {
      cx.dn->run(dn_conv(*cx.dn, dir, g), {in0, in1, out}, ws);
      return;
    }
#endif
  }
  (void)cx;
  T* col = static_cast<T*>(ws);
  if (alg == alg_im2col) {
    if (dir == dir_fwd) conv_fwd_im2col(g, in0, in1, out, col);
    if (dir == dir_data) conv_bwd_data_im2col(g, in0, in1, out, col);
    if (dir == dir_filter) conv_bwd_filter_im2col(g, in0, in1, out, col);
    return;
  }
  if (dir == dir_fwd) conv_fwd_direct(g, in0, in1, out);
  if (dir == dir_data) conv_bwd_data_direct(g, in0, in1, out);
  if (dir == dir_filter) conv_bwd_filter_direct(g, in0, in1, out);
}

template <const pcy_op_schema& S, int DIR, class T>
void op_conv(native_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_conv<S>(a, dt<T>);
  const conv_geom g = geom_of(c);
  int64_t alg = c.algorithm;
  uint64_t ws = 0;
  const char* why = "";
  if (alg == alg_default) alg = degenerate(g) ? alg_direct : conv_choose<T>(cx, DIR, g);
  if (!conv_can<T>(cx, DIR, g, alg, ws, why)) // sets why for every algorithm it refuses
    sdk::fail(alg >= alg_count ? PCY_ERR_INVALID_ARGUMENT : PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": argument algorithm: ", c.algorithm, ": ", why,
                       " (this bundle's algorithms: ", alg_names, ")"));
  const pcy_tensor& out = DIR == dir_fwd ? *c.y : DIR == dir_data ? *c.x : *c.w;
  if (count(out) == 0) return;
  cx.settle(a.queue());
  T* o = cx.ptr<T>(out);
  if (degenerate(g)) { // nothing to sum: the output is zero (the direct loops do just that)
    alg = alg_direct;
    ws = 0;
  }
  // Empty inputs are never dereferenced by the loops (their extents bound every loop).
  const pcy_tensor& i0 = DIR == dir_data ? *c.w : *c.x;
  const pcy_tensor& i1 = DIR == dir_fwd ? *c.w : *c.y;
  const T* p0 = count(i0) ? cx.ptr<const T>(i0) : nullptr;
  const T* p1 = count(i1) ? cx.ptr<const T>(i1) : nullptr;
  conv_run<T>(cx, DIR, g, alg, p0, p1, o, ws ? workspace(a, ws) : nullptr);
}

template <class T> void op_conv_bias(native_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_bias<pcy_nn_convolution_bias_schema>(a, dt<T>);
  if (c.N * c.K * c.P * c.Q == 0) return;
  cx.settle(a.queue());
  conv_bias(cx.ptr<T>(*c.y), cx.ptr<const T>(*c.w), c.N, c.K, c.P * c.Q);
}
template <class T> void op_conv_grad_bias(native_context& cx, const sdk::op_args& a) {
  const nb::conv_call c = nb::decode_bias<pcy_nn_convolution_grad_bias_schema>(a, dt<T>);
  if (c.K == 0) return;
  cx.settle(a.queue());
  T* db = cx.ptr<T>(*c.w);
  if (c.N * c.P * c.Q == 0) {
    zero(db, static_cast<uint64_t>(c.K));
    return;
  }
  conv_grad_bias(cx.ptr<const T>(*c.y), db, c.N, c.K, c.P * c.Q);
}

// Measurement (-1): every algorithm that runs the shapes, on scratch tensors, once per geometry
// and dtype in the process (the cache is shared by every context, under its mutex).
using measure_key = std::array<int64_t, 17>;
std::mutex measure_mutex;
std::map<measure_key, int64_t> measure_cache; // guarded by measure_mutex

template <class T> int64_t conv_measure(native_context& cx, int dir, const conv_geom& g) {
  const measure_key key{dir,  static_cast<int64_t>(dt<T>),
                        g.N,  g.C,
                        g.H,  g.W,
                        g.K,  g.R,
                        g.S,  g.sh,
                        g.sw, g.ph,
                        g.pw, g.dh,
                        g.dw, g.G,
                        0};
  const std::lock_guard<std::mutex> lock(measure_mutex);
  if (auto it = measure_cache.find(key); it != measure_cache.end()) return it->second;
  const uint64_t nx = static_cast<uint64_t>(g.N * g.C * g.H * g.W),
                 nw = static_cast<uint64_t>(g.K * g.Cg() * g.R * g.S),
                 ny = static_cast<uint64_t>(g.N * g.K * g.P * g.Q);
  constexpr uint64_t limit = (uint64_t{512} << 20) / sizeof(T);
  int64_t best = conv_choose<T>(cx, dir, g);
  if (nx + nw + ny <= limit) {
    std::vector<T> x(nx), w(nw), y(ny);
    uint64_t z = 0x243F6A8885A308D3ull;
    for (std::vector<T>* v : {&x, &w, &y})
      for (T& e : *v) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        e = static_cast<T>(static_cast<double>(z >> 40) / 16777216.0 - 0.5);
      }
    const T* in0 = dir == dir_data ? w.data() : x.data();
    const T* in1 = dir == dir_fwd ? w.data() : y.data();
    T* out = dir == dir_fwd ? y.data() : dir == dir_data ? x.data() : w.data();
    double best_s = 0;
    std::vector<unsigned char> ws;
    for (int64_t alg = alg_onednn; alg < alg_count; ++alg) {
      uint64_t bytes = 0;
      const char* why = "";
      if (!conv_can<T>(cx, dir, g, alg, bytes, why)) continue;
      if (alg == alg_im2col && bytes > im2col_default_limit) continue;
      if (ws.size() < bytes) ws.resize(bytes);
      double t = 0;
      for (int rep = 0; rep < 4; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        conv_run<T>(cx, dir, g, alg, in0, in1, out, ws.data());
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep == 1 || (rep > 1 && s < t)) t = s;
        if (rep == 0 && s > 0.05) {
          t = s; // long enough: the first run is the measure
          break;
        }
      }
      if (best_s == 0 || t < best_s) {
        best_s = t;
        best = alg;
      }
    }
  }
  measure_cache.emplace(key, best);
  return best;
}

template <class T> void op_conv_algorithm(native_context& cx, const sdk::op_args& a) {
  constexpr auto& S = pcy_nn_convolution_algorithm_schema;
  const nb::conv_algorithm_call c = nb::decode_conv_algorithm(a, dt<T>);
  const int dir = static_cast<int>(c.direction);
  const conv_geom g = geom_of(c.g);
  int64_t alg = c.requested;
  uint64_t ws = 0;
  const char* why = "";
  if (alg >= 0) {
    const int64_t run =
        alg == alg_default ? (degenerate(g) ? alg_direct : conv_choose<T>(cx, dir, g)) : alg;
    if (!conv_can<T>(cx, dir, g, run, ws, why)) // sets why for every algorithm it refuses
      sdk::fail(alg >= alg_count ? PCY_ERR_INVALID_ARGUMENT : PCY_ERR_UNSUPPORTED,
                sdk::str(S.extension, ".", S.name, ": argument requested: algorithm ", alg, ": ",
                         why, " (this bundle's algorithms: ", alg_names, ")"));
  } else {
    alg = degenerate(g)       ? alg_direct
          : c.requested == -2 ? conv_choose<T>(cx, dir, g)
                              : conv_measure<T>(cx, dir, g);
    if (!conv_can<T>(cx, dir, g, alg, ws, why))
      sdk::fail(PCY_ERR_INTERNAL, sdk::str("nn_native: chose algorithm ", alg, ": ", why));
  }
  if (degenerate(g)) ws = 0;
  cx.settle(a.queue());
  int64_t* r = cx.ptr<int64_t>(*c.result);
  r[0] = alg;
  r[1] = static_cast<int64_t>(ws);
  if (c.result_count == 3) r[2] = PCY_NN_NUMERICS_DIRECT; // every algorithm here sums directly
}

// ---- pooling ------------------------------------------------------------------------------

// A plane with H or W 0 and a non-empty pooled output (2 pad == window) has windows of padding
// only: there is no maximum or mean to write. Refused, naming x.
void pool_nonempty(const pcy_op_schema& s, const pool_geom& g) {
  if (g.H == 0 || g.W == 0)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(s.extension, ".", s.name, ": argument x: its plane is ", g.H, " x ", g.W,
                       ", so every window holds only padding"));
}

pool_geom pgeom(const nb::pool_call& c) {
  pool_geom g;
  g.planes = c.N * c.C, g.H = c.H, g.W = c.W, g.P = c.P, g.Q = c.Q;
  g.wh = c.win[0], g.ww = c.win[1], g.sh = c.stride[0], g.sw = c.stride[1], g.ph = c.pad[0],
  g.pw = c.pad[1];
  g.include_padding = c.include_padding;
  return g;
}

// f(b, p0) for blocks of planes (b: g with b.planes of them, from plane p0) on the loops' threads.
template <class F> void split_planes(const pool_geom& g, F&& f) {
  const auto planes = static_cast<uint64_t>(g.planes);
  const auto elements = planes * static_cast<uint64_t>(g.H * g.W + g.P * g.Q);
  split(planes, loop_threads(planes, elements), [&](uint64_t lo, uint64_t hi, uint64_t) {
    pool_geom b = g;
    b.planes = static_cast<int64_t>(hi - lo);
    f(b, static_cast<int64_t>(lo));
  });
}

template <class T> void op_pool_max(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_max_schema>(a, dt<T>);
  const pool_geom g = pgeom(c);
  if (g.planes * g.P * g.Q == 0) return;
  pool_nonempty(pcy_nn_pooling_max_schema, g);
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
  split_planes(g, [&](const pool_geom& b, int64_t p0) {
    pool_max_fwd(b, x + p0 * g.H * g.W, y + p0 * g.P * g.Q, static_cast<int32_t*>(nullptr));
  });
}
template <class T> void op_pool_max_indexed(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_max_indexed_schema>(a, dt<T>);
  const pool_geom g = pgeom(c);
  if (g.planes * g.P * g.Q == 0) return;
  pool_nonempty(pcy_nn_pooling_max_indexed_schema, g);
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
  int32_t* idx = cx.ptr<int32_t>(*c.indices);
  split_planes(g, [&](const pool_geom& b, int64_t p0) {
    pool_max_fwd(b, x + p0 * g.H * g.W, y + p0 * g.P * g.Q, idx + p0 * g.P * g.Q);
  });
}
template <class T> void op_pool_max_grad(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_max_grad_schema>(a, dt<T>);
  const pool_geom g = pgeom(c);
  if (g.planes * g.H * g.W == 0) return;
  cx.settle(a.queue());
  T* dx = cx.ptr<T>(*c.dx);
  if (g.P * g.Q == 0) {
    zero(dx, static_cast<uint64_t>(g.planes * g.H * g.W));
    return;
  }
  const T* x = cx.ptr<const T>(*c.x);
  const T* dy = cx.ptr<const T>(*c.dy);
  split_planes(g, [&](const pool_geom& b, int64_t p0) {
    pool_max_bwd(b, x + p0 * g.H * g.W, dy + p0 * g.P * g.Q, dx + p0 * g.H * g.W);
  });
}
template <class T> void op_pool_max_grad_indexed(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_max_grad_indexed_schema>(a, dt<T>);
  const int64_t planes = c.N * c.C, HW = c.H * c.W, PQ = c.P * c.Q;
  if (planes * HW == 0) return;
  cx.settle(a.queue());
  T* dx = cx.ptr<T>(*c.dx);
  if (PQ == 0) {
    zero(dx, static_cast<uint64_t>(planes * HW));
    return;
  }
  const T* dy = cx.ptr<const T>(*c.dy);
  const int32_t* idx = cx.ptr<const int32_t>(*c.indices);
  const auto items = static_cast<uint64_t>(planes);
  split(items, loop_threads(items, items * static_cast<uint64_t>(HW + PQ)),
        [&](uint64_t lo, uint64_t hi, uint64_t) {
          const auto p0 = static_cast<int64_t>(lo);
          pool_max_bwd_indexed(static_cast<int64_t>(hi - lo), HW, PQ, dy + p0 * PQ, idx + p0 * PQ,
                               dx + p0 * HW);
        });
}

#ifdef PARENCHYMA_NN_HAVE_DNNL
// The oneDNN average pooling of g (fwd or bwd), f32.
dn_prim& dn_pool_avg(dn_state& d, bool bwd, const pool_geom& g, int64_t N, int64_t C) {
  const dn_key k{N, C, g.H, g.W, g.wh, g.ww, g.sh, g.sw, g.ph, g.pw, g.include_padding ? 1 : 0};
  return d.get(
      bwd ? d.pool_bwd : d.pool_fwd, k, static_cast<uint64_t>(N * C * g.H * g.W), [&](dn_prim& p) {
        const auto src = md4(N, C, g.H, g.W), dst = md4(N, C, g.P, g.Q);
        const dnnl::memory::dims st{g.sh, g.sw}, win{g.wh, g.ww}, pad{g.ph, g.pw};
        const auto alg = g.include_padding ? dnnl::algorithm::pooling_avg_include_padding
                                           : dnnl::algorithm::pooling_avg_exclude_padding;
        const auto attr = dn_state::attr();
        if (!bwd) {
          const dnnl::pooling_forward::primitive_desc pd(
              {dnnl::prop_kind::forward_inference, alg, src, dst, st, win, pad, pad}, attr, d.eng);
          d.finish(p, pd, dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
          return;
        }
        const dnnl::pooling_forward::primitive_desc hint(
            {dnnl::prop_kind::forward_training, alg, src, dst, st, win, pad, pad}, d.eng);
        const dnnl::pooling_backward::primitive_desc pd({alg, src, dst, st, win, pad, pad}, attr,
                                                        d.eng, hint);
        d.finish(p, pd, dnnl::pooling_backward(pd),
                 {{DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_DIFF_SRC, src}});
      });
}
#endif

template <class T> void op_pool_avg(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_avg_schema>(a, dt<T>);
  const pool_geom g = pgeom(c);
  if (g.planes * g.P * g.Q == 0) return;
  pool_nonempty(pcy_nn_pooling_avg_schema, g);
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
#ifdef PARENCHYMA_NN_HAVE_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (cx.dn) {
      dn_prim& p = dn_pool_avg(*cx.dn, false, g, c.N, c.C);
      if (p.ok) {
        cx.dn->run(p, {x, y}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
        return;
      }
    }
  }
#endif
  split_planes(g, [&](const pool_geom& b, int64_t p0) {
    pool_avg_fwd(b, x + p0 * g.H * g.W, y + p0 * g.P * g.Q);
  });
}
template <class T> void op_pool_avg_grad(native_context& cx, const sdk::op_args& a) {
  const nb::pool_call c = nb::decode_pool<pcy_nn_pooling_avg_grad_schema>(a, dt<T>);
  const pool_geom g = pgeom(c);
  if (g.planes * g.H * g.W == 0) return;
  cx.settle(a.queue());
  T* dx = cx.ptr<T>(*c.dx);
  if (g.P * g.Q == 0) {
    zero(dx, static_cast<uint64_t>(g.planes * g.H * g.W));
    return;
  }
  const T* dy = cx.ptr<const T>(*c.dy);
#ifdef PARENCHYMA_NN_HAVE_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (cx.dn) {
      dn_prim& p = dn_pool_avg(*cx.dn, true, g, c.N, c.C);
      if (p.ok) {
        cx.dn->run(p, {dy, dx}, p.scratch_bytes ? workspace(a, p.scratch_bytes) : nullptr);
        return;
      }
    }
  }
#endif
  split_planes(g, [&](const pool_geom& b, int64_t p0) {
    pool_avg_bwd(b, dy + p0 * g.P * g.Q, dx + p0 * g.H * g.W);
  });
}

// ---- LRN ----------------------------------------------------------------------------------

lrn_geom lgeom(const nb::lrn_call& c) {
  lrn_geom g;
  g.N = c.N, g.C = c.C, g.HW = c.H * c.W, g.n = c.n, g.alpha = c.alpha, g.beta = c.beta, g.k = c.k;
  return g;
}

// Our loop in f32 too: oneDNN 2.6's LRN across channels (its AVX2 kernel for C a multiple of 8)
// keeps a running sum of squares along the channels, adding the square entering the window and
// subtracting the one leaving it. One NaN, infinity or huge value (1e18: its square swamps the
// others) then poisons or shifts every later channel of the pixel (Inf - Inf is NaN; 1e8 - 1e8
// loses the small squares), and its reference kernel loses huge inputs too. The loop sums each
// window afresh, in the data's type (f32 or f64; nn_loops.hpp's lrn_image).
template <class T> void op_lrn(native_context& cx, const sdk::op_args& a) {
  const nb::lrn_call c = nb::decode_lrn<pcy_nn_lrn_schema>(a, dt<T>);
  const lrn_geom g = lgeom(c);
  if (g.N * g.C * g.HW == 0) return;
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
  const auto items = static_cast<uint64_t>(g.N * g.C), per = static_cast<uint64_t>(g.HW);
  const int t = loop_threads(items, items * per * heavy_element);
  double* sc = cx.doubles(per * static_cast<uint64_t>(t));
  split(items, t, [&](uint64_t lo, uint64_t hi, uint64_t slot) {
    lrn_fwd(g, x, y, static_cast<int64_t>(lo), static_cast<int64_t>(hi), sc + slot * per);
  });
}
template <class T> void op_lrn_grad(native_context& cx, const sdk::op_args& a) {
  const nb::lrn_call c = nb::decode_lrn<pcy_nn_lrn_grad_schema>(a, dt<T>);
  const lrn_geom g = lgeom(c);
  if (g.N * g.C * g.HW == 0) return;
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  const T* y = cx.ptr<const T>(*c.y);
  const T* dy = cx.ptr<const T>(*c.dy);
  T* dx = cx.ptr<T>(*c.dx);
  const auto items = static_cast<uint64_t>(g.N), per = static_cast<uint64_t>(2 * g.C * g.HW);
  const int t = loop_threads(items, items * per / 2 * heavy_element);
  double* sc = cx.doubles(per * static_cast<uint64_t>(t));
  split(items, t, [&](uint64_t lo, uint64_t hi, uint64_t slot) {
    lrn_bwd(g, x, y, dy, dx, static_cast<int64_t>(lo), static_cast<int64_t>(hi), sc + slot * per);
  });
}

// ---- dropout ------------------------------------------------------------------------------

template <class T> void op_dropout(native_context& cx, const sdk::op_args& a) {
  const nb::dropout_call c = nb::decode_dropout<pcy_nn_dropout_schema>(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue());
  const T* x = cx.ptr<const T>(*c.x);
  T* y = cx.ptr<T>(*c.y);
  uint8_t* mask = cx.ptr<uint8_t>(*c.mask);
  split_elements(c.n, [&](uint64_t lo, uint64_t hi) {
    dropout_fwd(x + lo, y + lo, mask + lo, hi - lo, c.seed, c.threshold, static_cast<T>(c.scale),
                lo);
  });
}
template <class T> void op_dropout_grad(native_context& cx, const sdk::op_args& a) {
  const nb::dropout_call c = nb::decode_dropout<pcy_nn_dropout_grad_schema>(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue());
  const T* dy = cx.ptr<const T>(*c.x);
  const uint8_t* mask = cx.ptr<const uint8_t>(*c.mask);
  T* dx = cx.ptr<T>(*c.y);
  split_elements(c.n, [&](uint64_t lo, uint64_t hi) {
    dropout_bwd(dy + lo, mask + lo, dx + lo, hi - lo, static_cast<T>(c.scale));
  });
}

// ---- normalisation --------------------------------------------------------------------------

template <const pcy_op_schema& S, bool LAYER, class T>
void op_norm(native_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  if (c.outer == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* x = cx.ptr<const T>(*c.x);
  const T* w = cx.ptr<const T>(*c.weight);
  const T* b = LAYER ? cx.ptr<const T>(*c.bias) : static_cast<const T*>(nullptr);
  T* y = cx.ptr<T>(*c.y);
  St* mean = c.mean ? cx.ptr<St>(*c.mean) : nullptr;
  St* rstd = c.rstd ? cx.ptr<St>(*c.rstd) : nullptr;
  // Rows are independent: blocks of rows on the loops' threads.
  split(c.outer, loop_threads(c.outer, c.outer * c.n), [&](uint64_t lo, uint64_t hi, uint64_t) {
    norm_fwd<LAYER>(x + lo * c.n, w, b, y + lo * c.n, mean ? mean + lo : nullptr,
                    rstd ? rstd + lo : nullptr, hi - lo, c.n, c.epsilon);
  });
}
template <const pcy_op_schema& S, bool LAYER, class T>
void op_norm_grad(native_context& cx, const sdk::op_args& a) {
  const nb::norm_call c = nb::decode_norm<S>(a, dt<T>);
  if (c.n == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* x = cx.ptr<const T>(*c.x);
  const T* w = cx.ptr<const T>(*c.weight);
  const St* mean = LAYER ? cx.ptr<const St>(*c.mean) : static_cast<const St*>(nullptr);
  const St* rstd = cx.ptr<const St>(*c.rstd);
  const T* dy = cx.ptr<const T>(*c.dy);
  T* dx = cx.ptr<T>(*c.y);
  T* dw = cx.ptr<T>(*c.dweight);
  T* db = LAYER ? cx.ptr<T>(*c.dbias) : static_cast<T*>(nullptr);
  const uint64_t n = c.n, outer = c.outer, elements = outer * n;
  // dx by rows; dw and db summed over the rows in a fixed number of chunks of consecutive rows
  // (chunks: a function of the shape alone, at most 64), each chunk's sums added by the dx pass
  // while its rows are in cache (in row order, in double), then the chunks' sums added in chunk
  // order per column. Threads take whole chunks and then blocks of columns, so the bits do not
  // depend on the thread count (tests/nn/threads_test.cpp compares 1, 2 and 3).
  const uint64_t chunks =
      std::max<uint64_t>(1, std::min<uint64_t>({outer, 64, (uint64_t{1} << 21) / (2 * n)}));
  // Scratch: w in double (n; converted once, not per row), then each chunk's sums (2 n each).
  double* wd = cx.doubles(n + chunks * 2 * n);
  double* part = wd + n;
  for (uint64_t j = 0; j < n; ++j)
    wd[j] = static_cast<double>(w[j]);
  split(chunks, loop_threads(chunks, elements), [&](uint64_t c0, uint64_t c1, uint64_t) {
    for (uint64_t k = c0; k < c1; ++k) {
      const uint64_t lo = outer * k / chunks, hi = outer * (k + 1) / chunks;
      norm_bwd_dx_c(LAYER, x + lo * n, wd, LAYER ? mean + lo : mean, rstd + lo, dy + lo * n,
                    dx + lo * n, hi - lo, n, part + k * 2 * n);
    }
  });
  split(n, loop_threads(n, elements), [&](uint64_t j0, uint64_t j1, uint64_t) {
    norm_chunk_sums<LAYER>(part, chunks, n, j0, j1, dw, db);
  });
}

// ---- cross entropy --------------------------------------------------------------------------

template <class T> void op_xent(native_context& cx, const sdk::op_args& a) {
  const nb::xent_call c = nb::decode_xent<pcy_nn_cross_entropy_schema>(a, dt<T>);
  if (c.rows == 0 && c.reduction == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  // Empty tensors (no rows, or no classes) are not resolved: nothing is read through them.
  const bool any = c.rows != 0;
  xent_fwd(any && c.classes != 0 ? cx.ptr<const T>(*c.logits) : nullptr,
           any ? cx.ptr<const int32_t>(*c.labels) : nullptr, cx.ptr<T>(*c.loss),
           any && c.lse ? cx.ptr<St>(*c.lse) : nullptr, c.rows, c.classes, c.ignore_index,
           c.smoothing, c.reduction);
}
template <class T> void op_xent_grad(native_context& cx, const sdk::op_args& a) {
  const nb::xent_call c = nb::decode_xent<pcy_nn_cross_entropy_grad_schema>(a, dt<T>);
  if (c.rows == 0 || c.classes == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  xent_bwd(cx.ptr<const T>(*c.logits), cx.ptr<const int32_t>(*c.labels), cx.ptr<const St>(*c.lse),
           cx.ptr<const T>(*c.dloss), cx.ptr<T>(*c.dlogits), c.rows, c.classes, c.ignore_index,
           c.smoothing, c.reduction);
}

// ---- embedding ------------------------------------------------------------------------------

template <class T> void op_embedding(native_context& cx, const sdk::op_args& a) {
  const nb::embedding_call c = nb::decode_embedding<pcy_nn_embedding_schema>(a, dt<T>);
  if (c.n == 0 || c.D == 0) return;
  cx.settle(a.queue());
  // An empty table (V = 0) is not resolved: every index is outside it.
  embedding_fwd(c.V != 0 ? cx.ptr<const T>(*c.weight) : nullptr, cx.ptr<const int32_t>(*c.indices),
                cx.ptr<T>(*c.y), c.V, c.D, c.n);
}
template <class T> void op_embedding_grad(native_context& cx, const sdk::op_args& a) {
  const nb::embedding_call c = nb::decode_embedding<pcy_nn_embedding_grad_schema>(a, dt<T>);
  if (c.V == 0 || c.D == 0) return;
  cx.settle(a.queue());
  const bool any = c.n != 0;
  embedding_bwd(any ? cx.ptr<const int32_t>(*c.indices) : nullptr,
                any ? cx.ptr<const T>(*c.y) : nullptr, cx.ptr<T>(*c.weight), c.V, c.D, c.n,
                c.padding_idx);
}

// ---- batch normalisation --------------------------------------------------------------------

template <class T> void op_bn(native_context& cx, const sdk::op_args& a) {
  const nb::bn_call c = nb::decode_bn<pcy_nn_batch_norm_schema>(a, dt<T>);
  if (c.C == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  auto sp = [&](const pcy_tensor* t) { return t ? cx.ptr<St>(*t) : nullptr; };
  // M = 0 (not training): only the statistics; the empty x and y are not resolved.
  const bool any = c.M != 0;
  bn_fwd(any ? cx.ptr<const T>(*c.x) : nullptr, cx.ptr<const T>(*c.weight),
         cx.ptr<const T>(*c.bias), sp(c.running_mean), sp(c.running_var),
         any ? cx.ptr<T>(*c.y) : nullptr, sp(c.mean), sp(c.rstd), c.N, c.C, c.M ? c.spatial : 0,
         c.training, c.momentum, c.epsilon);
}
template <class T> void op_bn_grad(native_context& cx, const sdk::op_args& a) {
  const nb::bn_call c = nb::decode_bn<pcy_nn_batch_norm_grad_schema>(a, dt<T>);
  if (c.C == 0) return;
  cx.settle(a.queue());
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const bool any = c.M != 0;
  bn_bwd(any ? cx.ptr<const T>(*c.x) : nullptr, cx.ptr<const T>(*c.weight),
         cx.ptr<const St>(*c.mean), cx.ptr<const St>(*c.rstd),
         any ? cx.ptr<const T>(*c.dy) : nullptr, any ? cx.ptr<T>(*c.y) : nullptr,
         c.dweight ? cx.ptr<T>(*c.dweight) : nullptr, c.dbias ? cx.ptr<T>(*c.dbias) : nullptr, c.N,
         c.C, c.M ? c.spatial : 0, c.training);
}

// ---- the bundle ---------------------------------------------------------------------------

#ifdef PARENCHYMA_NN_HAVE_DNNL
// oneDNN's OpenMP runtime keeps its worker threads until the process exits. When the host
// unloads this plugin, dlclose would unmap libdnnl and libgomp under those live threads (a
// crash at exit). So both libraries are pinned (RTLD_NODELETE), once per process: the plugin
// itself still unloads; the runtimes stay mapped until exit, as they would in a program linked
// with them.
inline void pin_runtime_libraries() {
  static const bool pinned = [] {
    auto pin = [](const void* symbol) {
      Dl_info info{};
      if (dladdr(symbol, &info) != 0 && info.dli_fname != nullptr)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    };
    pin(reinterpret_cast<const void*>(&dnnl_version));
#ifdef PCY_NN_NATIVE_OMP
    pin(reinterpret_cast<const void*>(&omp_get_max_threads));
#endif
    return true;
  }();
  (void)pinned;
}
#endif

constexpr sdk::bundle_identity identity{"nn_native", PCY_NN_EXTENSION, "native",
#ifdef PARENCHYMA_NN_HAVE_DNNL
                                        "NN ops on the host CPU: oneDNN for f32 convolution, "
                                        "average pooling, " PCY_NN_DNNL_SOFTMAX "sigmoid and tanh; "
                                        "native loops for the rest and for f64"
#else
                                        "NN ops on the host CPU: native loops (built without "
                                        "oneDNN)"
#endif
};

class nn_native_bundle : public sdk::bundle_base<identity, native_context> {
public:
  explicit nn_native_bundle(const pcy_host_services& host) : bundle_base(host) {
#ifdef PARENCHYMA_NN_HAVE_DNNL
    pin_runtime_libraries();
    const dnnl_version_t* v = dnnl_version();
    const std::string dn = sdk::str("oneDNN ", v->major, ".", v->minor, ".", v->patch, " ");
    const std::string loop = "native loop";
    auto both = [&](const std::string& prim, const char* below) {
      return dn + prim + " (f32" + below + ")";
    };
#else
    const std::string dn, loop = "native loop (built without oneDNN)";
    auto both = [&](const std::string&, const char*) { return loop; };
#endif
    const std::string small = "; native loop below 4096 elements";
    // Activations: sigmoid and tanh forward on oneDNN (f32), relu, elu and every gradient on
    // our loops.
#define PCY_NN_NATIVE_ACT(a, A, PRIM)                                                              \
  table_.add<op_act<pcy_nn_##a##_schema, act::A, float>,                                           \
             op_act<pcy_nn_##a##_schema, act::A, double>>(pcy_nn_##a##_schema, PRIM, loop);        \
  table_.add<op_act<pcy_nn_##a##_pointwise_schema, act::A, float>,                                 \
             op_act<pcy_nn_##a##_pointwise_schema, act::A, double>>(pcy_nn_##a##_pointwise_schema, \
                                                                    PRIM, loop);                   \
  table_.add<op_act_grad<pcy_nn_##a##_grad_schema, act::A, float>,                                 \
             op_act_grad<pcy_nn_##a##_grad_schema, act::A, double>>(pcy_nn_##a##_grad_schema,      \
                                                                    loop, loop);                   \
  table_.add<op_act_grad<pcy_nn_##a##_pointwise_grad_schema, act::A, float>,                       \
             op_act_grad<pcy_nn_##a##_pointwise_grad_schema, act::A, double>>(                     \
      pcy_nn_##a##_pointwise_grad_schema, loop, loop);
    PCY_NN_NATIVE_ACT(sigmoid, sigmoid, both("eltwise_logistic", small.c_str()))
    PCY_NN_NATIVE_ACT(relu, relu, loop)
    PCY_NN_NATIVE_ACT(tanh, tanh, both("eltwise_tanh", small.c_str()))
    PCY_NN_NATIVE_ACT(elu, elu, loop)
#undef PCY_NN_NATIVE_ACT

    table_.add<op_softmax<pcy_nn_softmax_schema, false, float>,
               op_softmax<pcy_nn_softmax_schema, false, double>>(
        pcy_nn_softmax_schema,
        dnnl_softmax
            ? both("softmax", "; native loop below 4096 elements or for NaN / infinite input")
            : loop,
        loop);
    table_.add<op_softmax<pcy_nn_log_softmax_schema, true, float>,
               op_softmax<pcy_nn_log_softmax_schema, true, double>>(pcy_nn_log_softmax_schema, loop,
                                                                    loop);
    table_.add<op_softmax_grad<pcy_nn_softmax_grad_schema, false, float>,
               op_softmax_grad<pcy_nn_softmax_grad_schema, false, double>>(
        pcy_nn_softmax_grad_schema, loop, loop);
    table_.add<op_softmax_grad<pcy_nn_log_softmax_grad_schema, true, float>,
               op_softmax_grad<pcy_nn_log_softmax_grad_schema, true, double>>(
        pcy_nn_log_softmax_grad_schema, loop, loop);

#ifdef PARENCHYMA_NN_HAVE_DNNL
    const std::string conv_loops = "native loops (algorithms 2 im2col + gemm, 3 direct)";
    auto conv32 = [&](const char* prim) {
      return dn + prim + " (f32, algorithm 1 and the default); " + conv_loops;
    };
#else
    const std::string conv_loops =
        "native loops (algorithms 2 im2col + gemm, 3 direct; built without oneDNN)";
    auto conv32 = [&](const char*) { return conv_loops; };
#endif
    table_.add<op_conv<pcy_nn_convolution_schema, dir_fwd, float>,
               op_conv<pcy_nn_convolution_schema, dir_fwd, double>>(
        pcy_nn_convolution_schema, conv32("convolution_forward"), conv_loops);
    table_.add<op_conv<pcy_nn_convolution_grad_data_schema, dir_data, float>,
               op_conv<pcy_nn_convolution_grad_data_schema, dir_data, double>>(
        pcy_nn_convolution_grad_data_schema, conv32("convolution_backward_data"), conv_loops);
    table_.add<op_conv<pcy_nn_convolution_grad_filter_schema, dir_filter, float>,
               op_conv<pcy_nn_convolution_grad_filter_schema, dir_filter, double>>(
        pcy_nn_convolution_grad_filter_schema, conv32("convolution_backward_weights"), conv_loops);
    table_.add<op_conv_bias<float>, op_conv_bias<double>>(pcy_nn_convolution_bias_schema, loop,
                                                          loop);
    table_.add<op_conv_grad_bias<float>, op_conv_grad_bias<double>>(
        pcy_nn_convolution_grad_bias_schema, loop, loop);
    table_.add<op_conv_algorithm<float>, op_conv_algorithm<double>>(
        pcy_nn_convolution_algorithm_schema,
        std::string("algorithms ") + alg_names + "; -1 measures, -2 heuristic",
        std::string("algorithms ") + alg_names + " (1 refused in f64); -1 measures, -2 heuristic");

    table_.add<op_pool_max<float>, op_pool_max<double>>(pcy_nn_pooling_max_schema, loop, loop);
    table_.add<op_pool_max_indexed<float>, op_pool_max_indexed<double>>(
        pcy_nn_pooling_max_indexed_schema, loop, loop);
    table_.add<op_pool_max_grad<float>, op_pool_max_grad<double>>(pcy_nn_pooling_max_grad_schema,
                                                                  loop, loop);
    table_.add<op_pool_max_grad_indexed<float>, op_pool_max_grad_indexed<double>>(
        pcy_nn_pooling_max_grad_indexed_schema, loop, loop);
    table_.add<op_pool_avg<float>, op_pool_avg<double>>(pcy_nn_pooling_avg_schema,
                                                        both("pooling_forward avg", ""), loop);
    table_.add<op_pool_avg_grad<float>, op_pool_avg_grad<double>>(
        pcy_nn_pooling_avg_grad_schema, both("pooling_backward avg", ""), loop);

    table_.add<op_lrn<float>, op_lrn<double>>(pcy_nn_lrn_schema, loop, loop);
    table_.add<op_lrn_grad<float>, op_lrn_grad<double>>(pcy_nn_lrn_grad_schema, loop, loop);

    table_.add<op_dropout<float>, op_dropout<double>>(pcy_nn_dropout_schema, loop, loop);
    table_.add<op_dropout_grad<float>, op_dropout_grad<double>>(pcy_nn_dropout_grad_schema, loop,
                                                                loop);

    table_.add<op_norm<pcy_nn_layer_norm_schema, true, float>,
               op_norm<pcy_nn_layer_norm_schema, true, double>>(pcy_nn_layer_norm_schema, loop,
                                                                loop);
    table_.add<op_norm_grad<pcy_nn_layer_norm_grad_schema, true, float>,
               op_norm_grad<pcy_nn_layer_norm_grad_schema, true, double>>(
        pcy_nn_layer_norm_grad_schema, loop, loop);
    table_.add<op_norm<pcy_nn_rms_norm_schema, false, float>,
               op_norm<pcy_nn_rms_norm_schema, false, double>>(pcy_nn_rms_norm_schema, loop, loop);
    table_.add<op_norm_grad<pcy_nn_rms_norm_grad_schema, false, float>,
               op_norm_grad<pcy_nn_rms_norm_grad_schema, false, double>>(
        pcy_nn_rms_norm_grad_schema, loop, loop);
    table_.add<op_xent<float>, op_xent<double>>(pcy_nn_cross_entropy_schema, loop, loop);
    table_.add<op_xent_grad<float>, op_xent_grad<double>>(pcy_nn_cross_entropy_grad_schema, loop,
                                                          loop);
    table_.add<op_bn<float>, op_bn<double>>(pcy_nn_batch_norm_schema, loop, loop);
    table_.add<op_bn_grad<float>, op_bn_grad<double>>(pcy_nn_batch_norm_grad_schema, loop, loop);
    table_.add<op_embedding<float>, op_embedding<double>>(pcy_nn_embedding_schema, loop, loop);
    table_.add<op_embedding_grad<float>, op_embedding_grad<double>>(pcy_nn_embedding_grad_schema,
                                                                    loop, loop);
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    // Native memory handles are the tensors' host pointers; queue_finish settles them.
    sdk::require_slots(*a.framework, name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_queue_finish});
    auto c = std::make_unique<native_context>();
    c->fw = a.framework;
    c->queue = a.queue;
#ifdef PARENCHYMA_NN_HAVE_DNNL
    try {
      c->dn = std::make_unique<dn_state>();
    } catch (const dnnl::error&) {
      c->dn.reset(); // every op then runs on our loops
    }
#endif
    return c.release();
  }

private:
  sdk::op_table<nn_native_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(nn_native_bundle)
