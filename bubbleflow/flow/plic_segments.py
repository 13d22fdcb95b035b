"""The PLIC interface of a 2-D volume fraction as segments.

In 2-D a cell's PLIC line (:func:`.plic_reconstruction.reconstruct`)
clipped to the cell is a segment; the segments of all interface cells are
the interface, which the level set is rebuilt from
(:func:`.vof_redistance.redistance`) and whose length is a gas region's
perimeter (:func:`.gas_regions.interface_measure`).  An interface lying
on a grid line leaves no cell with ``0 < c < 1``: the faces between a full
and an empty cell then carry it (:func:`face_segments`).

Arrays have shape ``(ny, nx)``; ``spacing`` is ``(hx, hy)``.
"""
from __future__ import annotations

from ..compute.backend import array_module
from ..compute.truth import any_true
from .plic_reconstruction import interface_mask, reconstruct
from .vof_limits import CLIP_TOLERANCE

__all__ = ["cell_segments", "face_segments", "segment_fields", "interface_segments"]


def cell_segments(c, spacing, normal_from=None):
    """PLIC segment of every cell, relative to the cell's centre.

    Parameters
    ----------
    c : array (ny, nx)
        Gas volume fraction.
    spacing : tuple of two floats
        ``(hx, hy)``.
    normal_from : array (ny, nx), optional
        Level set for the normals; by default Youngs' normals from ``c``.

    Returns
    -------
    tuple of arrays (ny, nx)
        ``(mask, mx, my, d, x0, y0, x1, y1)``: ``mask`` flags the interface
        cells (:func:`.plic_reconstruction.interface_mask`), ``(mx, my)`` is
        the unit normal out of the gas, the line is ``mx X + my Y = d`` with
        ``(X, Y)`` from the cell centre (the centre's signed distance to it
        is ``-d``, positive in the liquid) and ``(x0, y0)``-``(x1, y1)`` are
        the ends of its part inside the cell.  The ends are zero outside
        ``mask``.
    """
    xp = array_module(c)
    hx, hy = spacing
    mask = interface_mask(c)
    (mx, my), alpha = reconstruct(c, spacing, normal_from)
    d = alpha - 0.5 * (mx * hx + my * hy)
    # The line is p0 + s t, p0 = d m its point nearest the centre and
    # t = (-my, mx) its direction; clip s to the cell (Liang-Barsky).
    px, py = d * mx, d * my
    tx, ty = -my, mx
    big = 2.0 * (hx + hy)           # beyond any |s| inside the cell

    def bounds(p, t, half):
        moving = t != 0.0
        inv = 1.0 / xp.where(moving, t, 1.0)
        s0, s1 = (-half - p) * inv, (half - p) * inv
        return (xp.where(moving, xp.minimum(s0, s1), -big),
                xp.where(moving, xp.maximum(s0, s1), big))

    lo_x, hi_x = bounds(px, tx, 0.5 * hx)
    lo_y, hi_y = bounds(py, ty, 0.5 * hy)
    lo = xp.maximum(lo_x, lo_y)
    hi = xp.minimum(hi_x, hi_y)
    # A line through a corner can come out with lo a rounding above hi.
    mid = 0.5 * (lo + hi)
    crossed = lo <= hi
    lo = xp.where(crossed, lo, mid)
    hi = xp.where(crossed, hi, mid)
    ends = [px + lo * tx, py + lo * ty, px + hi * tx, py + hi * ty]
    zero = xp.zeros_like(c)
    return (mask, mx, my, d) + tuple(xp.where(mask, e, zero) for e in ends)


