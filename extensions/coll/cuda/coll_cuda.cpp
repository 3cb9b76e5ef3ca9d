// coll bundle for the CUDA framework: every coll op through NCCL, loaded at run time
// (libnccl.so.2, dlopen; nccl.h gives only the types), enqueued on the backend's own CUstream with
// no host wait, like every other cuda op, so the ops overlap with the backend's other work and
// can be recorded into a CUDA graph (the plugin captures each op's stream work). Without NCCL the
// bundle loads, serves no op and says why (the core then falls back to the MPI bundle, staging
// the tensors through the host).
//
// Communicators start from a unique id (unique_id on rank 0, comm_init_rank on every rank); the
// front-end moves the id between the ranks (MPI, a file, or the program: coll.hpp). comm_init
// from an MPI handle is not served here. NCCL's communicators are non-blocking (config.blocking
// 0): creation and any call that NCCL answers with ncclInProgress are polled against
// PARENCHYMA_COLL_TIMEOUT, and so is barrier's wait for the stream; past it the communicator is
// aborted (ncclCommAbort) and every later op on it fails at once. An asynchronous NCCL error
// (ncclCommGetAsyncError, read before each op) breaks the communicator the same way.
//
// Semantics (pcy_coll.h) where NCCL differs: f16 / bf16 SUM, PROD and AVG reduce through an f32
// workspace (our kernels widen and narrow; NCCL would reduce in 16 bits); AVG is NCCL's SUM divided
// by our kernel (NCCL's ncclAvg pre-scales floats); all_to_all is grouped ncclSend / ncclRecv;
// tags are accepted but NCCL matches a peer's sends and receives in call order; barrier is an
// all_reduce of one element and a host wait (not recordable). docs/distributed.md.
#include "bundle_common.hpp"
#include "kernels_cu.hpp"

#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <cuda.h>
#include <nccl.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

namespace {

using namespace parenchyma;
using sdk::str;
using sdk::val;

constexpr const char* bundle_name = "coll_cuda";
constexpr uint32_t block = 256;
constexpr uint64_t max_blocks = 1024;

// Every NCCL entry point we call, resolved once when the bundle loads.
// clang-format off
#define PARENCHYMA_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommAbort) \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) \
  X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)
// clang-format on

struct nccl_api {
#define PARENCHYMA_DECLARE(f) decltype(&::f) f = nullptr;
  PARENCHYMA_NCCL_FUNCTIONS(PARENCHYMA_DECLARE)
#undef PARENCHYMA_DECLARE
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr; // optional (NCCL 2.13)
  sdk::cuda_driver<CUcontext, CUresult> driver;
  CUresult (*cuStreamQuery)(CUstream) = nullptr;
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
};

ncclDataType_t nccl_type(pcy_dtype d) {
  switch (d) {
  case PCY_DTYPE_F16: return ncclFloat16;
  case PCY_DTYPE_BF16: return ncclBfloat16;
  case PCY_DTYPE_F32: return ncclFloat32;
  case PCY_DTYPE_F64: return ncclFloat64;
  case PCY_DTYPE_I32: return ncclInt32;
  default: return ncclInt64;
  }
}

ncclRedOp_t nccl_op(int64_t reduce) {
  switch (reduce) {
  case PCY_COLL_REDUCE_PROD: return ncclProd;
  case PCY_COLL_REDUCE_MIN: return ncclMin;
  case PCY_COLL_REDUCE_MAX: return ncclMax;
  default: return ncclSum; // SUM, and AVG (then divided)
  }
}

constexpr bool is_half(pcy_dtype d) { return d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16; }
// f16 / bf16 SUM, PROD and AVG go through f32; MIN and MAX are exact in 16 bits.
constexpr bool through_f32(pcy_dtype d, int64_t reduce) {
  return is_half(d) && reduce != PCY_COLL_REDUCE_MIN && reduce != PCY_COLL_REDUCE_MAX;
}

// ---- process-wide communicators --------------------------------------------------------------

struct comm_entry {
  ncclComm_t comm = nullptr;
  CUcontext ctx = nullptr; // the context (device) it was made in
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string broken; // set by a timeout or an NCCL error: later ops fail at once with it
  std::string where;  // "rank r of n: ", every error's start (made once, not per op)
};

struct nccl_state {
  std::mutex mu;                // guards comms' list and each entry's `broken`
  std::deque<comm_entry> comms; // id = index + 1; a deque keeps addresses stable
};

// Leaked on purpose: NCCL's own exit work may run after static destructors.
nccl_state& state() {
  static auto* s = new nccl_state;
  return *s;
}

// ---- per-context state -----------------------------------------------------------------------

// PARENCHYMA_COLL_NCCL_BLOCKING=1: blocking NCCL communicators (config.blocking 1): creation and
// enqueues then wait inside NCCL, unbounded by the timeout; for measuring what the non-blocking
// mode costs per op. Default 0.
constexpr const char* blocking_setting = "PARENCHYMA_COLL_NCCL_BLOCKING";

