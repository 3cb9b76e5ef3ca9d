// The coll extension under MPI: every op x dtype x reduction on seeded random data of awkward
// sizes, each result checked against a float64 reference that every rank computes on its own
// from every rank's inputs (each rank can regenerate any rank's data from the seed). Run by
// tests/coll/run_mpi.sh under `mpirun -np N`; exit 0 on every rank = pass.
//
//   coll_matrix             the matrix
//   coll_matrix early-exit  the last rank leaves before an all_reduce: the others must get an
//                           error naming the op and their rank within PARENCHYMA_COLL_TIMEOUT
//   coll_matrix crash       the last rank dies (_Exit(3), no MPI_Finalize) before an all_reduce:
//                           the job must end promptly (mpirun ends it) with a failure status
//   coll_matrix mismatch-nocheck  the same with PARENCHYMA_COLL_CHECK=0: MPI's own failure or the
//                           timeout, as an error naming the op and the rank on every rank
//   coll_matrix fallback    a communicator on the OpenCL backend (no coll bundle there): the ops
//                           run on the native bundle by fallback, the tensors staged through the
//                           host, with the same results (exit 77 where no OpenCL backend exists)
//   coll_matrix mismatch    the ranks call all_reduce with different sizes: every rank must get
//                           an error naming the rank that differs, at once (no timeout)
//   coll_matrix cuda        the matrix on the cuda backend through the NCCL bundle (coll_cuda),
//                           then ops recorded into a CUDA graph and replayed, checked after each
//                           replay against host values written between replays; exit 77 with
//                           "SKIPPED: no CUDA device" / "... no NCCL bundle" where there is none.
//                           One rank per GPU: the id by MPI (under mpirun), by the file that
//                           PARENCHYMA_COLL_RENDEZVOUS names, or one rank alone.
#include <parenchyma/coll.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;
using coll::reduce_op;

int failures = 0;
int my_rank = 0;

template <class... A> void fail(const char* fmt, A... a) {
  if (failures < 30) {
    std::fprintf(stderr, "[rank %d] FAIL: ", my_rank);
    if constexpr (sizeof...(A) == 0)
      std::fputs(fmt, stderr); // no format arguments (-Wformat-security)
    else
      std::fprintf(stderr, fmt, a...);
    std::fprintf(stderr, "\n");
  }
  ++failures;
}

// What the test needs of each dtype: its name, a rounding of a double to it and back, and the
// relative error of one rounding.
template <class T> struct dt;
template <> struct dt<f16> {
  static constexpr const char* name = "f16";
  static constexpr double eps = 1.0 / 1024;
  static f16 make(double v) { return f16(static_cast<float>(v)); }
  static double get(f16 v) { return static_cast<float>(v); }
};
template <> struct dt<bf16> {
  static constexpr const char* name = "bf16";
  static constexpr double eps = 1.0 / 128;
  static bf16 make(double v) { return bf16(static_cast<float>(v)); }
  static double get(bf16 v) { return static_cast<float>(v); }
};
template <> struct dt<float> {
  static constexpr const char* name = "f32";
  static constexpr double eps = 0x1p-23;
  static float make(double v) { return static_cast<float>(v); }
  static double get(float v) { return v; }
};
template <> struct dt<double> {
  static constexpr const char* name = "f64";
  static constexpr double eps = 0x1p-52;
  static double make(double v) { return v; }
  static double get(double v) { return v; }
};
template <> struct dt<int32_t> {
  static constexpr const char* name = "i32";
  static constexpr double eps = 0;
  static int32_t make(double v) { return static_cast<int32_t>(v); }
  static double get(int32_t v) { return v; }
};
template <> struct dt<int64_t> {
  static constexpr const char* name = "i64";
  static constexpr double eps = 0;
  static int64_t make(double v) { return static_cast<int64_t>(v); }
  static double get(int64_t v) { return static_cast<double>(v); }
};
template <class T> constexpr bool is_int = std::is_integral_v<T>;

