"""Hysing et al. (2009) benchmark tooling: reference data, benchmark numbers,
run files and the validation script (all fast, synthetic data)."""
import importlib.util
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from scipy.interpolate import CubicSpline

from bubbleflow.apps import validation as V

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "validate_hysing", ROOT / "scripts" / "validate_hysing.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _synthetic(dt=0.0037, end=3.0, group="tp2d", area_drift=-0.002):
    """Reference curves resampled (cubic spline) onto a time axis not aligned
    with the reference samples; an area drifting linearly by ``area_drift``."""
    ref = V.load_reference(group)
    t = np.append(np.arange(0.0, end, dt), end)
    out = {"time": t}
    for name in ("centroid_y", "rise_velocity", "circularity"):
        out[name] = CubicSpline(ref["time"], ref[name])(t)
    a0 = np.pi * 0.25 ** 2
    out["area"] = a0 * (1.0 + area_drift * t / end)
    return out


def _write_run(path, n=40, diag=None, wall=True, steps_per_solve=2):
    """A flow-run file in the layout written by ``bubbleflow run`` (mode flow)."""
    diag = _synthetic() if diag is None else diag
    case = {"name": path.stem, "mode": "flow", "backend": "numpy",
            "grid": {"nx": n, "ny": 2 * n, "lx": 1.0, "ly": 2.0}, "time": {"end": 3.0}}
    nsolve = steps_per_solve * (len(diag["time"]) - 1)
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as fh:
        fh.attrs["case"] = yaml.safe_dump(case)
        fh.attrs["mode"] = "flow"
        fh.attrs["backend"] = "numpy"
        fh.attrs["device"] = "cpu"
        if wall:
            fh.attrs["wall_seconds"] = 100.0
        g = fh.create_group("diagnostics")
        for name in V.DIAGNOSTICS:
            g.create_dataset(name, data=np.asarray(diag[name], dtype=np.float64))
        s = fh.create_group("solver")
        s.create_dataset("iterations", data=rng.integers(5, 20, nsolve))
        s.create_dataset("residual", data=np.full(nsolve, 1e-9))
        s.create_dataset("converged", data=np.ones(nsolve, dtype=bool))
        s.create_dataset("solve_seconds", data=np.full(nsolve, 20.0 / nsolve))
        s.create_dataset("setup_seconds", data=np.full(nsolve, 5.0 / nsolve))
        s.create_dataset("time", data=np.repeat(diag["time"][1:], steps_per_solve))
        s.create_dataset("step", data=np.repeat(np.arange(1, len(diag["time"])), steps_per_solve))
    return path


# --------------------------------------------------------------------------
def test_reference_groups_load():
    for group in V.REFERENCE_GROUPS:
        ref = V.load_reference(group)
        assert set(ref) == {"time", "circularity", "centroid_y", "rise_velocity"}
        n = len(ref["time"])
        assert n > 200 and all(len(v) == n for v in ref.values())
        assert all(np.all(np.isfinite(v)) for v in ref.values())
        assert ref["time"][0] == 0.0 and ref["time"][-1] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="tp2d"):
        V.load_reference("nope")


def test_tp2d_reference_matches_published_values():
    ref = V.load_reference("tp2d")
    assert ref["rise_velocity"].max() == pytest.approx(V.REFERENCE["max_rise_velocity"], rel=5e-3)
    assert ref["circularity"].min() == pytest.approx(V.REFERENCE["min_circularity"], rel=5e-3)
    assert ref["time"][np.argmin(ref["circularity"])] == pytest.approx(
        V.REFERENCE["min_circularity_time"], abs=1e-9)
    assert ref["centroid_y"][-1] == pytest.approx(V.REFERENCE["centroid_y_end"], rel=1e-3)


def test_data_file_names_its_source():
    from importlib import resources

    text = resources.files("bubbleflow.data").joinpath(V.REFERENCE_FILE).read_text()
    assert text.startswith("#") and "Hysing" in text.splitlines()[0]
    readme = resources.files("bubbleflow.data").joinpath("README.md").read_text()
    assert "Int. J. Numer. Meth. Fluids" in readme and "1259" in readme


