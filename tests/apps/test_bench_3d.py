"""`bubbleflow bench --dim 3`: the 3-D bubbly column's rows (iterations, the
floor from the 3-D bytes model, memory per cell, the peer side by side), the
7-point CSR matrix the peers get, and what is refused before any work.

Timings are never asserted on; only their consistency.
"""
import contextlib
import io

import numpy as np
import pytest
from helpers.cli import run_cli
from helpers.bench import num, one_error_line, read_rows
from helpers.operators import seven_point

from bubbleflow.apps import bench as bench_mod
from bubbleflow.apps.bench import model3d
from bubbleflow.apps.cli import main
from bubbleflow.case.problem import bubbly_column_3d
from bubbleflow.linalg.solver import PressureSolver
from bubbleflow.mesh.grid import Grid
from bubbleflow.operators.poisson import PoissonOperator


@pytest.fixture(scope="module")
def run_3d(tmp_path_factory):
    """The 3-D bench on NumPy at 16^3 and 24^3: multigrid and Jacobi PCG
    beside SciPy's cg + Jacobi."""
    path = tmp_path_factory.mktemp("bench3d") / "bench.csv"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["bench", "--dim", "3", "--backend", "numpy", "--sizes", "16", "24",
                     "--contrasts", "1e3", "--configs", "multigrid:none", "jacobi:none",
                     "--peers", "scipy_cg", "--repeat", "1", "--copy-mib", "4",
                     "--csv", str(path)])
    return dict(code=code, path=path, stdout=stdout.getvalue(), stderr=stderr.getvalue())


def test_3d_rows_have_iterations_floor_memory_and_the_peer(run_3d):
    assert run_3d["code"] == 0, run_3d["stderr"]
    columns, rows = read_rows(run_3d["path"])
    assert tuple(columns) == bench_mod.COLUMNS
    assert [(r["size"], r["kind"], r["config"]) for r in rows] == [
        (n, kind, config) for n in ("16", "24")
        for kind, config in (("peer", "scipy_cg"), ("ours", "multigrid:none"),
                             ("ours", "jacobi:none"))]
    for r in rows:
        n = int(r["size"])
        assert r["dim"] == "3" and int(r["cells"]) == n ** 3
        assert r["converged"] == "true" and num(r["true_residual"]) <= num(r["rtol"])
        its, ms = int(r["iterations"]), num(r["ms_per_iteration"])
        assert its > 0 and ms * its == pytest.approx(num(r["solve_ms"]), rel=1e-9)
        nbytes, floor = num(r["bytes_per_iteration"]), num(r["floor_ms_per_iteration"])
        assert floor == pytest.approx(1e3 * nbytes / (num(r["copy_gb_s"]) * 1e9), rel=1e-6)
        assert num(r["ratio_to_floor"]) == pytest.approx(ms / floor, rel=1e-6)
        assert r["bytes_source"] == ("model (peer)" if r["kind"] == "peer" else "model 3-D")
        assert r["memory_measure"] == "tracemalloc peak"
        per_cell = num(r["memory_bytes_per_cell"])
        assert per_cell == pytest.approx(num(r["memory_bytes"]) / n ** 3, rel=1e-9)
        # More than the solution vector, less than the estimate the size check uses.
        assert 8 < per_cell < 8 * model3d.PEER_ARRAYS
        if r["kind"] == "ours":
            peer = next(p for p in rows if p["kind"] == "peer" and p["size"] == r["size"])
            assert num(r["speedup_solve"]) == pytest.approx(
                num(peer["solve_ms"]) / num(r["solve_ms"]), rel=1e-9)
    mg = [int(r["iterations"]) for r in rows if r["config"] == "multigrid:none"]
    jac = [int(r["iterations"]) for r in rows if r["config"] == "jacobi:none"]
    assert all(5 * m < j for m, j in zip(mg, jac))
    # Jacobi PCG is the peer's algorithm: the same iterations within a few.
    peer = [int(r["iterations"]) for r in rows if r["kind"] == "peer"]
    assert all(abs(p - j) <= 3 for p, j in zip(peer, jac))