struct coll_settings {
  double timeout_s = PCY_COLL_TIMEOUT_DEFAULT;
  bool blocking = false;
};

enum kernel_id {
  K_WIDEN_F16,
  K_WIDEN_BF16,
  K_NARROW_F16,
  K_NARROW_BF16,
  K_DIV_F32,
  K_DIV_F64,
  K_DIV_I32,
  K_DIV_I64,
  K_COUNT
};
constexpr const char* kernel_names[K_COUNT] = {"widen_f16",   "widen_bf16", "narrow_f16",
                                               "narrow_bf16", "divide_f32", "divide_f64",
                                               "divide_i32",  "divide_i64"};

struct coll_context : sdk::cuda_device_context<CUcontext, CUresult, CUstream> {
  coll_context(const pcy_bundle_context_args& a, const nccl_api& nccl)
      : cuda_device_context(a, nccl.driver, bundle_name), api(&nccl) {}
  const nccl_api* api;
  coll_settings set;
  pcy_kernel k[K_COUNT] = {};
  std::string kernels_reason; // why our kernels are missing (no NVRTC, a failed build)

  void* ptr(const pcy_tensor& t) const {
    return static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset;
  }
  pcy_kernel kernel(kernel_id id, const char* op) const {
    if (!kernels_reason.empty())
      sdk::fail(PCY_ERR_UNSUPPORTED,
                str(op,
                    " needs the bundle's own CUDA kernels (f16/bf16 through f32, avg), which "
                    "are not available: ",
                    kernels_reason));
    return k[id];
  }
  void launch(pcy_queue q, pcy_kernel kern, uint64_t n,
              std::initializer_list<pcy_kernel_arg> args) const {
    const uint64_t blocks = std::clamp<uint64_t>((n + block - 1) / block, 1, max_blocks);
    device_context::launch(q, kern, 1, {blocks * block, 1, 1}, {block, 1, 1}, args);
  }
  // info / uid tensors (a few i64) from the host, waited for (comm set-up only).
  void write(pcy_queue q, const pcy_tensor& t, const void* data, uint64_t bytes) const {
    pcy_memory_transfer_args w{};
    w.struct_size = sizeof w;
    w.queue = q;
    w.memory = t.memory;
    w.offset = t.byte_offset;
    w.host_pointer = const_cast<void*>(data);
    w.bytes = bytes;
    w.blocking = true;
    sdk::check(fw->memory_write(&w));
  }
};

// One op call: its communicator, the calling context and the text every error starts with.
struct call {
  coll_context& cx;
  comm_entry& c;
  const char* op;
  const std::string& where; // c.where (the host prefixes the bundle and the op)

  const nccl_api& api() const { return *cx.api; }
  CUstream stream() const { return cx.stream; }

  std::string nccl_text(ncclResult_t r) const {
    std::string s = api().ncclGetErrorString(r);
    if (api().ncclGetLastError != nullptr) {
      const char* last = api().ncclGetLastError(c.comm);
      if (last != nullptr && *last != '\0') s += str(" (", last, ")");
    }
    return s;
  }
  // Breaks the communicator (aborted: NCCL's kernels for it end, the stream drains) and throws.
  [[noreturn]] void broke(const std::string& why, pcy_status code = PCY_ERR_DEVICE) {
    ncclComm_t abort = nullptr; // aborted once, by the call that broke it
    {
      std::lock_guard<std::mutex> lock(state().mu);
      if (c.broken.empty()) {
        c.broken = why;
        abort = c.comm;
      }
    }
    if (abort != nullptr) api().ncclCommAbort(abort);
    sdk::fail(code, str(why, "; the communicator is aborted and unusable now: end the job on "
                             "every rank"));
  }
  // Polls a non-blocking communicator until NCCL is done with the last call, against the deadline.
  void settle() {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                             std::chrono::duration<double>(cx.set.timeout_s));
    for (unsigned polls = 1;; ++polls) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = api().ncclCommGetAsyncError(c.comm, &state);
      if (r != ncclSuccess) broke(str(where, "ncclCommGetAsyncError failed: ", nccl_text(r)));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress)
        broke(str(where, op, ": NCCL reported an error: ", nccl_text(state)));
      if (polls % 64 == 0) {
        if (clock::now() > deadline) timed_out();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }
  [[noreturn]] void timed_out() {
    broke(str(where, "no answer from the other ranks within ", cx.set.timeout_s, " s (",
              PCY_COLL_TIMEOUT_SETTING,
              "): a rank exited, crashed, or called other ops (another order, dtype or size); "
              "raise ",
              PCY_COLL_TIMEOUT_SETTING, " if a rank is only slow"));
  }
  // An NCCL call's result: ncclInProgress is polled (non-blocking communicator), an error throws
  // naming the op and the rank (a usage error leaves the communicator usable).
  void check(ncclResult_t r, const char* fn) {
    if (r == ncclSuccess) [[likely]]
      return;
    if (r == ncclInProgress) {
      settle();
      return;
    }
    const std::string why = str(where, fn, " failed: ", nccl_text(r));
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) sdk::fail(PCY_ERR_INVALID_ARGUMENT, why);
    broke(why);
  }
  size_t count(uint64_t n) const { return static_cast<size_t>(n); }
  // A tensor's device pointer, nullptr for an empty one (NCCL ignores it then).
  void* ptr(const pcy_tensor& t, uint64_t n) const { return n == 0 ? nullptr : cx.ptr(t); }
};

