/* parenchyma extension "coll": collectives over an existing engine (MPI), every op's arguments as
 * data (the op schemas every coll bundle and the front-end parenchyma/coll.hpp are built from).
 * X(name, kind, intent, dtype, rank): see PCY_DECLARE_OP_SCHEMA in pcy_bundle.h.
 * docs/distributed.md is the user's guide.
 *
 * Common rules.
 * - `comm` is a communicator id that comm_init returned (info[0]); every rank of the communicator
 *   calls the same collective ops in the same order, with the same dtype, element counts, `reduce`
 *   and `root` (a bundle may check this and then fails every rank with an error naming the rank
 *   that differs; it must never hang: see PCY_COLL_TIMEOUT_SETTING).
 * - Tensors are dense; only their element count matters (any shapes). The op's dtype is that of
 *   its data tensors: F16, BF16, F32, F64, I32 or I64.
 * - `reduce` is one of PCY_COLL_REDUCE_*. F16 and BF16 reduce through F32 (each input converted
 *   exactly to F32, the reduction done in F32, the result rounded once to nearest even). AVG is
 *   the SUM divided by the number of ranks (integers: truncated toward zero, as C's division).
 *   Integer overflow wraps (two's complement). NaN propagates through SUM, PROD and AVG; MIN and
 *   MAX follow the engine.
 * - Ranks are 0 .. size-1 in the communicator; `root` and `peer` are ranks.
 * - Empty tensors are allowed: the op then still synchronises like its non-empty form.
 */
#ifndef PCY_COLL_H
#define PCY_COLL_H

#include "../pcy_bundle.h"

#define PCY_COLL_EXTENSION "coll"

/* The setting (environment variable or config "settings" key) that bounds how long one op waits
 * for its peers, in seconds (a positive number; default PCY_COLL_TIMEOUT_DEFAULT). */
#define PCY_COLL_TIMEOUT_SETTING "PARENCHYMA_COLL_TIMEOUT"
#define PCY_COLL_TIMEOUT_DEFAULT 300
/* 0 turns the cross-rank check of each op's dtype, element count, reduce and root off (1: on,
 * the default). */
#define PCY_COLL_CHECK_SETTING "PARENCHYMA_COLL_CHECK"
/* The file rendezvous of engines started from a unique id (front-end, docs/distributed.md): the
 * path of a file that rank 0 writes the id to and the other ranks read, and this process's rank
 * and the number of ranks (environment variables). */
#define PCY_COLL_RENDEZVOUS_SETTING "PARENCHYMA_COLL_RENDEZVOUS"
#define PCY_COLL_RANK_SETTING "PARENCHYMA_COLL_RANK"
#define PCY_COLL_SIZE_SETTING "PARENCHYMA_COLL_SIZE"

/* The reductions, the values of `reduce`. */
#define PCY_COLL_REDUCE_SUM 0
#define PCY_COLL_REDUCE_PROD 1
#define PCY_COLL_REDUCE_MIN 2
#define PCY_COLL_REDUCE_MAX 3
#define PCY_COLL_REDUCE_AVG 4

/* The handle that names the engine's world communicator (MPI_COMM_WORLD). Any other handle holds
 * the bytes of an engine communicator (an MPI_Comm, at most 8 bytes, zero-extended). */
#define PCY_COLL_HANDLE_WORLD 0

/* The entries of comm_init's info tensor. */
#define PCY_COLL_INFO_ID 0         /* the communicator id every other op takes as `comm` */
#define PCY_COLL_INFO_RANK 1       /* this process's rank in the communicator */
#define PCY_COLL_INFO_SIZE 2       /* the number of ranks */
#define PCY_COLL_INFO_LOCAL_RANK 3 /* the rank among the ranks on this host (shared memory) */
#define PCY_COLL_INFO_LOCAL_SIZE 4 /* the number of ranks on this host */
#define PCY_COLL_INFO_COUNT 5

/* comm_init(handle, info): collective over the communicator `handle` names. Initialises the
 * engine if the program has not (and then finalises it at exit), makes the bundle's own copy of
 * the communicator (so its messages never mix with the program's) and writes PCY_COLL_INFO_COUNT
 * i64 values to info. Registered for dtype I64. */
#define PCY_COLL_COMM_INIT_ARGS(X) X(handle, INT, 0, OP, ANY) X(info, TENSOR, OUT, I64, 1)
/* y = reduce over ranks of x, on every rank; x and y hold the same number of elements. */
#define PCY_COLL_ALL_REDUCE_ARGS(X)                                                                \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(reduce, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
/* x = reduce over ranks of x, on every rank. */
#define PCY_COLL_ALL_REDUCE_INPLACE_ARGS(X)                                                        \
  X(comm, INT, 0, OP, ANY) X(reduce, INT, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY)
/* x = root's x on every rank. x is read on root only (OUT elsewhere). */
#define PCY_COLL_BROADCAST_ARGS(X)                                                                 \
  X(comm, INT, 0, OP, ANY) X(root, INT, 0, OP, ANY) X(x, TENSOR, OVERWRITE, OP, ANY)
/* root's y = reduce over ranks of x; y is written on root only, left as it was elsewhere (the
 * front-end passes it OUT on root, INOUT elsewhere when it was written). */
#define PCY_COLL_REDUCE_ARGS(X)                                                                    \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(reduce, INT, 0, OP, ANY)                                                                       \
  X(root, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OVERWRITE, OP, ANY)