// The inputs of rank `r` for the case `tag`: n values already rounded to T. Integers lie in
// [-50, 50]; floats in [-1, 1] (prod: [0.5, 1.5], so products stay away from zero and overflow).
template <class T> std::vector<double> inputs(uint64_t tag, int r, size_t n, bool prod) {
  std::mt19937_64 g(0x5eed0000ull ^ (tag * 1315423911ull) ^ (static_cast<uint64_t>(r) << 48));
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(g() >> 11) * 0x1p-53; // [0, 1)
    double x = is_int<T> ? std::floor(u * 101) - 50 : (prod ? 0.5 + u : 2 * u - 1);
    if (is_int<T> && prod) x = std::floor(u * 7) - 3; // small factors: no overflow in i32
    v[i] = dt<T>::get(dt<T>::make(x));
  }
  return v;
}

template <class T> SharedTensor<T> tensor_of(const std::vector<double>& v) {
  SharedTensor<T> t({static_cast<int64_t>(v.size())});
  auto w = t.write_only();
  for (size_t i = 0; i < v.size(); ++i)
    w[i] = dt<T>::make(v[i]);
  return t;
}

template <class T> std::vector<double> values(const SharedTensor<T>& t) {
  auto r = t.read();
  std::vector<double> v(r.size());
  for (size_t i = 0; i < r.size(); ++i)
    v[i] = dt<T>::get(r[i]);
  return v;
}

// The reference reduction of element i over every rank's inputs, and its error bound.
struct expected {
  double value, bound;
};
template <class T>
expected reference(const std::vector<std::vector<double>>& in, size_t i, reduce_op op) {
  const int size = static_cast<int>(in.size());
  double acc = in[0][i], mag = std::fabs(in[0][i]);
  for (int r = 1; r < size; ++r) {
    const double x = in[static_cast<size_t>(r)][i];
    switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: acc += x; break;
    case reduce_op::prod: acc *= x; break;
    case reduce_op::min: acc = std::min(acc, x); break;
    case reduce_op::max: acc = std::max(acc, x); break;
    }
    mag = op == reduce_op::prod ? mag * std::fabs(x) : mag + std::fabs(x);
  }
  if (op == reduce_op::avg) {
    if (is_int<T>)
      acc = std::trunc(acc / size); // C's division truncates toward zero
    else
      acc /= size, mag /= size;
  }
  if (is_int<T> || op == reduce_op::min || op == reduce_op::max) return {acc, 0};
  // f16 / bf16 reduce in f32 and round once; the others reduce in their own dtype.
  const double work_eps = dt<T>::eps >= 0x1p-11 ? 0x1p-23 : dt<T>::eps;
  double bound = 2 * work_eps * (size + 1) * mag;
  if (dt<T>::eps >= 0x1p-11) bound += dt<T>::eps * (std::fabs(acc) + bound) + 0x1p-24;
  return {acc, bound};
}

template <class T>
void compare(const char* what, const std::vector<double>& got, const std::vector<double>& want,
             const std::vector<double>& bound, size_t n) {
  if (got.size() != want.size()) {
    fail("%s %s n=%zu: %zu values, expected %zu", what, dt<T>::name, n, got.size(), want.size());
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double b = bound.empty() ? 0 : bound[i];
    if (!(std::fabs(got[i] - want[i]) <= b)) {
      fail("%s %s n=%zu: element %zu is %.17g, expected %.17g (bound %.3g)", what, dt<T>::name, n,
           i, got[i], want[i], b);
      return;
    }
  }
}

const reduce_op all_ops[] = {reduce_op::sum, reduce_op::prod, reduce_op::min, reduce_op::max,
                             reduce_op::avg};
const char* op_name(reduce_op op) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg"};
  return names[static_cast<int>(op)];
}

