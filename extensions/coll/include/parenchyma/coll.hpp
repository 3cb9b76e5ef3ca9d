// parenchyma::coll: collectives (all_reduce, broadcast, reduce, all_gather, reduce_scatter,
// all_to_all, send/recv, barrier) between the processes of an MPI job, on SharedTensors. Header
// only, over the core's extension kit; the coll bundles do the work (the native one over MPI), so
// neither this header nor the core includes or links MPI. docs/distributed.md is the guide; the
// op semantics are in parenchyma/abi/ext/pcy_coll.h.
//
//   parenchyma::Backend backend;
//   parenchyma::coll::Communicator comm(backend);        // MPI_COMM_WORLD; MPI_Init if needed
//   comm.all_reduce(grad, parenchyma::coll::reduce_op::avg);  // in place, on every rank
#pragma once

#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/extension.hpp>
#include <parenchyma/registry.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>

namespace parenchyma::coll {

enum class reduce_op : int64_t {
  sum = PCY_COLL_REDUCE_SUM,
  prod = PCY_COLL_REDUCE_PROD,
  min = PCY_COLL_REDUCE_MIN,
  max = PCY_COLL_REDUCE_MAX,
  avg = PCY_COLL_REDUCE_AVG
};

// The dtypes every coll op takes.
inline constexpr std::initializer_list<pcy_dtype> dtypes = {
    PCY_DTYPE_F16, PCY_DTYPE_BF16, PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I32, PCY_DTYPE_I64};

// The id an engine started from a unique id (NCCL) makes its communicators from.
using unique_id_t = std::array<int64_t, PCY_COLL_UNIQUE_ID_WORDS>;

// A group of ranks (processes) that run collectives together, on one backend. Making one is
// collective: every rank of the MPI communicator constructs it. Copies share the communicator;
// it lives until the process ends (MPI_Finalize).
//
// On a backend whose coll bundle starts from a unique id (NCCL on cuda: uses_unique_id(b)), rank
// 0 makes the id and the others get it through MPI (a communicator over the same ranks on the
// native backend, its broadcast), or through a file (rendezvous()), or from the program
// (from_unique_id()); docs/distributed.md, "NCCL on CUDA".
class Communicator {
public:
  // Over MPI_COMM_WORLD. On a unique-id backend: a file rendezvous when PARENCHYMA_COLL_RENDEZVOUS
  // names a file (with PARENCHYMA_COLL_RANK and PARENCHYMA_COLL_SIZE), else through MPI when the
  // MPI bundle is present, else a job of one rank (refused when a launcher's environment says
  // there are more).
  explicit Communicator(const Backend& b) : b_(b) { init(PCY_COLL_HANDLE_WORLD); }

  // Whether the backend's own coll bundle makes its communicators from a unique id (NCCL). Read
  // from the load report (binds nothing: no other framework's context is made to answer).
  static bool uses_unique_id(const Backend& b) { return served_here(b, "unique_id"); }
  // A new unique id, made by the backend's bundle (call it on the rank that will be rank 0).
  static unique_id_t unique_id(const Backend& b) {
    SharedTensor<int64_t> uid({PCY_COLL_UNIQUE_ID_WORDS});
    ext::invoke<pcy_coll_unique_id_schema>(b, PCY_DTYPE_I64, {OpArg::out(uid)});
    const auto v = uid.read();
    unique_id_t id{};
    std::copy(v.begin(), v.end(), id.begin());
    return id;
  }
  // Collective over the `size` processes that pass the same id, each its own rank. local_rank /
  // local_size < 0: the bundle counts the ranks on this host itself.
  static Communicator from_unique_id(const Backend& b, const unique_id_t& id, int rank, int size,
                                     int local_rank = -1, int local_size = -1) {
    Communicator c(b, no_init{});
    c.join(id, rank, size, local_rank, local_size);
    return c;
  }
  // File rendezvous, without MPI: rank 0 makes the id and writes it to `path` (a file on a file
  // system every rank sees), the others poll for it for up to PARENCHYMA_COLL_TIMEOUT seconds;
  // rank 0 removes it once every rank has joined. A file left by a job that failed first is
  // replaced by rank 0, but a rank that read it before would join a dead id (and time out).
  static Communicator rendezvous(const Backend& b, const std::string& path, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size)
      throw error(errc::invalid_argument, "coll.comm_init_rank",
                  "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                      ": pass 0 <= rank < size");
    if (rank != 0) return from_unique_id(b, read_id(path, rank), rank, size);
    const unique_id_t id = unique_id(b);
    write_id(path, id);
    try {
      Communicator c = from_unique_id(b, id, rank, size);
      std::remove(path.c_str()); // every rank has joined, so has read it: the path is free again
      return c;
    } catch (...) {
      std::remove(path.c_str());
      throw;
    }
  }

