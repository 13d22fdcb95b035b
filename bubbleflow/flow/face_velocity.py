"""The MAC face velocity seen from the cells: its cell-centre average and
the check that its components fit a cell field.

``velocity`` is the tuple of face components in grid-axis order (``u, v[,
w]``), component ``a`` having one more entry than the cells along array
axis ``ndim - 1 - a`` (the wall faces included).  The level set's transport
(:mod:`.levelset`), the bubble measures (:mod:`.bubble_measures`) and the
volume fraction's transport use these.
"""
from __future__ import annotations

from ..mesh.grid import array_axis
from .padding import along

__all__ = ["cell_velocity", "check_velocity"]


def cell_velocity(velocity):
    """Cell-centre velocity per grid axis: the mean of each cell's two faces."""
    nd = velocity[0].ndim
    out = []
    for a, f in enumerate(velocity):
        k = array_axis(nd, a)
        out.append(0.5 * (f[along(nd, k, slice(None, -1))] + f[along(nd, k, slice(1, None))]))
    return tuple(out)


def check_velocity(field, velocity, name="phi", what="level set"):
    """ValueError unless ``velocity`` holds one face component per axis of
    the cell field ``field`` (called ``name``, a ``what``)."""
    nd = field.ndim
    if len(velocity) != nd:
        raise ValueError(f"{len(velocity)} velocity components for a {nd}-D {what}")
    for a, f in enumerate(velocity):
        expected = list(field.shape)
        expected[array_axis(nd, a)] += 1
        if tuple(f.shape) != tuple(expected):
            raise ValueError(f"velocity component {'xyz'[a]} has shape {tuple(f.shape)}; "
                             f"expected {tuple(expected)} for {name} of shape {field.shape}")
