"""Multigrid on a rank's slab, its coarse levels agglomerated on every rank.

The hierarchy is :class:`~.multigrid.Multigrid`'s (aggregates of 2 cells
per axis, Galerkin couplings, the cycle's precision), built on the slabs of
a :class:`~bubbleflow.operators.distributed.DistributedOperator`: a level
whose rank slabs start on an even plane (and end on one, but for the top
rank) holds whole aggregates, so each rank coarsens its own couplings
(:func:`~.multigrid.coarsen_axis`; the faces to its halo planes are its own
rows' couplings), and is smoothed and restricted on the slabs
(:func:`~.multigrid.chebyshev_smooth` with the level's distributed product,
:func:`~.multigrid.restrict` on the slab's own aggregates).  From the first
level where that no longer holds, the ranks agglomerate that (small)
level: they gather its couplings once, every rank builds the rest of the
hierarchy on it (:meth:`~.multigrid.Multigrid.from_couplings`), and in each
cycle they gather the restricted residual there and every rank runs the
rest of the cycle on the whole coarse grid, keeping its slab of the result.
No rank holds the fine grid's whole operator.  The cycle is the
one-process cycle's (its precision, its W levels): the same
preconditioner, summed in another order.

The slabs hold whole aggregates on as many levels as can be when their
edges fall on multiples of :func:`slab_alignment`.

:func:`slab_cycle_runner` is what runs the cycle on a backend: the array
cycle above, or on CuPy the one-GPU kernels on widened slabs replayed from
a CUDA graph (:mod:`.slab_cycle_cuda`).
"""
from __future__ import annotations

import numpy as np

from ...compute.transfer import on_backend
from ...compute.twins import twin
from ...mesh.grid import array_axis
from ...mesh.ranks import RankSlab, coarsening_align
from ...operators.distributed import DistributedOperator
from ...operators.poisson import centre_from_couplings
from . import slab_cycle_cuda
from .base import Preconditioner
from .multigrid import (Multigrid, abs_peak, auto_w_levels, chebyshev_smooth,
                        check_coarse_refresh, coarsen_axis, cycle_bytes, level_shapes, prolong_add,
                        restrict, write_io_scale)

__all__ = ["DistributedMultigrid", "slab_alignment", "slab_cycle_runner", "gather_couplings"]


