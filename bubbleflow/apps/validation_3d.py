"""Validation against the 3-D rising-bubble benchmark, test case 1
(Adelsberger, Esser, Griebel, Gross, Klitz, Ruettgers, "3D incompressible
two-phase flow benchmark computations for rising droplets", WCCM XI 2014).

The three codes' values shipped in ``bubbleflow/data/adelsberger2014_case1.csv``
(its header says where each number comes from: the extreme samples of the
codes' published time series) give, per quantity, the spread of the
published codes; :func:`compare` says whether a run lies within it.

::

    from bubbleflow.apps.validation_3d import read_run, benchmark_quantities, compare
    q = benchmark_quantities(read_run("outputs/rising_bubble_3d.h5"))
    for row in compare(q):
        print(row)
"""
from __future__ import annotations

import csv
import io
from importlib import resources
from typing import NamedTuple

import numpy as np

from .validation import parabolic_extremum

__all__ = ["REFERENCE_FILE", "QUANTITIES", "load_reference", "reference_spread", "read_run",
           "benchmark_quantities", "compare", "SpreadRow"]

REFERENCE_FILE = "adelsberger2014_case1.csv"

#: The benchmark quantities: name -> the CSV column of the codes' values.
QUANTITIES = {
    "max_rise_velocity": "max_rise_velocity",
    "t_max_rise_velocity": "t_max_rise_velocity",
    "min_sphericity": "min_sphericity",
    "t_min_sphericity": "t_min_sphericity",
    "centroid_end": "centroid_end",
}
#: The quantities whose spread decides the validation (the times of the
#: extrema are reported, not judged: the curves are flat there).
JUDGED = ("max_rise_velocity", "min_sphericity", "centroid_end")


def load_reference():
    """The codes' rows: ``{code: {column: value}}`` (floats where numeric)."""
    text = resources.files("bubbleflow.data").joinpath(REFERENCE_FILE).read_text()
    rows = csv.DictReader(io.StringIO("".join(l for l in text.splitlines(True)
                                              if not l.startswith("#"))))
    out = {}
    for row in rows:
        values = {}
        for key, value in row.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                values[key] = value
        out[row["code"]] = values
    return out


def reference_spread():
    """``{quantity: (lowest, highest)}`` over the codes."""
    ref = load_reference()
    return {q: (min(r[c] for r in ref.values()), max(r[c] for r in ref.values()))
            for q, c in QUANTITIES.items()}


def read_run(path):
    """A 3-D flow run's diagnostics series (``time``, ``rise_velocity``,
    ``sphericity``, ``centroid_z``, ``volume``), its grid's cells and wall
    time (through :func:`bubbleflow.io.result_reader.read_run`, the file reader)."""
    from ..io.layout import WALL_SECONDS
    from ..io.result_reader import read_run as read_run_file

    raw = read_run_file(path, fields=False)
    d = raw["diagnostics"] or {}
    if "sphericity" not in d:
        raise ValueError(f"{path}: not a 3-D flow run (no /diagnostics/sphericity)")
    out = {name: d[name] for name in ("time", "rise_velocity", "sphericity", "centroid_z",
                                      "volume")}
    out["cells"] = tuple(int(raw["grid_attrs"]["n" + a]) for a in "xyz")
    out["wall_seconds"] = float(raw["attrs"].get(WALL_SECONDS, np.nan))
    return out


def benchmark_quantities(series, end=3.0):
    """The benchmark numbers of a run's series: the largest rise velocity
    and the smallest sphericity (parabolic vertex through the extreme sample
    and its neighbours) with their times, the centroid at ``end`` (the last
    sample at or before it) and the relative volume change."""
    t = np.asarray(series["time"], dtype=float)
    v = np.asarray(series["rise_velocity"], dtype=float)
    s = np.asarray(series["sphericity"], dtype=float)
    t_v, v_max = parabolic_extremum(t, v, int(np.argmax(v)))
    t_s, s_min = parabolic_extremum(t, s, int(np.argmin(s[1:])) + 1)   # (not the initial sphere)
    last = int(np.searchsorted(t, end + 1e-12) - 1)
    volume = np.asarray(series["volume"], dtype=float)
    return {"max_rise_velocity": v_max, "t_max_rise_velocity": t_v, "min_sphericity": s_min,
            "t_min_sphericity": t_s, "centroid_end": float(series["centroid_z"][last]),
            "volume_change": float(volume[last] / volume[0] - 1.0)}


class SpreadRow(NamedTuple):
    quantity: str
    ours: float
    lowest: float
    highest: float
    judged: bool

    @property
    def within(self):
        return self.lowest <= self.ours <= self.highest

    def __str__(self):
        verdict = ("within" if self.within else "outside") if self.judged else "(reported)"
        return (f"{self.quantity:22s} {self.ours:10.5f}   codes {self.lowest:.5f} .. "
                f"{self.highest:.5f}   {verdict}")


def compare(quantities):
    """One :class:`SpreadRow` per benchmark quantity: ours against the codes' spread."""
    spread = reference_spread()
    return [SpreadRow(q, float(quantities[q]), *spread[q], q in JUDGED) for q in QUANTITIES]
