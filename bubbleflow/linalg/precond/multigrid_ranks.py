"""The multigrid cycle on the ranks of a distributed operator.

The hierarchy is :class:`~.multigrid.Multigrid`'s (every rank holds the
global operator and builds it: aggregates of 2 cells per axis, Galerkin
couplings, the cycle's precision).  A level whose rank slabs start on an even
plane (and end on one, but for the top rank) is smoothed and restricted on
the slabs (:func:`~.multigrid.chebyshev_smooth` with the level's
distributed product, :func:`~.multigrid.restrict` on the slab's own
aggregates); from the first level where that no longer holds, the ranks
gather the restricted residual and every rank runs the rest of the cycle on
the whole (small) coarse grid, keeping its slab of the result.  The cycle is
the one-process cycle's (its precision, its W levels): the same
preconditioner, summed in another order.
"""
from __future__ import annotations

import numpy as np

from ...compute.transfer import on_backend
from ...mesh.ranks import RankSlab
from ...operators.distributed import DistributedOperator
from .multigrid import Multigrid, chebyshev_smooth, prolong_add, restrict

__all__ = ["DistributedMultigrid"]


class DistributedMultigrid:
    """Multigrid for the rank's slab of ``A_rank`` (a DistributedOperator
    of the grid operator ``A``, which every rank holds); the options are
    :class:`~.multigrid.Multigrid`'s, and so is the cycle (its precision, its
    W levels)."""

    name = "multigrid"

    def __init__(self, A, A_rank, degree=2, ratio=4.0, scale=1.8, coarsest=512, min_side=16,
                 cycle_precision="float32", w_levels="auto"):
        self.whole = Multigrid(A, degree=degree, ratio=ratio, scale=scale, coarsest=coarsest,
                               cycle_precision=cycle_precision, w_levels=w_levels,
                               min_side=min_side)
        self.comm, self.backend, self.xp = A_rank.comm, A_rank.backend, A_rank.backend.xp
        self.degree, self.ratio, self.scale = int(degree), float(ratio), float(scale)
        levels = self.whole.levels
        # The rank's slab on every level: aggregates of two planes halve it.
        slabs = [(A_rank.slab.lo, A_rank.slab.hi)]
        for _ in levels[1:]:
            lo, hi = slabs[-1]
            slabs.append((lo // 2, (hi + 1) // 2))
        own = next((k for k in range(len(levels) - 1)
                    if not _local_aggregates(*slabs[k], levels[k].shape[0])), len(levels) - 1)
        # Every rank gathers from the same level: the first any rank cannot slab.
        self.gathered = -int(self.comm.allreduce_max(-own))
        slabs = slabs[:self.gathered + 1]
        # The slabbed levels' products and inverse diagonals, and the gathered
        # level's product (a W level above it forms a residual there).
        self.ranked = []
        for k, (lo, hi) in enumerate(slabs):
            level = levels[k]
            slab = RankSlab(level.shape, A_rank.slab.rank, A_rank.slab.size, lo, hi)
            op = DistributedOperator.from_couplings(level.couplings, slab, self.comm,
                                                    A_rank.backend)
            self.ranked.append((op, level.inv_diagonal[lo:hi], (lo, hi)))
        self._shape = (A_rank.slab.hi - A_rank.slab.lo,) + tuple(levels[0].shape[1:])

    def _cycle(self, k, b):
        if k == self.gathered:
            gathered = np.concatenate(self.comm.allgather(b), axis=0)
            whole = self.whole._cycle(k, on_backend(gathered, self.backend))
            lo, hi = self.ranked[k][2]
            return whole[lo:hi]
        op, inv, _ = self.ranked[k]
        x = chebyshev_smooth(op.matvec, inv, b, None, self.degree, self.ratio)
        bc = restrict(b - op.matvec(x), self.xp)
        xc = self._cycle(k + 1, bc)
        if k < self.whole.w_levels and k + 1 < len(self.whole.levels) - 1:
            xc = xc + self._cycle(k + 1, bc - self.ranked[k + 1][0].matvec(xc))
        return chebyshev_smooth(op.matvec, inv, b, prolong_add(x, xc, self.scale), self.degree,
                                self.ratio)

    def prepare(self, b):
        """:meth:`Multigrid.prepare` with the largest ``|b|`` over the ranks."""
        peak = self.comm.allreduce_max(float(self.xp.abs(b).max()) if b.size else 0.0)
        self.whole.prepare(self.xp.asarray([peak]))

    def apply(self, r):
        s_in, s_out = self.whole.io_scale[0], self.whole.io_scale[1]
        b = (r * s_in).reshape(self._shape).astype(self.whole.dtype, copy=False)
        return (self._cycle(0, b).ravel() * s_out).astype(r.dtype, copy=False)


def _local_aggregates(lo, hi, planes):
    """Whether slab ``lo:hi`` of ``planes`` planes holds whole aggregates of
    two planes (the top slab may end on the odd last plane alone)."""
    return lo % 2 == 0 and (hi % 2 == 0 or hi == planes) and hi > lo
