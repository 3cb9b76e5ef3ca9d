// coll bundle for the native (host CPU) framework: every coll op through MPI (Open MPI on Debian).
//
// MPI is linked to this plugin only, never to the core: a machine without libmpi gets this bundle
// skipped in the load report. Ops run on the calling thread, after waiting for the framework's
// queue (earlier work on the tensors), so they are ordered with the backend's other work as every
// native op is. Every MPI exchange that waits for other ranks to arrive is non-blocking and
// polled against a deadline (PARENCHYMA_COLL_TIMEOUT seconds): a peer that is gone or calls
// something else gives an error naming the op and the rank, never a hang. Once the argument
// check has every rank inside the same collective, the data moves through MPI's blocking
// collective (call::exchange). docs/distributed.md is the guide.
#include "bundle_common.hpp"
#include "half.hpp"

#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/sdk/op_schema.hpp>

#include <mpi.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

namespace sdk = parenchyma::sdk;
using sdk::str;
using namespace parenchyma::coll_bundle;

constexpr bool is_half(pcy_dtype d) { return d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16; }

void to_f32(pcy_dtype d, const void* src, float* dst, size_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (d == PCY_DTYPE_F16)
    for (size_t i = 0; i < n; ++i)
      dst[i] = f16_to_f32(s[i]);
  else
    for (size_t i = 0; i < n; ++i)
      dst[i] = bf16_to_f32(s[i]);
}

void from_f32(pcy_dtype d, const float* src, void* dst, size_t n) {
  auto* o = static_cast<uint16_t*>(dst);
  if (d == PCY_DTYPE_F16)
    for (size_t i = 0; i < n; ++i)
      o[i] = f32_to_f16(src[i]);
  else
    for (size_t i = 0; i < n; ++i)
      o[i] = f32_to_bf16(src[i]);
}

// The MPI type a dtype moves as; f16 / bf16 move as 16-bit words and reduce through f32.
MPI_Datatype mpi_type(pcy_dtype d) {
  switch (d) {
  case PCY_DTYPE_F32: return MPI_FLOAT;
  case PCY_DTYPE_F64: return MPI_DOUBLE;
  case PCY_DTYPE_I32: return MPI_INT32_T;
  case PCY_DTYPE_I64: return MPI_INT64_T;
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: return MPI_UINT16_T;
  default: return MPI_FLOAT;
  }
}

MPI_Op mpi_op(int64_t reduce) {
  switch (reduce) {
  case PCY_COLL_REDUCE_PROD: return MPI_PROD;
  case PCY_COLL_REDUCE_MIN: return MPI_MIN;
  case PCY_COLL_REDUCE_MAX: return MPI_MAX;
  default: return MPI_SUM; // SUM, and AVG (then divided)
  }
}

const char* reduce_name(int64_t r) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg"};
  return r >= 0 && r <= 4 ? names[r] : "?";
}

// ---- process-wide MPI state ----------------------------------------------------------------

struct comm_entry {
  MPI_Comm comm = MPI_COMM_NULL; // the bundle's own duplicate
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string broken; // set by a timeout: later ops fail at once with it
};

struct mpi_state {
  std::mutex mu;                      // guards init and comms
  std::atomic<bool> serialise{false}; // less than MPI_THREAD_MULTIPLE: one MPI call at a time
  std::mutex call_mu;                 // held around each MPI call when serialise
  std::deque<comm_entry> comms;       // id = index + 1; a deque keeps addresses stable
};

// Leaked on purpose: the finalisation at exit may run after static destructors.
mpi_state& state() {
  static auto* s = new mpi_state;
  return *s;
}

void finalise_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return str("MPI error ", rc);
  return std::string(text, static_cast<size_t>(len));
}

// Starts MPI if the program has not. Open MPI loads its components with dlopen and they expect
// libmpi's symbols to be global, but we were loaded RTLD_LOCAL: libmpi is promoted to global
// first. This plugin is then pinned (RTLD_NODELETE) so the exit handler that finalises stays
// mapped even if the host unloads the bundle.
void ensure_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0)
    sdk::fail(PCY_ERR_UNAVAILABLE, "MPI was already finalised in this process; "
                                   "make communicators before MPI_Finalize");
  int initialised = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      sdk::fail(PCY_ERR_UNAVAILABLE, str("MPI_Init_thread failed: ", mpi_error_text(rc),
                                         "; start the program with mpirun (docs/distributed.md)"));
    if (dladdr(reinterpret_cast<void*>(&finalise_at_exit), &info) != 0 && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
    std::atexit(finalise_at_exit);
    // Open MPI reports some failures of a non-blocking collective (a truncation when the ranks'
    // sizes differ) through MPI_COMM_WORLD's handler, which aborts by default. The program did
    // not start MPI, so it has no MPI code of its own whose errors this would change.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    MPI_Query_thread(&provided);
  }
  state().serialise = provided < MPI_THREAD_MULTIPLE;
}

