"""Collectives between the processes of an MPI job: Communicator with all_reduce, broadcast,
reduce, all_gather, reduce_scatter, all_to_all, send, recv and barrier.

A Communicator joins the ranks of MPI_COMM_WORLD (the default; MPI is started if the program
has not) or of an mpi4py communicator (taken by its handle: the package does not depend on
mpi4py). Its ops take parenchyma.Tensor objects or DLPack producers (NumPy arrays, ...)
imported for the call without a copy, so results written to them land in their memory. A bad
argument raises parenchyma.Error (code 'invalid_argument', origin 'coll.<op>') naming it, before
anything moves. The GIL is released while an op runs. Start the program with mpirun.

    comm = parenchyma.coll.Communicator(parenchyma.Backend("native"))  # every rank
    grad = np.full(1000, comm.rank, dtype=np.float32)
    comm.all_reduce(grad, op="avg")                 # in place, on every rank
"""

from ._parenchyma import coll as _coll

Communicator = _coll.Communicator

__all__ = ["Communicator"]
