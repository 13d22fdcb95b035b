"""The zero contour of a 2-D level set by marching squares: its segments,
its length and the gas area it encloses.

The contour is traced on the lattice of cell centres, the crossing on each
lattice edge placed by linear interpolation (second-order accurate), the
ambiguous saddle squares resolved by the sign of the mean of the four
corners.  Length and enclosed area come from the same polygon, so their
isoperimetric ratio -- the rising-bubble benchmark's circularity
(:mod:`.bubble_measures`) -- is at most 1.  The half cell between the
outermost centres and the walls is not covered: a contour reaching a wall
(a free surface) is short by at most about a cell width.

These are 2-D concepts (a surface in 3-D is measured by
:mod:`.bubble_measures`' co-area sum); the public functions take the grid's
``spacing`` and refuse another dimension.  Arrays have shape ``(ny, nx)``,
cell ``(j, i)`` centred at ``((i + 0.5) hx, (j + 0.5) hy)``; ``phi >= 0``
counts as liquid.
"""
from __future__ import annotations

import numpy as np

from ..compute.backend import array_module, backend_of
from ..compute.truth import any_true

__all__ = ["interface_length", "interface_segments", "contour_area", "contour_length_sum",
           "contour_area_sum", "plane_spacing"]


def plane_spacing(phi, spacing, what):
    """``(hx, hy)`` of a 2-D ``phi``; ValueError naming ``what`` otherwise."""
    if phi.ndim != 2 or len(spacing) != 2:
        raise ValueError(f"{what} is the marching-squares contour of a 2-D level set; got a "
                         f"{phi.ndim}-D one with spacing {tuple(spacing)} (in 3-D the "
                         f"surface is bubble_measures.bubble_diagnostics' 'surface')")
    return spacing


def _marching_squares(phi, hx, hy, xp, first_row=0):
    """Segments of the zero contour on the cell-centre lattice.

    Each lattice square has corners ``a = (j, i)``, ``b = (j, i+1)``,
    ``c = (j+1, i+1)``, ``d = (j+1, i)``; its edges are numbered 0 bottom
    (a-b), 1 right (b-c), 2 top (d-c), 3 left (a-d).  Returns a list of
    ``(mask, x0, y0, x1, y1)``: where ``mask`` is true the square holds the
    segment from ``(x0, y0)`` to ``(x1, y1)``.  ``first_row``: the grid row
    of ``phi``'s first (a rank's slab).
    """
    a = phi[:-1, :-1]
    b = phi[:-1, 1:]
    c = phi[1:, 1:]
    d = phi[1:, :-1]
    ny, nx = phi.shape
    xs = ((xp.arange(nx - 1, dtype=phi.dtype) + 0.5) * hx)[None, :]
    ys = ((xp.arange(first_row, first_row + ny - 1, dtype=phi.dtype) + 0.5) * hy)[:, None]
    pa, pb, pc, pd = a >= 0, b >= 0, c >= 0, d >= 0

    def frac(f, g, crossed):
        # Linear interpolation of the zero between two corners of opposite
        # sign; guarded so non-crossed edges never divide by zero.
        return xp.where(crossed, f / xp.where(crossed, f - g, 1.0), 0.0)

    cr = [pa != pb, pb != pc, pd != pc, pa != pd]
    t0 = frac(a, b, cr[0])
    t1 = frac(b, c, cr[1])
    t2 = frac(d, c, cr[2])
    t3 = frac(a, d, cr[3])
    zero = xp.zeros_like(a)
    pts = [
        (xs + t0 * hx, ys + zero),          # bottom
        (xs + hx + zero, ys + t1 * hy),     # right
        (xs + t2 * hx, ys + hy + zero),     # top
        (xs + zero, ys + t3 * hy),          # left
    ]
    count = cr[0].astype(xp.int8) + cr[1] + cr[2] + cr[3]
    two = count == 2
    four = count == 4
    # Saddle (all four edges crossed): decide the connectivity with the value
    # at the square's centre, the bilinear interpolant's mean.  If the centre
    # has the sign of corner a (hence of c), the a-c diagonal is connected and
    # the contour cuts off corners b and d; otherwise it cuts off a and c.
    # Deciding by the centre value is symmetric, so neighbouring squares
    # never disagree on a shared edge.
    centre_like_a = ((a + b + c + d) >= 0) == pa
    cut_bd = four & centre_like_a
    cut_ac = four & ~centre_like_a
    pairs = [
        (0, 1, (two & cr[0] & cr[1]) | cut_bd),   # around b
        (2, 3, (two & cr[2] & cr[3]) | cut_bd),   # around d
        (0, 3, (two & cr[0] & cr[3]) | cut_ac),   # around a
        (1, 2, (two & cr[1] & cr[2]) | cut_ac),   # around c
        (0, 2, two & cr[0] & cr[2]),
        (1, 3, two & cr[1] & cr[3]),
    ]
    return [(m, pts[p][0], pts[p][1], pts[q][0], pts[q][1]) for p, q, m in pairs]


