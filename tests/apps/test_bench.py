"""`bubbleflow bench`: the CSV's columns and numbers agree with each other, the
peer's residual is a true one, and bad arguments are one line (exit 2).

Timings are never asserted on; only their consistency.
"""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from bubbleflow.apps import bench as bench_mod
from bubbleflow.apps.bench import peers as peers_mod
from bubbleflow.apps.cli import main
from helpers.bench import num, one_error_line, read_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The issue's command on NumPy: 32^2 and 48^2, contrasts 1 and 1e3."""
    out = tmp_path_factory.mktemp("bench")
    path = out / "bench.csv"
    import contextlib
    import io

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["bench", "--sizes", "32", "48", "--contrasts", "1", "1e3", "--backend",
                     "numpy", "--csv", str(path)])
    return dict(code=code, path=path, folder=out, stdout=stdout.getvalue(),
                stderr=stderr.getvalue())


def test_runs_and_writes_every_column(small_run):
    assert small_run["code"] == 0, small_run["stderr"]
    columns, rows = read_rows(small_run["path"])
    assert tuple(columns) == bench_mod.COLUMNS
    for name in ("size", "contrast", "solver", "iterations", "ms_per_iteration", "solve_ms",
                 "setup_ms", "true_residual", "converged", "reason", "bytes_per_iteration",
                 "achieved_gb_s", "floor_ms_per_iteration", "ratio_to_floor", "speedup_solve",
                 "speedup_total", "peak_gpu_bytes", "peak_gpu_arrays"):
        assert name in columns
    # Written atomically: no temporary file left beside it.
    assert sorted(os.listdir(small_run["folder"])) == ["bench.csv"]
    # Every size x contrast has the peer and each default configuration.
    ours = [c for c in bench_mod.DEFAULT_CONFIGS]
    for n in (32, 48):
        for contrast in (1.0, 1e3):
            here = [r for r in rows if int(r["size"]) == n and float(r["contrast"]) == contrast]
            assert [r["config"] for r in here if r["kind"] == "peer"][:1] == ["scipy_cg"]
            assert sorted(r["config"] for r in here if r["kind"] == "ours") == sorted(ours)
            assert all(r["rtol"] == "1e-08" for r in here)


def test_numbers_are_consistent(small_run):
    _, rows = read_rows(small_run["path"])
    for r in rows:
        its, ms, solve = int(r["iterations"]), num(r["ms_per_iteration"]), num(r["solve_ms"])
        assert its > 0 and solve > 0
        assert ms * its == pytest.approx(solve, rel=1e-9)
        assert num(r["total_ms"]) == pytest.approx(num(r["setup_ms"]) + solve, rel=1e-9)
        assert num(r["solve_ms_min"]) <= solve <= num(r["solve_ms_max"])
        res = num(r["true_residual"])
        assert math.isfinite(res) and res > 0
        if r["converged"] == "true":
            assert res <= num(r["rtol"]), r
            assert r["reason"] == "converged"
        nbytes = num(r["bytes_per_iteration"])
        if nbytes is not None:
            floor = num(r["floor_ms_per_iteration"])
            bw = num(r["copy_gb_s"]) * 1e9
            assert floor == pytest.approx(1e3 * nbytes / bw, rel=1e-6)
            assert num(r["ratio_to_floor"]) == pytest.approx(ms / floor, rel=1e-6)
            assert num(r["achieved_gb_s"]) == pytest.approx(nbytes / (ms * 1e-3) / 1e9, rel=1e-6)
            assert nbytes % 1 == 0 and nbytes >= 8 * int(r["cells"])
        # NumPy: no GPU memory figures.
        assert r["peak_gpu_bytes"] == "" and r["peak_gpu_arrays"] == ""
    # Speedups of our rows against the peer of the same problem.
    for r in rows:
        if r["kind"] != "ours":
            assert r["speedup_solve"] == ""
            continue
        peer = next(p for p in rows if p["kind"] == "peer" and p["config"] == r["speedup_vs"]
                    and p["size"] == r["size"] and p["contrast"] == r["contrast"])
        assert num(r["speedup_solve"]) == pytest.approx(
            num(peer["solve_ms"]) / num(r["solve_ms"]), rel=1e-9)
        assert num(r["speedup_total"]) == pytest.approx(
            num(peer["total_ms"]) / num(r["total_ms"]), rel=1e-9)
        assert r["bytes_source"] in ("model", "solver")
        assert r["engine"] in ("generic", "fused", "")


