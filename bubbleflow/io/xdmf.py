"""XDMF sidecar: the fields of a run's HDF5 files, described for ParaView, VisIt and VTK.

The file is XDMF 2 (``<Xdmf Version="2.0">``), the version read by
``vtkXdmfReader`` (module ``vtkIOXdmf2``, the only XDMF reader in VTK's
Python wheel, and ParaView's "XDMF Reader"); the XDMF 3 readers read XDMF 2
files too.  It holds a temporal collection with one uniform grid per
snapshot; the fields are cell data (``Center="Cell"``) on the ``ny x nx``
solver cells, referenced as ``file.h5:/path`` relative to the XDMF file's
folder (the folder can be moved).

The mesh is a ``2DRectMesh`` with ``VXVY`` geometry (node coordinates
``0 .. lx`` and ``0 .. ly``), not a ``2DCoRectMesh`` with ``ORIGIN_DXDY``:
``vtkXdmfReader`` puts a 2DCoRectMesh in the y-z plane (x = 0, the two
XDMF axes on VTK's y and z; seen in VTK 9.7, and ``vtkXdmf3Reader``'s source
does the same), whereas for VXVY both take the first vector as x and the
second as y, as VisIt does.  XDMF lists dimensions slowest first,
so the topology is ``Dimensions="ny+1 nx+1"`` (nodes) and a field is
``Dimensions="ny nx"``: exactly the ``(ny, nx)`` C order of the arrays (row
j is y, column i is x), so nothing is transposed.  The mesh is written in
the first grid only; the others include it (XInclude), which keeps the
file small for long runs.
"""
from __future__ import annotations

import contextlib
import os
import posixpath
from xml.sax.saxutils import escape, quoteattr

from .atomic import atomic_path, atomic_text
from .result_units import UNITS

__all__ = ["write_xdmf", "write_pressure_sidecar", "pressure_sidecar", "CELL_FIELDS"]

#: Cell-centred fields a grid can carry: name -> number of components.
CELL_FIELDS = {"p": 1, "rho": 1, "phi": 1, "velocity": 3, "c": 1, "p_dynamic": 1}


def _num(value):
    """A float as XML text, without loss (``repr`` round-trips)."""
    return repr(float(value))


def _h5_path(xdmf_folder, h5_path):
    """``h5_path`` relative to the XDMF file's folder, with ``/`` separators."""
    if os.path.isabs(h5_path):
        h5_path = os.path.relpath(h5_path, xdmf_folder)
    return h5_path.replace(os.sep, "/")


def _attribute(name, ncomp, source, shape, indent):
    dims = " ".join(map(str, shape)) + ("" if ncomp == 1 else f" {ncomp}")
    kind = "Scalar" if ncomp == 1 else "Vector"
    pad = " " * indent
    lines = [f'{pad}<Attribute Name={quoteattr(name)} AttributeType="{kind}" Center="Cell">']
    if name in UNITS:
        lines.append(f'{pad}  <Information Name="units" Value={quoteattr(UNITS[name])}/>')
    lines += [f'{pad}  <DataItem Dimensions="{dims}" NumberType="Float" Precision="8" Format="HDF">'
              f'{escape(source)}</DataItem>',
              f"{pad}</Attribute>"]
    return lines


def write_xdmf(xdmf_path, grid, snapshots, fields):
    """Write an XDMF file describing the snapshots of a run, atomically.

    Parameters
    ----------
    xdmf_path : str or os.PathLike
        The file to write (replaced atomically, see
        :func:`bubbleflow.io.atomic.atomic_path`).
    grid : bubbleflow.mesh.grid.Grid
        2-D or 3-D (``cells`` and ``spacing``; or anything with ``nx, ny,
        hx, hy``); the domain is ``[0, nx hx] x [0, ny hy] (x [0, nz hz])``,
        a ``3DRectMesh`` with ``VXVYVZ`` geometry in 3-D.
    snapshots : sequence of (float, str, str)
        ``(time, h5_path, group)`` per snapshot, in time order: the HDF5 file
        (relative to the XDMF file's folder, or absolute; written relative
        either way, so the folder can be moved) holds ``<group>/<field>`` for
        each field.  A pressure result is one snapshot
        ``(0.0, "<name>.h5", "/fields")``.
    fields : sequence of str
        Names from :data:`CELL_FIELDS`: ``p``, ``rho``, ``phi``, a CLSVOF
        run's gas volume fraction ``c`` and a reduced-gravity run's
        ``p_dynamic`` (datasets of shape ``(ny, nx)``), ``velocity``
        (``(ny, nx, 3)``, a vector).  Data
        are declared float64; HDF5 converts other float types on reading.

    Raises
    ------
    ValueError
        For a field that is not cell-centred (``u``, ``v``) or unknown.
    bubbleflow.io.atomic.OutputWriteError
        Writing the file failed.
    """
    atomic_text(xdmf_path, _xdmf_text(xdmf_path, grid, snapshots, fields))


