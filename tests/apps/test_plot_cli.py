"""`bubbleflow plot` end to end, headless: files written and not blank."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.image import imread

from bubbleflow.apps.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def assert_not_blank(path):
    img = imread(path)
    rgb = img[..., :3]
    assert rgb.std() > 0.01, path
    assert (rgb.min(axis=-1) < 0.95).mean() > 0.02, path      # more than 2 % non-white pixels


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["run", "cases/bubbly_column.yaml", "-o", str(out), "--backend", "numpy", "-q",
                     "--set", "grid.nx=32", "--set", "grid.ny=32"]) == 0
        assert main(["run", "cases/two_phase.yaml", "-o", str(out), "--backend", "numpy", "-q",
                     "--no-progress", "--set", "grid.nx=20", "--set", "grid.ny=40",
                     "--set", "time.end=0.1",
                     "--set", "output.interval=0.05"]) == 0
    finally:
        os.chdir(cwd)
    return out


def test_pressure_run_plots(runs, tmp_path, capsys):
    assert main(["plot", str(runs / "bubbly_column.h5"), "-o", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in ("bubbly_column_fields.png", "bubbly_column_convergence.png"):
        assert_not_blank(tmp_path / name)
        assert str(tmp_path / name) in printed


def test_flow_run_plots_with_reference_overlay(runs, tmp_path):
    assert main(["plot", str(runs / "two_phase.h5"), "-o", str(tmp_path)]) == 0
    for name in ("fields", "convergence", "benchmark", "iterations"):
        assert_not_blank(tmp_path / f"two_phase_{name}.png")


def test_study_summary_plots(tmp_path):
    path = tmp_path / "summary.csv"
    cols = ["run", "contrast", "solver.preconditioner.type", "solver.deflation.type", "status",
            "iterations", "residual", "converged", "reason", "setup_seconds", "solve_seconds",
            "wall_seconds"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        k = 0
        for pre in ("jacobi", "incomplete_poisson_scaled"):
            for defl in ("none", "levelset_subdomains"):
                for c in (1, 1e3, 1e6):
                    it = int(50 + 10 * np.log10(c) * (3 if defl == "none" else 1))
                    w.writerow([f"run_{k:04d}", c, pre, defl, "ok", it, 1e-7, "true", "converged",
                                0.01, 0.02 * it / 50, 0.05])
                    k += 1
    assert main(["plot", str(path)]) == 0
    for name in ("summary_iterations.png", "summary_time.png"):
        assert_not_blank(tmp_path / name)


def test_bench_table_plots_time_to_solution(tmp_path, capsys):
    """``bubbleflow plot BENCH.csv``: a table of ``bubbleflow bench --csv``
    gives its time-to-solution figure (a panel per contrast)."""
    path = tmp_path / "bench.csv"
    assert main(["bench", "--backend", "numpy", "--sizes", "32", "64", "--contrasts", "1", "1e3",
                 "--configs", "multigrid:none", "incomplete_poisson_scaled:levelset_subdomains",
                 "--peers", "scipy_cg", "--repeat", "1", "--no-progress",
                 "--csv", str(path)]) == 0
    capsys.readouterr()
    assert main(["plot", str(path)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "bench_time.png")]
    assert_not_blank(tmp_path / "bench_time.png")
    assert imread(tmp_path / "bench_time.png").shape[1] > 1.5 * imread(
        tmp_path / "bench_time.png").shape[0]                           # two panels side by side


def test_bad_plot_input_is_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    for target in ("missing.h5", str(bad)):
        res = subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", "plot", target],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        assert res.returncode == 2
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in res.stderr


def test_unreadable_run_file_is_called_unreadable_not_a_non_hdf5_file(tmp_path, capsys,
                                                                      monkeypatch):
    """(Root reads everything, so the permission is simulated.)"""
    import bubbleflow.apps.plots_run_file as run_file_mod
    from bubbleflow.apps.cli import main

    f = tmp_path / "run.h5"
    f.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    real_access = run_file_mod.os.access
    monkeypatch.setattr(run_file_mod.os, "access",
                        lambda p, mode: False if str(p) == str(f) else real_access(p, mode))
    assert main(["plot", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "permission denied" in err