def test_peer_residual_is_the_true_residual(small_run):
    """The peer's residual, recomputed here from SciPy's own answer on the same system."""
    from scipy.sparse.linalg import LinearOperator, cg

    from bubbleflow.operators.poisson import assemble_pressure_operator

    _, rows = read_rows(small_run["path"])
    peer = next(r for r in rows if r["kind"] == "peer" and r["size"] == "48"
                and float(r["contrast"]) == 1e3)
    assert peer["converged"] == "true"
    problem = bench_mod.make_problem(48, 1e3)
    C = assemble_pressure_operator(problem.grid, problem.phases).to_scipy()
    b = problem.rhs
    inv_d = 1.0 / C.diagonal()
    M = LinearOperator(C.shape, matvec=lambda r: inv_d * r, dtype=C.dtype)
    count = [0]
    x, info = cg(C, b, rtol=1e-8, atol=0.0, maxiter=30 * 48, M=M,
                 callback=lambda _: count.__setitem__(0, count[0] + 1))
    assert info == 0 and count[0] == int(peer["iterations"])
    true = np.linalg.norm(b - C @ (x - x.mean())) / np.linalg.norm(b)
    assert num(peer["true_residual"]) == pytest.approx(true, rel=1e-6)


def test_a_claimed_convergence_is_checked(monkeypatch, tmp_path, capsys):
    """A peer that stops early and claims success is caught by the true residual."""
    real = peers_mod._cg_function

    def lying(gpu):
        solve, LinearOperator = real(gpu)

        def cg(A, b, rtol, maxiter, M, callback):
            x, _ = solve(A, b, rtol, min(maxiter, 3), M, callback)
            return x, 0                                   # "converged"
        return cg, LinearOperator

    monkeypatch.setattr(peers_mod, "_cg_function", lying)
    path = tmp_path / "b.csv"
    assert main(["bench", "--sizes", "32", "--contrasts", "1e3", "--backend", "numpy",
                 "--configs", "--peers", "scipy_cg", "--copy-mib", "4", "--no-progress",
                 "--csv", str(path)]) == 0
    (row,) = read_rows(path)[1]
    assert row["kind"] == "peer" and int(row["iterations"]) == 3
    assert row["converged"] == "false" and row["reason"] == "true residual above rtol"
    assert num(row["true_residual"]) > 1e-3
    out = capsys.readouterr().out.rstrip("\n").splitlines()
    # The table is the last thing printed: its header and one line per row.
    assert out[-2].split()[:3] == ["n", "contrast", "solver"]
    assert out[-1].split()[:2] == ["32", "1e3"] and "res>rtol" in out[-1]


def test_size_limits_and_peers_only(tmp_path, capsys):
    path = tmp_path / "b.csv"
    assert main(["bench", "--sizes", "32", "48", "--contrasts", "1", "--backend", "numpy",
                 "--configs", "jacobi:none@40", "--no-peer", "--repeat", "2", "--copy-mib", "4",
                 "--csv", str(path)]) == 0
    rows = read_rows(path)[1]
    assert [(r["size"], r["solver"], r["runs"]) for r in rows] == [("32", "pcg jacobi", "2")]
    assert rows[0]["speedup_solve"] == "" and rows[0]["subdomains"] == ""
    err = capsys.readouterr().err.splitlines()
    assert any("warm-up" in line for line in err)
    assert sum("run " in line and "/2:" in line for line in err) == 2   # one line per timed run


def test_preconditioner_options_in_a_configuration(tmp_path):
    """``multigrid(w_levels=2,cycle_precision=float32):none`` reaches the
    solver: the W levels' iterations, the options in the solver's name."""
    path = tmp_path / "b.csv"
    assert main(["bench", "--sizes", "64", "--contrasts", "1e3", "--backend", "numpy",
                 "--configs", "multigrid:none", "multigrid(w_levels=2,cycle_precision=float32):none",
                 "--no-peer", "--repeat", "1", "--copy-mib", "4", "--no-progress",
                 "--csv", str(path)]) == 0
    rows = read_rows(path)[1]
    assert [r["solver"] for r in rows] == [
        "pcg multigrid", "pcg multigrid(w_levels=2,cycle_precision=float32)"]
    its = [int(r["iterations"]) for r in rows]
    assert its[1] < its[0]


