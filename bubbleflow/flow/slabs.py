"""The flow's fields on the ranks' slabs: ghost planes from the neighbours.

A rank holds the cells of its slab of planes along array axis 0
(:class:`bubbleflow.mesh.ranks.RankSlab`), and of the face velocities the
faces of those planes, the component normal to axis 0 with both of the
slab's end faces (a face between two slabs is held by both ranks).  The
level set's functions (:mod:`.levelset`) pad their fields where the grid
ends; on a slab, :class:`SlabPadding` gives them, along axis 0 where the
slab ends at another rank, that rank's planes (one swap each time a
function pads), and the walls' layers elsewhere: the same functions then
compute on the slab what one process computes on those planes.

The first step of flow cases on several ranks: the level set's advection,
reinitialisation, curvature and smoothing (tests/parallel).
"""
from __future__ import annotations

from ..compute.backend import backend_of
from .padding import WALLS

__all__ = ["SlabPadding"]


class SlabPadding:
    """The ghost layers of the fields on the slab of ``comm.rank``."""

    def __init__(self, comm, slab):
        self.comm, self.slab = comm, slab
        self.offset = slab.lo

    def total(self, sums):
        """The slabs' partial sums summed over the ranks."""
        return self.comm.allreduce_sum(sums)

    def widened(self, f, ng, faces=False):
        """``f`` with the neighbours' ``ng`` planes along array axis 0 where
        the slab ends at another rank (none at a wall): a field of the
        slab's cells, or with ``faces`` of its faces normal to axis 0 (both
        end faces held, so the neighbours' planes are those past them)."""
        own = f[1:-1] if faces else f
        _check_planes(own, ng)
        lower, upper = self.slab.lower, self.slab.upper
        if lower is None and upper is None:
            return f
        xp = backend_of(f).xp
        # The neighbours' planes are received into the widened array itself
        # (its first and last planes are contiguous): no concatenation.
        lo, n = (ng if lower is not None else 0), f.shape[0]
        out = xp.empty((lo + n + (ng if upper is not None else 0),) + f.shape[1:], dtype=f.dtype)
        out[lo: lo + n] = f
        self.comm.exchange(lower, upper, xp.ascontiguousarray(own[:ng]),
                           xp.ascontiguousarray(own[-ng:]), out[:lo] if lo else None,
                           out[lo + n:] if upper is not None else None)
        return out

    def _swap(self, phi, ng):
        """``(below, above)``: the lower neighbour's last ``ng`` planes of
        ``phi`` and the upper one's first (None where the slab ends at a
        wall); every rank calls it at once."""
        _check_planes(phi, ng)
        xp = backend_of(phi).xp
        lower, upper = self.slab.lower, self.slab.upper
        below = xp.empty_like(phi[:ng]) if lower is not None else None
        above = xp.empty_like(phi[-ng:]) if upper is not None else None
        self.comm.exchange(lower, upper, xp.ascontiguousarray(phi[:ng]),
                           xp.ascontiguousarray(phi[-ng:]), below, above)
        return below, above

    def _placed(self, p, ng, phi, widen=None):
        below, above = self._swap(phi, ng)
        if below is not None:
            p[:ng] = below if widen is None else widen(below)
        if above is not None:
            p[-ng:] = above if widen is None else widen(above)
        return p

    def linear(self, phi, ng, axis):
        p = WALLS.linear(phi, ng, axis)
        return p if axis != 0 else self._placed(p, ng, phi)

    def quadratic(self, phi, axis):
        p = WALLS.quadratic(phi, axis)
        return p if axis != 0 else self._placed(p, 1, phi)

    def edge(self, phi):
        # The neighbours' planes are repeated at the walls of the other axes,
        # as the wall cells of every axis are in one process.
        xp = backend_of(phi).xp
        widths = [(0, 0)] + [(1, 1)] * (phi.ndim - 1)
        p = WALLS.edge(phi)
        return self._placed(p, 1, phi, lambda plane: xp.pad(plane, widths, mode="edge"))


def _check_planes(phi, ng):
    """A slab field ``phi`` holds the ``ng`` planes its neighbours ask for."""
    if phi.shape[0] < ng:
        raise ValueError(f"a slab of {phi.shape[0]} planes: the neighbours' ghost layers "
                         f"need at least {ng}")