def contour_length_sum(phi, hx, hy, xp, first_row=0):
    """The contour's length over the lattice squares of ``phi``, a device
    scalar (``first_row``: the grid row of ``phi``'s first, on a rank's slab)."""
    total = 0.0
    for m, x0, y0, x1, y1 in _marching_squares(phi, hx, hy, xp, first_row):
        seg = xp.sqrt((x1 - x0) ** 2 + (y1 - y0) ** 2)
        total = total + xp.sum(xp.where(m, seg, 0.0))
    return total


def contour_area_sum(phi, xp):
    """Area of the gas polygon bounded by the marching-squares contour, over
    ``hx hy`` (a device scalar).

    The region ``phi < 0`` is cut into lattice squares (cell centres at the
    corners) exactly as the contour traces it: in each square the gas part
    is the polygon of its gas corners and the crossings on its edges
    (linear interpolation), taken counter-clockwise round the square; its
    area is the shoelace sum.  In a saddle square whose centre is liquid the
    gas is two separate corner triangles, whose area is the square's less
    the liquid polygon.
    """
    a = phi[:-1, :-1]
    b = phi[:-1, 1:]
    c = phi[1:, 1:]
    d = phi[1:, :-1]
    la, lb, lc, ld = a >= 0, b >= 0, c >= 0, d >= 0

    def frac(f, g, crossed):
        return xp.where(crossed, f / xp.where(crossed, f - g, 1.0), 0.0)

    cr = [la != lb, lb != lc, ld != lc, la != ld]
    t0, t1, t2, t3 = frac(a, b, cr[0]), frac(b, c, cr[1]), frac(d, c, cr[2]), frac(a, d, cr[3])
    zero = xp.zeros_like(a)
    one = zero + 1.0
    # The square's eight candidate vertices, counter-clockwise from corner a,
    # in units of (hx, hy) relative to corner a.
    px = [zero, t0, one, one, one, t2, zero, zero]
    py = [zero, zero, zero, t1, one, one, one, t3]
    crossings = [cr[0], cr[1], cr[2], cr[3]]

    def polygon_area(corner_in):
        inc = [corner_in[0], crossings[0], corner_in[1], crossings[1],
               corner_in[2], crossings[2], corner_in[3], crossings[3]]
        # Left out vertices take the place of the previous vertex that is in
        # (a repeated vertex adds nothing to the shoelace sum); two rounds so
        # that the first vertices see the last ones.
        lx, ly = zero, zero
        for k in range(8):
            lx = xp.where(inc[k], px[k], lx)
            ly = xp.where(inc[k], py[k], ly)
        qx, qy = [], []
        for k in range(8):
            lx = xp.where(inc[k], px[k], lx)
            ly = xp.where(inc[k], py[k], ly)
            qx.append(lx)
            qy.append(ly)
        twice = zero
        for k in range(8):
            m = (k + 1) % 8
            twice = twice + qx[k] * qy[m] - qx[m] * qy[k]
        return 0.5 * twice

    gas = polygon_area([~la, ~lb, ~lc, ~ld])
    saddle = cr[0] & cr[1] & cr[2] & cr[3]
    liquid_centre = (a + b + c + d) >= 0
    split = saddle & liquid_centre
    if bool(any_true(split)):
        gas = xp.where(split, 1.0 - polygon_area([la, lb, lc, ld]), gas)
    return xp.sum(gas)


def interface_length(phi, spacing):
    """Length of the ``phi = 0`` contour of a 2-D level set by marching squares.

    Parameters
    ----------
    phi : array (ny, nx)
    spacing : (hx, hy)

    Returns
    -------
    float
    """
    hx, hy = plane_spacing(phi, spacing, "interface_length")
    if phi.shape[0] < 2 or phi.shape[1] < 2:
        return 0.0
    return float(contour_length_sum(phi, hx, hy, array_module(phi)))


def interface_segments(phi, spacing):
    """The marching-squares segments of the zero contour, as host arrays.

    Parameters
    ----------
    phi : array (ny, nx)
    spacing : (hx, hy)

    Returns
    -------
    numpy.ndarray, shape (m, 4)
        One row ``(x0, y0, x1, y1)`` per segment (in length units), the same
        segments :func:`interface_length` sums.  Handy for plots and for
        measuring how far a contour is from an exact shape.
    """
    hx, hy = plane_spacing(phi, spacing, "interface_segments")
    backend = backend_of(phi)
    xp = backend.xp
    if phi.shape[0] < 2 or phi.shape[1] < 2:
        return np.zeros((0, 4))
    rows = []
    for m, x0, y0, x1, y1 in _marching_squares(phi, hx, hy, xp):
        rows.append(xp.stack([x0[m], y0[m], x1[m], y1[m]], axis=1))
    return backend.to_host(xp.concatenate(rows, axis=0))


def contour_area(phi, spacing):
    """The gas area enclosed by the marching-squares contour
    (:func:`contour_area_sum` times the cell's area).

    This is the area enclosed by the very contour whose length
    :func:`interface_length` measures, so the two give a consistent
    isoperimetric ratio (at most 1, by the isoperimetric inequality for
    polygons).

    Parameters
    ----------
    phi : array (ny, nx)
    spacing : (hx, hy)

    Returns
    -------
    float
    """
    hx, hy = plane_spacing(phi, spacing, "contour_area")
    return float(contour_area_sum(phi, array_module(phi))) * hx * hy
