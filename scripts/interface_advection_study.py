"""Pure advection of an interface: each method's gas-volume drift and shape error.

    python3 scripts/interface_advection_study.py [--tests zalesak vortex] [--sizes 64 128]
        [--methods levelset vof] [--backend numpy|cupy] [--csv FILE]

The two classic tests of interface advection (the level set against VOF), on the unit
square, with face velocities from a stream function on the cell corners (so
each field is discretely divergence-free to rounding):

* ``zalesak``: Zalesak's slotted disk (radius 0.15 at (0.5, 0.75), slot 0.05
  wide and 0.25 deep), one solid-body rotation about the centre (period 1);
* ``vortex``: the single vortex (Bell, Colella & Glaz 1989; Rider & Kothe
  1998): a circle of radius 0.15 at (0.5, 0.75) in
  ``psi = sin^2(pi x) sin^2(pi y) cos(pi t / T) / pi``, ``T = 8`` by default,
  stretched into a filament until ``T / 2`` and brought back by the reversing
  field at ``T``.

Both end where they started, so the error is the final shape against the
initial one.  Methods:

* ``levelset``: the flow's level set today (WENO5 / TVD-RK3 advection,
  reinitialisation every 5 steps with 4 iterations, as the cases);
* ``levelset+correction``: the same, with a global mass correction after
  every step (``phi`` shifted by the constant that restores the initial gas
  volume: the candidate "level set with a mass correction");
* ``vof``: geometric PLIC volume-of-fluid (:mod:`bubbleflow.flow.vof_advection`),
  direction-split, sweep order alternating.

Printed per test, size and method: the relative drift of the gas volume
``sum(c) h^2`` (for the level set, ``c`` is its volume fraction), the L1
shape error ``sum |c_T - c_0| h^2`` (Rider & Kothe's measure) and the same
over the initial gas area, the smallest and largest ``c``, steps and wall
seconds.  The time step is ``cfl * h / max|u|`` (``--cfl``, default 0.25).
"""
import argparse
import csv
import math
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.flow import levelset  # noqa: E402
from bubbleflow.flow.vof_advection import advect  # noqa: E402
from bubbleflow.flow.vof_fraction import volume_fraction  # noqa: E402


def corner_coordinates(n):
    x = np.linspace(0.0, 1.0, n + 1)
    return np.meshgrid(x, x)                      # (n + 1, n + 1): y rows, x columns


def cell_centres(n):
    x = (np.arange(n) + 0.5) / n
    return np.meshgrid(x, x)


def faces_from_stream(psi, h):
    """``u = dpsi/dy`` on the x-faces and ``v = -dpsi/dx`` on the y-faces
    from ``psi`` on the corners: their discrete divergence cancels exactly
    (up to rounding)."""
    u = (psi[1:, :] - psi[:-1, :]) / h
    v = -(psi[:, 1:] - psi[:, :-1]) / h
    return u, v


def zalesak(n):
    """Level set of the slotted disk (phi < 0 in the gas) and the velocity
    at time t (solid-body rotation, period 1)."""
    x, y = cell_centres(n)
    R, cx, cy, half_width, depth = 0.15, 0.5, 0.75, 0.025, 0.25
    d_circle = np.hypot(x - cx, y - cy) - R
    # The slot: |x - cx| < half_width, y < cy - R + depth (signed, negative inside).
    d_slot = np.maximum(np.abs(x - cx) - half_width, y - (cy - R + depth))
    phi = np.maximum(d_circle, -d_slot)
    X, Y = corner_coordinates(n)
    omega = 2.0 * math.pi
    u, v = faces_from_stream(-0.5 * omega * ((X - 0.5) ** 2 + (Y - 0.5) ** 2), 1.0 / n)

    def velocity(t):
        return u, v
    return phi, velocity, 1.0, omega * math.sqrt(0.5)


def vortex(n, period=8.0):
    x, y = cell_centres(n)
    phi = np.hypot(x - 0.5, y - 0.75) - 0.15
    X, Y = corner_coordinates(n)
    u0, v0 = faces_from_stream(np.sin(math.pi * X) ** 2 * np.sin(math.pi * Y) ** 2 / math.pi,
                               1.0 / n)

    def velocity(t):
        s = math.cos(math.pi * t / period)
        return s * u0, s * v0
    return phi, velocity, period, 1.0


