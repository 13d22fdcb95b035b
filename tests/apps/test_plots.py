"""bubbleflow.apps.plots: figures of real small runs and of synthetic study summaries, headless."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.colors import LogNorm
from matplotlib.image import imread

from bubbleflow.apps.cli import main
from bubbleflow.apps.plots import is_hysing_case1, plot_run, plot_study, run_figures, study_figures
from bubbleflow.apps.plots_flow import hysing_case
from helpers.figures import suptitle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STUDY_COLUMNS = ["contrast", "solver.preconditioner.type", "solver.deflation.type", "status",
                 "iterations", "residual", "converged", "reason", "setup_seconds",
                 "solve_seconds", "wall_seconds"]


def texts(fig):
    """Every text drawn on a figure (banners, titles, legends, labels)."""
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text)]


def assert_not_blank(path):
    assert os.path.isfile(path), path
    rgb = imread(path)[..., :3]
    assert rgb.std() > 0.01, f"{path}: blank"
    assert (rgb.min(axis=-1) < 0.95).mean() > 0.02, f"{path}: almost all white"


def only_pngs(folder):
    """No temporary files left behind by the atomic writes."""
    names = os.listdir(folder)
    assert all(n.endswith((".png", ".h5", ".csv", ".yaml")) and not n.startswith(".")
               for n in names), names


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("plot_runs"))
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["run", "cases/bubbly_column.yaml", "-o", out, "--backend", "numpy", "-q",
                     "--set", "grid.nx=32", "--set", "grid.ny=32"]) == 0
        assert main(["run", "cases/two_phase.yaml", "-o", out, "--backend", "numpy", "-q",
                     "--set", "grid.nx=20", "--set", "grid.ny=40",
                     "--set", "time.end=0.1",
                     "--set", "output.interval=0.05", "--no-progress"]) == 0
    finally:
        os.chdir(cwd)
    return out


def write_study(folder, rows, columns=STUDY_COLUMNS, name="summary.csv"):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        w.writerows(rows)
    return path


def contrast_rows(failed=()):
    """3 contrasts x 2 preconditioners x 2 deflations; `failed`: (contrast, pre, defl) not ok."""
    rows = []
    for c in (1.0, 1e3, 1e6):
        for pre in ("block_ic", "incomplete_poisson_scaled"):
            for defl in ("none", "levelset_subdomains"):
                its = int(40 + 15 * np.log10(c) * (3 if defl == "none" else 1))
                status = "not_converged" if (c, pre, defl) in failed else "ok"
                rows.append([c, pre, defl, status, its, 1e-9, status == "ok",
                             "converged" if status == "ok" else "maxiter", 0.01,
                             0.001 * its, 0.02 + 0.001 * its])
    return rows


# --------------------------------------------------------------------------- runs
def test_pressure_run(runs, tmp_path, capsys):
    outdir = str(tmp_path / "figs")
    assert main(["plot", os.path.join(runs, "bubbly_column.h5"), "-o", outdir]) == 0
    printed = capsys.readouterr().out.split()
    expected = [os.path.join(outdir, f"bubbly_column_{k}.png") for k in ("fields", "convergence")]
    assert printed == expected
    for path in expected:
        assert_not_blank(path)
    only_pngs(outdir)

    figs = run_figures(os.path.join(runs, "bubbly_column.h5"))
    assert sorted(figs) == ["bubbly_column_convergence.png", "bubbly_column_fields.png"]
    # Density ratio 1000: the density panel is on a log colour scale; both
    # panels carry the interface contour and a colour bar.
    images = [im for ax in figs["bubbly_column_fields.png"].axes for im in ax.images]
    assert len(images) == 2
    assert isinstance(images[1].norm, LogNorm) and not isinstance(images[0].norm, LogNorm)
    assert all(im.colorbar is not None for im in images)
    field_axes = [ax for ax in figs["bubbly_column_fields.png"].axes if ax.images]
    assert all(ax.collections for ax in field_axes)          # phi = 0 contour
    assert all(ax.get_xlabel() == "x (m)" and ax.get_ylabel() == "y (m)" for ax in field_axes)
    conv = figs["bubbly_column_convergence.png"].axes[0]
    assert conv.get_yscale() == "log"
    labels = [t.get_text() for t in conv.get_legend().get_texts()]
    assert any(s.startswith("true residual checks") for s in labels)
    assert any(s.startswith("recursive residual") for s in labels)
    assert any(s.startswith("final true residual") for s in labels)
    assert any(s.startswith("rtol") for s in labels)
    # A converged solve of a finished run: no warning banner.
    assert not any("NOT CONVERGED" in t or "INCOMPLETE" in t
                   for f in figs.values() for t in texts(f))


def test_flow_run_with_hysing_overlay(runs, tmp_path):
    paths = plot_run(os.path.join(runs, "two_phase.h5"), str(tmp_path))
    names = [os.path.basename(p) for p in paths]
    assert names == [f"two_phase_{k}.png" for k in ("fields", "convergence", "benchmark",
                                                    "iterations", "bubbles")]
    for path in paths:
        assert_not_blank(path)
    only_pngs(str(tmp_path))

    figs = run_figures(os.path.join(runs, "two_phase.h5"))
    assert "t = 0.1 s" in figs["two_phase_fields.png"]._suptitle.get_text()
    bench = figs["two_phase_benchmark.png"]
    labels = [t.get_text() for t in bench.axes[0].get_legend().get_texts()]
    assert labels[:3] == ["TP2D (h = 1/320)", "FreeLIFE (h = 1/160)", "MooNMD"]
    assert labels[3].startswith("bubbleflow")
    assert [ax.get_ylabel() for ax in bench.axes] == ["rise velocity (m/s)", "circularity (-)",
                                                     "centroid y (m)"]
    # Three solves drawn at most plus the others in grey, labelled by step.
    conv_labels = [t.get_text() for t in figs["two_phase_convergence.png"].axes[0]
                   .get_legend().get_texts()]
    assert any("step 1 " in s and "first" in s for s in conv_labels)
    assert any("last" in s for s in conv_labels)
    its_fig = figs["two_phase_iterations.png"]
    assert its_fig.axes[0].get_ylabel() == "pressure iterations (-)"
    assert its_fig.axes[1].get_ylabel() == "time per step (s)"


def test_flow_run_killed_before_first_snapshot(runs, tmp_path, capsys):
    import shutil

    import h5py

    path = str(tmp_path / "killed.h5")
    shutil.copyfile(os.path.join(runs, "two_phase.h5"), path)
    with h5py.File(path, "r+") as fh:
        # No snapshot yet (the fields may be virtual datasets: made anew, empty).
        for name in ("phi", "rho", "p", "u", "v", "step", "time"):
            if name in fh["fields"]:
                ds = fh["fields"][name]
                shape, dtype = ds.shape, ds.dtype
                del fh["fields"][name]
                fh["fields"].create_dataset(name, shape=(0,) + shape[1:], dtype=dtype,
                                            maxshape=(None,) + shape[1:])
        fh.attrs["run_status"] = "running"
    assert main(["plot", path]) == 0
    out, err = capsys.readouterr()
    assert [os.path.basename(p) for p in out.split()] == [
        "killed_convergence.png", "killed_benchmark.png", "killed_iterations.png",
        "killed_bubbles.png"]
    assert "killed_fields.png not written" in err
    assert not os.path.exists(tmp_path / "killed_fields.png")
    for fig in run_figures(path).values():
        assert any(t.startswith("INCOMPLETE RUN: status running") for t in texts(fig))


def test_hysing_case_detection():
    import yaml

    with open(os.path.join(ROOT, "cases", "two_phase.yaml")) as fh:
        case1 = yaml.safe_load(fh)
    with open(os.path.join(ROOT, "cases", "hysing_case2.yaml")) as fh:
        case2 = yaml.safe_load(fh)
    assert is_hysing_case1(case1)
    assert not is_hysing_case1(case2)                       # density ratio 1000
    moved = yaml.safe_load(yaml.safe_dump(case1))
    moved["geometry"]["bubbles"][0]["center"] = [0.5, 0.6]
    assert not is_hysing_case1(moved)
    two = yaml.safe_load(yaml.safe_dump(case1))
    two["geometry"]["bubbles"].append({"center": [0.5, 1.5], "radius": 0.1})
    assert not is_hysing_case1(two)
    assert not is_hysing_case1({})
    assert hysing_case(case1) == 1 and hysing_case(case2) == 2
    assert hysing_case(moved) is None and hysing_case(two) is None and hysing_case({}) is None
    thinner = yaml.safe_load(yaml.safe_dump(case2))
    thinner["fluids"]["gas"]["viscosity"] = 1.0             # case 1's gas viscosity
    assert hysing_case(thinner) is None


# --------------------------------------------------------------------------- studies
def test_study_summary(tmp_path, capsys):
    failed = {(1e6, "block_ic", "none")}
    path = write_study(str(tmp_path / "contrast"), contrast_rows(failed))
    assert main(["plot", path]) == 0
    expected = [str(tmp_path / "contrast" / f"summary_{k}.png") for k in ("iterations", "time")]
    assert capsys.readouterr().out.split() == expected
    for p in expected:
        assert_not_blank(p)

    figs = study_figures(path)
    ax = figs["summary_iterations.png"].axes[0]
    assert ax.get_xscale() == "log"                          # contrast: always log
    assert "contrast" in ax.get_xlabel() and ax.get_ylabel() == "pressure iterations (-)"
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "preconditioner + deflation"
    labels = [t.get_text() for t in legend.get_texts()]
    assert "block_ic + levelset_subdomains" in labels
    assert "hollow: status not ok" in labels
    hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "none" and len(ln.get_xdata())]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [1e6]
    time_ax = figs["summary_time.png"].axes[0]
    assert time_ax.get_yscale() == "log" and time_ax.get_ylabel() == "solve time (s)"


def test_study_parameters_from_study_yaml_and_flow_columns(tmp_path):
    # A `run` column first, parameters named by study.yaml, flow columns; the
    # numeric parameter spans less than two decades: linear x axis.
    folder = tmp_path / "flow_study"
    rows = []
    k = 0
    for defl in ("none", "levelset_subdomains"):
        for nx in (20, 40, 80):
            rows.append([f"run_{k:04d}", nx, defl, "ok", nx * 0.8, nx * 1.2, 10, 10, 1e-9,
                         "true", "converged", 0.1, nx / 100.0, 1.0])
            k += 1
    rows.append([f"run_{k:04d}", 160, "none", "failed"] + [""] * 10)
    cols = ["run", "grid.nx", "solver.deflation.type", "status", "iterations_mean",
            "iterations_max", "pressure_solves", "steps", "residual", "converged", "reason",
            "setup_seconds", "solve_seconds", "wall_seconds"]
    path = write_study(str(folder), rows, cols)
    (folder / "study.yaml").write_text(
        "study: flow_study\nparameters:\n  grid.nx: [20, 40, 80, 160]\n"
        "  solver.deflation.type: [none, levelset_subdomains]\n")
    out = plot_study(path, str(tmp_path / "out"))
    assert [os.path.basename(p) for p in out] == ["summary_iterations.png", "summary_time.png"]
    for p in out:
        assert_not_blank(p)
    ax = study_figures(path)["summary_iterations.png"].axes[0]
    assert ax.get_xscale() == "linear"
    assert "flow_study" in ax.get_title() and "omitted" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["none", "levelset_subdomains"]
    assert "dotted: maximum per step" in labels


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_one_line_exit_2(tmp_path):
    (tmp_path / "notes.h5").write_text("not an HDF5 file\n")
    write_study(str(tmp_path), [[1, 2]], ["a", "b"], name="table.csv")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for target in ("missing.h5", "notes.h5", "table.csv"):
        res = subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", "plot", target],
                             capture_output=True, text=True, env=env, cwd=str(tmp_path),
                             timeout=120)
        assert res.returncode == 2, (target, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {target}: "), res.stderr
        assert res.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["notes.h5", "table.csv"]     # nothing written


# --------------------------------------------------------------------------- synthetic run files
def _phi(x, y, circles, surface=None):
    X, Y = np.meshgrid(x, y)
    d = np.full(X.shape, np.inf)
    for (cx, cy), r in circles:
        d = np.minimum(d, np.hypot(X - cx, Y - cy) - r)
    if surface is not None:
        d = np.minimum(d, surface - Y)
    return d


def write_pressure_file(path, converged=True):
    """A pressure run file as bubbleflow.io.result_writer writes it (fields, one solve)."""
    import h5py
    import yaml

    case = {"name": "synthetic_pressure", "mode": "pressure",
            "grid": {"nx": 16, "ny": 16, "lx": 1.0, "ly": 1.0},
            "solver": {"method": "dpcg", "rtol": 1e-9}}
    n, h = 16, 1.0 / 16
    x = (np.arange(n) + 0.5) * h
    phi = _phi(x, x, [((0.5, 0.5), 0.25)])
    its = 60 if converged else 20000
    hist = np.logspace(0, -9.5 if converged else np.log10(2e-7), its + 1)
    k = np.arange(0, its + 1, its // 6)
    checks = np.stack([k, hist[k] * (1.0 if converged else 1 + 20 * k / its)], axis=1)
    with h5py.File(path, "w") as fh:
        fh.attrs["bubbleflow_version"] = "test"
        fh.attrs["mode"] = "pressure"
        fh.attrs["case"] = yaml.safe_dump(case)
        fh["grid/x"] = x
        fh["grid/y"] = x
        fh["fields/phi"] = phi
        fh["fields/rho"] = np.where(phi < 0, 1.0, 1000.0)
        fh["fields/p"] = -phi * 9.81e3
        s = fh.create_group("solver")
        s["iterations"] = [its]
        s["residual"] = [3e-10 if converged else 4.7e-6]
        s["converged"] = [converged]
        s["reason"] = ["converged" if converged else "maxiter"]
        s["setup_seconds"] = [0.1]
        s["solve_seconds"] = [1.0]
        s["residual_history"] = hist
        s["true_residual_checks"] = checks
    return path


HYSING_CIRCLE = [((0.5, 0.5), 0.25)]
COLUMN = dict(lx=0.5, ly=1.0, nx=32, ny=64, surface=0.8,
              circles=[((0.12, 0.15), 0.045), ((0.38, 0.18), 0.05), ((0.25, 0.32), 0.04),
                       ((0.11, 0.45), 0.04), ((0.37, 0.5), 0.045), ((0.24, 0.6), 0.04)])


def write_flow_file(path, status="finished", bad_steps=(), circles=HYSING_CIRCLE, surface=None,
                    nsteps=40, t_end=None, iterations=None, checks=True, nx=24, ny=48, lx=1.0,
                    ly=2.0):
    """A flow run file with the layout of bubbleflow.io.flow_output (two snapshots).

    ``status``: the root attribute run_status (None: an older file without
    it); ``bad_steps``: steps whose solve did not converge (20000 iterations,
    recursive residual 2e-7, true 4.7e-6); ``t_end``: the case's time.end
    (default: the last step's time).
    """
    import h5py
    import yaml

    dt = 0.0125
    steps = np.arange(1, nsteps + 1)
    times = steps * dt
    case = {"name": "synthetic_flow", "mode": "flow",
            "grid": {"nx": nx, "ny": ny, "lx": lx, "ly": ly},
            "fluids": {"liquid": {"density": 1000.0, "viscosity": 10.0},
                       "gas": {"density": 100.0, "viscosity": 1.0}},
            "physics": {"gravity": 0.98, "surface_tension": 24.5},
            "geometry": {"bubbles": [{"center": list(c), "radius": r} for c, r in circles]},
            "solver": {"method": "dpcg", "variant": "adef2", "rtol": 1e-9},
            "time": {"end": float(times[-1]) if t_end is None else t_end}}
    if surface is not None:
        case["geometry"]["free_surface"] = surface
    x = (np.arange(nx) + 0.5) * lx / nx
    y = (np.arange(ny) + 0.5) * ly / ny
    phis = np.stack([_phi(x, y, circles, surface),
                     _phi(x, y, [((c[0], c[1] + 0.05), r) for c, r in circles], surface)])
    its = np.array(iterations if iterations is not None else 30 + steps % 5)
    conv = np.isin(steps, bad_steps, invert=True)
    its[~conv] = 20000
    hists, offsets, rows = [], [0], []
    for k, n, ok in zip(steps, its, conv):
        hist = np.logspace(0, -9.3 if ok else np.log10(2e-7), n + 1)
        hists.append(hist)
        offsets.append(offsets[-1] + hist.size)
        for c in range(0, n + 1, max(n // 4, 1)):
            rows.append([k, c, hist[c] * (1.0 if ok else 1 + 20 * c / n)])
    with h5py.File(path, "w") as fh:
        fh.attrs["bubbleflow_version"] = "test"
        fh.attrs["mode"] = "flow"
        fh.attrs["case"] = yaml.safe_dump(case)
        if status is not None:
            fh.attrs["run_status"] = status
        fh["grid/x"] = x
        fh["grid/y"] = y
        f = fh.create_group("fields")
        f["step"] = [0, nsteps]
        f["time"] = [0.0, times[-1]]
        f["phi"] = phis
        f["rho"] = np.where(phis < 0, 100.0, 1000.0)
        f["p"] = -phis * 1e3
        d = fh.create_group("diagnostics")
        d["step"] = np.concatenate([[0], steps])
        d["time"] = tt = np.concatenate([[0.0], times])
        d["dt"] = np.full(tt.size, dt)
        d["area"] = np.full(tt.size, 0.196)
        d["centroid_y"] = 0.5 + 0.1 * tt
        d["rise_velocity"] = 0.2 * (1 - np.exp(-5 * tt))
        d["circularity"] = 1 - 0.05 * tt
        d["divergence"] = np.full(tt.size, 1e-12)
        s = fh.create_group("solver")
        s["step"] = steps
        s["time"] = times
        s["iterations"] = its
        s["residual"] = np.where(conv, 4e-10, 4.7e-6)
        s["converged"] = conv
        s["reason"] = ["converged" if ok else "maxiter" for ok in conv]
        s["setup_seconds"] = np.full(nsteps, 0.01)
        s["solve_seconds"] = its * 1e-4
        s["residual_history"] = np.concatenate(hists)
        s["history_offsets"] = np.array(offsets)
        if checks:
            s["true_residual_checks"] = np.array(rows, dtype=np.float64)
    return path


# --------------------------------------------------------------------------- warnings on figures
def test_unconverged_pressure_solve_is_marked(tmp_path):
    path = write_pressure_file(str(tmp_path / "p.h5"), converged=False)
    figs = run_figures(path)
    for name, fig in figs.items():
        banner = [t for t in texts(fig) if t.startswith("PRESSURE SOLVE NOT CONVERGED")]
        assert banner, name
        joined = " ".join(banner[0].split())
        for part in ("maxiter after 20000 iterations", "true residual 4.70e-06", "rtol 1.0e-09"):
            assert part in joined, (name, joined)
    ax = figs["p_convergence.png"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "recursive residual (the solver's update)" in labels
    assert "final true residual 4.70e-06" in labels
    assert any(s.startswith("true residual checks") for s in labels)
    stars = [ln for ln in ax.get_lines() if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert len(stars) == 1
    assert stars[0].get_xdata()[0] == 20000 and stars[0].get_ydata()[0] == pytest.approx(4.7e-6)
    circles = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata())]
    assert len(circles) == 1 and len(circles[0].get_xdata()) == 7
    # The title tells the recursive from the true residual at the end.
    assert "recursive 2.00e-07, true 4.70e-06" in ax.get_title()
    assert "NOT CONVERGED (maxiter)" in ax.get_title()
    for p in plot_run(path, str(tmp_path / "out")):
        assert_not_blank(p)


@pytest.mark.parametrize("status, words", [
    ("running", "status running (killed, or still running)"),
    ("stopped", "status stopped"),
    ("failed", "status failed"),
])
def test_incomplete_flow_run_is_marked_on_every_figure(tmp_path, status, words):
    path = write_flow_file(str(tmp_path / "f.h5"), status=status, t_end=3.0)
    figs = run_figures(path)
    assert len(figs) == 4
    for name, fig in figs.items():
        banner = [" ".join(t.split()) for t in texts(fig) if t.startswith("INCOMPLETE RUN")]
        assert banner, name
        assert words in banner[0] and "data up to t = 0.5 s, step 40" in banner[0], banner
        assert not any("NOT CONVERGED" in t for t in texts(fig))


def test_finished_and_older_flow_files(tmp_path):
    # Finished: no banner, the title on the figure itself.
    figs = run_figures(write_flow_file(str(tmp_path / "done.h5")))
    for fig in figs.values():
        assert not any("INCOMPLETE" in t or "NOT CONVERGED" in t for t in texts(fig))
        assert not fig.subfigs
    # No run_status (written before it existed): incomplete if short of time.end.
    figs = run_figures(write_flow_file(str(tmp_path / "old.h5"), status=None, t_end=3.0))
    banner = [t for t in texts(figs["old_fields.png"]) if t.startswith("INCOMPLETE RUN")]
    assert banner and "time.end = 3 s" in " ".join(banner[0].split())
    figs = run_figures(write_flow_file(str(tmp_path / "old_done.h5"), status=None))
    assert not any("INCOMPLETE" in t for f in figs.values() for t in texts(f))


def test_unconverged_flow_solves_are_marked(tmp_path):
    path = write_flow_file(str(tmp_path / "f.h5"), bad_steps=(7, 8, 30))
    figs = run_figures(path)
    for fig in figs.values():
        banner = [" ".join(t.split()) for t in texts(fig) if "PRESSURE SOLVES NOT CONVERGED" in t]
        assert banner and banner[0].startswith("3 OF 40 PRESSURE SOLVES NOT CONVERGED "
                                               "(steps 7, 8, 30)")
        assert "worst true residual 4.70e-06 vs rtol 1.0e-09" in banner[0]
    ax = figs["f_iterations.png"].axes[0]
    bad = [ln for ln in ax.get_lines() if ln.get_label() == "not converged (3 steps)"]
    assert len(bad) == 1 and list(bad[0].get_xdata()) == [7, 8, 30]
    assert ax.get_yscale() == "log"              # 30 to 20000 iterations
    # Convergence: the worst unconverged solve is drawn, with its true
    # residual checks (circles) and final true residual (star) in its colour.
    conv = figs["f_convergence.png"].axes[0]
    labels = [t.get_text() for t in conv.get_legend().get_texts()]
    assert any("NOT CONVERGED" in s and s.startswith("step 7 ") for s in labels)
    assert "lines: recursive residual (the solver's update)" in labels
    assert any(s.startswith("circles: true residual checks") for s in labels)
    assert "stars: final true residual" in labels
    line7 = next(ln for ln in conv.get_lines() if ln.get_label().startswith("step 7 "))
    stars = [ln for ln in conv.get_lines() if ln.get_marker() == "*"
             and ln.get_color() == line7.get_color() and len(ln.get_xdata())]
    assert stars and stars[0].get_xdata()[0] == 20000
    assert stars[0].get_ydata()[0] == pytest.approx(4.7e-6)
    circles = [ln for ln in conv.get_lines() if ln.get_marker() == "o"
               and ln.get_markeredgecolor() == line7.get_color() and len(ln.get_xdata())]
    assert circles and list(circles[0].get_xdata()) == [0, 5000, 10000, 15000, 20000]


def test_iterations_axis_linear_within_decades_and_old_files_without_checks(tmp_path):
    figs = run_figures(write_flow_file(str(tmp_path / "f.h5"), checks=False))
    assert figs["f_iterations.png"].axes[0].get_yscale() == "linear"
    labels = [t.get_text() for t in figs["f_convergence.png"].axes[0].get_legend().get_texts()]
    assert not any(s.startswith("circles") for s in labels)
    assert "stars: final true residual" in labels


# --------------------------------------------------------------------------- gas phase
def test_several_bubbles_and_a_gas_layer_are_the_whole_gas_phase(tmp_path):
    path = write_flow_file(str(tmp_path / "column.h5"), **COLUMN)
    fig = run_figures(path)["column_benchmark.png"]
    title = suptitle(fig)
    assert "WHOLE GAS PHASE (6 bubbles + gas layer at t = 0 s), NOT ONE BUBBLE" in title
    assert "no reference curves" in title and "test case 1" not in title
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == 1 and labels[0].startswith("bubbleflow")
    assert "not the shape of any bubble" in fig.axes[1].get_title()
    assert_not_blank(plot_run(path, str(tmp_path / "out"))[2])


def test_one_bubble_keeps_the_hysing_overlay(tmp_path):
    fig = run_figures(write_flow_file(str(tmp_path / "one.h5")))["one_benchmark.png"]
    assert "Hysing et al. (2009), test case 1" in suptitle(fig)
    assert "WHOLE GAS" not in suptitle(fig)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0].startswith("TP2D") and labels[-1].startswith("bubbleflow")
    # Two bubbles, no free surface: no overlay either.
    fig = run_figures(write_flow_file(str(tmp_path / "two.h5"),
                                      circles=[((0.5, 0.5), 0.25), ((0.5, 1.3), 0.2)]))
    title = suptitle(fig["two_benchmark.png"])
    assert "WHOLE GAS PHASE (2 bubbles at t = 0 s), NOT ONE BUBBLE" in title
    assert "free surface included" not in title


def _case2_file(path, satellite):
    """A synthetic flow file with test case 2's fluids; ``satellite``: its
    last snapshot's gas is two regions (a piece of the skirt split off)."""
    import h5py
    import yaml

    write_flow_file(path)
    with open(os.path.join(ROOT, "cases", "hysing_case2.yaml")) as fh:
        case2 = yaml.safe_load(fh)
    with h5py.File(path, "a") as fh:
        case = yaml.safe_load(fh.attrs["case"])
        case["fluids"], case["physics"] = case2["fluids"], case2["physics"]
        fh.attrs["case"] = yaml.safe_dump(case)
        if satellite:
            x, y = fh["grid/x"][()], fh["grid/y"][()]
            phi = fh["fields/phi"][()]
            phi[1] = _phi(x, y, [((0.5, 0.55), 0.25), ((0.2, 0.3), 0.06)])
            fh["fields/phi"][...] = phi
    return path


def test_hysing_case_2_keeps_its_reference_curves_after_its_skirt_breaks_up(tmp_path):
    """Test case 2's gas is several regions once its skirt breaks up: the
    figure names the whole gas phase and still draws the groups' case-2
    curves (the validation compares those figures with them)."""
    fig = run_figures(_case2_file(str(tmp_path / "case2.h5"), True))["case2_benchmark.png"]
    title = suptitle(fig)
    assert "WHOLE GAS PHASE (1 bubble at t = 0 s; 2 bubbles at t = 0.5 s), NOT ONE BUBBLE" in title
    assert "vs Hysing et al. (2009), test case 2 (dashed)" in title
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:3] == ["TP2D (h = 1/640)", "FreeLIFE (h = 1/160)", "MooNMD"]
    # Before a break-up the bubble's quantities, on the same curves.
    one = run_figures(_case2_file(str(tmp_path / "one.h5"), False))["one_benchmark.png"]
    assert suptitle(one).endswith(
        "benchmark quantities of the bubble vs Hysing et al. (2009), test case 2 (dashed)")
    labels = [t.get_text() for t in one.axes[0].get_legend().get_texts()]
    assert labels[0] == "TP2D (h = 1/640)"


