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

#include <cstdint>
#include <cstring>
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

// A group of ranks (processes) that run collectives together, on one backend. Making one is
// collective: every rank of the MPI communicator constructs it. Copies share the communicator;
// it lives until the process ends (MPI_Finalize).
class Communicator {
public:
  // Over MPI_COMM_WORLD.
  explicit Communicator(const Backend& b) : b_(b) { init(PCY_COLL_HANDLE_WORLD); }

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

  void init(int64_t handle) {
    SharedTensor<int64_t> info({PCY_COLL_INFO_COUNT});
    ext::invoke<pcy_coll_comm_init_schema>(b_, PCY_DTYPE_I64,
                                           {OpArg::integer(handle), OpArg::out(info)});
    const auto v = info.read();
    id_ = v[PCY_COLL_INFO_ID];
    rank_ = static_cast<int>(v[PCY_COLL_INFO_RANK]);
    size_ = static_cast<int>(v[PCY_COLL_INFO_SIZE]);
    local_rank_ = static_cast<int>(v[PCY_COLL_INFO_LOCAL_RANK]);
    local_size_ = static_cast<int>(v[PCY_COLL_INFO_LOCAL_SIZE]);
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