@pytest.mark.parametrize("args, fragment", [
    (["--sizes", "3"], "--sizes: got '3'; expected an integer >= 16"),
    (["--sizes", "abc"], "--sizes: got 'abc'"),
    (["--sizes"], "argument --sizes: expected at least one argument"),
    (["--contrasts", "-1"], "--contrasts: got '-1'; expected a number > 0"),
    (["--rtol", "2"], "--rtol: got '2'; expected a number in (0, 1)"),
    (["--repeat", "0"], "--repeat: got '0'; expected an integer >= 1"),
    (["--configs", "jacobi"], "--configs: got 'jacobi'; expected PRE[(K=V,...)]:DEFL[@MAXN]"),
    (["--configs", "multigrid(foo=1):none"],
     "expected options K=V of 'multigrid': degree, ratio, scale, coarsest, min_side, cycle_precision"),
    (["--configs", "jacobi(degree=1):none"], "expected options K=V of 'jacobi': check"),
    (["--configs", "jacobi:levelset"], "--configs: got 'jacobi:levelset'"),
    (["--configs", "jacobi:none@x"], "--configs: got 'x'"),
    (["--peers", "petsc"], "--peers: got 'petsc'; expected one of cupy_cg, scipy_cg, pyamg"),
    (["--peers", "cupy_cg"], "--peers: got 'cupy_cg' with the numpy backend"),
    (["--configs", "--no-peer"], "nothing to run"),
    (["--rhs", "zero"], "argument --rhs: invalid choice: 'zero'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line(args, fragment, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: pytest.fail("it ran"))
    assert main(["bench", "--backend", "numpy", *args]) == 2
    out, err = capsys.readouterr()
    assert fragment in one_error_line(err)
    assert out == ""


def test_csv_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: pytest.fail("it ran"))
    assert main(["bench", "--backend", "numpy", "--csv", str(tmp_path)]) == 2
    assert "--csv: got" in one_error_line(capsys.readouterr().err)


def test_csv_in_a_folder_where_no_file_can_be_created_is_refused(tmp_path, capsys, monkeypatch):
    """A folder that passes os.access but refuses new files (/proc for root; here a
    folder under a read-only mode, or a missing parent made impossible by a file)."""
    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: pytest.fail("it ran"))
    blocker = tmp_path / "plain_file"
    blocker.write_text("x")
    assert main(["bench", "--backend", "numpy", "--csv", str(blocker / "sub" / "b.csv")]) == 2
    assert "--csv: got" in one_error_line(capsys.readouterr().err)
    monkeypatch.setattr(os, "open", lambda *a, **k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied")))
    assert main(["bench", "--backend", "numpy", "--csv", str(tmp_path / "b.csv")]) == 2
    assert "writable folder" in one_error_line(capsys.readouterr().err)


def test_script_wrapper_and_subprocess_exit_code():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    for cmd in ([sys.executable, "-m", "bubbleflow.apps.cli", "bench", "--sizes", "3"],
                [sys.executable, os.path.join(ROOT, "scripts", "bench_solver.py"), "--sizes", "3"]):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert "--sizes: got '3'" in one_error_line(proc.stderr)


def test_model_and_defaults():
    assert bench_mod.default_rtol(1e3) == 1e-8 and bench_mod.default_rtol(1e6) == 1e-6
    assert bench_mod.cells_per_subdomain(4096) == 64
    assert bench_mod.cells_per_subdomain(1024) == 32
    assert bench_mod.cells_per_subdomain(100, requested=10) == 10
    n = 64 * 64
    # DPCG jacobi: matvec 7 + jacobi 3 + vectors 15 + deflation 14 arrays.
    assert bench_mod.model_bytes_per_iteration(n, "jacobi", "levelset_subdomains") == 8 * n * 39
    assert bench_mod.model_bytes_per_iteration(n, "none", "none", "matrix_free") == 8 * n * 20
    config = bench_mod.parse_config("block_ic:levelset_subdomains@2048")
    assert (config.method, config.max_size, config.short) == ("dpcg", 2048, "dpcg bic+lsd")
    assert config.runs_at(2048) and not config.runs_at(4096)
    assert bench_mod.parse_config("none:none").method == "cg"


def test_a_failing_run_is_recorded_and_the_others_go_on(monkeypatch, tmp_path, capsys):
    from bubbleflow.linalg import solver as solver_mod

    def boom(self, *args, **kwargs):
        raise RuntimeError("out of\nmemory")

    monkeypatch.setattr(solver_mod.PressureSolver, "__init__", boom)
    path = tmp_path / "b.csv"
    assert main(["bench", "--sizes", "32", "--contrasts", "1", "--backend", "numpy",
                 "--configs", "jacobi:levelset_subdomains", "--peers", "scipy_cg",
                 "--copy-mib", "4", "--no-progress", "--csv", str(path)]) == 1
    peer, ours = read_rows(path)[1]
    assert peer["converged"] == "true"
    assert ours["converged"] == "false" and ours["reason"] == "failed: RuntimeError: out of memory"
    assert ours["iterations"] == "" and ours["speedup_solve"] == ""
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.split()[:4] == ["32", "1", "dpcg", "jac+lsd"] and "failed" in last


def test_size_that_cannot_fit_in_memory_is_refused_before_any_work(capsys, monkeypatch):
    import bubbleflow.compute.backend as backend_mod

    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: pytest.fail("it ran"))
    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    assert main(["bench", "--backend", "numpy", "--sizes", "256", "8192"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--sizes: got 8192" in line and "GiB" in line
