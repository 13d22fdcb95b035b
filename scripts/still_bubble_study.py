"""A still bubble: spurious currents, Laplace pressure and shape, per interface method.

    python3 scripts/still_bubble_study.py [--sizes 40 80] [--methods levelset clsvof]
        [--fluids case1 case2] [--end 1.0] [--backend numpy|cupy] [--csv FILE]

A circular bubble of radius R = 0.25 at the centre of the unit square, no-slip
walls, no gravity: the exact solution is the fluid at rest with the pressure
jump ``sigma / R`` across the interface.  Whatever velocity the flow solver
produces is spurious, from the discrete balance of surface tension and
pressure (Francois et al., JCP 2006; Popinet, Annu. Rev. Fluid Mech. 2018).
It runs the flow step of ``cases/two_phase.yaml`` with the fluids of
Hysing et al.'s test case 1 (``case1``: 1000 / 100, sigma 24.5) or 2
(``case2``: 1000 / 1, sigma 1.96) on an ``N x N`` grid to ``t = --end``.

Printed per fluids, size and method:

* ``Ca max``: the largest face velocity over the run, as the capillary number
  ``max |u| mu_l / sigma``, and ``Ca end`` at the final time;
* ``dp error``: the relative error of the pressure jump, from the mean
  pressure of the cells with ``phi < -2 h`` (inside) and ``phi > 2 h``
  (outside), against ``sigma / R``;
* ``shape``: the largest distance of the PLIC segments' end points from the
  circle of the bubble's own area, over h;
* ``area drift``: the relative change of the gas area (the level set's
  volume fraction for ``levelset``, ``c`` for ``clsvof``).
"""
import argparse
import math
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.tables import csv_text  # noqa: E402
from bubbleflow.case.config import load_case  # noqa: E402
from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.flow.plic_segments import interface_segments  # noqa: E402
from bubbleflow.flow.vof_fraction import volume_fraction  # noqa: E402
from bubbleflow.io.atomic import atomic_text  # noqa: E402
from bubbleflow.flow.navier_stokes import FlowSolver  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RADIUS = 0.25
#: Hysing et al. (2009) test cases 1 and 2: liquid and gas density and
#: viscosity, surface tension.
FLUIDS = {
    "case1": dict(rho_l=1000.0, mu_l=10.0, rho_g=100.0, mu_g=1.0, sigma=24.5),
    "case2": dict(rho_l=1000.0, mu_l=10.0, rho_g=1.0, mu_g=0.1, sigma=1.96),
}


def still_case(n, method, fluids, end):
    f = FLUIDS[fluids]
    sets = [
        ("name", f"still_{fluids}_{n}_{method}"), ("grid.nx", n), ("grid.ny", n),
        ("grid.ly", 1.0), ("physics.gravity", 0.0), ("physics.surface_tension", f["sigma"]),
        ("fluids.liquid.density", f["rho_l"]), ("fluids.liquid.viscosity", f["mu_l"]),
        ("fluids.gas.density", f["rho_g"]), ("fluids.gas.viscosity", f["mu_g"]),
        ("geometry.bubbles", [{"center": [0.5, 0.5], "radius": RADIUS}]),
        ("boundaries.left", "no_slip"), ("boundaries.right", "no_slip"),
        ("time.end", end), ("levelset.method", method), ("output.interval", None),
    ]
    return load_case(os.path.join(ROOT, "cases", "two_phase.yaml"), overrides=sets)


def shape_error(c, h):
    """Largest distance of the PLIC end points from the circle of equal area, over h."""
    mask, x0, y0, x1, y1 = (np.asarray(a) for a in interface_segments(c, (h, h)))
    area = float(np.sum(c)) * h * h
    r = math.sqrt(area / math.pi)
    xc = float(np.sum(c * ((np.arange(c.shape[1]) + 0.5) * h)[None, :])) * h * h / area
    yc = float(np.sum(c * ((np.arange(c.shape[0]) + 0.5) * h)[:, None])) * h * h / area
    d = [np.abs(np.hypot(x[mask] - xc, y[mask] - yc) - r) for x, y in ((x0, y0), (x1, y1))]
    return float(max(d[0].max(), d[1].max())) / h, area


def run_one(n, method, fluids, end, backend):
    case = still_case(n, method, fluids, end)
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    h = 1.0 / n
    to_host = backend.to_host

    def area_of(s):
        c = s.c if s.c is not None else volume_fraction(s.phi, (h, h))
        return c

    area0 = float(np.sum(to_host(area_of(state)))) * h * h
    ca_max, steps = 0.0, 0
    t0 = time.perf_counter()
    while state.time < end - 1e-12:
        state, rep = solver.step(state)
        steps += 1
        umax = max(float(backend.xp.abs(state.u).max()), float(backend.xp.abs(state.v).max()))
        ca_max = max(ca_max, umax)
        if not math.isfinite(umax):
            break
    wall = time.perf_counter() - t0
    f = FLUIDS[fluids]
    phi, p = to_host(state.phi), to_host(state.p)
    jump = float(p[phi < -2 * h].mean() - p[phi > 2 * h].mean())
    c = to_host(area_of(state))
    shape, area = shape_error(c, h)
    return dict(fluids=fluids, n=n, method=method, steps=steps,
                ca_max=ca_max * f["mu_l"] / f["sigma"], ca_end=umax * f["mu_l"] / f["sigma"],
                dp_error=jump / (f["sigma"] / RADIUS) - 1.0, shape=shape,
                drift=area / area0 - 1.0, seconds=wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[40, 80])
    ap.add_argument("--methods", nargs="+", default=["levelset", "clsvof"],
                    choices=["levelset", "clsvof"])
    ap.add_argument("--fluids", nargs="+", default=["case1", "case2"], choices=sorted(FLUIDS))
    ap.add_argument("--end", type=float, default=1.0)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--csv")
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    rows = []
    print("| fluids | n | method | steps | Ca max | Ca end | dp error | shape / h | area drift | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fluids in args.fluids:
        for n in args.sizes:
            for method in args.methods:
                r = run_one(n, method, fluids, args.end, backend)
                rows.append(r)
                print(f"| {fluids} | {n} | {method} | {r['steps']} | {r['ca_max']:.2e} | "
                      f"{r['ca_end']:.2e} | {r['dp_error']:+.2e} | {r['shape']:.3f} | "
                      f"{r['drift']:+.1e} | {r['seconds']:.1f} |", flush=True)
    if args.csv:
        atomic_text(args.csv, csv_text(list(rows[0]), rows))


if __name__ == "__main__":
    main()