template <class T> void run_dtype(const coll::Communicator& comm) {
  const int size = comm.size(), rank = comm.rank();
  const size_t sizes[] = {1, 7, 1003};
  uint64_t tag = std::hash<std::string>{}(dt<T>::name);
  auto everyone = [&](size_t n, bool prod) {
    std::vector<std::vector<double>> in;
    for (int r = 0; r < size; ++r)
      in.push_back(inputs<T>(tag, r, n, prod));
    return in;
  };
  char what[96];
  for (size_t n : sizes) {
    // all_reduce (out of place and in place), reduce (both forms), every reduction.
    for (reduce_op op : all_ops) {
      ++tag;
      const auto in = everyone(n, op == reduce_op::prod);
      std::vector<double> want(n), bound(n);
      for (size_t i = 0; i < n; ++i) {
        const expected e = reference<T>(in, i, op);
        want[i] = e.value;
        bound[i] = e.bound;
      }
      const auto& mine = in[static_cast<size_t>(rank)];
      {
        auto x = tensor_of<T>(mine);
        SharedTensor<T> y({static_cast<int64_t>(n)});
        comm.all_reduce(x, y, op);
        std::snprintf(what, sizeof what, "all_reduce %s", op_name(op));
        compare<T>(what, values(y), want, bound, n);
        compare<T>("all_reduce leaves x", values(x), mine, {}, n);
        comm.all_reduce(x, op);
        std::snprintf(what, sizeof what, "all_reduce in place %s", op_name(op));
        compare<T>(what, values(x), want, bound, n);
      }
      {
        const int root = 1 % size;
        auto x = tensor_of<T>(mine);
        std::vector<double> sentinel(n, 42);
        auto y = tensor_of<T>(sentinel);
        comm.reduce(x, y, op, root);
        std::snprintf(what, sizeof what, "reduce %s root %d", op_name(op), root);
        if (rank == root)
          compare<T>(what, values(y), want, bound, n);
        else
          compare<T>(what, values(y), sentinel, {}, n); // untouched off root
        comm.reduce(x, op, root);
        std::snprintf(what, sizeof what, "reduce in place %s root %d", op_name(op), root);
        compare<T>(what, values(x), rank == root ? want : mine,
                   rank == root ? bound : std::vector<double>{}, n);
      }
      {
        // reduce_scatter: x holds size blocks of n; y = block `rank` of the reduction.
        ++tag;
        std::vector<std::vector<double>> big;
        for (int r = 0; r < size; ++r)
          big.push_back(inputs<T>(tag, r, n * static_cast<size_t>(size), op == reduce_op::prod));
        std::vector<double> w(n), b(n);
        for (size_t i = 0; i < n; ++i) {
          const expected e = reference<T>(big, static_cast<size_t>(rank) * n + i, op);
          w[i] = e.value;
          b[i] = e.bound;
        }
        auto x = tensor_of<T>(big[static_cast<size_t>(rank)]);
        SharedTensor<T> y({static_cast<int64_t>(n)});
        comm.reduce_scatter(x, y, op);
        std::snprintf(what, sizeof what, "reduce_scatter %s", op_name(op));
        compare<T>(what, values(y), w, b, n);
        compare<T>("reduce_scatter leaves x", values(x), big[static_cast<size_t>(rank)], {}, n);
        comm.reduce_scatter(x, op); // in place: block `rank` of x
        const auto all = values(x);
        const auto at = all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * n);
        std::snprintf(what, sizeof what, "reduce_scatter in place %s", op_name(op));
        compare<T>(what, std::vector<double>(at, at + static_cast<std::ptrdiff_t>(n)), w, b, n);
      }
    }
    // broadcast from the last rank and from rank 0.
    for (int root : {size - 1, 0}) {
      ++tag;
      const auto in = everyone(n, false);
      SharedTensor<T> x({static_cast<int64_t>(n)});
      if (rank == root) x = tensor_of<T>(in[static_cast<size_t>(root)]);
      comm.broadcast(x, root);
      std::snprintf(what, sizeof what, "broadcast root %d", root);
      compare<T>(what, values(x), in[static_cast<size_t>(root)], {}, n);
    }
    // all_gather, out of place and in place.
    {
      ++tag;
      const auto in = everyone(n, false);
      std::vector<double> want;
      for (const auto& v : in)
        want.insert(want.end(), v.begin(), v.end());
      auto x = tensor_of<T>(in[static_cast<size_t>(rank)]);
      SharedTensor<T> y({static_cast<int64_t>(n * static_cast<size_t>(size))});
      comm.all_gather(x, y);
      compare<T>("all_gather", values(y), want, {}, n);
      std::vector<double> start(n * static_cast<size_t>(size), -7);
      std::copy(in[static_cast<size_t>(rank)].begin(), in[static_cast<size_t>(rank)].end(),
                start.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * n));
      auto z = tensor_of<T>(start);
      comm.all_gather(z);
      compare<T>("all_gather in place", values(z), want, {}, n);
    }
    // all_to_all: block j of my y = block `rank` of rank j's x.
    {
      ++tag;
      std::vector<std::vector<double>> big;
      for (int r = 0; r < size; ++r)
        big.push_back(inputs<T>(tag, r, n * static_cast<size_t>(size), false));
      std::vector<double> want;
      for (int j = 0; j < size; ++j) {
        const auto& v = big[static_cast<size_t>(j)];
        const auto at = v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * n);
        want.insert(want.end(), at, at + static_cast<std::ptrdiff_t>(n));
      }
      auto x = tensor_of<T>(big[static_cast<size_t>(rank)]);
      SharedTensor<T> y({static_cast<int64_t>(n * static_cast<size_t>(size))});
      comm.all_to_all(x, y);
      compare<T>("all_to_all", values(y), want, {}, n);
    }
    // send / recv around the ring; even ranks send first, odd ranks receive first (each call
    // returns when its message is through, as MPI_Send / MPI_Recv).
    if (size > 1) {
      ++tag;
      const auto in = everyone(n, false);
      const int to = (rank + 1) % size, from = (rank + size - 1) % size;
      auto x = tensor_of<T>(in[static_cast<size_t>(rank)]);
      SharedTensor<T> y({static_cast<int64_t>(n)});
      const int mtag = static_cast<int>(n % 1000);
      if (rank % 2 == 0) {
        comm.send(x, to, mtag);
        comm.recv(y, from, mtag);
      } else {
        comm.recv(y, from, mtag);
        comm.send(x, to, mtag);
      }
      compare<T>("send/recv", values(y), in[static_cast<size_t>(from)], {}, n);
    }
    comm.barrier();
  }
}