// One MPI call, serialised when the library is not thread-safe; a failure throws with `what`.
template <class F> void mpi(const std::string& where, const char* what, F&& f) {
  int rc;
  if (state().serialise) {
    std::lock_guard<std::mutex> lock(state().call_mu);
    rc = f();
  } else {
    rc = f();
  }
  if (rc != MPI_SUCCESS)
    sdk::fail(PCY_ERR_DEVICE,
              str(where, what, " failed: ", mpi_error_text(rc),
                  "; end the job on every rank (the communicator may be unusable)"));
}

// ---- per-context state ----------------------------------------------------------------------

struct coll_settings {
  double timeout_s = PCY_COLL_TIMEOUT_DEFAULT;
  bool check = true;
};

struct coll_context {
  const pcy_framework_api* fw = nullptr;
  coll_settings set;
  std::vector<float> stage; // f16 / bf16 reductions go through f32 here

  void settle(pcy_queue q) const { sdk::check(fw->queue_finish(q)); }
  void* ptr(const pcy_tensor& t) const {
    return static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset;
  }
  float* staging(size_t n) {
    if (stage.size() < n) stage.resize(n);
    return stage.data();
  }
  // After a timeout the engine may still write the staging buffer: it is given up, never freed.
  void abandon_staging() {
    if (!stage.empty()) new std::vector<float>(std::move(stage)); // NOLINT: leaked on purpose
    stage = {};
  }
};

// One op call: its communicator and the text every error starts with.
struct call {
  coll_context& cx;
  comm_entry& c;
  const char* op;
  std::string where;   // "rank r of n: " (the host prefixes the bundle and the op)
  bool agreed = false; // every rank is inside this op with the same arguments (agree)

