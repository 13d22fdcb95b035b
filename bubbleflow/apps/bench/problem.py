"""The standard problem (the bubbly column at n^2 or n^3 and a contrast), the rows of its results."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .measure import release
from .options import default_rtol
from .report import COLUMNS

__all__ = ["Problem", "make_problem", "inputs_on", "assemble", "median_run", "result_row",
           "failed_row", "add_speedups", "numpy_backend"]


@dataclass
class Problem:
    n: int
    contrast: float
    rtol: float
    grid: object
    phi: np.ndarray
    phases: object         # PhaseFields (face densities normal to x, y[, z])
    rhs: np.ndarray        # flat, zero-mean, host
    dim: int = 2

    @property
    def cells(self):
        return self.n ** self.dim


def make_problem(n, contrast, rhs="gravity", seed=0, rtol=0.0, dim=2):
    """The bubbly column at ``n^dim`` and ``contrast`` with its right-hand side (host).

    2-D: :func:`~bubbleflow.case.problem.bubbly_column_phases`; 3-D:
    :func:`~bubbleflow.case.problem.bubbly_column_3d_host` (the unit cube,
    2 x 2 x 2 bubbles).
    """
    from ...operators.poisson import gravity_rhs
    from ...case.problem import bubbly_column_3d_host, bubbly_column_phases

    if dim == 3:
        grid, phi, phases, _ = bubbly_column_3d_host(n, contrast)
    else:
        grid, phi, phases = bubbly_column_phases(n, contrast)
    if rhs == "gravity":
        f = gravity_rhs(grid, 9.81).ravel().astype(np.float64)
    else:
        f = np.random.default_rng(seed).uniform(-1.0, 1.0, n ** dim)
    f = f - f.mean()
    return Problem(n, float(contrast), rtol or default_rtol(contrast), grid, phi, phases, f, dim)


def inputs_on(backend, problem):
    """The face densities and the level set on ``backend``: a time step's inputs.

    Uploaded before the set-up clock starts (a flow run has them on the
    device already) and dropped before the memory count.
    """
    import dataclasses

    xp = backend.xp
    ph = problem.phases
    faces = dataclasses.replace(ph, rho=None, mu=None, rho_x=xp.asarray(ph.rho_x),
                                rho_y=xp.asarray(ph.rho_y),
                                rho_z=None if ph.rho_z is None else xp.asarray(ph.rho_z))
    return faces, xp.asarray(problem.phi)


def assemble(problem, faces, backend, storage="diagonals"):
    """The pressure operator of ``problem`` on ``backend`` from its face
    densities ``faces`` (of :func:`inputs_on`): the 5-point or 7-point
    operator in ``storage``."""
    from ...operators.poisson import assemble_pressure_operator

    return assemble_pressure_operator(problem.grid, faces, backend=backend, storage=storage)


def median_run(runs):
    """The median run by solve time (the lower median for an even count)."""
    order = sorted(runs, key=lambda r: r["solve_s"])
    return order[(len(order) - 1) // 2]


def numpy_backend():
    from ...compute.backend import get_backend

    return get_backend("numpy")


def result_row(problem, bench, runs, med, *, kind, solver, config, setup_s, operator_s,
         solver_setup_s, nbytes, source, peaks, deflation_vectors, subdomains, maxiter,
         host=False, setup_cold_s=None, memory=None):
    n, cells = problem.n, problem.cells
    its = med["iterations"]
    solve_ms = 1e3 * med["solve_s"]
    ms_it = solve_ms / its if its else None
    peaks = [p for p in peaks if p is not None]
    peak = max(peaks) if peaks else None
    reasons = sorted({r["reason"] for r in runs})
    bw = bench.copy_host_bw if host else bench.copy_bw
    row = dict(
        size=n, dim=problem.dim, cells=cells, contrast=problem.contrast, rhs=bench.rhs,
        rtol=problem.rtol, kind=kind, solver=solver, config=config, iterations=its,
        ms_per_iteration=ms_it, solve_ms=solve_ms, setup_ms=1e3 * setup_s,
        total_ms=1e3 * setup_s + solve_ms,
        true_residual=max(r["residual"] for r in runs),
        converged=all(r["converged"] for r in runs),
        reason=med["reason"] if len(reasons) == 1 else "/".join(reasons),
        bytes_per_iteration=int(nbytes) if nbytes else None, bytes_source=source,
        achieved_gb_s=None, floor_ms_per_iteration=None, ratio_to_floor=None,
        speedup_solve=None, speedup_total=None, speedup_vs=None, speedup_note=None,
        peak_gpu_bytes=peak, peak_gpu_arrays=(peak / (8 * cells)) if peak is not None else None,
        operator_ms=1e3 * operator_s,
        solver_setup_ms=1e3 * solver_setup_s if solver_setup_s is not None else None,
        setup_cold_ms=1e3 * setup_cold_s if setup_cold_s is not None else None,
        deflation_vectors=deflation_vectors, subdomains=subdomains, maxiter=maxiter,
        runs=len(runs), solve_ms_min=1e3 * min(r["solve_s"] for r in runs),
        solve_ms_max=1e3 * max(r["solve_s"] for r in runs), engine=med.get("engine"),
        backend="numpy" if host else bench.backend.name,
        device=bench.host_device if host else bench.device,
        copy_gb_s=bw / 1e9 if bw else None)
    if memory is not None and memory.bytes is not None:
        row.update(memory_bytes=memory.bytes, memory_bytes_per_cell=memory.bytes / cells,
                   memory_measure=memory.measure)
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
    row.update(size=problem.n, dim=problem.dim, cells=problem.cells, contrast=problem.contrast,
               rhs=bench.rhs, rtol=problem.rtol, kind=kind, solver=solver, config=config,
               converged=False, reason=f"failed: {type(exc).__name__}: {msg}",
               backend=bench.backend.name, device=bench.device)
    return row
