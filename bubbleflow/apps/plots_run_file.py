"""The run file as ``bubbleflow plot`` reads it: the data a run's figures
draw on, checked, and the problems they must show.

:func:`read_run_file` reads ``<stem>.h5``
(:func:`bubbleflow.io.result_reader.read_run`) into the ``run`` dict every
figure of a run takes, and raises :class:`~bubbleflow.case.config.CaseError`
on a file it cannot draw: unreadable, not HDF5, a study's ``summary.h5``, no
bubbleflow attributes, a mode other than pressure or flow, fields whose
shape is not the grid's, or series of unequal lengths.  :func:`run_warnings`
names the problems every figure of the run marks with a red banner
(:func:`.plots_figure.run_figure`): an incomplete run and pressure solves
that did not converge.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..case.config import CaseError
from .plots_figure import RUN_EXPECTED, is_hdf5
from .validation import nested as _nested

__all__ = ["read_run_file", "run_warnings"]


def read_run_file(path):
    """Everything the figures of a run need, as host arrays: the ``run`` dict.

    Keys: ``path``, ``name``, ``mode``, ``case``, the grid ``x``, ``y``,
    ``z`` (None in 2-D), ``fields`` (the last snapshot), ``histories``,
    ``solves`` (per-solve series with the true-residual checks),
    ``diagnostics`` (the drawn series), ``rtol``, ``solver``, ``backend``,
    ``status``, ``bubbles``, ``bubble_events`` and ``warnings``
    (:func:`run_warnings`).

    Raises
    ------
    CaseError
        The file cannot be read, is not HDF5, or is not a bubbleflow run
        file whose fields and series have the shapes the figures need.
    """
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