  // One exchange: start(&request) through MPI's non-blocking collective, polled against the
  // deadline; or, once the argument check has shown every rank inside this op with the same
  // arguments, block(): MPI's blocking collective, whose tuned algorithms run up to 2x faster
  // than the non-blocking ones (Open MPI's libnbc). Nothing between the check and the exchange
  // can fail on one rank alone, so no rank waits there for one that will not come; a rank that
  // dies inside it ends the job through the launcher. Not where MPI serialises the calls (a
  // blocking call would hold the lock that another thread's exchange needs to progress).
  template <class Start, class Block>
  void exchange(const char* nb_name, Start&& start, const char* b_name, Block&& block) {
    if (agreed && !state().serialise) {
      const int rc = block();
      if (rc != MPI_SUCCESS) failed(rc, nullptr, 0, b_name);
      return;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    mpi(where, nb_name, [&] { return start(&r); });
    wait(&r, 1);
  }

  // Waits for the requests until the deadline; a timeout breaks the communicator. MPI's
  // non-blocking collectives progress inside MPI_Test, so the first 20 ms poll flat out, as
  // MPI_Wait does (a yield there hands an oversubscribed core away for a whole time slice); a
  // longer wait polls every 20 us instead of spinning.
  void wait(MPI_Request* reqs, int n, MPI_Status* status = nullptr) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                      std::chrono::duration<double>(cx.set.timeout_s));
    const auto spin_until = start + std::chrono::milliseconds(20);
    MPI_Status st[2] = {};
    for (unsigned polls = 1;; ++polls) {
      int done = 0, rc;
      if (state().serialise) {
        std::lock_guard<std::mutex> lock(state().call_mu);
        rc = MPI_Testall(n, reqs, &done, st);
      } else {
        rc = MPI_Testall(n, reqs, &done, st);
      }
      if (rc != MPI_SUCCESS) failed(rc, st, n);
      if (done != 0) {
        if (status != nullptr) *status = st[0];
        return;
      }
      if (polls % 64 != 0) continue;
      const auto now = clock::now();
      if (now > deadline) timed_out();
      if (now > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  // An exchange that MPI failed midway (a truncation when sizes differ and the check is off):
  // the communicator is unusable, as after a timeout.
  [[noreturn]] void failed(int rc, const MPI_Status* st, int n, const char* what = nullptr) {
    if (rc == MPI_ERR_IN_STATUS)
      for (int i = 0; i < n; ++i)
        if (st[i].MPI_ERROR != MPI_SUCCESS) {
          rc = st[i].MPI_ERROR;
          break;
        }
    const std::string why = str(where, "MPI failed the exchange", what ? str(" (", what, ")") : "",
                                ": ", mpi_error_text(rc));
    {
      std::lock_guard<std::mutex> lock(state().mu);
      c.broken = why;
    }
    cx.abandon_staging();
    sdk::fail(PCY_ERR_DEVICE, str(why, "; do the ranks disagree on the op, dtype or size? (",
                                  PCY_COLL_CHECK_SETTING,
                                  "=1 names the rank that differs); the "
                                  "communicator is unusable now: end the job on every rank"));
  }
  [[noreturn]] void timed_out() {
    const std::string why =
        str(where, "no answer from the other ranks within ", cx.set.timeout_s, " s (",
            PCY_COLL_TIMEOUT_SETTING,
            "): a rank exited, crashed, or called other ops (another order, dtype or size)");
    {
      std::lock_guard<std::mutex> lock(state().mu); // entry_of reads it under the same lock
      c.broken = why;
    }
    cx.abandon_staging();
    sdk::fail(PCY_ERR_DEVICE,
              str(why,
                  "; the communicator is unusable now: end the job on every rank, fix "
                  "the program, and raise ",
                  PCY_COLL_TIMEOUT_SETTING, " if a rank is only slow"));
  }

  // Every rank compares what it was called with (op, dtype, element count, reduce or root), at the
  // cost of one small allgather; a rank that differs is named on every rank.
  void agree(pcy_dtype d, uint64_t n, int64_t extra) {
    if (c.size == 1) agreed = true; // no other rank to wait for
    if (!cx.set.check || c.size == 1) return;
    const int64_t mine[4] = {static_cast<int64_t>(std::hash<std::string>{}(op)&0x7fffffff),
                             static_cast<int64_t>(d), static_cast<int64_t>(n), extra};
    std::vector<int64_t> all(4 * static_cast<size_t>(c.size));
    MPI_Request r = MPI_REQUEST_NULL;
    mpi(where, "MPI_Iallgather (the argument check)", [&] {
      return MPI_Iallgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, c.comm, &r);
    });
    wait(&r, 1);
    for (int k = 0; k < c.size; ++k) {
      const int64_t* o = &all[4 * static_cast<size_t>(k)];
      if (std::equal(o, o + 4, mine)) continue;
      std::string theirs = o[0] != mine[0]
                               ? std::string("another op")
                               : str(op, "(", sdk::dtype_name(static_cast<pcy_dtype>(o[1])), ", ",
                                     o[2], " elements, ", extra_name(o[3]), ")");
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                str(where, "this rank called ", op, "(", sdk::dtype_name(d), ", ", n, " elements, ",
                    extra_name(extra), ") but rank ", k, " called ", theirs,
                    "; every rank must call the same ops in the same order with the same dtype, "
                    "sizes, reduce and root (set ",
                    PCY_COLL_CHECK_SETTING, "=0 on every rank to skip this check)"));
    }
    agreed = true;
  }
  // `extra` packs what else must agree: (reduce + 1) << 20 | (root + 1), 0 for neither.
  static int64_t extra_of(int64_t reduce, int64_t root) { return (reduce + 1) << 20 | (root + 1); }
  static std::string extra_name(int64_t e) {
    const int64_t reduce = (e >> 20) - 1, root = (e & 0xfffff) - 1;
    std::string s = reduce >= 0 ? str("reduce ", reduce_name(reduce)) : std::string();
    if (root >= 0) s += str(s.empty() ? "" : ", ", "root ", root);
    return s.empty() ? std::string("-") : s;
  }
  int count(uint64_t n) const {
    if (n > static_cast<uint64_t>(INT32_MAX))
      sdk::fail(PCY_ERR_UNSUPPORTED, str(where, n,
                                         " elements: MPI counts stop at 2^31 - 1; "
                                         "split the tensor"));
    return static_cast<int>(n);
  }
};

call begin(coll_context& cx, const sdk::op_args& a, const char* op) {
  comm_entry& c = parenchyma::coll_bundle::entry_of(state(), a.i(0));
  cx.settle(a.queue());
  return call{cx, c, op, str("rank ", c.rank, " of ", c.size, ": ")};
}

void check_reduce(const call& k, int64_t r) { parenchyma::coll_bundle::check_reduce(k.where, r); }
void check_rank(const call& k, int64_t r, const char* name) {
  parenchyma::coll_bundle::check_rank(k.where, k.c.size, r, name);
}

// y[i] /= size (AVG); integers truncate toward zero.
void divide(pcy_dtype d, void* y, size_t n, int size) {
  switch (d) {
  case PCY_DTYPE_F32:
    for (size_t i = 0; i < n; ++i)
      static_cast<float*>(y)[i] /= static_cast<float>(size);
    break;
  case PCY_DTYPE_F64:
    for (size_t i = 0; i < n; ++i)
      static_cast<double*>(y)[i] /= size;
    break;
  case PCY_DTYPE_I32:
    for (size_t i = 0; i < n; ++i)
      static_cast<int32_t*>(y)[i] /= size;
    break;
  case PCY_DTYPE_I64:
    for (size_t i = 0; i < n; ++i)
      static_cast<int64_t*>(y)[i] /= size;
    break;
  default: break;
  }
}

