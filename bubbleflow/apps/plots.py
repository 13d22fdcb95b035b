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
* flow runs only: ``<stem>_benchmark.png`` (rise velocity, circularity and
  centroid height against time, with the published curves of Hysing et al.
  (2009) overlaid for test case 1) and ``<stem>_iterations.png`` (pressure
  iterations per step; solve and set-up time per step).

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
no pyplot, no global state, no display needed.  Bad input (a missing file,
a file not written by bubbleflow, a CSV that is not a study summary) is a
:class:`~bubbleflow.case.config.CaseError`, printed by ``bubbleflow`` as one line
with exit code 2.
"""
from __future__ import annotations

import csv
import math
import os
import sys

import numpy as np

from ..case.config import CaseError
from .tables import read_csv
from . import plots_3d
from .validation import nested as _nested

__all__ = [
    "add_subparser", "cmd_plot", "plot_run", "plot_study", "run_figures", "study_figures",
    "save_figure", "is_hysing_case1", "run_warnings", "gas_components", "spans_decades",
    "LOG_DECADES", "DPI",
]

#: Resolution of the written PNGs.
DPI = 130

_RUN_EXPECTED = "an HDF5 file written by `bubbleflow run` (mode pressure or flow)"
_STUDY_EXPECTED = ("a study summary written by `bubbleflow sweep` (a CSV with a header "
                   "naming the swept parameters, status and iterations columns)")

# Columns a study summary may use for its quantities, most specific first.
_ITERATION_COLUMNS = ("iterations", "iterations_mean", "mean_iterations")
_ITERATION_MAX_COLUMNS = ("iterations_max", "max_iterations")
_SOLVE_COLUMNS = ("solve_seconds", "solve_seconds_total", "solve_seconds_mean")
# Columns before `status` that are bookkeeping, not swept parameters.
_NOT_PARAMETERS = {"run", "run_id", "name", "path", "file", "output", "index", "id"}

# Axis labels of known swept parameters (the last dotted segment is matched
# too); anything else is labelled with its key.
_PARAMETER_LABELS = {
    "contrast": "density contrast $\\rho_\\mathrm{liquid} / \\rho_\\mathrm{gas}$ (-)",
    "grid.nx": "cells in x, $n_x$ (-)",
    "grid.ny": "cells in y, $n_y$ (-)",
    "nx": "cells in x, $n_x$ (-)",
    "ny": "cells in y, $n_y$ (-)",
    "n": "cells per side, $n$ (-)",
    "resolution": "cells per side (-)",
    "grid.lx": "domain width $l_x$ (m)",
    "grid.ly": "domain height $l_y$ (m)",
    "fluids.liquid.density": "liquid density (kg/m$^3$)",
    "fluids.gas.density": "gas density (kg/m$^3$)",
    "fluids.liquid.viscosity": "liquid viscosity (Pa s)",
    "fluids.gas.viscosity": "gas viscosity (Pa s)",
    "physics.gravity": "gravity (m/s$^2$)",
    "physics.surface_tension": "surface tension (N/m)",
    "solver.rtol": "relative tolerance rtol (-)",
    "solver.atol": "absolute tolerance atol (-)",
    "solver.maxiter": "iteration limit (-)",
    "solver.check_every": "iterations between checks (-)",
    "solver.preconditioner.block_lines": "block IC lines per block (-)",
    "solver.deflation.stripes": "deflation stripes (-)",
    "time.end": "end time (s)",
    "time.cfl": "CFL number (-)",
    "time.dt": "time step (s)",
    "time.dt_max": "maximum time step (s)",
    "levelset.reinit_every": "steps between reinitialisations (-)",
    "levelset.reinit_iterations": "reinitialisation iterations (-)",
}


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
    path = _resolve_input(args.input)
    notes = []
    if path.lower().endswith(".csv") and not _is_hdf5(path) and _is_bench_csv(path):
        written = plot_bench(path, args.output)
    elif path.lower().endswith(".csv") and not _is_hdf5(path):
        written = plot_study(path, args.output)
    else:
        # HDF5, or neither: then reported as a run file that is not one.
        written, notes = _plot_run(path, args.output)
    for p in written:
        print(p, flush=True)
    for note in notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    return 0


def _resolve_input(path):
    path = os.fspath(path)
    if os.path.isdir(path):
        summary = os.path.join(path, "summary.csv")
        if os.path.isfile(summary):
            return summary
        raise CaseError(path, None, "is a folder without a summary.csv",
                        f"{_RUN_EXPECTED}, or {_STUDY_EXPECTED}")
    if not os.path.exists(path):
        expected = _STUDY_EXPECTED if path.lower().endswith(".csv") else _RUN_EXPECTED
        raise CaseError(path, None, "no such file", expected)
    return path


def _is_hdf5(path):
    import h5py

    try:
        return bool(h5py.is_hdf5(path))
    except OSError:
        return False


# ==========================================================================
# Writing
# ==========================================================================
def _outdir(input_path, outdir):
    folder = outdir if outdir is not None else (os.path.dirname(os.path.abspath(input_path)))
    folder = os.fspath(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise CaseError(folder, None, f"cannot create the output folder ({exc.strerror or exc})",
                        "a writable folder") from None
    if not os.access(folder, os.W_OK):
        raise CaseError(folder, None, "the output folder is not writable", "a writable folder")
    return folder


def save_figure(fig, path, dpi=DPI):
    """Write ``fig`` as a PNG to ``path`` atomically; return ``path``.

    See :func:`bubbleflow.io.atomic.atomic_path`: the PNG gets the umask's
    permissions; on any error the temporary is removed and ``path`` is
    untouched.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ..io.atomic import atomic_bytes_writer

    path = os.fspath(path)
    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    with atomic_bytes_writer(path) as fh:
        fig.savefig(fh, format="png", dpi=dpi, facecolor="white")
    return path


