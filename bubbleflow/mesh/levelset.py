"""Level-set description of the interface and the phase fields built from it.

Sign convention: ``phi > 0`` in the liquid, ``phi < 0`` in the gas, ``|phi|``
the distance to the interface (exactly for one circle or a flat surface; the
min/max combination of several shapes is a signed distance away from where
two shapes meet, which is all the smoothed Heaviside needs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..compute.backend import array_module
from ..compute.twins import twin
from . import levelset_cuda

__all__ = [
    "Circle", "geometry_circles", "place_random_bubbles", "build_levelset", "BUILD_PLANES",
    "heaviside", "PhaseFields", "phase_fields",
]


@dataclass(frozen=True)
class Circle:
    """A gas bubble (``gas=True``) or a liquid droplet; lengths in metres.
    In 3-D a sphere: ``z`` is its centre's height (vertical is the last
    axis), ``y`` its depth."""

    x: float
    y: float
    radius: float
    gas: bool = True
    z: float = None

    @property
    def centre(self):
        return (self.x, self.y) if self.z is None else (self.x, self.y, self.z)


def place_random_bubbles(spec, grid, avoid=()):
    """Non-overlapping random bubbles (spheres on a 3-D grid), reproducible
    from ``spec.seed``.

    Bubbles are drawn uniformly in ``spec.region`` (the whole domain when
    None), kept ``spec.min_gap`` apart from each other and from the circles in
    ``avoid``.  Raises ``ValueError`` when ``spec.count`` bubbles do not fit.
    """
    rng = np.random.default_rng(int(spec.seed))
    r = float(spec.radius)
    nd = grid.ndim
    region = spec.region if spec.region is not None else tuple(
        v for length in grid.lengths for v in (0.0, length))
    spans = [(float(region[2 * a]), float(region[2 * a + 1])) for a in range(nd)]
    gap = float(spec.min_gap)
    placed = []
    others = list(avoid)
    attempts = 0
    max_attempts = 2000 * int(spec.count)
    while len(placed) < spec.count:
        attempts += 1
        if attempts > max_attempts:
            box = " x ".join(f"[{lo}, {hi}]" for lo, hi in spans)
            raise ValueError(
                f"could place only {len(placed)} of {spec.count} bubbles of radius {r} "
                f"(min_gap {gap}) in the region {box}")
        # One draw per axis, x first: a 2-D seed names the same bubbles on every
        # run, so a study's stored seeds reproduce its cases.
        centre = tuple(float(rng.uniform(lo + r, hi - r)) for lo, hi in spans)
        if all(math.dist(centre, c.centre) >= r + c.radius + gap for c in placed + others):
            placed.append(Circle(centre[0], centre[1], r, gas=True,
                                 z=centre[2] if nd == 3 else None))
    return placed


def geometry_circles(geometry, grid):
    """All circles of a case's ``geometry`` section, in a fixed order."""
    from ..case.config import lattice_centres

    circles = [_circle(b, True) for b in geometry.bubbles]
    if geometry.bubble_lattice is not None:
        lat = geometry.bubble_lattice
        circles += [Circle(float(c[0]), float(c[1]), float(lat.radius), True,
                           z=float(c[2]) if len(c) == 3 else None)
                    for c in lattice_centres(lat)]
    if geometry.random_bubbles is not None:
        circles += place_random_bubbles(geometry.random_bubbles, grid, avoid=circles)
    circles += [_circle(d, False) for d in geometry.droplets]
    return circles


def _circle(spec, gas):
    """The :class:`Circle` of a case's ``{center, radius}`` (2 or 3 coordinates)."""
    c = [float(v) for v in spec.center]
    return Circle(c[0], c[1], float(spec.radius), gas, z=c[2] if len(c) == 3 else None)


#: Planes (rows in 2-D) of the vertical axis :func:`build_levelset` fills at
#: a time: a block's temporaries stay in the cache, and a shape too far from
#: a block to change it is skipped there.
BUILD_PLANES = 32


