"""The figures of tables: study summaries (``bubbleflow sweep``) and
benchmark tables (``bubbleflow bench --csv``).

Study summary ``<stem>.csv``: ``<stem>_iterations.png`` and ``<stem>_time.png``:
iterations and solve time against the numeric swept parameter, one line per
combination of the other swept parameters; rows whose ``status`` is not
``ok`` are drawn as hollow markers.  A panel with nothing to draw (every
solve took no iteration or no time: a study whose problems are solved at
once; every run failed) says so instead (:func:`.plots_figure.no_data_note`).
"""
from __future__ import annotations

import csv
import math
import os
import textwrap

import numpy as np

from ..case.config import CaseError
from ..case.yaml_reader import load_yaml, read_text
from .plots_figure import (STUDY_EXPECTED, is_hdf5, new_figure, no_data_note, output_folder,
                           resolve_input, spans_decades, write_all)
from .tables import read_csv

__all__ = ["plot_study", "study_figures", "read_study", "is_bench_csv", "plot_bench",
           "bench_figures"]


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
    csv_path = resolve_input(csv_path)
    figures = study_figures(csv_path)
    return write_all(figures, output_folder(csv_path, outdir))


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


def read_study(path):
    """Header, rows, parameter columns and study name; CaseError if not a summary."""
    import yaml

    if is_hdf5(path):
        raise CaseError(path, None, "is an HDF5 file, not a CSV", STUDY_EXPECTED)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            lines = [ln for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(path, None, f"cannot be read ({exc})", STUDY_EXPECTED) from None
    try:
        rows = list(csv.reader(lines))
    except csv.Error as exc:
        raise CaseError(path, None, f"is not valid CSV ({exc})", STUDY_EXPECTED) from None
    if not rows:
        raise CaseError(path, None, "is empty", STUDY_EXPECTED)
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or any(not h for h in header):
        raise CaseError(path, None, "has an empty or repeated column name in its header",
                        STUDY_EXPECTED)
    body = []
    for n, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise CaseError(path, None, f"row {n} has {len(r)} values, the header {len(header)}",
                            STUDY_EXPECTED)
        body.append({h: v.strip() for h, v in zip(header, r)})
    if not body:
        raise CaseError(path, None, "has a header but no rows", STUDY_EXPECTED)
    table = {h: [row[h] for row in body] for h in header}

    iterations = next((c for c in _ITERATION_COLUMNS if c in table), None)
    if iterations is None:
        raise CaseError(path, None, "has no iterations column (one of "
                        + ", ".join(_ITERATION_COLUMNS) + ")", STUDY_EXPECTED)

    # The swept parameters: from study.yaml beside the CSV, else the columns
    # before `status`.
    folder = os.path.dirname(os.path.abspath(path))
    params = None
    study_name = None
    spec_path = os.path.join(folder, "study.yaml")
    if os.path.isfile(spec_path):
        try:
            spec = load_yaml(read_text(spec_path), spec_path)
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
                            "the parameters", STUDY_EXPECTED)
        params = [h for h in header[:header.index("status")] if h.lower() not in _NOT_PARAMETERS]
        if not params:
            raise CaseError(path, None, "has no parameter columns before its status column",
                            STUDY_EXPECTED)
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
    # A log axis needs a positive value (solves done at once take 0
    # iterations and 0 s): without one the panel is linear.
    shown = np.concatenate([ys] + ([ymax] if ymax is not None else []))
    shown = shown[np.isfinite(shown)]
    log_y = log_y and bool((shown > 0).any())

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
    if not shown.size:
        no_data_note(ax, f"no run has a value of {column}")
    elif not (shown > 0).any():
        ax.set_ylim(-0.05, 1.0)         # every value 0: kept in view, not on the frame
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
    study = read_study(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    xkey, xcat, _, _ = _study_layout(study)
    against = _short(xkey or xcat)
    if (xkey or "").split(".")[-1] == "contrast":
        against = "density contrast"
    figs = {}
    its_col = study["iterations"]
    flow = its_col != "iterations"
    max_col = next((c for c in _ITERATION_MAX_COLUMNS if c in study["table"]), None) if flow else None
    fig = new_figure(10.0, 5.2)
    _study_axis(fig.subplots(), study, its_col,
                "mean pressure iterations per step (-)" if flow else "pressure iterations (-)",
                f"study {study['name']}: iterations vs {against}", max_column=max_col,
                log_y=None)
    figs[f"{stem}_iterations.png"] = fig
    solve_col = next((c for c in _SOLVE_COLUMNS if c in study["table"]), None)
    if solve_col is not None:
        fig = new_figure(10.0, 5.2)
        _study_axis(fig.subplots(), study, solve_col,
                    "solve time (s)" if not flow else "pressure solve time (s)",
                    f"study {study['name']}: solve time vs {against}", log_y=True)
        figs[f"{stem}_time.png"] = fig
    return figs


#: The columns of ``bubbleflow bench --csv`` a time-to-solution figure needs.
_BENCH_COLUMNS = ("size", "contrast", "kind", "solver", "config", "solve_ms", "converged")


# Widths of one character (inches, upper bounds for DejaVu Sans) of the
# bench figure's legend (8 pt) and title (12 pt), to size the figure.
_BENCH_LEGEND_CHAR_IN = 0.065
_BENCH_TITLE_CHAR_IN = 0.11


def is_bench_csv(path):
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
    csv_path = resolve_input(csv_path)
    return write_all(bench_figures(csv_path), output_folder(csv_path, outdir))


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
    # The legend has a strip of its own right of the panels, as wide as its
    # longest solver name (they run to 50 characters) and as tall as its
    # rows, so that neither it nor the title above the panels is pushed off
    # the canvas or over the other.
    legend_w = 0.6 + _BENCH_LEGEND_CHAR_IN * max(len(str(name)) for name in solvers)
    panels_w = 4.2 * len(contrasts) + 1.0
    fig = new_figure(panels_w + legend_w, max(5.2, 1.0 + 0.2 * len(solvers)))
    plots, side = fig.subfigures(1, 2, width_ratios=[panels_w, legend_w])
    axes = np.atleast_1d(plots.subplots(1, len(contrasts), sharey=True))
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
    side.legend(handles, labels, loc="center left", fontsize=8, title="solver",
                title_fontsize=8)
    # Wrapped to the panels' width: one narrow panel cannot hold the title
    # on one line.
    title = f"bubbleflow bench: time to solution, {device} (open: not converged)"
    most = max(20, int(panels_w / _BENCH_TITLE_CHAR_IN))
    plots.suptitle("\n".join(textwrap.wrap(title, width=most)))
    stem = os.path.splitext(os.path.basename(csv_path))[0]
    return {f"{stem}_time.png": fig}