// The reductions, on send (nullptr: in place in recv). `root` < 0: all_reduce; else reduce to
// root (recv written on root only).
void reduce_to(call& k, pcy_dtype d, int64_t reduce, const void* send, void* recv, uint64_t n,
               int root) {
  const int cnt = k.count(n);
  const MPI_Op op = mpi_op(reduce);
  const bool here = root < 0 || root == k.c.rank;
  MPI_Request r = MPI_REQUEST_NULL;
  if (is_half(d)) {
    float* s = k.cx.staging(n);
    to_f32(d, send != nullptr ? send : recv, s, n);
    if (root < 0)
      mpi(k.where, "MPI_Iallreduce",
          [&] { return MPI_Iallreduce(MPI_IN_PLACE, s, cnt, MPI_FLOAT, op, k.c.comm, &r); });
    else
      mpi(k.where, "MPI_Ireduce", [&] {
        return MPI_Ireduce(here ? MPI_IN_PLACE : s, here ? s : nullptr, cnt, MPI_FLOAT, op, root,
                           k.c.comm, &r);
      });
    k.wait(&r, 1);
    if (!here) return;
    if (reduce == PCY_COLL_REDUCE_AVG)
      for (size_t i = 0; i < n; ++i)
        s[i] /= static_cast<float>(k.c.size);
    from_f32(d, s, recv, n);
    return;
  }
  const void* sb = send != nullptr ? send : MPI_IN_PLACE;
  const MPI_Datatype t = mpi_type(d);
  if (root < 0) {
    k.exchange(
        "MPI_Iallreduce",
        [&](MPI_Request* q) { return MPI_Iallreduce(sb, recv, cnt, t, op, k.c.comm, q); },
        "MPI_Allreduce", [&] { return MPI_Allreduce(sb, recv, cnt, t, op, k.c.comm); });
  } else {
    // Off root, MPI_IN_PLACE is not allowed: the send buffer is the data itself.
    const void* s = here ? sb : (send != nullptr ? send : recv);
    void* rb = here ? recv : nullptr;
    k.exchange(
        "MPI_Ireduce",
        [&](MPI_Request* q) { return MPI_Ireduce(s, rb, cnt, t, op, root, k.c.comm, q); },
        "MPI_Reduce", [&] { return MPI_Reduce(s, rb, cnt, t, op, root, k.c.comm); });
  }
  if (here && reduce == PCY_COLL_REDUCE_AVG) divide(d, recv, n, k.c.size);
}

// ---- ops ------------------------------------------------------------------------------------

template <pcy_dtype D> void op_all_reduce(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_reduce_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(2), &y = dc.tensor(3);
  const uint64_t n = dc.elements(x, 2);
  if (dc.elements(y, 3) != n) dc.bad(PCY_ERR_INVALID_ARGUMENT, 3, str("expected ", n, " elements"));
  call k = begin(cx, a, "all_reduce");
  check_reduce(k, a.i(1));
  k.agree(D, n, call::extra_of(a.i(1), -1));
  reduce_to(k, D, a.i(1), cx.ptr(x), cx.ptr(y), n, -1);
}

template <pcy_dtype D> void op_all_reduce_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_reduce_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t n = dc.elements(x, 2);
  call k = begin(cx, a, "all_reduce");
  check_reduce(k, a.i(1));
  k.agree(D, n, call::extra_of(a.i(1), -1));
  reduce_to(k, D, a.i(1), nullptr, cx.ptr(x), n, -1);
}

template <pcy_dtype D> void op_reduce(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(3), &y = dc.tensor(4);
  const uint64_t n = dc.elements(x, 3);
  if (dc.elements(y, 4) != n) dc.bad(PCY_ERR_INVALID_ARGUMENT, 4, str("expected ", n, " elements"));
  call k = begin(cx, a, "reduce");
  check_reduce(k, a.i(1));
  check_rank(k, a.i(2), "root");
  k.agree(D, n, call::extra_of(a.i(1), a.i(2)));
  reduce_to(k, D, a.i(1), cx.ptr(x), cx.ptr(y), n, static_cast<int>(a.i(2)));
}

template <pcy_dtype D> void op_reduce_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(3);
  const uint64_t n = dc.elements(x, 3);
  call k = begin(cx, a, "reduce");
  check_reduce(k, a.i(1));
  check_rank(k, a.i(2), "root");
  k.agree(D, n, call::extra_of(a.i(1), a.i(2)));
  reduce_to(k, D, a.i(1), nullptr, cx.ptr(x), n, static_cast<int>(a.i(2)));
}

