"""bubbleflow.plots: figures of real small runs and of synthetic study summaries, headless."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.colors import LogNorm
from matplotlib.image import imread

from bubbleflow.cli import main
from bubbleflow.plots import is_hysing_case1, plot_run, plot_study, run_figures, study_figures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STUDY_COLUMNS = ["contrast", "solver.preconditioner.type", "solver.deflation.type", "status",
                 "iterations", "residual", "converged", "reason", "setup_seconds",
                 "solve_seconds", "wall_seconds"]


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
                     "--set", "grid.nx=32", "--set", "grid.ny=32",
                     "--set", "solver.deflation.subdomains=[4,4]"]) == 0
        assert main(["run", "cases/two_phase.yaml", "-o", out, "--backend", "numpy", "-q",
                     "--set", "grid.nx=20", "--set", "grid.ny=40",
                     "--set", "solver.deflation.subdomains=[4,4]", "--set", "time.end=0.1",
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
    assert "true residual checks" in labels and any(s.startswith("rtol") for s in labels)


def test_flow_run_with_hysing_overlay(runs, tmp_path):
    paths = plot_run(os.path.join(runs, "two_phase.h5"), str(tmp_path))
    names = [os.path.basename(p) for p in paths]
    assert names == [f"two_phase_{k}.png" for k in ("fields", "convergence", "benchmark",
                                                    "iterations")]
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
        for name in ("phi", "rho", "p", "u", "v", "step", "time"):
            fh["fields"][name].resize(0, axis=0)
    assert main(["plot", path]) == 0
    out, err = capsys.readouterr()
    assert [os.path.basename(p) for p in out.split()] == [
        "killed_convergence.png", "killed_benchmark.png", "killed_iterations.png"]
    assert "killed_fields.png not written" in err
    assert not os.path.exists(tmp_path / "killed_fields.png")


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
        res = subprocess.run([sys.executable, "-m", "bubbleflow.cli", "plot", target],
                             capture_output=True, text=True, env=env, cwd=str(tmp_path),
                             timeout=120)
        assert res.returncode == 2, (target, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {target}: "), res.stderr
        assert res.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["notes.h5", "table.csv"]     # nothing written
