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

__all__ = [
    "Circle", "geometry_circles", "place_random_bubbles", "build_levelset",
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


def build_levelset(grid, free_surface=None, circles=()):
    """Signed distance ``phi`` (the grid's shape, NumPy) of the liquid region.

    Parameters
    ----------
    grid : Grid
        2-D or 3-D; the free surface is normal to the last (vertical) axis.
    free_surface : float or None
        Height (m) of a flat liquid surface; None fills the domain with liquid.
    circles : iterable of Circle
        Gas bubbles are cut out of the liquid, liquid droplets added to it
        (spheres in 3-D).
    """
    coords = grid.mesh()
    if free_surface is None:
        # Liquid everywhere: any positive distance larger than the domain will do.
        phi = np.full(grid.shape, sum(grid.lengths))
    else:
        phi = float(free_surface) - coords[-1]
    for c in circles:
        if c.gas:
            phi = np.minimum(phi, _distance(coords, c) - c.radius)
    for c in circles:
        if not c.gas:
            phi = np.maximum(phi, c.radius - _distance(coords, c))
    return phi


def _distance(coords, circle):
    """Distance of every cell centre to the circle's (sphere's) centre."""
    centre = circle.centre
    if len(centre) != len(coords):
        raise ValueError(f"a centre of {len(centre)} coordinates on a {len(coords)}-D grid")
    if len(coords) == 2:
        return np.hypot(coords[0] - centre[0], coords[1] - centre[1])
    return np.sqrt(sum((x - c) ** 2 for x, c in zip(coords, centre)))


def heaviside(phi, eps, xp=np):
    """Smoothed Heaviside of Sussman, Smereka and Osher (1994), width ``eps``."""
    t = xp.clip(phi / eps, -1.0, 1.0)
    H = 0.5 * (1.0 + t + xp.sin(np.pi * t) / np.pi)
    # sin(+-pi) is not exactly zero in floating point: keep H in [0, 1].
    return xp.clip(H, 0.0, 1.0)


@dataclass
class PhaseFields:
    """Cell and face densities of a two-phase configuration (NumPy arrays).

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
    """
    eps = 1.5 * max(grid.spacing)
    nd = phi.ndim

    def pairs(a, k):
        """The two cells of the faces normal to array axis ``k``."""
        lo = [slice(None)] * nd
        hi = [slice(None)] * nd
        lo[k], hi[k] = slice(None, -1), slice(1, None)
        return a[tuple(hi)], a[tuple(lo)]

    if rule == "levelset":
        H = heaviside(phi, eps)
        rho = rho_gas + (rho_liquid - rho_gas) * H
        mu = mu_gas + (mu_liquid - mu_gas) * H
        faces = [rho_gas + (rho_liquid - rho_gas) * heaviside(0.5 * sum(pairs(phi, nd - 1 - a)), eps)
                 for a in range(nd)]
    elif rule in ("arithmetic", "harmonic"):
        liquid = phi >= 0
        rho = np.where(liquid, rho_liquid, rho_gas).astype(float)
        mu = np.where(liquid, mu_liquid, mu_gas).astype(float)
        faces = []
        for a in range(nd):
            hi, lo = pairs(rho, nd - 1 - a)
            faces.append(0.5 * (hi + lo) if rule == "arithmetic" else 2 * hi * lo / (hi + lo))
    else:
        raise ValueError(f"unknown face-density rule {rule!r}; expected arithmetic, harmonic or levelset")
    return PhaseFields(rho=rho, rho_x=faces[0], rho_y=faces[1], mu=mu, rule=rule,
                       rho_z=faces[2] if nd == 3 else None)