template <pcy_dtype D> void op_broadcast(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_broadcast_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t n = dc.elements(x, 2);
  call k = begin(cx, a, "broadcast");
  check_rank(k, a.i(1), "root");
  k.agree(D, n, call::extra_of(-1, a.i(1)));
  const int cnt = k.count(n), root = static_cast<int>(a.i(1));
  void* p = cx.ptr(x);
  k.exchange(
      "MPI_Ibcast",
      [&](MPI_Request* q) { return MPI_Ibcast(p, cnt, mpi_type(D), root, k.c.comm, q); },
      "MPI_Bcast", [&] { return MPI_Bcast(p, cnt, mpi_type(D), root, k.c.comm); });
}

template <pcy_dtype D> void op_all_gather(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_gather_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(1), &y = dc.tensor(2);
  const uint64_t n = dc.elements(x, 1);
  call k = begin(cx, a, "all_gather");
  if (dc.elements(y, 2) != n * static_cast<uint64_t>(k.c.size))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", n * k.c.size, " elements (size x n)"));
  k.agree(D, n, 0);
  const int cnt = k.count(n);
  k.count(n * static_cast<uint64_t>(k.c.size));
  const void* src = cx.ptr(x);
  void* dst = cx.ptr(y);
  const MPI_Datatype t = mpi_type(D);
  k.exchange(
      "MPI_Iallgather",
      [&](MPI_Request* q) { return MPI_Iallgather(src, cnt, t, dst, cnt, t, k.c.comm, q); },
      "MPI_Allgather", [&] { return MPI_Allgather(src, cnt, t, dst, cnt, t, k.c.comm); });
}

template <pcy_dtype D> void op_all_gather_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_gather_inplace_schema> dc(a, D);
  const pcy_tensor& y = dc.tensor(1);
  const uint64_t total = dc.elements(y, 1);
  call k = begin(cx, a, "all_gather");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 1, str(total, " elements, not a multiple of ", k.c.size));
  const uint64_t n = total / static_cast<uint64_t>(k.c.size);
  k.agree(D, n, 0);
  const int cnt = k.count(total) / k.c.size;
  void* dst = cx.ptr(y);
  const MPI_Datatype t = mpi_type(D);
  k.exchange(
      "MPI_Iallgather",
      [&](MPI_Request* q) {
        return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, cnt, t, k.c.comm, q);
      },
      "MPI_Allgather",
      [&] { return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dst, cnt, t, k.c.comm); });
}

// y = block `rank` of the reduction of x (size * n elements); y == nullptr: in place, the result
// goes to block `rank` of x (MPI_IN_PLACE leaves it in block 0: moved).
void reduce_scatter_to(call& k, pcy_dtype d, int64_t reduce, void* x, void* y, uint64_t n) {
  const int cnt = k.count(n);
  const uint64_t total = n * static_cast<uint64_t>(k.c.size);
  k.count(total);
  const size_t es = sdk::dtype_size(d), rank = static_cast<size_t>(k.c.rank);
  void* out = y != nullptr ? y : static_cast<char*>(x) + rank * n * es;
  MPI_Request r = MPI_REQUEST_NULL;
  if (is_half(d)) {
    float* s = k.cx.staging(total);
    to_f32(d, x, s, total);
    mpi(k.where, "MPI_Ireduce_scatter_block", [&] {
      return MPI_Ireduce_scatter_block(MPI_IN_PLACE, s, cnt, MPI_FLOAT, mpi_op(reduce), k.c.comm,
                                       &r);
    });
    k.wait(&r, 1);
    if (reduce == PCY_COLL_REDUCE_AVG)
      for (size_t i = 0; i < n; ++i)
        s[i] /= static_cast<float>(k.c.size);
    from_f32(d, s, out, n);
    return;
  }
  const void* sb = y != nullptr ? x : MPI_IN_PLACE;
  void* rb = y != nullptr ? y : x;
  const MPI_Datatype t = mpi_type(d);
  const MPI_Op op = mpi_op(reduce);
  k.exchange(
      "MPI_Ireduce_scatter_block",
      [&](MPI_Request* q) { return MPI_Ireduce_scatter_block(sb, rb, cnt, t, op, k.c.comm, q); },
      "MPI_Reduce_scatter_block",
      [&] { return MPI_Reduce_scatter_block(sb, rb, cnt, t, op, k.c.comm); });
  if (y == nullptr && rank != 0) std::memmove(out, x, n * es);
  if (reduce == PCY_COLL_REDUCE_AVG) divide(d, out, n, k.c.size);
}