int matrix(const coll::Communicator& comm) {
  run_dtype<f16>(comm);
  run_dtype<bf16>(comm);
  run_dtype<float>(comm);
  run_dtype<double>(comm);
  run_dtype<int32_t>(comm);
  run_dtype<int64_t>(comm);
  // An empty tensor still synchronises.
  SharedTensor<float> e({0});
  e.write_only();
  comm.all_reduce(e);
  comm.barrier();
  if (failures == 0)
    std::printf("[rank %d of %d] coll matrix: every op x dtype x size passed\n", comm.rank(),
                comm.size());
  return failures == 0 ? 0 : 1;
}

// The last rank leaves; the others must fail with an error that names the op and their rank
// within the timeout (plus a margin), never hang.
int early_exit(const coll::Communicator& comm) {
  comm.barrier();
  if (comm.rank() == comm.size() - 1) {
    std::printf("[rank %d] leaving early on purpose\n", comm.rank());
    return 0;
  }
  SharedTensor<float> x({1003});
  for (auto& v : x.write_only())
    v = 1;
  const auto start = std::chrono::steady_clock::now();
  try {
    comm.all_reduce(x);
    fail("all_reduce with a rank gone returned without an error");
    return 1;
  } catch (const error& e) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[rank %d] after %.1f s: %s\n", comm.rank(), s, e.what());
    const std::string m = e.what();
    const std::string me = "rank " + std::to_string(comm.rank());
    if (m.find("all_reduce") == std::string::npos || m.find(me) == std::string::npos ||
        m.find("PARENCHYMA_COLL_TIMEOUT") == std::string::npos)
      fail("the error does not name the op, this rank and the timeout setting: %s", e.what());
    if (s > 60) fail("the error took %.1f s", s);
  }
  // The communicator is broken now: the next op fails at once.
  try {
    comm.barrier();
    fail("an op on a broken communicator returned without an error");
  } catch (const error& e) {
    if (std::string(e.what()).find("broke earlier") == std::string::npos)
      fail("unexpected error on the broken communicator: %s", e.what());
  }
  return failures == 0 ? 0 : 1;
}

