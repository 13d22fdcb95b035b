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
module reads run files and draws their fields and convergence; the flow's
figures over time are in :mod:`.plots_flow`, the tables' in
:mod:`.plots_study`, 3-D runs' in :mod:`.plots_3d`.  An output that lacks a
quantity (a flow without gas, a run killed before its first solve, a study
solved at once) is still drawn: the quantity is left out with a note.  Bad input (a missing file,
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
from .plots_figure import (BANNER_COLOUR, DPI, LOG_DECADES, RUN_EXPECTED, grid_text, is_hdf5,
                           no_data_note, output_folder, resolve_input, run_figure, save_figure,
                           solver_text, spans_decades, write_all)
from .plots_flow import (benchmark_figure, gas_components, is_hysing_case1, iterations_figure,
                         missing_quantities)
from .plots_study import bench_figures, is_bench_csv, plot_bench, plot_study, study_figures
from .validation import nested as _nested

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
    run = _read_run_file(os.fspath(path))
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
        figs[f"{stem}_convergence.png"] = _convergence_figure(run)
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


def _read_run_file(path):
    """Everything the figures need, as host arrays; CaseError when it is no run file."""
    from ..io.layout import text as _text
    from ..io.result_reader import read_run

    if not os.access(path, os.R_OK):
        raise CaseError(path, None, "cannot be read (permission denied)",
                        "read permission on the file (ask its owner, or chmod a+r)")
    if not is_hdf5(path):
        raise CaseError(path, None, "is not an HDF5 file", RUN_EXPECTED)
    try:
        raw = read_run(path)
    except OSError as exc:
        raise CaseError(path, None, f"cannot be opened ({exc})", RUN_EXPECTED) from None
    except (ValueError, TypeError, KeyError, IndexError) as exc:   # a dataset of another type
        raise CaseError(path, None, f"cannot be read as a run file ({type(exc).__name__}: "
                        f"{exc})", RUN_EXPECTED) from None
    _check_run_file(path, raw)
    _check_series(path, raw)
    case, solver = raw["case"], raw["solver"]
    solves = None
    if solver is not None:
        solves = {k: solver[k] for k in ("step", "time", "solve_seconds", "setup_seconds",
                                         "converged", "residual", "reason")}
        its = solver["iterations"]
        solves.update(iterations=its if its is not None else np.zeros(0, np.int64),
                      checks=raw["checks"], step_checks=raw["step_checks"])
    diagnostics = raw["diagnostics"]
    if diagnostics is not None:
        diagnostics = {name: diagnostics.get(name) for name in _DRAWN_DIAGNOSTICS}
        if diagnostics["time"] is None:
            diagnostics = None
    name = _text(_nested(case, "name")) or os.path.splitext(os.path.basename(path))[0]
    run = {
        "path": path, "name": name, "mode": raw["mode"], "case": case, "x": raw["x"],
        "y": raw["y"], "z": raw.get("z"), "fields": raw["fields"], "histories": raw["histories"], "solves": solves,
        "diagnostics": diagnostics, "rtol": _rtol(raw), "solver": _solver_description(raw),
        "backend": _text(raw["attrs"].get("backend")),
        "status": _text(raw["attrs"].get("run_status")),
        "bubbles": raw["bubbles"], "bubble_events": raw["bubble_events"],
    }
    run["warnings"] = run_warnings(run)
    return run


def _check_run_file(path, raw):
    """CaseError unless ``raw`` (:func:`bubbleflow.io.result_reader.read_run`) is a run with fields."""
    attrs, mode, shapes = raw["attrs"], raw["mode"], raw["field_shapes"]
    if "summary" in raw["groups"] and "study" in attrs:
        csv_path = os.path.join(os.path.dirname(path) or ".", "summary.csv")
        raise CaseError(path, None, "is a study's summary.h5",
                        f"the summary.csv beside it (bubbleflow plot {csv_path})")
    if "bubbleflow_version" not in attrs and "case" not in attrs:
        raise CaseError(path, None, "has no bubbleflow attributes (bubbleflow_version, case)",
                        RUN_EXPECTED)
    if mode not in ("pressure", "flow"):
        raise CaseError(path, "mode", f"got {mode!r}", "'pressure' or 'flow'")
    for name, value in (("grid/x", raw["x"]), ("grid/y", raw["y"])):
        if value is None:
            raise CaseError(path, name, "missing", RUN_EXPECTED)
    for name in ("p", "rho", "phi"):
        if name not in shapes:
            raise CaseError(path, f"fields/{name}", "missing", RUN_EXPECTED)
    grid = (len(raw["y"]), len(raw["x"]))
    names = "ny, nx"
    if raw.get("z") is not None:
        grid, names = (len(raw["z"]),) + grid, "nz, ny, nx"
    if mode == "flow" and len(shapes["p"]) != len(grid) + 1:
        raise CaseError(path, "fields/p", f"has shape {shapes['p']}",
                        f"(snapshots, {names}) in a flow run")
    fields = raw["fields"]
    for name in ("p", "rho", "phi"):
        if fields is not None and fields[name].shape != grid:
            raise CaseError(path, f"fields/{name}", f"has shape {fields[name].shape}",
                            f"({names}) = {grid} as /grid")


#: The diagnostics series the figures draw against ``diagnostics/time``.
_DRAWN_DIAGNOSTICS = ("step", "time", "rise_velocity", "circularity", "centroid_y", "area",
                      "sphericity", "centroid_z", "volume")


def _check_series(path, raw):
    """CaseError unless every drawn diagnostics series has one value per row
    (as many as ``diagnostics/time``), and every per-solve series one per solve."""
    groups = (("diagnostics", raw["diagnostics"], "time", _DRAWN_DIAGNOSTICS),
              ("solver", raw["solver"], "iterations", None))
    for group, series, by, drawn in groups:
        if not series or series.get(by) is None:
            continue
        n = len(series[by])
        for name, values in series.items():
            if drawn is not None and name not in drawn:
                continue
            if values is not None and np.ndim(values) == 1 and len(values) != n:
                raise CaseError(path, f"{group}/{name}", f"has {len(values)} values, "
                                f"{group}/{by} {n}", f"one value per {group} row")


def _rtol(raw):
    """The solver's rtol: the /solver attribute, else the case's; None if neither is a number."""
    rtol = raw["solver_attrs"].get("rtol")
    if rtol is None:
        rtol = _nested(raw["case"], "solver.rtol")
    try:
        return float(rtol) if rtol is not None else None
    except (TypeError, ValueError):
        return None


def _solver_description(raw):
    """Method, variant, preconditioner and deflation: the /solver attributes, else the case's."""
    from ..io.layout import text as _text

    attrs, case = raw["solver_attrs"], raw["case"]
    desc = {k: _text(attrs.get(k)) or _text(_nested(case, f"solver.{k}"))
            for k in ("method", "variant")}
    for k in ("preconditioner", "deflation"):
        desc[k] = _text(attrs.get(k)) or _text(_nested(case, f"solver.{k}.type"))
    return desc


# -------------------------------------------------------------- helpers
def _last_time_step(run):
    """``(time, step)`` of the last data the run file holds (None where unknown)."""
    for group in (run.get("diagnostics"), run.get("solves")):
        if not group:
            continue
        t, st = group.get("time"), group.get("step")
        if t is not None and len(t):
            return float(t[-1]), (int(st[-1]) if st is not None and len(st) else None)
    f = run.get("fields") or {}
    return f.get("time"), f.get("step")


def _when(t, step):
    parts = []
    if t is not None and math.isfinite(t):
        parts.append(f"t = {t:.4g} s")
    if step is not None:
        parts.append(f"step {step}")
    return ", ".join(parts) if parts else "the start"


_STATUS_TEXT = {
    "running": "running (killed, or still running)",
    "stopped": "stopped (SIGTERM / Ctrl-C; `bubbleflow run --restart` continues it)",
    "failed": "failed (the flow blew up or a pressure solve failed)",
}


def _list_steps(steps, most=6):
    steps = [int(v) for v in steps]
    text = ", ".join(str(v) for v in steps[:most])
    return text + (", ..." if len(steps) > most else "")


def run_warnings(run):
    """The problems a run's figures must show, one sentence each (may be empty).

    * a flow run whose ``run_status`` attribute is not ``finished``
      (``running``: killed or still running; ``stopped``; ``failed``), or,
      in files written before that attribute existed, whose last time is
      short of the case's ``time.end``;
    * a pressure solve that did not converge: its reason, iterations and
      final true residual against ``rtol`` (pressure runs), or how many of
      the steps' solves did not converge, which, and the worst true residual
      (flow runs).
    """
    out = []
    status = run.get("status")
    t, step = _last_time_step(run)
    if status is not None and status != "finished":
        out.append(f"INCOMPLETE RUN: status {_STATUS_TEXT.get(status, status)}; "
                   f"data up to {_when(t, step)}")
    elif status is None and run.get("mode") == "flow":
        end = _nested(run.get("case") or {}, "time.end")
        try:
            end = float(end)
        except (TypeError, ValueError):
            end = None
        if end is not None and t is not None and t < end * (1.0 - 1e-9) - 1e-12:
            out.append(f"INCOMPLETE RUN: data up to {_when(t, step)} of time.end = {end:.4g} s "
                       "(the file records no run status: killed, stopped or failed)")
    s = run.get("solves") or {}
    conv = s.get("converged")
    its = s.get("iterations")
    res = s.get("residual")
    rtol = run.get("rtol")
    vs = f" vs rtol {rtol:.1e}" if rtol else ""
    if conv is None or its is None or len(conv) != len(its) or np.all(conv):
        return out
    bad = np.flatnonzero(~conv.astype(bool))
    if run.get("mode") == "pressure":
        i = int(bad[0])
        reason = (s.get("reason") or [None] * len(its))[i] or "not converged"
        text = f"PRESSURE SOLVE NOT CONVERGED: {reason} after {int(its[i])} iterations"
        if res is not None and len(res) > i:
            text += f"; true residual {float(res[i]):.2e}{vs}"
        out.append(text)
    else:
        steps = s.get("step")
        steps = steps if steps is not None and len(steps) == len(its) else np.arange(1, len(its) + 1)
        text = (f"{len(bad)} OF {len(its)} PRESSURE SOLVES NOT CONVERGED "
                f"(step{'s' if len(bad) > 1 else ''} {_list_steps(steps[bad])})")
        if res is not None and len(res) == len(its):
            worst = res[bad][np.isfinite(res[bad])]
            if worst.size:
                text += f"; worst true residual {float(worst.max()):.2e}{vs}"
        out.append(text)
    return out


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


def _semilogy_safe(ax, it, res, **kw):
    res = np.asarray(res, dtype=np.float64)
    keep = np.isfinite(res) & (res > 0)
    return ax.semilogy(np.asarray(it)[keep], res[keep], **kw)


def _convergence_figure(run):
    """Recursive residual histories (lines), true-residual checks (hollow
    circles) and the final true residual (stars) of the pressure solves."""
    fig, body = run_figure(run, 7.8, 5.4)
    ax = body.subplots()
    extra = []              # legend proxies for the marker kinds
    if run["mode"] == "pressure":
        title = _pressure_convergence(ax, run, extra)
    else:
        title = _flow_convergence(ax, run, extra)
    if not any(np.any(np.isfinite(h) & (h > 0)) for _, h in run["histories"]):
        # Solved at once (b = 0): residual 0 has no place on a log axis.
        no_data_note(ax, "no residual above 0: every solve was done at iteration 0")
        ax.set_yscale("log")
        ax.set_ylim(min(run["rtol"] or 1e-8, 1e-8) / 10, 10.0)
        ax.set_xlim(-0.5, 0.5)
    if run["rtol"] is not None and run["rtol"] > 0:
        ax.axhline(run["rtol"], color="k", ls="--", lw=1.0, label=f"rtol = {run['rtol']:.0e}")
    ax.set_xlabel("iteration (-)")
    ax.set_ylabel("relative residual $\\|r_k\\| / \\|b\\|$ (-)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    handles, labels = ax.get_legend_handles_labels()
    for h, lab in extra:
        handles.append(h)
        labels.append(lab)
    ax.legend(handles, labels, fontsize=8, loc="best")
    return fig


def _checks_and_final(ax, final, i, it_checks, res_checks, last_it, colour):
    """Solve ``i``'s true-residual checks (hollow circles) and final true residual (a star)."""
    if it_checks is not None and len(it_checks):
        # Above the star: a check at the last iteration stays visible.
        _semilogy_safe(ax, it_checks, res_checks, ls="none", marker="o", ms=6.5, mfc="white",
                       mec=colour, mew=1.4, zorder=6)
    if final is not None and i < len(final) and np.isfinite(final[i]) and final[i] > 0:
        ax.semilogy([last_it], [final[i]], ls="none", marker="*", ms=15, color=colour,
                    mec="k", mew=0.6, zorder=5)


def _pressure_convergence(ax, run, extra):
    """The one solve of a pressure run; returns the title."""
    from matplotlib.lines import Line2D

    solves = run["solves"] or {}
    its, final, conv = solves.get("iterations"), solves.get("residual"), solves.get("converged")
    _, hist = run["histories"][0]
    _semilogy_safe(ax, np.arange(hist.size), hist, color="C0", lw=1.5,
                   label="recursive residual (the solver's update)")
    checks = solves.get("checks")
    last_it = int(its[0]) if its is not None and len(its) else hist.size - 1
    if checks is not None and len(checks):
        _checks_and_final(ax, final, 0, checks[:, 0], checks[:, 1], last_it, "C3")
        extra.append((Line2D([], [], ls="none", marker="o", ms=6.5, mfc="white", mec="C3",
                             mew=1.4), "true residual checks $\\|b - A x_k\\| / \\|b\\|$"))
    else:
        _checks_and_final(ax, final, 0, None, None, last_it, "C3")
    if final is not None and len(final):
        extra.append((Line2D([], [], ls="none", marker="*", ms=15, color="C3", mec="k",
                             mew=0.6), f"final true residual {float(final[0]):.2e}"))
    status = ""
    if its is not None and len(its):
        ok = conv is None or not len(conv) or bool(conv[0])
        status = f"{int(its[0])} iterations, " + ("converged" if ok else "NOT CONVERGED")
        reason = (solves.get("reason") or [None])[0]
        if reason and reason != "converged":
            status += f" ({reason})"
        finite = hist[np.isfinite(hist)]
        if finite.size:
            status += f"; at the end: recursive {float(finite[-1]):.2e}"
            if final is not None and len(final):
                status += f", true {float(final[0]):.2e}"
    title = f"{run['name']}: convergence of the pressure solve\n{solver_text(run)}"
    return title + (f"\n{status}" if status else "")


def _picked_solves(hists, solves):
    """``{index in hists: [why]}``: the first, last and longest solve, and the worst unconverged."""
    its, final, conv = solves.get("iterations"), solves.get("residual"), solves.get("converged")
    chosen = [0, len(hists) - 1, int(np.argmax([h.size for _, h in hists]))]
    names = ["first", "last", "most iterations"]
    # The unconverged solve with the largest final true residual.
    if conv is not None and its is not None and len(conv) == len(its) and not np.all(conv):
        solve_ids = [i for i, _ in hists]
        bad = [k for k, i in enumerate(solve_ids) if i < len(conv) and not conv[i]]
        if bad:
            if final is not None and len(final) == len(conv):
                worst = max(bad, key=lambda k: (np.nan_to_num(final[solve_ids[k]], nan=np.inf)))
            else:
                worst = bad[0]
            chosen.append(worst)
            names.append("NOT CONVERGED")
    picked = {}
    for idx, nm in zip(chosen, names):
        picked.setdefault(idx, []).append(nm)
    return picked


def _flow_convergence(ax, run, extra):
    """The picked solves of a flow run in colour, up to 60 others in grey; returns the title."""
    from matplotlib.lines import Line2D

    solves = run["solves"] or {}
    its, final = solves.get("iterations"), solves.get("residual")
    hists = run["histories"]
    steps = solves.get("step")
    step_checks = solves.get("step_checks")

    def step_of(i):
        return int(steps[i]) if steps is not None and i < len(steps) else i + 1

    picked = _picked_solves(hists, solves)
    others = [k for k in range(len(hists)) if k not in picked]
    if len(others) > 60:
        others = [others[int(k)] for k in np.linspace(0, len(others) - 1, 60)]
    for n, k in enumerate(others):
        _, h = hists[k]
        _semilogy_safe(ax, np.arange(h.size), h, color="0.75", lw=0.7,
                       label="other steps" if n == 0 else None, zorder=1)
    any_checks = False
    for c, (k, nms) in enumerate(sorted(picked.items())):
        i, h = hists[k]
        colour = "C3" if "NOT CONVERGED" in nms else f"C{[0, 1, 2, 4][c % 4]}"
        _semilogy_safe(ax, np.arange(h.size), h, color=colour, lw=1.8, zorder=3,
                       label=f"step {step_of(i)} ({h.size - 1} iterations): {', '.join(nms)}")
        it_c = res_c = None
        if step_checks is not None and len(step_checks):
            m = step_checks[:, 0] == step_of(i)
            it_c, res_c = step_checks[m, 1], step_checks[m, 2]
            any_checks = any_checks or bool(m.any())
        last_it = int(its[i]) if its is not None and i < len(its) else h.size - 1
        _checks_and_final(ax, final, i, it_c, res_c, last_it, colour)
    extra.insert(0, (Line2D([], [], color="0.3", lw=1.8),
                     "lines: recursive residual (the solver's update)"))
    if any_checks:
        extra.append((Line2D([], [], ls="none", marker="o", ms=6.5, mfc="white", mec="0.3",
                             mew=1.4), "circles: true residual checks $\\|b - A x_k\\| / \\|b\\|$"))
    if final is not None and len(final):
        extra.append((Line2D([], [], ls="none", marker="*", ms=15, color="0.5", mec="k",
                             mew=0.6), "stars: final true residual"))
    return (f"{run['name']}: convergence of the pressure solves ({len(hists)} steps)\n"
            f"{solver_text(run)}")
