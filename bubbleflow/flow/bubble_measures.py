"""Benchmark quantities of a rising bubble: the gas's size, centroid, rise
velocity and shape, measured from the level set.

The flow steppers take the quantities every step with one host transfer:
:func:`bubble_sums` leaves a short vector of sums on the device (already
totalled over the ranks by the padding, :mod:`.padding`), the stepper
fetches it together with its other scalars, and :func:`bubble_quantities`
turns the host sums into the dict.  :func:`bubble_diagnostics` is both with
one transfer of its own.

The measure depends on the dimension (:data:`MEASURES`):

* 2-D, :class:`ContourMeasure` (Hysing et al. 2009): the moments of the
  smoothed gas weight ``1 - H_eps(phi)`` and the marching-squares contour's
  length and enclosed area (:mod:`.contour`), keys ``area``,
  ``centroid_x``, ``centroid_y``, ``rise_velocity``, ``interface_length``,
  ``contour_area``, ``circularity``;
* 3-D, :class:`VolumeMeasure` (Adelsberger et al. 2014): the sharp gas
  region's moments, the co-area surface and the sphericity, keys
  ``volume``, ``surface``, ``centroid_x``, ``centroid_y``, ``centroid_z``,
  ``rise_velocity``, ``sphericity``.

On CuPy, in 2-D on one process, :func:`bubble_sums` runs the CUDA kernels of
:mod:`.levelset_cuda` (two launches for the six sums).
"""
from __future__ import annotations

import math

from . import levelset_cuda
from ..compute.backend import array_module, backend_of
from ..compute.twins import twin
from ..mesh.grid import array_axis
from ..mesh.levelset import heaviside
from .contour import contour_area_sum, contour_length_sum
from .face_velocity import cell_velocity
from .padding import WALLS, along

__all__ = ["ContourMeasure", "VolumeMeasure", "MEASURES", "measure_of", "bubble_sums",
           "bubble_quantities", "bubble_diagnostics", "gas_area"]


class ContourMeasure:
    """The 2-D benchmark's quantities (Hysing et al. 2009).

    ``area``: the gas area ``integral of (1 - H_eps) dA`` (:func:`gas_area`);
    ``centroid_x``, ``centroid_y``: ``integral of x (1 - H) / area``, and of
    ``y``; ``rise_velocity``: ``integral of v_c (1 - H) / area`` with
    ``v_c`` the cell-centre vertical velocity (mean of the two faces);
    ``interface_length``: the marching-squares contour's length
    (:func:`.contour.interface_length`); ``contour_area``: the area enclosed
    by that same contour (:func:`.contour.contour_area`); ``circularity``:
    ``2 sqrt(pi contour_area) / interface_length``, the perimeter of the
    circle of equal area over the actual perimeter (1 for a circle, < 1
    otherwise).  Without gas (or without a contour) the quotients are NaN.

    The circularity takes the area from the contour, not the smoothed
    Heaviside ``area``: the latter is biased by about ``+0.13 (eps/R)^2``
    while the polygon's perimeter is short by about ``(h/R)^2 / 24``, which
    would put a resolved circle at 1.002 on a 40 x 80 grid (R = 10 cells).  Area
    and length of one polygon keep the ratio at most 1; a circle of radius
    R sampled as a signed distance gives ``1 - O((h/R)^2)`` (2e-5 at R =
    10 h).

    With several bubbles the quantities describe all the gas together
    (total area, mean centroid, mean rise velocity), and the circularity
    compares the total area with the total contour length, which includes
    every bubble's perimeter and, with a free surface, the free-surface line
    as well; it is then no longer a shape measure of any single bubble.

    On a rank's slab each lattice square between two rows is summed by the
    rank holding its lower row: the slab's squares take the next rank's
    first row (``padding.widened``).
    """

    def sums(self, phi, velocity, spacing, eps, padding=WALLS):
        """``[mass, x mass, y mass, v mass, contour length, contour area / (hx hy)]``
        of the part of the grid ``phi`` holds (a device vector)."""
        xp = array_module(phi, *velocity)
        hx, hy = spacing
        ny, nx = phi.shape
        first_row = padding.offset
        rows = padding.widened(phi, 1)
        # A part with a rank below (offset > 0) got that rank's last row
        # first: its squares are the lower rank's.
        squares = rows[1:] if first_row > 0 else rows
        w = 1.0 - heaviside(phi, eps, xp)
        x = (xp.arange(nx, dtype=phi.dtype) + 0.5) * hx
        y = (xp.arange(first_row, first_row + ny, dtype=phi.dtype) + 0.5) * hy
        vc = cell_velocity(velocity)[-1]
        contour = squares.shape[0] >= 2 and nx >= 2
        zero = xp.zeros((), dtype=phi.dtype)
        return xp.stack([xp.sum(w), xp.sum(w * x[None, :]), xp.sum(w * y[:, None]),
                         xp.sum(w * vc),
                         contour_length_sum(squares, hx, hy, xp, first_row) if contour else zero,
                         contour_area_sum(squares, xp) if contour else zero])

    def quantities(self, sums, spacing):
        """The dict from the whole grid's sums (host)."""
        hx, hy = spacing
        mass, wx, wy, wv, length, enclosed = (float(s) for s in sums)
        area = mass * hx * hy
        enclosed = enclosed * hx * hy
        nan = float("nan")
        if mass <= 0.0:
            return {"area": area, "centroid_x": nan, "centroid_y": nan,
                    "rise_velocity": nan, "interface_length": length, "contour_area": enclosed,
                    "circularity": nan}
        circ = 2.0 * math.sqrt(math.pi * enclosed) / length if length > 0 and enclosed > 0 else nan
        return {"area": area, "centroid_x": wx / mass, "centroid_y": wy / mass,
                "rise_velocity": wv / mass, "interface_length": length, "contour_area": enclosed,
                "circularity": circ}