class DistributedMultigrid(Preconditioner):
    """Multigrid for the rank's slab of ``A_rank`` (a DistributedOperator);
    the options are :class:`~.multigrid.Multigrid`'s, and so is the cycle
    (its precision, its W levels).  ``gather_cells``: the whole-level size
    at or below which the CUDA cycle gathers a level on every rank (None:
    :data:`.slab_cycle_cuda.GATHER_CELLS`; 0: only where a slab is thinner
    than its halo); the arithmetic is the same either way."""

    name = "multigrid"

    def __init__(self, A_rank, degree=2, ratio=4.0, scale=1.8, coarsest=512, min_side=16,
                 cycle_precision="float32", w_levels="auto", gather_cells=None,
                 coarse_refresh="auto"):
        self.comm, self.backend, self.xp = A_rank.comm, A_rank.backend, A_rank.backend.xp
        self.degree, self.ratio, self.scale = int(degree), float(ratio), float(scale)
        self.coarsest, self.min_side = int(coarsest), int(min_side)
        # Where a cycle runner may gather earlier than the array cycle (None:
        # its own choice; 0: only where it must).
        self.gather_cells = gather_cells
        self.dtype = np.dtype(cycle_precision)
        shapes = level_shapes(A_rank.slab.shape, int(coarsest), int(min_side))
        self.n_levels = len(shapes)
        self.w_levels = auto_w_levels(shapes) if w_levels == "auto" else w_levels
        self.coarse_refresh = check_coarse_refresh(coarse_refresh)
        options = dict(degree=degree, ratio=ratio, scale=scale, coarsest=coarsest,
                       min_side=min_side, cycle_precision=cycle_precision,
                       coarse_refresh=coarse_refresh)
        # The rank's slab on every level: aggregates of two planes halve it.
        slabs = [(A_rank.slab.lo, A_rank.slab.hi)]
        for _ in shapes[1:]:
            lo, hi = slabs[-1]
            slabs.append((lo // 2, (hi + 1) // 2))
        own = next((k for k in range(len(shapes) - 1)
                    if not _local_aggregates(*slabs[k], shapes[k][0])), len(shapes) - 1)
        # Every rank gathers from the same level: the first any rank cannot slab.
        self.gathered = -int(self.comm.allreduce_max(-own))
        self._slabs, self._shapes = slabs, shapes
        self.slab = A_rank.slab
        self._shape = (A_rank.slab.hi - A_rank.slab.lo,) + tuple(shapes[0][1:])
        # [s_in, s_out]: the cycle's input and output scales (:meth:`prepare`).
        self.io_scale = self.xp.ones(2)
        levels = self._levels(A_rank)
        self.runner = slab_cycle_runner(self, levels)
        self.ranked, self.whole = [], None
        if self.runner is None:
            # The array cycle: the slabbed levels' products and inverse
            # diagonals, and the rest of the hierarchy on the gathered
            # level's couplings (a runner keeps its own).
            self._rank_levels(levels)
            self.whole = Multigrid.from_couplings(
                self.gathered_couplings(*levels[-1]), shapes[self.gathered],
                w_levels=max(int(self.w_levels) - self.gathered, 0),
                levels_above=self.gathered, **options)

    def _levels(self, A_rank, deepest=None):
        """Each slabbed level's float64 couplings (on its slab widened by
        one plane) and slab, down to the gathered level (or ``deepest``)."""
        return self._levels_of(tuple(c.astype(np.float64, copy=False)
                                     for c in A_rank.couplings()), A_rank.slab, deepest)

    def _levels_of(self, couplings, rank_slab, deepest=None):
        """:meth:`_levels` from the finest level's float64 ``couplings`` on
        ``rank_slab`` (widened by one plane)."""
        levels = []
        for k in range((self.gathered if deepest is None else deepest) + 1):
            slab = RankSlab(self._shapes[k], rank_slab.rank, rank_slab.size, *self._slabs[k])
            if k:
                couplings = _coarsen_slab(couplings, levels[-1][1], self.xp)
            levels.append((couplings, slab))
        return levels

    def _rank_levels(self, levels):
        """The array cycle's slabbed levels: products and inverse diagonals
        (new arrays: a float64 cycle's finest product is the caller's)."""
        self.ranked = []
        for k, (couplings, slab) in enumerate(levels):
            op = DistributedOperator(tuple(c.astype(self.dtype, copy=False) for c in couplings),
                                     slab, self.comm, self.backend)
            self.ranked.append((op, _inverse_diagonal(couplings, slab, self.xp, self.dtype),
                                self._slabs[k]))

    def gathered_couplings(self, couplings, slab):
        """The whole level's couplings on every rank from each rank's
        ``couplings`` of ``slab`` (:func:`gather_couplings`; collective)."""
        return gather_couplings(couplings, slab, self.comm, self.backend)

    def refresh(self, A_rank):
        """Take a new operator of the same slab in place: every level's
        arrays are overwritten, so the cycle's launches and its CUDA graph
        stay valid.  False (nothing done) where ``A_rank`` does not fit
        (another slab, communicator or backend); every rank answers alike
        in a flow, whose partition does not change."""
        fits = (getattr(A_rank, "slab", None) == self.slab and A_rank.comm is self.comm
                and A_rank.backend.xp is self.xp)
        if not fits:
            return False
        if self.runner is not None:
            # (The runner reads the levels down to the one it gathers.)
            couplings = tuple(c.astype(np.float64, copy=False) for c in A_rank.couplings())
            self.runner.refresh_from(couplings, lambda c: self._levels_of(
                c, A_rank.slab, self.runner.gathered))
            return True
        levels = self._levels(A_rank)
        self._rank_levels(levels)               # (the array cycle holds no graph)
        self.whole.refresh_couplings(self.gathered_couplings(*levels[-1]))
        return True

    def _gathered_hierarchies(self):
        """The whole coarse hierarchy this rank holds: the array cycle's or
        the runner's."""
        return [h for h in (self.whole, getattr(self.runner, "whole", None)) if h is not None]

    def renew(self):
        for whole in self._gathered_hierarchies():
            whole.renew()

    def solved(self, iterations):
        for whole in self._gathered_hierarchies():
            whole.solved(iterations)

    def interface_moved(self, cells):
        for whole in self._gathered_hierarchies():
            whole.interface_moved(cells)

    def check_flags(self):
        """The gathered hierarchies' pending flags (:meth:`Multigrid.check_flags`)."""
        return [f for whole in self._gathered_hierarchies() for f in whole.check_flags()]

    def check(self, values=None):
        """:meth:`Multigrid.check` of each gathered hierarchy (``values``:
        the host values of :meth:`check_flags`, else read now)."""
        values = None if values is None else iter(values)
        for whole in self._gathered_hierarchies():
            count = len(whole.check_flags())
            whole.check(None if values is None else [next(values) for _ in range(count)])

    def _cycle(self, k, b):
        if k == self.gathered:
            gathered = np.concatenate(self.comm.allgather(b), axis=0)
            whole = self.whole._cycle(0, on_backend(gathered, self.backend))
            lo, hi = self.ranked[k][2]
            return whole[lo:hi]
        op, inv, _ = self.ranked[k]
        x = chebyshev_smooth(op.matvec, inv, b, None, self.degree, self.ratio)
        bc = restrict(b - op.matvec(x), self.xp)
        xc = self._cycle(k + 1, bc)
        if k < self.w_levels and k + 1 < self.n_levels - 1:
            xc = xc + self._cycle(k + 1, bc - self.ranked[k + 1][0].matvec(xc))
        return chebyshev_smooth(op.matvec, inv, b, prolong_add(x, xc, self.scale), self.degree,
                                self.ratio)

    def bytes_per_apply(self, io_itemsize=8):
        """Bytes one cycle moves on this rank, by the model of
        :meth:`Multigrid.bytes_per_apply`: the slab's levels down to the
        gathered one, then the whole coarse cycle every rank runs (the
        gather itself not counted); a runner counts its own levels."""
        if self.runner is not None:
            return self.runner.bytes_per_apply(io_itemsize)
        item = self.dtype.itemsize
        cells = [int(np.prod(op.grid_shape)) for op, _, _ in self.ranked]
        couplings = [sum(int(c.size) for c in op.couplings()) * item for op, _, _ in self.ranked]
        return cycle_bytes(cells, couplings, item, io_itemsize, self.w_levels, self.n_levels,
                           lambda io: self.whole.bytes_per_apply(io_itemsize=io))

    def prepare(self, b):
        """:meth:`Multigrid.prepare`'s scales (powers of two) from the
        largest ``|b|`` over the ranks, on the device (one all-reduce of
        the maxima; no host read)."""
        peak = self.xp.empty(1)
        self.comm.allreduce_max_into(abs_peak(b), peak)
        write_io_scale(peak, self.io_scale)

    @property
    def device_cycle(self):
        """Does the cycle run on the device by launches a Krylov engine may
        take (:meth:`device_launches`)?"""
        return hasattr(self.runner, "device_launches")

    def device_launches(self, r, y, stop):
        """The launches of ``y = M^-1 r`` that a device engine's graph may
        hold, skipped where the device flag ``stop`` is set
        (:meth:`.slab_cycle_cuda.SlabGraphCycle.device_launches`), or None
        where the array cycle runs."""
        return self.runner.device_launches(r, y, stop) if self.device_cycle else None

    def device_buffers(self):
        """``(r, y)`` a device engine may keep its residual in and take
        ``M^-1 r`` from, so that :meth:`device_launches` copies neither
        (:meth:`.slab_cycle_cuda.SlabGraphCycle.device_buffers`), or None."""
        return self.runner.device_buffers() if self.device_cycle else None

    def apply(self, r):
        if self.runner is not None:
            return self.runner.apply(r)
        s_in, s_out = self.io_scale[0], self.io_scale[1]
        b = (r * s_in).reshape(self._shape).astype(self.whole.dtype, copy=False)
        return (self._cycle(0, b).ravel() * s_out).astype(r.dtype, copy=False)


@twin
def slab_cycle_runner(mg, levels):
    """What runs ``mg``'s cycle (a :class:`DistributedMultigrid`) on its
    backend, given its slabbed levels' float64 ``(couplings, slab)``: None
    for the array cycle (:meth:`DistributedMultigrid._cycle`); on CuPy a
    :class:`.slab_cycle_cuda.SlabGraphCycle`."""
    return None


def slab_alignment(shape, ranks, **options):
    """What the ranks' slab edges of a grid of array ``shape`` (planes
    first) fall on a multiple of: the aggregates of as many levels as can
    be (:func:`~bubbleflow.mesh.ranks.coarsening_align`)."""
    return coarsening_align(shape[0], ranks)


def _local_aggregates(lo, hi, planes):
    """Whether slab ``lo:hi`` of ``planes`` planes holds whole aggregates of
    two planes (the top slab may end on the odd last plane alone)."""
    return lo % 2 == 0 and (hi % 2 == 0 or hi == planes) and hi > lo


def _coarsen_slab(couplings, slab, xp):
    """The next level's couplings on the slab widened by its halo planes,
    from this level's (``slab`` holds whole aggregates): the own planes'
    faces coarsened as one process does, the faces to the halo planes from
    the faces to this level's (their in-plane couplings, never read, zero)."""
    _, _, below, above = slab.extended()
    nloc = slab.hi - slab.lo
    ndim = len(couplings)
    out = []
    for axis, c in enumerate(couplings):
        a = array_axis(ndim, axis)
        if a == 0:
            # Faces between aggregates: the odd ones of the grid; the widened
            # slab's first face lies between planes lo - below and lo - below + 1.
            out.append(coarsen_axis(c, 0, xp, first=(slab.lo - below + 1) % 2))
            continue
        own = coarsen_axis(c[below:below + nloc], a, xp)
        halo = xp.zeros((1,) + own.shape[1:], dtype=own.dtype)
        out.append(xp.concatenate([halo] * below + [own] + [halo] * above, axis=0))
    return tuple(out)


def _inverse_diagonal(couplings, slab, xp, dtype):
    """The inverse main diagonal of the slab's own cells (zero where a cell
    has no coupling), from the widened slab's float64 couplings."""
    _, _, below, _ = slab.extended()
    centre = centre_from_couplings(couplings, xp)[below:below + slab.hi - slab.lo]
    inv = xp.where(centre > 0, 1.0 / xp.where(centre > 0, centre, 1.0), 0.0)
    return inv.astype(dtype, copy=False)


def gather_couplings(couplings, slab, comm, backend):
    """The whole level's couplings from every rank's widened slab: each
    its own planes' faces, and of the faces between planes those above its
    cells (but the top wall)."""
    _, _, below, above = slab.extended()
    nloc = slab.hi - slab.lo
    ndim = len(couplings)
    whole = []
    for axis, c in enumerate(couplings):
        stop = below + nloc - (1 if axis == ndim - 1 and not above else 0)
        parts = comm.allgather(backend.to_host(c[below:stop]))
        whole.append(on_backend(np.concatenate(parts, axis=0), backend))
    return tuple(whole)


# The CUDA variant: the one-GPU kernels on widened slabs, one CUDA graph
# (NotImplemented, the array cycle, where they or the communicator do not cover it).
slab_cycle_runner.register("cupy")(slab_cycle_cuda.slab_cycle_runner)
