"""Crash-safe output of a flow run; the files double as its checkpoint.

A flow run ``<name>`` in ``OUTDIR`` writes three things:

* ``OUTDIR/<name>.snapshots/<run id>/step_<step>.h5``: one small HDF5 file per
  snapshot (``phi, rho, p, u, v``, a cell-centred ``velocity`` for
  viewers and the bubble tracker's state), each written once, atomically
  (a temporary file renamed into place).  A snapshot is also the restart
  checkpoint.
* ``OUTDIR/<name>.h5``: the index.  Header, grid, every per-step series,
  the bubble tables (one row per bubble per sample, and the events) and,
  as HDF5 virtual datasets, ``/fields/{phi, rho, p, u, v}`` of shape
  ``(snapshots, ...)`` that read through to the snapshot files.  It is
  never modified in place: after each snapshot (and when the run ends) it is
  written anew to a temporary file and renamed over the old one.  Its
  ``/diagnostics`` states how much gas the run lost or gained
  (:func:`gas_volume_change`), so that a file never hides a drift.
* ``OUTDIR/<name>.xdmf``: the same snapshots for ParaView / VisIt / VTK.

Why this shape: HDF5 does not survive a process killed while it is writing
a file opened for update (its metadata cache may be half on disk), and a
file held open for writing cannot be opened by a reader.  Here every file
on disk is complete at every instant, so a run killed at any moment
(SIGKILL included, also during a snapshot) leaves the index of its last
checkpoint, from which ``--restart`` continues and reproduces the
uninterrupted run bit for bit; and a running simulation can be opened
(h5py, ParaView) at any time.  The index holds only rows up to its last
snapshot while the run is going, so a restart only appends to it.

Snapshots are written in the background, so that they never hold up the
time step: :meth:`FlowWriter.write_snapshot` copies the fields (on a GPU it
only starts an asynchronous copy into pinned host memory, see
:meth:`bubbleflow.compute.backend.Backend.to_host_async`) and takes a
consistent view of the rows and snapshots so far, and a background worker
(:mod:`bubbleflow.compute.workers`) then writes the snapshot file, commits the index of that view and rewrites
the XDMF sidecar, in that order, as a synchronous write would.  At most one
snapshot is in flight: the next one (and :meth:`~FlowWriter.commit`,
:meth:`~FlowWriter.close`) first waits for it, so memory stays bounded and
an error of the writer (a full disk, a permission) is raised in the calling
thread there, as :class:`SnapshotWriteError`.  Every file on disk is still
complete at every instant, whatever thread is writing when the process dies.

The layout of the index and of the snapshot files: :mod:`bubbleflow.io.layout`; their
writers: :mod:`bubbleflow.io.result_writer`.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import stat
import uuid

import h5py
import numpy as np

from ..case.config import CaseError
from ..compute import workers
from ..compute.backend import Backend, HostCopy
from . import layout, result_writer, run_paths
from .atomic import WriteFailure, link_or_copy
from .bubble_tables import TRACKER
from .checkpoint_reader import read_checkpoint, read_index
from .layout import DIAGNOSTICS
from .result_header import created_stamp
from .run_paths import run_folder
from .xdmf import write_xdmf

__all__ = ["FlowWriter", "SnapshotWriteError", "DIAGNOSTICS", "read_checkpoint",
           "snapshot_folder", "run_folder", "check_snapshot_folders", "gas_volume_change",
           "GAS_VOLUME_TOLERANCE"]

#: A relative change of the gas volume beyond which a run warns: CLSVOF
#: holds its volume to round-off, the level set alone does not.
GAS_VOLUME_TOLERANCE = 1e-6


def gas_volume_change(diagnostics):
    """Relative change of the gas area (2-D) or volume (3-D) from the first
    diagnostics row to the last: ``(last - first) / first``.

    The first row is the run's initial state, also after restarts (a
    restart keeps the rows before its checkpoint).  A CLSVOF run's size is
    its volume fraction's, a level-set run's the smoothed Heaviside's.

    Parameters
    ----------
    diagnostics : mapping
        Series by name (``area`` or ``volume`` among them), one entry per row.

    Returns
    -------
    float
        Dimensionless; NaN without rows, without gas in the first row, or
        where a size is not finite.
    """
    size = diagnostics.get("area")
    size = diagnostics.get("volume") if size is None else size
    if size is None or len(size) == 0:
        return float("nan")
    first, last = float(size[0]), float(size[-1])
    if not first > 0.0:
        return float("nan")
    return (last - first) / first


def snapshot_folder(path):
    """``OUTDIR/<name>.snapshots`` for the index ``OUTDIR/<name>.h5``."""
    return run_paths.snapshots_root(path)


def check_snapshot_folders(path, run_id=None):
    """``<name>.snapshots`` beside the index ``path`` and its ``run_id`` folder, where
    they exist, must be folders and not links: snapshots written through a
    link someone placed there would land outside the output folder.

    Raises
    ------
    CaseError
        One of them is a symbolic link or not a folder.
    """
    root = snapshot_folder(path)
    for folder in (root, os.path.join(root, run_id) if run_id else None):
        try:
            mode = os.lstat(folder).st_mode if folder else None
        except FileNotFoundError:
            return                  # nothing there yet: created as a folder
        if mode is None or stat.S_ISDIR(mode):       # (lstat: a link is no folder)
            continue
        outdir = os.path.dirname(os.path.abspath(path))
        problem = "is a symbolic link" if stat.S_ISLNK(mode) else "is not a folder"
        raise CaseError(outdir, None, f"{os.path.relpath(folder, outdir)} {problem}; bubbleflow "
                        "writes snapshots only into folders of its own",
                        "a folder there or nothing (remove it)")


class SnapshotWriteError(WriteFailure, RuntimeError):
    """Writing a snapshot, the index or its sidecar failed (the cause is chained).

    Its message is one line naming what was written, where, and why it failed.
    """


def _new_run_id():
    """A new run's id, of :data:`run_paths.RUN_ID_PATTERN`: the UTC second and six hex digits."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:6]}"