call begin(coll_context& cx, const sdk::op_args& a, const char* op) {
  comm_entry& c = parenchyma::coll_bundle::entry_of(state(), a.i(0));
  call k{cx, c, op, c.where};
  if (c.ctx != cx.cu_ctx)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              str(k.where, "the communicator was made on another CUDA device or context than this "
                           "backend's; use it with the backend it was made with"));
  cx.current();
  // An error NCCL found asynchronously in earlier work (a peer's network failure, ...).
  ncclResult_t state = ncclSuccess;
  if (cx.api->ncclCommGetAsyncError(c.comm, &state) == ncclSuccess && state != ncclSuccess &&
      state != ncclInProgress)
    k.broke(str(k.where, "NCCL reported an error in earlier work: ", k.nccl_text(state)));
  if (state == ncclInProgress) k.settle();
  return k;
}

void check_reduce(const call& k, int64_t r) { parenchyma::coll_bundle::check_reduce(k.where, r); }
void check_rank(const call& k, int64_t r, const char* name) {
  parenchyma::coll_bundle::check_rank(k.where, k.c.size, r, name);
}

// ---- our kernels around NCCL -------------------------------------------------------------------

// f32 workspace <- x (n elements of f16 / bf16).
void widen(call& k, pcy_queue q, pcy_dtype d, const void* x, void* ws, uint64_t n) {
  if (n == 0) return;
  const auto nn = static_cast<long long>(n);
  k.cx.launch(q, k.cx.kernel(d == PCY_DTYPE_F16 ? K_WIDEN_F16 : K_WIDEN_BF16, k.op), n,
              {val(nn), val(reinterpret_cast<uint64_t>(x)), val(reinterpret_cast<uint64_t>(ws))});
}
// y <- workspace / divisor, rounded once to f16 / bf16.
void narrow(call& k, pcy_queue q, pcy_dtype d, const void* ws, void* y, uint64_t n, float divisor) {
  if (n == 0) return;
  const auto nn = static_cast<long long>(n);
  k.cx.launch(q, k.cx.kernel(d == PCY_DTYPE_F16 ? K_NARROW_F16 : K_NARROW_BF16, k.op), n,
              {val(nn), val(reinterpret_cast<uint64_t>(ws)), val(reinterpret_cast<uint64_t>(y)),
               val(divisor)});
}
// y /= size (AVG of f32, f64, i32, i64).
void divide(call& k, pcy_queue q, pcy_dtype d, void* y, uint64_t n) {
  if (n == 0) return;
  const auto nn = static_cast<long long>(n);
  const auto p = reinterpret_cast<uint64_t>(y);
  const int size = k.c.size;
  switch (d) {
  case PCY_DTYPE_F32:
    k.cx.launch(q, k.cx.kernel(K_DIV_F32, k.op), n,
                {val(nn), val(p), val(static_cast<float>(size))});
    break;
  case PCY_DTYPE_F64:
    k.cx.launch(q, k.cx.kernel(K_DIV_F64, k.op), n,
                {val(nn), val(p), val(static_cast<double>(size))});
    break;
  case PCY_DTYPE_I32:
    k.cx.launch(q, k.cx.kernel(K_DIV_I32, k.op), n, {val(nn), val(p), val(size)});
    break;
  default:
    k.cx.launch(q, k.cx.kernel(K_DIV_I64, k.op), n,
                {val(nn), val(p), val(static_cast<long long>(size))});
    break;
  }
}

// ---- ops -------------------------------------------------------------------------------------

// all_reduce (root < 0) or reduce to root of n elements, send == recv in place. Only root's recv
// is written by a reduce.
void reduce_to(call& k, const sdk::op_args& a, pcy_dtype d, int64_t reduce, const void* send,
               void* recv, uint64_t n, int root) {
  const bool here = root < 0 || root == k.c.rank;
  const CUstream s = k.stream();
  if (n == 0) return; // nothing moves (NCCL would refuse the null buffers of empty tensors)
  if (through_f32(d, reduce)) {
    void* ws = nullptr;
    if (n > 0) a.workspace(n * sizeof(float), &ws);
    widen(k, a.queue(), d, send, ws, n);
    if (root < 0)
      k.check(k.api().ncclAllReduce(ws, ws, k.count(n), ncclFloat32, nccl_op(reduce), k.c.comm, s),
              "ncclAllReduce");
    else
      k.check(
          k.api().ncclReduce(ws, ws, k.count(n), ncclFloat32, nccl_op(reduce), root, k.c.comm, s),
          "ncclReduce");
    if (here)
      narrow(k, a.queue(), d, ws, recv, n,
             reduce == PCY_COLL_REDUCE_AVG ? static_cast<float>(k.c.size) : 1.0f);
    return;
  }
  if (root < 0)
    k.check(
        k.api().ncclAllReduce(send, recv, k.count(n), nccl_type(d), nccl_op(reduce), k.c.comm, s),
        "ncclAllReduce");
  else
    k.check(k.api().ncclReduce(send, recv, k.count(n), nccl_type(d), nccl_op(reduce), root,
                               k.c.comm, s),
            "ncclReduce");
  if (here && reduce == PCY_COLL_REDUCE_AVG) divide(k, a.queue(), d, recv, n);
}