def _write_all(figures, folder):
    written = []
    for filename, fig in figures.items():
        written.append(save_figure(fig, os.path.join(folder, filename)))
    return written


def _new_figure(width, height):
    """A constrained-layout figure on its own Agg canvas (no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: Colour of the warning banners.
BANNER_COLOUR = "#c62828"


def _run_figure(run, width, height):
    """``(fig, body)``: a figure of a run, with its warning banner on top.

    Without warnings ``body`` is ``fig``; otherwise ``fig`` is split into a
    banner strip (white bold text on red, one line per problem, as
    :func:`run_warnings` gives them) and ``body``, a subfigure of
    ``width x height`` inches on which the caller draws.
    """
    import textwrap

    most = max(40, int(width * 12.0))      # characters a line (bold 9.5 pt)
    lines = []
    for warning in run.get("warnings") or ():
        # Break at the "; " between clauses where possible, else by words.
        current = ""
        for part in warning.split("; "):
            joined = f"{current}; {part}" if current else part
            if len(joined) <= most or not current:
                current = joined
            else:
                lines.append(current + ";")
                current = "    " + part
        wrapped = textwrap.wrap(current, width=most, subsequent_indent="    ")
        lines.extend(wrapped)
    if not lines:
        fig = _new_figure(width, height)
        return fig, fig
    strip = 0.2 + 0.19 * len(lines)
    fig = _new_figure(width, height + strip)
    top, body = fig.subfigures(2, 1, height_ratios=[strip, height])
    top.text(0.5, 0.5, "\n".join(lines), ha="center", va="center", color="white",
             fontsize=9.5, fontweight="bold", linespacing=1.25,
             bbox=dict(boxstyle="round,pad=0.35", fc=BANNER_COLOUR, ec="none"))
    return fig, body


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
        ``<stem>_benchmark.png``, ``<stem>_iterations.png`` (a figure whose
        data the file does not hold yet, e.g. a flow run killed before its
        first snapshot, is left out).

    Raises
    ------
    CaseError
        Not a readable bubbleflow run file, or ``outdir`` not writable.
    """
    path = _resolve_input(path)
    return _plot_run(path, outdir)[0]


def _plot_run(path, outdir):
    """``(written paths, notes)``: notes name the figures left out and why."""
    figures, notes = _run_figures(path)
    return _write_all(figures, _outdir(path, outdir)), notes


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
        figs[f"{stem}_fields.png"] = (plots_3d.fields_figure(run, _run_figure) if three
                                      else _fields_figure(run))
    else:
        notes.append(f"{stem}_fields.png not written: the run has no field snapshot yet")
    if run["histories"]:
        figs[f"{stem}_convergence.png"] = _convergence_figure(run)
    else:
        notes.append(f"{stem}_convergence.png not written: no residual history")
    if run["mode"] == "flow":
        if run["diagnostics"] is not None and len(run["diagnostics"]["time"]):
            figs[f"{stem}_benchmark.png"] = (plots_3d.benchmark_figure(run, _run_figure) if three
                                             else _benchmark_figure(run))
        else:
            notes.append(f"{stem}_benchmark.png not written: no diagnostics")
        if run["solves"] is not None and len(run["solves"]["iterations"]):
            figs[f"{stem}_iterations.png"] = _iterations_figure(run)
        else:
            notes.append(f"{stem}_iterations.png not written: no pressure solve yet")
    if not figs:
        raise CaseError(path, None, "holds nothing to plot (no field snapshot, no solve)",
                        "a run file with at least one snapshot or pressure solve")
    return figs, notes