class _Job:
    """One snapshot to write: its clock, file, fields under way, and the index to commit."""

    def __init__(self, step, time, name, names, copy, view, tracker=None):
        self.step, self.time, self.name = step, time, name
        self.names = names          # field names, in the order of the copy's arrays
        self.copy = copy            # HostCopy (None: a commit without a snapshot)
        self.tracker = tracker      # the bubble tracker's state (host arrays) or None
        self.view = view            # what the index lists (FlowWriter._view)
        self.written = False        # the snapshot file is in place
        self.stage = ""             # what is being written (for the error message)


class FlowWriter:
    """Series kept in memory, snapshots written once each, the index rewritten.

    Use :meth:`create` for a new run and :meth:`resume` to continue one from
    the last snapshot of an index file.  :meth:`write_step` appends a row
    (in memory); :meth:`write_snapshot` copies the fields and has the
    background writer write them and then commit the index; :meth:`close`
    waits for it and commits the index with the run's final status.

    ``background`` (an argument of the constructor, :meth:`create` and
    :meth:`resume`; the class attribute is the default): False writes each
    snapshot, its index and sidecar before :meth:`write_snapshot` returns,
    in the calling thread (for comparisons).

    ``solver_attrs`` (the attributes of ``/solver``: :data:`layout.SOLVER_ATTRS`)
    and ``levelset_method`` (named beside the gas volume change on
    ``/diagnostics``) describe the run; keywords of the constructor,
    :meth:`create` and :meth:`resume`.
    """

    #: Write snapshots on a background worker by default.
    background = True

    def __init__(self, path, attrs, grid, run_id, series=None, snapshots=None, background=None,
                 solver_attrs=None, levelset_method=None, compression=None):
        self.path = os.fspath(path)
        self.attrs = dict(attrs)
        self.grid = grid
        # /solver's description and the interface method named beside the gas volume.
        self.solver_attrs = dict(solver_attrs or {})
        self.levelset_method = levelset_method
        # How the snapshots' fields are stored (None: io.compression's default for flows).
        self.compression = compression
        # The id names the snapshot folder: only the writer's own shape of id.
        self.run_id = run_paths.checked_run_id(run_id)
        self.folder = os.path.join(snapshot_folder(self.path), self.run_id)
        # Append-only while the writer lives: a view of the index is their lengths.
        self.diag = {name: [] for name in layout.diagnostics_names(grid.ndim)}
        self.solver = {name: [] for name in list(layout.SOLVER_DTYPES) + ["reason"]}
        self.history = []           # one float64 array per solve
        self.checks = []            # (step, iteration, residual)
        # The bubble tables' rows (flow.bubble_tracking: bubble_columns, EVENT_COLUMNS).
        self.bubbles, self.bubble_events = [], []
        self.snapshots = []         # (step, time, file name in self.folder)
        if series is not None:
            for name in self.diag:
                self.diag[name] = list(series["diagnostics"][name])
            for name in self.solver:
                self.solver[name] = list(series["solver"][name])
            self.history = list(series["history"])
            self.checks = list(series["checks"])
            self.bubbles = list(series.get("bubbles", []))
            self.bubble_events = list(series.get("bubble_events", []))
        if snapshots is not None:
            self.snapshots = list(snapshots)
        self.status = "running"
        self.closed = False
        if background is not None:
            self.background = bool(background)
        self._pending = None        # (worker job, snapshot job) of the snapshot in flight
        self._copy = None           # the last HostCopy: its buffers are reused

    # -------------------------------------------------------------- opening
    @classmethod
    def create(cls, path, attrs, grid, background=None, **described):
        """A new run and its snapshot folder.  The index appears with the first
        snapshot: an index without one could not be restarted.  ``described``:
        ``solver_attrs``, ``levelset_method``, ``compression`` (see the class)."""
        run_id = _new_run_id()
        attrs = dict(attrs)
        attrs.setdefault(layout.CREATED, created_stamp())
        self = cls(path, attrs, grid, run_id, background=background, **described)
        check_snapshot_folders(self.path, self.run_id)
        os.makedirs(self.folder, exist_ok=True)
        return self

    @classmethod
    def resume(cls, path, restart_path, attrs, grid, background=None, **described):
        """Continue in ``path`` from the last snapshot of the index ``restart_path``.

        Rows after that snapshot (a run that failed between snapshots leaves
        some) are dropped: the continued run computes them again; those
        before it stay, so the gas volume change is still counted from the
        run's first state.  When
        ``path`` is another file, the snapshots up to the checkpoint are
        linked (or copied) into its own folder and ``restart_path`` is only
        read.

        Raises
        ------
        run_paths.StoredNameError
            The run id or snapshot folder stored in ``restart_path`` is not
            what the writer makes (nothing is created).
        CaseError
            This run's snapshot folder is a link or not a folder.
        """
        series, snaps, old_attrs = read_index(restart_path)
        last = snaps[-1][0]
        keep_d = int(np.searchsorted(np.asarray(series["diagnostics"]["step"]), last, side="right"))
        keep_s = int(np.searchsorted(np.asarray(series["solver"]["step"]), last, side="right"))
        for name in series["diagnostics"]:
            series["diagnostics"][name] = series["diagnostics"][name][:keep_d]
        for name in series["solver"]:
            series["solver"][name] = series["solver"][name][:keep_s]
        series["history"] = series["history"][:keep_s]
        series["checks"] = [c for c in series["checks"] if c[0] <= last]
        for table in ("bubbles", "bubble_events"):
            series[table] = [r for r in series.get(table, []) if r[0] <= last]
        run_id = layout.text(old_attrs[layout.RUN_ID])
        merged = dict(old_attrs)
        merged.update(attrs)
        self = cls(path, merged, grid, run_id, series=series, snapshots=snaps,
                   background=background, **described)
        source = os.path.join(snapshot_folder(restart_path), self.run_id)
        check_snapshot_folders(self.path, self.run_id)
        os.makedirs(self.folder, exist_ok=True)
        if os.path.abspath(source) != os.path.abspath(self.folder):
            for _, _, name in snaps:
                link_or_copy(os.path.join(source, name), os.path.join(self.folder, name))
        else:
            # Leftovers of a run killed while writing a snapshot.
            for name in os.listdir(self.folder):
                if name.startswith(".") and name.endswith(".tmp"):
                    with contextlib.suppress(IsADirectoryError, PermissionError):
                        os.unlink(os.path.join(self.folder, name))
        self.commit()
        return self

    # -------------------------------------------------------------- writing
    def write_step(self, report, initial=False):
        """One row of diagnostics (and, after a step, its pressure solve)."""
        diag = dict(report.diagnostics, step=report.step, time=report.time, dt=report.dt,
                    divergence=report.divergence)
        for name in self.diag:
            self.diag[name].append(diag[name])
        if initial:
            return
        rec = report.record
        row = {"step": report.step, "time": report.time, "iterations": rec.iterations,
               "residual": rec.residual, "converged": rec.converged,
               "setup_seconds": rec.setup_seconds,
               "solve_seconds": rec.solve_seconds, "reason": rec.reason}
        for name, val in row.items():
            self.solver[name].append(val)
        self.history.append(np.asarray(rec.residual_history, dtype=np.float64))
        for it, res in rec.true_residual_checks:
            self.checks.append((report.step, it, res))

    def write_bubbles(self, rows, events):
        """Rows of the bubble table and of its events (tuples in
        :func:`~bubbleflow.flow.bubble_tracking.bubble_columns` and
        :data:`~bubbleflow.flow.bubble_tracking.EVENT_COLUMNS` order, as
        :meth:`~bubbleflow.flow.bubble_tracking.BubbleTracker.drain` gives
        them), written with the next index."""
        self.bubbles.extend(rows)
        self.bubble_events.extend(events)

    @property
    def gas_volume_change(self):
        """:func:`gas_volume_change` of every row so far (what the index will state)."""
        return gas_volume_change(self.diag)

    @property
    def last_snapshot_step(self):
        """Step of the last snapshot written or being written (None before the first)."""
        return self.snapshots[-1][0] if self.snapshots else None

    def write_snapshot(self, state, rho, to_host, extra=None, tracker=None):
        """The fields of ``state`` to their own file, then the index that lists it.

        Returns once the fields are copied (on a GPU: once their copy is
        queued); the background writer then writes the snapshot file, the
        index (the rows and snapshots up to this one) and the XDMF sidecar,
        in that order.  The previous snapshot's write is waited for first.

        Parameters
        ----------
        state : FlowState
            ``phi, u, v, p`` (device or host arrays), ``step``, ``time``.
        rho : array
            Cell density.
        to_host : callable
            A backend's ``to_host``: that backend's ``to_host_async`` copies
            the fields.  Any other function is applied to each field here.
        extra : dict, optional
            More fields, name -> grid-shaped array ``(ny, nx)``, ``(ny, nx+1)``
            or ``(ny+1, nx)`` (device or host), written into the snapshot file
            beside the usual ones (the index does not list them).
        tracker : dict, optional
            The bubble tracker's state after the samples up to this step
            (:meth:`~bubbleflow.flow.bubble_tracking.BubbleTracker.state`,
            host arrays, not copied): stored in the snapshot, where a
            restart reads it back.

        Raises
        ------
        SnapshotWriteError
            The previous snapshot's write failed.
        ValueError
            An ``extra`` field with a name of the file's own or a shape off the grid.
        """
        self.wait()
        extra = dict(extra or {})
        _check_extra(extra, self.grid)
        components = layout.VELOCITY_COMPONENTS[:self.grid.ndim]
        names = list(layout.CELL_FIELDS) + list(components) + list(extra)
        arrays = ([state.phi, rho, state.p] + [getattr(state, c) for c in components]
                  + list(extra.values()))
        self._copy = _start_copy(to_host, arrays, self._copy)
        name = run_paths.snapshot_name(state.step)
        self.snapshots.append((state.step, state.time, name))
        job = _Job(state.step, state.time, name, names, self._copy, self._view(), tracker)
        if not self.background:
            self._run(job)
            return
        # A process that ends (a second Ctrl-C) first finishes the file in flight.
        self._pending = (workers.submit(self._write, job, name="bubbleflow-writer",
                                        wait_at_exit=True), job)

    def wait(self, raise_error=True):
        """Wait until the snapshot in flight (if any) is written and committed.

        Its error is raised here as :class:`SnapshotWriteError` (or dropped
        with ``raise_error=False``, when the run is ending on another error);
        a snapshot whose file was not written is dropped from the list.
        """
        if self._pending is None:
            return
        future, job = self._pending
        try:
            future.result()
        except Exception as exc:          # noqa: BLE001 - reported in this thread
            self._pending = None
            err = self._failed(job, exc)
            if raise_error:
                raise err from exc
        self._pending = None

    def set_attrs(self, **attrs):
        self.attrs.update(attrs)

    def commit(self, status=None):
        """Write the index (and the XDMF sidecar) anew, atomically, with every row
        and snapshot so far; the snapshot in flight is waited for first."""
        self.wait()
        if status is not None:
            self.status = status
        self._run(_Job(None, None, None, (), None, self._view()))

    def close(self, status="finished"):
        """Wait for the writer, then commit the index with the run's final status.

        Where the commit fails, :class:`SnapshotWriteError` is raised and a
        later call may try again, with another status.
        """
        if self.closed:
            return
        self.commit(status)
        self.closed = True

    # -------------------------------------------------------------- the writer
    def _view(self):
        """The index as it stands now: lengths of the append-only rows, copies of the rest."""
        return {"attrs": dict(self.attrs), "status": self.status,
                "snapshots": list(self.snapshots),
                "diagnostics": {k: len(v) for k, v in self.diag.items()},
                "solver": {k: len(v) for k, v in self.solver.items()},
                "history": len(self.history), "checks": len(self.checks),
                "bubbles": len(self.bubbles), "bubble_events": len(self.bubble_events)}

    def _run(self, job):
        """Write ``job`` in this thread; its error as :class:`SnapshotWriteError`."""
        try:
            self._write(job)
        except Exception as exc:          # noqa: BLE001
            raise self._failed(job, exc) from exc

    def _write(self, job):
        """The snapshot file (if any), then the index of ``job.view``, then the sidecar."""
        if job.copy is not None:
            path = os.path.join(self.folder, job.name)
            job.stage = f"the snapshot file {path}"
            fields = dict(zip(job.names, job.copy.wait()))
            if job.tracker is not None:
                fields[TRACKER] = job.tracker
            os.makedirs(self.folder, exist_ok=True)
            result_writer.write_snapshot(path, job.step, job.time, fields, self.compression)
            job.written = True
        v = job.view
        rel = os.path.relpath(self.folder, os.path.dirname(os.path.abspath(self.path)))
        optional = _optional_fields(self.folder, v["snapshots"])
        # Slices of the append-only lists: the rows as they were at the view.
        job.stage = f"the index {self.path}"
        diagnostics = {k: self.diag[k][:n] for k, n in v["diagnostics"].items()}
        result_writer.write_flow_index(
            self.path, attrs=v["attrs"], status=v["status"], run_id=self.run_id,
            snapshot_dir=rel, grid=self.grid, diagnostics=diagnostics,
            solver={k: self.solver[k][:n] for k, n in v["solver"].items()},
            history=self.history[:v["history"]], checks=self.checks[:v["checks"]],
            snapshots=v["snapshots"], bubbles=self.bubbles[:v["bubbles"]],
            bubble_events=self.bubble_events[:v["bubble_events"]],
            cell_fields=optional, solver_attrs=self.solver_attrs,
            diagnostics_attrs=self._conservation_attrs(diagnostics))
        job.stage = f"the XDMF sidecar {os.path.splitext(self.path)[0]}.xdmf"
        _write_sidecar(self.path, self.folder, self.grid, v["snapshots"], optional)

    def _conservation_attrs(self, diagnostics):
        """``/diagnostics``' attributes: the gas volume change of these rows,
        its units and the interface method (where the run named it)."""
        out = {layout.GAS_VOLUME_CHANGE: gas_volume_change(diagnostics),
               layout.GAS_VOLUME_CHANGE + "_" + layout.UNITS_ATTR: "1"}
        if self.levelset_method is not None:
            out[layout.LEVELSET_METHOD] = self.levelset_method
        return out

    def _failed(self, job, exc):
        """The error of ``job`` as one line; a snapshot file not written leaves the list."""
        entry = (job.step, job.time, job.name)
        if job.copy is not None and not job.written and entry in self.snapshots:
            self.snapshots.remove(entry)
        what = f" (snapshot of step {job.step}, t = {job.time:.6g})" if job.copy is not None else ""
        if isinstance(exc, OSError) and exc.strerror:
            reason = exc.strerror
        else:
            reason = f"{type(exc).__name__}: {exc}"
        return SnapshotWriteError(" ".join(f"cannot write {job.stage}{what}: {reason}".split()))


