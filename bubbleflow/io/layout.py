"""The HDF5 layout of bubbleflow's files, written and read here only.

Every group, dataset and attribute name of the files is a constant of this
module (those of the bubble tables and the tracker's state of
:mod:`.bubble_tables`, which it calls); the apps and the flow writer call
its writers and readers.  Writing
goes through :mod:`bubbleflow.io.atomic` (a temporary file renamed into
place, the umask's permissions, flushed to disk).

A pressure result ``OUTDIR/<case name>.h5`` (see README, "Output")::

    /                    attrs: bubbleflow_version, case (resolved YAML), mode,
                                backend, device, precision, face_density, created
    /grid/x, /grid/y     cell centres (m); HDF5 dimension scales "x", "y" of
                         the fields (see attach_dimension_scales)
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
dimensionless: :data:`UNITS`, :data:`SERIES_UNITS`).

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

import datetime as _dt
import os
import re

import h5py
import numpy as np
import yaml

from ..case.yaml_reader import load_yaml
from .atomic import atomic_h5
from .bubble_tables import (TRACKER, read_bubble_rows, read_bubble_tables, read_tracker_state,
                            write_bubble_tables, write_tracker_state)

__all__ = [
    "attach_dimension_scales", "write_pressure_result", "header_attrs",
    "write_snapshot", "write_flow_index", "write_summary_h5",
    "created_stamp", "read_attrs", "read_run", "read_index", "read_checkpoint", "run_folder",
    "snapshots_root", "checked_run_id", "StoredNameError", "RUN_ID_PATTERN",
    "snapshot_name", "text", "SOLVER_SERIES", "SOLVER_DTYPES", "DIAGNOSTICS", "UNITS",
    "SERIES_UNITS", "SOLVER_ATTRS", "GAS_VOLUME_CHANGE", "LEVELSET_METHOD",
    "DIAGNOSTICS_3D", "flow_fields", "diagnostics_names", "field_shapes",
    "read_checkpoint_tracker",
]

# ------------------------------------------------------------------ names
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
#: The attributes of ``/solver`` describing the pressure solver (a flow
#: index has them but ``deflation_vectors``, which may change every step).
SOLVER_ATTRS = ("method", "variant", "preconditioner", "deflation", "deflation_vectors", "rtol")
#: Attributes of a flow index's ``/diagnostics``: the relative change of the
#: gas area (2-D) or volume (3-D) from the run's first row to its last, its
#: units, and the interface method (``levelset.method``) that gave it.
GAS_VOLUME_CHANGE, LEVELSET_METHOD = "gas_volume_change", "levelset_method"

_OLDER = "it was written by an older bubbleflow (no run_id); start a new run"


def text(value):
    """An attribute or string dataset entry as ``str`` (bytes decoded; None stays None)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return text(value[()])
    return None if value is None else str(value)


def snapshot_name(step):
    """File name of the snapshot of ``step`` in a run's snapshot folder."""
    return f"step_{step:09d}.h5"


