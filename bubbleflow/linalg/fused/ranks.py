"""The fused preconditioned CG iteration on one rank's slab (CuPy, float64).

:class:`~.protocol.DeviceEngine` (the protocol of
:mod:`bubbleflow.linalg.krylov.device`: scalars on the device, buffers
allocated once, CUDA graphs of runs of iterations) for a
:class:`~bubbleflow.operators.distributed.DistributedOperator` (2-D or 3-D,
CG, Jacobi PCG or PCG with the slab multigrid's cycle, no deflation), its
sums reduced over the ranks by the
operator's communicator between the kernels (``ranks.cu``):

1. the halo swap of ``p``'s edge planes starts (NCCL on a stream of its own);
2. ``spmv`` on the planes that do not touch a halo, then, once the halo has
   arrived, on the two edge planes; ``p . w`` summed by blocks, then by the
   last block;
3. an all-reduce of ``p . w``;
4. ``update``: ``alpha``, ``x += alpha p``, ``r -= alpha w``, ``y = D^-1 r``
   and the sums of ``r . r`` and ``r . y``; with a preconditioner that
   offers its launches (the slab multigrid's cycle, ``device_launches``)
   ``y = M^-1 r`` by them after the update, then ``r . y`` (``rk_ry``);
5. one all-reduce of both;
6. ``direction``: ``beta``, ``p = y + beta p``; the scalars, the history and
   the stop at the tolerance.

On NCCL (or one rank) nothing in an iteration allocates or waits on the
host, so runs of iterations are captured once into CUDA graphs, the NCCL
calls with the kernels, and replayed: the host issues one launch for
:attr:`RankFusedEngine.graph_iterations` iterations instead of about
forty operations each (what bounded four GPUs: docs/performance_records.md,
"Several GPUs").  The twin is the generic loop of
:mod:`bubbleflow.linalg.krylov` on the same operator; the tests compare the
two on the GPU (iterations and answers).
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.held_capture import CAPTURABLE
from .protocol import BAD, BETA, DONE, INV_BNORM, RZ, TOL_REL, DeviceEngine, float64_on_device

__all__ = ["RankFusedEngine", "engine_for", "MAX_CELLS"]

_THREADS = 256
#: Blocks of the grid-stride kernels a multiprocessor (one wave, resident).
_BLOCKS_PER_SM = 8
#: 32-bit offsets in the kernels: a slab with its halo planes below this.
MAX_CELLS = 2 ** 31 - 2 ** 26
#: The scalars' indices past the shared ones (ranks.cu's S_*).
_PW_LOCAL, _PW, _SUMS_LOCAL, _SUMS = 7, 8, 9, 11
_NSCAL = 13


#: The kernels' forms by how ``y = M^-1 r`` is had: ``r`` itself, ``D^-1 r``
#: inside the kernels, or the preconditioner's own launches between them.
_MODES = {"none": "", "jacobi": "#define JACOBI 1\n", "generic": "#define GENERIC 1\n"}


@cuda.kernel_cache
def _kernel(name, ndim, mode):
    defines = cuda.defines(NDIM=ndim) + _MODES[mode]
    return cuda.function(defines + cuda.source(__name__, "ranks.cu"), name,
                         options=("-std=c++14",))


def _mode(prec_obj, prec_name):
    """How the engine applies this preconditioner (:data:`_MODES`), or None
    where it cannot: Jacobi by its diagonal, another by the launches it
    offers for the device (``device_cycle``, ``device_launches``: a graph
    may hold them)."""
    if prec_name == "none":
        return "none"
    if prec_name == "jacobi":
        return "jacobi" if getattr(prec_obj, "inv_diagonal", None) is not None else None
    return "generic" if getattr(prec_obj, "device_cycle", False) else None


def engine_for(A, prec_obj, prec_name, defl, variant, b, previous=None):
    """A :class:`RankFusedEngine` when this rank's solve can run fused (a
    distributed operator on CuPy, float64, CG, Jacobi or a preconditioner
    whose application runs on the device (the slab multigrid's cycle), no
    deflation, a communicator that sums device arrays), else None.
    ``previous``: an engine of an earlier solve, reused where it fits
    (:meth:`~RankFusedEngine.fits`)."""
    if not float64_on_device(b) or defl is not None:
        return None
    if not hasattr(A, "slab") or getattr(A, "dtype", None) != np.float64:
        return None
    if _mode(prec_obj, prec_name) is None:
        return None
    if getattr(A.comm, "name", None) not in CAPTURABLE:
        return None           # MPI staging through the host: the generic loop
    if previous is not None and previous.fits(A, prec_name):
        # (Its slab passed the ranks' agreement below when it was built; a
        # flow's partition, and so every rank's answer, stays the same.)
        return previous.update(A, prec_obj)
    nloc = A.slab.hi - A.slab.lo
    # (Agreed: every rank takes the engine, and its collectives, or none.)
    if A.comm.sum_int(int((nloc + 2) * int(np.prod(A.slab.shape[1:])) > MAX_CELLS)):
        return None
    return RankFusedEngine(A, prec_obj, prec_name)


class RankFusedEngine(DeviceEngine):
    """Buffers, kernels and CUDA graphs of the fused iteration on one
    rank's slab (see the module).  Built once per slab and preconditioner
    kind; :meth:`update` takes a new operator of the same slab (its
    couplings and diagonal copied into the engine's buffers, so that the
    graphs stay valid)."""

    #: Blocks of the grid-stride kernels a multiprocessor.
    blocks_per_sm = _BLOCKS_PER_SM
    #: Iterations of the engine's first solve launched directly (whole runs,
    #: until this many have been), before any capture: a solve that ends
    #: within them (the slab multigrid's ten or so, a one-off pressure
    #: solve) pays no capture of graphs it would not replay; a longer one,
    #: and every later solve, replays them.
    direct_first = 16

    def __init__(self, A, prec_obj, prec_name):
        import cupy as cp

        super().__init__(cp)
        self.comm = A.comm
        slab = A.slab
        self.slab, self.prec_name = slab, prec_name
        self.mode = _mode(prec_obj, prec_name)
        self.jacobi = self.mode == "jacobi"
        self.ndim = len(slab.shape)
        self.nloc = slab.hi - slab.lo
        self.plane = int(np.prod(slab.shape[1:]))
        self.n = self.nloc * self.plane
        nx = slab.shape[-1]
        ny = slab.shape[1] if self.ndim == 3 else 1
        self.nx, self.ny = nx, ny
        f64 = cp.float64
        P = self.plane
        self.p_ext = cp.zeros((self.nloc + 2) * P, dtype=f64)
        self.p_view = self.p_ext[P:P + self.n]
        self.x = cp.zeros(self.n, dtype=f64)
        self.w = cp.zeros(self.n, dtype=f64)
        self.cs = cp.zeros((self.nloc + 1) * P, dtype=f64)
        self.in_plane = [cp.zeros(c.size, dtype=f64) for c in A._inner[:self.ndim - 1]]
        # r, and D^-1 for Jacobi or a generic preconditioner's result y,
        # which the kernels read where Jacobi's read D^-1 r.
        self.r, self.dinv = self._residual_buffers(prec_obj)
        self.prec_launches, self._prec_of = None, None
        # The start's y = M^-1 r replayed from a graph: (preconditioner, graph).
        self._start_graph = None
        # Iterations of this solve still to launch directly (the first solve's).
        self._direct_left, self._begun = 0, False
        self.scal = cp.zeros(_NSCAL, dtype=f64)
        self.counter = cp.zeros(1, dtype=cp.int32)
        self.counters = cp.zeros(4, dtype=cp.uint32)
        self.status_buf = cp.zeros(3, dtype=f64)
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        wave = int(self.blocks_per_sm) * sms
        self.blocks = max(1, min(wave, -(-self.n // _THREADS)))
        # The spmv's blocks: the interior's, then the edge planes'.
        inner = max(self.nloc - 2, 0) * P
        self.inner_blocks = max(1, min(wave, -(-inner // _THREADS))) if inner else 0
        self.edge_blocks = max(1, min(wave, -(-(min(self.nloc, 2) * P) // _THREADS)))
        self.part = cp.zeros(max(self.inner_blocks + self.edge_blocks, 2 * self.blocks),
                             dtype=f64)
        k = lambda name: _kernel(name, self.ndim, self.mode)   # noqa: E731
        self.k_spmv, self.k_update = k("rk_spmv"), k("rk_update")
        self.k_direction, self.k_start, self.k_status = k("rk_direction"), k("rk_start"), \
            k("rk_status")
        self.k_ry = k("rk_ry") if self.mode == "generic" else None
        # Bytes an iteration moves, each array read once and written once:
        # spmv p, its couplings -> w; update x, p, r, w (D^-1) -> x, r;
        # direction r (D^-1), p -> p; a generic preconditioner r -> y (its
        # own bytes beside), r . y reads both, direction y, p -> p.
        if self.mode == "generic":
            arrays = (1 + self.ndim + 1) + (4 + 2) + 2 + (2 + 1)
        else:
            arrays = (1 + self.ndim + 1) + (4 + self.jacobi + 2) + (2 + self.jacobi + 1)
        self._own_bytes = int(8 * arrays * self.n)
        self.update(A, prec_obj)

    def _residual_buffers(self, prec_obj):
        """``(r, y)``: the preconditioner's own buffers where it offers them
        (``device_buffers``: its cycle then reads ``r`` and writes ``y`` in
        place, no copy in or out), else the engine's."""
        offered = getattr(prec_obj, "device_buffers", None) if self.mode == "generic" else None
        buffers = offered() if offered is not None else None
        if buffers is not None:
            return buffers
        f64 = self.cp.float64
        return (self.cp.zeros(self.n, dtype=f64),
                self.cp.zeros(self.n if self.mode != "none" else 1, dtype=f64))

    def fits(self, A, prec_name):
        """Can :meth:`update` take ``A`` (the same slab, communicator and
        preconditioner kind)?"""
        return A.slab == self.slab and A.comm is self.comm and prec_name == self.prec_name

    def update(self, A, prec_obj):
        """Copy ``A``'s couplings (and the Jacobi diagonal) into the engine's
        buffers, or take a generic preconditioner's launches from ``r`` into
        ``y`` (new ones, and new graphs, for another preconditioner);
        returns ``self``."""
        cp, P, nloc = self.cp, self.plane, self.nloc
        slow = self.ndim - 1
        cs = self.cs.reshape(nloc + 1, P)
        cs[1:nloc] = A._inner[slow].reshape(nloc - 1, P)
        cs[0] = 0 if A._to_lower is None else A._to_lower.reshape(P)
        cs[nloc] = 0 if A._to_upper is None else A._to_upper.reshape(P)
        for buf, c in zip(self.in_plane, A._inner[:slow]):
            buf[...] = cp.ascontiguousarray(c).reshape(-1)
        if self.jacobi:
            self.dinv[...] = prec_obj.inv_diagonal.reshape(-1)
        self.bytes_per_iteration = self._own_bytes
        if self.mode == "generic":
            if self._prec_of is not prec_obj:
                # (A new preconditioner's buffers: the graphs are keyed by it.)
                if self._prec_of is not None:
                    self.r, self.dinv = self._residual_buffers(prec_obj)
                self.prec_launches = list(prec_obj.device_launches(self.r, self.dinv,
                                                                   self.scal[DONE:DONE + 1]))
                self._prec_of = prec_obj
            apply_bytes = getattr(prec_obj, "bytes_per_apply", None)
            if callable(apply_bytes):
                self.bytes_per_iteration += int(apply_bytes())
        return self

    def _precondition(self):
        """``y = M^-1 r`` by the generic preconditioner's launches."""
        from .stages import launch

        launch(self.prec_launches)

    def _precondition_start(self):
        """``y = M^-1 r`` at a solve's start: launched directly the first
        time for a preconditioner (NCCL sets up the connections of its
        collectives at their first call, which a capture cannot hold), then
        replayed from a CUDA graph of the same launches (the cycle's
        hundred-odd launches are one from the host)."""
        graphs = self.use_graphs and self.comm.name in CAPTURABLE
        held = self._start_graph
        if not graphs or held is None or held[0] is not self._prec_of:
            self._precondition()
            if graphs:
                self._start_graph = (self._prec_of, None)     # captured at the next start
            return
        graph = held[1]
        if graph is None:
            # Every rank captures (or fails) alike and they agree before any
            # replay, as for the iterations' graphs.
            graph, _ = self._capture(self._precondition, synchronize=True)
            if self.comm.sum_int(0 if graph is not None else 1):
                graph = None
            if graph is None:
                self.use_graphs = False
                self._precondition()
                return
            graph = self.comm.hold_graph(graph)
            self._start_graph = (self._prec_of, graph)
        graph.launch()

    # ------------------------------------------------------------- protocol
    def tolerance(self, bnorm, tol_rel):
        """The solve's ``1 / ||b||`` and relative tolerance into the device
        scalars."""
        self.scal[INV_BNORM] = 1.0 / bnorm
        self.scal[TOL_REL] = tol_rel

    def begin(self, x, r, hist, it, bnorm=None, tol_rel=0.0, own=False):
        """Start from ``x`` (None: zero) and its residual ``r``: ``y = M^-1 r``, ``rz =
        r . y`` over the ranks and ``p = y`` by the engine's kernels (the
        start's breakdown flag: ``rz`` not finite)."""
        self.scal.fill(0)
        self.scal[INV_BNORM] = 1.0 if bnorm is None else 1.0 / bnorm
        self.scal[TOL_REL] = 0.0 if bnorm is None else tol_rel
        self.counter[0] = it
        self.counters.fill(0)
        self._take(x, r)
        self.p_ext.fill(0)
        self.w.fill(0)
        self.hist = hist
        self._direct_left = 0 if self._begun else int(self.direct_first)
        self._begun = True
        s = self.scal
        if self.mode == "generic":
            self._precondition_start()
        self.k_start((self.blocks,), (_THREADS,),
                     (self.r, self.dinv, self.part, self.counters[1:2], s, np.uint32(self.n),
                      np.int32(self.blocks)))
        self.comm.allreduce_into(s[_SUMS_LOCAL:_SUMS_LOCAL + 2], s[_SUMS:_SUMS + 2])
        self._direction(start=1)

    def load(self, x, r, p, rz, bad, hist, it, bnorm, tol_rel=0.0):
        """Take the Krylov loop's state after a restart."""
        self._take(x, r)
        self.p_view[...] = p.reshape(-1)
        self.scal[BETA] = 0
        self.scal[RZ] = rz
        self.scal[BAD] = bad
        self.scal[DONE] = 0
        self.hist = hist
        self.counter[0] = it
        self.tolerance(bnorm, tol_rel)

    def _take(self, x, r):
        if x is None:                          # the zero guess: no copy of zeros
            self.x.fill(0)
        elif x is not self.x:
            self.x[...] = x.reshape(-1)
        if r is not self.r:
            self.r[...] = r.reshape(-1)

    @property
    def r_current(self):
        return self.r

    @property
    def p(self):
        return self.p_view

    # ----------------------------------------------------------- iteration
    def _spmv(self, lo_planes, hi_planes, part0, blocks, finish):
        (a0, a1), (b0, b1) = lo_planes, hi_planes
        cy = self.in_plane[1] if self.ndim == 3 else self.in_plane[0]
        self.k_spmv((blocks,), (_THREADS,),
                    (self.p_ext, self.cs, self.in_plane[0], cy, self.w, self.part,
                     self.counters[0:1], self.scal, np.int32(self.nx), np.int32(self.ny),
                     np.int32(a0), np.int32(a1), np.int32(b0), np.int32(b1), np.int32(part0),
                     np.int32(finish), np.int32(self.inner_blocks + self.edge_blocks)))

    def _direction(self, start=0):
        self.k_direction((self.blocks,), (_THREADS,),
                         (self.p_view, self.r, self.dinv, self.counters[2:3], self.counter,
                          self.scal, self.hist, np.uint32(self.n), np.int32(start)))

    def _launch_iteration(self):
        """One iteration's launches and the ranks' calls (see the module)."""
        nloc, P, s, comm, slab = self.nloc, self.plane, self.scal, self.comm, self.slab
        p = self.p_ext
        handle = None
        if slab.lower is not None or slab.upper is not None:
            handle = comm.start_exchange(slab.lower, slab.upper, p[P:2 * P],
                                         p[nloc * P:(nloc + 1) * P], p[:P],
                                         p[(nloc + 1) * P:(nloc + 2) * P])
        if self.inner_blocks:
            self._spmv((1, nloc - 1), (0, 0), 0, self.inner_blocks, 0)
        if handle is not None:
            comm.wait(handle)
        edges = ((0, 1), (nloc - 1, nloc)) if nloc >= 2 else ((0, 1), (0, 0))
        self._spmv(*edges, self.inner_blocks, self.edge_blocks, 1)
        comm.allreduce_into(s[_PW_LOCAL:_PW_LOCAL + 1], s[_PW:_PW + 1])
        self.k_update((self.blocks,), (_THREADS,),
                      (self.x, self.p_view, self.r, self.w, self.dinv, self.part,
                       self.counters[1:2], s, np.uint32(self.n), np.int32(self.blocks)))
        if self.mode == "generic":
            self._precondition()
            self.k_ry((self.blocks,), (_THREADS,),
                      (self.r, self.dinv, self.part, self.counters[3:4], s, np.uint32(self.n),
                       np.int32(self.blocks)))
        comm.allreduce_into(s[_SUMS_LOCAL:_SUMS_LOCAL + 2], s[_SUMS:_SUMS + 2])
        self._direction()

    def iterate(self, count):
        """``count`` iterations, no host synchronisation: runs of
        :attr:`graph_iterations` and single iterations replayed from CUDA
        graphs (captured on first use, and again when the history buffer
        moved), else launched directly; the engine's first solve launches
        its runs directly until :attr:`direct_first` iterations have been."""
        if self._direct_left > 0:
            self._direct_left -= count
            self._direct(count)
            return
        if count <= 0:
            return
        graphs = self.use_graphs and self.comm.name in CAPTURABLE
        lengths = []
        if graphs:
            self._new_signature((self.hist.data.ptr, id(self._prec_of)))
            lengths = [length for length in (int(self.graph_iterations), 1) if length >= 1]
        self._run(count, lengths, self._graph)

    def _graph(self, length):
        """The CUDA graph of ``length`` iterations (captured on first use),
        or None where capture fails here (direct launches from then on)."""
        if length in self._graphs:
            return self._graphs[length]
        # Every rank captures (or fails) alike: the same launches, the same
        # library; a rank whose capture fails stops using graphs, and the
        # ranks agree on it before any replay (a graph's NCCL calls must
        # meet the other ranks' calls one for one).
        graph, _ = self._capture(lambda: self._direct(length), synchronize=True)
        if self.comm.sum_int(0 if graph is not None else 1):
            graph = None
        if graph is None:
            self.use_graphs = False
        self._graphs[length] = graph = self.comm.hold_graph(graph)
        return graph
