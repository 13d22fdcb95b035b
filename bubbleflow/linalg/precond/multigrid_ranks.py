"""The multigrid V-cycle on the ranks of a distributed operator.

The hierarchy is :class:`~.multigrid.Multigrid`'s (every rank holds the
global operator and builds it: aggregates of 2 cells per axis, Galerkin
couplings, a float64 cycle).  A level whose rank slabs start on an even
plane (and end on one, but for the top rank) is smoothed and restricted on
the slabs (:func:`~.multigrid.chebyshev_smooth` with the level's
distributed product, :func:`~.multigrid.restrict` on the slab's own
aggregates); from the first level where that no longer holds, the ranks
gather the restricted residual and every rank runs the rest of the cycle on
the whole (small) coarse grid, keeping its slab of the result.  The cycle is
the one-process cycle's (a V-cycle): the same preconditioner, summed in
another order.
"""
from __future__ import annotations

import numpy as np

from ...mesh.ranks import RankSlab
from ...operators.distributed import DistributedOperator
from .multigrid import Multigrid, chebyshev_smooth, prolong_add, restrict

__all__ = ["DistributedMultigrid"]


class DistributedMultigrid:
    """Multigrid for the rank's slab of ``A_rank`` (a DistributedOperator
    of the grid operator ``A``, which every rank holds)."""

    name = "multigrid"

    def __init__(self, A, A_rank, degree=2, ratio=4.0, scale=1.8, coarsest=512, min_side=16):
        self.whole = Multigrid(A, degree=degree, ratio=ratio, scale=scale, coarsest=coarsest,
                               cycle_precision="float64", w_levels=0, min_side=min_side)
        self.comm, self.xp = A_rank.comm, A_rank.backend.xp
        self.degree, self.ratio, self.scale = int(degree), float(ratio), float(scale)
        levels = self.whole.levels
        lo, hi = A_rank.slab.lo, A_rank.slab.hi
        self.ranked = []            # (product, inverse diagonal, slab) of the slabs' levels
        while len(self.ranked) < len(levels) - 1 and _local_aggregates(lo, hi, levels[
                len(self.ranked)].shape[0]):
            level = levels[len(self.ranked)]
            slab = RankSlab(level.shape, A_rank.slab.rank, A_rank.slab.size, lo, hi)
            op = DistributedOperator.from_couplings(level.couplings, slab, self.comm,
                                                    A_rank.backend)
            self.ranked.append((op, level.inv_diagonal[lo:hi], slab))
            lo, hi = lo // 2, (hi + 1) // 2
        # Every rank gathers from the same level: the first any rank cannot slab.
        self.gathered = -int(self.comm.allreduce_max(-len(self.ranked)))
        self.ranked = self.ranked[:self.gathered]
        lo, hi = A_rank.slab.lo, A_rank.slab.hi
        for _ in range(self.gathered):
            lo, hi = lo // 2, (hi + 1) // 2
        self._gathered_slab = (lo, hi)          # this rank's planes of the gathered level
        self._shape = (A_rank.slab.hi - A_rank.slab.lo,) + tuple(levels[0].shape[1:])

    def _cycle(self, k, b):
        if k == self.gathered:
            parts = self.comm.allgather(b)
            whole = self.whole._cycle(k, np.concatenate(parts, axis=0))
            lo, hi = self._gathered_slab
            return whole[lo:hi]
        op, inv, _ = self.ranked[k]
        x = chebyshev_smooth(op.matvec, inv, b, None, self.degree, self.ratio)
        xc = self._cycle(k + 1, restrict(b - op.matvec(x), self.xp))
        return chebyshev_smooth(op.matvec, inv, b, prolong_add(x, xc, self.scale), self.degree,
                                self.ratio)

    def apply(self, r):
        return self._cycle(0, r.reshape(self._shape)).ravel()


def _local_aggregates(lo, hi, planes):
    """Whether slab ``lo:hi`` of ``planes`` planes holds whole aggregates of
    two planes (the top slab may end on the odd last plane alone)."""
    return lo % 2 == 0 and (hi % 2 == 0 or hi == planes) and hi > lo
