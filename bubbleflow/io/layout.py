"""The HDF5 layout of bubbleflow's files: every group, dataset and attribute name.

Every name of the files is a constant of this module (those of the bubble
tables and the tracker's state are :mod:`.bubble_tables`'s), so that a name
is spelled once.  The modules that write and read the files take them from
here: :mod:`.result_writer` (the writers), :mod:`.result_reader`
(:func:`~.result_reader.read_run`, tolerant), :mod:`.checkpoint_reader`
(what a restart reads), :mod:`.run_paths` (run ids and snapshot folders),
:mod:`.result_header` (the root attributes), :mod:`.result_units` (the
units tables) and :mod:`.dimension_scales`.

A pressure result ``OUTDIR/<case name>.h5`` (docs/howto/output_file.md)::

    /                    attrs: bubbleflow_version, case (resolved YAML), mode,
                                backend, device, precision, face_density, created
    /grid/x, /grid/y     cell centres (m); HDF5 dimension scales "x", "y" of
                         the fields (:mod:`.dimension_scales`)
    /fields/phi          level set (m), positive in the liquid
    /fields/rho          cell density (kg/m^3)
    /fields/p            pressure (Pa = kg m^-1 s^-2), zero mean
    /solver/...          one entry per pressure solve (series of length 1 in
                         mode "pressure"): iterations, residual (final true
                         relative residual), converged, reason, setup_seconds,
                         solve_seconds; residual_history (relative recursive
                         residual per iteration of the solve); attrs
                         SOLVER_ATTRS (method, variant, preconditioner, ...)

Every dataset of both kinds of file carries ``units`` (SI, "1" for
dimensionless: :mod:`.result_units`).

A flow run's index ``OUTDIR/<name>.h5`` has the same root attributes and, in
addition (see :mod:`bubbleflow.io.flow_output` for why it is shaped so)::

    attrs: run_status ("running": in progress or killed; "finished";
           "stopped": ended by SIGTERM/SIGINT with its state written;
           "failed": the flow blew up), run_id, snapshot_dir, wall_seconds,
           created
    /grid/{x, y}                        cell centres (m)
    /diagnostics/{step, time, dt, area, centroid_y, rise_velocity,
                  circularity, divergence}            one row per step (+ t = 0):
             the whole gas phase's quantities, however many bubbles
    /diagnostics attrs: gas_volume_change (relative, first row to last;
             NaN without gas), gas_volume_change_units ("1"), levelset_method
    /solver/{step, time, iterations, residual, converged, reason,
             setup_seconds, solve_seconds}            one row per pressure solve;
             attrs method, variant, preconditioner, deflation, rtol (the case's)
    /solver/residual_history, /solver/history_offsets  recursive residuals of
             solve k: residual_history[history_offsets[k]:history_offsets[k+1]]
    /solver/true_residual_checks        (checks, 3): step, iteration, residual
    /fields/{step, time}                one entry per snapshot
    /fields/{phi, rho, p}               (snapshots, ny, nx)       virtual
    /fields/u  (snapshots, ny, nx+1), /fields/v  (snapshots, ny+1, nx)
    /fields/{c, p_dynamic}              (snapshots, ny, nx)       virtual, where
             the snapshots hold them (CLSVOF; reduced gravity)
    /bubbles/{step, time, id, area, centroid_x, ...}  one row per tracked
             bubble per sample; /bubbles/events/{step, time, kind, id, other}
             (:mod:`.bubble_tables`)

Its snapshots ``<snapshot_dir>/step_<step>.h5`` hold ``phi, rho, p, u, v``,
a cell-centred ``velocity`` (for viewers), the bubble tracker's state
(``/bubble_tracker``, where the run tracks bubbles) and the attributes
``step``, ``time``.  A study's ``summary.h5`` holds ``/summary/<column>`` and the
attributes ``study`` (its study.yaml) and ``runs``.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "text", "SOLVER_SERIES", "SOLVER_DTYPES", "DIAGNOSTICS", "DIAGNOSTICS_3D", "SOLVER_ATTRS",
    "GAS_VOLUME_CHANGE", "LEVELSET_METHOD", "DYNAMIC_PRESSURE", "VOLUME_FRACTION",
    "flow_fields", "diagnostics_names", "field_shapes",
]

#: Root attributes.
VERSION, CASE, MODE, BACKEND, DEVICE = "bubbleflow_version", "case", "mode", "backend", "device"
PRECISION, FACE_DENSITY, CREATED = "precision", "face_density", "created"
RUN_STATUS, RUN_ID, SNAPSHOT_DIR, WALL_SECONDS = "run_status", "run_id", "snapshot_dir", "wall_seconds"
#: Groups.
GRID, FIELDS, SOLVER, DIAGNOSTICS_GROUP, SUMMARY = "grid", "fields", "solver", "diagnostics", "summary"
#: Attributes of datasets and groups.
UNITS_ATTR, LAYOUT_ATTR, COLUMNS_ATTR = "units", "layout", "columns"
#: Datasets under /solver besides the per-solve series.
HISTORY, HISTORY_OFFSETS, TRUE_CHECKS = "residual_history", "history_offsets", "true_residual_checks"
#: Cell-centred fields of a result; the fields of a flow snapshot.
CELL_FIELDS = ("phi", "rho", "p")
FLOW_FIELDS = ("phi", "rho", "p", "u", "v")
#: The face velocity components, in grid-axis order.
VELOCITY_COMPONENTS = ("u", "v", "w")
#: Attributes of a study's summary.h5.
STUDY, RUNS = "study", "runs"

SOLVER_SERIES = ("iterations", "residual", "converged", "reason", "setup_seconds", "solve_seconds")
#: Per-solve series of a flow index and their types (``reason`` is text).
SOLVER_DTYPES = {"step": np.int64, "time": np.float64, "iterations": np.int64,
                 "residual": np.float64, "converged": np.bool_, "setup_seconds": np.float64,
                 "solve_seconds": np.float64}
#: Diagnostics series of a flow index, one row per step.
DIAGNOSTICS = ("step", "time", "dt", "area", "centroid_y", "rise_velocity", "circularity",
               "divergence")
#: Those of a 3-D run (the benchmark of Adelsberger et al. 2014; z is up).
DIAGNOSTICS_3D = ("step", "time", "dt", "volume", "centroid_z", "rise_velocity", "sphericity",
                  "surface", "centroid_x", "centroid_y", "divergence")


def flow_fields(ndim):
    """The fields of a flow snapshot on an ``ndim``-D grid."""
    return CELL_FIELDS + VELOCITY_COMPONENTS[:ndim]


def diagnostics_names(ndim):
    """The diagnostics series of a flow index on an ``ndim``-D grid."""
    return DIAGNOSTICS if ndim == 2 else DIAGNOSTICS_3D


def field_shapes(grid):
    """Array shape of every flow field on ``grid``: cells, and the faces of
    each velocity component (one more along its own axis)."""
    shapes = {name: tuple(grid.shape) for name in CELL_FIELDS}
    for a, name in enumerate(VELOCITY_COMPONENTS[:grid.ndim]):
        shape = list(grid.shape)
        shape[grid.ndim - 1 - a] += 1
        shapes[name] = tuple(shape)
    return shapes


#: The dynamic pressure ``p - rho g.(x - x0)`` a flow with reduced gravity
#: solves for, stored in its snapshots beside the whole pressure ``p``.
DYNAMIC_PRESSURE = "p_dynamic"
#: The gas volume fraction of a CLSVOF flow (``levelset.method: clsvof``),
#: stored in its snapshots beside ``phi``; a restart reads it back.
VOLUME_FRACTION = "c"
#: The attributes of ``/solver`` describing the pressure solver (a flow
#: index has them but ``deflation_vectors``, which may change every step).
SOLVER_ATTRS = ("method", "variant", "preconditioner", "deflation", "deflation_vectors", "rtol")
#: Attributes of a flow index's ``/diagnostics``: the relative change of the
#: gas area (2-D) or volume (3-D) from the run's first row to its last, its
#: units, and the interface method (``levelset.method``) that gave it.
GAS_VOLUME_CHANGE, LEVELSET_METHOD = "gas_volume_change", "levelset_method"


def text(value):
    """An attribute or string dataset entry as ``str`` (bytes decoded; None stays None)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return text(value[()])
    return None if value is None else str(value)