def created_stamp():
    """The ``created`` attribute of a new file: now, UTC, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------ writing
def _series(group, name, values, dtype=None):
    """A resizable 1-D dataset, so later writers can append one entry per solve."""
    values = np.asarray(values, dtype=dtype)
    return group.create_dataset(name, data=values, maxshape=(None,), chunks=True)


def header_attrs(*, version, case_yaml, backend, device, precision, face_density):
    """The root attributes every result carries (a flow writer adds its own)."""
    return {VERSION: version, CASE: case_yaml, BACKEND: backend, DEVICE: device,
            PRECISION: precision, FACE_DENSITY: face_density}


def _write_grid(fh, grid):
    g = fh.create_group(GRID)
    for axis, centres, n, length in zip("xyz", grid.centres, grid.cells, grid.lengths):
        g.create_dataset(axis, data=centres).attrs[UNITS_ATTR] = "m"
        g.attrs["n" + axis], g.attrs["l" + axis] = n, length


def write_pressure_result(path, *, case_yaml, version, backend, device, precision, face_density,
                          grid, phi, rho, p, record, mode="pressure"):
    """Write one pressure solve (host arrays) to ``path`` atomically."""
    with atomic_h5(path) as fh:
        fh.attrs[VERSION] = version
        fh.attrs[CASE] = case_yaml
        fh.attrs[MODE] = mode
        fh.attrs[BACKEND] = backend
        fh.attrs[DEVICE] = device
        fh.attrs[PRECISION] = precision
        fh.attrs[FACE_DENSITY] = face_density
        fh.attrs[CREATED] = created_stamp()
        _write_grid(fh, grid)
        f = fh.create_group(FIELDS)
        for name, data in (("phi", phi), ("rho", rho), ("p", p)):
            ds = f.create_dataset(name, data=np.asarray(data), compression="gzip", compression_opts=4)
            ds.attrs[UNITS_ATTR] = UNITS[name]
            ds.attrs[LAYOUT_ATTR] = ("(ny, nx), row j is y, column i is x" if grid.ndim == 2
                                     else "(nz, ny, nx), x fastest")
        s = fh.create_group(SOLVER)
        for key in SOLVER_ATTRS:
            s.attrs[key] = getattr(record, key)
        _series(s, "iterations", [record.iterations], np.int64)
        _series(s, "residual", [record.residual], np.float64)
        _series(s, "converged", [record.converged], np.bool_)
        s.create_dataset("reason", data=[record.reason], maxshape=(None,),
                         dtype=h5py.string_dtype(), chunks=True)
        _series(s, "setup_seconds", [record.setup_seconds], np.float64)
        _series(s, "solve_seconds", [record.solve_seconds], np.float64)
        s.create_dataset(HISTORY, data=np.asarray(record.residual_history, dtype=np.float64))
        checks = np.asarray(record.true_residual_checks, dtype=np.float64).reshape(-1, 2)
        s.create_dataset(TRUE_CHECKS, data=checks).attrs[COLUMNS_ATTR] = \
            "iteration, relative true residual"
        _label_series(s)
        attach_dimension_scales(fh)


def write_snapshot(path, step, time, fields):
    """One flow snapshot file, atomically: ``fields`` maps :data:`FLOW_FIELDS` to host arrays.

    Other entries of ``fields`` (grid-shaped) are written beside them, the
    same way (with ``units`` when :data:`UNITS` knows the name); the entry
    :data:`.bubble_tables.TRACKER`, the bubble tracker's state (a dict of
    host arrays), becomes its group (:func:`.bubble_tables.write_tracker_state`).
    """
    with atomic_h5(path) as fh:
        fh.attrs["step"] = step
        fh.attrs["time"] = time
        for key in list(FLOW_FIELDS) + [k for k in fields if k not in FLOW_FIELDS]:
            if key == TRACKER:
                write_tracker_state(fh, fields[key], fields["p"].ndim)
                continue
            ds = fh.create_dataset(key, data=np.asarray(fields[key], dtype=np.float64),
                                   compression="gzip", compression_opts=1)
            if key in UNITS:
                ds.attrs[UNITS_ATTR] = UNITS[key]
        # Cell-centred velocity (w = 0 in 2-D) for viewers, which have no face data.
        ndim = fields["p"].ndim
        vel = np.zeros(fields["p"].shape + (3,))
        for a, name in enumerate(VELOCITY_COMPONENTS[:ndim]):
            f, k = np.asarray(fields[name]), ndim - 1 - a
            vel[..., a] = 0.5 * (np.take(f, range(1, f.shape[k]), axis=k)
                                 + np.take(f, range(f.shape[k] - 1), axis=k))
        fh.create_dataset("velocity", data=vel, compression="gzip",
                          compression_opts=1).attrs[UNITS_ATTR] = UNITS["velocity"]


def write_flow_index(path, *, attrs, status, run_id, snapshot_dir, grid, diagnostics, solver,
                     history, checks, snapshots, bubbles=(), bubble_events=(), cell_fields=(),
                     solver_attrs=None, diagnostics_attrs=None):
    """A flow run's index, written anew and atomically.

    Parameters
    ----------
    attrs : dict
        Root attributes (:func:`header_attrs`, ``created``, ``wall_seconds``).
    status, run_id : str
    snapshot_dir : str
        The snapshot folder relative to the index's folder.
    diagnostics : dict
        :data:`DIAGNOSTICS` name -> list, one entry per step.
    solver : dict
        :data:`SOLVER_DTYPES` name and ``reason`` -> list, one entry per solve.
    history : list of ndarray
        Recursive residuals of each solve.
    checks : list of (step, iteration, residual)
    snapshots : list of (step, time, file name in the snapshot folder)
    bubbles, bubble_events : lists of tuples
        The bubble table's and the events' rows
        (:func:`.bubble_tables.write_bubble_tables`).
    cell_fields : sequence of str
        Cell fields the snapshots hold besides :data:`FLOW_FIELDS`
        (:data:`VOLUME_FRACTION`, :data:`DYNAMIC_PRESSURE`): listed under
        ``/fields`` as well.
    solver_attrs : dict, optional
        Attributes of ``/solver`` (:data:`SOLVER_ATTRS`: the solver the case asks for).
    diagnostics_attrs : dict, optional
        Attributes of ``/diagnostics`` (:data:`GAS_VOLUME_CHANGE` and its
        units, :data:`LEVELSET_METHOD`).
    """
    with atomic_h5(path) as fh:
        for k, val in attrs.items():
            fh.attrs[k] = val
        fh.attrs[MODE] = "flow"
        fh.attrs[RUN_STATUS] = status
        fh.attrs[RUN_ID] = run_id
        fh.attrs[SNAPSHOT_DIR] = snapshot_dir
        _write_grid(fh, grid)
        d = fh.create_group(DIAGNOSTICS_GROUP)
        for name in diagnostics_names(grid.ndim):
            d.create_dataset(name, data=np.asarray(diagnostics[name],
                             dtype=np.int64 if name == "step" else np.float64))
        d.attrs.update(diagnostics_attrs or {})
        _label_series(d)
        s = fh.create_group(SOLVER)
        s.attrs.update(solver_attrs or {})
        _write_solver_series(s, solver, history, checks)
        _label_series(s)
        _write_snapshot_fields(fh.create_group(FIELDS), grid, snapshot_dir, snapshots,
                               cell_fields)
        write_bubble_tables(fh, grid.ndim, bubbles, bubble_events)
        attach_dimension_scales(fh)


def _write_solver_series(s, solver, history, checks):
    for name, dt in SOLVER_DTYPES.items():
        s.create_dataset(name, data=np.asarray(solver[name], dtype=dt))
    s.create_dataset("reason", data=np.asarray(solver["reason"], dtype=object),
                     dtype=h5py.string_dtype())
    sizes = [h.size for h in history]
    s.create_dataset(HISTORY, data=np.concatenate(history) if history else np.zeros(0))
    s.create_dataset(HISTORY_OFFSETS,
                     data=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64))
    ck = s.create_dataset(TRUE_CHECKS, data=np.asarray(checks, dtype=np.float64).reshape(-1, 3))
    ck.attrs[COLUMNS_ATTR] = "step, iteration, relative true residual"


def _label_series(group):
    """Every dataset of ``group`` (``/diagnostics``, ``/solver``) gets its
    :data:`SERIES_UNITS` as ``units`` (a name without one is a KeyError: the
    table must know every series written)."""
    for name, ds in group.items():
        ds.attrs[UNITS_ATTR] = SERIES_UNITS[name]


def _write_snapshot_fields(f, grid, rel, snapshots, cell_fields=()):
    """``/fields``: the snapshot clock and virtual datasets reading the snapshot files."""
    f.create_dataset("step", data=np.asarray([sn[0] for sn in snapshots], dtype=np.int64))
    f.create_dataset("time", data=np.asarray([sn[1] for sn in snapshots], dtype=np.float64))
    shapes = field_shapes(grid)
    shapes.update({name: tuple(grid.shape) for name in cell_fields})
    for key, shape in shapes.items():
        layout = h5py.VirtualLayout(shape=(len(snapshots),) + shape, dtype=np.float64)
        for k, (_, _, name) in enumerate(snapshots):
            # Relative source paths resolve beside the index: the folder can move.
            layout[k] = h5py.VirtualSource(os.path.join(rel, name), key, shape=shape)
        ds = f.create_virtual_dataset(key, layout, fillvalue=np.nan)
        ds.attrs[UNITS_ATTR] = UNITS[key]


def write_summary_h5(path, study_text, runs, columns, data):
    """A study's ``summary.h5``: ``data`` maps each of ``columns`` to ``runs`` values,
    an array or a list of str (stored as variable-length text)."""
    with atomic_h5(path) as fh:
        fh.attrs[STUDY] = study_text
        fh.attrs[RUNS] = runs
        g = fh.create_group(SUMMARY)
        g.attrs[COLUMNS_ATTR] = list(columns)
        for c in columns:
            values = data[c]
            if isinstance(values, list):
                values = np.asarray(values, dtype=h5py.string_dtype())
            g.create_dataset(c, data=values)


def _scale(group, name, data, label, units):
    """``group[name]`` as a dimension scale called ``label`` (created if missing)."""
    ds = group[name] if name in group else group.create_dataset(name, data=data)
    ds.attrs[UNITS_ATTR] = units
    if not ds.is_scale:
        ds.make_scale(label)
    return ds


def _attach(ds, dim, scale, label):
    if not h5py.h5ds.is_attached(ds.id, scale.id, dim):
        ds.dims[dim].attach_scale(scale)
    ds.dims[dim].label = label


def attach_dimension_scales(fh):
    """Make the coordinates of a bubbleflow file HDF5 dimension scales, with units.

    ``/grid/x`` and ``/grid/y`` (cell centres) become the scales "x" and "y";
    ``/grid/x_faces`` (``nx + 1`` values ``0 .. lx``) and ``/grid/y_faces``
    (``ny + 1``) are created when a face-centred field needs them; a 1-D
    ``/fields/time`` (one entry per snapshot; flow runs) becomes the scale
    "time", and ``/fields/step`` a second scale of that dimension.  Every
    dataset under ``/fields`` of shape ``(..., ny, nx)`` (``p``, ``rho``,
    ``phi``), ``(..., ny, nx + 1)`` (``u``) or ``(..., ny + 1, nx)`` (``v``)
    gets its last two dimensions attached to the matching y and x scales
    and, when it is 3-D with one row per snapshot, its first to "time".
    Datasets named in :data:`UNITS` get a ``units`` attribute if they have
    none.  Works on virtual datasets too (only attributes of the file
    ``fh`` are written).  Calling it again changes nothing.

    Parameters
    ----------
    fh : h5py.File
        Open for writing, with ``/grid/x``, ``/grid/y`` (attributes ``lx``,
        ``ly`` optional: without them the extent is ``x[0] + x[-1]``).
    """
    grid = fh[GRID]
    axes = [a for a in "xyz" if a in grid]               # x first; arrays are reversed
    counts = {a: grid[a].shape[0] for a in axes}
    scales = {a: _scale(grid, a, None, a, "m") for a in axes}

    def face_scale(axis):
        name = axis + "_faces"
        if name not in scales:
            c = grid[axis][()]
            key = "l" + axis
            length = float(grid.attrs[key]) if key in grid.attrs else float(c[0] + c[-1])
            scales[name] = _scale(grid, name, np.linspace(0.0, length, counts[axis] + 1), name, "m")
        return scales[name]

    fields = fh.get(FIELDS)
    if fields is None:
        return
    time_scales = []
    for name in ("time", "step"):
        ds = fields.get(name)
        if isinstance(ds, h5py.Dataset) and ds.ndim == 1:
            time_scales.append(_scale(fields, name, None, name, UNITS[name]))
    nsnap = time_scales[0].shape[0] if time_scales else None
    nd = len(axes)
    cell = tuple(counts[a] for a in reversed(axes))
    # The trailing shape of a cell field and of each component's faces -> the
    # axis (if any) whose face scale it takes.
    kinds = {cell: None}
    for a in axes:
        shape = list(cell)
        shape[nd - 1 - axes.index(a)] += 1
        kinds.setdefault(tuple(shape), a)

    found = []
    # Collect first: the loop below creates datasets and attributes.
    fields.visititems(lambda _, obj: found.append(obj) if isinstance(obj, h5py.Dataset) else None)
    for ds in found:
        if ds.is_scale:
            continue
        base = ds.name.rsplit("/", 1)[-1]
        if base in UNITS and UNITS_ATTR not in ds.attrs:
            ds.attrs[UNITS_ATTR] = UNITS[base]
        if ds.ndim not in (nd, nd + 1) or tuple(ds.shape[-nd:]) not in kinds:
            continue
        faces = kinds[tuple(ds.shape[-nd:])]
        for k, a in enumerate(reversed(axes)):
            dim = ds.ndim - nd + k
            if a == faces:
                _attach(ds, dim, face_scale(a), a + "_faces")
            else:
                _attach(ds, dim, scales[a], a)
        if ds.ndim == nd + 1 and ds.shape[0] == nsnap:
            for sc in time_scales:
                _attach(ds, 0, sc, "time")


# ------------------------------------------------------------------ reading
def read_attrs(path):
    """The root attributes of ``path`` (a dict; raises what h5py raises)."""
    with h5py.File(path, "r") as fh:
        return {k: fh.attrs[k] for k in fh.attrs}


class StoredNameError(ValueError):
    """A name stored in a flow index that is not the one its writer makes.

    The run id names the snapshot folder, so an index whose ``run_id`` is
    not of :data:`RUN_ID_PATTERN`, or whose ``snapshot_dir`` is not the
    folder of that id beside it, is refused: no path is ever built from it.

    Attributes
    ----------
    key : str
        The attribute (``run_id`` or ``snapshot_dir``).
    value : str
        What it holds.
    problem, expected : str
        What is wrong and what would be accepted, as :class:`CaseError` says them.
    """

    def __init__(self, key, value, problem, expected):
        self.key, self.value, self.problem, self.expected = key, value, problem, expected
        super().__init__(f"its {key} {problem}; expected {expected}")


#: A run id as the flow writer makes it: the UTC second it started and six hex digits.
RUN_ID_PATTERN = re.compile(r"[0-9]{8}T[0-9]{6}-[0-9a-f]{6}")
_RUN_ID_SHAPE = "an id such as 20261128T085031-1a2b3c (the flow writer's)"


def snapshots_root(path):
    """``OUTDIR/<name>.snapshots``, the folder of every run's snapshots beside the
    index ``OUTDIR/<name>.h5``."""
    stem, _ = os.path.splitext(os.fspath(path))
    return stem + ".snapshots"


def checked_run_id(value):
    """``value`` (an attribute) as text when it is a run id the flow writer makes.

    Raises
    ------
    StoredNameError
        Anything else (``..``, a path, an empty or non-text value).
    """
    run_id = text(value)
    if run_id is None or not RUN_ID_PATTERN.fullmatch(run_id):
        raise StoredNameError(RUN_ID, run_id, f"{run_id!r} is not a run id", _RUN_ID_SHAPE)
    return run_id


def _stored_run_folder(path, attrs):
    """The snapshot folder of the index ``path`` (root ``attrs``), derived from its
    checked run id; its stored ``snapshot_dir`` must name the same folder."""
    if RUN_ID not in attrs:
        raise ValueError(_OLDER)
    folder = os.path.join(snapshots_root(os.path.abspath(path)), checked_run_id(attrs[RUN_ID]))
    expected = os.path.relpath(folder, os.path.dirname(os.path.abspath(path)))
    stored = text(attrs.get(SNAPSHOT_DIR))
    if stored != expected:
        raise StoredNameError(SNAPSHOT_DIR, stored, f"{stored!r} is not the folder of its run id",
                              f"{expected!r} (the index's name and run id)")
    return folder


def run_folder(path):
    """Absolute snapshot folder of the run whose index is ``path``:
    ``<name>.snapshots/<run id>`` beside it.

    Raises
    ------
    StoredNameError
        Its run id is not one the writer makes, or its ``snapshot_dir``
        names another folder.
    ValueError
        An index of an older bubbleflow (no run id).
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in (RUN_ID, SNAPSHOT_DIR) if k in fh.attrs}
    return _stored_run_folder(path, attrs)


