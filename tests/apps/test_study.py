"""`bubbleflow sweep`: parameter studies, their summary files, resume, failures, executors.

Every study here is the bubbly column on a 32 x 32 grid (a run takes a few
hundredths of a second on the CPU), run on NumPy.
"""
import csv
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
import yaml

from bubbleflow.apps.sweep import dask_cluster, executors
from bubbleflow.apps.sweep import point as point_mod
from bubbleflow.apps.cli import main
from bubbleflow.case.config import CaseError
from bubbleflow.apps.sweep import (Parameter, expand, parse_range, parse_values, prepare_study,
                              read_summary)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMN = os.path.join(ROOT, "cases", "bubbly_column.yaml")
SMALL = ["--set", "grid.nx=32", "--set", "grid.ny=32",
         "--set", "solver.rtol=1e-6", "--backend", "numpy", "--no-progress"]


def sweep(*args):
    return main(["sweep", *args])


def rows_of(folder):
    with open(os.path.join(folder, "summary.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


def h5_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".h5") and f != "summary.h5")


def one_error_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------
# Values, ranges, products
# --------------------------------------------------------------------------

def test_ranges():
    assert parse_range("1:1e6:7:log") == [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]
    assert parse_range("0.1:0.5:5") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_range("0.1:0.5:5:lin") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_range("1:1e3:4:log", current=7) == [1, 10, 100, 1000]     # int key: ints
    assert all(type(v) is int for v in parse_range("16:64:4", current=32))
    assert all(type(v) is float for v in parse_range("16:64:4", current=0.5))
    assert parse_range("2:9:1") == [2.0]
    assert parse_range("jacobi") is None and parse_range("a:b:c") is None
    for bad in ("1:2:0", "1:2:x", "0:1e3:4:log", "1:2:3:cubic"):
        with pytest.raises(ValueError):
            parse_range(bad)


def test_values():
    assert parse_values("1,1e3,1e6") == [1, 1000.0, 1e6]
    assert parse_values("jacobi, block_ic") == ["jacobi", "block_ic"]
    assert parse_values("[8,8],[4, 4]") == [[8, 8], [4, 4]]
    assert parse_values("null,true,0.5") == [None, True, 0.5]
    assert parse_values("1e2,64", current=32) == [100, 64]
    assert parse_values("1,10:1000:3:log") == [1, 10.0, 100.0, 1000.0]
    with pytest.raises(ValueError):
        parse_values("1,,2")


def test_cartesian_product_first_parameter_slowest():
    a = Parameter("contrast", [1, 10, 100], "")
    b = Parameter("solver.preconditioner.type", ["jacobi", "block_ic"], "")
    c = Parameter("solver.deflation.type", ["none", "subdomains"], "")
    points = expand([a, b, c])
    assert len(points) == 12
    values = [tuple(v for _, v in p) for p in points]
    assert values[:3] == [(1, "jacobi", "none"), (1, "jacobi", "subdomains"),
                          (1, "block_ic", "none")]
    assert values[-1] == (100, "block_ic", "subdomains")
    assert len(set(values)) == 12
    assert expand([]) == []


def test_contrast_study_file_validates_84_points():
    st = prepare_study(os.path.join(ROOT, "cases", "contrast_study.yaml"), backend="numpy")
    assert st.name == "contrast_study" and len(st.points) == 84
    assert [p.key for p in st.parameters] == ["contrast", "solver.preconditioner.type",
                                              "solver.deflation.type"]
    for p in st.points:
        case = p["case"]
        assert case["grid"]["nx"] == case["grid"]["ny"] == 128
        assert case["solver"]["rtol"] == 1e-6 and case["solver"]["maxiter"] == 20000
        assert case["fluids"]["gas"]["density"] == pytest.approx(1000.0 / p["params"]["contrast"])
        deflation = p["params"]["solver.deflation.type"]
        assert case["solver"]["method"] == ("pcg" if deflation == "none" else "dpcg")
        assert case["solver"]["preconditioner"]["type"] == p["params"]["solver.preconditioner.type"]
        assert case["name"] == p["run"] and p["path"].endswith(f"{p['run']}.h5")


# --------------------------------------------------------------------------
# End to end, in-process
# --------------------------------------------------------------------------

