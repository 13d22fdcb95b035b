"""HDF5 dimension scales of a bubbleflow file: its coordinates attached to its fields.

Readers that know HDF5 dimension scales (HDFView, netCDF-4 readers) then
find each field's coordinates and their units without knowing bubbleflow's
layout.  The writers of :mod:`.result_writer` call
:func:`attach_dimension_scales` on every result and flow index they write.
"""
from __future__ import annotations

import h5py
import numpy as np

from .layout import FIELDS, GRID, UNITS_ATTR
from .result_units import UNITS

__all__ = ["attach_dimension_scales"]


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
    Datasets named in :data:`.result_units.UNITS` get a ``units`` attribute if they have
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
