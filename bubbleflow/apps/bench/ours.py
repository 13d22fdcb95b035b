"""One of our configurations on the standard problem: warm-up, timed set-ups, memory and timed solves."""
from __future__ import annotations

import math

from ...linalg.registry import model_bytes_per_iteration
from .measure import MemoryPeak, release, true_residual
from .model3d import bytes_per_iteration_3d
from .options import DEFAULT_MAXITER_PER_N, cells_per_subdomain
from .problem import assemble, inputs_on, median_run, result_row

__all__ = ["run_ours"]


def run_ours(problem, config, bench, warm_up, say):
    """One of our configurations on ``problem``: one row.

    Optional warm-up (set-up and solve); the timed set-up (operator assembly
    plus :class:`PressureSolver`: once on an emptied memory pool, then
    ``bench.repeat`` times, each replacing the last as a time step does, the
    median reported); a memory solve (the pool emptied of free
    blocks before it, its size read after it); ``bench.repeat`` timed solves.
    In 3-D then an untimed set-up plus solve for the memory columns
    (:class:`.measure.MemoryPeak`), and the bytes per iteration of
    :func:`.model3d.bytes_per_iteration_3d` where the solver counts none.
    """
    from ...linalg.solver import PressureSolver

    backend = bench.backend
    xp = backend.xp
    n = problem.n
    cps = cells_per_subdomain(n, bench.cells_per_subdomain)
    blocks = (max(1, n // cps),) * problem.dim
    maxiter = bench.maxiter or DEFAULT_MAXITER_PER_N * n

    def build(inputs=None):
        faces, phi = inputs or inputs_on(backend, problem)
        t0 = backend.clock()
        A = assemble(problem, faces, backend, bench.storage)
        t1 = backend.clock()
        s = PressureSolver(A, method=config.method, preconditioner=config.preconditioner,
                           deflation=config.deflation, phi=phi, subdomains=blocks,
                           rtol=problem.rtol, maxiter=maxiter, check_every=bench.check_every,
                           preconditioner_options=config.preconditioner_options)
        t2 = backend.clock()
        return A, s, t1 - t0, t2 - t1

    if warm_up:
        release(backend)
        b = xp.asarray(problem.rhs)
        A, s, op_s, solver_s = build()
        t = backend.clock()
        x, rec = s.solve(b)
        dt = backend.clock() - t
        say(f"warm-up: set-up {1e3 * (op_s + solver_s):.1f} ms, {rec.iterations} its, "
            f"{1e3 * dt:.1f} ms, {rec.reason}")
        del A, s, b, x, rec
    release(backend)
    b = xp.asarray(problem.rhs)
    # The set-up as a time step sees it: the previous step's operator and
    # solver are dropped and their memory is reused from CuPy's pool.  A
    # first set-up on an emptied pool (its device allocations included:
    # ``setup_cold_ms``), then ``bench.repeat`` set-ups, each replacing the
    # last; the one with the median total is reported.
    A, s, op_s, solver_s = build()
    cold_s = op_s + solver_s
    setups = []
    for _ in range(bench.repeat):
        A = s = None
        A, s, op_s, solver_s = build()
        setups.append((op_s + solver_s, op_s, solver_s))
    _, op_s, solver_s = sorted(setups)[(len(setups) - 1) // 2]
    release(backend)                  # set-up temporaries out of the memory count
    x, rec = s.solve(b)                # the memory solve
    peaks = [backend.pool_bytes()]
    say(f"set-up {1e3 * (op_s + solver_s):.1f} ms (operator {1e3 * op_s:.1f} ms; first, on an "
        f"emptied memory pool, {1e3 * cold_s:.1f} ms); memory solve: "
        f"{rec.iterations} its" + (f", pool {peaks[0] / 2 ** 30:.2f} GiB" if peaks[0] else ""))
    del x, rec
    runs = []
    for i in range(bench.repeat):
        t = backend.clock()
        x, rec = s.solve(b)
        dt = backend.clock() - t
        peaks.append(backend.pool_bytes())
        res = true_residual(A.matvec, b, x, xp)
        del x
        ok = bool(rec.converged) and res <= problem.rtol
        reason = rec.reason if (ok or not rec.converged) else "true residual above rtol"
        runs.append(dict(solve_s=dt, iterations=int(rec.iterations), residual=res, converged=ok,
                         reason=reason, bytes=getattr(rec, "bytes_per_iteration", None) or 0,
                         engine=getattr(rec, "engine", None),
                         solver_setup_s=float(getattr(rec, "setup_seconds", math.nan))))
        say(f"run {i + 1}/{bench.repeat}: {rec.iterations} its, {1e3 * dt:.1f} ms, "
            f"true residual {res:.2e}, {reason}")
    k = s.deflation.n_vectors if s.deflation is not None else 0
    med = median_run(runs)
    nbytes, source = med["bytes"], "solver"
    if not nbytes and problem.dim == 3:
        nbytes, source = bytes_per_iteration_3d(s), "model 3-D"
    elif not nbytes:
        nbytes = model_bytes_per_iteration(n * n, config.preconditioner, config.deflation,
                                           bench.storage)
        source = "model"
    del A, s, b
    release(backend)
    memory = _memory_of_setup_and_solve(problem, backend, build) if problem.dim == 3 else None
    return result_row(problem, bench, runs, med, kind="ours", solver=config.name,
                      config=config.token, setup_s=op_s + solver_s, operator_s=op_s,
                      solver_setup_s=med["solver_setup_s"], nbytes=nbytes, source=source,
                      peaks=peaks, deflation_vectors=k, setup_cold_s=cold_s,
                      subdomains="x".join(map(str, blocks)) if config.deflation != "none"
                      else None, maxiter=maxiter, memory=memory)


def _memory_of_setup_and_solve(problem, backend, build):
    """The device memory of one set-up (operator and solver) plus solve, the
    inputs (face densities, level set, right-hand side) uploaded before and
    not counted: a :class:`.measure.MemoryPeak`."""
    inputs = inputs_on(backend, problem)
    b = backend.xp.asarray(problem.rhs)
    with MemoryPeak(backend) as peak:
        A, s, _, _ = build(inputs)
        x, _ = s.solve(b)
        del A, s, x
    del inputs, b
    release(backend)
    return peak
