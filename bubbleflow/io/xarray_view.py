"""A result file as an ``xarray.Dataset``: its fields and series as labelled
arrays, with the grid as coordinates and units and long names as attributes.

:func:`open_result` reads a pressure result or a flow run's index (the
layout of :mod:`bubbleflow.io.layout`) so that analysis code can select by
position and time (``ds.p.sel(time=0.5, method="nearest").sel(x=0.25,
method="nearest")``), plot with labelled axes, or save to netCDF, instead of
indexing raw HDF5 datasets and rebuilding the coordinates by hand.

xarray is an optional dependency (``pip install 'bubbleflow[xarray]'``),
imported on the first call, and so is this module's h5py: importing
:mod:`bubbleflow` stays as quick as before.

The dimensions:

* ``x``, ``y`` (and ``z`` in 3-D): cell centres (m); ``x_faces``, ``y_faces``
  (``z_faces``) for the face-centred velocity components (``u`` on
  ``x_faces``, ``v`` on ``y_faces``, ``w`` on ``z_faces``);
* ``time`` (flow): one entry per snapshot (s), with the snapshot's step
  number as the coordinate ``snapshot_step``;
* ``step`` (flow): one entry per time step of ``/diagnostics``, with the
  time reached as the coordinate ``step_time``;
* ``solve``: one entry per pressure solve of ``/solver`` (``solver_*``
  variables; a flow's with the coordinates ``solve_step``, ``solve_time``);
* ``iteration`` (pressure): the solve's ``residual_history``;
* ``bubble_row`` (flow): one entry per tracked bubble per sample of
  ``/bubbles`` (``bubble_*`` variables, the sample's step and time as the
  coordinates ``bubble_step``, ``bubble_time``);
* ``event`` (flow): one entry per bubble event of ``/bubbles/events``
  (``event_kind``, ``event_id``, ``event_other``; coordinates
  ``event_step``, ``event_time``).

The bubble tables' variables are prefixed because their columns share names
with the whole gas phase's diagnostics (``area``, ``centroid_y``...), which
they are not.

The fields are read into memory (a flow's every snapshot): for a large 3-D
run, select what you need from the HDF5 file itself.
"""
from __future__ import annotations

import os

__all__ = ["open_result"]

#: Long names of the fields and series (units come from the file).
LONG_NAMES = {
    "phi": "level set (signed distance, positive in the liquid)",
    "rho": "density",
    "p": "pressure",
    "p_dynamic": "dynamic pressure (p - rho g.(x - x0))",
    "c": "gas volume fraction",
    "u": "velocity along x (on the x faces)",
    "v": "velocity along y (on the y faces)",
    "w": "velocity along z (on the z faces)",
    "x": "cell centre x", "y": "cell centre y", "z": "cell centre z",
    "x_faces": "face x", "y_faces": "face y", "z_faces": "face z",
    "time": "simulated time of the snapshot",
    "snapshot_step": "time step of the snapshot",
    "step": "time step",
    "step_time": "simulated time at the end of the step",
    "dt": "time step length",
    "area": "gas area", "volume": "gas volume", "surface": "gas surface area",
    "centroid_x": "gas centroid x", "centroid_y": "gas centroid y",
    "centroid_z": "gas centroid z", "rise_velocity": "gas rise velocity",
    "circularity": "circularity (perimeter of the equal-area circle / perimeter)",
    "sphericity": "sphericity (surface of the equal-volume sphere / surface)",
    "divergence": "||div u|| / ||div u*|| after the projection",
    "solve": "pressure solve", "solve_step": "time step of the pressure solve",
    "solve_time": "simulated time of the pressure solve",
    "iterations": "Krylov iterations", "residual": "final relative true residual",
    "converged": "converged", "reason": "why the solve stopped",
    "setup_seconds": "solver setup wall time", "solve_seconds": "solve wall time",
    "residual_history": "relative recursive residual per iteration",
    "bubble_step": "time step of the bubble sample",
    "bubble_time": "simulated time of the bubble sample",
    "bubble_id": "bubble identity (kept from sample to sample)",
    "bubble_area": "bubble area", "bubble_volume": "bubble volume",
    "bubble_centroid_x": "bubble centroid x", "bubble_centroid_y": "bubble centroid y",
    "bubble_centroid_z": "bubble centroid z",
    "bubble_velocity_x": "bubble mean velocity x", "bubble_velocity_y": "bubble mean velocity y",
    "bubble_velocity_z": "bubble mean velocity z",
    "bubble_diameter": "bubble equivalent diameter",
    "bubble_circularity": "bubble circularity (perimeter of the equal-area circle / perimeter)",
    "bubble_sphericity": "bubble sphericity (surface of the equal-volume sphere / surface)",
    "event_step": "time step of the bubble event",
    "event_time": "simulated time of the bubble event",
    "event_kind": "bubble event kind (a code: flag_meanings names them in order)",
    "event_id": "bubble the event is about (merged: the survivor; split: the parent)",
    "event_other": "second bubble of the event (merged: the one that ended in it; split: "
                   "the piece), -1 for none",
}
#: Units where the file states none (an older file).
_UNITS = {"x": "m", "y": "m", "z": "m", "time": "s", "step_time": "s", "dt": "s",
          "phi": "m", "rho": "kg/m^3", "p": "Pa", "p_dynamic": "Pa", "c": "1",
          "u": "m/s", "v": "m/s", "w": "m/s", "area": "m^2", "volume": "m^3",
          "surface": "m^2", "centroid_x": "m", "centroid_y": "m", "centroid_z": "m",
          "rise_velocity": "m/s", "setup_seconds": "s", "solve_seconds": "s"}
