"""Running a case: ``bubbleflow run CASE.yaml``.

``mode: pressure``: build the geometry, assemble the operator, set up the
solver, solve once, write ``OUTDIR/<name>.h5``.  A solve that fails still
writes its file (``/solver/converged`` false), says why, and returns 1.
"""
from __future__ import annotations

import os
import sys

from . import __version__
from .problem import build_pressure_problem
from .solver import PressureSolver

__all__ = ["run_case", "run_pressure"]


def _say(quiet, *parts, file=None):
    if not quiet:
        print(*parts, file=file or sys.stdout, flush=True)


def run_case(case, backend, quiet=False, outdir=None):
    """Run a validated case on ``backend``; return the process exit code."""
    runners = {"pressure": run_pressure}
    return runners[case.mode](case, backend, quiet=quiet, outdir=outdir)


def run_pressure(case, backend, quiet=False, outdir=None):
    """One pressure solve of the first projection step; returns 0 or 1."""
    from .config import CaseError

    outdir = outdir or case.output.directory
    path = os.path.join(outdir, f"{case.name}.h5")
    try:
        prob = build_pressure_problem(case, backend)
    except ValueError as exc:          # random bubbles that do not fit their region
        raise CaseError.from_runtime(
            case, "geometry.random_bubbles", str(exc),
            "fewer or smaller bubbles, a smaller min_gap or a larger region") from None
    g = prob.grid
    s = case.solver
    contrast = case.fluids.liquid.density / case.fluids.gas.density
    _say(quiet, f"{case.name}: {g.nx} x {g.ny} cells, {len(prob.circles)} circles, "
                f"density contrast {contrast:g}, face density {case.operator.face_density}")
    solver = PressureSolver.from_config(prob.A, s, phi=prob.phi)
    ndefl = solver.deflation.k if solver.deflation is not None else 0
    variant = f" ({s.variant})" if s.method == "dpcg" else ""
    _say(quiet, f"solver: {s.method}{variant}, preconditioner {s.preconditioner.type}, "
                f"deflation {s.deflation.type} ({ndefl} vectors), rtol {s.rtol:g}; "
                f"backend {backend.name} on {backend.device_name}")
    p, record = solver.solve(prob.rhs)
    from .output import write_pressure_result

    write_pressure_result(
        path, case_yaml=case.to_yaml(), version=__version__, backend=backend.name,
        device=backend.device_name, precision=case.precision,
        face_density=case.operator.face_density, grid=g, phi=prob.phi,
        rho=prob.phases.rho, p=backend.to_host(p), record=record)
    if record.converged:
        _say(quiet, f"{record.summary()}")
        _say(quiet, f"pressure range {float(p.min()):.6g} .. {float(p.max()):.6g} Pa; wrote {path}")
        return 0
    print(f"error: {case.name}: pressure solve failed: reason {record.reason} after "
          f"{record.iterations} iterations, true relative residual {record.residual:.3e} "
          f"(rtol {s.rtol:g}); wrote {path}", file=sys.stderr, flush=True)
    return 1
