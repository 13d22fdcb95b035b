"""The ranks' multigrid cycle from the one-GPU kernels (CuPy, 2-D and 3-D).

CUDA twin of :class:`~.agglomerated_multigrid.DistributedMultigrid`'s array
cycle (registered on :func:`~.agglomerated_multigrid.slab_cycle_runner`;
the tests compare the two on the GPU, one rank and several).

Each rank keeps every slabbed level on its slab widened by
:func:`halo_planes` planes towards each neighbour, and runs the one-GPU
tile kernels (:mod:`.multigrid_cuda`: ``bf_mg_down`` and ``bf_mg_up``, or
their 3-D pipelines) on the widened array as if it were a grid of its
own.  Its edges towards a neighbour are false walls: a kernel's smoothing
is wrong next to them, by one more plane per Chebyshev step, and the halo
is wide enough that the slab's own planes are exact.  So a level needs
two halo swaps a visit, not one a matrix product: the restricted residual
(the coarse level's right-hand side) on the way down, and the coarse
level's result on the way up.  The halo is even, so the widened array's
aggregates of two planes are the grid's.

Below :data:`GATHER_CELLS` cells (or where a slab has fewer planes than
the halo), the ranks gather the level's right-hand side on every rank (one
all-gather on the device) and each runs the rest of the cycle on the
whole coarse grid with :class:`~.multigrid_cuda.GraphCycle`'s kernels
(both visits of a W level), keeping its widened slab of the result.

The launches and the communicator's calls (NCCL's swaps and all-gather on
the compute stream) are captured into one CUDA graph and replayed: a cycle
is one launch from the host, no host synchronisation.  The arithmetic is
the array cycle's, summed in another order (the kernels'), so results agree
to rounding.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.held_capture import CAPTURABLE, keyed_replays
from .multigrid import REPLAYED_REFRESH_CELLS, Multigrid, cycle_bytes, refresh_levels
from .multigrid_cuda import (GraphCycle, chebyshev_coef, covered, down_launch, level_kernel,
                             residual_launch, run_launch, up_launch)

__all__ = ["SlabGraphCycle", "slab_cycle_runner", "halo_planes", "GATHER_CELLS"]

#: Levels of at most this many cells (the whole grid's) are gathered on
#: every rank: below it a level's swaps and the slabs' launches cost more
#: than its kernels on the whole level take (measured on two GPUs from
#: 2^12 to 2^22: docs/performance_records.md).
GATHER_CELLS = 2 ** 20


def halo_planes(degree):
    """Halo planes of a widened level: the up kernel's result is wrong
    ``2 degree`` planes from a false wall (the pre-smoothed ``x`` it starts
    from ``degree``, its own steps ``degree`` more); even, so that the
    widened array's aggregates are the grid's."""
    h = 2 * int(degree)
    return h + h % 2


def slab_cycle_runner(mg, levels):
    """A :class:`SlabGraphCycle` for ``mg`` (a DistributedMultigrid on
    CuPy) and its slabbed levels' float64 ``(couplings, slab)``, or
    NotImplemented (the array cycle runs) where the kernels or the
    communicator do not cover it; every rank answers alike."""
    dtype = str(mg.dtype)
    ndim = len(levels[0][1].shape)
    ok = (getattr(mg.comm, "name", None) in CAPTURABLE and dtype in cuda.CTYPE
          and ndim in (2, 3))
    if ok:
        shape = (8,) * ndim
        faces = tuple(np.empty(shape[:ndim - 1 - a] + (7,) + shape[ndim - a:], dtype=dtype)
                      for a in range(ndim))
        ok = covered(faces, (np.empty(shape, dtype=dtype),), mg.degree) is not None
    if mg.comm.sum_int(0 if ok else 1):
        return NotImplemented
    return SlabGraphCycle(mg, levels)


class _Level:
    """A slabbed level on the rank: its slab, the halo planes below and
    above, the widened couplings (float64, where the halo is swapped, and
    the cycle's dtype, the kernels') and buffers."""

    def __init__(self, slab, halo, couplings, cp, dtype, io_dtype):
        self.slab = slab
        self.nloc = slab.hi - slab.lo
        self.below = halo if slab.lower is not None else 0
        self.above = halo if slab.upper is not None else 0
        self.shape = (self.below + self.nloc + self.above,) + tuple(slab.shape[1:])
        self.wides = self.faces = None
        if couplings is not None:
            slow = len(couplings) - 1
            self.wides = tuple(cp.zeros(self.shape[:1] + c.shape[1:], dtype=cp.float64)
                               for c in couplings)
            self.faces = tuple(cp.zeros(w[1:].shape if axis == slow else w.shape, dtype=dtype)
                               for axis, w in enumerate(self.wides))
        self.b = cp.zeros(self.shape, dtype=io_dtype)
        self.x = cp.zeros(self.shape, dtype=io_dtype)
        self.xs = cp.zeros(self.shape, dtype=dtype)
        self.own = slice(self.below, self.below + self.nloc)

    def coarse_view(self, coarse):
        """The planes ``first:stop`` of the ``coarse`` level's buffers that
        this widened array's aggregates make (the kernels' coarse layout):
        its halo is the coarse level's, and aggregates halve it."""
        first = coarse.below - self.below // 2
        return first, first + -(-self.shape[0] // 2)


class SlabGraphCycle:
    """The cycle of a DistributedMultigrid on this rank (see the module):
    buffers and launches built once, replayed from one CUDA graph."""

    def __init__(self, mg, levels):
        import cupy as cp

        self.cp, self.comm = cp, mg.comm
        self.degree, self.scale = mg.degree, mg.scale
        self.dtype = dtype = str(mg.dtype)
        self.halo = halo = halo_planes(mg.degree)
        self.coef = cp.asarray(chebyshev_coef(mg.degree, mg.ratio), dtype=dtype)
        self.io_scale = mg.io_scale                 # written by DistributedMultigrid.prepare
        self.never = cp.zeros(1)
        self.n_levels, self.w_levels = mg.n_levels, int(mg.w_levels)
        self.gather_cells = mg.gather_cells
        self.gathered = self._gather_level(levels)
        self.levels = []
        for k in range(self.gathered + 1):
            couplings, slab = levels[k]
            io = "float64" if k == 0 else dtype
            level = _Level(slab, halo, couplings if k < self.gathered else None, cp, dtype, io)
            if level.faces is not None:
                _fill_widened(couplings, level, self.comm)
            self.levels.append(level)
        self.acc = {k + 1: cp.zeros(self.levels[k + 1].shape, dtype=dtype)
                    for k in range(min(self.w_levels, self.gathered - 1))}
        self._whole_part(mg, levels)
        # The direct cycle's steps (apply), built at its first use: a Krylov
        # engine takes the steps of its own flag (device_launches).
        self.steps, self._stop = None, self.never
        self._by_flags = {}
        self.graph = None
        self._captured = False
        self.capture_error = None
        cells = int(np.prod(self.levels[0].slab.shape)) // self.comm.size   # (alike on every rank)
        self.replays = (keyed_replays(mg.backend, self.comm) if cells <= REPLAYED_REFRESH_CELLS
                        else None)

    # ------------------------------------------------------------ set-up
    def _gather_level(self, levels):
        """The first level every rank gathers: the array cycle's, or an
        earlier one of at most GATHER_CELLS cells or whose slabs are
        thinner than the halo on some rank (the same on every rank)."""
        limit = GATHER_CELLS if self.gather_cells is None else int(self.gather_cells)
        # Every level's vote, the ranks' largest in one collective.
        votes = [1.0 if (slab.hi - slab.lo) < self.halo or int(np.prod(slab.shape)) <= limit
                 else 0.0 for _, slab in levels]
        voted = self.comm.allreduce_maxima(votes)
        return next((k for k, v in enumerate(voted) if v > 0), len(levels) - 1)

    def _whole_part(self, mg, levels):
        """The gathered level's buffers and the whole coarse hierarchy from
        it, as a GraphCycle on unit scales (or the solve's on level 0)."""
        cp, k = self.cp, self.gathered
        level = self.levels[k]
        spans = self.comm.allgather(np.array([level.slab.lo, level.slab.hi]))
        self.spans = [(int(lo), int(hi)) for lo, hi in spans]
        self._gather = _DeviceGather(levels[k][0], level.slab, self.spans, self.comm, cp)
        couplings, slab = levels[k]
        self.whole = whole = Multigrid.from_couplings(
            self._gather(couplings), slab.shape, w_levels=max(self.w_levels - k, 0),
            levels_above=k,
            degree=mg.degree, ratio=mg.ratio, scale=mg.scale, coarsest=mg.coarsest,
            min_side=mg.min_side, cycle_precision=self.dtype,
            coarse_refresh=mg.coarse_refresh)
        io_scale = self.io_scale if k == 0 else cp.ones(2)
        self.whole_cycle = GraphCycle(whole.levels, whole.coarse_inverse, mg.degree, mg.ratio,
                                      mg.scale, whole.w_levels, io_scale)
        plane = tuple(level.slab.shape[1:])
        most = max(hi - lo for lo, hi in self.spans)
        io = level.b.dtype
        self.send = cp.zeros((most,) + plane, dtype=io)
        self.recv = cp.zeros((self.comm.size, most) + plane, dtype=io)
        self.wb = cp.zeros(level.slab.shape, dtype=io)
        self.wx = cp.zeros(level.slab.shape, dtype=io)
        self.wacc = cp.zeros(level.slab.shape, dtype=io)

    # ------------------------------------------------------------ launches
    def _cycle_steps(self, stop):
        """One cycle's steps, the level kernels returning at once where the
        device flag ``stop`` is set (the swaps and gathers still run: every
        rank's collectives meet one for one)."""
        self.steps, self._stop = [], stop
        if self.gathered:
            self._swap(self.levels[0], self.levels[0].b)
        self._visit(0)
        return self.steps

    def _launch(self, launch):
        self.steps.append(lambda: run_launch(launch))

    def _copy(self, dst, src):
        self.steps.append(lambda: self.cp.copyto(dst, src))

    def _swap(self, level, buf):
        """Fill ``buf``'s halo planes from the neighbours' own planes."""
        slab, h, comm = level.slab, self.halo, self.comm
        if slab.lower is None and slab.upper is None:
            return
        lo, hi = level.below, level.below + level.nloc

        def swap():
            comm.wait(comm.start_exchange(slab.lower, slab.upper, buf[lo:lo + h],
                                          buf[hi - h:hi], buf[:lo], buf[hi:]))
        self.steps.append(swap)

    def _flat(self, name, args, n):
        kernel = level_kernel(self.dtype, self.dtype, self.degree, name)
        self._launch((kernel, (max(1, min(-(-n // 256), 65535)),), (256,), (*args, np.int64(n)),
                      0))

    def _visit(self, k, out=None, summed=None):
        """Level ``k``'s launches: its right-hand side ``b`` valid on the
        slab and its halo (the gathered level: on the slab); its result
        left valid on both (level 0: on the slab) in ``out`` (by default
        the level's ``x``), plus ``summed`` where given (a W level's
        second visit: its last kernel adds the first visit's result)."""
        level = self.levels[k]
        if k == self.gathered:
            self._gathered_visit(level, twice=0 < k <= self.w_levels
                                 and k < self.n_levels - 1)
            return
        out = level.x if out is None else out
        coarse = self.levels[k + 1]
        lo, hi = level.coarse_view(coarse)
        io = str(level.b.dtype)
        io_scale = self.io_scale if k == 0 else self.whole_cycle.unit_scale
        self._launch(down_launch(self.dtype, io, level.faces, level.b, io_scale, self.coef,
                                 level.xs, coarse.b[lo:hi], self.degree, self._stop))
        correction = self._coarse_visit(k + 1)
        self._launch(up_launch(self.dtype, io, level.faces, level.b, io_scale, level.xs,
                               correction[lo:hi], self.coef, out, self.scale,
                               self.degree, self._stop, first=summed))
        if k:
            self._swap(level, out)

    def _coarse_visit(self, k):
        """Level ``k`` visited from above: once, or twice on a W level
        while it is slabbed (``x + V(b - A x)``, the sum written by the
        second visit's last kernel); returns the buffer of its result."""
        level = self.levels[k]
        if k < self.gathered:
            self._swap(level, level.b)
        self._visit(k)
        if k < self.gathered and k - 1 < self.w_levels and k < self.n_levels - 1:
            self._launch(residual_launch(self.dtype, self.degree, level.faces, level.x,
                                         level.b))
            self._swap(level, level.b)
            self._visit(k, out=self.acc[k], summed=level.x)
            return self.acc[k]
        return level.x

    def _gathered_visit(self, level, twice):
        """Every rank's slab of ``b`` gathered into the whole level, the
        whole coarse cycle (twice on a W level) and this rank's widened
        slab of its result."""
        nloc = level.nloc
        self._copy(self.send[:nloc], level.b[level.own])
        comm = self.comm
        self.steps.append(lambda: comm.allgather_into(self.send, self.recv))
        for r, (lo, hi) in enumerate(self.spans):
            self._copy(self.wb[lo:hi], self.recv[r, :hi - lo])
        launches = self.whole_cycle.cycle_launches(self.wb, self.wx, self._stop)
        for launch in launches:
            self._launch(launch)
        if twice:
            n = int(np.prod(self.wb.shape))
            self._flat("bf_mg_copy", (self.wx, self.wacc), n)
            self._launch(residual_launch(self.dtype, self.degree, self.whole.levels[0].couplings,
                                         self.wx, self.wb))
            for launch in launches:
                self._launch(launch)
            self._flat("bf_mg_add", (self.wx, self.wacc, self.wx), n)
        # The widened slab may reach past the grid where a neighbour's slab
        # is thinner than the halo: those planes are never read (the finer
        # level's aggregates reach half the halo), so only the grid's are copied.
        lo = level.slab.lo - level.below
        first, stop = max(lo, 0), min(lo + level.shape[0], level.slab.shape[0])
        self._copy(level.x[first - lo:stop - lo], self.wx[first:stop])

    def refresh(self, levels):
        """New couplings of the same levels (DistributedMultigrid.refresh):
        written into the widened faces and the gathered hierarchy in place,
        so the launches and the graph stay valid; the gathered level's
        couplings gathered on the device, no host copy."""
        self.whole.refreshed(self._refresh_arrays(levels))

    def _refresh_arrays(self, levels):
        """:meth:`refresh`'s launches: the widened faces, the gather and
        the gathered hierarchy's levels; the gathered coarsest level's
        float64 couplings."""
        for k, level in enumerate(self.levels[:self.gathered]):
            _fill_widened(levels[k][0], level, self.comm)
        gathered = tuple(c.astype(np.float64, copy=False)
                         for c in self._gather(levels[self.gathered][0]))
        return refresh_levels(gathered, self.whole.levels)

    def refresh_from(self, couplings, levels_of):
        """:meth:`refresh` of ``levels_of(couplings)`` (the finest level's
        float64 couplings on this rank's widened slab), its launches (the
        slabbed levels' coarsening, the fills and their swaps, the gather,
        the gathered levels' arrays) replayed from one CUDA graph
        (:class:`~bubbleflow.compute.held_capture.KeyedReplays`; every rank
        or none) on grids of at most
        :data:`.multigrid.REPLAYED_REFRESH_CELLS` cells a rank."""
        if self.replays is None:
            return self.refresh(levels_of(couplings))
        self.whole.refreshed(self.replays(
            "refresh", lambda *c: self._refresh_arrays(levels_of(c)), couplings))

    def bytes_per_apply(self, io_itemsize=8):
        """Bytes one cycle moves on this rank, by
        :meth:`.multigrid.Multigrid.bytes_per_apply`'s model: the slab's own
        planes of the slabbed levels, then the whole coarse cycle from the
        gathered level (the swaps and the gather not counted)."""
        item = np.dtype(self.dtype).itemsize
        cells = [int(np.prod(lv.slab.local_shape)) for lv in self.levels]
        couplings = [sum(int(np.prod((lv.nloc,) + f.shape[1:])) for f in lv.faces) * item
                     for lv in self.levels[:self.gathered]]
        couplings.append(sum(int(c.size) for c in self.whole.levels[0].couplings) * item)
        return cycle_bytes(cells, couplings, item, io_itemsize, self.w_levels, self.n_levels,
                           lambda io: self.whole.bytes_per_apply(io_itemsize=io))

    # ------------------------------------------------------------ running
    def _capture(self):
        """One CUDA graph of the steps; every rank agrees to use graphs
        (their NCCL calls must meet one for one) or none."""
        cp = self.cp
        if self.steps is None:
            self._cycle_steps(self.never)
        self._captured = True
        graph = None
        # One cycle launched directly first: NCCL sets up its connections at
        # a collective's first call, which a capture cannot hold.
        for step in self.steps:
            step()
        cp.cuda.get_current_stream().synchronize()
        stream = cp.cuda.Stream(non_blocking=True)
        # A counting communicator (the ranks' bench) counts the captured
        # calls apart and again at each replay; a plain one has no hook.
        counted = getattr(self.comm, "counted_during", lambda run: run())

        def steps():
            for step in self.steps:
                step()
        try:
            with stream:
                stream.begin_capture()
                try:
                    self._replay_counts = counted(steps)
                finally:
                    graph = stream.end_capture()
            stream.synchronize()
        except Exception as exc:               # capture unsupported here: direct launches
            graph, self.capture_error = None, repr(exc)
        if self.comm.sum_int(0 if graph is not None else 1):
            graph = None
        self.graph = self.comm.hold_graph(graph)

    def device_buffers(self):
        """``(r, y)``: flat float64 views of the finest level's right-hand
        side and result on this rank's own planes.  An engine that keeps
        its residual in ``r`` and takes the preconditioned residual from
        ``y`` hands them to :meth:`device_launches`, which then copies
        neither in nor out (two passes over the slab a cycle)."""
        top = self.levels[0]
        return top.b[top.own].reshape(-1), top.x[top.own].reshape(-1)

    def device_launches(self, r, y, stop):
        """The launches of ``y = M^-1 r`` (flat float64 device arrays the
        caller keeps): ``r`` into the finest level's buffer, a cycle whose
        level kernels return at once where the device flag ``stop`` is set
        (a Krylov engine's done flag), the slab of its result into ``y``; a
        CUDA graph of the caller's may hold them (buffers allocated once,
        NCCL's calls on the current stream).  Where ``r`` or ``y`` is the
        view :meth:`device_buffers` gives, its copy is left out.  The
        cycle's steps for a flag are built once."""
        cp, top = self.cp, self.levels[0]
        shape = top.slab.local_shape
        key = int(stop.data.ptr)
        if key not in self._by_flags:
            kept = self.steps, self._stop
            self._by_flags[key] = self._cycle_steps(stop)
            self.steps, self._stop = kept
        own_r, own_y = self.device_buffers()

        def copy_in():
            cp.copyto(top.b[top.own], r.reshape(shape), casting="unsafe")

        def copy_out():
            cp.copyto(y.reshape(shape), top.x[top.own], casting="unsafe")

        out = ([] if _same_array(r, own_r) else [copy_in]) + list(self._by_flags[key]) + \
            ([] if _same_array(y, own_y) else [copy_out])
        for step in out:
            step.capturable = True
        return out

    def apply(self, r):
        """``M^-1 r`` on this rank's slab (flat; ``r``'s dtype): ``r`` into
        the finest level's buffer, the cycle (one graph launch), the slab of
        its result copied out."""
        top = self.levels[0]
        self.cp.copyto(top.b[top.own], r.reshape(top.slab.local_shape), casting="unsafe")
        if not self._captured:
            self._capture()
        if self.graph is not None:
            self.graph.launch()
            replayed = getattr(self.comm, "replayed", None)
            if replayed is not None:
                replayed(self._replay_counts)
        else:
            for step in self.steps:
                step()
        return top.x[top.own].astype(r.dtype, copy=True).reshape(r.shape)


def _same_array(a, b):
    """Are ``a`` and ``b`` the same memory (the same start, size and dtype)?"""
    return a.data.ptr == b.data.ptr and a.size == b.size and a.dtype == b.dtype


def _fill_widened(couplings, level, comm):
    """A slabbed level's widened couplings (``level.faces``, in place) from
    its float64 couplings on the slab widened by one
    (:class:`~bubbleflow.operators.distributed.DistributedOperator`'s
    layout): each axis's faces as a field of the slab's cells (along the
    planes' axis the face below each plane, zero at the bottom wall) in
    ``level.wides``, the neighbours' planes of it swapped in, then cast to
    the cycle's dtype.  Every halo plane is received at each fill."""
    import cupy as cp

    slab = level.slab
    _, _, below, _ = slab.extended()
    nloc, h_lo, h_hi = level.nloc, level.below, level.above
    halo = max(h_lo, h_hi)
    slow = len(couplings) - 1
    for axis, (c, wide, out) in enumerate(zip(couplings, level.wides, level.faces)):
        own = wide[h_lo:h_lo + nloc]
        if axis != slow:
            own[...] = c[below:below + nloc]
        elif below:
            own[...] = c[:nloc]
        else:
            own[:1] = 0
            own[1:] = c[:nloc - 1]
        if h_lo or h_hi:
            comm.exchange(slab.lower, slab.upper, wide[h_lo:h_lo + halo],
                          wide[h_lo + nloc - halo:h_lo + nloc], wide[:h_lo], wide[h_lo + nloc:])
        cp.copyto(out, wide[1:] if axis == slow else wide, casting="same_kind")


class _DeviceGather:
    """The gathered level's whole couplings on every rank from each rank's
    float64 couplings on its slab widened by one: of every axis its own
    planes' faces, and of the faces between planes those above its cells
    (but the top wall), as :func:`.agglomerated_multigrid.gather_couplings`
    takes them, by one all-gather an axis on the device into buffers
    allocated once (each rank's rows padded to the most any rank has)."""

    def __init__(self, couplings, slab, spans, comm, cp):
        _, _, below, _ = slab.extended()
        slow, top = len(couplings) - 1, len(spans) - 1
        self.comm, self.below = comm, below
        self.rows = [[max(hi - lo - (1 if axis == slow and r == top else 0), 0)
                      for r, (lo, hi) in enumerate(spans)] for axis in range(len(couplings))]
        self.send, self.recv, self.whole = [], [], []
        for axis, c in enumerate(couplings):
            most, rest = max(self.rows[axis]), tuple(c.shape[1:])
            self.send.append(cp.zeros((most,) + rest, dtype=cp.float64))
            self.recv.append(cp.zeros((len(spans), most) + rest, dtype=cp.float64))
            self.whole.append(cp.zeros((sum(self.rows[axis]),) + rest, dtype=cp.float64))

    def __call__(self, couplings):
        for axis, c in enumerate(couplings):
            rows = self.rows[axis]
            own = rows[self.comm.rank]
            self.send[axis][:own] = c[self.below:self.below + own]
            self.comm.allgather_into(self.send[axis], self.recv[axis])
            at = 0
            for r, n in enumerate(rows):
                self.whole[axis][at:at + n] = self.recv[axis][r, :n]
                at += n
        return tuple(self.whole)
