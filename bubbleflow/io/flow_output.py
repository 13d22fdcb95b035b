"""Crash-safe output of a flow run; the files double as its checkpoint.

A flow run ``<name>`` in ``OUTDIR`` writes three things:

* ``OUTDIR/<name>.snapshots/<run id>/step_<step>.h5``: one small HDF5 file per
  snapshot (``phi, rho, p, u, v`` and a cell-centred ``velocity`` for
  viewers), each written once, atomically (a temporary file renamed into
  place).  A snapshot is also the restart checkpoint.
* ``OUTDIR/<name>.h5``: the index.  Header, grid, every per-step series and,
  as HDF5 virtual datasets, ``/fields/{phi, rho, p, u, v}`` of shape
  ``(snapshots, ...)`` that read through to the snapshot files.  It is
  never modified in place: after each snapshot (and when the run ends) it is
  written anew to a temporary file and renamed over the old one.
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

The layout of the index and of the snapshot files: :mod:`bubbleflow.io.layout`.
"""
from __future__ import annotations

import datetime as _dt
import os
import uuid

import numpy as np

from . import layout
from .atomic import link_or_copy
from .layout import DIAGNOSTICS, read_checkpoint, run_folder
from .xdmf import write_xdmf

__all__ = ["FlowWriter", "DIAGNOSTICS", "read_checkpoint", "snapshot_folder", "run_folder"]


def snapshot_folder(path):
    """``OUTDIR/<name>.snapshots`` for the index ``OUTDIR/<name>.h5``."""
    stem, _ = os.path.splitext(os.fspath(path))
    return stem + ".snapshots"


def _new_run_id():
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:6]}"