def test_sweep_writes_one_file_per_run_and_the_summary(tmp_path, capsys):
    rc = sweep(COLUMN, "-o", str(tmp_path), *SMALL, "--param", "contrast", "--values", "1,1e3",
               "--param", "solver.preconditioner.type", "--values", "jacobi,incomplete_poisson_scaled")
    out = capsys.readouterr().out
    assert rc == 0, out
    folder = tmp_path / "bubbly_column_study"
    assert h5_files(folder) == [f"run_{i:04d}.h5" for i in range(4)]
    assert "[4/4] run_0003 contrast=1000 preconditioner=incomplete_poisson_scaled: ok" in out
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")]

    rows = rows_of(folder)
    assert [r["run"] for r in rows] == ["run_0000", "run_0001", "run_0002", "run_0003"]
    assert [(r["contrast"], r["solver.preconditioner.type"]) for r in rows] == [
        ("1", "jacobi"), ("1", "incomplete_poisson_scaled"),
        ("1000.0", "jacobi"), ("1000.0", "incomplete_poisson_scaled")]
    for r in rows:
        assert r["status"] == "ok" and r["converged"] == "true" and r["reason"] == "converged"
        with h5py.File(folder / r["file"], "r") as fh:
            assert int(r["iterations"]) == int(fh["solver/iterations"][0])
            assert float(r["residual"]) == float(fh["solver/residual"][0]) <= 1e-6
            assert float(r["setup_seconds"]) == float(fh["solver/setup_seconds"][0])
            assert float(r["solve_seconds"]) == float(fh["solver/solve_seconds"][0])
            case = yaml.safe_load(fh.attrs["case"])
        assert case["name"] == r["run"]
        assert case["fluids"]["gas"]["density"] == pytest.approx(1000.0 / float(r["contrast"]))
        assert case["solver"]["preconditioner"]["type"] == r["solver.preconditioner.type"]
        assert float(r["wall_seconds"]) > 0 and r["backend"] == "numpy" and r["device"]
        assert r["error"] == ""
    # Higher contrast: more iterations with Jacobi.
    assert int(rows[2]["iterations"]) > int(rows[0]["iterations"])

    with h5py.File(folder / "summary.h5", "r") as fh:
        g = fh["summary"]
        columns = list(g.attrs["columns"])
        assert columns == list(rows[0].keys())
        assert g["iterations"].dtype == np.int64
        assert list(g["iterations"][()]) == [int(r["iterations"]) for r in rows]
        assert [s.decode() for s in g["status"][()]] == ["ok"] * 4
        assert list(g["contrast"][()]) == [1.0, 1.0, 1000.0, 1000.0]
        assert "contrast" in yaml.safe_load(fh.attrs["study"])["parameters"]

    record = yaml.safe_load((folder / "study.yaml").read_text())
    assert record["parameters"] == {"contrast": [1, 1000.0],
                                    "solver.preconditioner.type": ["jacobi",
                                                                   "incomplete_poisson_scaled"]}
    assert record["runs"] == 4 and "grid.nx=32" in record["set"]
    assert yaml.safe_load(record["case"])["grid"]["nx"] == 32