  // Over a communicator of the program's own (an MPI_Comm, passed by value; any MPI whose
  // MPI_Comm is a pointer or an integer of at most 8 bytes): this header needs no mpi.h.
  template <class MpiComm> static Communicator from_mpi(const Backend& b, const MpiComm& comm) {
    static_assert(std::is_trivially_copyable_v<MpiComm> && sizeof(MpiComm) <= sizeof(int64_t),
                  "from_mpi takes an MPI_Comm (a pointer or an integer)");
    int64_t handle = 0;
    std::memcpy(&handle, &comm, sizeof comm);
    if (handle == PCY_COLL_HANDLE_WORLD)
      throw error(errc::invalid_argument, "coll.comm_init",
                  "the MPI_Comm's bytes are all zero (MPI_COMM_NULL?); pass a valid communicator");
    return Communicator(b, handle);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // The rank among the ranks on this host, and how many there are: the device index to use
  // (docs/distributed.md, "Ranks and devices").
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }
  const Backend& backend() const noexcept { return b_; }

  // y = op over ranks of x, on every rank (x, y: the same element count, distinct).
  void all_reduce(const TensorStorage& x, TensorStorage& y, reduce_op op = reduce_op::sum) const {
    ext::checker c(pcy_coll_all_reduce_schema, x, "x", dtypes);
    c.same_dtype(y, "y", "x");
    same_size(pcy_coll_all_reduce_schema, y, "y", x.size(), "like x");
    c.distinct(x, "x", y, "y");
    c.written(x, "x");
    check_op(pcy_coll_all_reduce_schema, op);
    ext::invoke<pcy_coll_all_reduce_schema>(b_, c.dtype(),
                                            {OpArg::integer(id_),
                                             OpArg::integer(static_cast<int64_t>(op)), OpArg::in(x),
                                             OpArg::out(y)});
  }
  // x = op over ranks of x, on every rank.
  void all_reduce(TensorStorage& x, reduce_op op = reduce_op::sum) const {
    ext::checker c(pcy_coll_all_reduce_inplace_schema, x, "x", dtypes);
    c.written(x, "x");
    check_op(pcy_coll_all_reduce_inplace_schema, op);
    ext::invoke<pcy_coll_all_reduce_inplace_schema>(
        b_, c.dtype(),
        {OpArg::integer(id_), OpArg::integer(static_cast<int64_t>(op)), OpArg::inout(x)});
  }
  // x = root's x, on every rank (read on root only).
  void broadcast(TensorStorage& x, int root) const {
    ext::checker c(pcy_coll_broadcast_schema, x, "x", dtypes);
    check_rank(pcy_coll_broadcast_schema, root, "root");
    if (root == rank_) c.written(x, "x");
    ext::invoke<pcy_coll_broadcast_schema>(b_, c.dtype(),
                                           {OpArg::integer(id_), OpArg::integer(root),
                                            root == rank_ ? OpArg::inout(x) : OpArg::out(x)});
  }
  // root's y = op over ranks of x (y: x's element count on every rank; untouched off root).
  void reduce(const TensorStorage& x, TensorStorage& y, reduce_op op, int root) const {
    ext::checker c(pcy_coll_reduce_schema, x, "x", dtypes);
    c.same_dtype(y, "y", "x");
    same_size(pcy_coll_reduce_schema, y, "y", x.size(), "like x");
    c.distinct(x, "x", y, "y");
    c.written(x, "x");
    check_op(pcy_coll_reduce_schema, op);
    check_rank(pcy_coll_reduce_schema, root, "root");
    const bool keep = root != rank_ && y.initialized();
    ext::invoke<pcy_coll_reduce_schema>(
        b_, c.dtype(),
        {OpArg::integer(id_), OpArg::integer(static_cast<int64_t>(op)), OpArg::integer(root),
         OpArg::in(x), keep ? OpArg::inout(y) : OpArg::out(y)});
  }
  // root's x = op over ranks of x; x unchanged elsewhere.
  void reduce(TensorStorage& x, reduce_op op, int root) const {
    ext::checker c(pcy_coll_reduce_inplace_schema, x, "x", dtypes);
    c.written(x, "x");
    check_op(pcy_coll_reduce_inplace_schema, op);
    check_rank(pcy_coll_reduce_inplace_schema, root, "root");
    ext::invoke<pcy_coll_reduce_inplace_schema>(b_, c.dtype(),
                                                {OpArg::integer(id_),
                                                 OpArg::integer(static_cast<int64_t>(op)),
                                                 OpArg::integer(root), OpArg::inout(x)});
  }
  // y = every rank's x, in rank order (y: size() times x's element count).
  void all_gather(const TensorStorage& x, TensorStorage& y) const {
    ext::checker c(pcy_coll_all_gather_schema, x, "x", dtypes);
    c.same_dtype(y, "y", "x");
    same_size(pcy_coll_all_gather_schema, y, "y", x.size() * static_cast<uint64_t>(size_),
              "(size() times x's)");
    c.distinct(x, "x", y, "y");
    c.written(x, "x");
    ext::invoke<pcy_coll_all_gather_schema>(b_, c.dtype(),
                                            {OpArg::integer(id_), OpArg::in(x), OpArg::out(y)});
  }
  // In place: each rank's input is its block of y (block rank(), y.size() / size() elements).
  void all_gather(TensorStorage& y) const {
    ext::checker c(pcy_coll_all_gather_inplace_schema, y, "y", dtypes);
    divisible(pcy_coll_all_gather_inplace_schema, y, "y");
    c.written(y, "y");
    ext::invoke<pcy_coll_all_gather_inplace_schema>(b_, c.dtype(),
                                                    {OpArg::integer(id_), OpArg::inout(y)});
  }
  // y = block rank() of op over ranks of x (x: size() times y's element count).
  void reduce_scatter(const TensorStorage& x, TensorStorage& y,
                      reduce_op op = reduce_op::sum) const {
    ext::checker c(pcy_coll_reduce_scatter_schema, x, "x", dtypes);
    c.same_dtype(y, "y", "x");
    same_size(pcy_coll_reduce_scatter_schema, x, "x", y.size() * static_cast<uint64_t>(size_),
              "(size() times y's)");
    c.distinct(x, "x", y, "y");
    c.written(x, "x");
    check_op(pcy_coll_reduce_scatter_schema, op);
    ext::invoke<pcy_coll_reduce_scatter_schema>(b_, c.dtype(),
                                                {OpArg::integer(id_),
                                                 OpArg::integer(static_cast<int64_t>(op)),
                                                 OpArg::in(x), OpArg::out(y)});
  }
  // In place: x holds size() blocks; afterwards block rank() of x is the result and the other
  // blocks hold unspecified values.
  void reduce_scatter(TensorStorage& x, reduce_op op = reduce_op::sum) const {
    ext::checker c(pcy_coll_reduce_scatter_inplace_schema, x, "x", dtypes);
    divisible(pcy_coll_reduce_scatter_inplace_schema, x, "x");
    c.written(x, "x");
    check_op(pcy_coll_reduce_scatter_inplace_schema, op);
    ext::invoke<pcy_coll_reduce_scatter_inplace_schema>(
        b_, c.dtype(),
        {OpArg::integer(id_), OpArg::integer(static_cast<int64_t>(op)), OpArg::inout(x)});
  }
  // Block j of y = block rank() of rank j's x (x, y: the same element count, a multiple of size()).
  void all_to_all(const TensorStorage& x, TensorStorage& y) const {
    ext::checker c(pcy_coll_all_to_all_schema, x, "x", dtypes);
    c.same_dtype(y, "y", "x");
    same_size(pcy_coll_all_to_all_schema, y, "y", x.size(), "like x");
    divisible(pcy_coll_all_to_all_schema, x, "x");
    c.distinct(x, "x", y, "y");
    c.written(x, "x");
    ext::invoke<pcy_coll_all_to_all_schema>(b_, c.dtype(),
                                            {OpArg::integer(id_), OpArg::in(x), OpArg::out(y)});
  }
  // Point to point; tags 0 .. 32767. recv's y must have the sender's dtype and element count.
  void send(const TensorStorage& x, int peer, int tag = 0) const {
    ext::checker c(pcy_coll_send_schema, x, "x", dtypes);
    check_peer(pcy_coll_send_schema, peer, tag);
    c.written(x, "x");
    ext::invoke<pcy_coll_send_schema>(
        b_, c.dtype(),
        {OpArg::integer(id_), OpArg::integer(peer), OpArg::integer(tag), OpArg::in(x)});
  }
  void recv(TensorStorage& y, int peer, int tag = 0) const {
    ext::checker c(pcy_coll_recv_schema, y, "y", dtypes);
    check_peer(pcy_coll_recv_schema, peer, tag);
    ext::invoke<pcy_coll_recv_schema>(
        b_, c.dtype(),
        {OpArg::integer(id_), OpArg::integer(peer), OpArg::integer(tag), OpArg::out(y)});
  }
  void barrier() const {
    ext::invoke<pcy_coll_barrier_schema>(b_, PCY_DTYPE_I64, {OpArg::integer(id_)});
  }

private:
  Communicator(const Backend& b, int64_t handle) : b_(b) { init(handle); }
  struct no_init {};
  Communicator(const Backend& b, no_init) : b_(b) {}