template <pcy_dtype D> void op_all_reduce(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_reduce_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(2), &y = dc.tensor(3);
  const uint64_t n = dc.elements(x, 2);
  if (dc.elements(y, 3) != n) dc.bad(PCY_ERR_INVALID_ARGUMENT, 3, str("expected ", n, " elements"));
  call k = begin(cx, a, "all_reduce");
  check_reduce(k, a.i(1));
  reduce_to(k, a, D, a.i(1), k.ptr(x, n), k.ptr(y, n), n, -1);
}

template <pcy_dtype D> void op_all_reduce_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_reduce_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t n = dc.elements(x, 2);
  call k = begin(cx, a, "all_reduce");
  check_reduce(k, a.i(1));
  void* p = k.ptr(x, n);
  reduce_to(k, a, D, a.i(1), p, p, n, -1);
}

template <pcy_dtype D> void op_reduce(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(3), &y = dc.tensor(4);
  const uint64_t n = dc.elements(x, 3);
  if (dc.elements(y, 4) != n) dc.bad(PCY_ERR_INVALID_ARGUMENT, 4, str("expected ", n, " elements"));
  call k = begin(cx, a, "reduce");
  check_reduce(k, a.i(1));
  check_rank(k, a.i(2), "root");
  reduce_to(k, a, D, a.i(1), k.ptr(x, n), k.ptr(y, n), n, static_cast<int>(a.i(2)));
}

template <pcy_dtype D> void op_reduce_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(3);
  const uint64_t n = dc.elements(x, 3);
  call k = begin(cx, a, "reduce");
  check_reduce(k, a.i(1));
  check_rank(k, a.i(2), "root");
  void* p = k.ptr(x, n);
  reduce_to(k, a, D, a.i(1), p, p, n, static_cast<int>(a.i(2)));
}

// Data movement moves bytes (ncclInt8): no dtype of NCCL's touches the values.
template <pcy_dtype D> void op_broadcast(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_broadcast_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t n = dc.elements(x, 2);
  call k = begin(cx, a, "broadcast");
  check_rank(k, a.i(1), "root");
  if (n == 0) return;
  void* p = k.ptr(x, n);
  k.check(k.api().ncclBroadcast(p, p, n * sdk::dtype_size(D), ncclInt8, static_cast<int>(a.i(1)),
                                k.c.comm, k.stream()),
          "ncclBroadcast");
}

template <pcy_dtype D> void op_all_gather(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_gather_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(1), &y = dc.tensor(2);
  const uint64_t n = dc.elements(x, 1);
  call k = begin(cx, a, "all_gather");
  const uint64_t total = n * static_cast<uint64_t>(k.c.size);
  if (dc.elements(y, 2) != total)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", total, " elements (size x n)"));
  if (n == 0) return;
  k.check(k.api().ncclAllGather(k.ptr(x, n), k.ptr(y, total), n * sdk::dtype_size(D), ncclInt8,
                                k.c.comm, k.stream()),
          "ncclAllGather");
}

// In place (NCCL's own rule): this rank's input is block `rank` of y.
template <pcy_dtype D> void op_all_gather_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_gather_inplace_schema> dc(a, D);
  const pcy_tensor& y = dc.tensor(1);
  const uint64_t total = dc.elements(y, 1);
  call k = begin(cx, a, "all_gather");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 1, str(total, " elements, not a multiple of ", k.c.size));
  const uint64_t bytes = total / static_cast<uint64_t>(k.c.size) * sdk::dtype_size(D);
  if (bytes == 0) return;
  char* p = static_cast<char*>(k.ptr(y, total));
  k.check(k.api().ncclAllGather(p == nullptr ? nullptr : p + k.c.rank * bytes, p, bytes, ncclInt8,
                                k.c.comm, k.stream()),
          "ncclAllGather");
}

