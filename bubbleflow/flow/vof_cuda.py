"""CUDA twin of the volume-of-fluid advection in 2-D (CuPy, float64).

:func:`advect` is the ``"cupy"`` variant of
:func:`bubbleflow.flow.vof_advection.advect` (the tests compare the two on
the GPU); :func:`advect_2d` is the same call with the face velocities and
the cell sizes as separate arguments.  The kernel is ``vof.cu`` beside this
file.  The array code launches hundreds of small kernels per step (the PLIC
reconstruction, the slab cuts and the update, for each sweep); a call here
launches one kernel per direction sweep, ``bf_vof_sweep``: a thread per cell
reconstructs the donor cells' PLIC lines (Youngs' normal or the level set's,
the line constant), cuts the slabs, and writes ``c - (F_out - F_in) +
indicator * dilatation``; the second sweep also clips.  Two launches per step, plus a
few CuPy reductions when ``info`` is asked for.

The kernel is compiled without FMA contraction and follows the array code's
order of operations: the result has the array code's bits (the ``info`` sums
are the array code's own CuPy expressions).  Calls it does not cover --
another dtype than float64, a grid of fewer than 3 cells along an axis,
mismatched shapes, ``first_axis`` not 0 or 1 -- return ``NotImplemented``
and the array code runs (and raises where it should); so do grids of
another dimension.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from .vof_limits import CLIP_TOLERANCE

__all__ = ["advect", "advect_2d"]

#: No FMA contraction: the kernel rounds as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads per block: 32 along x (one warp per row segment), 8 rows.
_BLOCK = (32, 8)
#: Cells the kernel needs along each axis.
_MIN_CELLS = 3


_kernel = cuda.float64_kernels(__name__, "vof.cu", _OPTIONS)


def _arrays(c, u, v, normal_from):
    """``(c, u, v, phi)`` as contiguous float64 CuPy arrays of matching
    shapes (``phi`` is ``c`` without ``normal_from``), or None."""
    fields = (c, u, v) if normal_from is None else (c, u, v, normal_from)
    arrays = cuda.float64_2d(*fields)
    if arrays is None:
        return None
    c, u, v = arrays[:3]
    phi = arrays[3] if normal_from is not None else c
    ny, nx = c.shape
    if min(nx, ny) < _MIN_CELLS or u.shape != (ny, nx + 1) or v.shape != (ny + 1, nx) \
            or phi.shape != c.shape:
        return None
    return c, u, v, phi


def advect(c, velocity, dt, spacing, first_axis=0, normal_from=None, info=None):
    """One step of ``c_t + div(c u) = 0`` (twin: ``vof_advection.advect``,
    the same arguments and result): :func:`advect_2d` with ``velocity =
    (u, v)`` and ``spacing = (hx, hy)``; ``NotImplemented`` on a grid of
    another dimension."""
    if len(velocity) != 2 or len(spacing) != 2:
        return NotImplemented
    u, v = velocity
    hx, hy = spacing
    return advect_2d(c, u, v, dt, hx, hy, first_axis, normal_from, info)


def advect_2d(c, u, v, dt, hx, hy, first_axis=0, normal_from=None, info=None):
    """One step of ``c_t + div(c u) = 0`` on a 2-D grid, ``u`` and ``v`` the
    face velocities and ``hx``, ``hy`` the cell sizes: two launches of
    ``bf_vof_sweep``, one per direction; with ``info``, its two numbers from
    CuPy reductions as the array code computes them."""
    import cupy as cp

    arrays = _arrays(c, u, v, normal_from)
    if arrays is None or first_axis not in (0, 1):
        return NotImplemented
    c, u, v, phi = arrays
    ny, nx = c.shape
    dt, hx, hy = float(dt), float(hx), float(hy)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    kernel = _kernel("bf_vof_sweep")
    mid = cp.empty_like(c)
    out = cp.empty_like(c)
    raw = cp.empty_like(c) if info is not None else out
    src, dst = c, mid
    for k, axis in enumerate((first_axis, 1 - first_axis)):
        vel, h = (u, hx) if axis == 1 else (v, hy)
        last = k == 1
        kernel(grid, block, (
            src, c, phi, vel, dst, raw, np.int32(nx), np.int32(ny), np.int32(axis == 1),
            np.int32(normal_from is not None), np.int32(last),
            np.int32(last and info is not None), np.float64(hx), np.float64(hy),
            np.float64(dt), np.float64(dt / h), np.float64(CLIP_TOLERANCE),
            np.float64(1.0 + CLIP_TOLERANCE)))
        src, dst = mid, out
    if info is not None:
        info["clipped"] = float(cp.sum(out - raw)) * hx * hy
        info["excursion"] = max(0.0, float(cp.max(cp.maximum(-out, out - 1.0))))
    return out