def _snapshot_clock(fh):
    """``(steps, times)`` of an index's snapshots; ValueError for an older or empty one."""
    if RUN_ID not in fh.attrs:
        raise ValueError(_OLDER)
    f = fh[FIELDS]
    steps, times = f["step"][()], f["time"][()]
    if steps.shape[0] == 0:
        raise ValueError("it holds no snapshot")
    return steps, times


def read_index(path):
    """``(series, snapshots, attrs)`` of a flow index, as :func:`write_flow_index` takes them.

    ``series``: ``diagnostics``, ``solver`` (dicts of lists), ``history``
    (one array per solve), ``checks``, ``bubbles`` and ``bubble_events``
    (lists of row tuples); ``snapshots``: ``(step, time, file
    name)``, every file checked to exist; ``attrs``: the root attributes but
    ``run_status``, ``mode`` and ``snapshot_dir``.

    Raises
    ------
    StoredNameError
        Its run id or snapshot folder is not what its writer makes.
    ValueError
        An index of an older bubbleflow, without snapshots, or with one missing.
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in fh.attrs}
        steps, times = _snapshot_clock(fh)
        folder = _stored_run_folder(path, attrs)
        snaps = [(int(st), float(t), snapshot_name(int(st))) for st, t in zip(steps, times)]
        for _, _, name in snaps:
            if not os.path.isfile(os.path.join(folder, name)):
                raise ValueError(f"its snapshot {os.path.join(folder, name)} is missing")
        d = fh[DIAGNOSTICS_GROUP]
        s = fh[SOLVER]
        offsets = s[HISTORY_OFFSETS][()]
        hist = s[HISTORY][()]
        ndim = 3 if "z" in fh[GRID] else 2
        names = diagnostics_names(ndim)
        series = {
            "diagnostics": {name: d[name][()].tolist() for name in names},
            "solver": {name: s[name][()].tolist() for name in SOLVER_DTYPES},
            "history": [hist[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)],
            "checks": [tuple(row) for row in s[TRUE_CHECKS][()].tolist()],
        }
        series["bubbles"], series["bubble_events"] = read_bubble_rows(fh, ndim)
        series["solver"]["reason"] = [text(r) for r in s["reason"][()]]
    attrs = {k: v for k, v in attrs.items() if k not in (RUN_STATUS, MODE, SNAPSHOT_DIR)}
    return series, snaps, attrs


def read_checkpoint_tracker(path):
    """The bubble tracker's state stored with the last snapshot of the flow
    index ``path`` (a dict of host arrays), or None where that snapshot
    holds none.

    Raises
    ------
    StoredNameError, ValueError
        As :func:`read_checkpoint`.
    """
    with h5py.File(path, "r") as fh:
        steps, _ = _snapshot_clock(fh)
        folder = _stored_run_folder(path, fh.attrs)
    with h5py.File(os.path.join(folder, snapshot_name(int(steps[-1]))), "r") as fh:
        return read_tracker_state(fh)


def read_checkpoint(path):
    """The last snapshot of a flow run: dict of host arrays, the clock and the case.

    Raises
    ------
    StoredNameError
        Its run id or snapshot folder is not what its writer makes.
    ValueError
        An index of an older bubbleflow or without snapshots.
    """
    with h5py.File(path, "r") as fh:
        steps, times = _snapshot_clock(fh)
        case = text(fh.attrs[CASE])
        folder = _stored_run_folder(path, fh.attrs)
    snapshot = os.path.join(folder, snapshot_name(int(steps[-1])))
    with h5py.File(snapshot, "r") as fh:
        out = {key: fh[key][()] for key in ("phi", "u", "v", "w", "p", DYNAMIC_PRESSURE,
                                            VOLUME_FRACTION) if key in fh}
    out["step"] = int(steps[-1])
    out["time"] = float(times[-1])
    out["case"] = case
    return out


def read_run(path, fields=True):
    """What a run file (``mode`` pressure or flow) holds, as host arrays; absent parts None.

    Tolerant: nothing is required, so that each caller states what it needs
    and says so in its own words.

    Parameters
    ----------
    path : str or os.PathLike
    fields : bool
        Also read the fields (a flow run: its last snapshot, and the level
        set of its first).

    Returns
    -------
    dict
        ``attrs`` (root attributes), ``groups`` (top-level names), ``case``
        (the resolved case, parsed; ``{}`` when absent or unreadable),
        ``mode`` (the attribute, else ``flow`` when there are diagnostics,
        else ``pressure``), ``x``, ``y`` (cell centres), ``grid_attrs``;
        ``field_shapes`` (``p``, ``rho``, ``phi`` present under /fields),
        ``fields`` (see :func:`_read_fields`); ``solver_attrs``, ``solver``
        (the per-solve series present, typed as :data:`SOLVER_DTYPES`, and
        ``reason``; None without /solver), ``histories`` (``(solve, array)``
        of recursive residuals), ``checks`` (pressure: ``(k, 2)`` iteration,
        residual), ``step_checks`` (flow: ``(k, 3)`` step, iteration,
        residual); ``diagnostics`` (every series, float64; None without the
        group); ``bubbles``, ``bubble_events`` (the bubble tables, column
        name -> array: :func:`.bubble_tables.read_bubble_tables`; empty
        dicts without them).
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in fh.attrs}
        mode = text(attrs.get(MODE)) or ("flow" if DIAGNOSTICS_GROUP in fh else "pressure")
        grid = fh.get(GRID)
        run = {"attrs": attrs, "groups": set(fh.keys()), "case": _case(attrs), "mode": mode,
               "x": _array(fh, f"{GRID}/x"), "y": _array(fh, f"{GRID}/y"),
               "z": _array(fh, f"{GRID}/z") if grid is not None and "z" in grid else None,
               "grid_attrs": dict(grid.attrs) if grid is not None else {}}
        f = fh.get(FIELDS)
        run["field_shapes"] = {n: f[n].shape for n in CELL_FIELDS if f is not None and n in f}
        ndim = 2 if run["z"] is None else 3
        run["fields"] = _read_fields(f, mode, ndim) if fields else None
        run.update(_read_solver(fh.get(SOLVER), mode))
        d = fh.get(DIAGNOSTICS_GROUP)
        run["diagnostics"] = (None if d is None else
                              {n: np.asarray(d[n][()], dtype=np.float64).ravel() for n in d})
        run["bubbles"], run["bubble_events"] = read_bubble_tables(fh)
    return run