#: The surface (perimeter in 2-D) of the ball of volume (area) ``V``, by
#: dimension: the sphericity is it over the gas's surface.
_BALL_SURFACE = {
    2: lambda V: 2.0 * math.sqrt(math.pi * V),
    3: lambda V: math.pi ** (1.0 / 3.0) * (6.0 * V) ** (2.0 / 3.0),
}


class VolumeMeasure:
    """The 3-D benchmark's quantities of the gas (``phi < 0``).

    ``volume``, the centroid ``centroid_x, centroid_y[, centroid_z]`` and
    ``rise_velocity`` (the mean vertical, last-axis, cell velocity) are the
    moments of the gas region.  With ``sharp`` (the default) they are the
    moments of the sharp region ``phi < 0``, extrapolated (Richardson) from
    the smoothed weights ``1 - H_eps(phi)`` and ``1 - H_2eps(phi)``: the
    smoothing biases each moment by ``c eps^2`` (a sphere's volume by ``0.39
    (eps/R)^2``; the rise velocity, which mixes in the liquid's velocity
    across the band, by 2.4 % at ``eps/R = 0.19`` in the 3-D benchmark).
    Without, the moments of ``1 - H_eps``.  ``surface`` = ``integral
    delta_eps(phi) |grad phi|`` (the co-area formula with the Heaviside's
    own delta; the length in 2-D); ``sphericity`` = ``pi^(1/3) (6 V)^(2/3) /
    A`` in 3-D (the area of the sphere of equal volume over the surface: 1
    for a sphere, the measure of Adelsberger et al. 2014), the circularity
    ``2 sqrt(pi A) / L`` in 2-D.

    A signed-distance sphere of radius 8, 12 and 16 cells (``eps = 1.5 h``)
    comes out with the volume within 1e-5, the surface 1.3e-3, 5.7e-4 and
    5.9e-4 and the sphericity 1 - 1.3e-3, 1 - 5.8e-4, 1 - 6e-4
    (tests/flow/test_flow_nd.py).  Without gas the quotients are NaN.
    """

    def __init__(self, sharp=True):
        self.sharp = sharp

    def sums(self, phi, velocity, spacing, eps, padding=WALLS):
        """``[mass, surface / cell, x mass, y mass[, z mass], vertical-velocity
        mass]`` of the part of the grid ``phi`` holds (a device vector)."""
        xp = array_module(phi, *velocity)
        nd = phi.ndim
        w = 1.0 - heaviside(phi, eps, xp)
        if self.sharp:
            w = (4.0 * w - (1.0 - heaviside(phi, 2.0 * eps, xp))) / 3.0
        grad2 = None
        for a, h in enumerate(spacing):
            k = array_axis(nd, a)
            p = padding.linear(phi, 1, k)
            d = (p[along(nd, k, slice(2, None))] - p[along(nd, k, slice(None, -2))]) / (2.0 * h)
            grad2 = d * d if grad2 is None else grad2 + d * d
        t = phi / eps
        delta = xp.where(xp.abs(t) < 1.0, 0.5 / eps * (1.0 + xp.cos(math.pi * t)), 0.0)
        sums = [xp.sum(w), xp.sum(delta * xp.sqrt(grad2))]
        for a, h in enumerate(spacing):
            shape = [1] * nd
            k = array_axis(nd, a)
            shape[k] = phi.shape[k]
            first = padding.offset if k == 0 else 0
            x = ((xp.arange(first, first + phi.shape[k], dtype=phi.dtype) + 0.5) * h).reshape(shape)
            sums.append(xp.sum(w * x))
        sums.append(xp.sum(w * cell_velocity(velocity)[-1]))
        return xp.stack(sums)

    def quantities(self, sums, spacing):
        """The dict from the whole grid's sums (host)."""
        nd = len(spacing)
        sums = [float(v) for v in sums]
        cell = math.prod(spacing)
        mass = sums[0]
        volume = mass * cell
        surface = sums[1] * cell
        out = {"volume": volume, "surface": surface}
        names = ["centroid_" + "xyz"[a] for a in range(nd)]
        nan = float("nan")
        if mass <= 0.0:
            out.update({n: nan for n in names}, rise_velocity=nan, sphericity=nan)
            return out
        out.update({name: value / mass for name, value in zip(names, sums[2:2 + nd])})
        out["rise_velocity"] = sums[2 + nd] / mass
        out["sphericity"] = _BALL_SURFACE[nd](volume) / surface if surface > 0.0 else nan
        return out