def test_3d_table_is_printed(run_3d):
    out = run_3d["stdout"].rstrip("\n").splitlines()
    assert any(line.startswith("# problem: bubbly column n^3") for line in out)
    head = out[-7]
    assert head.split()[:4] == ["n", "contrast", "solver", "its"]
    assert "x floor" in head and head.endswith("trace B/cell")
    table = [line.split() for line in out[-6:]]
    assert [t[0] for t in table] == ["16"] * 3 + ["24"] * 3
    for t in table:
        assert int(t[4]) > 0                             # its (the solver is two words)
        assert float(t[-1]) > 8                                   # bytes per cell
    assert "16^3 contrast 1e3 pcg multigrid" in run_3d["stderr"]


def test_bytes_model_counts_the_arrays_of_the_3d_iteration():
    n = 16
    A, b, _ = bubbly_column_3d(n, 1e3)
    cells, faces = n ** 3, 3 * n * n * (n - 1)
    jacobi = PressureSolver(A, method="pcg", preconditioner="jacobi")
    # Couplings, p and w; D^-1, r and y; CG's 15 vector arrays.
    assert bench_mod.bytes_per_iteration_3d(jacobi) == 8 * (faces + 2 * cells + 3 * cells
                                                            + 15 * cells)
    mg = PressureSolver(A, method="pcg", preconditioner="multigrid")
    M = mg.M
    assert [lv.shape for lv in M.levels] == [(16, 16, 16), (8, 8, 8)] and M.w_levels == 0
    coarse = 8 ** 3
    # The host's factor of the coarsest level: its band (8 x 8 planes wide) of float64.
    factors = (8 * 8 + 1) * coarse * 8
    assert M.coarse_inverse.factor.nbytes == factors
    # Down and up each read the float32 couplings once (D^-1 formed from them);
    # the float64 input is read by both, the result written (3 x 8 bytes);
    # x written down and read up, the coarse b written and the coarse x read
    # (float32); the coarsest level: its factors, its input and output.
    cycle = (2 * 4 * faces + 3 * 8 * cells + 2 * 4 * cells + 2 * 4 * coarse
             + factors + 2 * 4 * coarse)
    assert M.bytes_per_apply() == cycle
    assert bench_mod.bytes_per_iteration_3d(mg) == 8 * (faces + 2 * cells + 15 * cells) + cycle


@pytest.mark.parametrize("storage", ["matrix_free", "diagonals"])
def test_peer_csr_matrix_is_the_seven_point_matrix(storage, backend):
    """The peers' matrix, the operator's own export, against the textbook
    7-point matrix: the same pattern (walls left out, sorted rows), the
    values to rounding, float64 with cuSPARSE's int32 indices."""
    rng = np.random.default_rng(3)
    grid = Grid.regular((5, 4, 3), (1.0, 0.8, 0.9))
    faces = [rng.uniform(1e-3, 1.0, s) for s in ((3, 4, 4), (3, 3, 5), (2, 4, 5))]
    A = PoissonOperator.from_faces([backend.xp.asarray(f) for f in faces], grid, backend=backend,
                                   storage=storage)
    C = A.to_backend_sparse()
    assert backend.sparse.issparse(C) and C.format == "csr"
    assert C.dtype == np.float64 and C.indices.dtype == C.indptr.dtype == np.int32
    ref = seven_point(*faces, grid.spacing)
    assert C.nnz == ref.nnz and C.has_sorted_indices
    np.testing.assert_array_equal(backend.to_host(C.indptr), ref.indptr)
    np.testing.assert_array_equal(backend.to_host(C.indices), ref.indices)
    np.testing.assert_allclose(backend.to_host(C.data), ref.data, rtol=1e-14, atol=0)


@pytest.fixture
def refuse_runs(monkeypatch):
    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: pytest.fail("it ran"))