// y = block `rank` of the reduction of x (size * n elements); y == nullptr: in place, the result
// in block `rank` of x (NCCL's in-place rule).
void reduce_scatter_to(call& k, const sdk::op_args& a, pcy_dtype d, int64_t reduce, void* x,
                       void* y, uint64_t n) {
  const uint64_t total = n * static_cast<uint64_t>(k.c.size);
  const size_t es = sdk::dtype_size(d), rank = static_cast<size_t>(k.c.rank);
  if (n == 0) return;
  void* out = y != nullptr ? y : (x == nullptr ? nullptr : static_cast<char*>(x) + rank * n * es);
  if (through_f32(d, reduce)) {
    void* ws = nullptr;
    if (total > 0) a.workspace(total * sizeof(float), &ws);
    widen(k, a.queue(), d, x, ws, total);
    float* mine = ws == nullptr ? nullptr : static_cast<float*>(ws) + rank * n;
    k.check(k.api().ncclReduceScatter(ws, mine, k.count(n), ncclFloat32, nccl_op(reduce), k.c.comm,
                                      k.stream()),
            "ncclReduceScatter");
    narrow(k, a.queue(), d, mine, out, n,
           reduce == PCY_COLL_REDUCE_AVG ? static_cast<float>(k.c.size) : 1.0f);
    return;
  }
  k.check(k.api().ncclReduceScatter(x, out, k.count(n), nccl_type(d), nccl_op(reduce), k.c.comm,
                                    k.stream()),
          "ncclReduceScatter");
  if (reduce == PCY_COLL_REDUCE_AVG) divide(k, a.queue(), d, out, n);
}

template <pcy_dtype D> void op_reduce_scatter(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_scatter_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(2), &y = dc.tensor(3);
  const uint64_t n = dc.elements(y, 3);
  call k = begin(cx, a, "reduce_scatter");
  const uint64_t total = n * static_cast<uint64_t>(k.c.size);
  if (dc.elements(x, 2) != total)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", total, " elements (size x n)"));
  check_reduce(k, a.i(1));
  reduce_scatter_to(k, a, D, a.i(1), k.ptr(x, total), k.ptr(y, n), n);
}

template <pcy_dtype D> void op_reduce_scatter_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_scatter_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t total = dc.elements(x, 2);
  call k = begin(cx, a, "reduce_scatter");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str(total, " elements, not a multiple of ", k.c.size));
  check_reduce(k, a.i(1));
  reduce_scatter_to(k, a, D, a.i(1), k.ptr(x, total), nullptr,
                    total / static_cast<uint64_t>(k.c.size));
}

// Grouped ncclSend / ncclRecv: block j of x to rank j, block j of y from rank j.
template <pcy_dtype D> void op_all_to_all(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_to_all_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(1), &y = dc.tensor(2);
  const uint64_t total = dc.elements(x, 1);
  if (dc.elements(y, 2) != total)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", total, " elements like x"));
  call k = begin(cx, a, "all_to_all");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 1, str(total, " elements, not a multiple of ", k.c.size));
  const size_t bytes = total / static_cast<uint64_t>(k.c.size) * sdk::dtype_size(D);
  if (bytes == 0) return; // nothing moves; NCCL has no empty point-to-point to order
  const auto* xs = static_cast<const char*>(k.ptr(x, total));
  auto* ys = static_cast<char*>(k.ptr(y, total));
  k.check(k.api().ncclGroupStart(), "ncclGroupStart");
  for (int j = 0; j < k.c.size; ++j) {
    const size_t at = static_cast<size_t>(j) * bytes;
    const ncclResult_t rs = k.api().ncclSend(xs + at, bytes, ncclInt8, j, k.c.comm, k.stream());
    const ncclResult_t rr = k.api().ncclRecv(ys + at, bytes, ncclInt8, j, k.c.comm, k.stream());
    if (rs != ncclSuccess || rr != ncclSuccess) {
      k.api().ncclGroupEnd();
      k.check(rs != ncclSuccess ? rs : rr, rs != ncclSuccess ? "ncclSend" : "ncclRecv");
    }
  }
  k.check(k.api().ncclGroupEnd(), "ncclGroupEnd");
}

void check_peer(const call& k, int64_t peer, int64_t tag) {
  check_rank(k, peer, "peer");
  if (peer == k.c.rank)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str(k.where, "argument peer: this rank itself"));
  if (tag < 0 || tag > 32767)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str(k.where, "argument tag: ", tag, " outside 0 .. 32767"));
}

template <pcy_dtype D> void op_send(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_send_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(3);
  const uint64_t n = dc.elements(x, 3);
  call k = begin(cx, a, "send");
  check_peer(k, a.i(1), a.i(2));
  if (n == 0) return; // the matching recv has no elements either (pcy_coll.h)
  k.check(k.api().ncclSend(k.ptr(x, n), n * sdk::dtype_size(D), ncclInt8, static_cast<int>(a.i(1)),
                           k.c.comm, k.stream()),
          "ncclSend");
}

template <pcy_dtype D> void op_recv(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_recv_schema> dc(a, D);
  const pcy_tensor& y = dc.tensor(3);
  const uint64_t n = dc.elements(y, 3);
  call k = begin(cx, a, "recv");
  check_peer(k, a.i(1), a.i(2));
  if (n == 0) return;
  k.check(k.api().ncclRecv(k.ptr(y, n), n * sdk::dtype_size(D), ncclInt8, static_cast<int>(a.i(1)),
                           k.c.comm, k.stream()),
          "ncclRecv");
}

