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

Layout of the index (in addition to the root attributes of ``mode:
pressure``: bubbleflow_version, case, mode, backend, device, precision,
face_density)::

    attrs: run_status ("running": in progress or killed; "finished";
           "stopped": ended by SIGTERM/SIGINT with its state written;
           "failed": the flow blew up), run_id, snapshot_dir, wall_seconds,
           created
    /grid/{x, y}                        cell centres (m)
    /diagnostics/{step, time, dt, area, centroid_y, rise_velocity,
                  circularity, divergence}            one row per step (+ t = 0)
    /solver/{step, time, iterations, residual, converged, reason,
             setup_seconds, solve_seconds}            one row per pressure solve
    /solver/residual_history, /solver/history_offsets  recursive residuals of
             solve k: residual_history[history_offsets[k]:history_offsets[k+1]]
    /solver/true_residual_checks        (checks, 3): step, iteration, residual
    /fields/{step, time}                one entry per snapshot
    /fields/{phi, rho, p}               (snapshots, ny, nx)       virtual
    /fields/u  (snapshots, ny, nx+1), /fields/v  (snapshots, ny+1, nx)
"""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import uuid

import h5py
import numpy as np

from .layout import UNITS, atomic_h5, attach_dimension_scales
from .xdmf import write_xdmf

__all__ = ["FlowWriter", "DIAGNOSTICS", "read_checkpoint", "snapshot_folder", "run_folder"]

DIAGNOSTICS = ("step", "time", "dt", "area", "centroid_y", "rise_velocity", "circularity",
               "divergence")
_SOLVER = {"step": np.int64, "time": np.float64, "iterations": np.int64, "residual": np.float64,
           "converged": np.bool_, "setup_seconds": np.float64, "solve_seconds": np.float64}


def snapshot_folder(path):
    """``OUTDIR/<name>.snapshots`` for the index ``OUTDIR/<name>.h5``."""
    stem, _ = os.path.splitext(os.fspath(path))
    return stem + ".snapshots"


def run_folder(path):
    """Absolute snapshot folder of the run whose index is ``path`` (its
    ``snapshot_dir`` attribute, ``<name>.snapshots/<run id>``)."""
    with h5py.File(path, "r") as fh:
        rel = _text(fh.attrs["snapshot_dir"])
    return os.path.join(os.path.dirname(os.path.abspath(path)), rel)


def _snapshot_name(step):
    return f"step_{step:09d}.h5"


def _new_run_id():
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:6]}"


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


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
        self.solver = {name: [] for name in list(_SOLVER) + ["reason"]}
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
        attrs.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
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
        series, snaps, old_attrs = _read_index(restart_path)
        last = snaps[-1][0]
        keep_d = int(np.searchsorted(np.asarray(series["diagnostics"]["step"]), last, side="right"))
        keep_s = int(np.searchsorted(np.asarray(series["solver"]["step"]), last, side="right"))
        for name in DIAGNOSTICS:
            series["diagnostics"][name] = series["diagnostics"][name][:keep_d]
        for name in series["solver"]:
            series["solver"][name] = series["solver"][name][:keep_s]
        series["history"] = series["history"][:keep_s]
        series["checks"] = [c for c in series["checks"] if c[0] <= last]
        run_id = _text(old_attrs["run_id"])
        merged = dict(old_attrs)
        merged.update(attrs)
        self = cls(path, merged, grid, run_id, series=series, snapshots=snaps)
        source = os.path.join(snapshot_folder(restart_path), run_id)
        os.makedirs(self.folder, exist_ok=True)
        if os.path.abspath(source) != os.path.abspath(self.folder):
            for _, _, name in snaps:
                _link_or_copy(os.path.join(source, name), os.path.join(self.folder, name))
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
        name = _snapshot_name(state.step)
        fields = {"phi": to_host(state.phi), "rho": to_host(rho), "p": to_host(state.p),
                  "u": to_host(state.u), "v": to_host(state.v)}
        os.makedirs(self.folder, exist_ok=True)
        with atomic_h5(os.path.join(self.folder, name)) as fh:
            fh.attrs["step"] = state.step
            fh.attrs["time"] = state.time
            for key, arr in fields.items():
                ds = fh.create_dataset(key, data=np.asarray(arr, dtype=np.float64),
                                       compression="gzip", compression_opts=1)
                ds.attrs["units"] = UNITS[key]
            u, v = fields["u"], fields["v"]
            # Cell-centred velocity (w = 0) for viewers, which have no face data.
            vel = np.zeros(fields["p"].shape + (3,))
            vel[..., 0] = 0.5 * (u[:, 1:] + u[:, :-1])
            vel[..., 1] = 0.5 * (v[1:, :] + v[:-1, :])
            fh.create_dataset("velocity", data=vel, compression="gzip",
                              compression_opts=1).attrs["units"] = UNITS["velocity"]
        self.snapshots.append((state.step, state.time, name))
        self.commit()

    def set_attrs(self, **attrs):
        self.attrs.update(attrs)

    def commit(self, status=None):
        """Write the index (and the XDMF sidecar) anew, atomically."""
        if status is not None:
            self.status = status
        g = self.grid
        with atomic_h5(self.path) as fh:
            for k, val in self.attrs.items():
                fh.attrs[k] = val
            fh.attrs["mode"] = "flow"
            fh.attrs["run_status"] = self.status
            fh.attrs["run_id"] = self.run_id
            fh.attrs["snapshot_dir"] = os.path.relpath(self.folder, os.path.dirname(os.path.abspath(self.path)))
            grp = fh.create_group("grid")
            grp.create_dataset("x", data=g.x).attrs["units"] = "m"
            grp.create_dataset("y", data=g.y).attrs["units"] = "m"
            grp.attrs["nx"], grp.attrs["ny"], grp.attrs["lx"], grp.attrs["ly"] = g.nx, g.ny, g.lx, g.ly
            d = fh.create_group("diagnostics")
            for name in DIAGNOSTICS:
                d.create_dataset(name, data=np.asarray(self.diag[name],
                                 dtype=np.int64 if name == "step" else np.float64))
            s = fh.create_group("solver")
            for name, dt in _SOLVER.items():
                s.create_dataset(name, data=np.asarray(self.solver[name], dtype=dt))
            s.create_dataset("reason", data=np.asarray(self.solver["reason"], dtype=object),
                             dtype=h5py.string_dtype())
            sizes = [h.size for h in self.history]
            s.create_dataset("residual_history",
                             data=np.concatenate(self.history) if self.history else np.zeros(0))
            s.create_dataset("history_offsets",
                             data=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64))
            ck = s.create_dataset("true_residual_checks",
                                  data=np.asarray(self.checks, dtype=np.float64).reshape(-1, 3))
            ck.attrs["columns"] = "step, iteration, relative true residual"
            f = fh.create_group("fields")
            f.create_dataset("step", data=np.asarray([sn[0] for sn in self.snapshots], dtype=np.int64))
            f.create_dataset("time", data=np.asarray([sn[1] for sn in self.snapshots], dtype=np.float64))
            ny, nx = g.ny, g.nx
            shapes = {"phi": (ny, nx), "rho": (ny, nx), "p": (ny, nx), "u": (ny, nx + 1),
                      "v": (ny + 1, nx)}
            rel = fh.attrs["snapshot_dir"]
            for key, shape in shapes.items():
                layout = h5py.VirtualLayout(shape=(len(self.snapshots),) + shape, dtype=np.float64)
                for k, (_, _, name) in enumerate(self.snapshots):
                    # Relative source paths resolve beside the index: the folder can move.
                    layout[k] = h5py.VirtualSource(os.path.join(rel, name), key, shape=shape)
                ds = f.create_virtual_dataset(key, layout, fillvalue=np.nan)
                ds.attrs["units"] = UNITS[key]
            attach_dimension_scales(fh)
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


def _link_or_copy(src, dst):
    if os.path.exists(dst):
        return
    tmp = dst + ".link.tmp"
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _read_index(path):
    """Series, snapshots and attributes of an index written by :class:`FlowWriter`."""
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in fh.attrs}
        if "run_id" not in attrs:
            raise ValueError("it was written by an older bubbleflow (no run_id); start a new run")
        f = fh["fields"]
        steps = f["step"][()]
        times = f["time"][()]
        if steps.shape[0] == 0:
            raise ValueError("it holds no snapshot")
        folder = os.path.join(os.path.dirname(os.path.abspath(path)), _text(attrs["snapshot_dir"]))
        snaps = [(int(st), float(t), _snapshot_name(int(st))) for st, t in zip(steps, times)]
        for _, _, name in snaps:
            if not os.path.isfile(os.path.join(folder, name)):
                raise ValueError(f"its snapshot {os.path.join(folder, name)} is missing")
        d = fh["diagnostics"]
        s = fh["solver"]
        offsets = s["history_offsets"][()]
        hist = s["residual_history"][()]
        series = {
            "diagnostics": {name: d[name][()].tolist() for name in DIAGNOSTICS},
            "solver": {name: s[name][()].tolist() for name in _SOLVER},
            "history": [hist[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)],
            "checks": [tuple(row) for row in s["true_residual_checks"][()].tolist()],
        }
        series["solver"]["reason"] = [_text(r) for r in s["reason"][()]]
    # Python ints/bools back to their types (tolist gives int, float, bool).
    attrs = {k: v for k, v in attrs.items() if k not in ("run_status", "mode", "snapshot_dir")}
    return series, snaps, attrs


def read_checkpoint(path):
    """The last snapshot of a flow run: dict of host arrays, the clock and the case."""
    with h5py.File(path, "r") as fh:
        if "run_id" not in fh.attrs:
            raise ValueError("it was written by an older bubbleflow (no run_id); start a new run")
        steps, times = fh["fields/step"][()], fh["fields/time"][()]
        if steps.shape[0] == 0:
            raise ValueError("it holds no snapshot")
        case = _text(fh.attrs["case"])
    snapshot = os.path.join(run_folder(path), _snapshot_name(int(steps[-1])))
    with h5py.File(snapshot, "r") as fh:
        out = {key: fh[key][()] for key in ("phi", "u", "v", "p")}
    out["step"] = int(steps[-1])
    out["time"] = float(times[-1])
    out["case"] = case
    return out