// Different sizes with the cross-rank check off: MPI finds it (a truncation) or the timeout does;
// either way an error on every rank, then the communicator refuses every op at once.
int mismatch_nocheck(const coll::Communicator& comm) {
  SharedTensor<float> x({7 + comm.rank() * 1000});
  for (auto& v : x.write_only())
    v = 1;
  const auto start = std::chrono::steady_clock::now();
  try {
    comm.all_reduce(x);
    fail("all_reduce with different sizes and no check returned without an error");
  } catch (const error& e) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[rank %d] after %.1f s: %s\n", comm.rank(), s, e.what());
    const std::string m = e.what();
    if (m.find("all_reduce") == std::string::npos ||
        m.find("rank " + std::to_string(comm.rank())) == std::string::npos)
      fail("the error does not name the op and this rank: %s", e.what());
  }
  try {
    comm.barrier();
    fail("an op on a broken communicator returned without an error");
  } catch (const error& e) {
    if (std::string(e.what()).find("broke earlier") == std::string::npos)
      fail("unexpected error on the broken communicator: %s", e.what());
  }
  return failures == 0 ? 0 : 1;
}

// The last rank dies without a word; mpirun sees it and ends the job (the others never return).
int crash(const coll::Communicator& comm) {
  comm.barrier();
  if (comm.rank() == comm.size() - 1) {
    std::printf("[rank %d] dying on purpose\n", comm.rank());
    std::fflush(stdout);
    std::_Exit(3);
  }
  SharedTensor<float> x({1003});
  for (auto& v : x.write_only())
    v = 1;
  try {
    comm.all_reduce(x);
  } catch (const error& e) {
    std::printf("[rank %d] %s\n", comm.rank(), e.what());
  }
  return 1; // a failure either way: the job must not succeed
}

// Different sizes on different ranks: every rank gets an error naming the other's call.
int mismatch(const coll::Communicator& comm) {
  const int64_t n = 7 + comm.rank();
  SharedTensor<double> x({n});
  for (auto& v : x.write_only())
    v = 1;
  try {
    comm.all_reduce(x);
    fail("all_reduce with different sizes on the ranks returned without an error");
  } catch (const error& e) {
    std::printf("[rank %d] %s\n", comm.rank(), e.what());
    const std::string m = e.what();
    if (m.find("all_reduce") == std::string::npos || m.find("elements") == std::string::npos ||
        m.find(comm.rank() == 0 ? "rank 1 called" : "rank 0 called") == std::string::npos)
      fail("the error does not name the op, the sizes and the other rank: %s", e.what());
  }
  comm.barrier(); // still usable: the check refused before any data moved
  // send / recv of different sizes: the receiver refuses, naming the sender and both sizes; the
  // sender completes (the receiver takes the message into scratch first).
  if (comm.rank() == 0) {
    SharedTensor<float> s({7});
    for (auto& v : s.write_only())
      v = 2;
    comm.send(s, 1, 5);
  } else if (comm.rank() == 1) {
    SharedTensor<float> r({8});
    try {
      comm.recv(r, 0, 5);
      fail("recv of 8 elements from a send of 7 returned without an error");
    } catch (const error& e) {
      std::printf("[rank %d] %s\n", comm.rank(), e.what());
      const std::string m = e.what();
      if (m.find("rank 0 sent 7") == std::string::npos || m.find("receives 8") == std::string::npos)
        fail("the recv error does not name the sender and both sizes: %s", e.what());
    }
  }
  comm.barrier();
  return failures == 0 ? 0 : 1;
}

} // namespace