_EXTRA = "xarray"


def _xarray():
    try:
        import xarray
    except ImportError:
        raise ImportError("open_result needs xarray: pip install "
                          f"'bubbleflow[{_EXTRA}]' (or pip install xarray)") from None
    return xarray


def _attrs(name, ds=None, units=None):
    """``units`` (the dataset's, else the table's) and ``long_name`` of ``name``."""
    out = {}
    if ds is not None and "units" in ds.attrs:
        units = _text(ds.attrs["units"])
    units = units if units is not None else _UNITS.get(name)
    if units is not None:
        out["units"] = units
    if name in LONG_NAMES:
        out["long_name"] = LONG_NAMES[name]
    return out


def _text(value):
    """Attribute values as netCDF can keep them: text decoded, scalars plain."""
    import numpy as np

    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.shape == ():
            return _text(value[()])
        if value.dtype.kind in "OSU":
            return [_text(v) for v in value.tolist()]
        return value
    if isinstance(value, np.generic):
        return value.item()
    return value


def _grid_coords(grid):
    """Cell-centre and face coordinates of ``/grid``, and the axes (x first)."""
    import numpy as np

    axes = [a for a in "xyz" if a in grid]
    coords = {}
    for a in axes:
        centres = np.asarray(grid[a][()], dtype=np.float64)
        coords[a] = ((a,), centres, _attrs(a, grid[a]))
        name = f"{a}_faces"
        if name in grid:
            faces = np.asarray(grid[name][()], dtype=np.float64)
        else:
            key = f"l{a}"
            length = (float(grid.attrs[key]) if key in grid.attrs
                      else float(centres[0] + centres[-1]))
            faces = np.linspace(0.0, length, centres.size + 1)
        coords[name] = ((name,), faces, _attrs(name, units="m"))
    return axes, coords


def _field_dims(shape, axes, sizes):
    """The spatial dims of an array of trailing ``shape`` (arrays are ``[z,] y, x``),
    or None when it is neither cell- nor face-shaped."""
    nd = len(axes)
    if len(shape) != nd:
        return None
    ordered = list(reversed(axes))
    cell = [sizes[a] for a in ordered]
    if list(shape) == cell:
        return tuple(ordered)
    for k, a in enumerate(ordered):
        faces = list(cell)
        faces[k] += 1
        if list(shape) == faces:
            return tuple(f"{b}_faces" if b == a else b for b in ordered)
    return None