@pytest.mark.parametrize("value", ["4", "1", "x", "2.5", ""])
def test_bad_dim_is_one_line(value, capsys, refuse_runs):
    assert main(["bench", "--backend", "numpy", "--dim", value]) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert f"--dim: got {value!r}; expected 2 (the n^2 column) or 3" in line
    assert out == ""


@pytest.mark.parametrize("args, fragment", [
    (["--flow", "--dim", "3"], "--dim"),
    (["--dim", "3", "--configs", "block_ic(block_lines=3):none"],
     "--configs: got 'block_ic(block_lines=3):none' with --dim 3, which fails on a 3-D "
     "operator"),
])
def test_what_3d_cannot_run_is_one_line(args, fragment, capsys, refuse_runs):
    assert main(["bench", "--backend", "numpy", *args]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)


def test_a_deflation_that_fails_in_3d_is_refused_before_any_work(monkeypatch, capsys,
                                                                 refuse_runs):
    """A configuration whose set-up fails on the 3-D operator is refused
    before any timing, with the solver's own error as the line (a stand-in
    set-up raises one here)."""
    from bubbleflow.linalg import solver as solver_mod

    real = solver_mod.PressureSolver.__init__

    def two_d_only(self, A, *args, deflation=None, **kwargs):
        if deflation not in (None, "none") and A.ndim == 3:
            raise ValueError(f"deflation {deflation!r}: cannot be set up here")
        real(self, A, *args, deflation=deflation, **kwargs)

    monkeypatch.setattr(solver_mod.PressureSolver, "__init__", two_d_only)
    assert main(["bench", "--backend", "numpy", "--dim", "3",
                 "--configs", "multigrid:none", "jacobi:levelset_subdomains"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--configs: got 'jacobi:levelset_subdomains' with --dim 3" in line
    assert "cannot be set up here" in line


def test_3d_defaults(monkeypatch):
    seen = {}
    monkeypatch.setattr(bench_mod, "run_bench",
                        lambda bench: seen.setdefault("bench", bench) and ([], 0))
    assert main(["bench", "--backend", "numpy", "--dim", "3", "--no-peer"]) == 0
    bench = seen["bench"]
    assert (bench.dim, bench.storage, bench.sizes) == (3, "matrix_free", [32, 48])
    assert [c.token for c in bench.configs] == list(bench_mod.DEFAULT_CONFIGS_3D)


def test_a_3d_size_that_cannot_fit_is_refused_before_any_work(capsys, monkeypatch,
                                                              refuse_runs):
    import bubbleflow.compute.backend as backend_mod

    # 4096^3 cells: terabytes, whatever this machine has.
    assert main(["bench", "--backend", "numpy", "--dim", "3", "--sizes", "16", "4096"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--sizes: got 4096; expected a size whose arrays fit in the host: 4096^3 (--dim 3)" \
        in line and "GiB free)" in line
    # 256^3 (a few GiB with the peer) against 1 GiB free.
    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    assert main(["bench", "--backend", "numpy", "--dim", "3", "--sizes", "256"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--sizes: got 256" in line and "(80 % of the 1 GiB free)" in line
    # The same size fits in 2-D.
    monkeypatch.setattr(bench_mod, "run_bench", lambda *a, **k: ([], 0))
    assert main(["bench", "--backend", "numpy", "--sizes", "256", "--no-peer"]) == 0


def test_bad_dim_from_the_command_line():
    proc = run_cli("bench", "--dim", "5", "--backend", "numpy")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--dim: got '5'" in one_error_line(proc.stderr)


def test_3d_rows_with_the_seven_diagonals(capsys):
    assert main(["bench", "--backend", "numpy", "--dim", "3", "--sizes", "16", "--contrasts",
                 "1e3", "--configs", "multigrid:none", "--storage", "diagonals", "--no-peer",
                 "--repeat", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "7-point operator seven diagonals" in out and "pcg mg" in out