  void init(int64_t handle) {
    if (uses_unique_id(b_)) {
      init_by_unique_id(handle);
      return;
    }
    SharedTensor<int64_t> info({PCY_COLL_INFO_COUNT});
    ext::invoke<pcy_coll_comm_init_schema>(b_, PCY_DTYPE_I64,
                                           {OpArg::integer(handle), OpArg::out(info)});
    read_info(info);
  }
  void read_info(const SharedTensor<int64_t>& info) {
    const auto v = info.read();
    id_ = v[PCY_COLL_INFO_ID];
    rank_ = static_cast<int>(v[PCY_COLL_INFO_RANK]);
    size_ = static_cast<int>(v[PCY_COLL_INFO_SIZE]);
    local_rank_ = static_cast<int>(v[PCY_COLL_INFO_LOCAL_RANK]);
    local_size_ = static_cast<int>(v[PCY_COLL_INFO_LOCAL_SIZE]);
  }
  void join(const unique_id_t& id, int rank, int size, int local_rank, int local_size) {
    SharedTensor<int64_t> info({PCY_COLL_INFO_COUNT});
    ext::invoke<pcy_coll_comm_init_rank_schema>(
        b_, PCY_DTYPE_I64,
        {OpArg::integer(rank), OpArg::integer(size), OpArg::integer(local_rank),
         OpArg::integer(local_size), OpArg::integers(id), OpArg::out(info)});
    read_info(info);
  }
  // The id from rank 0 through MPI: a communicator over the same ranks on the native backend (the
  // MPI bundle) broadcasts it. Without MPI (the handle names the world): a file rendezvous, or a
  // job of one rank.
  void init_by_unique_id(int64_t handle) {
    if (handle == PCY_COLL_HANDLE_WORLD) {
      if (const char* path = std::getenv(PCY_COLL_RENDEZVOUS_SETTING); path && *path) {
        const int rank = env_int(PCY_COLL_RANK_SETTING), size = env_int(PCY_COLL_SIZE_SETTING);
        *this = rendezvous(b_, path, rank, size);
        return;
      }
    }
    Backend host(b_.registry(), "native"); // the same registry: its MPI bundle, or none
    if (!served_here(host, "comm_init")) {
      if (handle != PCY_COLL_HANDLE_WORLD)
        throw error(errc::unavailable, "coll.comm_init",
                    "from_mpi on this backend needs the MPI bundle (coll_native) to pass NCCL's id "
                    "between the ranks, and it is not loaded (parenchyma-info says why)");
      const int launched = launcher_size();
      if (launched > 1)
        throw error(errc::unavailable, "coll.comm_init",
                    "the launcher started " + std::to_string(launched) +
                        " ranks, but the MPI bundle (coll_native) is not loaded to pass NCCL's id "
                        "between them: set " PCY_COLL_RENDEZVOUS_SETTING
                        " (a file path), " PCY_COLL_RANK_SETTING " and " PCY_COLL_SIZE_SETTING
                        " on every rank, or install MPI (docs/distributed.md)");
      join(unique_id(b_), 0, 1, 0, 1);
      return;
    }
    Communicator world(host, handle);
    SharedTensor<int64_t> uid({PCY_COLL_UNIQUE_ID_WORDS});
    if (world.rank() == 0)
      ext::invoke<pcy_coll_unique_id_schema>(b_, PCY_DTYPE_I64, {OpArg::out(uid)});
    world.broadcast(uid, 0);
    const auto v = uid.read();
    unique_id_t id{};
    std::copy(v.begin(), v.end(), id.begin());
    join(id, world.rank(), world.size(), world.local_rank(), world.local_size());
  }
  // Whether a coll bundle of the backend's own framework serves `op` (any dtype).
  static bool served_here(const Backend& b, const char* op) {
    const std::string& fw = b.framework().name();
    for (const OpCoverage& c : b.registry().op_coverage())
      if (c.framework == fw && c.op == op && c.extension == PCY_COLL_EXTENSION) return true;
    return false;
  }
  static int env_int(const char* name) {
    const char* v = std::getenv(name);
    char* end = nullptr;
    const long r = v != nullptr ? std::strtol(v, &end, 10) : -1;
    if (v == nullptr || end == v || *end != '\0' || r < 0 || r > INT32_MAX)
      throw error(errc::invalid_argument, "coll.comm_init",
                  std::string(PCY_COLL_RENDEZVOUS_SETTING) + " is set, so " + name +
                      " must be a non-negative integer (it is " + (v ? v : "unset") + ")");
    return static_cast<int>(r);
  }
  // The number of ranks a launcher says it started (Open MPI, MPICH / Hydra, Slurm, torchrun), 0
  // when none says.
  static int launcher_size() {
    for (const char* name :
         {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "WORLD_SIZE"})
      if (const char* v = std::getenv(name)) return std::atoi(v);
    return 0;
  }
  static double timeout_s() {
    const char* v = std::getenv(PCY_COLL_TIMEOUT_SETTING);
    const double t = v != nullptr ? std::strtod(v, nullptr) : 0;
    return t > 0 ? t : PCY_COLL_TIMEOUT_DEFAULT;
  }
  // The rendezvous file: a magic line then the id's words, written to a temporary name and
  // renamed (readers never see half a file).
  static constexpr const char* id_magic = "parenchyma-coll-unique-id-1";
  static void write_id(const std::string& path, const unique_id_t& id) {
    const std::string tmp = path + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(&id));
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr)
      throw error(errc::unavailable, "coll.comm_init_rank",
                  "rank 0 cannot write the rendezvous file " + tmp + ": " + std::strerror(errno));
    bool ok = std::fprintf(f, "%s\n", id_magic) > 0;
    for (const int64_t w : id)
      ok = ok && std::fprintf(f, "%lld\n", static_cast<long long>(w)) > 0;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw error(errc::unavailable, "coll.comm_init_rank",
                  "rank 0 cannot write the rendezvous file " + path);
    }
  }
  static bool try_read_id(const std::string& path, unique_id_t& id) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return false;
    char magic[64] = {};
    bool ok = std::fgets(magic, sizeof magic, f) != nullptr &&
              std::string(magic) == std::string(id_magic) + "\n";
    for (int64_t& w : id) {
      long long v = 0;
      ok = ok && std::fscanf(f, "%lld", &v) == 1;
      w = v;
    }
    std::fclose(f);
    return ok;
  }
  static unique_id_t read_id(const std::string& path, int rank) {
    const double limit = timeout_s();
    const auto start = std::chrono::steady_clock::now();
    unique_id_t id{};
    while (!try_read_id(path, id)) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit)
        throw error(errc::device, "coll.comm_init_rank",
                    "rank " + std::to_string(rank) + ": no unique id in " + path + " within " +
                        std::to_string(limit) +
                        " s (" PCY_COLL_TIMEOUT_SETTING
                        "): did rank 0 start, and does it write the same path?");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return id;
  }
  static void same_size(const pcy_op_schema& s, const TensorStorage& t, const char* name,
                        uint64_t want, const char* how) {
    if (t.size() != want)
      ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(), " elements ",
                ext::shape_str(t), ", expected ", want, " ", how,
                "; pass tensors whose sizes the op's rule gives (docs/distributed.md)");
  }
  void divisible(const pcy_op_schema& s, const TensorStorage& t, const char* name) const {
    if (t.size() % static_cast<uint64_t>(size_) != 0)
      ext::fail(s, errc::invalid_argument, "argument ", name, ": ", t.size(),
                " elements, not a multiple of the communicator's ", size_,
                " ranks; pass size() equal blocks");
  }
  static void check_op(const pcy_op_schema& s, reduce_op op) {
    const auto v = static_cast<int64_t>(op);
    if (v < PCY_COLL_REDUCE_SUM || v > PCY_COLL_REDUCE_AVG)
      ext::fail(s, errc::invalid_argument, "argument reduce: ", v,
                " is not a reduce_op (sum, prod, min, max, avg)");
  }
  void check_rank(const pcy_op_schema& s, int r, const char* name) const {
    if (r < 0 || r >= size_)
      ext::fail(s, errc::invalid_argument, "argument ", name, ": rank ", r, " outside 0 .. ",
                size_ - 1, " (the communicator has ", size_, " ranks)");
  }
  void check_peer(const pcy_op_schema& s, int peer, int tag) const {
    check_rank(s, peer, "peer");
    if (peer == rank_)
      ext::fail(s, errc::invalid_argument, "argument peer: ", peer,
                " is this rank; send to and receive from another rank");
    if (tag < 0 || tag > 32767)
      ext::fail(s, errc::invalid_argument, "argument tag: ", tag, " outside 0 .. 32767");
  }

  Backend b_;
  int64_t id_ = 0;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

} // namespace parenchyma::coll
