"""CUDA twin of the boxes' search (:mod:`.boxes`; CuPy, float64).

:func:`gas_box`, :func:`interface_box` and :func:`interface_box_bounds`
are the ``"cupy"`` variants of their namesakes in :mod:`.boxes`: one launch
of ``bf_box_where`` (``boxes.cu`` beside this file), whose blocks fold their
least and greatest indices into six integers by atomics, then one small
read (the bounds' left on the device, for a later transfer to read).
Another dtype or dimension than float64 2-D or 3-D returns
``NotImplemented`` (the array code runs).  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from .vof_limits import CLIP_TOLERANCE

__all__ = ["gas_box", "interface_box", "interface_box_bounds", "box_of_bounds", "NO_BOX",
           "BOX_ROWS"]

_kernel = cuda.float64_kernels(__name__, "boxes.cu")
#: Threads per block: 32 along x, 8 rows.
_BLOCK = (32, 8)
#: Block rows at most of a kernel folding a box (``bf_box_fold``; times the
#: blocks along x): every block's threads stride over rows, and each block
#: adds one set of atomics.
BOX_ROWS = 128
#: The box before any cell is met (``bf_box_fold``'s start): least (i, j, k)
#: at the int32 maximum, greatest at -1.
NO_BOX = np.array([2 ** 31 - 1] * 3 + [-1] * 3, dtype=np.int32)
#: bf_box_where's tests.
_GAS, _BELOW = 0, 1


def _box_where_bounds(a, mode, bound):
    """``bf_box_where``'s six integers on the device (:data:`NO_BOX` where
    no cell is met), not read; NotImplemented for what it does not cover.
    Launches only (no copy from the host): a CUDA graph may hold them."""
    import cupy as cp

    nd = getattr(a, "ndim", 0)
    if nd not in (2, 3):
        return NotImplemented
    arrays = cuda.float64_nd(nd, a)
    if arrays is None:
        return NotImplemented
    (a,) = arrays
    nz, ny, nx = (1,) * (3 - nd) + a.shape
    box = cp.empty(6, dtype=cp.int32)
    box[:3] = int(NO_BOX[0])
    box[3:] = int(NO_BOX[3])
    grid, block = cuda.grid_2d(nx, ny * nz, _BLOCK)
    _kernel("bf_box_where")((grid[0], min(grid[1], BOX_ROWS)), block, (
        a, box, np.int32(nx), np.int32(ny), np.int32(nz), np.int32(mode), np.float64(bound)))
    return box


def box_of_bounds(lo_hi, nd):
    """The box (array axes, x last) of the host six integers ``lo_hi``
    (least ``(i, j, k)``, then greatest), or None where they hold no cell."""
    if lo_hi[3] < 0:
        return None
    return tuple((int(lo_hi[a]), int(lo_hi[3 + a])) for a in range(nd))[::-1]


def _box_where(a, mode, bound):
    box = _box_where_bounds(a, mode, bound)
    if box is NotImplemented:
        return box
    return box_of_bounds(box.get(), a.ndim)


def gas_box(c):
    """Twin of ``boxes.gas_box``."""
    return _box_where(c, _GAS, CLIP_TOLERANCE)


def interface_box(phi, bound):
    """Twin of ``boxes.interface_box``."""
    return _box_where(phi, _BELOW, bound)


def interface_box_bounds(phi, bound):
    """Twin of ``boxes.interface_box_bounds``."""
    return _box_where_bounds(phi, _BELOW, bound)
