"""Communicators: how the ranks of one distributed solve talk.

The solve's algorithm is written once (:mod:`bubbleflow.linalg.krylov`); a
distributed operator (:class:`bubbleflow.operators.distributed.DistributedOperator`)
carries a communicator, and the Krylov system reduces through it.  What a
communicator offers:

``rank``, ``size``               this process's rank and the number of ranks
``allreduce_sum(a)``             the sum over the ranks of an array (any shape;
                                 a new array of its backend)
``allreduce_into(send, out)``    the sum over the ranks of ``send`` into ``out``
                                 (preallocated, the same size and backend):
                                 no allocation, and on NCCL queued on the
                                 compute stream (a CUDA graph may hold it)
``allreduce_max(value)``         the largest of a Python float over the ranks
``allreduce_max_into(send, out)`` the largest of each of ``send``'s values
                                 over the ranks into ``out``, as
                                 ``allreduce_into`` (on NCCL no host read)
``allreduce_maxima(values)``     the largest of each of a host vector's
                                 values over the ranks (one collective)
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
``gather_rows(a, root)``         the ranks' arrays joined along axis 0 on
                                 ``root``'s host (None elsewhere): the
                                 slabs' fields as the whole grid's
``gather_rows_to_device(a, root)``  as ``gather_rows``, the whole array on
                                 ``root`` of ``a``'s backend (on NCCL sent
                                 device to device: no host staging)
``broadcast(obj, root)``         ``root``'s Python object on every rank
``allgather(a)``                 every rank's array, in rank order, on every rank
``allgather_into(send, recv)``   every rank's ``send`` (one size on every rank)
                                 into ``recv`` (``size`` times as long), in
                                 rank order: no allocation, and on NCCL
                                 queued on the compute stream (a CUDA graph
                                 may hold it)
``hold_graph(graph)``            a CUDA graph that captured this
                                 communicator's calls, as the handle to
                                 keep and launch: NCCL releases it before
                                 it ends (:class:`CapturedGraph`)

Chosen by name through :data:`COMMUNICATORS` (:func:`communicator`):

``single``  one process, every call a no-op or the identity;
``mpi``     MPI between processes through ``mpi4py``: host arrays, or
            device (CuPy) arrays staged through the host (ranks that share
            a GPU, or a machine without NCCL);
``nccl``    one GPU a rank: NCCL carries the device arrays (halo swaps
            as grouped send/recv on a stream of their own, joined to the
            compute stream by events; sums as all-reduces), all on the
            device, no host synchronisation; MPI starts the ranks, shares
            NCCL's id and carries the set-up's host objects.

``mpi4py`` and NCCL (``cupy.cuda.nccl``) are imported only by the
communicators that use them.
"""
from __future__ import annotations

import atexit
import gc
import weakref

import numpy as np

from .backend import backend_of
from .blas import share_cores
from .transfer import on_backend, on_device, to_host

__all__ = ["SingleProcess", "MPIHost", "NCCLDevice", "CapturedGraph", "communicator",
           "launcher_rank", "COMMUNICATORS"]


class CapturedGraph:
    """A CUDA graph that holds NCCL calls, kept through this handle so that
    its communicator can destroy it first when it ends.

    NCCL's ``ncclCommDestroy`` waits until every graph that captured the
    communicator's calls has been destroyed; a graph still referenced at
    exit (by a solver, a preconditioner, a module) would hold the process
    forever.  :meth:`NCCLDevice.close` releases every live handle, then
    destroys the communicator.
    """

    __slots__ = ("graph", "__weakref__")

    def __init__(self, graph):
        self.graph = graph

    def launch(self, *args):
        if self.graph is None:
            raise RuntimeError("a CUDA graph of an NCCL communicator that has ended: "
                               "expected a launch before the communicator's close")
        self.graph.launch(*args)

    def release(self):
        """Destroy the graph (drop the only reference to it)."""
        self.graph = None


