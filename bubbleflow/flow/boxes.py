"""Boxes of cells that a step's work may be confined to.

Much of a step's work matters near the interface only: a sweep of the
volume fraction leaves an empty cell among empty neighbours as it was, and
the interface force reads the curvature only where the Heaviside changes.
Where the gas fills a small part of a large grid, such work runs on the box
of the cells that matter, widened by the cells its stencils reach, and
gives the whole grid's bits there (:mod:`.vof_advection`,
:mod:`.interface_force`).  This module finds the boxes (a kernel and a read
of six integers on a GPU: :mod:`.boxes_cuda`) and cuts the regions and
their faces out of the grid's arrays.

A box is ``(least, greatest)`` cell index along each array axis (host
ints); a region is a tuple of slices, one an array axis.
"""
from __future__ import annotations

import math

from ..compute.backend import array_module
from ..compute.truth import any_true
from ..compute.twins import twin
from ..mesh.grid import array_axis
from . import boxes_cuda
from .vof_limits import CLIP_TOLERANCE

__all__ = ["gas_box", "interface_box", "interface_box_bounds", "box_of_bounds", "region",
           "share", "face_region", "interior_face_region", "uncovered", "worth_a_box", "spares",
           "in_region", "MIN_CELLS", "MAX_SHARE", "UNKNOWN"]

#: By array module, the fewest cells of a grid whose work goes to a box:
#: on smaller grids the boxes' searches, their transfers and the copies
#: cost a step as much as the cells they spare, or more; on a GPU up to a
#: grid of millions of cells (measured: docs/performance_records.md, "Work
#: on the gas's and the interface's boxes").
MIN_CELLS = {"numpy": 1 << 15, "cupy": 1 << 24}
#: ... and where the widened box holds at most this share of the grid.
MAX_SHARE = 0.5


class _Unknown:
    def __repr__(self):
        return "boxes.UNKNOWN"


#: What a caller passes for a box it has not looked for (None is a box
#: looked for that holds no cell).
UNKNOWN = _Unknown()


def _box_of(held, xp):
    """The box of the true cells of the boolean array ``held``, or None."""
    if not bool(any_true(held)):
        return None
    box = []
    for k in range(held.ndim):
        others = tuple(b for b in range(held.ndim) if b != k)
        rows = xp.flatnonzero(held.any(axis=others))
        box.append((int(rows[0]), int(rows[-1])))
    return tuple(box)


@twin
def gas_box(c):
    """The box of the cells whose advection is not the identity: those
    neither empty (``c == 0``) nor left below zero past the clip
    (``c <= -CLIP_TOLERANCE``), NaN included; None where there are none."""
    xp = array_module(c)
    return _box_of((c != 0.0) & ~(c <= -CLIP_TOLERANCE), xp)


@twin
def interface_box(phi, bound):
    """The box of the cells with ``phi < bound`` (NaN included): the gas
    and the cells within ``bound`` of it; None where there are none."""
    xp = array_module(phi)
    return _box_of(~(phi >= bound), xp)


@twin
def interface_box_bounds(phi, bound):
    """:func:`interface_box` as six integers on ``phi``'s backend, not read
    yet: the least ``(i, j, k)`` (x first) and the greatest, or
    :data:`.boxes_cuda.NO_BOX` where no cell is met (:func:`box_of_bounds`
    reads them).  A step finds the next step's interface box so, read with
    its other figures in one transfer."""
    xp = array_module(phi)
    box = _box_of(~(phi >= bound), xp)
    bounds = boxes_cuda.NO_BOX.copy()
    if box is not None:
        for a, (lo, hi) in enumerate(box[::-1]):
            bounds[a], bounds[3 + a] = lo, hi
    return xp.asarray(bounds)


def box_of_bounds(bounds, ndim):
    """The box of the host integers :func:`interface_box_bounds` made, or None."""
    return boxes_cuda.box_of_bounds(bounds, ndim)


def worth_a_box(a):
    """Whether the grid array ``a`` has the cells (:data:`MIN_CELLS` of its
    array module; another module's, a GPU's) for its work to go to a box."""
    return a.size >= MIN_CELLS.get(array_module(a).__name__, MIN_CELLS["cupy"])


def region(box, margin, shape):
    """The slices of ``box`` widened by ``margin`` cells within ``shape``."""
    return tuple(slice(max(lo - margin, 0), min(hi + margin, n - 1) + 1)
                 for (lo, hi), n in zip(box, shape))


def share(cut, shape):
    """The share of the grid of ``shape`` that the region ``cut`` holds."""
    return math.prod(s.stop - s.start for s in cut) / math.prod(shape)


def spares(box, margin, shape):
    """Whether ``box`` (None: no box) widened by ``margin`` cells holds at
    most :data:`MAX_SHARE` of the grid of ``shape``."""
    return box is not None and share(region(box, margin, shape), shape) <= MAX_SHARE


def face_region(cut, grid_axis):
    """The slices of the faces of grid axis ``grid_axis`` (walls included)
    that bound the cells of the region ``cut``."""
    k = array_axis(len(cut), grid_axis)
    out = list(cut)
    out[k] = slice(cut[k].start, cut[k].stop + 1)
    return tuple(out)


def in_region(step, field, velocity, cut, *args, out=None):
    """``field`` with ``step(field[cut], velocity on cut's faces, *args)``
    written on the region ``cut`` (each contiguous, the region's faces taken
    as walls) and the field's own values elsewhere: a new array.  With
    ``out`` (an array of ``field``'s shape and dtype) the region is written
    there and ``out`` returned, what it held elsewhere left as it was."""
    xp = array_module(field)
    faces = tuple(xp.ascontiguousarray(v[face_region(cut, a)]) for a, v in enumerate(velocity))
    inside = step(xp.ascontiguousarray(field[cut]), faces, *args)
    out = field.copy() if out is None else out
    out[cut] = inside
    return out


def interior_face_region(cut, grid_axis):
    """The slices of the grid's interior faces of grid axis ``grid_axis``
    (face ``f`` between cells ``f`` and ``f + 1``) that lie between the
    cells of the region ``cut``."""
    k = array_axis(len(cut), grid_axis)
    out = list(cut)
    out[k] = slice(cut[k].start, cut[k].stop - 1)
    return tuple(out)


def uncovered(old, new):
    """Regions that together hold every cell of the region ``old`` outside
    the region ``new`` (slabs of ``old`` below and above ``new`` along each
    axis; they may overlap); none where ``new`` covers ``old``."""
    out = []
    for k, (o, n) in enumerate(zip(old, new)):
        for lo, hi in ((o.start, min(o.stop, n.start)), (max(o.start, n.stop), o.stop)):
            if lo < hi:
                slab = list(old)
                slab[k] = slice(lo, hi)
                out.append(tuple(slab))
    return out


# One kernel and a read of six integers; NotImplemented (the array code
# runs) for what it does not cover.
gas_box.register("cupy")(boxes_cuda.gas_box)
interface_box.register("cupy")(boxes_cuda.interface_box)
interface_box_bounds.register("cupy")(boxes_cuda.interface_box_bounds)
