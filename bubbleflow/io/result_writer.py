"""The writers of bubbleflow's files: a pressure result, a flow run's snapshots
and index, a study's summary.

Every file is written whole through :func:`bubbleflow.io.atomic.atomic_h5` (a
temporary file renamed into place, the umask's permissions, flushed to
disk), under the names of :mod:`.layout`, every dataset labelled with its
units (:mod:`.result_units`) and the coordinates attached as dimension
scales (:mod:`.dimension_scales`).  :mod:`.flow_output` decides when a flow
run's files are written; this module only how.
"""
from __future__ import annotations

import os

import h5py
import numpy as np

from ..mesh.grid import face_sides
from .atomic import atomic_h5
from .bubble_tables import TRACKER, write_bubble_tables, write_tracker_state
from .compression import AUTO_COMPRESSION, Compression, write_field
from .dimension_scales import attach_dimension_scales
from .layout import (BACKEND, CASE, COLUMNS_ATTR, CREATED, DEVICE, DIAGNOSTICS_GROUP,
                     FACE_DENSITY, FIELDS, FLOW_FIELDS, GRID, HISTORY, HISTORY_OFFSETS,
                     LAYOUT_ATTR, MODE, PRECISION, RUN_ID, RUN_STATUS, RUNS, SNAPSHOT_DIR, SOLVER,
                     SOLVER_ATTRS, SOLVER_DTYPES, STUDY, SUMMARY, TRUE_CHECKS, UNITS_ATTR,
                     VELOCITY_COMPONENTS, VERSION, diagnostics_names, field_shapes)
from .result_header import created_stamp
from .result_units import SERIES_UNITS, UNITS

__all__ = ["write_pressure_result", "write_snapshot", "write_flow_index", "write_summary_h5"]


def _series(group, name, values, dtype=None):
    """A resizable 1-D dataset, so later writers can append one entry per solve."""
    values = np.asarray(values, dtype=dtype)
    return group.create_dataset(name, data=values, maxshape=(None,), chunks=True)


def _write_grid(fh, grid):
    g = fh.create_group(GRID)
    for axis, centres, n, length in zip("xyz", grid.centres, grid.cells, grid.lengths):
        g.create_dataset(axis, data=centres).attrs[UNITS_ATTR] = "m"
        g.attrs["n" + axis], g.attrs["l" + axis] = n, length


def write_pressure_result(path, *, case_yaml, version, backend, device, precision, face_density,
                          grid, phi, rho, p, record, mode="pressure", compression=None):
    """Write one pressure solve to ``path`` atomically, the fields (host
    arrays, or a GPU's: read in blocks as they are written) stored as
    ``compression`` says (a :class:`.compression.Compression`; default: a
    pressure case's ``auto``)."""
    compression = compression or Compression(AUTO_COMPRESSION["pressure"])
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
            ds = write_field(f, name, data, compression)
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


def write_snapshot(path, step, time, fields, compression=None):
    """One flow snapshot file, atomically: ``fields`` maps
    :data:`.layout.FLOW_FIELDS` to host arrays, stored as ``compression``
    says (a :class:`.compression.Compression`; default a flow's ``auto``:
    gzip level 1 where a field shrinks enough).

    Other entries of ``fields`` (grid-shaped) are written beside them, the
    same way (with ``units`` when :data:`.result_units.UNITS` knows the
    name); the entry
    :data:`.bubble_tables.TRACKER`, the bubble tracker's state (a dict of
    host arrays), becomes its group (:func:`.bubble_tables.write_tracker_state`).
    """
    compression = compression or Compression(AUTO_COMPRESSION["flow"])
    with atomic_h5(path) as fh:
        fh.attrs["step"] = step
        fh.attrs["time"] = time
        for key in list(FLOW_FIELDS) + [k for k in fields if k not in FLOW_FIELDS]:
            if key == TRACKER:
                write_tracker_state(fh, fields[key], fields["p"].ndim)
                continue
            data = np.asarray(fields[key], dtype=np.float64)
            ds = write_field(fh, key, data, compression)
            if key in UNITS:
                ds.attrs[UNITS_ATTR] = UNITS[key]
        # Cell-centred velocity (w = 0 in 2-D) for viewers, which have no face data.
        ndim = fields["p"].ndim
        vel = np.zeros(fields["p"].shape + (3,))
        for a, name in enumerate(VELOCITY_COMPONENTS[:ndim]):
            f = np.asarray(fields[name])
            lower, upper = face_sides(ndim, a)
            component = vel[..., a]
            np.add(f[upper], f[lower], out=component)
            component *= 0.5
        write_field(fh, "velocity", vel, compression).attrs[UNITS_ATTR] = UNITS["velocity"]


def write_flow_index(path, *, attrs, status, run_id, snapshot_dir, grid, diagnostics, solver,
                     history, checks, snapshots, bubbles=(), bubble_events=(), cell_fields=(),
                     solver_attrs=None, diagnostics_attrs=None):
    """A flow run's index, written anew and atomically.

    Parameters
    ----------
    attrs : dict
        Root attributes (:func:`.result_header.header_attrs`, ``created``, ``wall_seconds``).
    status, run_id : str
    snapshot_dir : str
        The snapshot folder relative to the index's folder.
    diagnostics : dict
        :data:`.layout.DIAGNOSTICS` name -> list, one entry per step.
    solver : dict
        :data:`.layout.SOLVER_DTYPES` name and ``reason`` -> list, one entry per solve.
    history : list of ndarray
        Recursive residuals of each solve.
    checks : list of (step, iteration, residual)
    snapshots : list of (step, time, file name in the snapshot folder)
    bubbles, bubble_events : lists of tuples
        The bubble table's and the events' rows
        (:func:`.bubble_tables.write_bubble_tables`).
    cell_fields : sequence of str
        Cell fields the snapshots hold besides :data:`.layout.FLOW_FIELDS`
        (:data:`.layout.VOLUME_FRACTION`, :data:`.layout.DYNAMIC_PRESSURE`): listed under
        ``/fields`` as well.
    solver_attrs : dict, optional
        Attributes of ``/solver`` (:data:`.layout.SOLVER_ATTRS`: the solver the case asks for).
    diagnostics_attrs : dict, optional
        Attributes of ``/diagnostics`` (:data:`.layout.GAS_VOLUME_CHANGE` and its
        units, :data:`.layout.LEVELSET_METHOD`).
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
    :data:`.result_units.SERIES_UNITS` as ``units`` (a name without one is a KeyError: the
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