@pytest.mark.parametrize("t1", [0.0, 0.013, 0.0299, 0.045])
def test_parabolic_extremum_exact_on_parabola(t1):
    t = np.array([-0.03, -0.01, 0.02, 0.035, 0.06])   # non-uniform spacing
    y = 0.9 + 3.0 * (t - t1) ** 2                       # minimum 0.9 at t1
    i = int(np.argmin(y))
    te, ye = V.parabolic_extremum(t, y, i)
    assert te == pytest.approx(t1, abs=1e-12)
    assert ye == pytest.approx(0.9, abs=1e-12)
    # and the maximum of the negated parabola through benchmark_quantities
    q = V.benchmark_quantities(t, np.ones_like(t), np.zeros_like(t), -y, y)
    assert q["max_rise_velocity_time"] == pytest.approx(t1, abs=1e-12)
    assert q["max_rise_velocity"] == pytest.approx(-0.9, abs=1e-12)
    assert q["min_circularity_time"] == pytest.approx(t1, abs=1e-12)


def test_parabolic_extremum_at_the_ends_returns_the_sample():
    t, y = [0.0, 1.0, 2.0], [3.0, 2.0, 1.0]
    assert V.parabolic_extremum(t, y, 0) == (0.0, 3.0)
    assert V.parabolic_extremum(t, y, 2) == (2.0, 1.0)


def test_benchmark_quantities_reproduce_published_numbers():
    q = V.benchmark_quantities(**_synthetic())
    assert q["max_rise_velocity"] == pytest.approx(0.2417, rel=1e-3)
    assert q["max_rise_velocity_time"] == pytest.approx(0.921, abs=0.005)
    assert q["min_circularity"] == pytest.approx(0.9013, rel=1e-3)
    assert q["min_circularity_time"] == pytest.approx(1.9, abs=0.01)
    assert q["centroid_y_end"] == pytest.approx(1.0813, rel=1e-4)
    assert q["area_change"] == pytest.approx(-0.002, rel=1e-9)
    assert q["final_time"] == pytest.approx(3.0)
    assert all(r.passed for r in V.compare(q))


def test_benchmark_quantities_short_run_has_no_centroid():
    q = V.benchmark_quantities(**_synthetic(end=2.5))
    assert np.isnan(q["centroid_y_end"]) and q["final_time"] == pytest.approx(2.5)
    rows = {r.quantity: r for r in V.compare(q)}
    assert not rows["centroid_y_end"].passed
    assert rows["max_rise_velocity"].passed


def test_compare_bounds_and_factor():
    q = dict(V.REFERENCE)
    q["max_rise_velocity"] *= 1.03          # 3 %: fails at 2 %, passes doubled (4 %)
    q["area_change"] = -0.015               # 1.5 %: same
    rows = {r.quantity: r for r in V.compare(q)}
    assert not rows["max_rise_velocity"].passed and not rows["area_change"].passed
    assert rows["max_rise_velocity"].difference == pytest.approx(0.03)
    assert rows["max_rise_velocity"].kind == "relative" and rows["area_change"].kind == "absolute"
    assert rows["min_circularity"].passed and rows["max_rise_velocity_time"].passed
    coarse = V.compare(q, h=1 / 40)
    assert all(r.passed for r in coarse)
    assert all(r.bound == 2 * V.ACCEPTANCE[r.quantity][0] for r in coarse)
    assert not all(r.passed for r in V.compare(q, h=1 / 80))
    assert all(r.passed for r in V.compare(q, factor=2))
    q["max_rise_velocity_time"] = V.REFERENCE["max_rise_velocity_time"] + 0.07
    assert not {r.quantity: r for r in V.compare(q, h=1 / 40)}["max_rise_velocity_time"].passed
    # rows unpack as (quantity, ours, reference, difference, bound, passed)
    name, ours, ref, diff, bound, ok = V.compare(q)[0]
    assert name == "max_rise_velocity" and ok is False