// An all_reduce of one element, then a wait on the host for the stream (polling the stream and
// NCCL's asynchronous error against the timeout). Waits on the host: not recordable in a graph.
void op_barrier(coll_context& cx, const sdk::op_args& a) {
  call k = begin(cx, a, "barrier");
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cx.api->cuStreamIsCapturing != nullptr &&
      cx.api->cuStreamIsCapturing(k.stream(), &capturing) == CUDA_SUCCESS &&
      capturing != CU_STREAM_CAPTURE_STATUS_NONE)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              str(k.where,
                  "barrier waits on the host and cannot be recorded in a graph; end the "
                  "recording before it (collective ops order the ranks' work on the stream)"));
  void* ws = nullptr;
  a.workspace(sizeof(int32_t), &ws);
  k.check(k.api().ncclAllReduce(ws, ws, 1, ncclInt32, ncclSum, k.c.comm, k.stream()),
          "ncclAllReduce (barrier)");
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                    std::chrono::duration<double>(cx.set.timeout_s));
  for (unsigned polls = 1;; ++polls) {
    const CUresult r = cx.api->cuStreamQuery(k.stream());
    if (r == CUDA_SUCCESS) return;
    if (r != CUDA_ERROR_NOT_READY)
      k.broke(str(k.where, "the stream failed while waiting (CUresult ", static_cast<int>(r), ")"));
    if (polls % 64 != 0) continue;
    ncclResult_t state = ncclSuccess;
    cx.api->ncclCommGetAsyncError(k.c.comm, &state);
    if (state != ncclSuccess && state != ncclInProgress)
      k.broke(str(k.where, "NCCL reported an error: ", k.nccl_text(state)));
    const auto now = clock::now();
    if (now > deadline) k.timed_out();
    if (now > start + std::chrono::milliseconds(20))
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// A new unique id (rank 0 of the communicator to be), written to the uid tensor.
void op_unique_id(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_unique_id_schema> dc(a, PCY_DTYPE_I64);
  const pcy_tensor& uid = dc.tensor(0);
  if (dc.elements(uid, 0) != PCY_COLL_UNIQUE_ID_WORDS)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 0, str("expected ", PCY_COLL_UNIQUE_ID_WORDS, " elements"));
  static_assert(sizeof(ncclUniqueId) == PCY_COLL_UNIQUE_ID_WORDS * sizeof(int64_t));
  ncclUniqueId id{};
  cx.current();
  if (const ncclResult_t r = cx.api->ncclGetUniqueId(&id); r != ncclSuccess)
    sdk::fail(PCY_ERR_DEVICE, str("ncclGetUniqueId failed: ", cx.api->ncclGetErrorString(r)));
  cx.write(a.queue(), uid, &id, sizeof id);
}

// Collective over the ranks that pass the same id: a non-blocking NCCL communicator, polled
// against the timeout (aborted past it). The ranks on this host are counted by NCCL when the
// caller does not know (local_rank < 0): an all_gather of each rank's host-name hash.
void op_comm_init_rank(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_comm_init_rank_schema> dc(a, PCY_DTYPE_I64);
  const pcy_tensor& info = dc.tensor(5);
  if (dc.elements(info, 5) != PCY_COLL_INFO_COUNT)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 5, str("expected ", PCY_COLL_INFO_COUNT, " elements"));
  const int64_t rank = a.i(0), size = a.i(1);
  if (size < 1 || size > INT32_MAX || rank < 0 || rank >= size)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              str("argument rank / size: rank ", rank, " of ", size, "; pass 0 <= rank < size"));
  const std::span<const int64_t> words = a.ints(4);
  if (words.size() != PCY_COLL_UNIQUE_ID_WORDS)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 4,
           str(words.size(), " words, expected ", PCY_COLL_UNIQUE_ID_WORDS, " (unique_id's)"));
  ncclUniqueId id{};
  std::memcpy(&id, words.data(), sizeof id);
  comm_entry e;
  e.ctx = cx.cu_ctx;
  e.rank = static_cast<int>(rank);
  e.size = static_cast<int>(size);
  cx.current();
  sdk::check(cx.fw->queue_finish(a.queue())); // set-up: earlier work first, then no overlap
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = cx.set.blocking ? 1 : 0;
  e.where = str("rank ", rank, " of ", size, ": ");
  call k{cx, e, "comm_init_rank", e.where};
  k.check(cx.api->ncclCommInitRankConfig(&e.comm, e.size, id, e.rank, &config),
          "ncclCommInitRankConfig");
  k.settle();
  e.local_rank = static_cast<int>(a.i(2));
  e.local_size = static_cast<int>(a.i(3));
  if (e.local_rank < 0 || e.local_size < 1) {
    // Host-name hashes, gathered through NCCL itself (a workspace of size + 1 words).
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const auto mine = static_cast<int64_t>(std::hash<std::string>{}(host));
    void* ws = nullptr;
    const pcy_memory m = a.workspace(static_cast<uint64_t>(size) * sizeof(int64_t), &ws);
    pcy_memory_transfer_args t{};
    t.struct_size = sizeof t;
    t.queue = a.queue();
    t.memory = m;
    t.offset = static_cast<uint64_t>(rank) * sizeof(int64_t);
    t.host_pointer = const_cast<int64_t*>(&mine);
    t.bytes = sizeof mine;
    t.blocking = true;
    sdk::check(cx.fw->memory_write(&t));
    char* base = static_cast<char*>(ws);
    k.check(cx.api->ncclAllGather(base + rank * sizeof(int64_t), base, sizeof(int64_t), ncclInt8,
                                  e.comm, cx.stream),
            "ncclAllGather (host names)");
    std::vector<int64_t> hosts(static_cast<size_t>(size));
    t.offset = 0;
    t.host_pointer = hosts.data();
    t.bytes = hosts.size() * sizeof(int64_t);
    sdk::check(cx.fw->memory_read(&t)); // blocking: after the all_gather on the queue
    e.local_rank = 0;
    e.local_size = 0;
    for (int64_t i = 0; i < size; ++i)
      if (hosts[static_cast<size_t>(i)] == mine) {
        if (i < rank) ++e.local_rank;
        ++e.local_size;
      }
  }
  int64_t cid = 0;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().comms.push_back(e);
    cid = static_cast<int64_t>(state().comms.size());
  }
  const int64_t out[PCY_COLL_INFO_COUNT] = {cid, e.rank, e.size, e.local_rank, e.local_size};
  cx.write(a.queue(), info, out, sizeof out);
}