class SingleProcess:
    """One process: the reductions are the identity, there are no neighbours."""

    name = "single"
    rank, size = 0, 1

    def allreduce_sum(self, a):
        return a

    def allreduce_into(self, send, out):
        if on_device(backend_of(send)) and send.nbytes == out.nbytes:
            # One asynchronous copy on the current stream: nothing allocated
            # (a CUDA graph may hold it).
            import cupy

            cupy.cuda.runtime.memcpyAsync(out.data.ptr, send.data.ptr, send.nbytes,
                                          cupy.cuda.runtime.memcpyDeviceToDevice,
                                          cupy.cuda.get_current_stream().ptr)
            return
        out[...] = send

    def allreduce_max(self, value):
        return float(value)

    def allreduce_max_into(self, send, out):
        self.allreduce_into(send, out)

    def allreduce_maxima(self, values):
        return np.array(values, dtype=np.float64)

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

    def gather_rows(self, a, root=0):
        return np.array(to_host(a, backend_of(a)))      # (a new array, as on ranks)

    def gather_rows_to_device(self, a, root=0):
        return backend_of(a).xp.array(a)                # (a new array, as on ranks)

    def broadcast(self, obj, root=0):
        return obj

    def allgather(self, a):
        return [a]

    def allgather_into(self, send, recv):
        self.allreduce_into(send, recv)

    def use_device(self, backend):
        """Nothing to choose: the backend's current device."""

    def abort(self, code=1):
        """End every rank (one process: nothing else to end)."""

    def hold_graph(self, graph):
        """No NCCL to end: the graph itself."""
        return graph