// A communicator on a backend whose framework has no coll bundle: every op falls back to the
// native bundle (the fallback policy: allow here), the data moving between the device and host.
int fallback() {
  std::unique_ptr<Backend> ocl;
  try {
    ocl = std::make_unique<Backend>("opencl");
  } catch (const error& e) {
    std::printf("SKIPPED: no OpenCL backend here (%s)\n", e.what());
    return 77;
  }
  coll::Communicator comm(*ocl);
  my_rank = comm.rank();
  const int size = comm.size();
  SharedTensor<float> x({1003}), g({1003 * static_cast<int64_t>(size)});
  {
    auto w = x.write_only();
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<float>(comm.rank() * 10000 + static_cast<int>(i));
  }
  x.read(*ocl); // a copy on the OpenCL device too, so the op's sync has a device slot to consider
  comm.all_gather(x, g);
  comm.all_reduce(x, reduce_op::max);
  const auto r = x.read();
  const auto gr = g.read();
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] != static_cast<float>((size - 1) * 10000 + static_cast<int>(i))) {
      fail("fallback all_reduce max: element %zu is %g", i, static_cast<double>(r[i]));
      break;
    }
  for (size_t i = 0; i < gr.size(); ++i)
    if (gr[i] !=
        static_cast<float>(static_cast<int>(i / 1003) * 10000 + static_cast<int>(i % 1003))) {
      fail("fallback all_gather: element %zu is %g", i, static_cast<double>(gr[i]));
      break;
    }
  comm.barrier();
  if (failures == 0)
    std::printf("[rank %d of %d] coll on %s by fallback: passed\n", comm.rank(), size,
                ocl->name().c_str());
  return failures == 0 ? 0 : 1;
}

// Ops recorded into a graph on the cuda backend, replayed twice with new host inputs between
// the replays: each replay must give the outputs of the inputs it found (so the ops really ran
// in the replay, on the data then current). out-of-place ops, so even one rank moves data.
int cuda_graph(const coll::Communicator& comm) {
  const int size = comm.size(), rank = comm.rank();
  const int64_t n = 1003;
  SharedTensor<float> x({n}), sum({n}), gathered({n * size}), scattered({n});
  SharedTensor<float> xs({n * size}), a2a({n * size});
  SharedTensor<f16> h({n}), havg({n});
  auto fill = [&](int round) {
    auto xv = x.write_only();
    auto hv = h.write_only();
    for (int64_t i = 0; i < n; ++i) {
      xv[static_cast<size_t>(i)] = static_cast<float>(round * 1000 + rank * 7 + i % 13);
      hv[static_cast<size_t>(i)] = f16(static_cast<float>(round + rank + i % 5));
    }
    auto bv = xs.write_only();
    for (int64_t i = 0; i < n * size; ++i)
      bv[static_cast<size_t>(i)] = static_cast<float>(round * 100 + rank + i % 11);
  };
  // An op that needs workspace (f16 avg: through f32) runs once before recording, as for every
  // op (docs/graphs.md): a capture cannot allocate, and the workspace stays once grown.
  fill(0);
  comm.all_reduce(h, havg, reduce_op::avg);
  // Outputs start as sentinels (the graph must overwrite them).
  for (auto* t : {&sum, &gathered, &scattered, &a2a})
    for (auto& v : t->write_only())
      v = -12345;
  for (auto& v : havg.write_only())
    v = f16(-1.0f);
  fill(0);
  Graph g = Graph::record(comm.backend(), [&] {
    comm.all_reduce(x, sum, reduce_op::sum);
    comm.all_reduce(h, havg, reduce_op::avg); // through f32: our kernels in the graph too
    comm.all_gather(x, gathered);
    comm.reduce_scatter(xs, scattered, reduce_op::max);
    comm.all_to_all(xs, a2a);
  });
  std::printf("[rank %d] recorded %zu coll ops into a graph\n", rank, g.op_count());
  for (int round = 1; round <= 2; ++round) {
    fill(round);
    g.replay();
    const auto s = sum.read(), ga = gathered.read(), sc = scattered.read(), aa = a2a.read();
    const auto hv = havg.read();
    for (int64_t i = 0; i < n; ++i) {
      double want = 0, hw = 0;
      for (int r = 0; r < size; ++r) {
        want += round * 1000 + r * 7 + i % 13;
        hw += round + r + i % 5;
      }
      if (s[static_cast<size_t>(i)] != static_cast<float>(want))
        fail("graph replay %d: all_reduce sum[%lld] is %g, expected %g", round,
             static_cast<long long>(i), static_cast<double>(s[static_cast<size_t>(i)]), want);
      const float hwant = static_cast<float>(f16(static_cast<float>(hw / size)));
      if (static_cast<float>(hv[static_cast<size_t>(i)]) != hwant)
        fail("graph replay %d: f16 all_reduce avg[%lld] is %g, expected %g", round,
             static_cast<long long>(i),
             static_cast<double>(static_cast<float>(hv[static_cast<size_t>(i)])),
             static_cast<double>(hwant));
      double mx = -1e30;
      for (int r = 0; r < size; ++r)
        mx = std::max<double>(mx, round * 100 + r + (rank * n + i) % 11);
      if (sc[static_cast<size_t>(i)] != static_cast<float>(mx))
        fail("graph replay %d: reduce_scatter max[%lld] is %g, expected %g", round,
             static_cast<long long>(i), static_cast<double>(sc[static_cast<size_t>(i)]), mx);
    }
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; ++i) {
        const size_t at = static_cast<size_t>(r * n + i);
        const double g_want = round * 1000 + r * 7 + i % 13;
        if (ga[at] != static_cast<float>(g_want))
          fail("graph replay %d: all_gather[%zu] is %g, expected %g", round, at,
               static_cast<double>(ga[at]), g_want);
        const double a_want = round * 100 + r + (rank * n + i) % 11; // block rank of rank r's xs
        if (aa[at] != static_cast<float>(a_want))
          fail("graph replay %d: all_to_all[%zu] is %g, expected %g", round, at,
               static_cast<double>(aa[at]), a_want);
      }
  }
  // barrier waits on the host: refused while recording, with a message that says so.
  try {
    Graph::record(comm.backend(), [&] { comm.barrier(); });
    fail("recording a barrier into a graph did not fail");
  } catch (const error& e) {
    if (std::string(e.what()).find("graph") == std::string::npos)
      fail("the refused barrier's error does not say why: %s", e.what());
  }
  comm.barrier();
  if (failures == 0)
    std::printf("[rank %d of %d] coll on cuda in a graph: 2 replays passed\n", rank, size);
  return failures == 0 ? 0 : 1;
}