// comm_init from an MPI handle is the MPI bundle's; here it says what to do instead.
void op_comm_init(coll_context&, const sdk::op_args&) {
  sdk::fail(PCY_ERR_UNSUPPORTED,
            "the NCCL bundle makes communicators from a unique id (comm_init_rank); "
            "coll::Communicator does so on a CUDA backend (docs/distributed.md)");
}

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_COLL_EXTENSION, "cuda",
    "collectives between processes on CUDA devices through NCCL (loaded at run time)"};

class coll_cuda_bundle : public sdk::bundle_base<identity, coll_context> {
public:
  explicit coll_cuda_bundle(const pcy_host_services& host) : bundle_base(host) {
    set_.timeout_s = parenchyma::coll_bundle::timeout_setting(settings_, log_, set_.timeout_s);
    if (const char* b = settings_.find(blocking_setting)) {
      if (std::strcmp(b, "1") == 0)
        set_.blocking = true;
      else if (std::strcmp(b, "0") != 0)
        log_.warn(blocking_setting, "=", b, " is neither 0 nor 1; communicators stay non-blocking");
    }
    if (!load()) {
      log_.info(reason_);
      return; // loads, serves no op, says why
    }
    const std::string lib = label_;
    add_all<PCY_COLL_DTYPES(op_all_reduce)>(pcy_coll_all_reduce_schema, lib + " ncclAllReduce");
    add_all<PCY_COLL_DTYPES(op_all_reduce_inplace)>(pcy_coll_all_reduce_inplace_schema,
                                                    lib + " ncclAllReduce in place");
    add_all<PCY_COLL_DTYPES(op_broadcast)>(pcy_coll_broadcast_schema, lib + " ncclBroadcast");
    add_all<PCY_COLL_DTYPES(op_reduce)>(pcy_coll_reduce_schema, lib + " ncclReduce");
    add_all<PCY_COLL_DTYPES(op_reduce_inplace)>(pcy_coll_reduce_inplace_schema,
                                                lib + " ncclReduce in place");
    add_all<PCY_COLL_DTYPES(op_all_gather)>(pcy_coll_all_gather_schema, lib + " ncclAllGather");
    add_all<PCY_COLL_DTYPES(op_all_gather_inplace)>(pcy_coll_all_gather_inplace_schema,
                                                    lib + " ncclAllGather in place");
    add_all<PCY_COLL_DTYPES(op_reduce_scatter)>(pcy_coll_reduce_scatter_schema,
                                                lib + " ncclReduceScatter");
    add_all<PCY_COLL_DTYPES(op_reduce_scatter_inplace)>(pcy_coll_reduce_scatter_inplace_schema,
                                                        lib + " ncclReduceScatter in place");
    add_all<PCY_COLL_DTYPES(op_all_to_all)>(pcy_coll_all_to_all_schema,
                                            lib + " grouped ncclSend/ncclRecv");
    add_all<PCY_COLL_DTYPES(op_send)>(pcy_coll_send_schema, lib + " ncclSend");
    add_all<PCY_COLL_DTYPES(op_recv)>(pcy_coll_recv_schema, lib + " ncclRecv");
    table_.add<op_barrier>(pcy_coll_barrier_schema, PCY_DTYPE_I64,
                           lib + " ncclAllReduce of one element, then a host wait");
    table_.add<op_unique_id>(pcy_coll_unique_id_schema, PCY_DTYPE_I64, lib + " ncclGetUniqueId");
    table_.add<op_comm_init_rank>(pcy_coll_comm_init_rank_schema, PCY_DTYPE_I64,
                                  lib + " ncclCommInitRankConfig (non-blocking)");
    table_.add<op_comm_init>(pcy_coll_comm_init_schema, PCY_DTYPE_I64,
                             "refused: NCCL starts from a unique id (comm_init_rank)");
  }
  coll_cuda_bundle(const coll_cuda_bundle&) = delete;
  coll_cuda_bundle& operator=(const coll_cuda_bundle&) = delete;