class FlowWriter:
    """Series kept in memory, snapshots written once each, the index rewritten.

    Use :meth:`create` for a new run and :meth:`resume` to continue one from
    the last snapshot of an index file.  :meth:`write_step` appends a row
    (in memory), :meth:`write_snapshot` writes the fields and then commits
    the index; :meth:`close` commits it with the run's final status.
    """

    def __init__(self, path, attrs, grid, run_id, series=None, snapshots=None):
        self.path = os.fspath(path)
        self.attrs = dict(attrs)
        self.grid = grid
        self.run_id = run_id
        self.folder = os.path.join(snapshot_folder(self.path), run_id)
        self.diag = {name: [] for name in DIAGNOSTICS}
        self.solver = {name: [] for name in list(layout.SOLVER_DTYPES) + ["reason"]}
        self.history = []           # one float64 array per solve
        self.checks = []            # (step, iteration, residual)
        self.snapshots = []         # (step, time, file name in self.folder)
        if series is not None:
            for name in DIAGNOSTICS:
                self.diag[name] = list(series["diagnostics"][name])
            for name in self.solver:
                self.solver[name] = list(series["solver"][name])
            self.history = list(series["history"])
            self.checks = list(series["checks"])
        if snapshots is not None:
            self.snapshots = list(snapshots)
        self.status = "running"
        self.closed = False

    # -------------------------------------------------------------- opening
    @classmethod
    def create(cls, path, attrs, grid):
        """A new run and its snapshot folder.  The index appears with the first
        snapshot: an index without one could not be restarted."""
        run_id = _new_run_id()
        attrs = dict(attrs)
        attrs.setdefault(layout.CREATED, layout.created_stamp())
        self = cls(path, attrs, grid, run_id)
        os.makedirs(self.folder, exist_ok=True)
        return self

    @classmethod
    def resume(cls, path, restart_path, attrs, grid):
        """Continue in ``path`` from the last snapshot of the index ``restart_path``.

        Rows after that snapshot (a run that failed between snapshots leaves
        some) are dropped: the continued run computes them again.  When
        ``path`` is another file, the snapshots up to the checkpoint are
        linked (or copied) into its own folder and ``restart_path`` is only
        read.
        """
        series, snaps, old_attrs = layout.read_index(restart_path)
        last = snaps[-1][0]
        keep_d = int(np.searchsorted(np.asarray(series["diagnostics"]["step"]), last, side="right"))
        keep_s = int(np.searchsorted(np.asarray(series["solver"]["step"]), last, side="right"))
        for name in DIAGNOSTICS:
            series["diagnostics"][name] = series["diagnostics"][name][:keep_d]
        for name in series["solver"]:
            series["solver"][name] = series["solver"][name][:keep_s]
        series["history"] = series["history"][:keep_s]
        series["checks"] = [c for c in series["checks"] if c[0] <= last]
        run_id = layout.text(old_attrs[layout.RUN_ID])
        merged = dict(old_attrs)
        merged.update(attrs)
        self = cls(path, merged, grid, run_id, series=series, snapshots=snaps)
        source = os.path.join(snapshot_folder(restart_path), run_id)
        os.makedirs(self.folder, exist_ok=True)
        if os.path.abspath(source) != os.path.abspath(self.folder):
            for _, _, name in snaps:
                link_or_copy(os.path.join(source, name), os.path.join(self.folder, name))
        else:
            # Leftovers of a run killed while writing a snapshot.
            for name in os.listdir(self.folder):
                if name.startswith(".") and name.endswith(".tmp"):
                    os.unlink(os.path.join(self.folder, name))
        self.commit()
        return self

    # -------------------------------------------------------------- writing
    def write_step(self, report, initial=False):
        """One row of diagnostics (and, after a step, its pressure solve)."""
        diag = dict(report.diagnostics, step=report.step, time=report.time, dt=report.dt,
                    divergence=report.divergence)
        for name in DIAGNOSTICS:
            self.diag[name].append(diag[name])
        if initial:
            return
        rec = report.record
        row = {"step": report.step, "time": report.time, "iterations": rec.iterations,
               "residual": rec.residual, "converged": rec.converged,
               "setup_seconds": rec.setup_seconds + report.setup_seconds,
               "solve_seconds": rec.solve_seconds, "reason": rec.reason}
        for name, val in row.items():
            self.solver[name].append(val)
        self.history.append(np.asarray(rec.residual_history, dtype=np.float64))
        for it, res in rec.true_residual_checks:
            self.checks.append((report.step, it, res))

    @property
    def last_snapshot_step(self):
        return self.snapshots[-1][0] if self.snapshots else None

    def write_snapshot(self, state, rho, to_host):
        """The fields of ``state`` to their own file, then the index."""
        name = layout.snapshot_name(state.step)
        fields = {"phi": to_host(state.phi), "rho": to_host(rho), "p": to_host(state.p),
                  "u": to_host(state.u), "v": to_host(state.v)}
        os.makedirs(self.folder, exist_ok=True)
        layout.write_snapshot(os.path.join(self.folder, name), state.step, state.time, fields)
        self.snapshots.append((state.step, state.time, name))
        self.commit()

    def set_attrs(self, **attrs):
        self.attrs.update(attrs)

    def commit(self, status=None):
        """Write the index (and the XDMF sidecar) anew, atomically."""
        if status is not None:
            self.status = status
        rel = os.path.relpath(self.folder, os.path.dirname(os.path.abspath(self.path)))
        layout.write_flow_index(self.path, attrs=self.attrs, status=self.status,
                                run_id=self.run_id, snapshot_dir=rel, grid=self.grid,
                                diagnostics=self.diag, solver=self.solver, history=self.history,
                                checks=self.checks, snapshots=self.snapshots)
        _write_sidecar(self)

    def close(self, status="finished"):
        """Commit the index with the run's final status."""
        if not self.closed:
            self.commit(status)
            self.closed = True


def _write_sidecar(writer):
    """``<name>.xdmf`` beside the index, listing every snapshot."""
    stem, _ = os.path.splitext(writer.path)
    base = os.path.dirname(os.path.abspath(writer.path))
    rel = os.path.relpath(writer.folder, base)
    snaps = [(t, os.path.join(rel, name), "/") for _, t, name in writer.snapshots]
    write_xdmf(stem + ".xdmf", writer.grid, snaps, ("p", "rho", "phi", "velocity"))