def _read_run_file(path):
    """Everything the figures need, as host arrays; CaseError when it is no run file."""
    from ..io.layout import read_run, text as _text

    if not os.access(path, os.R_OK):
        raise CaseError(path, None, "cannot be read (permission denied)",
                        "read permission on the file (ask its owner, or chmod a+r)")
    if not _is_hdf5(path):
        raise CaseError(path, None, "is not an HDF5 file", _RUN_EXPECTED)
    try:
        raw = read_run(path)
    except OSError as exc:
        raise CaseError(path, None, f"cannot be opened ({exc})", _RUN_EXPECTED) from None
    _check_run_file(path, raw)
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
        diagnostics = {name: diagnostics.get(name) for name in
                       ("step", "time", "rise_velocity", "circularity", "centroid_y", "area",
                        "sphericity", "centroid_z", "volume")}
        if diagnostics["time"] is None:
            diagnostics = None
    name = _text(_nested(case, "name")) or os.path.splitext(os.path.basename(path))[0]
    run = {
        "path": path, "name": name, "mode": raw["mode"], "case": case, "x": raw["x"],
        "y": raw["y"], "z": raw.get("z"), "fields": raw["fields"], "histories": raw["histories"], "solves": solves,
        "diagnostics": diagnostics, "rtol": _rtol(raw), "solver": _solver_description(raw),
        "backend": _text(raw["attrs"].get("backend")),
        "status": _text(raw["attrs"].get("run_status")),
    }
    run["warnings"] = run_warnings(run)
    return run


def _check_run_file(path, raw):
    """CaseError unless ``raw`` (:func:`bubbleflow.io.layout.read_run`) is a run with fields."""
    attrs, mode, shapes = raw["attrs"], raw["mode"], raw["field_shapes"]
    if "summary" in raw["groups"] and "study" in attrs:
        csv_path = os.path.join(os.path.dirname(path) or ".", "summary.csv")
        raise CaseError(path, None, "is a study's summary.h5",
                        f"the summary.csv beside it (bubbleflow plot {csv_path})")
    if "bubbleflow_version" not in attrs and "case" not in attrs:
        raise CaseError(path, None, "has no bubbleflow attributes (bubbleflow_version, case)",
                        _RUN_EXPECTED)
    if mode not in ("pressure", "flow"):
        raise CaseError(path, "mode", f"got {mode!r}", "'pressure' or 'flow'")
    for name, value in (("grid/x", raw["x"]), ("grid/y", raw["y"])):
        if value is None:
            raise CaseError(path, name, "missing", _RUN_EXPECTED)
    for name in ("p", "rho", "phi"):
        if name not in shapes:
            raise CaseError(path, f"fields/{name}", "missing", _RUN_EXPECTED)
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
def _solver_text(run):
    s = run["solver"]
    parts = [p for p in (s.get("method"), s.get("variant")) if p]
    text = " ".join(parts[:1]) + (f" ({parts[1]})" if len(parts) > 1 else "")
    extras = [p for p in (s.get("preconditioner"), s.get("deflation")) if p and p != "none"]
    if extras:
        text += ", " + " + ".join(extras)
    return text.strip(", ")


def _grid_text(run):
    return f"{len(run['x'])} x {len(run['y'])} cells"


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


def gas_components(phi):
    """``(bubbles, layers)``: connected regions of gas (``phi < 0``) in ``phi``.

    Regions are 4-connected sets of cells; one that reaches the top row of
    cells is a gas layer (the gas above a free surface), any other a bubble.
    """
    from scipy import ndimage

    gas = np.asarray(phi) < 0.0
    if not gas.any():
        return 0, 0
    labels, n = ndimage.label(gas)
    top = set(np.unique(labels[-1])) - {0}
    return n - len(top), len(top)


def _gas_phase_text(bubbles, layers):
    parts = []
    if bubbles:
        parts.append(f"{bubbles} bubble{'s' if bubbles != 1 else ''}")
    if layers:
        parts.append("gas layer" if layers == 1 else f"{layers} gas layers")
    return " + ".join(parts) if parts else "no gas"


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
    fig, body = _run_figure(run, 2 * (img_w + 2.1) + 0.2, img_h + 1.5)
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
        body.suptitle(f"{run['name']} (flow): pressure and density at {when}; {_grid_text(run)}",
                      fontsize=11)
    else:
        body.suptitle(f"{run['name']} (pressure solve): pressure and density; {_grid_text(run)}",
                      fontsize=11)
    return fig


def _semilogy_safe(ax, it, res, **kw):
    res = np.asarray(res, dtype=np.float64)
    keep = np.isfinite(res) & (res > 0)
    return ax.semilogy(np.asarray(it)[keep], res[keep], **kw)


def _convergence_figure(run):
    """Recursive residual histories (lines), true-residual checks (hollow
    circles) and the final true residual (stars) of the pressure solves."""
    fig, body = _run_figure(run, 7.8, 5.4)
    ax = body.subplots()
    extra = []              # legend proxies for the marker kinds
    if run["mode"] == "pressure":
        title = _pressure_convergence(ax, run, extra)
    else:
        title = _flow_convergence(ax, run, extra)
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
    title = f"{run['name']}: convergence of the pressure solve\n{_solver_text(run)}"
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
            f"{_solver_text(run)}")


