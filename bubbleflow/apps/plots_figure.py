"""What every figure of ``bubbleflow plot`` is drawn on and written with.

Figures are :class:`matplotlib.figure.Figure` objects on the Agg canvas (no
pyplot, no global state); :func:`save_figure` writes one atomically.  A run's
figures carry its warnings as a red banner (:func:`run_figure`), and the
figures of a flow's diagnostics a red note when its gas volume drifted
(:func:`mark_gas_volume`).  The input
checks shared by run files and tables (:func:`resolve_input`,
:func:`is_hdf5`, :func:`output_folder`) live here too.
"""
from __future__ import annotations

import os

import numpy as np

from ..case.config import CaseError

__all__ = ["DPI", "BANNER_COLOUR", "LOG_DECADES", "RUN_EXPECTED", "STUDY_EXPECTED",
           "resolve_input", "is_hdf5", "output_folder", "save_figure", "write_all",
           "new_figure", "run_figure", "solver_text", "grid_text", "spans_decades",
           "no_data_note", "gas_volume_note", "mark_gas_volume"]


#: Resolution of the written PNGs.
DPI = 130


RUN_EXPECTED = "an HDF5 file written by `bubbleflow run` (mode pressure or flow)"


STUDY_EXPECTED = ("a study summary written by `bubbleflow sweep` (a CSV with a header "
                   "naming the swept parameters, status and iterations columns)")


def resolve_input(path):
    path = os.fspath(path)
    if os.path.isdir(path):
        summary = os.path.join(path, "summary.csv")
        if os.path.isfile(summary):
            return summary
        raise CaseError(path, None, "is a folder without a summary.csv",
                        f"{RUN_EXPECTED}, or {STUDY_EXPECTED}")
    if not os.path.exists(path):
        expected = STUDY_EXPECTED if path.lower().endswith(".csv") else RUN_EXPECTED
        raise CaseError(path, None, "no such file", expected)
    return path


def is_hdf5(path):
    import h5py

    try:
        return bool(h5py.is_hdf5(path))
    except OSError:
        return False


def output_folder(input_path, outdir):
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


def write_all(figures, folder):
    written = []
    for filename, fig in figures.items():
        written.append(save_figure(fig, os.path.join(folder, filename)))
    return written


def new_figure(width, height):
    """A constrained-layout figure on its own Agg canvas (no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: Colour of the warning banners.
BANNER_COLOUR = "#c62828"


def run_figure(run, width, height):
    """``(fig, body)``: a figure of a run, with its warning banner on top.

    Without warnings ``body`` is ``fig``; otherwise ``fig`` is split into a
    banner strip (white bold text on red, one line per problem, as
    :func:`.plots_run_file.run_warnings` gives them) and ``body``, a subfigure of
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
        fig = new_figure(width, height)
        return fig, fig
    strip = 0.2 + 0.19 * len(lines)
    fig = new_figure(width, height + strip)
    top, body = fig.subfigures(2, 1, height_ratios=[strip, height])
    top.text(0.5, 0.5, "\n".join(lines), ha="center", va="center", color="white",
             fontsize=9.5, fontweight="bold", linespacing=1.25,
             bbox=dict(boxstyle="round,pad=0.35", fc=BANNER_COLOUR, ec="none"))
    return fig, body


def solver_text(run):
    s = run["solver"]
    parts = [p for p in (s.get("method"), s.get("variant")) if p]
    text = " ".join(parts[:1]) + (f" ({parts[1]})" if len(parts) > 1 else "")
    extras = [p for p in (s.get("preconditioner"), s.get("deflation")) if p and p != "none"]
    if extras:
        text += ", " + " + ".join(extras)
    return text.strip(", ")


def grid_text(run):
    return f"{len(run['x'])} x {len(run['y'])} cells"


#: Positive values spanning more than this many decades get a log axis.
LOG_DECADES = 1.5


def spans_decades(*arrays, decades=LOG_DECADES):
    """True when the positive finite values span more than ``decades`` decades."""
    vals = [np.asarray(a, dtype=np.float64).ravel() for a in arrays if a is not None]
    v = np.concatenate(vals) if vals else np.zeros(0)
    v = v[np.isfinite(v) & (v > 0)]
    return bool(v.size) and float(v.max()) / float(v.min()) > 10.0 ** decades


def no_data_note(ax, text):
    """Say on ``ax`` that it has nothing to draw, and why (a panel whose
    quantity the output does not hold is left empty with this note)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="0.35", wrap=True)


def gas_volume_note(run):
    """``gas volume changed by X % (levelset.method M)`` when a flow run's gas
    area (2-D) or volume (3-D) changed by more than
    :data:`~bubbleflow.io.flow_output.GAS_VOLUME_TOLERANCE` (relative) from
    its first diagnostics row to its last; None otherwise (also without gas
    or diagnostics).  The file's ``/diagnostics`` attribute states the same
    change."""
    from ..io.flow_output import GAS_VOLUME_TOLERANCE, gas_volume_change
    from ..io.layout import text

    diagnostics = {k: v for k, v in (run.get("diagnostics") or {}).items() if v is not None}
    change = gas_volume_change(diagnostics)
    if not np.isfinite(change) or abs(change) <= GAS_VOLUME_TOLERANCE:
        return None
    levelset = (run.get("case") or {}).get("levelset")
    method = text(levelset.get("method")) if isinstance(levelset, dict) else None
    return (f"gas volume changed by {100.0 * change:+.3g} % from the first row to the last"
            + (f" (levelset.method {method})" if method else ""))


def mark_gas_volume(fig, run):
    """Put :func:`gas_volume_note` under ``fig`` (a figure or subfigure) in
    red; returns the note (None: nothing to say, nothing drawn)."""
    note = gas_volume_note(run)
    if note is not None:
        fig.supxlabel(note, color=BANNER_COLOUR, fontsize=10, fontweight="bold")
    return note
