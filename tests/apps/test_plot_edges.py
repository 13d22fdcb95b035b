"""`bubbleflow plot` draws every valid output, edge cases included (a flow
without gas, one snapshot, a killed, stopped or failed run, 3-D, studies
solved at once, of one point or all failed): exit 0 and PNGs written, a
quantity the output lacks left out with a note.  A file that is not a valid
output is one line, exit 2."""
import csv
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from bubbleflow.apps.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILLER = os.path.join(ROOT, "tests", "helpers", "killed_run.py")
FLOW_2D = ["cases/two_phase.yaml", "--backend", "numpy", "-q", "--no-progress",
           "--set", "grid.nx=20", "--set", "grid.ny=40"]
FLOW_3D = ["cases/rising_bubble_3d.yaml", "--backend", "numpy", "-q", "--no-progress",
           "--set", "grid.nx=8", "--set", "grid.ny=8", "--set", "grid.nz=16",
           "--set", "time.end=0.01"]
NO_GAS = ["--set", "geometry.bubbles=[]"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Run files of the edge cases, made once: ``{label: path}``."""
    out = tmp_path_factory.mktemp("edges")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        runs = {"no_gas": ["run", *FLOW_2D, *NO_GAS, "--set", "time.end=0.02"],
                # (DPCG: multigrid's one level at 20 x 40 is a direct solve)
                "unconverged": ["run", *FLOW_2D, "--set", "time.end=0.06",
                                "--set", "solver.maxiter=2", "--set", "solver.method=dpcg",
                                "--set", "solver.preconditioner.type=incomplete_poisson_scaled",
                                "--set", "solver.deflation.type=levelset_subdomains"],
                "3d": ["run", *FLOW_3D],
                "3d_no_gas": ["run", *FLOW_3D, *NO_GAS],
                "pressure_no_gas": ["run", "cases/bubbly_column.yaml", "--backend", "numpy", "-q",
                                    "--set", "grid.nx=32", "--set", "grid.ny=32",
                                    "--set", "geometry.bubble_lattice=null",
                                    "--set", "geometry.free_surface=null"]}
        files = {}
        for label, args in runs.items():
            failed = label == "unconverged"          # its solves stop at maxiter: exit 1
            assert main([*args, "-o", str(out / label)]) == (1 if failed else 0), label
            files[label] = next((out / label).glob("*.h5"))
    finally:
        os.chdir(cwd)
    # Killed inside its first solve: one snapshot (t = 0), no solve recorded.
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for label, extra in (("one_snapshot", []), ("one_snapshot_no_gas", NO_GAS)):
        args = ["run", *FLOW_2D, *extra, "--set", "time.end=0.1", "-o", str(out / label)]
        res = subprocess.run([sys.executable, KILLER, "solve", "1", "--", *args], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == -9 or res.returncode == 137, res.stderr
        files[label] = out / label / "two_phase.h5"
    # The run statuses a stopped or failed run leaves in its index.
    for status in ("stopped", "failed"):
        folder = out / status
        shutil.copytree(files["unconverged"].parent, folder)
        files[status] = folder / "two_phase.h5"
        with h5py.File(files[status], "a") as fh:
            fh.attrs["run_status"] = status
    return files


def _plot(path, outdir, capsys):
    code = main(["plot", str(path), "-o", str(outdir)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.split(), err.splitlines()


@pytest.mark.parametrize("label, figures", [
    ("no_gas", ("fields", "convergence", "benchmark", "iterations")),
    ("unconverged", ("fields", "convergence", "benchmark", "iterations", "bubbles")),
    ("stopped", ("fields", "convergence", "benchmark", "iterations", "bubbles")),
    ("failed", ("fields", "convergence", "benchmark", "iterations", "bubbles")),
    ("one_snapshot", ("fields", "benchmark", "bubbles")),
    ("one_snapshot_no_gas", ("fields", "benchmark")),
    ("3d", ("fields", "convergence", "benchmark", "iterations", "bubbles")),
    ("3d_no_gas", ("fields", "convergence", "benchmark", "iterations")),
    ("pressure_no_gas", ("fields", "convergence")),
])
def test_every_edge_run_is_drawn(outputs, label, figures, tmp_path, capsys):
    code, written, _ = _plot(outputs[label], tmp_path, capsys)
    assert code == 0
    stem = outputs[label].stem
    expected = [str(tmp_path / f"{stem}_{name}.png") for name in figures]
    assert written == expected
    for path in expected:
        assert os.path.getsize(path) > 1000


def test_a_flow_without_gas_says_which_quantities_it_left_out(outputs, tmp_path, capsys):
    _, _, notes = _plot(outputs["no_gas"], tmp_path, capsys)
    assert notes == ["note: two_phase_benchmark.png: no rise_velocity, circularity, centroid_y "
                     "(no finite value in the diagnostics: a flow without gas has none); their "
                     "panels are empty",
                     "note: two_phase_bubbles.png not written: the bubble table is empty (no "
                     "bubble was sampled)"]


def _summary(path, rows, flow=False):
    """A study summary as `bubbleflow sweep` writes it (the columns it uses)."""
    its = ["iterations_mean", "iterations_max"] if flow else ["iterations"]
    cols = ["run", "physics.gravity", "status", *its, "residual", "converged", "reason",
            "setup_seconds", "solve_seconds", "wall_seconds", "file", "error"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for k, (g, status, it, seconds) in enumerate(rows):
            values = [it, it] if flow else [it]
            w.writerow([f"run_{k:04d}", g, status, *values, 0.0, "true", "converged", 0.01,
                        seconds, 0.1, f"run_{k:04d}.h5", ""])
    return path


@pytest.mark.parametrize("label, rows, flow", [
    ("solved_at_once", [(0, "ok", 0, 0.0), (0.98, "ok", 0, 0.0)], False),
    ("flow_solved_at_once", [(0, "ok", 0, 0.0), (0.98, "ok", 0, 0.0)], True),
    ("one_point", [(9.81, "ok", 12, 0.01)], False),
    ("one_point_at_once", [(9.81, "ok", 0, 0.0)], True),
    ("all_failed", [(1, "failed", "", ""), (2, "error", "", "")], False),
    ("all_not_converged", [(1, "not_converged", 10000, 2.0), (2, "not_converged", 10000, 3.0)],
     False),
])
def test_every_edge_study_is_drawn(label, rows, flow, tmp_path, capsys):
    path = _summary(tmp_path / "summary.csv", rows, flow)
    code, written, _ = _plot(path, tmp_path / "png", capsys)
    assert code == 0
    assert written == [str(tmp_path / "png" / f"summary_{n}.png") for n in ("iterations", "time")]
    for p in written:
        assert os.path.getsize(p) > 1000


def test_a_sweep_solved_at_once_is_drawn(tmp_path, capsys):
    """A flow study without gas: every solve takes 0 iterations and 0 s."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["sweep", *FLOW_2D, *NO_GAS, "--set", "time.end=0.02",
                     "--param", "physics.gravity", "--values", "0,0.98",
                     "-o", str(tmp_path)]) == 0
    finally:
        os.chdir(cwd)
    capsys.readouterr()
    folder = next(p for p in tmp_path.iterdir() if (p / "summary.csv").exists())
    with open(folder / "summary.csv", newline="") as fh:
        assert {r["iterations_mean"] for r in csv.DictReader(fh)} == {"0.0"}
    code, written, _ = _plot(folder, tmp_path / "png", capsys)
    assert code == 0 and len(written) == 2


def _edit(src, dst, edit):
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as fh:
        edit(fh)
    return dst


def _replace(fh, name, value):
    del fh[name]
    fh[name] = value


@pytest.mark.parametrize("edit, said", [
    (lambda fh: _replace(fh, "diagnostics/area", np.zeros(7)),
     "diagnostics/area: has 7 values, diagnostics/time 2; expected one value per diagnostics row"),
    (lambda fh: _replace(fh, "diagnostics/time", np.array([b"a", b"b"])),
     "cannot be read as a run file (ValueError"),
    (lambda fh: _replace(fh, "solver/iterations", np.array([b"x"])),
     "cannot be read as a run file (ValueError"),
])
def test_an_invalid_run_file_is_one_line(outputs, edit, said, tmp_path):
    bad = _edit(outputs["no_gas"], tmp_path / "bad.h5", edit)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-m", "bubbleflow", "plot", str(bad)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("error: ") and "bad.h5: " in lines[0] and said in lines[0]
    assert not list(tmp_path.glob("*.png"))
