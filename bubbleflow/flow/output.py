"""Incremental HDF5 output of a flow run, which doubles as its checkpoint.

The file ``OUTDIR/<name>.h5`` is created atomically with its header and
empty, resizable series; then every step appends one row of diagnostics and
one pressure-solve record, and every ``output.interval`` of simulated time
one field snapshot (which is also the restart checkpoint: ``phi, u, v, p``
and the clock).  The file is flushed after every snapshot (and every few
seconds of wall time), so a run killed midway leaves a readable file with
every completed snapshot.

Layout (in addition to the root attributes of ``mode: pressure``)::

    /diagnostics/{step, time, dt, area, centroid_y, rise_velocity, circularity, divergence}
    /solver/{step, time, iterations, residual, converged, reason,
             setup_seconds, solve_seconds, residual_history, history_offsets}
    /fields/{step, time}              one entry per snapshot
    /fields/{phi, rho, p}             (snapshots, ny, nx)
    /fields/u  (snapshots, ny, nx+1), /fields/v  (snapshots, ny+1, nx)
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time as _time

import h5py
import numpy as np

from ..output import atomic_h5

__all__ = ["FlowWriter", "DIAGNOSTICS", "read_checkpoint"]

DIAGNOSTICS = ("step", "time", "dt", "area", "centroid_y", "rise_velocity", "circularity",
               "divergence")
_SOLVER = {"step": np.int64, "time": np.float64, "iterations": np.int64, "residual": np.float64,
           "converged": np.bool_, "setup_seconds": np.float64, "solve_seconds": np.float64}


def _grow(ds, row):
    n = ds.shape[0]
    ds.resize(n + 1, axis=0)
    ds[n] = row


class FlowWriter:
    """Appends steps and snapshots to ``path``.

    Use :meth:`create` for a new run and :meth:`resume` to continue one from
    its last snapshot (rows after that snapshot are dropped).
    """

    flush_seconds = 10.0

    def __init__(self, path, fh):
        self.path = path
        self.fh = fh
        self._last_flush = _time.monotonic()

    # -------------------------------------------------------------- opening
    @classmethod
    def create(cls, path, attrs, grid):
        with atomic_h5(path) as fh:
            for k, val in attrs.items():
                fh.attrs[k] = val
            g = fh.create_group("grid")
            g.create_dataset("x", data=grid.x).attrs["units"] = "m"
            g.create_dataset("y", data=grid.y).attrs["units"] = "m"
            g.attrs["nx"], g.attrs["ny"], g.attrs["lx"], g.attrs["ly"] = grid.nx, grid.ny, grid.lx, grid.ly
            d = fh.create_group("diagnostics")
            for name in DIAGNOSTICS:
                d.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(1024,),
                                 dtype=np.int64 if name == "step" else np.float64)
            s = fh.create_group("solver")
            for name, dt in _SOLVER.items():
                s.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(1024,), dtype=dt)
            s.create_dataset("reason", shape=(0,), maxshape=(None,), chunks=(1024,),
                             dtype=h5py.string_dtype())
            s.create_dataset("residual_history", shape=(0,), maxshape=(None,), chunks=(8192,),
                             dtype=np.float64)
            s.create_dataset("history_offsets", data=np.zeros(1, np.int64), maxshape=(None,),
                             chunks=(1024,))
            f = fh.create_group("fields")
            f.create_dataset("step", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(64,))
            f.create_dataset("time", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(64,))
            ny, nx = grid.ny, grid.nx
            for name, shape, units in (("phi", (ny, nx), "m"), ("rho", (ny, nx), "kg/m^3"),
                                       ("p", (ny, nx), "Pa"), ("u", (ny, nx + 1), "m/s"),
                                       ("v", (ny + 1, nx), "m/s")):
                ds = f.create_dataset(name, shape=(0,) + shape, maxshape=(None,) + shape,
                                      chunks=(1,) + shape, dtype=np.float64,
                                      compression="gzip", compression_opts=1)
                ds.attrs["units"] = units
        return cls(path, h5py.File(path, "r+"))

    @classmethod
    def resume(cls, path, restart_path):
        """Continue in ``path`` from the last snapshot of ``restart_path``."""
        if os.path.abspath(restart_path) != os.path.abspath(path):
            folder = os.path.dirname(os.path.abspath(path))
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                       dir=folder)
            os.close(fd)
            try:
                shutil.copyfile(restart_path, tmp)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        fh = h5py.File(path, "r+")
        last = int(fh["fields/step"][-1])
        # Drop what came after the checkpoint: it will be computed again.
        d = fh["diagnostics"]
        keep = int(np.searchsorted(d["step"][()], last, side="right"))
        for name in DIAGNOSTICS:
            d[name].resize(keep, axis=0)
        s = fh["solver"]
        keep = int(np.searchsorted(s["step"][()], last, side="right"))
        for name in list(_SOLVER) + ["reason"]:
            s[name].resize(keep, axis=0)
        s["history_offsets"].resize(keep + 1, axis=0)
        s["residual_history"].resize(int(s["history_offsets"][keep]), axis=0)
        return cls(path, fh)

    # -------------------------------------------------------------- writing
    def write_step(self, report, initial=False):
        """One row of diagnostics (and, after a step, its pressure solve)."""
        d = self.fh["diagnostics"]
        diag = dict(report.diagnostics, step=report.step, time=report.time, dt=report.dt,
                    divergence=report.divergence)
        for name in DIAGNOSTICS:
            _grow(d[name], diag[name])
        if not initial:
            rec = report.record
            s = self.fh["solver"]
            row = {"step": report.step, "time": report.time, "iterations": rec.iterations,
                   "residual": rec.residual, "converged": rec.converged,
                   "setup_seconds": rec.setup_seconds + report.setup_seconds,
                   "solve_seconds": rec.solve_seconds}
            for name, val in row.items():
                _grow(s[name], val)
            _grow(s["reason"], rec.reason)
            hist = np.asarray(rec.residual_history, dtype=np.float64)
            rh = s["residual_history"]
            n = rh.shape[0]
            rh.resize(n + hist.size, axis=0)
            rh[n:] = hist
            _grow(s["history_offsets"], n + hist.size)
        if _time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush()

    def write_snapshot(self, state, rho, to_host):
        f = self.fh["fields"]
        _grow(f["step"], state.step)
        _grow(f["time"], state.time)
        for name, arr in (("phi", state.phi), ("rho", rho), ("p", state.p), ("u", state.u),
                          ("v", state.v)):
            _grow(f[name], to_host(arr))
        self.flush()

    def set_attrs(self, **attrs):
        for k, val in attrs.items():
            self.fh.attrs[k] = val

    def flush(self):
        self.fh.flush()
        self._last_flush = _time.monotonic()

    def close(self):
        if self.fh:
            self.fh.flush()
            self.fh.close()
            self.fh = None


def read_checkpoint(path):
    """The last snapshot of a flow file: dict of host arrays and the clock."""
    with h5py.File(path, "r") as fh:
        f = fh["fields"]
        if f["step"].shape[0] == 0:
            raise ValueError("it holds no snapshot")
        out = {name: f[name][-1] for name in ("phi", "u", "v", "p")}
        out["step"] = int(f["step"][-1])
        out["time"] = float(f["time"][-1])
        out["case"] = fh.attrs["case"]
    return out
