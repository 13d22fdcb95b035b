"""The float64 floor of a pressure case, with the whole pressure and with
reduced gravity's dynamic part.

    python3 scripts/pressure_floor_study.py [--sizes 256 1024] [--backend numpy]

A pressure case (``cases/bubbly_column.yaml``) solves the first projection
of a fluid at rest, ``A p = f``, ``f`` from ``u* = -G dt`` on the interior
vertical faces (:func:`bubbleflow.operators.poisson.gravity_rhs`): its answer
is the whole pressure, hydrostatic included, and CG stops at the float64
floor of ``A p`` before a tight tolerance on fine grids.  Reduced gravity
(Basilisk's ``reduced.h``, as the flows' momentum step applies it, and the
pressure cases' default: :mod:`bubbleflow.flow.rest_projection`) solves
for ``p_d = p + rho G (y - y0)`` instead, with the force on the faces

    F_f = G (y_f - y0) (rho_hi - rho_lo) / h_a  [+ G (rho_hat - rho_f) on vertical faces]

and ``f_d = -div(F / rho_f)``; face by face ``A (p_d - q) = f`` for ``q =
rho G (y - y0)``, so both give one pressure.  This script solves both forms
with the case's solver (multigrid PCG) down to their floors (``rtol``
1e-12 .. 1e-15) and prints each floor relative to the form's own
right-hand side and relative to the whole problem's ``||f||``: the
residual is of one operator, so the second column compares what the two
answers are worth.  It also prints ``||f_d|| / ||f||`` and, at the case's
``rtol`` of 1e-8, how far each answer lies from the deepest one.
"""
import argparse
import os
import sys

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.config import load_case  # noqa: E402
from bubbleflow.case.problem import build_pressure_problem  # noqa: E402
from bubbleflow.flow.rest_projection import hydrostatic_part, rest_rhs  # noqa: E402
from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402
from bubbleflow.operators.poisson import gravity_rhs  # noqa: E402

CASE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cases",
                    "bubbly_column.yaml")


def solve(prob, n, rhs, rtol, backend):
    case = load_case(CASE, overrides=[f"grid.nx={n}", f"grid.ny={n}", f"solver.rtol={rtol}",
                                      "solver.maxiter=300"])
    solver = PressureSolver.from_config(prob.A, case.solver, phi=prob.phi,
                                        precision=case.precision)
    p, record = solver.solve(backend.xp.asarray(rhs))
    return backend.to_host(p).reshape(prob.grid.shape), record


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--backend", default="numpy")
    args = ap.parse_args()
    backend = get_backend(args.backend)
    print(f"{'n':>6} {'form':10} {'rtol':>7} {'its':>4} {'reason':11} {'res/own rhs':>11} "
          f"{'res/||f||':>10} {'||f_d||/||f||':>13} {'max|p-p_deep|/max|p|':>21}")
    for n in args.sizes:
        case = load_case(CASE, overrides=[f"grid.nx={n}", f"grid.ny={n}"])
        prob = build_pressure_problem(case, backend)
        grid, G, fl = prob.grid, case.physics.gravity, case.fluids
        y0 = case.geometry.free_surface
        f = gravity_rhs(grid, G)
        rho_l, rho_g = fl.liquid.density, fl.gas.density
        fd = backend.to_host(rest_rhs(grid, prob.phases, G, "reduced", rho_l, rho_g, y0))
        q = -backend.to_host(hydrostatic_part(grid, prob.phases.rho, G, "reduced", rho_l, rho_g,
                                              y0))
        ratio = np.linalg.norm(fd) / np.linalg.norm(f)
        runs = []
        for form, rhs, rtols, scale in (("whole", f, (1e-8, 1e-12), 1.0),
                                        ("reduced", fd, (1e-8, 1e-13, 1e-15), ratio)):
            for rtol in rtols:
                p, rec = solve(prob, n, rhs, rtol, backend)
                total = p - q if form == "reduced" else p
                runs.append((form, rtol, rec, scale, total - total.mean()))
        deep = min(runs, key=lambda r: r[2].residual * r[3])[4]
        for form, rtol, rec, scale, total in runs:
            err = np.abs(total - deep).max() / np.abs(deep).max()
            print(f"{n:6d} {form:10} {rtol:7.0e} {rec.iterations:4d} {rec.reason:11} "
                  f"{rec.residual:11.2e} {rec.residual * scale:10.2e} {scale:13.1f} {err:21.2e}",
                  flush=True)


if __name__ == "__main__":
    main()
