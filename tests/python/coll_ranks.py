"""One rank of tests/python/test_coll.py, started by mpirun: every parenchyma.coll op on this
rank against NumPy references computed from every rank's inputs (each rank regenerates them from
the seed), plus the argument checks. `python3 coll_ranks.py world` uses MPI_COMM_WORLD (the
bundle starts MPI); `python3 coll_ranks.py mpi4py` starts MPI through mpi4py and passes its
communicators (a split with the ranks reversed; its results also against mpi4py's own).
Prints "rank R of N: ok, K checks" on success and "SKIP: <reason>" when the coll bundle is not
available; anything else is a failure (a traceback, exit status 1).
"""
import sys

import numpy as np

mode = sys.argv[1] if len(sys.argv) > 1 else "world"
if mode == "mpi4py":
    from mpi4py import MPI  # starts MPI (before parenchyma does)

import parenchyma  # noqa: E402
from parenchyma import coll  # noqa: E402

backend = parenchyma.Backend("native")
if mode == "mpi4py":
    world = MPI.COMM_WORLD
    mpi_comm = world.Split(0, world.Get_size() - 1 - world.Get_rank())  # the ranks reversed
else:
    mpi_comm = None
try:
    comm = coll.Communicator(backend, mpi_comm)
except parenchyma.Error as e:
    if e.code in ("unsupported", "not_found"):
        print("SKIP: no coll bundle serves the native backend: %s" % e, flush=True)
        sys.exit(0)
    raise

rank, size = comm.rank, comm.size
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError("rank %d of %d: %s" % (rank, size, what))
    checks += 1


def same(got, want, what, dtype):
    got = np.asarray(got)
    if np.dtype(dtype).kind == "f":
        tol = 1e-3 if np.dtype(dtype) == np.float16 else 1e-6
        ok = np.allclose(got.astype(np.float64), want, rtol=tol, atol=0)
    else:
        ok = np.array_equal(got.astype(np.int64), np.asarray(want).astype(np.int64))
    check(ok, "%s (%s): got %s, expected %s" % (what, np.dtype(dtype).name, got[:8],
                                               np.asarray(want)[:8]))


def inputs(r, n, dtype, seed):
    """Rank r's input: small integers, so sums, products, minima and maxima are exact in every
    order and every dtype (float16 too)."""
    g = np.random.default_rng(seed * 131 + r)
    v = g.integers(-4, 5, size=n)
    v[v == 0] = 1  # no zeros: products stay informative
    return v.astype(dtype)


REF = {"sum": lambda a: a.sum(0), "prod": lambda a: a.prod(0), "min": lambda a: a.min(0),
       "max": lambda a: a.max(0)}


def reference(op, stack, dtype):
    s = stack.astype(np.float64)
    if op == "avg":
        total = s.sum(0)
        return total / size if np.dtype(dtype).kind == "f" else np.trunc(total / size)
    return REF[op](s)


# ---- the properties ---------------------------------------------------------------------------
check(0 <= rank < size, "rank %d outside 0 .. %d" % (rank, size - 1))
check(comm.local_size == size and comm.local_rank == rank, "local rank/size: one host expected")
check(comm.backend.name.startswith("native"), "backend: " + comm.backend.name)
check(("rank=%d size=%d" % (rank, size)) in repr(comm), "repr: " + repr(comm))
if mode == "mpi4py":
    check(rank == mpi_comm.Get_rank() and size == mpi_comm.Get_size(), "the mpi4py ranks")
    check(rank == size - 1 - MPI.COMM_WORLD.Get_rank(), "the split reversed the ranks")