def face_segments(c, spacing):
    """Segments on the faces between a full and an empty cell.

    An interface lying on a grid line leaves no cell with ``0 < c < 1``;
    such a face is then the interface.

    Parameters
    ----------
    c : array (ny, nx)
        Gas volume fraction.
    spacing : tuple of two floats
        ``(hx, hy)``.

    Returns
    -------
    list of (int, tuple)
        Up to two ``(axis, segments)`` pairs, the array axis normal to the
        faces and their segments laid out as :func:`cell_segments`' (the
        right faces and the top faces of the cells, each held by the cell on
        its left or below); an empty list if there are none.
    """
    xp = array_module(c)
    hx, hy = spacing
    full = c >= 1.0 - CLIP_TOLERANCE
    empty = c <= CLIP_TOLERANCE
    zero = xp.zeros_like(c)
    layers = []
    for axis, half, across in ((1, 0.5 * hx, 0.5 * hy), (0, 0.5 * hy, 0.5 * hx)):
        lo = (slice(None), slice(None, -1)) if axis == 1 else (slice(None, -1), slice(None))
        hi = (slice(None), slice(1, None)) if axis == 1 else (slice(1, None), slice(None))
        # +1: gas below/left of the face (normal along +axis), -1 the reverse.
        sense = zero.copy()
        sense[lo] = xp.where(full[lo] & empty[hi], 1.0, xp.where(empty[lo] & full[hi], -1.0, 0.0))
        mask = sense != 0.0
        if not bool(any_true(mask)):
            continue
        along = xp.where(mask, half, 0.0)
        ends = [along, xp.where(mask, -across, 0.0), along, xp.where(mask, across, 0.0)]
        m, d = sense, sense * half
        if axis == 1:
            layers.append((axis, (mask, m, zero, d) + tuple(ends)))
        else:
            layers.append((axis, (mask, zero, m, d, ends[1], ends[0], ends[3], ends[2])))
    return layers


def segment_fields(seg):
    """The nine per-cell numbers of a segment layer (laid out as
    :func:`cell_segments`' result) that a nearest-segment search reads:
    ``[mask, mx, my, d, x0, y0, ex, ey, 1 / |e|^2]``, ``e`` the segment's
    vector from end 0 to end 1 (``1 / |e|^2`` zero for a segment shrunk to
    a point, a line through a corner)."""
    mask, mx, my, d, x0, y0, x1, y1 = seg
    xp = array_module(x0)
    ex, ey = x1 - x0, y1 - y0
    length2 = ex * ex + ey * ey
    inv_len2 = xp.where(length2 > 0.0, 1.0 / xp.where(length2 > 0.0, length2, 1.0), 0.0)
    return [mask.astype(x0.dtype), mx, my, d, x0, y0, ex, ey, inv_len2]


def interface_segments(c, spacing, normal_from=None):
    """The PLIC segment of every interface cell, in absolute coordinates.

    The segment is the part of the cell's PLIC line inside the cell.
    Interface cells are those with ``CLIP_TOLERANCE < c < 1 -
    CLIP_TOLERANCE``; full and empty cells (and the rounding-level fractions
    the advection clips) have none.

    Parameters
    ----------
    c : array (ny, nx)
        Gas volume fraction.
    spacing : tuple of two floats
        ``(hx, hy)``.
    normal_from : array (ny, nx), optional
        Level set for the normals (CLSVOF); by default Youngs' normals from ``c``.

    Returns
    -------
    mask : array of bool (ny, nx)
        True in the interface cells.
    x0, y0, x1, y1 : array (ny, nx)
        End points of the segments (walking from ``(x0, y0)`` to ``(x1, y1)``
        the gas is on the left); NaN where ``mask`` is false.
    """
    if c.ndim != 2:
        raise ValueError(f"interface segments of a {c.ndim}-D volume fraction: "
                         "segments are the 2-D interface")
    xp = array_module(c)
    hx, hy = spacing
    mask, _, _, _, x0, y0, x1, y1 = cell_segments(c, spacing, normal_from)
    ny, nx = c.shape
    xc = ((xp.arange(nx, dtype=c.dtype) + 0.5) * hx)[None, :]
    yc = ((xp.arange(ny, dtype=c.dtype) + 0.5) * hy)[:, None]
    nan = xp.full(c.shape, float("nan"), dtype=c.dtype)
    return (mask, xp.where(mask, x0 + xc, nan), xp.where(mask, y0 + yc, nan),
            xp.where(mask, x1 + xc, nan), xp.where(mask, y1 + yc, nan))