  const char* reason() const { return reason_.empty() ? nullptr : reason_.c_str(); }
  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    if (!reason_.empty()) sdk::fail(PCY_ERR_UNAVAILABLE, reason_);
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_memory_write,
                        PCY_FRAMEWORK_SLOT_memory_read, PCY_FRAMEWORK_SLOT_queue_finish});
    auto cx = std::make_unique<coll_context>(a, api_);
    cx->set = set_;
    build_kernels(*cx);
    return cx.release();
  }

private:
  // Our kernels, once per context (the framework caches the cubin on disk). Without them the ops
  // that need them (f16 / bf16 sum, prod, avg; avg) fail with the reason; the others still run.
  void build_kernels(coll_context& cx) {
    const pcy_framework_api& fw = *cx.fw;
    if (fw.program_build == nullptr || fw.kernel_create == nullptr || fw.kernel_launch == nullptr) {
      cx.kernels_reason = str("framework '", fw.name, "' cannot build or launch programs");
      log_.warn(cx.kernels_reason);
      return;
    }
    sdk::device_context::build_failure failed;
    const pcy_program program = cx.build(coll_cuda::kernel_source(), nullptr, &failed);
    if (program == nullptr) {
      cx.kernels_reason = str("building them failed: ", failed.message);
      log_.warn("our CUDA kernels are missing (", cx.kernels_reason,
                "); f16/bf16 sum, prod and avg, and avg of every dtype, will fail");
      return;
    }
    for (int i = 0; i < K_COUNT; ++i)
      cx.k[i] = cx.device_context::kernel(program, kernel_names[i]);
  }

  bool load() {
    // The driver is already loaded by the CUDA framework plugin; we need a few of its calls.
    reason_ = api_.driver.load();
    if (!reason_.empty()) return false;
    api_.cuStreamQuery = api_.driver.symbol<decltype(api_.cuStreamQuery)>("cuStreamQuery");
    api_.cuStreamIsCapturing =
        api_.driver.symbol<decltype(api_.cuStreamIsCapturing)>("cuStreamIsCapturing");
    if (api_.cuStreamQuery == nullptr) {
      reason_ = "the CUDA driver lacks cuStreamQuery: update the NVIDIA driver";
      return false;
    }
    const sdk::cuda_library nccl =
        sdk::open_cuda_library(settings_, {"libnccl.so.2"}, {"libnccl.so.2"});
    lib_ = nccl.handle;
    if (lib_ == nullptr) {
      reason_ = str("libnccl.so.2 not found: ", nccl.first_error,
                    " (also tried /usr/local/cuda/lib64); install NCCL (libnccl2, or the "
                    "nvidia-nccl wheel's lib directory) or add its directory to LD_LIBRARY_PATH");
      return false;
    }
#define PARENCHYMA_RESOLVE(f)                                                                      \
  api_.f = reinterpret_cast<decltype(api_.f)>(dlsym(lib_, #f));                                    \
  if (api_.f == nullptr) {                                                                         \
    reason_ = str(nccl.soname, " lacks ", #f, ": use NCCL 2.18 or newer");                         \
    return false;                                                                                  \
  }
    PARENCHYMA_NCCL_FUNCTIONS(PARENCHYMA_RESOLVE)
#undef PARENCHYMA_RESOLVE
    api_.ncclGetLastError =
        reinterpret_cast<decltype(api_.ncclGetLastError)>(dlsym(lib_, "ncclGetLastError"));
    int v = 0;
    api_.ncclGetVersion(&v);
    // NCCL_VERSION(x, y, z) = x * 10000 + y * 100 + z since 2.9.
    if (v < 21800) {
      reason_ = str(nccl.soname, " is NCCL ", v,
                    ": the bundle needs 2.18 or newer (non-blocking communicators, bf16)");
      return false;
    }
    label_ = str("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100);
    return true;
  }

  using fn = void (*)(coll_context&, const sdk::op_args&);
  template <fn F16, fn BF16, fn F32, fn F64, fn I32, fn I64>
  void add_all(const pcy_op_schema& s, const std::string& impl) {
    const bool reduces = s.args[1].name == std::string_view("reduce");
    const std::string half = impl + (reduces ? " (sum, prod, avg through f32)" : "");
    table_.add<F16>(s, PCY_DTYPE_F16, half);
    table_.add<BF16>(s, PCY_DTYPE_BF16, half);
    table_.add<F32>(s, PCY_DTYPE_F32, impl);
    table_.add<F64>(s, PCY_DTYPE_F64, impl);
    table_.add<I32>(s, PCY_DTYPE_I32, impl);
    table_.add<I64>(s, PCY_DTYPE_I64, impl);
  }

  nccl_api api_;
  void* lib_ = nullptr; // left loaded: NCCL keeps process-wide state
  std::string reason_, label_;
  coll_settings set_;
  sdk::op_table<coll_cuda_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(coll_cuda_bundle)