TESTS = {"zalesak": zalesak, "vortex": vortex}


class LevelSet:
    """The flow's level-set stages on a prescribed velocity."""

    def __init__(self, phi, h, xp, reinit_every=5, reinit_iterations=4):
        self.phi, self.h, self.xp = phi, h, xp
        self.every, self.iterations, self.steps = reinit_every, reinit_iterations, 0

    def step(self, u, v, dt):
        self.phi = levelset.advect(self.phi, (u, v), dt, (self.h, self.h))
        self.steps += 1
        if self.every and self.steps % self.every == 0:
            self.phi = levelset.reinitialize(self.phi, (self.h, self.h),
                                                iterations=self.iterations)

    def fraction(self):
        return volume_fraction(self.phi, (self.h, self.h))


class CorrectedLevelSet(LevelSet):
    """The level set with a global mass correction after every step: ``phi``
    shifted by the constant that gives back the initial gas volume (its
    volume fraction's sum), found by the secant method to a relative 1e-13."""

    def __init__(self, phi, h, xp, **kw):
        super().__init__(phi, h, xp, **kw)
        self.target = float(xp.sum(self.fraction()))

    def _volume(self, shift):
        return float(self.xp.sum(volume_fraction(self.phi - shift, (self.h, self.h))))

    def step(self, u, v, dt):
        super().step(u, v, dt)
        a, fa = 0.0, self._volume(0.0) - self.target
        b = -fa / self.target * self.h            # a first guess of the right sign
        fb = self._volume(b) - self.target
        for _ in range(30):
            if abs(fb) <= 1e-13 * self.target or fb == fa:
                break
            a, b, fa = b, b - fb * (b - a) / (fb - fa), fb
            fb = self._volume(b) - self.target
        self.phi = self.phi - b


class ConservativeLevelSet:
    """Olsson & Kreiss (2005): the smoothed Heaviside ``psi = 1 / (1 + exp(phi
    / eps))`` (gas 1), ``eps = h``, advected by conservative fluxes (MUSCL
    with the minmod limiter, TVD-RK2) and re-sharpened after every step by
    ``psi_tau + div(psi (1 - psi) n) = eps div(grad psi)`` (``n`` from the
    level set of the start, as Olsson, Kreiss & Zahedi 2007; 2 pseudo-steps
    of ``dtau = 0.25 h``).  ``sum(psi)`` is conserved to round-off; the volume
    inside the ``psi = 1/2`` contour, which is what the other methods carry,
    is not exactly."""

    def __init__(self, phi, h, xp, eps=None, steps=2):
        self.h, self.xp, self.eps, self.steps = h, xp, h if eps is None else eps, steps
        self.psi = 1.0 / (1.0 + xp.exp(phi / self.eps))

    def _flux_div(self, q, u, v):
        """``div(q u)`` with MUSCL-minmod face values, zero flux through walls."""
        xp, h = self.xp, self.h

        def faces(q, w):
            """Fluxes on the faces along axis 1 (walls: zero)."""
            d = xp.diff(q, axis=1)
            zero = xp.zeros_like(q[:, :1])
            dl = xp.concatenate([zero, d], axis=1)       # q[i] - q[i - 1]
            dr = xp.concatenate([d, zero], axis=1)       # q[i + 1] - q[i]
            slope = xp.where(dl * dr > 0, xp.sign(dl) * xp.minimum(abs(dl), abs(dr)), 0.0)
            left, right = (q + 0.5 * slope)[:, :-1], (q - 0.5 * slope)[:, 1:]
            inner = w[:, 1:-1]
            return xp.concatenate([zero, inner * xp.where(inner > 0, left, right), zero], axis=1)

        fx, fy = faces(q, u), faces(q.T, v.T).T          # y: the x faces of the transpose
        return (fx[:, 1:] - fx[:, :-1]) / h + (fy[1:, :] - fy[:-1, :]) / h

    def _sharpen(self):
        xp, h, eps = self.xp, self.h, self.eps
        phi = eps * xp.log(xp.clip(1.0 - self.psi, 1e-300, None) / xp.clip(self.psi, 1e-300, None))
        gy, gx = xp.gradient(phi, h)
        norm = xp.sqrt(gx * gx + gy * gy) + 1e-300
        # Face normals (mean of the two cells), pointing into the gas (-grad phi).
        nx_ = -0.5 * (gx[:, 1:] + gx[:, :-1]) / (0.5 * (norm[:, 1:] + norm[:, :-1]))
        ny_ = -0.5 * (gy[1:, :] + gy[:-1, :]) / (0.5 * (norm[1:, :] + norm[:-1, :]))
        for _ in range(self.steps):
            p = self.psi
            q = p * (1.0 - p)
            fx = 0.5 * (q[:, 1:] + q[:, :-1]) * nx_ - eps * (p[:, 1:] - p[:, :-1]) / h
            fy = 0.5 * (q[1:, :] + q[:-1, :]) * ny_ - eps * (p[1:, :] - p[:-1, :]) / h
            zx = xp.zeros_like(p[:, :1])
            zy = xp.zeros_like(p[:1, :])
            fx = xp.concatenate([zx, fx, zx], axis=1)
            fy = xp.concatenate([zy, fy, zy], axis=0)
            self.psi = p - 0.25 * h * ((fx[:, 1:] - fx[:, :-1]) + (fy[1:, :] - fy[:-1, :])) / h

    def step(self, u, v, dt):
        p1 = self.psi - dt * self._flux_div(self.psi, u, v)
        self.psi = 0.5 * (self.psi + p1 - dt * self._flux_div(p1, u, v))
        self._sharpen()

    def fraction(self):
        xp, eps = self.xp, self.eps
        phi = eps * xp.log(xp.clip(1.0 - self.psi, 1e-300, None) / xp.clip(self.psi, 1e-300, None))
        return volume_fraction(phi, (self.h, self.h))