template <pcy_dtype D> void op_reduce_scatter(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_scatter_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(2), &y = dc.tensor(3);
  const uint64_t n = dc.elements(y, 3);
  call k = begin(cx, a, "reduce_scatter");
  if (dc.elements(x, 2) != n * static_cast<uint64_t>(k.c.size))
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", n * k.c.size, " elements (size x n)"));
  check_reduce(k, a.i(1));
  k.agree(D, n, call::extra_of(a.i(1), -1));
  reduce_scatter_to(k, D, a.i(1), cx.ptr(x), cx.ptr(y), n);
}

template <pcy_dtype D> void op_reduce_scatter_inplace(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_reduce_scatter_inplace_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(2);
  const uint64_t total = dc.elements(x, 2);
  call k = begin(cx, a, "reduce_scatter");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str(total, " elements, not a multiple of ", k.c.size));
  const uint64_t n = total / static_cast<uint64_t>(k.c.size);
  check_reduce(k, a.i(1));
  k.agree(D, n, call::extra_of(a.i(1), -1));
  reduce_scatter_to(k, D, a.i(1), cx.ptr(x), nullptr, n);
}

template <pcy_dtype D> void op_all_to_all(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_all_to_all_schema> dc(a, D);
  const pcy_tensor &x = dc.tensor(1), &y = dc.tensor(2);
  const uint64_t total = dc.elements(x, 1);
  if (dc.elements(y, 2) != total)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 2, str("expected ", total, " elements like x"));
  call k = begin(cx, a, "all_to_all");
  if (total % static_cast<uint64_t>(k.c.size) != 0)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 1, str(total, " elements, not a multiple of ", k.c.size));
  const uint64_t n = total / static_cast<uint64_t>(k.c.size);
  k.agree(D, n, 0);
  const int cnt = k.count(total) / k.c.size;
  const void* src = cx.ptr(x);
  void* dst = cx.ptr(y);
  const MPI_Datatype t = mpi_type(D);
  k.exchange(
      "MPI_Ialltoall",
      [&](MPI_Request* q) { return MPI_Ialltoall(src, cnt, t, dst, cnt, t, k.c.comm, q); },
      "MPI_Alltoall", [&] { return MPI_Alltoall(src, cnt, t, dst, cnt, t, k.c.comm); });
}

void check_peer(const call& k, int64_t peer, int64_t tag) {
  check_rank(k, peer, "peer");
  if (peer == k.c.rank)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str(k.where, "argument peer: this rank itself"));
  if (tag < 0 || tag > 32767)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str(k.where, "argument tag: ", tag, " outside 0 .. 32767"));
}

// With the check on, a 2-word header (dtype, count) goes first on the same tag: MPI keeps the
// order of messages between two ranks on one tag, so the receiver checks before it receives.
template <pcy_dtype D> void op_send(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_send_schema> dc(a, D);
  const pcy_tensor& x = dc.tensor(3);
  const uint64_t n = dc.elements(x, 3);
  call k = begin(cx, a, "send");
  check_peer(k, a.i(1), a.i(2));
  const int cnt = k.count(n), peer = static_cast<int>(a.i(1)), tag = static_cast<int>(a.i(2));
  const int64_t head[2] = {static_cast<int64_t>(D), static_cast<int64_t>(n)};
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int nr = 0;
  if (cx.set.check)
    mpi(k.where, "MPI_Isend",
        [&] { return MPI_Isend(head, 2, MPI_INT64_T, peer, tag, k.c.comm, &r[nr++]); });
  mpi(k.where, "MPI_Isend",
      [&] { return MPI_Isend(cx.ptr(x), cnt, mpi_type(D), peer, tag, k.c.comm, &r[nr++]); });
  k.wait(r, nr);
}

