"""HDF5 output, written atomically (temporary file in the same folder, then rename).

Files get the permissions of the user's umask and are flushed to disk
before the rename (see :func:`atomic_path`).

Layout of ``OUTDIR/<case name>.h5`` (see README, "Output")::

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
                         residual per iteration of the solve)
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import tempfile

import h5py
import numpy as np

__all__ = ["atomic_path", "atomic_h5", "atomic_text", "file_mode", "probe_writable",
           "attach_dimension_scales",
           "write_pressure_result", "SOLVER_SERIES", "UNITS"]

SOLVER_SERIES = ("iterations", "residual", "converged", "reason", "setup_seconds", "solve_seconds")


def _read_umask():
    """The process umask, read without changing it where the platform allows."""
    # /proc/self/status (Linux >= 4.7) reports it without touching it.
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_by_setting():
    # os.umask can only be read by setting it; setting it is process-global,
    # so a file another thread creates in this instant would get umask 0.  Done
    # once, at import (see _UMASK_AT_IMPORT), never while writing results.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _read_umask()
if _UMASK_AT_IMPORT is None:
    _UMASK_AT_IMPORT = _umask_by_setting()


def file_mode():
    """Permission bits of a new file under the current umask (``0o666 & ~umask``).

    The umask is read from ``/proc/self/status`` where available (so a later
    change is seen); elsewhere the value read once at import is used.
    """
    mask = _read_umask()
    return 0o666 & ~(_UMASK_AT_IMPORT if mask is None else mask)


def probe_writable(folder, name):
    """Create and remove ``folder/name``: raises the OSError a real write would.

    ``os.access`` is no proof (root passes it in folders such as /proc, and
    it knows nothing of name lengths or full disks).
    """
    probe = os.path.join(folder, name)
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    os.unlink(probe)


def _fsync_dir(folder):
    """Persist a rename in ``folder``; best effort (Windows cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass    # some file systems refuse fsync on a folder
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path):
    """A temporary file name beside ``path``, renamed over ``path`` on success.

    The body writes the file named by the yielded path (it exists, empty, and
    may be truncated or replaced).  When the body returns, the temporary gets
    the permissions of a newly created file (``0o666 & ~umask``; the temporary
    itself is created 0600), is flushed to disk, renamed over ``path``, and the
    rename is flushed too (where the folder can be synced).  Readers therefore
    see either the old file or the complete new one, also after a crash.  On
    any error the temporary is removed and an existing ``path`` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        The final file; its folder is created if missing.

    Yields
    ------
    str
        The temporary path, in the same folder (so the rename is atomic).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
        try:
            os.chmod(tmp, file_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


@contextlib.contextmanager
def atomic_h5(path):
    """Open a temporary HDF5 file beside ``path``; rename it into place on success.

    See :func:`atomic_path`: on any error the temporary is removed and an
    existing ``path`` is left untouched; the result has the umask's permissions
    and is on disk when the block ends.
    """
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as fh:
            yield fh


def atomic_text(path, text, encoding="utf-8"):
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`).

    Line endings are written as given (no translation).
    """
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding, newline="") as fh:
            fh.write(text)


#: Units of the datasets under ``/fields`` (and of snapshot files); "1": dimensionless.
UNITS = {"phi": "m", "rho": "kg/m^3", "p": "Pa", "u": "m/s", "v": "m/s", "velocity": "m/s",
         "time": "s", "step": "1"}


def _scale(group, name, data, label, units):
    """``group[name]`` as a dimension scale called ``label`` (created if missing)."""
    ds = group[name] if name in group else group.create_dataset(name, data=data)
    ds.attrs["units"] = units
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
    grid = fh["grid"]
    nx, ny = grid["x"].shape[0], grid["y"].shape[0]
    x, y = grid["x"][()], grid["y"][()]
    lx = float(grid.attrs["lx"]) if "lx" in grid.attrs else float(x[0] + x[-1])
    ly = float(grid.attrs["ly"]) if "ly" in grid.attrs else float(y[0] + y[-1])
    scales = {"x": _scale(grid, "x", None, "x", "m"), "y": _scale(grid, "y", None, "y", "m")}

    def face_scale(axis):
        name = axis + "_faces"
        if name not in scales:
            n, length = (nx, lx) if axis == "x" else (ny, ly)
            scales[name] = _scale(grid, name, np.linspace(0.0, length, n + 1), name, "m")
        return scales[name]

    fields = fh.get("fields")
    if fields is None:
        return
    time_scales = []
    for name in ("time", "step"):
        ds = fields.get(name)
        if isinstance(ds, h5py.Dataset) and ds.ndim == 1:
            time_scales.append(_scale(fields, name, None, name, UNITS[name]))
    nsnap = time_scales[0].shape[0] if time_scales else None

    found = []
    # Collect first: the loop below creates datasets and attributes.
    fields.visititems(lambda _, obj: found.append(obj) if isinstance(obj, h5py.Dataset) else None)
    for ds in found:
        if ds.is_scale:
            continue
        base = ds.name.rsplit("/", 1)[-1]
        if base in UNITS and "units" not in ds.attrs:
            ds.attrs["units"] = UNITS[base]
        if ds.ndim not in (2, 3):
            continue
        trailing = ds.shape[-2:]
        if trailing == (ny, nx):
            ys, xs = (scales["y"], "y"), (scales["x"], "x")
        elif trailing == (ny, nx + 1):
            ys, xs = (scales["y"], "y"), (face_scale("x"), "x_faces")
        elif trailing == (ny + 1, nx):
            ys, xs = (face_scale("y"), "y_faces"), (scales["x"], "x")
        else:
            continue
        _attach(ds, ds.ndim - 2, *ys)
        _attach(ds, ds.ndim - 1, *xs)
        if ds.ndim == 3 and ds.shape[0] == nsnap:
            for sc in time_scales:
                _attach(ds, 0, sc, "time")


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
        attach_dimension_scales(fh)
