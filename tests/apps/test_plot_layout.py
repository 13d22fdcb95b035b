"""Figures keep every title, legend and colour-bar label on the canvas and
off the neighbouring panels, and the 3-D figure's horizontal slice cuts the
bubbles (not the air above a free surface)."""
import csv
import os

import numpy as np
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.apps.plots import run_figures
from bubbleflow.apps.plots_3d import PANEL_PAD, fields_figure, slice_plane
from bubbleflow.apps.plots_figure import run_figure
from bubbleflow.apps.plots_study import bench_figures
from helpers.figures import suptitle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BENCH_HEADER = ["size", "dim", "contrast", "kind", "solver", "config", "solve_ms", "converged",
                "device"]

LONG_SOLVERS = ("dpcg incomplete_poisson_scaled+levelset_subdomains",
                "dpcg block_ic+levelset_subdomains", "pcg jacobi")


def _renderer(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _inside(box, fig_box, slack=1.0):
    return (box.x0 >= fig_box.x0 - slack and box.y0 >= fig_box.y0 - slack
            and box.x1 <= fig_box.x1 + slack and box.y1 <= fig_box.y1 + slack)


def _overlap(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _bench_csv(path, contrasts):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(BENCH_HEADER)
        for contrast in contrasts:
            for s, solver in enumerate(LONG_SOLVERS):
                for n in (32, 64, 128):
                    w.writerow([n, 2, contrast, "ours", solver, solver.replace(" ", ":"),
                                (s + 1) * n * 0.1, "true" if n < 128 else "false", "AMD EPYC"])
    return path


@pytest.mark.parametrize("contrasts", [(1000.0,), (1.0, 1000.0, 1.0e6)])
def test_bench_title_and_legend_lie_on_the_canvas_and_apart(tmp_path, contrasts):
    fig = next(iter(bench_figures(_bench_csv(tmp_path / "bench.csv", contrasts)).values()))
    renderer = _renderer(fig)
    canvas = fig.bbox
    figures = [fig, *fig.subfigs]
    (legend,) = [lg for f in figures for lg in f.legends]
    titles = [f._suptitle for f in figures if f._suptitle is not None]
    assert len(titles) == 1
    legend_box = legend.get_window_extent(renderer)
    title_box = titles[0].get_window_extent(renderer)
    assert _inside(legend_box, canvas), (legend_box, canvas)
    assert _inside(title_box, canvas), (title_box, canvas)
    assert not _overlap(legend_box, title_box)
    for ax in fig.get_axes():
        assert _inside(ax.get_tightbbox(renderer), canvas)
        assert not _overlap(legend_box, ax.get_tightbbox(renderer))
    assert sorted(t.get_text() for t in legend.get_texts()) == sorted(LONG_SOLVERS)


def _column_run(nx=16, ny=16, nz=32):
    """A 3-D run dict of a bubbly column: air above z = 0.8, three bubbles
    below it at different heights (so their common centroid is in none)."""
    x = (np.arange(nx) + 0.5) * 0.5 / nx
    y = (np.arange(ny) + 0.5) * 0.5 / ny
    z = (np.arange(nz) + 0.5) * 1.0 / nz
    Z, Y, X = np.meshgrid(z, y, x, indexing="ij")
    phi = 0.8 - Z                                     # negative (gas) above the free surface
    for cx, cy, cz in ((0.12, 0.12, 0.15), (0.35, 0.3, 0.45), (0.15, 0.38, 0.62)):
        phi = np.minimum(phi, np.sqrt((X - cx) ** 2 + (Y - cy) ** 2 + (Z - cz) ** 2) - 0.06)
    gas = phi < 0.0
    rho = np.where(gas, 1.0, 1000.0)
    p = 1000.0 * 9.81 * (0.8 - Z).clip(0.0)
    fields = {"p": p, "rho": rho, "phi": phi, "time": 0.05, "step": 16}
    return {"name": "column", "mode": "flow", "x": x, "y": y, "z": z, "fields": fields}


def test_slice_plane_cuts_the_bubbles_not_the_air_above_the_free_surface():
    run = _column_run()
    phi, z = run["fields"]["phi"], run["z"]
    gas = phi < 0.0
    whole = np.average(z, weights=gas.sum(axis=(1, 2)))
    assert whole > 0.8                                 # the whole gas's centroid is in the air
    k, why = slice_plane(phi)
    assert z[k] < 0.8
    assert gas[k].any()
    assert "3 bubbles" in why and "gas layer" in why


def test_slice_plane_without_bubbles_or_gas():
    z = (np.arange(20) + 0.5) / 20
    layer_only = np.broadcast_to((0.8 - z)[:, None, None], (20, 4, 4)).copy()
    k, why = slice_plane(layer_only)
    assert z[k] > 0.8 and "no bubble" in why
    k, why = slice_plane(np.ones((20, 4, 4)))
    assert k == 10 and "no gas" in why
    one = np.ones((20, 4, 4))
    one[5:8, 1:3, 1:3] = -1.0
    k, why = slice_plane(one)
    assert 5 <= k < 8 and why == "most cells of 1 bubble"


def _panels(fig):
    """The image panels, left to right, with their colour bars."""
    panels = [ax for ax in fig.get_axes() if ax.images and ax.images[0].colorbar is not None]
    panels.sort(key=lambda ax: ax.get_position().x0)
    return panels


def test_3d_colour_bar_labels_keep_off_the_next_panel():
    fig = fields_figure(_column_run(), run_figure)
    renderer = _renderer(fig)
    panels = _panels(fig)
    assert len(panels) == 4
    margin = 1.5 * PANEL_PAD * fig.dpi                 # more than one panel's own pad
    for ax, following in zip(panels, panels[1:]):
        bar = ax.images[0].colorbar.ax
        assert bar not in ax.child_axes                # laid out by constrained layout
        bar_box = bar.get_tightbbox(renderer)          # the bar, its ticks and its label
        assert bar_box.x0 >= ax.get_window_extent(renderer).x1 - 1.0
        gap = following.get_tightbbox(renderer).x0 - bar_box.x1
        assert gap >= margin, (ax.get_title(), gap)
    for ax in panels:
        assert _inside(ax.images[0].colorbar.ax.get_tightbbox(renderer), fig.bbox)
    title = panels[2].get_title()
    assert "most cells of 3 bubbles" in title


def _run_3d(case, folder, *sets):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["run", f"cases/{case}.yaml", "--backend", "numpy", "-q", "--no-progress",
                     *sets, "-o", str(folder)]) == 0
    finally:
        os.chdir(cwd)
    return run_figures(folder / f"{case}.h5")


@pytest.fixture(scope="module")
def column_3d(tmp_path_factory):
    """The figures of a short 3-D bubbly column (six bubbles under a free surface)."""
    return _run_3d("bubbly_column_3d_flow", tmp_path_factory.mktemp("column3d"),
                   "--set", "grid.nx=16", "--set", "grid.ny=16", "--set", "grid.nz=32",
                   "--set", "time.end=0.01")


def test_3d_bubbly_column_figure_slices_through_gas(column_3d):
    fig = column_3d["bubbly_column_3d_flow_fields.png"]
    horizontal = _panels(fig)[2]
    assert "bubbles; gas layer not counted" in horizontal.get_title()
    slice_rho = horizontal.images[0].get_array()
    assert float(np.min(slice_rho)) < 500.0            # gas (density 1) in the drawn plane


def test_3d_benchmark_figure_names_the_whole_gas_phase(column_3d, tmp_path):
    """Several bubbles and a gas layer: the quantities are the whole gas
    phase's, and the figure says so (its sphericity exceeds 1); one bubble
    keeps the bubble's names."""
    fig = column_3d["bubbly_column_3d_flow_benchmark.png"]
    title = suptitle(fig)
    assert "WHOLE GAS PHASE (6 bubbles + gas layer at t = 0 s), NOT ONE BUBBLE" in title
    assert "(free surface included)" in title
    axes = [ax for ax in fig.get_axes() if ax.get_xlabel() == "time t (s)"]
    assert "not the shape of any bubble" in axes[1].get_title()
    assert "total interface area" in axes[1].get_ylabel()
    one = _run_3d("rising_bubble_3d", tmp_path, "--set", "grid.nx=8", "--set", "grid.ny=8",
                  "--set", "grid.nz=16", "--set", "time.end=0.01")["rising_bubble_3d_benchmark.png"]
    title = suptitle(one)
    assert "benchmark quantities of the bubble vs the codes of Adelsberger" in title
    assert "WHOLE GAS" not in title