template <pcy_dtype D> void op_recv(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_recv_schema> dc(a, D);
  const pcy_tensor& y = dc.tensor(3);
  const uint64_t n = dc.elements(y, 3);
  call k = begin(cx, a, "recv");
  check_peer(k, a.i(1), a.i(2));
  const int cnt = k.count(n), peer = static_cast<int>(a.i(1)), tag = static_cast<int>(a.i(2));
  MPI_Request r = MPI_REQUEST_NULL;
  if (cx.set.check) {
    int64_t head[2] = {0, 0};
    mpi(k.where, "MPI_Irecv",
        [&] { return MPI_Irecv(head, 2, MPI_INT64_T, peer, tag, k.c.comm, &r); });
    k.wait(&r, 1);
    const auto sd = static_cast<pcy_dtype>(head[0]);
    if (sd != D || static_cast<uint64_t>(head[1]) != n) {
      const bool known = sd == PCY_DTYPE_F16 || sd == PCY_DTYPE_BF16 || sd == PCY_DTYPE_F32 ||
                         sd == PCY_DTYPE_F64 || sd == PCY_DTYPE_I32 || sd == PCY_DTYPE_I64;
      if (!known || head[1] < 0 || head[1] > INT32_MAX)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  str(k.where, "rank ", peer, " sent a header this bundle does not know on tag ",
                      tag, " (dtype ", head[0], ", count ", head[1],
                      "); is it a coll send of the same parenchyma version?"));
      // Take the message anyway (into scratch) so the sender completes, then refuse.
      std::vector<char> scratch(static_cast<size_t>(head[1]) * sdk::dtype_size(sd) + 1);
      mpi(k.where, "MPI_Irecv", [&] {
        return MPI_Irecv(scratch.data(), static_cast<int>(head[1]), mpi_type(sd), peer, tag,
                         k.c.comm, &r);
      });
      k.wait(&r, 1);
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                str(k.where, "rank ", peer, " sent ", head[1], " ", sdk::dtype_name(sd),
                    " elements on tag ", tag, ", this rank receives ", n, " ", sdk::dtype_name(D),
                    "; pass a tensor of the sender's dtype and size"));
    }
  }
  MPI_Status st{};
  mpi(k.where, "MPI_Irecv",
      [&] { return MPI_Irecv(cx.ptr(y), cnt, mpi_type(D), peer, tag, k.c.comm, &r); });
  k.wait(&r, 1, &st);
  int got = 0;
  MPI_Get_count(&st, mpi_type(D), &got);
  if (got != cnt)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              str(k.where, "rank ", peer, " sent ", got, " elements, this rank receives ", n,
                  "; pass a tensor of the sender's size"));
}

void op_barrier(coll_context& cx, const sdk::op_args& a) {
  call k = begin(cx, a, "barrier");
  k.agree(PCY_DTYPE_I64, 0, 0);
  MPI_Request r = MPI_REQUEST_NULL;
  mpi(k.where, "MPI_Ibarrier", [&] { return MPI_Ibarrier(k.c.comm, &r); });
  k.wait(&r, 1);
}

// Made on every rank together: MPI starts if needed, the communicator is duplicated
// (MPI_Comm_idup, bounded by the timeout like every op) and the ranks on this host are counted from
// a hash of each rank's processor name.
void op_comm_init(coll_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_comm_init_schema> dc(a, PCY_DTYPE_I64);
  const pcy_tensor& info = dc.tensor(1);
  if (dc.elements(info, 1) != PCY_COLL_INFO_COUNT)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 1, str("expected ", PCY_COLL_INFO_COUNT, " elements"));
  cx.settle(a.queue());
  mpi_state& s = state();
  MPI_Comm base = MPI_COMM_WORLD;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ensure_mpi();
  }
  if (a.i(0) != PCY_COLL_HANDLE_WORLD) {
    const int64_t h = a.i(0);
    std::memcpy(&base, &h, sizeof base);
  }
  comm_entry e;
  std::string where;
  mpi(where, "MPI_Comm_rank", [&] { return MPI_Comm_rank(base, &e.rank); });
  mpi(where, "MPI_Comm_size", [&] { return MPI_Comm_size(base, &e.size); });
  where = str("rank ", e.rank, " of ", e.size, ": ");
  comm_entry scratch_entry = e; // for the waits below, before the entry is listed
  call k{cx, scratch_entry, "comm_init", where};
  MPI_Request r = MPI_REQUEST_NULL;
  mpi(where, "MPI_Comm_idup", [&] { return MPI_Comm_idup(base, &e.comm, &r); });
  k.wait(&r, 1);
  mpi(where, "MPI_Comm_set_errhandler",
      [&] { return MPI_Comm_set_errhandler(e.comm, MPI_ERRORS_RETURN); });
  scratch_entry.comm = e.comm;
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  mpi(where, "MPI_Get_processor_name", [&] { return MPI_Get_processor_name(name, &len); });
  const auto host =
      static_cast<int64_t>(std::hash<std::string>{}(std::string(name, static_cast<size_t>(len))));
  std::vector<int64_t> hosts(static_cast<size_t>(e.size));
  mpi(where, "MPI_Iallgather", [&] {
    return MPI_Iallgather(&host, 1, MPI_INT64_T, hosts.data(), 1, MPI_INT64_T, e.comm, &r);
  });
  k.wait(&r, 1);
  e.local_rank = 0;
  e.local_size = 0;
  for (int i = 0; i < e.size; ++i)
    if (hosts[static_cast<size_t>(i)] == host) {
      if (i < e.rank) ++e.local_rank;
      ++e.local_size;
    }
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.comms.push_back(e);
    id = static_cast<int64_t>(s.comms.size());
  }
  auto* out = static_cast<int64_t*>(cx.ptr(info));
  out[PCY_COLL_INFO_ID] = id;
  out[PCY_COLL_INFO_RANK] = e.rank;
  out[PCY_COLL_INFO_SIZE] = e.size;
  out[PCY_COLL_INFO_LOCAL_RANK] = e.local_rank;
  out[PCY_COLL_INFO_LOCAL_SIZE] = e.local_size;
}