# ---- every op, dtype and reduction ------------------------------------------------------------
seed = 0
for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16):
    for n in (1, 7, 1003):
        seed += 1
        xs = np.stack([inputs(r, n, dtype, seed) for r in range(size)])
        mine = xs[rank]
        for op in ("sum", "prod", "min", "max", "avg"):
            want = reference(op, xs, dtype)
            y = np.zeros(n, dtype)
            check(comm.all_reduce(mine.copy(), y, op=op) is y, "all_reduce returns y")
            same(y, want, "all_reduce " + op, dtype)
            x = mine.copy()
            comm.all_reduce(x, op=op)  # in place, a NumPy array (its memory is written)
            same(x, want, "all_reduce in place " + op, dtype)
            t = parenchyma.asarray(mine.copy())  # a Tensor
            comm.all_reduce(t, op=op)
            same(t.numpy(), want, "all_reduce of a Tensor " + op, dtype)
            root = (seed + len(op)) % size
            y = np.full(n, 9, dtype)
            comm.reduce(mine.copy(), y, op=op, root=root)
            same(y, want if rank == root else np.full(n, 9), "reduce %s to %d" % (op, root), dtype)
            x = mine.copy()
            comm.reduce(x, op=op, root=root)
            same(x, want if rank == root else mine, "reduce in place %s" % op, dtype)
            # reduce_scatter: x holds size blocks of n; y = block rank of the reduction.
            big = np.stack([np.concatenate([inputs(r, n, dtype, seed + 1000 + j)
                                            for j in range(size)]) for r in range(size)])
            want_rs = reference(op, big, dtype)[rank * n:(rank + 1) * n]
            y = np.zeros(n, dtype)
            comm.reduce_scatter(big[rank].copy(), y, op=op)
            same(y, want_rs, "reduce_scatter " + op, dtype)
            x = big[rank].copy()
            comm.reduce_scatter(x, op=op)
            same(x[rank * n:(rank + 1) * n], want_rs, "reduce_scatter in place " + op, dtype)
        # broadcast from the last rank
        x = mine.copy()
        check(comm.broadcast(x, root=size - 1) is x, "broadcast returns x")
        same(x, xs[size - 1], "broadcast", dtype)
        # all_gather, both forms
        y = np.zeros(size * n, dtype)
        comm.all_gather(mine, y)
        same(y, xs.reshape(-1).astype(np.float64), "all_gather", dtype)
        y = np.full(size * n, 7, dtype)
        y[rank * n:(rank + 1) * n] = mine
        comm.all_gather(y)
        same(y, xs.reshape(-1).astype(np.float64), "all_gather in place", dtype)
        # all_to_all: block j of y = block rank of rank j's x
        blocks = np.stack([np.concatenate([inputs(r, n, dtype, seed + 2000 + j)
                                           for j in range(size)]) for r in range(size)])
        y = np.zeros(size * n, dtype)
        comm.all_to_all(blocks[rank], y)
        want = np.concatenate([blocks[j][rank * n:(rank + 1) * n] for j in range(size)])
        same(y, want.astype(np.float64), "all_to_all", dtype)
        # send / recv around the ring: even ranks send first, odd ranks receive first
        if size > 1:
            right, left = (rank + 1) % size, (rank - 1) % size
            y = np.zeros(n, dtype)
            if rank % 2 == 0:
                comm.send(mine, right, tag=5)
                comm.recv(y, left, tag=5)
            else:
                comm.recv(y, left, tag=5)
                comm.send(mine, right, tag=5)
            same(y, xs[left], "recv from %d" % left, dtype)
        comm.barrier()

# ---- the reference of another implementation: mpi4py's own collectives -----------------------
if mode == "mpi4py":
    x = np.arange(10, dtype=np.float64) * (rank + 1)
    want = np.zeros_like(x)
    mpi_comm.Allreduce(x, want, op=MPI.SUM)
    got = np.zeros_like(x)
    comm.all_reduce(x, got)
    same(got, want, "all_reduce against mpi4py's Allreduce", np.float64)
    gathered = mpi_comm.allgather(rank)  # the program's own traffic on the same communicator
    y = np.zeros(size, np.int64)
    comm.all_gather(np.array([rank], np.int64), y)
    same(y, np.array(gathered), "all_gather against mpi4py's allgather", np.int64)
    # MPI_COMM_WORLD passed explicitly is the world.
    w = coll.Communicator(backend, MPI.COMM_WORLD)
    check(w.rank == MPI.COMM_WORLD.Get_rank() and w.size == size, "COMM_WORLD passed explicitly")
    try:
        coll.Communicator(backend, MPI.COMM_NULL)
        check(False, "COMM_NULL accepted")
    except parenchyma.Error as e:
        check(e.code == "invalid_argument" and "comm" in str(e), "COMM_NULL: " + str(e))


# ---- argument checks: TypeError / parenchyma.Error naming the parameter -----------------------
def refused(fn, *words, type_error=False):
    try:
        fn()
    except parenchyma.Error as e:
        text = str(e)
        check(all(w in text for w in words), "the error names %s: %s" % (words, text))
        check(not type_error or isinstance(e, TypeError), "a TypeError: %r" % e)
        return
    check(False, "accepted: expected an error naming %s" % (words,))


x = np.ones(4, np.float32)
refused(lambda: comm.all_reduce(x, op=1), "argument op", "str", type_error=True)
refused(lambda: comm.all_reduce(x, op="mean"), "argument op", "'mean'")
refused(lambda: comm.all_reduce(x, np.ones(5, np.float32)), "coll.all_reduce", "y")
refused(lambda: comm.broadcast(x, root=size), "coll.broadcast", "root")
refused(lambda: comm.broadcast(x, root="0"), "root")
refused(lambda: comm.send(x, peer=rank), "coll.send", "peer")
refused(lambda: comm.recv(x, peer=(rank + 1) % size, tag=40000), "tag")
refused(lambda: comm.all_gather(x, np.ones(4 * size + 1, np.float32)), "coll.all_gather", "y")
refused(lambda: comm.all_to_all(x), "all_to_all", "y", type_error=True)
refused(lambda: coll.Communicator(backend, 5), "argument comm", "mpi4py", type_error=True)
refused(lambda: coll.Communicator("native"), "argument backend", type_error=True)
comm.barrier()  # the refusals moved nothing: the ranks are still in step
print("rank %d of %d: ok, %d checks (%s)" % (rank, size, checks, mode), flush=True)