# ---------------------------------------------------------------- Hysing
def _close(a, b, rel=1e-6):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def is_hysing_case1(case):
    """True if ``case`` (the resolved case, a dict) is Hysing et al.'s test case 1.

    Test case 1: domain 1 x 2 m, a single bubble of radius 0.25 at (0.5, 0.5),
    no other interface (no free surface, droplets, lattice or random bubbles),
    liquid density 1000, gas density 100, surface tension 24.5 (and, where
    the case states them, gravity 0.98 and viscosities 10 / 1).  The grid is
    free.

    >>> is_hysing_case1({"grid": {"lx": 1, "ly": 2},
    ...     "fluids": {"liquid": {"density": 1000}, "gas": {"density": 100}},
    ...     "physics": {"surface_tension": 24.5},
    ...     "geometry": {"bubbles": [{"center": [0.5, 0.5], "radius": 0.25}]}})
    True
    """
    if not isinstance(case, dict):
        return False
    g = lambda key: _nested(case, key)  # noqa: E731
    if not (_close(g("grid.lx"), 1.0) and _close(g("grid.ly"), 2.0)):
        return False
    if not (_close(g("fluids.liquid.density"), 1000.0) and _close(g("fluids.gas.density"), 100.0)):
        return False
    if not _close(g("physics.surface_tension"), 24.5):
        return False
    for key, value in (("physics.gravity", 0.98), ("fluids.liquid.viscosity", 10.0),
                       ("fluids.gas.viscosity", 1.0)):
        if g(key) is not None and not _close(g(key), value):
            return False
    bubbles = g("geometry.bubbles") or []
    if not isinstance(bubbles, list) or len(bubbles) != 1 or not isinstance(bubbles[0], dict):
        return False
    centre, radius = bubbles[0].get("center"), bubbles[0].get("radius")
    if not (isinstance(centre, (list, tuple)) and len(centre) == 2 and _close(centre[0], 0.5)
            and _close(centre[1], 0.5) and _close(radius, 0.25)):
        return False
    for key in ("geometry.droplets", "geometry.bubble_lattice", "geometry.random_bubbles",
                "geometry.free_surface"):
        if g(key):
            return False
    return True


