"""The standard problem (the bubbly column at n^2 and a contrast) and the rows of its results."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .measure import release
from .options import default_rtol
from .report import COLUMNS

__all__ = ["Problem", "make_problem", "inputs_on", "median_run", "result_row", "failed_row",
           "add_speedups", "numpy_backend"]


@dataclass
class Problem:
    n: int
    contrast: float
    rtol: float
    grid: object
    phi: np.ndarray
    phases: object
    rhs: np.ndarray        # flat, zero-mean, host


def make_problem(n, contrast, rhs="gravity", seed=0, rtol=0.0):
    """The bubbly column at ``n^2`` and ``contrast`` with its right-hand side (host)."""
    from ...operators.poisson import gravity_rhs
    from ...case.problem import bubbly_column_phases

    grid, phi, phases = bubbly_column_phases(n, contrast)
    if rhs == "gravity":
        f = gravity_rhs(grid, 9.81).ravel().astype(np.float64)
    else:
        f = np.random.default_rng(seed).uniform(-1.0, 1.0, n * n)
    f = f - f.mean()
    return Problem(n, float(contrast), rtol or default_rtol(contrast), grid, phi, phases, f)


def inputs_on(backend, problem):
    """The face densities and the level set on ``backend``: a time step's inputs.

    Uploaded before the set-up clock starts (a flow run has them on the
    device already) and dropped before the memory count.
    """
    import types

    xp = backend.xp
    faces = types.SimpleNamespace(rho_x=xp.asarray(problem.phases.rho_x),
                                  rho_y=xp.asarray(problem.phases.rho_y))
    return faces, xp.asarray(problem.phi)


def median_run(runs):
    """The median run by solve time (the lower median for an even count)."""
    order = sorted(runs, key=lambda r: r["solve_s"])
    return order[(len(order) - 1) // 2]


def numpy_backend():
    from ...compute.backend import get_backend

    return get_backend("numpy")


def result_row(problem, bench, runs, med, *, kind, solver, config, setup_s, operator_s,
         solver_setup_s, nbytes, source, peaks, deflation_vectors, subdomains, maxiter,
         host=False, setup_cold_s=None):
    n = problem.n
    its = med["iterations"]
    solve_ms = 1e3 * med["solve_s"]
    ms_it = solve_ms / its if its else None
    peaks = [p for p in peaks if p is not None]
    peak = max(peaks) if peaks else None
    reasons = sorted({r["reason"] for r in runs})
    bw = bench.copy_host_bw if host else bench.copy_bw
    row = dict(
        size=n, cells=n * n, contrast=problem.contrast, rhs=bench.rhs, rtol=problem.rtol,
        kind=kind, solver=solver, config=config, iterations=its, ms_per_iteration=ms_it,
        solve_ms=solve_ms, setup_ms=1e3 * setup_s, total_ms=1e3 * setup_s + solve_ms,
        true_residual=max(r["residual"] for r in runs),
        converged=all(r["converged"] for r in runs),
        reason=med["reason"] if len(reasons) == 1 else "/".join(reasons),
        bytes_per_iteration=int(nbytes) if nbytes else None, bytes_source=source,
        achieved_gb_s=None, floor_ms_per_iteration=None, ratio_to_floor=None,
        speedup_solve=None, speedup_total=None, speedup_vs=None, speedup_note=None,
        peak_gpu_bytes=peak, peak_gpu_arrays=(peak / (8 * n * n)) if peak is not None else None,
        operator_ms=1e3 * operator_s,
        solver_setup_ms=1e3 * solver_setup_s if solver_setup_s is not None else None,
        setup_cold_ms=1e3 * setup_cold_s if setup_cold_s is not None else None,
        deflation_vectors=deflation_vectors, subdomains=subdomains, maxiter=maxiter,
        runs=len(runs), solve_ms_min=1e3 * min(r["solve_s"] for r in runs),
        solve_ms_max=1e3 * max(r["solve_s"] for r in runs), engine=med.get("engine"),
        backend="numpy" if host else bench.backend.name,
        device=bench.host_device if host else bench.device,
        copy_gb_s=bw / 1e9 if bw else None)
    if nbytes and ms_it and bw:
        floor = 1e3 * nbytes / bw
        row.update(achieved_gb_s=nbytes / (ms_it * 1e-3) / 1e9, floor_ms_per_iteration=floor,
                   ratio_to_floor=ms_it / floor)
    return row


def add_speedups(rows, reference):
    """Speedup of our rows over the ``reference`` peer row of the same problem."""
    if reference is None:
        return
    for row in rows:
        if row["kind"] != "ours" or not row["solve_ms"]:
            continue
        row["speedup_solve"] = reference["solve_ms"] / row["solve_ms"]
        row["speedup_total"] = reference["total_ms"] / row["total_ms"]
        row["speedup_vs"] = reference["config"]
        notes = []
        if not reference["converged"]:
            notes.append(f"peer not converged ({reference['reason']}): a lower bound")
        if not row["converged"]:
            notes.append(f"ours not converged ({row['reason']})")
        row["speedup_note"] = "; ".join(notes) or None




def failed_row(problem, bench, kind, solver, config, exc):
    release(bench.backend)
    msg = " ".join(str(exc).split())[:200]
    row = {c: None for c in COLUMNS}
    row.update(size=problem.n, cells=problem.n ** 2, contrast=problem.contrast, rhs=bench.rhs,
               rtol=problem.rtol, kind=kind, solver=solver, config=config, converged=False,
               reason=f"failed: {type(exc).__name__}: {msg}", backend=bench.backend.name,
               device=bench.device)
    return row