def _case(attrs):
    try:
        case = load_yaml(text(attrs.get(CASE)) or "", CASE) or {}
    except yaml.YAMLError:
        case = {}
    return case if isinstance(case, dict) else {}


def _array(group, name, dtype=np.float64):
    if group is None or name not in group:
        return None
    return np.asarray(group[name][()], dtype=dtype).ravel()


def _read_fields(f, mode, ndim=2):
    """``p``, ``rho``, ``phi`` as ``ndim``-D float64 arrays, or None (some absent, no snapshot).

    A flow run gives its last snapshot, with ``phi_first`` (the first
    snapshot's level set), ``time_first``, ``time``, ``step``,
    ``snapshots`` (how many) and, where the snapshots hold it, the volume
    fraction ``c``; None also when its fields are not ``(snapshots, [nz,]
    ny, nx)``.
    """
    if f is None or any(n not in f for n in CELL_FIELDS):
        return None
    if mode != "flow":
        return {name: np.asarray(f[name][()], dtype=np.float64) for name in CELL_FIELDS}
    if f["p"].ndim != ndim + 1 or f["p"].shape[0] == 0:
        return None
    k = f["p"].shape[0] - 1
    out = {name: np.asarray(f[name][k], dtype=np.float64) for name in CELL_FIELDS}
    # The first snapshot's interface (t = 0 unless restarted elsewhere).
    out["phi_first"] = np.asarray(f["phi"][0], dtype=np.float64) if k > 0 else out["phi"]
    has_time = "time" in f and f["time"].shape[0]
    out["time_first"] = float(f["time"][0]) if has_time else None
    out["time"] = float(f["time"][k]) if "time" in f and f["time"].shape[0] > k else None
    out["step"] = int(f["step"][k]) if "step" in f and f["step"].shape[0] > k else None
    out["snapshots"] = int(f["p"].shape[0])
    if VOLUME_FRACTION in f and f[VOLUME_FRACTION].shape == f["p"].shape:
        out[VOLUME_FRACTION] = np.asarray(f[VOLUME_FRACTION][k], dtype=np.float64)
    return out


