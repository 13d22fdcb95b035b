"""The whole gas phase's quantities from the volume fraction: a CLSVOF
flow's benchmark diagnostics, one row per step.

The gas volume, centroid and rise velocity are moments of ``c`` (``c = 1``
all gas) over every cell, whatever the number of bubbles: sums over the
cells, which on a rank's slab are the slab's sums totalled over the ranks
(``padding.total``), then read to the host in one transfer.  Each bubble
on its own (the connected gas regions, labelled and measured, and followed
from sample to sample) is :mod:`.gas_regions` and :mod:`.bubble_tracking`.

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``velocity`` the MAC face components in grid-axis order, the last one
vertical.
"""
from __future__ import annotations

from . import vof_cuda
from ..compute.backend import array_module, backend_of
from ..compute.twins import twin
from ..mesh.grid import array_axis
from .padding import WALLS, along
from .vof_limits import times_cell_volume

__all__ = ["gas_volume", "gas_sums", "gas_quantities", "gas_diagnostics"]


def gas_volume(c, spacing):
    """Gas volume (area in 2-D) ``sum(c)`` times the cell volume, read to
    the host.

    Parameters
    ----------
    c : array
        Gas volume fraction.
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    float
    """
    return times_cell_volume(float(array_module(c).sum(c)), spacing)


@twin
def gas_sums(c, velocity, spacing, padding=WALLS):
    """The sums the gas's quantities are made of, on the device.

    Parameters
    ----------
    c : array
        Gas volume fraction (a rank's slab with a slab's ``padding``).
    velocity : tuple of arrays
        MAC face velocities in grid-axis order (the slab's faces, both end
        faces included).
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    padding : WallPadding or SlabPadding
        ``padding.offset`` is the slab's first plane along array axis 0 in
        the grid, ``padding.total`` sums the slabs' sums over the ranks;
        :data:`.padding.WALLS` for the whole grid in one process.

    Returns
    -------
    array
        ``[sum c, sum c x, sum c y[, sum c z], sum c w]`` over the whole grid
        (``x, y, z`` the cell centres, ``w`` the vertical velocity at the
        cell centre: the mean of the cell's two faces).
    """
    xp = backend_of(c, *velocity).xp
    nd = c.ndim
    top = velocity[-1]
    k = array_axis(nd, nd - 1)
    vc = 0.5 * (top[along(nd, k, slice(None, -1))] + top[along(nd, k, slice(1, None))])
    sums = [xp.sum(c)]
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        first = padding.offset if k == 0 else 0
        shape = [1] * nd
        shape[k] = c.shape[k]
        x = ((xp.arange(first, first + c.shape[k], dtype=c.dtype) + 0.5) * h).reshape(shape)
        sums.append(xp.sum(c * x))
    sums.append(xp.sum(c * vc))
    return padding.total(xp.stack(sums))


def gas_quantities(sums, spacing):
    """The gas's size, centroid and rise velocity from :func:`gas_sums`' totals.

    Parameters
    ----------
    sums : host array
        :func:`gas_sums`' result, read to the host.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    Returns
    -------
    dict
        Host floats: ``area`` (2-D) or ``volume`` (3-D), ``centroid_x,
        centroid_y[, centroid_z]`` and ``rise_velocity``, the last weighted
        by ``c``; NaN quotients without gas.  In 2-D the keys of the level
        set's benchmark quantities they replace for a CLSVOF flow.
    """
    nd = len(spacing)
    mass, *moments = (float(v) for v in sums)
    size = "area" if nd == 2 else "volume"
    names = ["centroid_" + "xyz"[a] for a in range(nd)]
    if mass <= 0.0:
        nan = float("nan")
        return {size: 0.0, **{n: nan for n in names}, "rise_velocity": nan}
    out = {size: times_cell_volume(mass, spacing)}
    out.update({n: w / mass for n, w in zip(names, moments[:nd])})
    out["rise_velocity"] = moments[nd] / mass
    return out


def gas_diagnostics(c, velocity, spacing, padding=WALLS):
    """The gas's size, centroid and rise velocity from the volume fraction
    (host floats, one transfer): :func:`gas_quantities` of :func:`gas_sums`.

    Parameters
    ----------
    c : array
        Gas volume fraction (a rank's slab with a slab's ``padding``).
    velocity : tuple of arrays
        MAC face velocities in grid-axis order.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    padding : WallPadding or SlabPadding
        As for :func:`gas_sums`.

    Returns
    -------
    dict
        As :func:`gas_quantities`.
    """
    host = backend_of(c, *velocity).to_host(gas_sums(c, velocity, spacing, padding))
    return gas_quantities(host, spacing)


# The CUDA variant (vof_cuda.py): the sums in two launches, one process.
gas_sums.register("cupy")(vof_cuda.gas_sums)