/* root's x = reduce over ranks of x; x is unchanged on the other ranks. */
#define PCY_COLL_REDUCE_INPLACE_ARGS(X)                                                            \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(reduce, INT, 0, OP, ANY) X(root, INT, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY)
/* y = the x of rank 0, then rank 1, ... concatenated; y holds size * n elements, x n. */
#define PCY_COLL_ALL_GATHER_ARGS(X)                                                                \
  X(comm, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
/* The same with each rank's input already in its block (rank * n .. rank * n + n - 1) of y. */
#define PCY_COLL_ALL_GATHER_INPLACE_ARGS(X) X(comm, INT, 0, OP, ANY) X(y, TENSOR, INOUT, OP, ANY)
/* x holds size * n elements, y n: y = block `rank` (elements rank * n .. rank * n + n - 1) of the
 * reduction over ranks of x. */
#define PCY_COLL_REDUCE_SCATTER_ARGS(X)                                                            \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(reduce, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
/* In place: x holds size * n elements; afterwards block `rank` of x holds the result and the
 * other blocks hold unspecified values. */
#define PCY_COLL_REDUCE_SCATTER_INPLACE_ARGS(X)                                                    \
  X(comm, INT, 0, OP, ANY) X(reduce, INT, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY)
/* x and y hold size * n elements: block j of y = block `rank` of rank j's x. */
#define PCY_COLL_ALL_TO_ALL_ARGS(X)                                                                \
  X(comm, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
/* Point to point: send x to rank `peer`; the matching recv names this rank, the same tag
 * (0 .. 32767), dtype and element count. Messages between two ranks with one tag arrive in order.
 */
#define PCY_COLL_SEND_ARGS(X)                                                                      \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(peer, INT, 0, OP, ANY) X(tag, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY)
#define PCY_COLL_RECV_ARGS(X)                                                                      \
  X(comm, INT, 0, OP, ANY)                                                                         \
  X(peer, INT, 0, OP, ANY) X(tag, INT, 0, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
/* Returns on each rank once every rank has called it. Registered for dtype I64. */
#define PCY_COLL_BARRIER_ARGS(X) X(comm, INT, 0, OP, ANY)

/* Communicators of engines that start from a unique id rather than from MPI (NCCL: the coll_cuda
 * bundle). The id is PCY_COLL_UNIQUE_ID_WORDS int64 words (NCCL's 128-byte ncclUniqueId); the
 * program moves it from the rank that made it to the others (the front-end: through the MPI
 * bundle's broadcast, or a file: docs/distributed.md). A bundle that serves these ops serves
 * every other coll op for the communicators they make; the MPI bundle serves neither. */
#define PCY_COLL_UNIQUE_ID_WORDS 16
/* unique_id(uid): writes a new id to uid (PCY_COLL_UNIQUE_ID_WORDS elements), on the one rank
 * that becomes rank 0. Registered for dtype I64. */
#define PCY_COLL_UNIQUE_ID_ARGS(X) X(uid, TENSOR, OUT, I64, 1)
/* comm_init_rank(rank, size, local_rank, local_size, uid, info): collective over the `size`
 * processes that pass the same uid (PCY_COLL_UNIQUE_ID_WORDS values), each with its own `rank`
 * (0 .. size-1); local_rank / local_size: the rank among the ranks on this host and their number
 * (written back to info). Writes info as comm_init does. Registered for dtype I64. */
#define PCY_COLL_COMM_INIT_RANK_ARGS(X)                                                            \
  X(rank, INT, 0, OP, ANY)                                                                         \
  X(size, INT, 0, OP, ANY)                                                                         \
  X(local_rank, INT, 0, OP, ANY)                                                                   \
  X(local_size, INT, 0, OP, ANY) X(uid, INT_ARRAY, 0, OP, ANY) X(info, TENSOR, OUT, I64, 1)

/* pcy_coll_<op>_schema and pcy_coll_<op>_args */
PCY_DECLARE_OP_SCHEMA(pcy_coll, comm_init, PCY_COLL_EXTENSION, PCY_COLL_COMM_INIT_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, all_reduce, PCY_COLL_EXTENSION, PCY_COLL_ALL_REDUCE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, all_reduce_inplace, PCY_COLL_EXTENSION,
                      PCY_COLL_ALL_REDUCE_INPLACE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, broadcast, PCY_COLL_EXTENSION, PCY_COLL_BROADCAST_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, reduce, PCY_COLL_EXTENSION, PCY_COLL_REDUCE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, reduce_inplace, PCY_COLL_EXTENSION, PCY_COLL_REDUCE_INPLACE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, all_gather, PCY_COLL_EXTENSION, PCY_COLL_ALL_GATHER_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, all_gather_inplace, PCY_COLL_EXTENSION,
                      PCY_COLL_ALL_GATHER_INPLACE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, reduce_scatter, PCY_COLL_EXTENSION, PCY_COLL_REDUCE_SCATTER_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, reduce_scatter_inplace, PCY_COLL_EXTENSION,
                      PCY_COLL_REDUCE_SCATTER_INPLACE_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, all_to_all, PCY_COLL_EXTENSION, PCY_COLL_ALL_TO_ALL_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, send, PCY_COLL_EXTENSION, PCY_COLL_SEND_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, recv, PCY_COLL_EXTENSION, PCY_COLL_RECV_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, barrier, PCY_COLL_EXTENSION, PCY_COLL_BARRIER_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, unique_id, PCY_COLL_EXTENSION, PCY_COLL_UNIQUE_ID_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_coll, comm_init_rank, PCY_COLL_EXTENSION, PCY_COLL_COMM_INIT_RANK_ARGS)

#endif /* PCY_COLL_H */
