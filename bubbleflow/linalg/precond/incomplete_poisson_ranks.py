"""Scaled incomplete Poisson on the ranks of a distributed operator.

``M^-1 = D^-1/2 (I - L~) (I - L~^T) D^-1/2`` (:class:`~.incomplete_poisson.ScaledIncompletePoisson`,
its n-D face form) on the rank's slab widened by its halo planes: the
scaled couplings of the widened slab (the halo cells' ``D^-1/2`` swapped
once with the neighbours at set-up), and two swaps an application, of
``z = D^-1/2 r`` before the upper pass and of its result ``t`` before the
lower one.  The same preconditioner as one process's, summed in another
order.
"""
from __future__ import annotations

from .incomplete_poisson import _face_sides

__all__ = ["DistributedScaledIncompletePoisson"]


class DistributedScaledIncompletePoisson:
    """Scaled incomplete Poisson for the slab of ``A_rank`` (a DistributedOperator)."""

    name = "incomplete_poisson_scaled"

    def __init__(self, A_rank):
        self.A = A_rank
        xp = A_rank.backend.xp
        slab = A_rank.slab
        _, _, self.below, _ = slab.extended()
        self.nloc = slab.hi - slab.lo
        s = 1.0 / xp.sqrt(A_rank.diagonal().reshape(slab.local_shape))
        self.s = s
        s_ext = self._widened(s)
        self.faces = tuple(c * s_ext[lo] * s_ext[hi] for c, (lo, hi) in
                           zip(A_rank.couplings(), _face_sides(s.ndim)))
        self._sides = _face_sides(s.ndim)

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
        z = self._widened(self.s * r.reshape(self.s.shape))
        t = z.copy()
        for c, (lo, hi) in zip(self.faces, self._sides):
            t[lo] += c * z[hi]                        # - L~^T z: the upper neighbours
        inner = slice(self.below, self.below + self.nloc)
        t = self._widened(t[inner].copy())            # the neighbours' t on the halo planes
        u = t.copy()
        for c, (lo, hi) in zip(self.faces, self._sides):
            u[hi] += c * t[lo]                        # - L~ t: the lower neighbours
        return (self.s * u[inner]).reshape(shape)