class MPIHost:
    """MPI between processes (``mpi4py``'s buffer calls) on host arrays;
    device arrays are staged through the host (a copy each way).

    Every reduction is MPI's ``Allreduce`` over contiguous float64 copies: for
    a given number of ranks its order is fixed, so runs repeat bit for bit.
    """

    name = "mpi"

    def __init__(self, comm=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if self.size > 1:
            share_cores()           # (the ranks' small dense work on one BLAS thread each)

    def allreduce_sum(self, a):
        backend = backend_of(a)
        a_host = np.asarray(to_host(a, backend))
        send = np.array(a_host, dtype=np.float64).reshape(-1)   # (0-d made 1-d)
        out = np.empty_like(send)
        self.comm.Allreduce(send, out, op=self.MPI.SUM)
        return on_backend(out.reshape(a_host.shape).astype(a_host.dtype, copy=False), backend)

    def allreduce_into(self, send, out):
        out[...] = self.allreduce_sum(send)

    def allreduce_max(self, value):
        return float(self.comm.allreduce(float(value), op=self.MPI.MAX))

    def allreduce_max_into(self, send, out):
        backend = backend_of(send)
        host = np.ascontiguousarray(to_host(send, backend), dtype=np.float64).reshape(-1)
        got = np.empty_like(host)
        self.comm.Allreduce(host, got, op=self.MPI.MAX)
        out[...] = on_backend(got.reshape(out.shape).astype(out.dtype, copy=False), backend)

    def allreduce_maxima(self, values):
        send = np.array(values, dtype=np.float64).reshape(-1)
        out = np.empty_like(send)
        self.comm.Allreduce(send, out, op=self.MPI.MAX)
        return out.reshape(np.shape(values))

    def abort(self, code=1):
        """End every rank: one rank's error would leave the others waiting
        in a collective."""
        self.comm.Abort(code)

    def hold_graph(self, graph):
        """No NCCL to end: the graph itself."""
        return graph

    def sum_int(self, value):
        return int(self.comm.allreduce(int(value), op=self.MPI.SUM))

    def exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        self.wait(self.start_exchange(lower, upper, send_lower, send_upper, recv_lower,
                                      recv_upper))

    def start_exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        """The receives posted first, then the sends (nonblocking): no
        deadlock whatever the ranks' order; tags tell the directions apart.
        Device planes travel as host copies, copied in at the wait."""
        requests, staged = [], []

        def host_recv(recv):
            backend = backend_of(recv)
            if not on_device(backend):
                return recv
            buf = np.empty(recv.shape, dtype=recv.dtype)
            staged.append((recv, buf, backend))
            return buf

        def host_send(send):
            return np.ascontiguousarray(to_host(send, backend_of(send)))

        if lower is not None:
            requests.append(self.comm.Irecv(host_recv(recv_lower), source=lower, tag=1))
        if upper is not None:
            requests.append(self.comm.Irecv(host_recv(recv_upper), source=upper, tag=2))
        if upper is not None:
            requests.append(self.comm.Isend(host_send(send_upper), dest=upper, tag=1))
        if lower is not None:
            requests.append(self.comm.Isend(host_send(send_lower), dest=lower, tag=2))
        return requests, staged

    def wait(self, handle):
        if not handle:
            return
        requests, staged = handle
        if requests:
            self.MPI.Request.Waitall(requests)
        for recv, buf, backend in staged:
            recv[...] = on_backend(buf, backend)

    def gather(self, a, root=0):
        return self.comm.gather(np.asarray(to_host(a, backend_of(a))), root=root)

    def gather_rows(self, a, root=0):
        """One buffered gather of whole rows into ``root``'s array (a
        pickled gather and a concatenation copy every part twice and hold
        it twice); the arrays share their dtype and their shape but for
        axis 0.  A row is one MPI type, so the counts stay small."""
        from mpi4py.util.dtlib import from_numpy_dtype

        a = np.ascontiguousarray(to_host(a, backend_of(a)))
        counts = self.comm.gather(a.shape[0], root=root)
        row = int(np.prod(a.shape[1:], dtype=np.int64))
        if row == 0:
            parts = self.comm.gather(a, root=root)
            return None if parts is None else np.concatenate(parts, axis=0)
        rowtype = from_numpy_dtype(a.dtype).Create_contiguous(row).Commit()
        try:
            out = recv = None
            if self.rank == root:
                out = np.empty((sum(counts),) + a.shape[1:], dtype=a.dtype)
                starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
                recv = [out, counts, starts.tolist(), rowtype]
            self.comm.Gatherv([a, a.shape[0], rowtype], recv, root=root)
        finally:
            rowtype.Free()
        return out

    def gather_rows_to_device(self, a, root=0):
        """:meth:`gather_rows` on ``root``'s backend of ``a`` (through the host)."""
        out = self.gather_rows(a, root)
        return None if out is None else on_backend(out, backend_of(a))

    def broadcast(self, obj, root=0):
        return self.comm.bcast(obj, root=root)

    def allgather(self, a):
        return self.comm.allgather(np.asarray(to_host(a, backend_of(a))))

    def allgather_into(self, send, recv):
        backend = backend_of(send)
        out = np.empty(recv.size, dtype=recv.dtype)
        self.comm.Allgather(np.ascontiguousarray(to_host(send, backend)).reshape(-1), out)
        recv[...] = on_backend(out.reshape(recv.shape), backend)

    def use_device(self, backend):
        """On a device backend, make the node's ``local_rank``-th GPU (modulo
        their number) this rank's: ranks share GPUs only when there are
        more of them than GPUs."""
        if on_device(backend):
            import cupy

            cupy.cuda.Device(self.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()

    def local_rank(self):
        """This rank's number among the ranks of its node."""
        return self.node_ranks()[0]

    def node_ranks(self):
        """``(local_rank, local_size)``: this rank's number among the ranks
        of its node, and their count (collective)."""
        node = self.comm.Split_type(self.MPI.COMM_TYPE_SHARED, key=self.rank)
        try:
            return node.Get_rank(), node.Get_size()
        finally:
            node.Free()

    def sharing(self, backend):
        """How many ranks of this node share this rank's memory: those on
        its GPU (:meth:`use_device` deals the node's ranks to its GPUs in
        turn), or on a host backend every rank of the node (collective)."""
        local, size = self.node_ranks()
        if not on_device(backend):
            return size
        import cupy

        gpus = cupy.cuda.runtime.getDeviceCount()
        return len(range(local % gpus, size, gpus))


class NCCLDevice(MPIHost):
    """One GPU a rank (the node's ``local_rank``-th): device arrays through
    NCCL on the device, host objects through MPI (:class:`MPIHost`).

    The halo swap is one NCCL group of send/recv pairs on a stream of its
    own: it waits for the compute stream's work so far (an event), and the
    compute stream waits for it at :meth:`wait` (an event), so the
    interior's stencil runs while the planes travel and nothing waits on
    the host.  Sums are NCCL all-reduces on the compute stream, in float64.
    """

    name = "nccl"

    def __init__(self, comm=None):
        super().__init__(comm)
        local = self.local_rank()                   # (collective: before anything can fail)
        try:
            uid = self._prepare(local)
            failure = None
        except Exception as exc:                    # (no driver, no NCCL, a bad GPU)
            uid, failure = None, f"{type(exc).__name__}: {exc}"
        # Agreed before NCCL's own start, which would wait for a rank that failed.
        failures = [(r, f) for r, f in enumerate(self.comm.allgather(failure)) if f is not None]
        if failures:
            rank, why = failures[0]
            raise RuntimeError(f"nccl: rank {rank} of {self.size} could not start NCCL ({why})")
        uid = self.comm.bcast(uid, root=0)
        self.nccl_comm = self.nccl.NcclCommunicator(self.size, uid, self.rank)
        self._graphs = []
        # Before the interpreter's teardown frees objects in no set order
        # (and before mpi4py's MPI_Finalize, which runs after it).
        atexit.register(self.close)

    def hold_graph(self, graph):
        """``graph`` as a :class:`CapturedGraph` this communicator releases
        in :meth:`close` (None stays None)."""
        if graph is None:
            return None
        handle = CapturedGraph(graph)
        self._graphs = [ref for ref in self._graphs if ref() is not None]
        self._graphs.append(weakref.ref(handle))
        return handle

    def close(self):
        """End NCCL on this rank: the device's work finished, every graph
        holding NCCL calls destroyed, then the communicator (which waits
        for those graphs).  Every rank closes at its exit; later calls do
        nothing."""
        if getattr(self, "nccl_comm", None) is None:
            return
        self.cp.cuda.Device(self.device).synchronize()
        for ref in self._graphs:
            handle = ref()
            if handle is not None:
                handle.release()
        self._graphs = []
        gc.collect()
        comm, self.nccl_comm = self.nccl_comm, None
        comm.destroy()

    def _prepare(self, local):
        """This rank's part of NCCL's start: CuPy and NCCL imported, the
        node's ``local``-th GPU (modulo their number) made current, NCCL's id
        (rank 0's; None elsewhere)."""
        import cupy
        from cupy.cuda import nccl

        self.cp, self.nccl = cupy, nccl
        self.device = local % cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.Device(self.device).use()
        self.swap_stream = cupy.cuda.Stream(non_blocking=True)
        self._types = {np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.float32): nccl.NCCL_FLOAT32}
        return nccl.get_unique_id() if self.rank == 0 else None

    def use_device(self, backend):
        """The GPU was chosen when NCCL started (one a rank)."""

    def allreduce_sum(self, a):
        if not on_device(backend_of(a)):
            return super().allreduce_sum(a)
        cp = self.cp
        # (NCCL reads the sums where they are: no copy of a contiguous float64 array.)
        send = cp.ascontiguousarray(a, dtype=cp.float64).reshape(-1)
        out = cp.empty_like(send)
        self.nccl_comm.allReduce(send.data.ptr, out.data.ptr, send.size, self.nccl.NCCL_FLOAT64,
                                 self.nccl.NCCL_SUM, cp.cuda.get_current_stream().ptr)
        return out.reshape(a.shape).astype(a.dtype, copy=False)

    def allreduce_into(self, send, out):
        if not on_device(backend_of(send)):
            return super().allreduce_into(send, out)
        self._reduce_into(send, out, self.nccl.NCCL_SUM)

    def allreduce_max_into(self, send, out):
        if not on_device(backend_of(send)):
            return super().allreduce_max_into(send, out)
        self._reduce_into(send, out, self.nccl.NCCL_MAX)

    def _reduce_into(self, send, out, op):
        if send.dtype != out.dtype or send.size != out.size or np.dtype(send.dtype) not in \
                self._types or not (send.flags.c_contiguous and out.flags.c_contiguous):
            raise ValueError(f"nccl all-reduce: {send.dtype} {send.shape} into {out.dtype} "
                             f"{out.shape}: expected contiguous float64 or float32 arrays of "
                             "one size")
        self.nccl_comm.allReduce(send.data.ptr, out.data.ptr, send.size,
                                 self._types[np.dtype(send.dtype)], op,
                                 self.cp.cuda.get_current_stream().ptr)

    def allgather_into(self, send, recv):
        if not on_device(backend_of(send)):
            return super().allgather_into(send, recv)
        if send.dtype != recv.dtype or recv.size != self.size * send.size or \
                np.dtype(send.dtype) not in self._types or \
                not (send.flags.c_contiguous and recv.flags.c_contiguous):
            raise ValueError(f"nccl all-gather: {send.dtype} {send.shape} into {recv.dtype} "
                             f"{recv.shape}: expected contiguous float64 or float32 arrays, "
                             f"the second {self.size} times the first's size")
        self.nccl_comm.allGather(send.data.ptr, recv.data.ptr, send.size,
                                 self._types[np.dtype(send.dtype)],
                                 self.cp.cuda.get_current_stream().ptr)

    def gather_rows_to_device(self, a, root=0):
        """The ranks' device arrays joined along axis 0 in ``root``'s device
        memory: each rank's rows sent as bytes to ``root`` in one NCCL group
        on the compute stream (the row counts gathered through MPI first)."""
        if not on_device(backend_of(a)):
            return super().gather_rows_to_device(a, root)
        cp = self.cp
        a = cp.ascontiguousarray(a)
        counts = self.comm.allgather(int(a.shape[0]))
        stream = cp.cuda.get_current_stream().ptr
        uint8 = self.nccl.NCCL_UINT8
        out = None
        if self.rank == root:
            out = cp.empty((sum(counts),) + a.shape[1:], dtype=a.dtype)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
            out[starts[root]:starts[root] + counts[root]] = a
        self.nccl.groupStart()
        try:
            if self.rank == root:
                for peer, (start, count) in enumerate(zip(starts, counts)):
                    part = out[start:start + count]
                    if peer != root and part.nbytes:
                        self.nccl_comm.recv(part.data.ptr, part.nbytes, uint8, peer, stream)
            elif a.nbytes:
                self.nccl_comm.send(a.data.ptr, a.nbytes, uint8, root, stream)
        finally:
            self.nccl.groupEnd()
        return out

    def start_exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        if not on_device(backend_of(recv_lower if lower is not None else recv_upper)):
            return super().start_exchange(lower, upper, send_lower, send_upper, recv_lower,
                                          recv_upper)
        cp, stream = self.cp, self.swap_stream
        # Everything checked and made contiguous before the group opens (an
        # error inside it on one rank would leave its neighbours waiting),
        # and before the swap stream is joined to the compute stream (the
        # copies are the compute stream's work).  The planes are kept in the
        # handle until the wait: the swap stream reads them after this call.
        recvs = [(peer, recv) for peer, recv in ((lower, recv_lower), (upper, recv_upper))
                 if peer is not None]
        # Sends upper first: a rank that is both neighbours (a ring of two)
        # gets the planes in MPI's pairing (recv_lower <- the peer's send_upper).
        sends = [(peer, cp.ascontiguousarray(send, dtype=recv.dtype))
                 for peer, send, recv in ((upper, send_upper, recv_upper),
                                          (lower, send_lower, recv_lower)) if peer is not None]
        for _, recv in recvs:
            if np.dtype(recv.dtype) not in self._types or not recv.flags.c_contiguous:
                raise ValueError(f"nccl swap: a receive buffer of {recv.dtype}, "
                                 f"contiguous={recv.flags.c_contiguous}: expected a "
                                 "contiguous float64 or float32 plane")
        stream.wait_event(cp.cuda.get_current_stream().record())
        self.nccl.groupStart()
        try:
            for peer, recv in recvs:
                self.nccl_comm.recv(recv.data.ptr, recv.size, self._types[np.dtype(recv.dtype)],
                                    peer, stream.ptr)
            for peer, send in sends:
                self.nccl_comm.send(send.data.ptr, send.size, self._types[np.dtype(send.dtype)],
                                    peer, stream.ptr)
        finally:
            self.nccl.groupEnd()
        return ("nccl", stream.record(), sends)

    def wait(self, handle):
        if handle and handle[0] == "nccl":
            self.cp.cuda.get_current_stream().wait_event(handle[1])
            return
        super().wait(handle)


#: Communicators by name.
COMMUNICATORS = {"single": SingleProcess, "mpi": MPIHost, "nccl": NCCLDevice}


def _gpu_a_rank(comm):
    """Can NCCL run here: is it installed, and does every rank get a GPU of
    its own (NCCL refuses two ranks on one GPU)?  Each rank names the GPU it
    would use (the node's ``local_rank``-th it sees, as :class:`NCCLDevice`
    picks it) by host and PCI bus; agreed by all ranks, so that a launcher
    that shows each rank one GPU and one that shows them all both count."""
    local = comm.local_rank()           # (collective: every rank, before anything can fail)
    try:
        import importlib

        import cupy

        importlib.import_module("cupy.cuda.nccl")
        device = local % cupy.cuda.runtime.getDeviceCount()
        mine = (comm.MPI.Get_processor_name(), cupy.cuda.Device(device).pci_bus_id)
    except Exception:                  # no NCCL, no driver: the host's MPI
        mine = None
    names = comm.comm.allgather(mine)
    return None not in names and len(set(names)) == len(names)


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


def communicator(name="auto", backend=None):
    """The communicator ``name``; ``"auto"``: where this process was
    started by an MPI launcher (``mpiexec -n N``) with more than one rank
    and ``mpi4py`` is installed, NCCL for a device ``backend`` whose node
    has a GPU for each of its ranks, else MPI; without a launcher a single
    process (MPI is not even initialised)."""
    if name == "auto":
        import os

        if not any(v in os.environ for v in LAUNCHER_VARIABLES):
            return SingleProcess()
        try:
            comm = MPIHost()
        except ImportError:
            return SingleProcess()
        if comm.size == 1:
            return SingleProcess()
        if backend is not None and on_device(backend) and _gpu_a_rank(comm):
            return NCCLDevice(comm.comm)
        return comm
    if name not in COMMUNICATORS:
        raise ValueError(f"communicator {name!r}: expected one of "
                         + ", ".join(sorted(COMMUNICATORS)) + " or 'auto'")
    return COMMUNICATORS[name]()