def _fields(fields, axes, sizes, flow):
    """The grid-shaped datasets of ``/fields`` as ``{name: (dims, array, attrs)}``."""
    import numpy as np

    import h5py

    out = {}
    for name, ds in fields.items():
        if not isinstance(ds, h5py.Dataset) or name in ("step", "time"):
            continue
        shape = ds.shape[1:] if flow else ds.shape
        dims = _field_dims(shape, axes, sizes)
        if dims is None:
            continue
        out[name] = ((("time",) if flow else ()) + dims, np.asarray(ds[()]), _attrs(name, ds))
    return out


def _series(group, names, dim, prefix=""):
    """1-D datasets ``names`` of ``group`` of one common length as variables on ``dim``."""
    import numpy as np

    from .layout import text

    out = {}
    for name in names:
        if name not in group or group[name].ndim != 1:
            continue
        ds = group[name]
        data = ds[()]
        if data.dtype.kind in "OS":
            data = np.asarray([text(v) for v in data], dtype=object)
        out[prefix + name] = ((dim,), data, _attrs(name, ds))
    return out


def _diagnostics(d):
    """``/diagnostics``: per-step series on ``step``."""
    variables = {}
    if "step" not in d:
        return variables, {}
    n = d["step"].shape[0]
    names = [k for k in d if d[k].ndim == 1 and d[k].shape[0] == n]
    series = _series(d, names, "step")
    coords = {"step": series.pop("step")}
    if "time" in series:
        dims, data, attrs = series.pop("time")
        coords["step_time"] = (dims, data, dict(attrs, long_name=LONG_NAMES["step_time"]))
    variables.update(series)
    return variables, coords


def _solver(s, flow):
    """``/solver``: per-solve series on ``solve`` (and a pressure solve's history)."""
    import numpy as np

    from .layout import HISTORY, SOLVER_DTYPES

    if "iterations" not in s:
        return {}, {}
    n = s["iterations"].shape[0]
    names = [k for k in list(SOLVER_DTYPES) + ["reason"]
             if k in s and s[k].ndim == 1 and s[k].shape[0] == n]
    series = _series(s, [k for k in names if k not in ("step", "time")], "solve", "solver_")
    coords = {}
    for k in ("step", "time"):
        if k in names:
            dims, data, attrs = _series(s, [k], "solve")[k]
            coords[f"solve_{k}"] = (dims, data, dict(attrs, long_name=LONG_NAMES[f"solve_{k}"]))
    if not flow and HISTORY in s:
        series["residual_history"] = (("iteration",), np.asarray(s[HISTORY][()]),
                                      _attrs("residual_history", s[HISTORY], units="1"))
    return series, coords


def _table(group, dim, prefix):
    """The 1-D datasets of ``group`` as long as its ``step`` as variables
    ``prefix + name`` on ``dim``, ``step`` and ``time`` as coordinates; long
    names the prefixed ones (a table's ``area`` is one bubble's, not the gas
    phase's)."""
    import h5py

    if "step" not in group:
        return {}, {}
    n = group["step"].shape[0]
    names = [k for k, ds in group.items()
             if isinstance(ds, h5py.Dataset) and ds.ndim == 1 and ds.shape[0] == n]
    variables = {}
    for name, (dims, data, attrs) in _series(group, names, dim).items():
        attrs = {k: v for k, v in attrs.items() if k != "long_name"}
        if prefix + name in LONG_NAMES:
            attrs["long_name"] = LONG_NAMES[prefix + name]
        variables[prefix + name] = (dims, data, attrs)
    coords = {prefix + k: variables.pop(prefix + k) for k in ("step", "time")
              if prefix + k in variables}
    return variables, coords


def _bubbles(b):
    """``/bubbles``: one row per tracked bubble per sample on ``bubble_row``,
    and ``/bubbles/events`` on ``event``, ``event_kind`` carrying the names
    of its codes (the file's ``kinds``, and as CF's ``flag_values``,
    ``flag_meanings``)."""
    import numpy as np

    from .bubble_tables import EVENTS, KINDS_ATTR

    variables, coords = _table(b, "bubble_row", "bubble_")
    events = b.get(EVENTS)
    if events is None:
        return variables, coords
    more, more_coords = _table(events, "event", "event_")
    if "event_kind" in more and KINDS_ATTR in events["kind"].attrs:
        kinds = _text(events["kind"].attrs[KINDS_ATTR])
        names = [k.strip() for k in kinds.split(",")]
        more["event_kind"][2].update({KINDS_ATTR: kinds, "flag_meanings": " ".join(names),
                                      "flag_values": np.arange(len(names), dtype=np.int64)})
    variables.update(more)
    coords.update(more_coords)
    return variables, coords


