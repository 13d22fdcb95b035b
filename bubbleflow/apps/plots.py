"""Figures of runs and studies: ``bubbleflow plot``.

::

    bubbleflow plot RUN.h5 [-o DIR]              # a run file (mode pressure or flow)
    bubbleflow plot STUDY/summary.csv [-o DIR]   # a study summary (bubbleflow sweep)
    bubbleflow plot BENCH.csv [-o DIR]           # a table of bubbleflow bench --csv

PNGs are written beside the input unless ``-o DIR`` is given, each atomically
(a temporary file in the same folder, renamed into place), and their paths
are printed one per line.

Run file ``<stem>.h5``:

* ``<stem>_fields.png``: pressure (Pa) and density (kg/m^3; log colour scale
  when the density ratio exceeds 10) on the physical domain, with the
  interface ``phi = 0`` drawn on top; flow runs show their last snapshot.
* ``<stem>_convergence.png``: relative residual per iteration (log scale);
  pressure runs: the solve, its true-residual checks and ``rtol``; flow runs:
  the first and last solve and the one with the most iterations.
* flow runs only: ``<stem>_benchmark.png`` (the whole gas phase's rise
  velocity, circularity and centroid height against time, with the
  published curves of Hysing et al. (2009) overlaid for test case 1),
  ``<stem>_iterations.png`` (pressure iterations per step; solve and set-up
  time per step) and, where the run tracked its bubbles,
  ``<stem>_bubbles.png`` (each bubble's trajectory, rise velocity and size;
  for a swarm also the void fraction profile, the mean rise velocity and
  the number of bubbles against time: :mod:`.plots_bubbles`).

Trouble is marked, not hidden:

* every figure of a run gets a red banner (:func:`run_warnings`) when the run
  is incomplete (a flow run whose ``run_status`` is ``running``, i.e.
  killed or still going, ``stopped`` or ``failed``; in older files without
  that attribute, a last time short of ``time.end``), with the time and
  step its data reach, and when a pressure solve did not converge (the
  reason, iterations and final true residual against ``rtol``; for flow
  runs how many steps, which, and the worst true residual; those steps are
  also red crosses on the iterations figure);
* convergence figures draw the recursive residual (the solver's update, a
  line), the true-residual checks ``||b - A x_k|| / ||b||`` (hollow circles)
  and the final true residual (a star), so a recursive residual below
  ``rtol`` cannot pass for convergence;
* iteration axes (study figures, iterations per step) are logarithmic when
  the values span more than 1.5 decades (:data:`LOG_DECADES`);
* the benchmark quantities are those of the whole gas phase; when the run
  has several bubbles or a gas layer (counted as connected gas regions in
  its first and last snapshot, :func:`gas_components`) the figure says so
  in its title ("WHOLE GAS PHASE (6 bubbles + gas layer ...), NOT ONE
  BUBBLE") and carries no reference curves.

Study summary ``<stem>.csv``: ``<stem>_iterations.png`` and ``<stem>_time.png``:
iterations and solve time against the numeric swept parameter, one line per
combination of the other swept parameters; rows whose ``status`` is not
``ok`` are drawn as hollow markers.

From Python::

    from bubbleflow.apps.plots import plot_run, plot_study
    paths = plot_run("outputs/two_phase.h5")                 # list of PNG paths
    paths = plot_study("studies/contrast/summary.csv", "figs")

:func:`run_figures` and :func:`study_figures` return the
:class:`matplotlib.figure.Figure` objects instead of writing them.

Everything draws on :class:`matplotlib.figure.Figure` with the Agg canvas:
no pyplot, no global state, no display needed (:mod:`.plots_figure`).  This
module holds the command, picks a run's figures and draws a 2-D run's
fields; the run file is read and checked in :mod:`.plots_run_file`, the
convergence figure drawn in :mod:`.plots_convergence`, the flow's figures
over time in :mod:`.plots_flow`, the tables' in :mod:`.plots_study`, 3-D
runs' in :mod:`.plots_3d`.  An output that lacks a quantity (a flow without
gas, a run killed before its first solve, a study solved at once) is still
drawn: the quantity is left out with a note.  Bad input (a missing file,
a file not written by bubbleflow, a CSV that is not a study summary) is a
:class:`~bubbleflow.case.config.CaseError`, printed by ``bubbleflow`` as one line
with exit code 2.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from ..case.config import CaseError
from . import plots_3d
from .plots_bubbles import bubble_table, bubbles_figure
from .plots_convergence import convergence_figure
from .plots_figure import (BANNER_COLOUR, DPI, LOG_DECADES, grid_text, is_hdf5, output_folder,
                           resolve_input, run_figure, save_figure, spans_decades, write_all)
from .plots_flow import (benchmark_figure, gas_components, is_hysing_case1, iterations_figure,
                         missing_quantities)
from .plots_run_file import read_run_file, run_warnings
from .plots_study import bench_figures, is_bench_csv, plot_bench, plot_study, study_figures

__all__ = [
    "add_subparser", "cmd_plot", "plot_run", "plot_study", "run_figures", "study_figures",
    "save_figure", "is_hysing_case1", "run_warnings", "gas_components", "spans_decades",
    "LOG_DECADES", "DPI", "BANNER_COLOUR", "plot_bench", "bench_figures",
]


# ==========================================================================
# Command line
# ==========================================================================
def add_subparser(subparsers):
    """Register ``bubbleflow plot`` on the ``subparsers`` of the main parser."""
    p = subparsers.add_parser(
        "plot", help="plot a run file, a study summary or a benchmark table",
        description="Write PNG figures of a run file (RUN.h5: fields, convergence; flow runs "
                    "also benchmark quantities and iterations per step), of a study summary "
                    "(STUDY/summary.csv: iterations and solve time against the swept "
                    "parameter) or of a benchmark table (bubbleflow bench --csv: time to "
                    "solution against grid size).  The paths of the PNGs are printed.")
    p.add_argument("input", metavar="RUN.h5|summary.csv|BENCH.csv",
                   help="a run file written by `bubbleflow run`, a study summary "
                        "(or its folder) written by `bubbleflow sweep`, or a table written "
                        "by `bubbleflow bench --csv`")
    p.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="folder for the PNGs (default: the input file's folder)")
    p.set_defaults(func=cmd_plot)
    return p


def cmd_plot(args):
    """``bubbleflow plot``: write the figures of a run or a study, print their paths.

    Returns
    -------
    int
        0.

    Raises
    ------
    CaseError
        The input is missing or not a bubbleflow run file / study summary, or
        the output folder cannot be written.
    """
    path = resolve_input(args.input)
    notes = []
    if path.lower().endswith(".csv") and not is_hdf5(path) and is_bench_csv(path):
        written = plot_bench(path, args.output)
    elif path.lower().endswith(".csv") and not is_hdf5(path):
        written = plot_study(path, args.output)
    else:
        # HDF5, or neither: then reported as a run file that is not one.
        written, notes = _plot_run(path, args.output)
    for p in written:
        print(p, flush=True)
    for note in notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    return 0


# ==========================================================================
# Run files
# ==========================================================================
def plot_run(path, outdir=None):
    """Write the figures of a run file; return the PNG paths.

    Parameters
    ----------
    path : str or os.PathLike
        ``<stem>.h5`` written by ``bubbleflow run`` (mode pressure or flow).
    outdir : str, optional
        Folder for the PNGs (default: the run file's folder).

    Returns
    -------
    list of str
        ``<stem>_fields.png``, ``<stem>_convergence.png`` and, for flow runs,
        ``<stem>_benchmark.png``, ``<stem>_iterations.png``,
        ``<stem>_bubbles.png`` (a figure whose
        data the file does not hold yet, e.g. a flow run killed before its
        first snapshot, is left out).

    Raises
    ------
    CaseError
        Not a readable bubbleflow run file, or ``outdir`` not writable.
    """
    path = resolve_input(path)
    return _plot_run(path, outdir)[0]


def _plot_run(path, outdir):
    """``(written paths, notes)``: notes name the figures left out and why."""
    figures, notes = _run_figures(path)
    return write_all(figures, output_folder(path, outdir)), notes


def run_figures(path):
    """The figures of a run file, not written: ``{file name: Figure}``.

    File names are ``<stem>_fields.png`` etc. as in :func:`plot_run`.
    """
    return _run_figures(path)[0]


def _run_figures(path):
    run = read_run_file(os.fspath(path))
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    figs = {}
    notes = []
    three = run["z"] is not None
    if run["fields"] is not None:
        figs[f"{stem}_fields.png"] = (plots_3d.fields_figure(run, run_figure) if three
                                      else _fields_figure(run))
    else:
        notes.append(f"{stem}_fields.png not written: the run has no field snapshot yet")
    if run["histories"]:
        figs[f"{stem}_convergence.png"] = convergence_figure(run)
    else:
        notes.append(f"{stem}_convergence.png not written: no residual history")
    if run["mode"] == "flow":
        if run["diagnostics"] is not None and len(run["diagnostics"]["time"]):
            figs[f"{stem}_benchmark.png"] = (plots_3d.benchmark_figure(run, run_figure) if three
                                             else benchmark_figure(run))
            missing = [] if three else missing_quantities(run)
            if missing:
                notes.append(f"{stem}_benchmark.png: no {', '.join(missing)} (no finite "
                             "value in the diagnostics: a flow without gas has none); "
                             "their panels are empty")
        else:
            notes.append(f"{stem}_benchmark.png not written: no diagnostics")
        if run["solves"] is not None and len(run["solves"]["iterations"]):
            figs[f"{stem}_iterations.png"] = iterations_figure(run)
        else:
            notes.append(f"{stem}_iterations.png not written: no pressure solve yet")
        why = bubble_table(run)[1]
        if why is None:
            figs[f"{stem}_bubbles.png"] = bubbles_figure(run)
        else:
            notes.append(f"{stem}_bubbles.png not written: {why}")
    if not figs:
        raise CaseError(path, None, "holds nothing to plot (no field snapshot, no solve)",
                        "a run file with at least one snapshot or pressure solve")
    return figs, notes


# ==========================================================================
# Fields of a 2-D run
# ==========================================================================
_interface_style = plots_3d.interface_style


def _draw_field(fig, ax, run, data, cmap, norm, title, unit_label):
    x, y = run["x"], run["y"]
    hx = (x[-1] - x[0]) / (len(x) - 1) if len(x) > 1 else 1.0
    hy = (y[-1] - y[0]) / (len(y) - 1) if len(y) > 1 else 1.0
    extent = (x[0] - hx / 2, x[-1] + hx / 2, y[0] - hy / 2, y[-1] + hy / 2)
    im = ax.imshow(data, origin="lower", extent=extent, cmap=cmap, norm=norm,
                   interpolation="nearest", aspect="equal")
    phi = run["fields"]["phi"]
    if np.nanmin(phi) < 0.0 < np.nanmax(phi):
        ax.contour(x, y, phi, levels=[0.0], **_interface_style())
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title)
    # The colour bar in an inset of the image axes: exactly as tall as the
    # (equal-aspect) image, whatever the domain's shape.
    cax = ax.inset_axes([1.04, 0.0, 0.05, 1.0])
    cb = fig.colorbar(im, cax=cax)
    cb.set_label(unit_label)
    return im


def _fields_figure(run):
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.lines import Line2D

    f = run["fields"]
    x, y = run["x"], run["y"]
    lx = max(x[-1] - x[0], 1e-300) * len(x) / max(len(x) - 1, 1)
    ly = max(y[-1] - y[0], 1e-300) * len(y) / max(len(y) - 1, 1)
    aspect = ly / lx if lx > 0 else 1.0
    # Panel size: the image (at most 4.2 x 6.4 in) plus room for its labels
    # and colour bar (about 2 in across, 1.3 in down with the titles).
    img_w = min(4.2, 6.4 / aspect)
    img_h = img_w * aspect
    fig, body = run_figure(run, 2 * (img_w + 2.1) + 0.2, img_h + 1.5)
    ax_p, ax_r = body.subplots(1, 2)

    p = f["p"]
    finite = p[np.isfinite(p)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    _draw_field(body, ax_p, run, p, "viridis", Normalize(lo, hi), "pressure p", "p (Pa)")

    rho = f["rho"]
    pos = rho[np.isfinite(rho) & (rho > 0)]
    rmin, rmax = (float(pos.min()), float(pos.max())) if pos.size else (1.0, 1.0)
    ratio = rmax / rmin if rmin > 0 else math.inf
    if pos.size and ratio > 10.0:
        norm = LogNorm(rmin, rmax)
        label = "density $\\rho$ (kg/m$^3$, log scale)"
    else:
        lo, hi = (rmin, rmax) if rmin < rmax else (rmin - 0.5, rmax + 0.5)
        norm = Normalize(lo, hi)
        label = "density $\\rho$ (kg/m$^3$)"
    _draw_field(body, ax_r, run, rho, "Blues", norm,
                f"density $\\rho$ (ratio {ratio:.3g})" if math.isfinite(ratio) else "density $\\rho$",
                label)
    handle = Line2D([], [], color="white", lw=1.6,
                    path_effects=_interface_style()["path_effects"], label="interface $\\phi = 0$")
    for ax in (ax_p, ax_r):
        ax.legend(handles=[handle], loc="upper right", fontsize=8, framealpha=0.8)

    if run["mode"] == "flow":
        when = f"t = {f['time']:.4g} s" if f.get("time") is not None else "last snapshot"
        if f.get("step") is not None:
            when += f" (step {f['step']})"
        body.suptitle(f"{run['name']} (flow): pressure and density at {when}; {grid_text(run)}",
                      fontsize=11)
    else:
        body.suptitle(f"{run['name']} (pressure solve): pressure and density; {grid_text(run)}",
                      fontsize=11)
    return fig