def _start_copy(to_host, arrays, reuse):
    """Copy ``arrays`` to host memory: a backend's asynchronous copy, else ``to_host`` here."""
    backend = getattr(to_host, "__self__", None)
    if isinstance(backend, Backend):
        return backend.to_host_async(arrays, reuse=reuse)
    return HostCopy([np.array(to_host(a)) for a in arrays])


def _check_extra(extra, grid):
    """``extra`` fields must not shadow the file's own datasets and must be grid-shaped."""
    shapes = set(layout.field_shapes(grid).values())
    own = layout.flow_fields(grid.ndim) + ("velocity", TRACKER)
    for name, arr in extra.items():
        if name in own or not isinstance(name, str) \
                or not name or "/" in name or name.startswith("."):
            raise ValueError(f"extra snapshot field {name!r}: expected a new dataset name "
                             f"(not one of {', '.join(own)})")
        if tuple(getattr(arr, "shape", ())) not in shapes:
            raise ValueError(f"extra snapshot field {name!r} has shape {getattr(arr, 'shape', None)}"
                             f"; expected one of {sorted(shapes)}")


#: Cell fields a run's snapshots hold besides the usual ones (a CLSVOF run's
#: volume fraction, a reduced-gravity run's dynamic pressure): the index and
#: the sidecar list those its first snapshot has (every snapshot of a run has
#: the same).
_OPTIONAL_CELL_FIELDS = (layout.VOLUME_FRACTION, layout.DYNAMIC_PRESSURE)


def _optional_fields(folder, snapshots):
    """The :data:`_OPTIONAL_CELL_FIELDS` the first of ``snapshots`` holds."""
    if not snapshots:
        return []
    with h5py.File(os.path.join(folder, snapshots[0][2]), "r") as first:
        return [name for name in _OPTIONAL_CELL_FIELDS if name in first]


def _write_sidecar(path, folder, grid, snapshots, optional=()):
    """``<name>.xdmf`` beside the index ``path``, listing ``snapshots`` and
    the ``optional`` cell fields."""
    stem, _ = os.path.splitext(path)
    base = os.path.dirname(os.path.abspath(path))
    rel = os.path.relpath(folder, base)
    snaps = [(t, os.path.join(rel, name), "/") for _, t, name in snapshots]
    write_xdmf(stem + ".xdmf", grid, snaps, ["p", "rho", "phi", "velocity", *optional])