def build_levelset(grid, free_surface=None, circles=(), backend=None, planes=None):
    """Signed distance ``phi`` (the grid's shape) of the liquid region.

    Parameters
    ----------
    grid : Grid
        2-D or 3-D; the free surface is normal to the last (vertical) axis.
    free_surface : float or None
        Height (m) of a flat liquid surface; None fills the domain with liquid.
    circles : iterable of Circle
        Gas bubbles are cut out of the liquid, liquid droplets added to it
        (spheres in 3-D).
    backend : Backend, optional
        Where ``phi`` is built and returned (default: NumPy, on the host).
    planes : (int, int), optional
        Only the planes ``lo:hi`` of the vertical axis (array axis 0: a
        rank's slab), their values those of the whole grid's.

    Notes
    -----
    ``phi`` is ``min(free surface distance, min over bubbles (|x - c| -
    r))``, then ``max(.., max over droplets (r - |x - c|))``.  On the host
    it is filled :data:`BUILD_PLANES` planes at a time, and a shape whose
    distance to a block's planes bounds its term away from the block's
    current extreme is skipped there: min and max do not depend on the
    order, so the result has the bits of the passes over the whole grid,
    one shape at a time, at a fraction of the work for many shapes or a
    large grid.  On a GPU those passes run on the device (its ``hypot`` may
    round differently in the last bit).
    """
    lo, hi = planes if planes is not None else (0, grid.shape[0])
    if not 0 <= lo < hi <= grid.shape[0]:
        raise ValueError(f"planes {lo}:{hi} of a grid of {grid.shape[0]} planes")
    return _build(grid, free_surface, tuple(circles), backend, lo, hi)


def _terms(coords, circle):
    """``|x - c|`` of the cell centres ``coords`` (broadcastable arrays, x
    first) and the circle's (sphere's) centre."""
    centre = circle.centre
    if len(centre) != len(coords):
        raise ValueError(f"a centre of {len(centre)} coordinates on a {len(coords)}-D grid")
    xp = array_module(coords[0])
    if len(coords) == 2:
        return xp.hypot(coords[0] - centre[0], coords[1] - centre[1])
    return xp.sqrt(sum((x - c) ** 2 for x, c in zip(coords, centre)))


def _axes(grid, xp, planes=slice(None)):
    """The cell centres per grid axis as broadcastable arrays (x first), the
    vertical axis limited to ``planes``."""
    nd = grid.ndim
    out = []
    for a, centres in enumerate(grid.centres):
        c = xp.asarray(np.asarray(centres, dtype=np.float64)[planes if a == nd - 1 else
                                                               slice(None)])
        shape = [1] * nd
        shape[nd - 1 - a] = c.size
        out.append(c.reshape(shape))
    return out


def _fill(grid, free_surface, circles, coords, shape, xp, bound=None):
    """``phi`` on the cells of ``coords`` (of array ``shape``); ``bound(c)``:
    a lower bound of ``|x - c|`` over them (None: every shape is used)."""
    if free_surface is None:
        # Liquid everywhere: any positive distance larger than the domain will do.
        phi = xp.full(shape, sum(grid.lengths))
    else:
        phi = xp.broadcast_to(float(free_surface) - coords[-1], shape).copy()
    for c in circles:
        if c.gas and (bound is None or bound(c) - c.radius < float(phi.max())):
            phi = xp.minimum(phi, _terms(coords, c) - c.radius)
    for c in circles:
        if not c.gas and (bound is None or c.radius - bound(c) > float(phi.min())):
            phi = xp.maximum(phi, c.radius - _terms(coords, c))
    return phi


@twin
def _build(grid, free_surface, circles, backend, first, stop):
    """The passes over planes ``first:stop``, one shape at a time, on ``backend``."""
    xp = backend.xp if backend is not None else np
    return _fill(grid, free_surface, circles, _axes(grid, xp, slice(first, stop)),
                 (stop - first,) + grid.shape[1:], xp)