def _benchmark_figure(run):
    from .validation import REFERENCE_GROUPS, load_reference

    d = run["diagnostics"]
    t = d["time"]
    gas = _gas_phase(run)
    hysing = is_hysing_case1(run["case"]) and gas["single"]
    fig, body = _run_figure(run, 14.0, 4.6 if gas["single"] else 5.2)
    axes = body.subplots(1, 3)
    if gas["single"]:
        panels = (("rise_velocity", "rise velocity (m/s)", "rise velocity of the bubble"),
                  ("circularity", "circularity (-)", "circularity"),
                  ("centroid_y", "centroid y (m)", "height of the centroid"))
    else:
        panels = (("rise_velocity", "mean rise velocity of the gas (m/s)",
                   "mean rise velocity of all gas"),
                  ("circularity", "2 sqrt($\\pi$ total area) / total interface length (-)",
                   "circularity of all gas together\n(not the shape of any bubble)"),
                  ("centroid_y", "centroid y of the gas (m)", "centroid height of all gas"))
    refs = []
    if hysing:
        styles = {"tp2d": "k", "freelife": "C3", "moonmd": "C2"}
        for key, (_, label) in REFERENCE_GROUPS.items():
            try:
                refs.append((label, styles.get(key, "0.4"), load_reference(key)))
            except (OSError, ValueError, KeyError):  # pragma: no cover - packaging
                continue
    nx, ny = len(run["x"]), len(run["y"])
    ours = f"bubbleflow ({nx} x {ny})"
    t_end = float(np.nanmax(t)) if t.size else 0.0
    for ax, (key, ylabel, title) in zip(axes, panels):
        for label, colour, ref in refs:
            ax.plot(ref["time"], ref[key], ls="--", lw=1.2, color=colour, label=label)
        values = d.get(key)
        if values is not None:
            ax.plot(t, values, "-", color="C0", lw=1.8, label=ours,
                    marker="o" if t.size <= 30 else None, ms=3)
        ax.set_xlabel("time t (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.35)
        if t_end > 0:
            ax.set_xlim(float(np.nanmin(t)), t_end)
            # Keep the y range to what is on screen, references included.
            on = [np.asarray(values)[np.isfinite(values)]] if values is not None else []
            for _, _, ref in refs:
                m = (ref["time"] >= np.nanmin(t)) & (ref["time"] <= t_end)
                on.append(ref[key][m])
            on = np.concatenate([a for a in on if a.size]) if on else np.zeros(0)
            if on.size:
                lo, hi = float(on.min()), float(on.max())
                pad = 0.06 * (hi - lo) if hi > lo else max(abs(hi) * 0.02, 1e-3)
                ax.set_ylim(lo - pad, hi + pad)
    axes[0].legend(fontsize=8, loc="best")
    if gas["single"]:
        title = f"{run['name']}: benchmark quantities of the bubble"
        if hysing:
            title += " vs Hysing et al. (2009), test case 1 (dashed)"
    else:
        title = (f"{run['name']}: WHOLE GAS PHASE ({gas['text']}), NOT ONE BUBBLE\n"
                 "means over all the gas; circularity: total gas area against total interface "
                 "length" + (" (free surface included)" if gas["layer"] else "") + "\n"
                 "no reference curves: Hysing et al. (2009) is one bubble")
    body.suptitle(title, fontsize=11)
    return fig


def _gas_phase(run):
    """What the gas of a flow run is: one bubble, or several and/or a gas layer.

    Returns ``{"single": bool, "layer": bool, "text": str}``; ``text`` counts
    the connected gas regions in the first and the last snapshot (e.g. "6
    bubbles + gas layer at t = 0; 4 bubbles + gas layer at t = 1 s"), or, with
    no snapshot, the case's geometry.
    """
    geometry = _nested(run.get("case") or {}, "geometry") or {}
    geometry = geometry if isinstance(geometry, dict) else {}
    bubbles = geometry.get("bubbles")
    n_case = len(bubbles) if isinstance(bubbles, list) else 0
    many = any(geometry.get(k) for k in ("bubble_lattice", "random_bubbles", "droplets"))
    surface = geometry.get("free_surface") is not None and geometry.get("free_surface") is not False
    f = run.get("fields")
    if f is not None and f.get("phi") is not None:
        first = gas_components(f.get("phi_first", f["phi"]))
        last = gas_components(f["phi"])
        t0, t1 = f.get("time_first"), f.get("time")
        text = _gas_phase_text(*first) + (f" at t = {t0:.3g} s" if t0 is not None else "")
        if f.get("snapshots", 1) > 1 and last != first:
            text += "; " + _gas_phase_text(*last) + (f" at t = {t1:.3g} s" if t1 is not None else "")
        single = first == (1, 0) and last in ((1, 0), (0, 0)) and not surface and not many
        layer = surface or first[1] > 0 or last[1] > 0
    else:
        text = f"{n_case} bubble{'s' if n_case != 1 else ''}" + (" + gas layer" if surface else "")
        if many:
            text += " + more from the case's bubble patterns"
        single = n_case == 1 and not surface and not many
        layer = surface
    return {"single": single, "layer": layer, "text": text}


def _iterations_figure(run):
    s = run["solves"]
    its = s["iterations"].astype(np.float64)
    steps = s["step"] if s["step"] is not None and len(s["step"]) == len(its) else np.arange(1, len(its) + 1)
    fig, body = _run_figure(run, 8.0, 6.2)
    ax_i, ax_t = body.subplots(2, 1, sharex=True)
    marker = "o" if len(its) <= 60 else None
    ax_i.plot(steps, its, "-", color="C0", lw=1.2, marker=marker, ms=3, label="iterations")
    ax_i.axhline(float(np.mean(its)), color="C0", ls=":", lw=1.0,
                 label=f"mean {np.mean(its):.1f}")
    conv = s.get("converged")
    if conv is not None and len(conv) == len(its) and not np.all(conv):
        bad = ~conv.astype(bool)
        ax_i.plot(steps[bad], its[bad], ls="none", marker="X", color=BANNER_COLOUR, ms=9,
                  mec="k", mew=0.6, zorder=5, label=f"not converged ({int(bad.sum())} steps)")
    ax_i.set_ylabel("pressure iterations (-)")
    if spans_decades(its):
        ax_i.set_yscale("log")
        ax_i.grid(True, which="minor", alpha=0.12)
    else:
        ax_i.set_ylim(bottom=0)
    ax_i.grid(True, alpha=0.35)
    ax_i.legend(fontsize=8, loc="best")
    ax_i.set_title("pressure iterations per step", fontsize=10)

    plotted = []
    for key, colour, label in (("solve_seconds", "C1", "solve"), ("setup_seconds", "C2", "setup")):
        v = s.get(key)
        if v is not None and len(v) == len(its):
            ax_t.plot(steps, v, "-", color=colour, lw=1.2, marker=marker, ms=3,
                      label=f"{label} (total {np.nansum(v):.3g} s)")
            plotted.append(v[np.isfinite(v) & (v > 0)])
    allv = np.concatenate(plotted) if plotted else np.zeros(0)
    if allv.size and allv.max() / allv.min() > 100.0:
        ax_t.set_yscale("log")
    else:
        ax_t.set_ylim(bottom=0)
    ax_t.set_xlabel("time step (-)")
    ax_t.set_ylabel("time per step (s)")
    ax_t.set_title("pressure solve and set-up time per step", fontsize=10)
    ax_t.grid(True, alpha=0.35)
    if plotted:
        ax_t.legend(fontsize=8, loc="best")
    body.suptitle(f"{run['name']}: pressure solver per time step ({len(its)} steps)\n"
                 f"{_solver_text(run)}; {_grid_text(run)}"
                 + (f"; backend {run['backend']}" if run.get("backend") else ""), fontsize=10)
    return fig


# ==========================================================================
# Study summaries
# ==========================================================================
def plot_study(csv_path, outdir=None):
    """Write the figures of a study summary; return the PNG paths.

    Parameters
    ----------
    csv_path : str or os.PathLike
        ``<stem>.csv`` written by ``bubbleflow sweep`` (or its folder, when it
        holds a ``summary.csv``).
    outdir : str, optional
        Folder for the PNGs (default: the CSV's folder).

    Returns
    -------
    list of str
        ``<stem>_iterations.png`` and ``<stem>_time.png`` (the latter only when
        the summary has a solve-time column).

    Raises
    ------
    CaseError
        Not a study summary, or ``outdir`` not writable.
    """
    csv_path = _resolve_input(csv_path)
    figures = study_figures(csv_path)
    return _write_all(figures, _outdir(csv_path, outdir))


def _float(text):
    if text is None:
        return math.nan
    text = str(text).strip()
    if text == "":
        return math.nan
    low = text.lower()
    if low in ("true", "false"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _is_numeric_column(values):
    present = [v for v in values if v is not None and str(v).strip() != ""]
    return bool(present) and all(math.isfinite(_float(v)) or str(v).strip().lower() in ("nan", "inf")
                                 for v in present)


def _read_study(path):
    """Header, rows, parameter columns and study name; CaseError if not a summary."""
    import yaml

    if _is_hdf5(path):
        raise CaseError(path, None, "is an HDF5 file, not a CSV", _STUDY_EXPECTED)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            lines = [ln for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(path, None, f"cannot be read ({exc})", _STUDY_EXPECTED) from None
    try:
        rows = list(csv.reader(lines))
    except csv.Error as exc:
        raise CaseError(path, None, f"is not valid CSV ({exc})", _STUDY_EXPECTED) from None
    if not rows:
        raise CaseError(path, None, "is empty", _STUDY_EXPECTED)
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or any(not h for h in header):
        raise CaseError(path, None, "has an empty or repeated column name in its header",
                        _STUDY_EXPECTED)
    body = []
    for n, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise CaseError(path, None, f"row {n} has {len(r)} values, the header {len(header)}",
                            _STUDY_EXPECTED)
        body.append({h: v.strip() for h, v in zip(header, r)})
    if not body:
        raise CaseError(path, None, "has a header but no rows", _STUDY_EXPECTED)
    table = {h: [row[h] for row in body] for h in header}

    iterations = next((c for c in _ITERATION_COLUMNS if c in table), None)
    if iterations is None:
        raise CaseError(path, None, "has no iterations column (one of "
                        + ", ".join(_ITERATION_COLUMNS) + ")", _STUDY_EXPECTED)

    # The swept parameters: from study.yaml beside the CSV, else the columns
    # before `status`.
    folder = os.path.dirname(os.path.abspath(path))
    params = None
    study_name = None
    spec_path = os.path.join(folder, "study.yaml")
    if os.path.isfile(spec_path):
        try:
            with open(spec_path, encoding="utf-8") as fh:
                spec = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            spec = None
        if isinstance(spec, dict):
            for key in ("study", "name"):
                if isinstance(spec.get(key), str):
                    study_name = spec[key]
                    break
            declared = spec.get("parameters")
            keys = []
            if isinstance(declared, dict):
                keys = [str(k) for k in declared]
            elif isinstance(declared, list):
                for item in declared:
                    if isinstance(item, str):
                        keys.append(item)
                    elif isinstance(item, dict):
                        k = item.get("key", item.get("name"))
                        if k is None and len(item) == 1:
                            k = next(iter(item))
                        if k is not None:
                            keys.append(str(k))
            keys = [k for k in keys if k in table]
            if keys:
                params = keys
    if params is None:
        if "status" not in table:
            raise CaseError(path, None, "has no status column and no study.yaml beside it naming "
                            "the parameters", _STUDY_EXPECTED)
        params = [h for h in header[:header.index("status")] if h.lower() not in _NOT_PARAMETERS]
        if not params:
            raise CaseError(path, None, "has no parameter columns before its status column",
                            _STUDY_EXPECTED)
    if study_name is None:
        study_name = os.path.basename(folder) or os.path.splitext(os.path.basename(path))[0]
    return {"path": path, "header": header, "table": table, "rows": len(body),
            "params": params, "name": study_name, "iterations": iterations}


def _short(key):
    """``solver.preconditioner.type`` -> ``preconditioner``; ``grid.nx`` -> ``nx``."""
    parts = [p for p in str(key).split(".") if p]
    if len(parts) > 1 and parts[-1] == "type":
        parts = parts[:-1]
    return parts[-1] if parts else str(key)


def _parameter_label(key):
    if key in _PARAMETER_LABELS:
        return _PARAMETER_LABELS[key]
    last = str(key).split(".")[-1]
    if last in _PARAMETER_LABELS:
        return _PARAMETER_LABELS[last]
    return f"{key} (-)" if not key.endswith(")") else key


def _study_layout(study):
    """x parameter, line parameters, the x values, the line keys and the status mask."""
    table, params = study["table"], study["params"]
    varying = [p for p in params if len(set(table[p])) > 1]
    numeric = [p for p in params if _is_numeric_column(table[p])]
    numeric_varying = [p for p in numeric if p in varying]
    if numeric_varying:
        xkey = numeric_varying[0]
    elif numeric:
        xkey = numeric[0]
    else:
        xkey = None                      # categorical x: the first parameter
    line_keys = [p for p in varying if p != xkey]
    if xkey is None:
        xkey_cat = varying[0] if varying else params[0]
        line_keys = [p for p in line_keys if p != xkey_cat]
    else:
        xkey_cat = None
    status = table.get("status")
    ok = np.array([(s or "").strip().lower() == "ok" for s in status], dtype=bool) if status \
        else np.ones(study["rows"], dtype=bool)
    return xkey, xkey_cat, line_keys, ok


#: Positive values spanning more than this many decades get a log axis.
LOG_DECADES = 1.5


def spans_decades(*arrays, decades=LOG_DECADES):
    """True when the positive finite values span more than ``decades`` decades."""
    vals = [np.asarray(a, dtype=np.float64).ravel() for a in arrays if a is not None]
    v = np.concatenate(vals) if vals else np.zeros(0)
    v = v[np.isfinite(v) & (v > 0)]
    return bool(v.size) and float(v.max()) / float(v.min()) > 10.0 ** decades


def _study_axis(ax, study, column, ylabel, title, log_y=False, max_column=None):
    """One study panel; ``log_y=None``: log scale when the values span decades."""
    from matplotlib.lines import Line2D

    table = study["table"]
    xkey, xcat, line_keys, ok = _study_layout(study)
    n = study["rows"]
    if xkey is not None:
        xs = np.array([_float(v) for v in table[xkey]])
        xlabel = _parameter_label(xkey)
        categories = None
    else:
        categories = list(dict.fromkeys(table[xcat]))
        xs = np.array([float(categories.index(v)) for v in table[xcat]])
        xlabel = f"{xcat} (-)"
    ys = np.array([_float(v) for v in table[column]])
    ymax = np.array([_float(v) for v in table[max_column]]) if max_column else None
    if log_y is None:
        log_y = spans_decades(ys, ymax)

    groups = {}
    for i in range(n):
        key = tuple(table[k][i] for k in line_keys)
        groups.setdefault(key, []).append(i)

    # Styles: with two line parameters (e.g. preconditioner + deflation) the
    # colour tells the first and the marker the second; otherwise every line
    # gets its own colour, and past ten lines the markers tell them apart.
    markers = "osD^v<>ph*"
    if len(line_keys) == 2:
        firsts = list(dict.fromkeys(k[0] for k in groups))
        seconds = list(dict.fromkeys(k[1] for k in groups))

        def style(c, key):
            return (f"C{firsts.index(key[0]) % 10}",
                    markers[seconds.index(key[1]) % len(markers)])
    else:
        def style(c, key):
            return f"C{c % 10}", markers[(c + c // 10) % len(markers)]

    omitted = 0
    hollow = 0
    for c, (key, idx) in enumerate(groups.items()):
        idx = np.array(idx)
        idx = idx[np.argsort(xs[idx], kind="stable")]
        label = " + ".join(str(v) for v in key) if key else "all runs"
        colour, marker = style(c, key)
        good = idx[ok[idx] & np.isfinite(ys[idx]) & np.isfinite(xs[idx])
                   & ((ys[idx] > 0) if log_y else True)]
        bad = idx[~ok[idx] & np.isfinite(ys[idx]) & np.isfinite(xs[idx])
                  & ((ys[idx] > 0) if log_y else True)]
        omitted += len(idx) - len(good) - len(bad)
        hollow += len(bad)
        ax.plot(xs[good], ys[good], "-", color=colour, marker=marker, ms=6, lw=1.6, label=label)
        if len(bad):
            ax.plot(xs[bad], ys[bad], ls="none", marker=marker, ms=8, mfc="none", mec=colour,
                    mew=1.6)
        if ymax is not None:
            m = idx[ok[idx] & np.isfinite(ymax[idx]) & np.isfinite(xs[idx])
                    & ((ymax[idx] > 0) if log_y else True)]
            ax.plot(xs[m], ymax[m], ls=":", color=colour, lw=1.2, marker=marker, ms=3,
                    alpha=0.9)

    handles, labels = ax.get_legend_handles_labels()
    if ymax is not None:
        handles.append(Line2D([], [], color="0.3", ls=":", lw=1.2))
        labels.append("dotted: maximum per step")
    if hollow:
        handles.append(Line2D([], [], ls="none", marker="o", ms=8, mfc="none", mec="0.3", mew=1.6))
        labels.append("hollow: status not ok")
    legend_title = " + ".join(_short(k) for k in line_keys) if line_keys else None
    # Outside, right of the axes: the lines often fill the whole plot.
    ax.legend(handles, labels, title=legend_title, fontsize=8, title_fontsize=8,
              loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)

    if xkey is not None:
        finite = xs[np.isfinite(xs) & (xs > 0)]
        is_contrast = _short(xkey).lower() == "contrast"
        if finite.size == np.isfinite(xs).sum() and finite.size and (
                is_contrast or finite.max() / finite.min() > 100.0):
            ax.set_xscale("log")
        if finite.size and len(np.unique(finite)) <= 12 and ax.get_xscale() == "linear":
            ax.set_xticks(np.unique(xs[np.isfinite(xs)]))
    else:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=20, ha="right")
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    notes = []
    if hollow:
        notes.append(f"{hollow} run(s) with status other than ok drawn hollow")
    if omitted:
        notes.append(f"{omitted} run(s) without a value omitted")
    if notes:
        title += "\n(" + "; ".join(notes) + ")"
    ax.set_title(title, fontsize=10)


def study_figures(csv_path):
    """The figures of a study summary, not written: ``{file name: Figure}``."""
    path = os.fspath(csv_path)
    study = _read_study(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    xkey, xcat, _, _ = _study_layout(study)
    against = _short(xkey or xcat)
    if (xkey or "").split(".")[-1] == "contrast":
        against = "density contrast"
    figs = {}
    its_col = study["iterations"]
    flow = its_col != "iterations"
    max_col = next((c for c in _ITERATION_MAX_COLUMNS if c in study["table"]), None) if flow else None
    fig = _new_figure(10.0, 5.2)
    _study_axis(fig.subplots(), study, its_col,
                "mean pressure iterations per step (-)" if flow else "pressure iterations (-)",
                f"study {study['name']}: iterations vs {against}", max_column=max_col,
                log_y=None)
    figs[f"{stem}_iterations.png"] = fig
    solve_col = next((c for c in _SOLVE_COLUMNS if c in study["table"]), None)
    if solve_col is not None:
        fig = _new_figure(10.0, 5.2)
        _study_axis(fig.subplots(), study, solve_col,
                    "solve time (s)" if not flow else "pressure solve time (s)",
                    f"study {study['name']}: solve time vs {against}", log_y=True)
        figs[f"{stem}_time.png"] = fig
    return figs


# ==========================================================================
# Benchmark tables (bubbleflow bench --csv)
# ==========================================================================
#: The columns of ``bubbleflow bench --csv`` a time-to-solution figure needs.
_BENCH_COLUMNS = ("size", "contrast", "kind", "solver", "config", "solve_ms", "converged")


def _is_bench_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError):
        return False
    return all(c in header for c in _BENCH_COLUMNS)


def plot_bench(csv_path, outdir=None):
    """Write ``<stem>_time.png`` of a ``bubbleflow bench --csv`` table: time
    to solution against grid size, a line per solver (ours and the peers),
    a panel per density contrast, open markers where the solve did not
    converge.  Returns the PNG paths."""
    csv_path = _resolve_input(csv_path)
    return _write_all(bench_figures(csv_path), _outdir(csv_path, outdir))


def bench_figures(csv_path):
    """The figures of a benchmark table, not written: ``{file name: Figure}``."""
    rows = [r for r in read_csv(csv_path)
            if isinstance(r.get("solve_ms"), (int, float)) and r["solve_ms"] > 0]
    if not rows:
        raise CaseError(csv_path, None, "has no solve times",
                        "a table written by `bubbleflow bench --csv`")
    contrasts = sorted({float(r["contrast"]) for r in rows})
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    device = rows[0].get("device") or rows[0].get("backend") or ""
    fig = _new_figure(4.2 * len(contrasts) + 1.0, 5.2)
    axes = np.atleast_1d(fig.subplots(1, len(contrasts), sharey=True))
    colours = {name: f"C{i % 10}" for i, name in enumerate(solvers)}
    for ax, contrast in zip(axes, contrasts):
        for name in solvers:
            mine = sorted((r["size"], r["solve_ms"], r["converged"] is True)
                          for r in rows if r["solver"] == name and r["contrast"] == contrast)
            if not mine:
                continue
            n, ms, ok = (np.array(v) for v in zip(*mine))
            ax.plot(n, ms, "-", color=colours[name], label=name)
            ax.plot(n[ok], ms[ok], "o", color=colours[name])
            ax.plot(n[~ok], ms[~ok], "o", mfc="white", color=colours[name])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"contrast {contrast:g}")
        ax.set_xlabel("cells per side n (grid n x n)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("time to solution (ms)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        more = ax.get_legend_handles_labels()
        handles += [h for h, name in zip(*more) if name not in labels]
        labels += [name for name in more[1] if name not in labels]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8)
    fig.suptitle(f"bubbleflow bench: time to solution, {device} (open: not converged)")
    stem = os.path.splitext(os.path.basename(csv_path))[0]
    return {f"{stem}_time.png": fig}
