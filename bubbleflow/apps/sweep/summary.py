"""A study's summary: its columns, ``summary.csv`` and ``summary.h5``, rewritten after every run."""
from __future__ import annotations

import math
import numbers
import os

from ..tables import csv_text, format_cell, read_csv

__all__ = ["STATUSES", "SUMMARY_CSV", "SUMMARY_H5", "BENCHMARK", "summary_columns",
           "read_summary", "write_summary"]

#: Values of the ``status`` column.
STATUSES = ("ok", "not_converged", "failed")

SUMMARY_CSV = "summary.csv"
SUMMARY_H5 = "summary.h5"

_PRESSURE_RESULTS = ("iterations", "residual", "converged", "reason", "setup_seconds",
                     "solve_seconds")
_FLOW_RESULTS = ("iterations_mean", "iterations_max", "pressure_solves", "steps", "residual",
                 "converged", "reason", "setup_seconds", "solve_seconds")
#: The Hysing benchmark quantities of a flow run's row.
BENCHMARK = ("max_rise_velocity", "max_rise_velocity_time", "min_circularity",
             "min_circularity_time", "centroid_y_end", "area_change", "final_time")
_TRAILER = ("wall_seconds", "backend", "device", "gpu", "host", "file", "error")


def summary_columns(parameters, modes):
    """``run``, the swept keys, ``status``, the results of the runs' ``modes``, the trailer."""
    columns = ["run"] + [p.key for p in parameters] + ["status"]
    results = []
    for mode, cols in (("pressure", _PRESSURE_RESULTS), ("flow", _FLOW_RESULTS + BENCHMARK)):
        if mode in modes:
            results += [c for c in cols if c not in results]
    return columns + results + list(_TRAILER)


def read_summary(path):
    """Rows of a ``summary.csv`` with typed values (``""`` -> None); ``[]`` if absent."""
    return read_csv(path)


def _h5_column(values):
    """A numeric column as an array (bool, int64, else float64 with NaN for None); else text."""
    import numpy as np

    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, numbers.Real) for v in present)
    if present and numeric:
        if all(isinstance(v, bool) for v in present) and len(present) == len(values):
            return np.asarray(values, dtype=np.bool_)
        if (all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in present)
                and len(present) == len(values)):
            return np.asarray(values, dtype=np.int64)
        return np.asarray([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    return [format_cell(v) for v in values]


def write_summary(directory, columns, rows, study_text=""):
    """Write ``summary.csv`` and ``summary.h5`` (each atomically) in ``directory``."""
    from ...io.atomic import atomic_text
    from ...io.result_writer import write_summary_h5

    atomic_text(os.path.join(directory, SUMMARY_CSV), csv_text(columns, rows))
    write_summary_h5(os.path.join(directory, SUMMARY_H5), study_text, len(rows), columns,
                     {c: _h5_column([row.get(c) for row in rows]) for c in columns})
