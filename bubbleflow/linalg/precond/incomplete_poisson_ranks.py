"""Incomplete Poisson, plain and scaled, on the ranks of a distributed operator.

Both forms are two passes over the faces between scalings
(:mod:`~.incomplete_poisson`): each cell takes its upper neighbours'
values, then its lower neighbours' results, a face of coupling ``c``
between cells ``lo`` and ``hi`` entering as ``c s_lo s_hi`` (scaled, ``s =
D^-1/2`` before and after) or as ``c / d_lo`` (plain).  On the rank's slab
widened by its halo planes: the face coefficients of the widened slab (the
halo cells' ``s`` or ``d`` swapped once with the neighbours at set-up), and
one swap an application, of the input: the upper pass then gives the lower
halo plane's result too (from that plane and the slab's first), which is
all the lower pass needs of the halo.  The same preconditioner as one
process's, summed in another order.
"""
from __future__ import annotations

from .incomplete_poisson import face_sides_per_axis, incomplete_poisson_passes

__all__ = ["DistributedScaledIncompletePoisson", "DistributedIncompletePoisson"]


class DistributedScaledIncompletePoisson:
    """Scaled incomplete Poisson for the slab of ``A_rank`` (a DistributedOperator)."""

    name = "incomplete_poisson_scaled"

    def __init__(self, A_rank):
        self.A = A_rank
        xp = A_rank.backend.xp
        slab = A_rank.slab
        _, _, self.below, _ = slab.extended()
        self.nloc = slab.hi - slab.lo
        self._sides = face_sides_per_axis(len(slab.local_shape))
        diagonal = A_rank.diagonal().reshape(slab.local_shape)
        self.s, self.faces = self._coefficients(diagonal, xp)

    def _coefficients(self, diagonal, xp):
        """``(s, faces)``: the scaling (None: none) and the widened slab's
        face coefficients."""
        s = 1.0 / xp.sqrt(diagonal)
        s_ext = self._widened(s)
        return s, tuple(c * s_ext[lo] * s_ext[hi]
                        for c, (lo, hi) in zip(self.A.couplings(), self._sides))

    def _widened(self, v):
        """``v`` on the slab widened by the neighbours' planes of it."""
        xp = self.A.backend.xp
        shape = (self.nloc + self.below + (1 if self.A.slab.upper is not None else 0),) + \
            tuple(v.shape[1:])
        ext = xp.empty(shape, dtype=v.dtype)
        ext[self.below:self.below + self.nloc] = v
        self.A.comm.exchange(self.A.slab.lower, self.A.slab.upper, v[0], v[-1], ext[0], ext[-1])
        return ext

    def apply(self, r):
        shape = r.shape
        r = r.reshape(self.A.slab.local_shape)
        z = self._widened(r if self.s is None else self.s * r)
        # (The upper halo plane's result lacks its own upper neighbour, but
        # it feeds only cells beyond the slab in the lower pass.)
        u = incomplete_poisson_passes(self.faces, z)[self.below:self.below + self.nloc]
        return (u if self.s is None else self.s * u).reshape(shape)


class DistributedIncompletePoisson(DistributedScaledIncompletePoisson):
    """The plain incomplete Poisson (Ament et al. 2010) for the slab of ``A_rank``."""

    name = "incomplete_poisson"

    def _coefficients(self, diagonal, xp):
        inv_ext = self._widened(1.0 / diagonal)
        return None, tuple(c * inv_ext[lo] for c, (lo, _) in zip(self.A.couplings(), self._sides))