def _read_solver(s, mode):
    """``solver_attrs``, ``solver``, ``histories``, ``checks``, ``step_checks`` of /solver."""
    out = {"solver_attrs": {}, "solver": None, "histories": [], "checks": None,
           "step_checks": None}
    if s is None:
        return out
    out["solver_attrs"] = {k: s.attrs[k] for k in s.attrs}
    series = {name: _array(s, name, dt) for name, dt in SOLVER_DTYPES.items()}
    series["reason"] = [text(r) for r in s["reason"][()]] if "reason" in s else None
    out["solver"] = series
    if TRUE_CHECKS in s:
        raw = np.asarray(s[TRUE_CHECKS][()], dtype=np.float64)
        if raw.ndim == 2 and raw.shape[1] == 3:
            out["step_checks"] = raw
        elif raw.size % 2 == 0 and mode == "pressure":
            out["checks"] = raw.reshape(-1, 2)
    hist = _array(s, HISTORY)
    offsets = _array(s, HISTORY_OFFSETS, np.int64)
    its = series["iterations"]
    if hist is not None and hist.size:
        if offsets is not None and offsets.size >= 2:
            n = min(offsets.size - 1, (len(its) if its is not None else 0) or offsets.size - 1)
            for i in range(n):
                a, b = int(offsets[i]), int(offsets[i + 1])
                if b > a:
                    out["histories"].append((i, hist[a:b]))
        else:
            out["histories"].append((0, hist))
    return out
