"""The default pressure solver's time to solution on the ranks and on one
process: the ranks' benchmark (``mpiexec -n N bubbleflow bench``, ``bench
--scaling``) measures it at each strong size beside its model of an
iteration.

The problem is the shipped bubbly column's (``cases/bubbly_column.yaml``,
in 3-D ``cases/bubbly_column_3d.yaml``, written here as their text: an
installed package carries no ``cases/``; ``tests/apps/test_bench_ranks_solve.py``
checks that they still resolve to the same cases) on ``n`` cells a side,
with its solver section: multigrid PCG to ``rtol`` 1e-8.  One process
builds it as ``bubbleflow run`` does (the whole grid's operator and
multigrid), N ranks as ``mpiexec -n N bubbleflow run`` does (each its
widened slab; the slab multigrid).

A time to solution is a new solver's set-up and its solve, the slowest
rank's: the first (kernels compiled or loaded, the libraries' handles and
NCCL's connections made) apart, then the median of :data:`REPEAT` more.
"""
from __future__ import annotations

import time
from functools import partial

import numpy as np

__all__ = ["COLUMN_TEXTS", "COLUMN_FILES", "REPEAT", "column_case", "default_solve",
           "solve_line"]

#: What the two pressure cases share: their fluids, solver and output.
_SHARED = """
fluids:
  liquid: {density: 1000.0, viscosity: 1.0e-3}
  gas:    {density: 1.0,    viscosity: 1.8e-5}
physics: {gravity: 9.81}
solver:
  method: pcg
  preconditioner: {type: multigrid}
  deflation: {type: none}
  rtol: 1.0e-8
  maxiter: 10000
output: {directory: outputs}
"""
#: The pressure cases by dimension: ``cases/bubbly_column.yaml`` and
#: ``cases/bubbly_column_3d.yaml`` without their comments.
COLUMN_TEXTS = {2: """
name: bubbly_column
mode: pressure
backend: auto
precision: float64
grid: {nx: 256, ny: 256, lx: 1.0, ly: 1.0}
geometry:
  free_surface: 0.85
  bubble_lattice: {columns: 3, rows: 3, radius: 0.08, x_range: [0.25, 0.75],
                   y_range: [0.2, 0.6]}
operator: {face_density: arithmetic, storage: diagonals}
""" + _SHARED, 3: """
name: bubbly_column_3d
mode: pressure
backend: auto
precision: float64
grid: {nx: 64, ny: 64, nz: 64, lx: 1.0, ly: 1.0, lz: 1.0}
geometry:
  free_surface: 0.85
  bubbles: [{center: [0.3, 0.3, 0.3], radius: 0.1}, {center: [0.7, 0.3, 0.3], radius: 0.1},
            {center: [0.3, 0.7, 0.3], radius: 0.1}, {center: [0.7, 0.7, 0.3], radius: 0.1},
            {center: [0.3, 0.3, 0.6], radius: 0.1}, {center: [0.7, 0.3, 0.6], radius: 0.1},
            {center: [0.3, 0.7, 0.6], radius: 0.1}, {center: [0.7, 0.7, 0.6], radius: 0.1}]
operator: {face_density: arithmetic}
""" + _SHARED}
#: The case files the texts are copies of.
COLUMN_FILES = {2: "cases/bubbly_column.yaml", 3: "cases/bubbly_column_3d.yaml"}
#: Timed set-ups and solves after the first.
REPEAT = 3


def column_case(dim, n, backend_name):
    """The bubbly column's pressure case on ``n`` cells a side on the backend named."""
    import yaml

    from ...case.config import case_from_dict

    axes = ("nx", "ny", "nz")[:dim]
    sets = [f"grid.{a}={n}" for a in axes] + [f"backend={backend_name}"]
    return case_from_dict(yaml.safe_load(COLUMN_TEXTS[dim]),
                          f"bubbleflow bench ({COLUMN_FILES[dim]})", sets)


def _problem(case, backend, comm):
    """``(make_solver, rhs)``: the one process's whole problem, or this
    rank's slab of it (:func:`..ranks.slab_problem`)."""
    from ...case.problem import build_pressure_problem
    from ...linalg.solver import PressureSolver

    s = case.solver
    if comm.size == 1:
        prob = build_pressure_problem(case, backend)
        return (lambda: PressureSolver.from_config(prob.A, s, phi=prob.phi,
                                                   precision=case.precision)), prob.rhs
    from ..ranks import slab_problem

    prob, A, own = slab_problem(case, backend, comm)
    return (lambda: PressureSolver.from_config(A, s, phi=prob.phi, grid=prob.grid)), \
        prob.rhs[own].ravel()


def default_solve(comm, backend, dim, n, repeat=REPEAT):
    """The default solver's figures on ``n^d`` cells (see the module): a
    dict of ``first_setup`` and ``first_solve`` (s), ``setup`` and ``solve``
    (s, medians), ``iterations``, ``residual`` (the last solve's true
    relative residual), ``converged`` and ``rtol``."""
    case = column_case(dim, n, backend.name)
    make, b = _problem(case, backend, comm)

    def timed(run):
        backend.synchronize()
        comm.allreduce_max(0.0)
        t = time.perf_counter()
        out = run()
        backend.synchronize()
        return out, comm.allreduce_max(time.perf_counter() - t)

    setups, solves = [], []
    for _ in range(1 + repeat):
        solver, setup = timed(make)
        (_, record), solve = timed(partial(solver.solve, b))
        setups.append(setup)
        solves.append(solve)
        solver = None               # (freed before the next is built)
    return dict(first_setup=setups[0], first_solve=solves[0],
                setup=float(np.median(setups[1:])), solve=float(np.median(solves[1:])),
                iterations=int(record.iterations), residual=float(record.residual),
                converged=bool(record.converged), rtol=float(case.solver.rtol))


def solve_line(ranks, comm_name, backend_name, dim, n, got):
    """One line of :func:`default_solve`'s figures."""
    total = got["setup"] + got["solve"]
    state = "" if got["converged"] else ", NOT CONVERGED"
    return (f"{ranks} ranks ({comm_name}, {backend_name}), {dim}-D n = {n}: default solver "
            f"(pcg + multigrid, rtol {got['rtol']:g}): set-up {1e3 * got['setup']:.1f} ms, solve "
            f"{1e3 * got['solve']:.1f} ms ({got['iterations']} its, {got['residual']:.1e}"
            f"{state}), time to solution {1e3 * total:.1f} ms; the first: set-up "
            f"{got['first_setup']:.3f} s, solve {got['first_solve']:.3f} s")