def _open_hdf5(path):
    import h5py

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file; expected a bubbleflow result (.h5)")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise ValueError(f"{path}: not an HDF5 file ({exc}); expected a bubbleflow "
                         "result (.h5)") from None


def open_result(path):
    """A bubbleflow result file as an ``xarray.Dataset``.

    Parameters
    ----------
    path : str or os.PathLike
        A pressure result or a flow run's index (``OUTDIR/<name>.h5``).

    Returns
    -------
    xarray.Dataset
        Pressure: the fields ``phi``, ``rho``, ``p`` on ``(y, x)`` (``(z, y,
        x)`` in 3-D), the ``solver_*`` series on ``solve`` and
        ``residual_history`` on ``iteration``.  Flow: every field of the
        snapshots on ``(time, [z,] y, x)`` (velocity components on their
        faces' dimension), the diagnostics on ``step``, the ``solver_*``
        series on ``solve``, the bubble table's ``bubble_*`` columns on
        ``bubble_row`` and its events' ``event_*`` on ``event``
        (``event_kind`` a code, its names in the attributes ``kinds`` and
        ``flag_meanings``).  Every variable and coordinate carries ``units``
        and ``long_name``; the file's root attributes (``case``, ``mode``,
        ``bubbleflow_version``...) are the dataset's, with those of
        ``/solver`` as ``solver_<name>`` and those of ``/diagnostics`` as
        ``diagnostics_<name>``.  The file is closed on return.

    Raises
    ------
    ImportError
        xarray is not installed (the ``xarray`` extra).
    FileNotFoundError
        No file at ``path``.
    ValueError
        Not an HDF5 file, or one without bubbleflow's ``/grid``.

    Examples
    --------
    >>> ds = open_result("outputs/hysing_case2.h5")          # doctest: +SKIP
    >>> ds.rise_velocity.plot(x="step_time")                 # doctest: +SKIP
    >>> ds.phi.isel(time=-1).plot.contour(levels=[0.0])      # doctest: +SKIP
    """
    xr = _xarray()
    from .bubble_tables import BUBBLES
    from .layout import DIAGNOSTICS_GROUP, FIELDS, GRID, MODE, SOLVER, text

    path = os.fspath(path)
    with _open_hdf5(path) as fh:
        if GRID not in fh:
            raise ValueError(f"{path}: no /{GRID} group; expected a bubbleflow result "
                             "(bubbleflow run writes one)")
        flow = (text(fh.attrs.get(MODE)) or ("flow" if DIAGNOSTICS_GROUP in fh else
                                             "pressure")) == "flow"
        axes, coords = _grid_coords(fh[GRID])
        sizes = {a: coords[a][1].size for a in axes}
        variables = {}
        fields = fh.get(FIELDS)
        if fields is not None:
            variables.update(_fields(fields, axes, sizes, flow))
            if flow and "time" in fields:
                coords["time"] = (("time",), fields["time"][()], _attrs("time", fields["time"]))
                if "step" in fields:
                    coords["snapshot_step"] = (("time",), fields["step"][()],
                                               _attrs("snapshot_step", units="1"))
        attrs = {k: _text(v) for k, v in fh.attrs.items()}
        for group, read in ((fh.get(DIAGNOSTICS_GROUP), _diagnostics),
                            (fh.get(SOLVER), lambda g: _solver(g, flow)),
                            (fh.get(BUBBLES), _bubbles)):
            if group is None:
                continue
            more, more_coords = read(group)
            variables.update(more)
            coords.update(more_coords)
            prefix = group.name.strip("/")
            attrs.update({f"{prefix}_{k}": _text(v) for k, v in group.attrs.items()})
    used = {d for dims, _, _ in variables.values() for d in dims}
    coords = {k: c for k, c in coords.items() if not k.endswith("_faces") or k in used}
    return xr.Dataset(variables, coords=coords, attrs=attrs)
