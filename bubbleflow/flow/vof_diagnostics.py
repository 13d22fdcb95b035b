"""The gas's quantities from the volume fraction: a CLSVOF flow's benchmark
diagnostics, and in 2-D those of every gas region.

The gas volume, centroid and rise velocity are moments of ``c`` (``c = 1``
all gas): sums over the cells, which on a rank's slab are the slab's sums
totalled over the ranks (``padding.total``), then read to the host in one
transfer.  In 2-D the connected gas regions (bubbles, fragments) are
labelled and measured one by one, their perimeters the PLIC segments'
lengths (:mod:`.plic_segments`).

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``velocity`` the MAC face components in grid-axis order, the last one
vertical.
"""
from __future__ import annotations

import numpy as np

from ..compute.backend import array_module, backend_of
from ..compute.regions import label_regions
from ..mesh.grid import array_axis
from .padding import WALLS, along
from .plic_segments import interface_segments
from .vof_limits import CLIP_TOLERANCE, times_cell_volume

__all__ = ["gas_volume", "gas_sums", "gas_quantities", "gas_diagnostics",
           "region_diagnostics", "REGION_COLUMNS"]

#: The per-region quantities of :func:`region_diagnostics`, in order.
REGION_COLUMNS = ("area", "centroid_x", "centroid_y", "rise_velocity", "circularity")


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


def region_diagnostics(c, velocity, spacing, normal_from=None):
    """The gas quantities of every connected gas region of a 2-D volume
    fraction (host arrays, one transfer).

    Regions are the 4-connected sets of cells holding gas (``c`` above
    :data:`.vof_limits.CLIP_TOLERANCE`): a bubble, a fragment pinched off a
    filament, the gas above a free surface.  Per region: its area ``sum(c)
    hx hy``, its centroid and mean vertical velocity (weighted by ``c``, the
    cell-centre ``v``), and its circularity ``2 sqrt(pi area) / perimeter``,
    the perimeter being the summed length of its cells' PLIC segments
    (:func:`.plic_segments.interface_segments`, normals from ``normal_from``
    when given).  A region cut by a wall counts only its segments inside the
    domain.

    Parameters
    ----------
    c : array (ny, nx)
        Gas volume fraction.
    velocity : tuple of arrays
        MAC face velocities ``(u, v)``.
    spacing : tuple of two floats
        ``(hx, hy)``.
    normal_from : array (ny, nx), optional
        Level set for the segments' normals.

    Returns
    -------
    dict
        :data:`REGION_COLUMNS` -> float64 array, one entry per region, the
        regions ordered by centroid (y, then x): the same order on every
        backend, whatever the labelling's numbers.
    """
    if c.ndim != 2:
        raise ValueError(f"region diagnostics of a {c.ndim}-D volume fraction: "
                         "the gas regions are measured in 2-D only")
    xp = array_module(c)
    hx, hy = spacing
    v = velocity[1]
    ny, nx = c.shape
    labels, count = label_regions(c > CLIP_TOLERANCE)
    if count == 0:
        return {name: np.zeros(0) for name in REGION_COLUMNS}
    mask, x0, y0, x1, y1 = interface_segments(c, spacing, normal_from)
    length = xp.where(mask, xp.sqrt((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)), 0.0)
    x = (xp.arange(nx, dtype=c.dtype) + 0.5) * hx
    y = (xp.arange(ny, dtype=c.dtype) + 0.5) * hy
    vc = 0.5 * (v[:-1, :] + v[1:, :])
    flat = labels.ravel()
    sums = [xp.bincount(flat, weights=w.ravel(), minlength=count + 1)[1:]
            for w in (c, c * x[None, :], c * y[:, None], c * vc, length)]
    mass, wx, wy, wv, perimeter = backend_of(c).to_host_many(sums)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {"area": mass * hx * hy, "centroid_x": wx / mass, "centroid_y": wy / mass,
               "rise_velocity": wv / mass}
        out["circularity"] = np.where(perimeter > 0,
                                      2.0 * np.sqrt(np.pi * out["area"]) / perimeter, np.nan)
    order = np.lexsort((out["centroid_x"], out["centroid_y"]))
    return {name: np.ascontiguousarray(out[name][order]) for name in REGION_COLUMNS}