constexpr sdk::bundle_identity identity{"coll_native", PCY_COLL_EXTENSION, "native",
                                        "collectives between processes on the host through MPI"};

class coll_native_bundle : public sdk::bundle_base<identity, coll_context> {
public:
  explicit coll_native_bundle(const pcy_host_services& host) : bundle_base(host) {
    set_.timeout_s = parenchyma::coll_bundle::timeout_setting(settings_, log_, set_.timeout_s);
    if (const char* c = settings_.find(PCY_COLL_CHECK_SETTING)) {
      if (std::strcmp(c, "0") == 0)
        set_.check = false;
      else if (std::strcmp(c, "1") != 0)
        log_.warn(PCY_COLL_CHECK_SETTING, "=", c, " is neither 0 nor 1; the check stays on");
    }
    const std::string lib = mpi_label();
    add_all<PCY_COLL_DTYPES(op_all_reduce)>(pcy_coll_all_reduce_schema, lib + " MPI_Iallreduce");
    add_all<PCY_COLL_DTYPES(op_all_reduce_inplace)>(pcy_coll_all_reduce_inplace_schema,
                                                    lib + " MPI_Iallreduce in place");
    add_all<PCY_COLL_DTYPES(op_broadcast)>(pcy_coll_broadcast_schema, lib + " MPI_Ibcast");
    add_all<PCY_COLL_DTYPES(op_reduce)>(pcy_coll_reduce_schema, lib + " MPI_Ireduce");
    add_all<PCY_COLL_DTYPES(op_reduce_inplace)>(pcy_coll_reduce_inplace_schema,
                                                lib + " MPI_Ireduce in place");
    add_all<PCY_COLL_DTYPES(op_all_gather)>(pcy_coll_all_gather_schema, lib + " MPI_Iallgather");
    add_all<PCY_COLL_DTYPES(op_all_gather_inplace)>(pcy_coll_all_gather_inplace_schema,
                                                    lib + " MPI_Iallgather in place");
    add_all<PCY_COLL_DTYPES(op_reduce_scatter)>(pcy_coll_reduce_scatter_schema,
                                                lib + " MPI_Ireduce_scatter_block");
    add_all<PCY_COLL_DTYPES(op_reduce_scatter_inplace)>(
        pcy_coll_reduce_scatter_inplace_schema, lib + " MPI_Ireduce_scatter_block in place");
    add_all<PCY_COLL_DTYPES(op_all_to_all)>(pcy_coll_all_to_all_schema, lib + " MPI_Ialltoall");
    add_all<PCY_COLL_DTYPES(op_send)>(pcy_coll_send_schema, lib + " MPI_Isend");
    add_all<PCY_COLL_DTYPES(op_recv)>(pcy_coll_recv_schema, lib + " MPI_Irecv");
    table_.add<op_comm_init>(pcy_coll_comm_init_schema, PCY_DTYPE_I64, lib + " MPI_Comm_idup");
    table_.add<op_barrier>(pcy_coll_barrier_schema, PCY_DTYPE_I64, lib + " MPI_Ibarrier");
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    // Native memory handles are the tensors' host pointers; queue_finish settles them.
    sdk::require_slots(*a.framework, name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_queue_finish});
    auto* c = new coll_context;
    c->fw = a.framework;
    c->set = set_;
    return c;
  }

private:
  using fn = void (*)(coll_context&, const sdk::op_args&);
  template <fn F16, fn BF16, fn F32, fn F64, fn I32, fn I64>
  void add_all(const pcy_op_schema& s, const std::string& impl) {
    // f16 / bf16 reductions convert to f32 first; the other ops move them as 16-bit words.
    const bool through_f32 = s.args[1].name == std::string_view("reduce");
    table_.add<F16>(s, PCY_DTYPE_F16, impl + (through_f32 ? " (through f32)" : ""));
    table_.add<BF16>(s, PCY_DTYPE_BF16, impl + (through_f32 ? " (through f32)" : ""));
    table_.add<F32>(s, PCY_DTYPE_F32, impl);
    table_.add<F64>(s, PCY_DTYPE_F64, impl);
    table_.add<I32>(s, PCY_DTYPE_I32, impl);
    table_.add<I64>(s, PCY_DTYPE_I64, impl);
  }
  // "Open MPI v4.1.4" (the library's version string up to its first comma).
  static std::string mpi_label() {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) return "MPI";
    std::string s(v, static_cast<size_t>(len));
    const size_t cut = s.find_first_of(",\n");
    return s.substr(0, cut);
  }
  coll_settings set_;
  sdk::op_table<coll_native_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(coll_native_bundle)
