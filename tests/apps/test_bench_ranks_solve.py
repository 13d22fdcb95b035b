"""The ranks' benchmark's default-solver figures (``bubbleflow.apps.bench.ranks_solve``):
its case texts are the shipped case files, one process solves as ``bubbleflow run`` does,
and the scaling table's time-to-solution columns."""
import os

import pytest

from bubbleflow.apps.bench.ranks_scaling import format_solutions, scaling_rows
from bubbleflow.apps.bench.ranks_solve import (COLUMN_FILES, COLUMN_TEXTS, column_case,
                                               default_solve, solve_line)
from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.comm import SingleProcess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("dim", sorted(COLUMN_TEXTS))
def test_the_column_texts_are_the_shipped_case_files(dim):
    shipped = load_case(os.path.join(ROOT, COLUMN_FILES[dim]), ["backend=numpy"])
    assert column_case(dim, shipped.grid.nx, "numpy").to_dict() == shipped.to_dict(), (
        f"{COLUMN_FILES[dim]} changed: update its copy in bubbleflow/apps/bench/ranks_solve.py")


def test_one_process_solves_the_column_as_bubbleflow_run_does():
    """The figures of one process are those of the case's own solver on the
    whole grid: the same iterations and true residual; a set-up and a solve
    each take time, the first apart."""
    from bubbleflow.case.problem import build_pressure_problem
    from bubbleflow.linalg.solver import PressureSolver

    numpy = get_backend("numpy")
    got = default_solve(SingleProcess(), numpy, 2, 32, repeat=2)
    case = load_case(os.path.join(ROOT, COLUMN_FILES[2]), ["grid.nx=32", "grid.ny=32",
                                                           "backend=numpy"])
    prob = build_pressure_problem(case, numpy)
    _, record = PressureSolver.from_config(prob.A, case.solver, phi=prob.phi).solve(prob.rhs)
    assert got["converged"] and got["iterations"] == record.iterations > 1
    assert got["residual"] == pytest.approx(record.residual, rel=1e-9)
    assert got["residual"] < got["rtol"] == case.solver.rtol
    assert all(got[k] > 0 for k in ("setup", "solve", "first_setup", "first_solve"))
    line = solve_line(1, "single", "numpy", 2, 32, got)
    assert line.startswith("1 ranks (single, numpy), 2-D n = 32: default solver (pcg + "
                           "multigrid, rtol 1e-08): set-up ")
    assert f"({record.iterations} its, " in line and "time to solution" in line
    assert "NOT CONVERGED" in solve_line(1, "single", "numpy", 2, 32, dict(got, converged=False))


def test_the_time_to_solution_table_compares_with_one_rank():
    """Synthetic rows: the strong rows carry set-up + solve and its ratio to
    the one-rank row's; weak rows and rows without figures carry none."""
    def row(n, ranks, weak, setup=None, solve=None):
        r = dict(dim=2, n=n, ranks=ranks, weak=weak, cells=n * n * (ranks if weak else 1),
                 comm="nccl" if ranks > 1 else "single", backend="cupy", measured=1.0,
                 predicted=1.0)
        if setup is not None:
            r["solution"] = dict(setup=setup, solve=solve, iterations=10)
        return r

    rows = [row(64, 1, False, 0.02, 0.08), row(64, 2, False, 0.01, 0.05), row(32, 2, True),
            row(128, 1, False)]
    table = scaling_rows(rows, [64, 128], [32])
    strong = {(t["n"], t["ranks"]): t for t in table if t["scaling"] == "strong"}
    assert strong[64, 1]["solution_ms"] == pytest.approx(100.0)
    assert strong[64, 2]["solution_ms"] == pytest.approx(60.0)
    assert strong[64, 2]["solution_ratio"] == pytest.approx(0.6)
    assert strong[128, 1]["solution_ms"] is None
    assert all(t["solution_ms"] is None for t in table if t["scaling"] == "weak")
    text = format_solutions(table).splitlines()
    assert text[0].split()[:3] == ["D", "n", "ranks"] and len(text) == 4
    assert text[3].split()[-2:] == ["60.0", "0.60"]
    assert format_solutions([t for t in table if t["solution_ms"] is None]) == ""
