"""Units of every dataset of bubbleflow's files (SI; "1" for dimensionless).

One table for the fields of a result and of its snapshots (:data:`UNITS`), one
for the per-step and per-solve series (:data:`SERIES_UNITS`).  The writers of
:mod:`.result_writer` label every dataset from them, so that a series without
an entry cannot be written (its lookup is a KeyError); the XDMF sidecars and
the apps' reports state the same units.
"""
from __future__ import annotations

from .layout import DYNAMIC_PRESSURE, HISTORY, HISTORY_OFFSETS, TRUE_CHECKS, VOLUME_FRACTION

__all__ = ["UNITS", "SERIES_UNITS"]

#: Units of the datasets under ``/fields`` (and of snapshot files); "1": dimensionless.
UNITS = {"phi": "m", "rho": "kg/m^3", "p": "Pa", "u": "m/s", "v": "m/s", "w": "m/s",
         "velocity": "m/s",
         "time": "s", "step": "1", DYNAMIC_PRESSURE: "Pa", VOLUME_FRACTION: "1"}
#: Units of the series under ``/diagnostics`` and ``/solver`` (SI; "1":
#: dimensionless, also for counts, flags and the text ``reason``).
#: ``divergence`` is ``||div u|| / ||div u*||``; residuals are relative.
SERIES_UNITS = {
    "step": "1", "time": "s", "dt": "s", "area": "m^2", "volume": "m^3", "surface": "m^2",
    "centroid_x": "m", "centroid_y": "m", "centroid_z": "m", "rise_velocity": "m/s",
    "circularity": "1", "sphericity": "1", "divergence": "1", "interface_length": "m",
    "contour_area": "m^2",
    "iterations": "1", "residual": "1", "converged": "1", "reason": "1",
    "setup_seconds": "s", "solve_seconds": "s",
    HISTORY: "1", HISTORY_OFFSETS: "1", TRUE_CHECKS: "1"}