def test_read_run_and_compare(tmp_path):
    path = _write_run(tmp_path / "hysing_h40.h5", n=40)
    run = V.read_run(path)
    assert run["h"] == pytest.approx(1 / 40)
    assert (run["nx"], run["ny"]) == (40, 80)
    assert run["mode"] == "flow" and run["wall_seconds"] == 100.0
    s = run["solver"]
    nsteps = len(run["diagnostics"]["time"]) - 1
    assert s["steps"] == nsteps and s["pressure_solves"] == 2 * nsteps
    assert 5 <= s["mean_iterations"] < 20 and s["max_iterations"] <= 19
    assert s["worst_residual"] == pytest.approx(1e-9) and s["all_converged"] is True
    assert s["pressure_share"] == pytest.approx(0.25)
    q = V.benchmark_quantities(**run["diagnostics"])
    rows = V.compare(q, h=run["h"])
    assert len(rows) == len(V.ACCEPTANCE) and all(r.passed for r in rows)

    # without wall_seconds there is no share
    run2 = V.read_run(_write_run(tmp_path / "nowall.h5", wall=False))
    assert run2["wall_seconds"] is None and run2["solver"]["pressure_share"] is None


def test_read_run_rejects_pressure_file(tmp_path):
    path = tmp_path / "p.h5"
    with h5py.File(path, "w") as fh:
        fh.attrs["mode"] = "pressure"
        fh.create_group("solver").create_dataset("iterations", data=[3])
    with pytest.raises(ValueError, match="diagnostics"):
        V.read_run(path)


# --------------------------------------------------------------------------
def test_script_table_and_plot(tmp_path, monkeypatch, capsys):
    import matplotlib.image as mpimg

    mod = _script()
    _write_run(tmp_path / "hysing_h40.h5", n=40)

    def no_subprocess(*a, **k):
        raise AssertionError("an existing run must not be recomputed")

    monkeypatch.setattr(mod.subprocess, "run", no_subprocess)
    png = tmp_path / "plots" / "overlay.png"
    rc = mod.main(["--resolutions", "40", "--outdir", str(tmp_path), "--plot", str(png)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "1/40" in out and "TP2D" in out and "PASS" in out and "FAIL" not in out
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 200 and float(img.std()) > 0

    # default plot location
    rc = mod.main(["--resolutions", "40", "--outdir", str(tmp_path)])
    assert rc == 0 and (tmp_path / "hysing_case1.png").exists()


def test_script_fails_on_bad_finest_run(tmp_path, capsys):
    mod = _script()
    _write_run(tmp_path / "hysing_h40.h5", n=40)
    bad = _synthetic()
    bad["rise_velocity"] = 1.1 * bad["rise_velocity"]      # 10 % too fast
    _write_run(tmp_path / "hysing_h80.h5", n=80, diag=bad)
    rc = mod.main(["--resolutions", "80", "40", "--outdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL" in out and "1/80" in out


def test_script_runs_missing_resolution(tmp_path, monkeypatch, capsys):
    mod = _script()
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        n = int(cmd[cmd.index("--set") + 1].split("=")[1])
        assert f"grid.ny={2 * n}" in cmd and f"name=hysing_h{n}" in cmd and "--no-progress" in cmd
        outdir = Path(cmd[cmd.index("-o") + 1])
        _write_run(outdir / f"hysing_h{n}.h5", n=n)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(mod.subprocess, "run", fake_run)
    case = tmp_path / "case.yaml"
    case.write_text("name: x\n")
    rc = mod.main(["--resolutions", "40", "--outdir", str(tmp_path), "--case", str(case),
                   "--backend", "numpy"])
    assert rc == 0 and len(calls) == 1 and calls[0][-2:] == ["--backend", "numpy"]

    # a failing run is reported, exit code 1
    monkeypatch.setattr(mod.subprocess, "run",
                        lambda cmd, **k: subprocess.CompletedProcess(cmd, 2))
    rc = mod.main(["--resolutions", "40", "--outdir", str(tmp_path), "--case", str(case),
                   "--rerun"])
    err = capsys.readouterr().err
    assert rc == 1 and "failed with exit code 2" in err


def test_script_rejects_wrong_grid(tmp_path, capsys):
    mod = _script()
    _write_run(tmp_path / "hysing_h80.h5", n=40)      # file name says 80, grid says 40
    rc = mod.main(["--resolutions", "80", "--outdir", str(tmp_path)])
    assert rc == 1 and "expected 80 x 160" in capsys.readouterr().err
