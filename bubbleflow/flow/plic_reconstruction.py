"""PLIC reconstruction: the interface normal and plane of every cell.

From the gas volume fraction ``c`` (``c = 1`` all gas) a cell's PLIC plane
(line in 2-D) is its normal, estimated from ``c`` itself (Youngs' method)
or taken from a level set's gradient (CLSVOF, Sussman and Puckett 2000),
and the constant that makes the plane cut exactly ``c`` of the cell
(:func:`.plic.plane_constant`).  The volume fraction's advection, its
rebuilding of the level set and the gas regions' perimeters all start here.

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``; a
normal is a tuple of arrays in grid-axis order, unit, pointing out of the
gas (along ``grad phi``, ``phi < 0`` in the gas).
"""
from __future__ import annotations

from ..compute.backend import array_module
from ..mesh.grid import array_axis
from .padding import along
from .plic import plane_constant
from .vof_limits import CLIP_TOLERANCE

__all__ = ["cell_gradient", "interface_normal", "reconstruct", "plane_constants_where",
           "interface_mask"]


def cell_gradient(phi, spacing):
    """Central differences of ``phi`` at the cell centres, one-sided at
    walls (zero along an axis of one cell).

    Parameters
    ----------
    phi : array
        A cell field.
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    tuple of arrays
        The gradient's components in grid-axis order.
    """
    xp = array_module(phi)
    nd = phi.ndim
    out = []
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        g = xp.empty_like(phi)
        if phi.shape[k] > 1:
            s = lambda lo, hi: phi[along(nd, k, slice(lo, hi))]      # noqa: E731
            g[along(nd, k, slice(1, -1))] = (s(2, None) - s(None, -2)) / (2.0 * h)
            g[along(nd, k, slice(0, 1))] = (s(1, 2) - s(0, 1)) / h
            g[along(nd, k, slice(-1, None))] = (s(-1, None) - s(-2, -1)) / h
        else:
            g[...] = 0.0
        out.append(g)
    return tuple(out)


def _unit(normal, xp):
    """Normalise; a zero vector becomes ``-e_vertical`` (gas above, where a
    bubble's gas sits), so every cell has a usable plane."""
    norm2 = None
    for m in normal:
        norm2 = m * m if norm2 is None else norm2 + m * m
    norm = xp.sqrt(norm2)
    zero = norm == 0.0
    inv = 1.0 / xp.where(zero, 1.0, norm)
    last = len(normal) - 1
    return tuple(xp.where(zero, -1.0 if a == last else 0.0, m * inv)
                 for a, m in enumerate(normal))


def _youngs_difference(p, k, nd):
    """``p``'s central difference along array axis ``k``, smoothed ``[1, 2,
    1]`` along every other axis (``p`` padded by one cell all round).

    In 2-D the two sides are smoothed before their difference is taken, in
    3-D the difference is smoothed: the same numbers, but the order fixes
    the bits, and each dimension keeps its own."""
    def smooth(q):
        for j in range(nd):
            if j != k:
                q = (q[along(nd, j, slice(None, -2))] + 2.0 * q[along(nd, j, slice(1, -1))]
                     + q[along(nd, j, slice(2, None))])
        return q

    def difference(q):
        return q[along(nd, k, slice(2, None))] - q[along(nd, k, slice(None, -2))]

    return difference(smooth(p)) if nd == 2 else smooth(difference(p))


def interface_normal(c, spacing, normal_from=None):
    """Unit interface normal per cell, pointing out of the gas.

    Youngs' method: ``-grad c`` by central differences smoothed ``[1, 2,
    1]`` along every other axis (the corner gradients of the ``3^nd``
    neighbourhood averaged), with wall ghosts copying the wall cell.  It is
    first-order accurate: a plane is not recovered exactly in general.  With
    ``normal_from`` (a level set) its central-difference gradient
    (:func:`cell_gradient`) is used instead, which is exact for a linear phi.

    Parameters
    ----------
    c : array
        Gas volume fraction.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    normal_from : array, optional
        Level set whose gradient gives the normal.

    Returns
    -------
    tuple of arrays
        The unit normal in grid-axis order; ``-e_vertical`` (the last axis)
        where the gradient vanishes.
    """
    xp = array_module(c)
    if normal_from is not None:
        return _unit(cell_gradient(normal_from, spacing), xp)
    nd = c.ndim
    p = xp.pad(c, 1, mode="edge")
    out = []
    for a, h in enumerate(spacing):
        d = _youngs_difference(p, array_axis(nd, a), nd)
        # The normal points out of the gas: down the gradient of c.
        out.append(-d / (2.0 * 4.0 ** (nd - 1) * h))
    return _unit(tuple(out), xp)


def reconstruct(c, spacing, normal_from=None):
    """PLIC reconstruction: the plane ``m . x = alpha`` of every cell.

    Parameters
    ----------
    c : array
        Gas volume fraction.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    normal_from : array, optional
        Level set for the normal (see :func:`interface_normal`).

    Returns
    -------
    normal : tuple of arrays
        Unit normal out of the gas, in grid-axis order.
    alpha : array
        Plane constant from the cell's lowest corner (a length): the gas in
        the cell is ``m . x <= alpha`` and covers exactly ``c`` of it.
    """
    m = interface_normal(c, spacing, normal_from)
    return m, plane_constant(m, c, spacing)


def plane_constants_where(normal, c, spacing, where):
    """:func:`.plic.plane_constant` of the cells where ``where`` is true,
    zero elsewhere: for callers that read the planes of some cells only (the
    mixed or the interface ones), each of those cells with the bits the
    whole array's call would give it.

    Parameters
    ----------
    normal : tuple of arrays
        Unit normals in grid-axis order (:func:`interface_normal`).
    c : array
        Gas volume fraction.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    where : array of bool
        The cells whose plane is wanted.

    Returns
    -------
    array
        ``alpha`` shaped like ``c``.
    """
    alpha = array_module(c).zeros_like(c)
    alpha[where] = plane_constant(tuple(m[where] for m in normal), c[where], spacing)
    return alpha


def interface_mask(c):
    """Cells holding a piece of the interface: ``c`` clear of 0 and 1 by more
    than the rounding that the advection clips (:data:`.vof_limits.CLIP_TOLERANCE`)."""
    return (c > CLIP_TOLERANCE) & (c < 1.0 - CLIP_TOLERANCE)