def _xdmf_text(xdmf_path, grid, snapshots, fields):
    """The text of :func:`write_xdmf`'s file ``xdmf_path``."""
    for name in fields:
        if name not in CELL_FIELDS:
            raise ValueError(f"XDMF field {name!r}: only the cell-centred {', '.join(CELL_FIELDS)} "
                             f"can be described (face-centred u, v cannot)")
    xdmf_path = os.fspath(xdmf_path)
    folder = os.path.dirname(os.path.abspath(xdmf_path))
    cells = tuple(int(n) for n in getattr(grid, "cells", (grid.nx, grid.ny)))
    spacing = tuple(getattr(grid, "spacing", (grid.hx, grid.hy)))
    shape = cells[::-1]
    nd = len(cells)
    # Node coordinates from the cell sizes, the last node at exactly n * h.
    nodes = [" ".join(_num(i * h) for i in range(n)) + " " + _num(n * h)
             for n, h in zip(cells, spacing)]
    mesh = [f'        <Topology TopologyType="{nd}DRectMesh" '
            f'Dimensions="{" ".join(str(n + 1) for n in shape)}"/>',
            f'        <Geometry GeometryType="{"VXVYVZ" if nd == 3 else "VXVY"}">']
    for n, coords in zip(cells, nodes):
        mesh.append(f'          <DataItem Dimensions="{n + 1}" NumberType="Float" Precision="8" '
                    f'Format="XML">{coords}</DataItem>')
    mesh.append("        </Geometry>")
    include = ('        <xi:include xpointer="xpointer(//Grid[@Name=&quot;run&quot;]/Grid[1]'
               '/*[self::Topology or self::Geometry])"/>')
    lines = ['<?xml version="1.0" ?>',
             '<!DOCTYPE Xdmf SYSTEM "Xdmf.dtd" []>',
             '<Xdmf Version="2.0" xmlns:xi="http://www.w3.org/2001/XInclude">',
             "  <Domain>",
             '    <Grid Name="run" GridType="Collection" CollectionType="Temporal">']
    for k, (time, h5_path, group) in enumerate(snapshots):
        h5 = _h5_path(folder, os.fspath(h5_path))
        if ":" in h5:
            # XDMF splits "file:/dataset" at the first colon.
            raise ValueError(f"XDMF cannot reference an HDF5 file whose path has a colon: {h5!r}")
        group = "/" + str(group).strip("/")
        lines += [f'      <Grid Name="snapshot_{k}" GridType="Uniform">',
                  f'        <Time Value="{_num(time)}"/>']
        lines += mesh if k == 0 else [include]
        for name in fields:
            lines += _attribute(name, CELL_FIELDS[name], f"{h5}:{posixpath.join(group, name)}",
                                shape, 8)
        lines.append("      </Grid>")
    lines += ["    </Grid>", "  </Domain>", "</Xdmf>", ""]
    return "\n".join(lines)


def write_pressure_sidecar(path, grid):
    """``<name>.xdmf`` beside a pressure result ``<name>.h5``, for ParaView."""
    with pressure_sidecar(path, grid):
        pass


@contextlib.contextmanager
def pressure_sidecar(path, grid):
    """``<name>.xdmf`` for the pressure result ``path``, put in place with it.

    The sidecar is written to a temporary before the block, which writes the
    result ``path``; it is renamed into place once the block has succeeded.
    A failed write of the result leaves the previous result and sidecar as
    they were (and no temporary).

    Yields
    ------
    str
        The sidecar's path.

    Raises
    ------
    bubbleflow.io.atomic.OutputWriteError
        Writing the sidecar failed (after the block: the result is in place).
    """
    stem, _ = os.path.splitext(os.fspath(path))
    text = _xdmf_text(stem + ".xdmf", grid, [(0.0, os.path.basename(path), "/fields")],
                      ("p", "rho", "phi"))
    with atomic_path(stem + ".xdmf") as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        yield stem + ".xdmf"