class VolumeOfFluid:
    """Geometric PLIC volume of fluid, split sweeps in alternating order."""

    def __init__(self, phi, h, xp):
        self.c, self.h, self.steps = volume_fraction(phi, (h, h)), h, 0

    def step(self, u, v, dt):
        self.c = advect(self.c, (u, v), dt, (self.h, self.h), first_axis=self.steps % 2)
        self.steps += 1

    def fraction(self):
        return self.c


METHODS = {"levelset": LevelSet, "levelset+correction": CorrectedLevelSet,
           "conservative": ConservativeLevelSet, "vof": VolumeOfFluid}


def run(test, n, method, backend, cfl):
    xp = backend.xp
    phi0, velocity, end, speed = TESTS[test](n)
    h = 1.0 / n
    steps = max(1, math.ceil(end / (cfl * h / speed)))
    dt = end / steps
    solver = METHODS[method](xp.asarray(phi0), h, xp)
    c0 = backend.to_host(solver.fraction()).copy()
    t0 = time.perf_counter()
    for k in range(steps):
        u, v = velocity((k + 0.5) * dt)            # the field at mid-step
        solver.step(xp.asarray(u), xp.asarray(v), dt)
    backend.synchronize()
    seconds = time.perf_counter() - t0
    c = backend.to_host(solver.fraction())
    area0 = float(np.sum(c0)) * h * h
    error = float(np.sum(np.abs(c - c0))) * h * h
    return dict(test=test, n=n, method=method, steps=steps,
                volume_drift=(float(np.sum(c)) - float(np.sum(c0))) / float(np.sum(c0)),
                shape_error=error, shape_error_rel=error / area0,
                c_min=float(c.min()), c_max=float(c.max()), seconds=seconds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", nargs="+", default=list(TESTS), choices=list(TESTS))
    ap.add_argument("--sizes", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    ap.add_argument("--cfl", type=float, default=0.25)
    ap.add_argument("--csv", help="write the rows to this file")
    a = ap.parse_args(argv)
    backend = get_backend(a.backend)
    rows = []
    print(f"{'test':8s} {'n':>5s} {'method':19s} {'steps':>6s} {'volume drift':>13s} "
          f"{'L1 error':>10s} {'/ area':>8s} {'c min':>9s} {'c max':>9s} {'s':>7s}")
    for test in a.tests:
        for n in a.sizes:
            for method in a.methods:
                r = run(test, n, method, backend, a.cfl)
                rows.append(r)
                print(f"{test:8s} {n:5d} {method:19s} {r['steps']:6d} {r['volume_drift']:13.3e} "
                      f"{r['shape_error']:10.3e} {r['shape_error_rel']:8.4f} {r['c_min']:9.2e} "
                      f"{r['c_max']:9.6f} {r['seconds']:7.2f}", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
