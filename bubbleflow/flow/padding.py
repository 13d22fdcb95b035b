"""Ghost layers of the flow's cell fields where the grid ends, and the axis
indexing the stencils use.

The level set's stencils (:mod:`.levelset`, :mod:`.bubble_measures`)
read a few cells past the first and last along each axis; a padding gives
them those ghost layers.  Where the grid ends at a wall, :class:`WallPadding`
extrapolates the field (a signed distance stays one) or repeats the wall
cell; on a rank's slab, :class:`bubbleflow.flow.slabs.SlabPadding` gives
along array axis 0 the neighbours' planes instead, so the same functions run
on the slabs and give one process's bits.  :data:`WALLS` is the one-process
grid's padding: the one-slab partition, whose every end is a wall.

Arrays have the grid's shape (``(nz, ny, nx)`` in 3-D, x fastest).
"""
from __future__ import annotations

from ..compute.backend import array_module

__all__ = ["along", "pad_linear", "pad_quadratic", "WallPadding", "WALLS"]


def along(ndim, axis, s):
    """The index selecting ``s`` (a slice) along array axis ``axis`` of an
    ``ndim``-D array, everything along the others."""
    index = [slice(None)] * ndim
    index[axis] = s
    return tuple(index)


def _ramp(k, ng, ndim, axis, dtype, xp):
    shape = [1] * ndim
    shape[axis] = ng
    return (xp.arange(1, ng + 1, dtype=dtype) if k > 0
            else xp.arange(ng, 0, -1, dtype=dtype)).reshape(shape)


def pad_linear(phi, ng, axis, xp):
    """``ng`` ghost layers at both ends of array axis ``axis``, extrapolated
    linearly (a signed distance stays one, so the one-sided stencils see no
    kink at a wall); one cell along the axis is repeated (nothing to
    extrapolate from)."""
    nd = phi.ndim
    if phi.shape[axis] < 2:
        return xp.repeat(phi, 2 * ng + 1, axis=axis)
    first, second = phi[along(nd, axis, slice(0, 1))], phi[along(nd, axis, slice(1, 2))]
    last, before = phi[along(nd, axis, slice(-1, None))], phi[along(nd, axis, slice(-2, -1))]
    low = first - (second - first) * _ramp(-1, ng, nd, axis, phi.dtype, xp)
    high = last + (last - before) * _ramp(1, ng, nd, axis, phi.dtype, xp)
    return xp.concatenate([low, phi, high], axis=axis)


def pad_quadratic(phi, axis, xp):
    """One ghost layer at both ends of ``axis`` by quadratic extrapolation:
    the central first and second differences at a wall cell become the
    second-order one-sided ones the curvature needs (a linear ghost would
    force a zero second derivative there)."""
    nd = phi.ndim
    if phi.shape[axis] < 3:
        return pad_linear(phi, 1, axis, xp)
    s = lambda a, b: phi[along(nd, axis, slice(a, b))]      # noqa: E731
    lo = 3.0 * s(0, 1) - 3.0 * s(1, 2) + s(2, 3)
    hi = 3.0 * s(-1, None) - 3.0 * s(-2, -1) + s(-3, -2)
    return xp.concatenate([lo, phi, hi], axis=axis)


class WallPadding:
    """The ghost layers of a field where the grid ends at walls: the level
    set extrapolated linearly (``linear``) or quadratically (``quadratic``,
    one layer), or each wall cell repeated (``edge``, one layer on every
    axis).

    The level set's functions take one (``padding``); a rank's slab has its
    own (:class:`bubbleflow.flow.slabs.SlabPadding`, the same methods),
    whose layers along array axis 0 are the neighbours' planes where the
    slab ends at another rank.  ``offset`` is the field's first plane of
    array axis 0 in the grid (0 here; a slab with a rank below has
    ``offset > 0``), ``total`` sums a vector of partial sums over the
    fields' parts and ``widened`` adds the neighbours' planes (both trivial
    here: one part, no neighbours).
    """

    offset = 0

    def total(self, sums):
        return sums

    def widened(self, f, ng, faces=False):
        return f

    def linear(self, phi, ng, axis):
        return pad_linear(phi, ng, axis, array_module(phi))

    def quadratic(self, phi, axis):
        return pad_quadratic(phi, axis, array_module(phi))

    def edge(self, phi):
        return array_module(phi).pad(phi, 1, mode="edge")


#: The one-process grid's padding.
WALLS = WallPadding()
