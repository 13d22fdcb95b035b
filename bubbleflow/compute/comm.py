"""Communicators: how the ranks of one distributed solve talk.

The solve's algorithm is written once (:mod:`bubbleflow.linalg.krylov`); a
distributed operator (:class:`bubbleflow.operators.distributed.DistributedOperator`)
carries a communicator, and the Krylov system reduces through it.  What a
communicator offers:

``rank``, ``size``               this process's rank and the number of ranks
``allreduce_sum(a)``             the sum over the ranks of an array (any shape;
                                 a new array of its backend)
``allreduce_max(value)``         the largest of a Python float over the ranks
``sum_int(value)``               the sum of a Python int over the ranks
``exchange(lower, upper, send_lower, send_upper, recv_lower, recv_upper)``
                                 the halo swap with the neighbours below and
                                 above (None: no neighbour): ``send_lower``
                                 goes to ``lower``, which sends back into
                                 ``recv_lower``; likewise above.  Or in two
                                 halves, ``start_exchange(...)`` (the same
                                 arguments; returns a handle) and
                                 ``wait(handle)``, with work between them
                                 (the buffers untouched until the wait)
``gather(a, root)``              the ranks' arrays, in rank order, on ``root``
                                 (None elsewhere)
``broadcast(obj, root)``         ``root``'s Python object on every rank
``allgather(a)``                 every rank's array, in rank order, on every rank

Chosen by name through :data:`COMMUNICATORS` (:func:`communicator`):
``single`` (one process, every call a no-op or the identity) and ``mpi``
(MPI between host processes through ``mpi4py``, for the NumPy backend; a
device communicator over NCCL is the next entry).  ``mpi4py`` is imported
only by the ``mpi`` communicator.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SingleProcess", "MPIHost", "communicator", "launcher_rank", "COMMUNICATORS"]


class SingleProcess:
    """One process: the reductions are the identity, there are no neighbours."""

    name = "single"
    rank, size = 0, 1

    def allreduce_sum(self, a):
        return a

    def allreduce_max(self, value):
        return float(value)

    def sum_int(self, value):
        return int(value)

    def exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        self.wait(self.start_exchange(lower, upper, send_lower, send_upper, recv_lower,
                                      recv_upper))

    def start_exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        if lower is not None or upper is not None:
            raise ValueError("a single process has no neighbours")
        return None

    def wait(self, handle):
        pass

    def gather(self, a, root=0):
        return [a]

    def broadcast(self, obj, root=0):
        return obj

    def allgather(self, a):
        return [a]


class MPIHost:
    """MPI between processes, host (NumPy) arrays (``mpi4py``'s buffer calls).

    Every reduction is MPI's ``Allreduce`` over contiguous float64 copies: for
    a given number of ranks its order is fixed, so runs repeat bit for bit.
    """

    name = "mpi"

    def __init__(self, comm=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def allreduce_sum(self, a):
        a = np.asarray(a)
        send = np.array(a, dtype=np.float64).reshape(-1)   # (ascontiguousarray makes 0-d 1-d)
        out = np.empty_like(send)
        self.comm.Allreduce(send, out, op=self.MPI.SUM)
        return out.reshape(a.shape).astype(a.dtype, copy=False)

    def allreduce_max(self, value):
        return float(self.comm.allreduce(float(value), op=self.MPI.MAX))

    def sum_int(self, value):
        return int(self.comm.allreduce(int(value), op=self.MPI.SUM))

    def exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        self.wait(self.start_exchange(lower, upper, send_lower, send_upper, recv_lower,
                                      recv_upper))

    def start_exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        """The receives posted first, then the sends (nonblocking): no
        deadlock whatever the ranks' order; tags tell the directions apart."""
        requests = []
        if lower is not None:
            requests.append(self.comm.Irecv(recv_lower, source=lower, tag=1))
        if upper is not None:
            requests.append(self.comm.Irecv(recv_upper, source=upper, tag=2))
        if upper is not None:
            requests.append(self.comm.Isend(send_upper, dest=upper, tag=1))
        if lower is not None:
            requests.append(self.comm.Isend(send_lower, dest=lower, tag=2))
        return requests

    def wait(self, handle):
        if handle:
            self.MPI.Request.Waitall(handle)

    def gather(self, a, root=0):
        return self.comm.gather(np.asarray(a), root=root)

    def broadcast(self, obj, root=0):
        return self.comm.bcast(obj, root=root)

    def allgather(self, a):
        return self.comm.allgather(np.asarray(a))


#: Communicators by name.
COMMUNICATORS = {"single": SingleProcess, "mpi": MPIHost}


#: Environment variables an MPI launcher sets in the processes it starts
#: (MPICH's Hydra, Open MPI, PMIx): only then is MPI initialised.
LAUNCHER_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")


def launcher_rank():
    """This process's rank as its MPI launcher numbered it (0 without a
    launcher), read from the environment: MPI is not initialised."""
    import os

    for variable in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if variable in os.environ:
            return int(os.environ[variable])
    return 0


def communicator(name="auto"):
    """The communicator ``name``; ``"auto"``: MPI where this process was
    started by an MPI launcher (``mpiexec -n N``) with more than one rank
    and ``mpi4py`` is installed, else a single process (MPI is not even
    initialised)."""
    if name == "auto":
        import os

        if not any(v in os.environ for v in LAUNCHER_VARIABLES):
            return SingleProcess()
        try:
            comm = MPIHost()
        except ImportError:
            return SingleProcess()
        return comm if comm.size > 1 else SingleProcess()
    if name not in COMMUNICATORS:
        raise ValueError(f"communicator {name!r}: expected one of "
                         + ", ".join(sorted(COMMUNICATORS)) + " or 'auto'")
    return COMMUNICATORS[name]()
