"""CUDA twin of the boxes' search (:mod:`.boxes`; CuPy, float64).

:func:`gas_box` and :func:`interface_box` are the ``"cupy"`` variants of
their namesakes in :mod:`.boxes`: one launch of ``bf_box_where``
(``boxes.cu`` beside this file), whose blocks fold their least and greatest
indices into six integers by atomics, then one small read.  Another dtype or
dimension than float64 2-D or 3-D returns ``NotImplemented`` (the array code
runs).  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from .vof_limits import CLIP_TOLERANCE

__all__ = ["gas_box", "interface_box", "NO_BOX", "BOX_ROWS"]

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


def _box_where(a, mode, bound):
    import cupy as cp

    nd = getattr(a, "ndim", 0)
    if nd not in (2, 3):
        return NotImplemented
    arrays = cuda.float64_nd(nd, a)
    if arrays is None:
        return NotImplemented
    (a,) = arrays
    nz, ny, nx = (1,) * (3 - nd) + a.shape
    box = cp.asarray(NO_BOX)
    grid, block = cuda.grid_2d(nx, ny * nz, _BLOCK)
    _kernel("bf_box_where")((grid[0], min(grid[1], BOX_ROWS)), block, (
        a, box, np.int32(nx), np.int32(ny), np.int32(nz), np.int32(mode), np.float64(bound)))
    lo_hi = box.get()
    if lo_hi[3] < 0:
        return None
    # (i, j, k) to the array axes, x last.
    return tuple((int(lo_hi[a]), int(lo_hi[3 + a])) for a in range(nd))[::-1]


def gas_box(c):
    """Twin of ``boxes.gas_box``."""
    return _box_where(c, _GAS, CLIP_TOLERANCE)


def interface_box(phi, bound):
    """Twin of ``boxes.interface_box``."""
    return _box_where(phi, _BELOW, bound)