int cuda(bool graph_only) {
  std::unique_ptr<Backend> gpu;
  try {
    gpu = std::make_unique<Backend>("cuda");
  } catch (const std::exception& e) {
    std::printf("SKIPPED: no CUDA device (%s)\n", e.what());
    return 77;
  }
  if (!coll::Communicator::uses_unique_id(*gpu)) {
    std::string route = "nowhere";
    try {
      const OpRoute r = gpu->route(ext::op_key<pcy_coll_all_reduce_schema>(PCY_DTYPE_F32));
      route = r.bundle + " on " + r.framework;
    } catch (const std::exception& e) {
      route = e.what();
    }
    std::printf("SKIPPED: the cuda backend has no NCCL coll bundle (coll.all_reduce runs on %s; "
                "is libnccl.so.2 missing? parenchyma-info says why)\n",
                route.c_str());
    return 77;
  }
  coll::Communicator comm(*gpu);
  my_rank = comm.rank();
  const OpRoute r = gpu->route(ext::op_key<pcy_coll_all_reduce_schema>(PCY_DTYPE_F32));
  std::printf("[rank %d of %d] coll on %s: %s (%s)\n", comm.rank(), comm.size(),
              gpu->name().c_str(), r.bundle.c_str(), r.implementation.c_str());
  if (r.fallback || r.bundle.find("coll_cuda") == std::string::npos) {
    fail("coll.all_reduce on cuda runs on %s, not the NCCL bundle", r.bundle.c_str());
    return 1;
  }
  if (!graph_only && matrix(comm) != 0) return 1;
  return cuda_graph(comm);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "matrix";
  if (mode == "cuda" || mode == "cuda-graph") {
    try {
      return cuda(mode == "cuda-graph");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] FAIL: %s\n", my_rank, e.what());
      return 1;
    }
  }
  if (mode == "fallback") {
    try {
      return fallback();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] FAIL: %s\n", my_rank, e.what());
      return 1;
    }
  }
  try {
    Backend b;
    coll::Communicator comm(b);
    my_rank = comm.rank();
    if (mode == "early-exit") return early_exit(comm);
    if (mode == "mismatch") return mismatch(comm);
    if (mode == "crash") return crash(comm);
    if (mode == "mismatch-nocheck") return mismatch_nocheck(comm);
    return matrix(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", my_rank, e.what());
    return 1;
  }
}
