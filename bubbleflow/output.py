"""HDF5 output, written atomically (temporary file in the same folder, then rename).

Layout of ``OUTDIR/<case name>.h5`` (see README, "Output")::

    /                    attrs: bubbleflow_version, case (resolved YAML), mode,
                                backend, device, precision, face_density, created
    /grid/x, /grid/y     cell centres (m)
    /fields/phi          level set (m), positive in the liquid
    /fields/rho          cell density (kg/m^3)
    /fields/p            pressure (Pa = kg m^-1 s^-2), zero mean
    /solver/...          one entry per pressure solve (series of length 1 in
                         mode "pressure"): iterations, residual (final true
                         relative residual), converged, reason, setup_seconds,
                         solve_seconds; residual_history (relative recursive
                         residual per iteration of the solve)
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import tempfile

import h5py
import numpy as np

__all__ = ["atomic_h5", "write_pressure_result", "SOLVER_SERIES"]

SOLVER_SERIES = ("iterations", "residual", "converged", "reason", "setup_seconds", "solve_seconds")


@contextlib.contextmanager
def atomic_h5(path):
    """Open a temporary HDF5 file beside ``path``; rename it into place on success.

    On any error the temporary is removed and an existing ``path`` is left
    untouched.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _series(group, name, values, dtype=None):
    """A resizable 1-D dataset, so later writers can append one entry per solve."""
    values = np.asarray(values, dtype=dtype)
    return group.create_dataset(name, data=values, maxshape=(None,), chunks=True)


def write_pressure_result(path, *, case_yaml, version, backend, device, precision, face_density,
                          grid, phi, rho, p, record, mode="pressure"):
    """Write one pressure solve (host arrays) to ``path`` atomically."""
    with atomic_h5(path) as fh:
        fh.attrs["bubbleflow_version"] = version
        fh.attrs["case"] = case_yaml
        fh.attrs["mode"] = mode
        fh.attrs["backend"] = backend
        fh.attrs["device"] = device
        fh.attrs["precision"] = precision
        fh.attrs["face_density"] = face_density
        fh.attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        g = fh.create_group("grid")
        g.create_dataset("x", data=grid.x).attrs["units"] = "m"
        g.create_dataset("y", data=grid.y).attrs["units"] = "m"
        g.attrs["nx"], g.attrs["ny"], g.attrs["lx"], g.attrs["ly"] = grid.nx, grid.ny, grid.lx, grid.ly
        f = fh.create_group("fields")
        for name, data, units in (("phi", phi, "m"), ("rho", rho, "kg/m^3"), ("p", p, "Pa")):
            ds = f.create_dataset(name, data=np.asarray(data), compression="gzip", compression_opts=4)
            ds.attrs["units"] = units
            ds.attrs["layout"] = "(ny, nx), row j is y, column i is x"
        s = fh.create_group("solver")
        s.attrs["method"] = record.method
        s.attrs["variant"] = record.variant
        s.attrs["preconditioner"] = record.preconditioner
        s.attrs["deflation"] = record.deflation
        s.attrs["deflation_vectors"] = record.deflation_vectors
        s.attrs["rtol"] = record.rtol
        _series(s, "iterations", [record.iterations], np.int64)
        _series(s, "residual", [record.residual], np.float64)
        _series(s, "converged", [record.converged], np.bool_)
        s.create_dataset("reason", data=[record.reason], maxshape=(None,),
                         dtype=h5py.string_dtype(), chunks=True)
        _series(s, "setup_seconds", [record.setup_seconds], np.float64)
        _series(s, "solve_seconds", [record.solve_seconds], np.float64)
        s.create_dataset("residual_history", data=np.asarray(record.residual_history, dtype=np.float64))
        checks = np.asarray(record.true_residual_checks, dtype=np.float64).reshape(-1, 2)
        s.create_dataset("true_residual_checks", data=checks).attrs["columns"] = "iteration, relative true residual"