def test_sweep_block_in_a_study_file_with_a_range(tmp_path, capsys):
    with open(COLUMN) as fh:
        base = yaml.safe_load(fh)
    base["grid"].update(nx=32, ny=32)
    base["solver"]["deflation"]["subdomains"] = [4, 4]
    base["solver"]["rtol"] = 1e-6
    base["output"]["directory"] = str(tmp_path / "out")
    base["sweep"] = {"name": "ranged", "parameters": {"contrast": "1:1e4:3:log",
                                                      "grid.nx": [32]}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    # --param adds a key to the block's (or replaces one of the same key).
    assert sweep(str(path), "--backend", "numpy", "--no-progress", "-q",
                 "--param", "grid.nx", "--values", "32:64:2") == 0
    assert capsys.readouterr().out == ""
    rows = read_summary(tmp_path / "out" / "ranged" / "summary.csv")
    assert [(r["contrast"], r["grid.nx"]) for r in rows] == [
        (1.0, 32), (1.0, 64), (100.0, 32), (100.0, 64), (1e4, 32), (1e4, 64)]
    assert all(r["status"] == "ok" for r in rows)


def test_sweep_block_errors_name_the_file_line_and_key(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ngrid: {nx: 32, ny: 32}\nsweep:\n  name: s\n"
                    "  parameters:\n    contrast: '1:1e3:0:log'\n")
    assert sweep(str(path)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{path}:6: sweep.parameters.contrast: range" in line
    path.write_text("name: s\nsweep:\n  name: s\n  paramters: {contrast: [1]}\n")
    assert sweep(str(path)) == 2
    assert f"{path}:4: sweep.paramters: unknown key" in one_error_line(capsys.readouterr().err)


def test_flow_sweep_records_iterations_and_benchmark_quantities(tmp_path, capsys):
    case = os.path.join(ROOT, "cases", "bubbly_column_flow.yaml")
    rc = sweep(case, "-o", str(tmp_path), "--backend", "numpy", "--no-progress",
               "--set", "grid.nx=16", "--set", "grid.ny=32",
               "--set", "time.end=0.03",
               "--param", "contrast", "--values", "10,1000")
    assert rc == 0, capsys.readouterr()
    rows = read_summary(tmp_path / "bubbly_column_flow_study" / "summary.csv")
    assert len(rows) == 2
    for r in rows:
        assert r["status"] == "ok" and r["converged"] is True
        assert r["pressure_solves"] == r["steps"] >= 1
        assert 0 < r["iterations_mean"] <= r["iterations_max"]
        for q in ("max_rise_velocity", "min_circularity", "area_change", "final_time"):
            assert isinstance(r[q], float)
        assert r["final_time"] == pytest.approx(0.03)


# --------------------------------------------------------------------------
# Failures, resume
# --------------------------------------------------------------------------

def test_failed_and_unconverged_runs_are_recorded_and_the_others_run(tmp_path, capsys,
                                                                     monkeypatch):
    # Placement that fails at run time (the case check bounds the fill, so a
    # real jam is rare): 30 stands for "cannot be placed".
    import bubbleflow.apps.run as app_mod

    real_build = app_mod.build_pressure_problem

    def build(case, backend):
        if case.geometry.random_bubbles.count == 30:
            raise ValueError("could not place 30 random bubbles in the region")
        return real_build(case, backend)

    monkeypatch.setattr(app_mod, "build_pressure_problem", build)
    rc = sweep(COLUMN, "-o", str(tmp_path), *SMALL,
               "--set", "geometry.bubble_lattice=null",
               "--set", "geometry.random_bubbles={count: 2, radius: 0.05, seed: 3, "
                        "region: [0, 1, 0, 0.85]}",
               "--param", "geometry.random_bubbles.count", "--values", "2,30",
               "--param", "solver.maxiter", "--values", "2,1000")
    out = capsys.readouterr().out
    assert rc == 1
    folder = tmp_path / "bubbly_column_study"
    rows = read_summary(folder / "summary.csv")
    status = {(r["geometry.random_bubbles.count"], r["solver.maxiter"]): r for r in rows}
    assert status[(2, 1000)]["status"] == "ok"
    nc = status[(2, 2)]
    assert nc["status"] == "not_converged" and nc["reason"] == "maxiter" and nc["iterations"] == 2
    assert nc["converged"] is False and "pressure solve failed" in nc["error"]
    for key in ((30, 2), (30, 1000)):
        r = status[key]
        assert r["status"] == "failed" and "geometry.random_bubbles" in r["error"]
        assert r["iterations"] is None and r["file"].startswith("run_")
        assert "\n" not in r["error"]
    assert h5_files(folder) == ["run_0000.h5", "run_0001.h5"]    # the failed runs wrote none
    assert "2 not converged" not in out and "1 ok, 1 not converged, 2 failed" in out


def test_resume_skips_finished_runs_and_runs_the_missing_ones(tmp_path, capsys, monkeypatch):
    args = [COLUMN, "-o", str(tmp_path), *SMALL, "--param", "contrast", "--values", "1,10,100,1000"]
    folder = tmp_path / "bubbly_column_study"
    real = point_mod.run_point
    calls = []

    def interrupted(point):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(point["run"])
        return real(point)

    monkeypatch.setattr(point_mod, "run_point", interrupted)
    assert sweep(*args) == 130                  # Ctrl-C after two runs
    capsys.readouterr()
    assert [r["run"] for r in rows_of(folder)] == ["run_0000", "run_0001"]
    stamps = {f: os.stat(folder / f).st_mtime_ns for f in h5_files(folder)}
    assert sorted(stamps) == ["run_0000.h5", "run_0001.h5"]

    # Without --resume the folder is refused; with it, only the missing runs run.
    monkeypatch.setattr(point_mod, "run_point", real)
    assert sweep(*args) == 2
    assert "--resume" in one_error_line(capsys.readouterr().err)
    calls.clear()
    monkeypatch.setattr(point_mod, "run_point", lambda p: calls.append(p["run"]) or real(p))
    assert sweep(*args, "--resume") == 0
    assert "(2 finished, 2 to run)" in capsys.readouterr().out
    assert calls == ["run_0002", "run_0003"]
    assert {f: os.stat(folder / f).st_mtime_ns for f in stamps} == stamps
    rows = rows_of(folder)
    assert [r["run"] for r in rows] == [f"run_{i:04d}" for i in range(4)]
    assert [r["status"] for r in rows] == ["ok"] * 4
    with h5py.File(folder / "summary.h5", "r") as fh:
        assert len(fh["summary/run"]) == 4

    # Everything finished: a resume runs nothing.
    calls.clear()
    assert sweep(*args, "--resume") == 0 and calls == []


# --------------------------------------------------------------------------
# Bad input: one line, exit 2, nothing run
# --------------------------------------------------------------------------

def test_unknown_param_key_is_one_line_before_anything_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "bubbleflow.apps.cli", "sweep", COLUMN, "-o", str(tmp_path),
         "--param", "contrast", "--values", "1,10",
         "--param", "solver.preconditoner.type", "--values", "jacobi"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    line = one_error_line(proc.stderr)
    assert line == (f"error: {COLUMN} (--param solver.preconditoner.type): solver.preconditoner: "
                    "unknown key; did you mean 'preconditioner'? (expected one of: method, "
                    "variant, preconditioner, deflation, rtol, atol, maxiter, check_every)")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("param, values, fragment", [
    ("fluids.gas.density", "1,-1", "(--param fluids.gas.density): fluids.gas.density: got -1; "
                                   "expected a number > 0"),
    ("contrast", "10,-5", "(--param contrast): contrast: got -5; expected a number > 0"),
    ("grid.nx", "32,2", "(--param grid.nx): grid.nx: got 2; expected an integer >= 4"),
    ("solver.deflation.subdomains", "[4,4],[5,5]",
     "solver.deflation.subdomains: got [5, 5] for a 32 x 32 grid"),
    ("solver.preconditioner.type", "jacobi,jacoby", "did you mean 'jacobi'?"),
    ("contrast", "1:10:x", "(--param contrast --values 1:10:x): contrast: range '1:10:x'"),
    ("name", "a,b", "name: is set by the study for each run"),
])
def test_invalid_values_are_one_line_before_anything_runs(tmp_path, capsys, monkeypatch,
                                                          param, values, fragment):
    monkeypatch.setattr(point_mod, "run_point", lambda p: pytest.fail("a run started"))
    assert sweep(COLUMN, "-o", str(tmp_path), *SMALL, "--param", param, "--values", values) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert fragment in line, line
    assert out == "" and os.listdir(tmp_path) == []


def test_other_usage_errors(tmp_path, capsys):
    base = [COLUMN, "-o", str(tmp_path), *SMALL]
    assert sweep(*base) == 2
    assert "no parameters to sweep" in one_error_line(capsys.readouterr().err)
    assert sweep(*base, "--param", "contrast") == 2
    assert "1 --param and 0 --values" in one_error_line(capsys.readouterr().err)
    assert sweep(*base, "--param", "contrast", "--values", "1", "--name", "a/b") == 2
    assert "(--name a/b)" in one_error_line(capsys.readouterr().err)
    assert sweep(*base, "--param", "contrast", "--values", "1", "--param", "contrast",
                 "--values", "2") == 2
    assert "swept twice" in one_error_line(capsys.readouterr().err)
    assert sweep(str(tmp_path / "missing.yaml"), "--param", "contrast", "--values", "1") == 2
    assert "file not found" in one_error_line(capsys.readouterr().err)
    assert os.listdir(tmp_path) == []


def test_a_folder_holding_another_study_is_refused(tmp_path, capsys):
    base = [COLUMN, "-o", str(tmp_path), *SMALL, "--name", "s", "-q"]
    assert sweep(*base, "--param", "contrast", "--values", "1,10") == 0
    folder = tmp_path / "s"
    before = {f: os.stat(folder / f).st_mtime_ns for f in os.listdir(folder)}
    for extra in (["--param", "contrast", "--values", "1,100"],
                  ["--param", "contrast", "--values", "1,10", "--set", "solver.rtol=1e-7"],
                  ["--param", "solver.maxiter", "--values", "100"]):
        for resume in ([], ["--resume"]):
            assert sweep(*base, *extra, *resume) == 2
            line = one_error_line(capsys.readouterr().err)
            assert line.startswith(f"error: {folder / 'study.yaml'}: holds another study (")
            assert "expected a new --name or an empty folder, or --resume with the same study" in line
    assert {f: os.stat(folder / f).st_mtime_ns for f in os.listdir(folder)} == before

    # A folder with other things in it is not a study folder.
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "notes.txt").write_text("mine")
    assert sweep(COLUMN, "-o", str(tmp_path), *SMALL, "--name", "t", "--param", "contrast",
                 "--values", "1") == 2
    assert "holds no study.yaml" in one_error_line(capsys.readouterr().err)


def test_prepare_study_raises_case_error():
    with pytest.raises(CaseError, match="did you mean 'grid'"):
        prepare_study(COLUMN, params=["gird.nx"], values=["32"])


# --------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------

def _compare_key(rows):
    keep = ("run", "contrast", "solver.preconditioner.type", "status", "iterations", "residual",
            "converged", "reason", "file")
    return [{k: r[k] for k in keep} for r in rows]


@pytest.fixture(scope="module")
def reference_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("inprocess")
    args = [COLUMN, "-o", str(out), *SMALL, "-q", "--param", "contrast", "--values", "1,1e3,1e5",
            "--param", "solver.preconditioner.type", "--values", "jacobi,block_ic"]
    assert sweep(*args) == 0
    return args, rows_of(out / "bubbly_column_study")


def test_dask_local_cluster_gives_the_same_rows_as_in_process(tmp_path, reference_rows):
    pytest.importorskip("distributed")
    args, expected = reference_rows
    args = list(args)
    args[args.index("-o") + 1] = str(tmp_path)
    assert sweep(*args, "--executor", "dask", "--workers", "2") == 0
    rows = rows_of(tmp_path / "bubbly_column_study")
    assert _compare_key(rows) == _compare_key(expected)
    assert h5_files(tmp_path / "bubbly_column_study") == [f"run_{i:04d}.h5" for i in range(6)]


def test_local_process_pool_gives_the_same_rows_as_in_process(tmp_path, reference_rows):
    args, expected = reference_rows
    args = list(args)
    args[args.index("-o") + 1] = str(tmp_path)
    assert sweep(*args, "--workers", "2") == 0
    assert _compare_key(rows_of(tmp_path / "bubbly_column_study")) == _compare_key(expected)


def test_dask_missing_is_one_line(tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_distributed(name, *a, **k):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError("No module named 'distributed'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    assert sweep(COLUMN, "-o", str(tmp_path), *SMALL, "--executor", "dask",
                 "--param", "contrast", "--values", "1") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "pip install bubbleflow[dask]" in line
    assert os.listdir(tmp_path) == []


def test_gpu_workers_are_pinned_one_per_gpu(monkeypatch):
    """The pool initializer gives each worker its own CUDA_VISIBLE_DEVICES entry."""
    import queue

    q = queue.Queue()
    for gpu in ("2", "3"):
        q.put(gpu)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    seen = []
    import signal

    old = signal.getsignal(signal.SIGINT)
    try:
        for _ in range(2):
            executors._init_worker(q)
            seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    finally:
        signal.signal(signal.SIGINT, old)
    assert seen == ["2", "3"]


def test_dask_local_cluster_pins_one_gpu_per_worker():
    pytest.importorskip("distributed")
    client, cluster = dask_cluster.dask_connect(None, 2, ["5", "7"])
    try:
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    finally:
        client.close()
        cluster.close()
    assert sorted(seen.values()) == ["5", "7"]


def test_help_lists_the_options():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", "sweep", "--help"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for opt in ("--param", "--values", "--set", "--resume", "--executor", "--scheduler",
                "--workers", "--name", "--backend", "--no-progress"):
        assert opt in proc.stdout


def test_a_point_stopped_by_a_signal_stops_the_sweep(tmp_path, capsys, monkeypatch):
    """A flow run ends cleanly on Ctrl-C / SIGTERM (exit 130 / 143); the sweep must stop
    there too, not go on to the next point."""
    import bubbleflow.apps.run as app_mod

    calls = []

    def stopped(case, backend, **kw):
        calls.append(case.name)
        return 143

    monkeypatch.setattr(app_mod, "run_case", stopped)
    rc = sweep(COLUMN, "-o", str(tmp_path), *SMALL, "--param", "contrast", "--values", "1,10,100")
    assert rc == 130 and len(calls) == 1
    assert "interrupted" in capsys.readouterr().err