def test_gas_components():
    from bubbleflow.apps.plots import gas_components

    x = (np.arange(32) + 0.5) / 32
    assert gas_components(_phi(x, x, [((0.3, 0.3), 0.1), ((0.7, 0.4), 0.1)])) == (2, 0)
    assert gas_components(_phi(x, x, [((0.3, 0.3), 0.1)], surface=0.8)) == (1, 1)
    # A bubble merged into the layer counts as layer.
    assert gas_components(_phi(x, x, [((0.5, 0.75), 0.1)], surface=0.8)) == (0, 1)
    assert gas_components(np.ones((4, 4))) == (0, 0)


# --------------------------------------------------------------------------- log iteration axes
def test_study_iterations_log_axis_when_spanning_decades(tmp_path):
    # Level-set deflation flat at ~20 iterations, none up to the 20000 limit.
    rows = []
    for c in (1.0, 1e3, 1e6):
        for defl in ("none", "levelset_subdomains"):
            its = 20 if defl != "none" else int(min(20000, 40 * c ** 0.5))
            status = "ok" if its < 20000 else "not_converged"
            rows.append([c, "block_ic", defl, status, its, 1e-9, status == "ok", "converged",
                         0.01, 0.001 * its, 0.02])
    path = write_study(str(tmp_path / "s"), rows)
    ax = study_figures(path)["summary_iterations.png"].axes[0]
    assert ax.get_yscale() == "log"
    assert min(ax.get_ylim()) > 0
    # Within 1.5 decades: linear from 0 (the contrast study above).
    path = write_study(str(tmp_path / "t"), contrast_rows())
    ax = study_figures(path)["summary_iterations.png"].axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
