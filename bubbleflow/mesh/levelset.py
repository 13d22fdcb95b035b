"""Level-set description of the interface and the phase fields built from it.

Sign convention: ``phi > 0`` in the liquid, ``phi < 0`` in the gas, ``|phi|``
the distance to the interface (exactly for one circle or a flat surface; the
min/max combination of several shapes is a signed distance away from where
two shapes meet, which is all the smoothed Heaviside needs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "Circle", "geometry_circles", "place_random_bubbles", "build_levelset",
    "heaviside", "PhaseFields", "phase_fields",
]


@dataclass(frozen=True)
class Circle:
    """A gas bubble (``gas=True``) or a liquid droplet; lengths in metres."""

    x: float
    y: float
    radius: float
    gas: bool = True


def place_random_bubbles(spec, grid, avoid=()):
    """Non-overlapping random bubbles, reproducible from ``spec.seed``.

    Bubbles are drawn uniformly in ``spec.region`` (the whole domain when
    None), kept ``spec.min_gap`` apart from each other and from the circles in
    ``avoid``.  Raises ``ValueError`` when ``spec.count`` bubbles do not fit.
    """
    rng = np.random.default_rng(int(spec.seed))
    r = float(spec.radius)
    x0, x1, y0, y1 = spec.region if spec.region is not None else (0.0, grid.lx, 0.0, grid.ly)
    gap = float(spec.min_gap)
    placed = []
    others = list(avoid)
    attempts = 0
    max_attempts = 2000 * int(spec.count)
    while len(placed) < spec.count:
        attempts += 1
        if attempts > max_attempts:
            raise ValueError(
                f"could place only {len(placed)} of {spec.count} bubbles of radius {r} "
                f"(min_gap {gap}) in the region [{x0}, {x1}] x [{y0}, {y1}]")
        cx = rng.uniform(x0 + r, x1 - r)
        cy = rng.uniform(y0 + r, y1 - r)
        if all(np.hypot(cx - c.x, cy - c.y) >= r + c.radius + gap for c in placed + others):
            placed.append(Circle(float(cx), float(cy), r, gas=True))
    return placed


def geometry_circles(geometry, grid):
    """All circles of a case's ``geometry`` section, in a fixed order."""
    from ..case.config import lattice_centres

    circles = [Circle(float(b.center[0]), float(b.center[1]), float(b.radius), True)
               for b in geometry.bubbles]
    if geometry.bubble_lattice is not None:
        lat = geometry.bubble_lattice
        circles += [Circle(float(cx), float(cy), float(lat.radius), True)
                    for cx, cy in lattice_centres(lat)]
    if geometry.random_bubbles is not None:
        circles += place_random_bubbles(geometry.random_bubbles, grid, avoid=circles)
    circles += [Circle(float(d.center[0]), float(d.center[1]), float(d.radius), False)
                for d in geometry.droplets]
    return circles


def build_levelset(grid, free_surface=None, circles=()):
    """Signed distance ``phi`` (shape ``(ny, nx)``, NumPy) of the liquid region.

    Parameters
    ----------
    grid : Grid
    free_surface : float or None
        Height (m) of a flat liquid surface; None fills the domain with liquid.
    circles : iterable of Circle
        Gas bubbles are cut out of the liquid, liquid droplets added to it.
    """
    X, Y = grid.mesh()
    if free_surface is None:
        # Liquid everywhere: any positive distance larger than the domain will do.
        phi = np.full(grid.shape, grid.lx + grid.ly)
    else:
        phi = float(free_surface) - Y
    for c in circles:
        if c.gas:
            phi = np.minimum(phi, np.hypot(X - c.x, Y - c.y) - c.radius)
    for c in circles:
        if not c.gas:
            phi = np.maximum(phi, c.radius - np.hypot(X - c.x, Y - c.y))
    return phi


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


def phase_fields(grid, phi, rho_liquid, rho_gas, mu_liquid, mu_gas, rule="arithmetic"):
    """Densities on cells and faces from ``phi`` with a face-density rule.

    ``arithmetic``: rho_f = (rho_i + rho_j) / 2 of the sharp cell densities.
    ``harmonic``:   rho_f = 2 rho_i rho_j / (rho_i + rho_j).
    ``levelset``:   rho_f from the smoothed Heaviside of phi at the face
                    (mean of the two cells), epsilon = 1.5 h; cells likewise.
    """
    eps = 1.5 * max(grid.hx, grid.hy)
    if rule == "levelset":
        H = heaviside(phi, eps)
        rho = rho_gas + (rho_liquid - rho_gas) * H
        mu = mu_gas + (mu_liquid - mu_gas) * H
        hx = heaviside(0.5 * (phi[:, 1:] + phi[:, :-1]), eps)
        hy = heaviside(0.5 * (phi[1:, :] + phi[:-1, :]), eps)
        rho_x = rho_gas + (rho_liquid - rho_gas) * hx
        rho_y = rho_gas + (rho_liquid - rho_gas) * hy
    elif rule in ("arithmetic", "harmonic"):
        liquid = phi >= 0
        rho = np.where(liquid, rho_liquid, rho_gas).astype(float)
        mu = np.where(liquid, mu_liquid, mu_gas).astype(float)
        a, b = rho[:, 1:], rho[:, :-1]
        c, d = rho[1:, :], rho[:-1, :]
        if rule == "arithmetic":
            rho_x, rho_y = 0.5 * (a + b), 0.5 * (c + d)
        else:
            rho_x, rho_y = 2 * a * b / (a + b), 2 * c * d / (c + d)
    else:
        raise ValueError(f"unknown face-density rule {rule!r}; expected arithmetic, harmonic or levelset")
    return PhaseFields(rho=rho, rho_x=rho_x, rho_y=rho_y, mu=mu, rule=rule)