@_build.register("numpy")
def _build_by_blocks(grid, free_surface, circles, backend, first, stop):
    centres = np.asarray(grid.centres[-1], dtype=np.float64)
    phi = np.empty((stop - first,) + grid.shape[1:])
    for lo in range(first, stop, BUILD_PLANES):
        hi = min(lo + BUILD_PLANES, stop)
        near = (centres[lo], centres[hi - 1])
        # The vertical distance to the block's planes bounds the distance to them.
        bound = (lambda c, near=near: max(near[0] - c.centre[-1], c.centre[-1] - near[1], 0.0))
        phi[lo - first:hi - first] = _fill(
            grid, free_surface, sorted(circles, key=bound), _axes(grid, np, slice(lo, hi)),
            (hi - lo,) + grid.shape[1:], np, bound)
    return phi


# The CUDA variant (levelset_cuda.py, kernels in levelset.cu): one launch.
_build.register("cupy")(levelset_cuda.build)


def heaviside(phi, eps, xp=np):
    """Smoothed Heaviside of Sussman, Smereka and Osher (1994), width ``eps``."""
    t = xp.clip(phi / eps, -1.0, 1.0)
    H = 0.5 * (1.0 + t + xp.sin(np.pi * t) / np.pi)
    # sin(+-pi) is not exactly zero in floating point: keep H in [0, 1].
    return xp.clip(H, 0.0, 1.0)


@dataclass
class PhaseFields:
    """Cell and face densities of a two-phase configuration (arrays of one backend).

    ``rho`` has shape ``(ny, nx)``; ``rho_x`` (ny, nx-1) holds the densities on
    the interior vertical faces between cells ``(j, i)`` and ``(j, i+1)``;
    ``rho_y`` (ny-1, nx) those on the interior horizontal faces between
    ``(j, i)`` and ``(j+1, i)``.  ``mu`` is the cell viscosity.
    """

    rho: np.ndarray
    rho_x: np.ndarray
    rho_y: np.ndarray
    mu: np.ndarray
    rule: str
    rho_z: np.ndarray = None      # 3-D: the faces normal to z, (nz-1, ny, nx)

    @property
    def faces(self):
        """The face densities per grid axis, x first."""
        return (self.rho_x, self.rho_y) if self.rho_z is None else (self.rho_x, self.rho_y,
                                                                     self.rho_z)


def phase_fields(grid, phi, rho_liquid, rho_gas, mu_liquid, mu_gas, rule="arithmetic"):
    """Densities on cells and faces from ``phi`` with a face-density rule.

    ``arithmetic``: rho_f = (rho_i + rho_j) / 2 of the sharp cell densities.
    ``harmonic``:   rho_f = 2 rho_i rho_j / (rho_i + rho_j).
    ``levelset``:   rho_f from the smoothed Heaviside of phi at the face
                    (mean of the two cells), epsilon = 1.5 h; cells likewise.

    The fields are on ``phi``'s backend.
    """
    eps = 1.5 * max(grid.spacing)
    nd = phi.ndim
    xp = array_module(phi)

    def pairs(a, k):
        """The two cells of the faces normal to array axis ``k``."""
        lo = [slice(None)] * nd
        hi = [slice(None)] * nd
        lo[k], hi[k] = slice(None, -1), slice(1, None)
        return a[tuple(hi)], a[tuple(lo)]

    if rule == "levelset":
        H = heaviside(phi, eps, xp)
        rho = rho_gas + (rho_liquid - rho_gas) * H
        mu = mu_gas + (mu_liquid - mu_gas) * H
        faces = [rho_gas + (rho_liquid - rho_gas) * heaviside(0.5 * sum(pairs(phi, nd - 1 - a)),
                                                              eps, xp)
                 for a in range(nd)]
    elif rule in ("arithmetic", "harmonic"):
        liquid = phi >= 0
        rho = xp.where(liquid, rho_liquid, rho_gas).astype(float)
        mu = xp.where(liquid, mu_liquid, mu_gas).astype(float)
        faces = []
        for a in range(nd):
            hi, lo = pairs(rho, nd - 1 - a)
            faces.append(0.5 * (hi + lo) if rule == "arithmetic" else 2 * hi * lo / (hi + lo))
    else:
        raise ValueError(f"unknown face-density rule {rule!r}; expected arithmetic, harmonic or levelset")
    return PhaseFields(rho=rho, rho_x=faces[0], rho_y=faces[1], mu=mu, rule=rule,
                       rho_z=faces[2] if nd == 3 else None)