#: The benchmark's measure by the grid's dimension.
MEASURES = {2: ContourMeasure(), 3: VolumeMeasure()}


def measure_of(ndim, measure=None):
    """``measure``, or by default the benchmark's of an ``ndim``-D grid."""
    if measure is not None:
        return measure
    if ndim not in MEASURES:
        raise ValueError(f"no bubble measure for a {ndim}-D grid (2-D and 3-D only)")
    return MEASURES[ndim]


@twin
def bubble_sums(phi, velocity, spacing, eps, padding=WALLS, measure=None):
    """The sums behind the bubble quantities, totalled over the ranks.

    Parameters
    ----------
    phi : array
        The level set (a rank's slab with a slab's ``padding``).
    velocity : tuple of arrays
        The MAC face components, x first.
    spacing : tuple of float
        Cell sizes, x first.
    eps : float
        The Heaviside's width (``1.5 * max(spacing)``).
    padding : WallPadding or SlabPadding, optional
        Its ``total`` sums the parts' sums over the ranks.
    measure : ContourMeasure or VolumeMeasure, optional
        By default the dimension's (:data:`MEASURES`).

    Returns
    -------
    array
        A short vector on ``phi``'s device, for :func:`bubble_quantities`
        once on the host.
    """
    return padding.total(measure_of(phi.ndim, measure).sums(phi, velocity, spacing, eps, padding))


def bubble_quantities(sums, spacing, measure=None):
    """The bubble quantities from :func:`bubble_sums` on the host.

    Parameters
    ----------
    sums : numpy.ndarray
    spacing : tuple of float
    measure : ContourMeasure or VolumeMeasure, optional
        The one :func:`bubble_sums` took (by default the dimension's).

    Returns
    -------
    dict of float
        The measure's keys (the module docstring lists them).
    """
    return measure_of(len(spacing), measure).quantities(sums, spacing)


def bubble_diagnostics(phi, velocity, spacing, eps, padding=WALLS, measure=None):
    """Benchmark quantities of a rising bubble (host floats):
    :func:`bubble_sums` and :func:`bubble_quantities` with one device-to-host
    transfer.  On a rank's slab (``padding``) every rank calls it at once and
    gets the whole grid's quantities.

    Returns
    -------
    dict of float
        In 2-D the keys ``area``, ``centroid_x``, ``centroid_y``,
        ``rise_velocity``, ``interface_length``, ``contour_area``,
        ``circularity`` (:class:`ContourMeasure`); in 3-D ``volume``,
        ``surface``, ``centroid_x``, ``centroid_y``, ``centroid_z``,
        ``rise_velocity``, ``sphericity`` (:class:`VolumeMeasure`).
    """
    backend = backend_of(phi, *velocity)
    sums = bubble_sums(phi, velocity, spacing, eps, padding, measure)
    return bubble_quantities(backend.to_host(sums), spacing, measure)


def gas_area(phi, spacing, eps):
    """The gas's size ``integral of (1 - H_eps(phi))`` (midpoint rule over the
    cells): the area in 2-D, the volume in 3-D.

    ``H_eps`` is :func:`bubbleflow.mesh.levelset.heaviside`; use
    ``eps = 1.5 * max(spacing)`` as everywhere else.  For a signed distance
    the smoothing biases the area of a circle of radius R by about
    ``+0.13 (eps/R)^2`` relative.

    Returns
    -------
    float
    """
    xp = array_module(phi)
    size = float(xp.sum(1.0 - heaviside(phi, eps, xp)))
    for h in spacing:
        size = size * h
    return size


# The CUDA variant (levelset_cuda.py): the 2-D measure's six sums, one process.
bubble_sums.register("cupy")(levelset_cuda.bubble_sums)
