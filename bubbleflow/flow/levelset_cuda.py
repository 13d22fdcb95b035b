"""CUDA twins of the level-set operations of the flow (CuPy, float64).

Registered on the array-code references in :mod:`bubbleflow.flow.levelset`
and :mod:`bubbleflow.flow.bubble_measures` (the tests compare the two on the
GPU); the kernels are ``levelset.cu`` beside this file (``levelset3.cu``
in 3-D).  Where the array
code launches hundreds of small kernels per call, these launch a few:

* :func:`advect`: one kernel per TVD-RK3 stage (WENO5 upwind derivatives
  along every axis with the linear ghost cells, the RK combination
  included): 3 launches, in 2-D and 3-D;
* :func:`reinitialize`: one set-up kernel (S, the interface cells, the
  Russo-Smereka distance, the sign) and one kernel per RK stage:
  ``1 + 3 * iterations`` launches, in 2-D and 3-D;
* :func:`curvature`: one kernel, in 2-D and 3-D;
* :func:`smooth`: one kernel per pass, in 2-D and 3-D;
* :func:`bubble_sums` (:func:`diagnostic_sums`): per-block sums then one
  block (two launches, fixed order, so the same input gives the same bits),
  left on the device; also on a rank's slab (its part, then the ranks'
  total).

The kernels are compiled without FMA contraction and follow the array code's
order of operations, so the fields agree with the twin to the last bits (the
diagnostics' sums differ by their order).  Calls these kernels do not cover
-- another dimension than 2 or 3, a rank's slab (a padding other than the
walls') but for the sums, another dtype than float64, a grid of fewer
than 3 cells along an axis (2 for the diagnostics), mismatched shapes --
return ``NotImplemented`` and the array code runs.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import math

import numpy as np

from ..compute import cuda
from .padding import WALLS

__all__ = ["advect", "reinitialize", "curvature", "smooth", "bubble_sums", "diagnostic_sums"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads of the per-cell kernels: 32 along x (one warp per row segment), 8 rows.
_BLOCK = (32, 8)
#: Threads a block of the diagnostics' reduction (its blocks:
#: compute.cuda.reduce_blocks).
_REDUCE_THREADS = 256
#: Cells the stencils need along each axis (the quadratic ghost reads three).
_MIN_CELLS = 3
#: Cells a thread of the 3-D filter walks up a column.
_SMOOTH_RUN = 16
#: weno.weno_floor and the smallest normal number, in float64.
_WENO_FLOOR = np.float64(10.0 * math.sqrt(float(np.finfo(np.float64).tiny)))
_TINY = np.float64(np.finfo(np.float64).tiny)


_kernel = cuda.float64_kernels(__name__, "levelset.cu", _OPTIONS, ndims=(2,))
#: The 3-D kernels: a source of their own (a 2-D run compiles none of them).
_kernel3 = cuda.float64_kernels(__name__, "levelset3.cu", _OPTIONS, ndims=(3,))


_float64 = cuda.float64_2d


def _cells_grid(nx, ny):
    return cuda.grid_2d(nx, ny, _BLOCK)


def advect(phi, velocity, dt, spacing, padding=WALLS):
    """One TVD-RK3 step of ``phi_t + u . grad(phi) = 0`` (twin:
    ``levelset.advect``): three launches of ``bf_ls_advect_stage`` (2-D) or
    ``bf_ls_advect_stage3`` (3-D)."""
    import cupy as cp

    if padding is not WALLS or len(velocity) not in (2, 3) \
            or len(spacing) != len(velocity) or getattr(phi, "ndim", 0) != len(velocity):
        return NotImplemented
    arrays = cuda.float64_nd(len(velocity), phi, *velocity)
    if arrays is None:
        return NotImplemented
    phi, vel = arrays[0], arrays[1:]
    shape = phi.shape
    faces = [list(shape) for _ in vel]
    for a, f in enumerate(faces):
        f[len(shape) - 1 - a] += 1
    if min(shape) < _MIN_CELLS or any(v.shape != tuple(f) for v, f in zip(vel, faces)):
        return NotImplemented
    sizes = tuple(np.int32(n) for n in reversed(shape))
    if len(shape) == 2:
        kernel = _kernel("bf_ls_advect_stage")
        grid, block = _cells_grid(shape[1], shape[0])
    else:
        kernel = _kernel3("bf_ls_advect_stage3")
        grid, block = _cells_grid(shape[2], shape[1] * shape[0])
    scalars = sizes + tuple(np.float64(1.0 / h) for h in spacing) + (np.float64(dt), _WENO_FLOOR)
    p = phi
    for stage in (1, 2, 3):
        out = cp.empty_like(phi)
        kernel(grid, block, (phi, p, *vel, out, *scalars, np.int32(stage)))
        p = out
    return p


def reinitialize(phi, spacing, iterations=20, cfl=0.3, padding=WALLS):
    """Redistancing in pseudo-time (twin: ``levelset.reinitialize``):
    ``bf_ls_reinit_setup`` once, then ``bf_ls_reinit_stage`` per RK stage
    (``bf_ls_reinit_setup3`` and ``bf_ls_reinit_stage3`` in 3-D)."""
    import cupy as cp

    nd = getattr(phi, "ndim", 0)
    if padding is not WALLS or nd not in (2, 3) or len(spacing) != nd:
        return NotImplemented
    arrays = cuda.float64_nd(nd, phi)
    if arrays is None or min(arrays[0].shape) < _MIN_CELLS:
        return NotImplemented
    phi0 = arrays[0]
    iterations = int(iterations)
    if iterations <= 0:
        return phi0.copy()
    sides = tuple(float(x) for x in spacing)
    h, hmin = max(sides), min(sides)
    sizes = tuple(np.int32(n) for n in reversed(phi0.shape))
    steps = tuple(np.float64(x) for x in sides)
    if nd == 2:
        setup, stage_kernel = _kernel("bf_ls_reinit_setup"), _kernel("bf_ls_reinit_stage")
        grid, block = _cells_grid(phi0.shape[1], phi0.shape[0])
    else:
        setup, stage_kernel = _kernel3("bf_ls_reinit_setup3"), _kernel3("bf_ls_reinit_stage3")
        grid, block = _cells_grid(phi0.shape[2], phi0.shape[1] * phi0.shape[0])
    coef = cp.empty_like(phi0)
    flags = cp.empty(phi0.shape, dtype=cp.int8)
    setup(grid, block, (phi0, coef, flags, *sizes, *steps, np.float64(h * h), _TINY))
    scalars = sizes + steps + (np.float64(hmin), np.float64(cfl * hmin), _WENO_FLOOR)
    p1, p2 = cp.empty_like(phi0), cp.empty_like(phi0)
    spare = [cp.empty_like(phi0), cp.empty_like(phi0)]
    base = phi0
    for k in range(iterations):
        out = spare[k % 2]
        for stage, p, dest in ((1, base, p1), (2, p1, p2), (3, p2, out)):
            stage_kernel(grid, block, (base, p, coef, flags, dest, *scalars, np.int32(stage)))
        base = out
    return base


def curvature(phi, spacing, padding=WALLS):
    """Mean curvature at cell centres (twin: ``levelset.curvature``):
    one launch of ``bf_ls_curvature`` (2-D) or ``bf_ls_curvature3`` (3-D)."""
    import cupy as cp

    if padding is not WALLS or getattr(phi, "ndim", 0) not in (2, 3) \
            or len(spacing) != phi.ndim:
        return NotImplemented
    arrays = cuda.float64_nd(phi.ndim, phi)
    if arrays is None or min(arrays[0].shape) < _MIN_CELLS:
        return NotImplemented
    phi = arrays[0]
    h = tuple(float(x) for x in spacing)
    out = cp.empty_like(phi)
    if phi.ndim == 2:
        ny, nx = phi.shape
        hx, hy = h
        grid, block = _cells_grid(nx, ny)
        _kernel("bf_ls_curvature")(grid, block, (
            phi, out, np.int32(nx), np.int32(ny), np.float64(2.0 * hx), np.float64(2.0 * hy),
            np.float64(hx * hx), np.float64(hy * hy), np.float64(4.0 * hx * hy),
            np.float64(1.0 / min(hx, hy))))
        return out
    nz, ny, nx = phi.shape
    hx, hy, hz = h
    grid, block = _cells_grid(nx, ny * nz)
    _kernel3("bf_ls_curvature3")(grid, block, (
        phi, out, np.int32(nx), np.int32(ny), np.int32(nz), np.float64(2.0 * hx),
        np.float64(2.0 * hy), np.float64(2.0 * hz), np.float64(hx * hx), np.float64(hy * hy),
        np.float64(hz * hz), np.float64(4.0 * hx * hy), np.float64(4.0 * hx * hz),
        np.float64(4.0 * hy * hz), np.float64(1.0 / min(h))))
    return out


def smooth(phi, passes=1, padding=WALLS):
    """``passes`` passes of the ``[1, 2, 1] / 4`` filter (twin:
    ``levelset.smooth``): one launch of ``bf_ls_smooth`` (2-D) or
    ``bf_ls_smooth3`` (3-D) per pass."""
    import cupy as cp

    if padding is not WALLS or getattr(phi, "ndim", 0) not in (2, 3):
        return NotImplemented
    arrays = cuda.float64_nd(phi.ndim, phi)
    if arrays is None:
        return NotImplemented
    phi = arrays[0]
    if passes == 0:
        return phi
    sizes = tuple(np.int32(n) for n in reversed(phi.shape))
    if phi.ndim == 2:
        kernel = _kernel("bf_ls_smooth")
        grid, block = _cells_grid(phi.shape[1], phi.shape[0])
    else:
        kernel = _kernel3("bf_ls_smooth3")
        runs = -(-phi.shape[0] // _SMOOTH_RUN)
        grid, block = _cells_grid(phi.shape[2], phi.shape[1] * runs)
        sizes = sizes + (np.int32(_SMOOTH_RUN),)
    src, out = phi, cp.empty_like(phi)
    spare = cp.empty_like(phi) if passes > 1 else None
    for k in range(passes):
        kernel(grid, block, (src, out, *sizes))
        src, out = out, (spare if k == 0 else src)
    return src


def diagnostic_sums(phi, v, hx, hy, eps, cells=None, first_row=0):
    """The six sums of the diagnostics as one device array (CuPy, float64):
    ``sum w``, ``sum w x``, ``sum w y``, ``sum w v_c`` (``w = 1 - H_eps(phi)``),
    the marching-squares contour length and the contour's gas area over
    ``hx hy``.  Two launches, fixed summation order.

    The cells of ``phi``'s first ``cells`` rows (default: all) are summed,
    the squares between any two of its rows; ``first_row`` is the grid row
    of ``phi``'s first (a rank's slab, with the next slab's first row as
    its last)."""
    import cupy as cp

    rows, nx = phi.shape
    ny = rows if cells is None else cells
    n = nx * ny
    blocks = cuda.reduce_blocks(n, _REDUCE_THREADS)
    partial = cp.empty(6 * blocks, dtype=cp.float64)
    out = cp.empty(6, dtype=cp.float64)
    _kernel("bf_ls_diagnostics_partial")((blocks,), (_REDUCE_THREADS,), (
        phi, v, partial, np.int32(nx), np.int32(ny), np.int32(rows), np.int32(first_row),
        np.float64(hx), np.float64(hy), np.float64(eps)))
    _kernel("bf_ls_diagnostics_final")((1,), (_REDUCE_THREADS,), (partial, np.int32(blocks), out))
    return out


def diagnostic_sums_3d(phi, w, spacing, eps, cells=None, below=0, first_plane=0):
    """The 3-D measure's six sums as one device array (CuPy, float64): ``sum
    g``, ``sum delta |grad phi|``, ``sum g x``, ``sum g y``, ``sum g z``,
    ``sum g w_c`` (``g`` the sharp gas weight of
    ``bubble_measures.VolumeMeasure``).  Two launches, fixed summation
    order.

    The cells of ``cells`` planes (default: all) from ``phi``'s plane
    ``below`` are summed, ``w`` their faces; ``first_plane`` is the first
    summed plane's in the grid (a rank's slab, ``phi`` with the neighbours'
    planes around it)."""
    import cupy as cp

    nzw, ny, nx = phi.shape
    nz = nzw if cells is None else cells
    blocks = cuda.reduce_blocks(nz * ny * nx, _REDUCE_THREADS)
    partial = cp.empty(6 * blocks, dtype=cp.float64)
    out = cp.empty(6, dtype=cp.float64)
    _kernel3("bf_ls_diagnostics3_partial")((blocks,), (_REDUCE_THREADS,), (
        phi, w, partial, np.int32(nx), np.int32(ny), np.int32(nz), np.int32(nzw),
        np.int32(below), np.int32(first_plane),
        *(np.float64(h) for h in spacing), np.float64(eps), np.float64(2.0 * eps)))
    _kernel3("bf_ls_diagnostics_final")((1,), (_REDUCE_THREADS,), (partial, np.int32(blocks), out))
    return out


def bubble_sums(phi, velocity, spacing, eps, padding=WALLS, measure=None):
    """The bubble measure's six sums on the device (twin:
    ``bubble_measures.bubble_sums``, the default measure only):
    :func:`diagnostic_sums` in 2-D, :func:`diagnostic_sums_3d` in 3-D, on
    one process or a rank's slab, no host transfer.

    On a rank's slab the sums are its part, totalled over the ranks: in 2-D
    its squares take the next slab's first row, in 3-D its vertical
    gradient the neighbours' planes (one swap), its last coordinate its
    planes' in the grid.  Every rank decides alike (dimension, dtype, the
    face shapes; a flow's slabs have 10 planes or more) before the swap."""
    if measure is not None:
        return NotImplemented
    arrays = _sums_inputs(phi, velocity, spacing)
    if arrays is None:
        return NotImplemented
    phi, face = arrays
    spacing, eps = tuple(float(h) for h in spacing), float(eps)
    if padding is WALLS:
        return _sums(phi, face, spacing, eps)
    first = padding.offset
    return padding.total(_sums(padding.widened(phi, 1), face, spacing, eps, cells=phi.shape[0],
                               below=1 if first > 0 else 0, first=first))


def _sums(phi, face, spacing, eps, cells=None, below=0, first=0):
    """The sums' kernels of the field's dimension on ``cells`` planes (rows
    in 2-D; default all) from ``phi``'s plane ``below``, the first of them
    the grid's ``first``."""
    if phi.ndim == 3:
        return diagnostic_sums_3d(phi, face, spacing, eps, cells=cells, below=below,
                                  first_plane=first)
    return diagnostic_sums(phi[below:], face, *spacing, eps, cells=cells, first_row=first)


def _sums_inputs(phi, velocity, spacing):
    """``(phi, the vertical faces' velocity)`` as the sums' kernels take
    them, or None: another dimension than 2 or 3, spacings or velocity
    components of another number (:func:`_plane_sums_inputs`,
    :func:`_volume_sums_inputs`)."""
    nd = getattr(phi, "ndim", 0)
    if nd not in (2, 3) or len(spacing) != nd or len(velocity) != nd:
        return None
    return _plane_sums_inputs(phi, velocity) if nd == 2 else _volume_sums_inputs(phi, velocity)


def _plane_sums_inputs(phi, velocity):
    """``(phi, v)`` as the 2-D sums' kernel takes them (float64, C order),
    or None: a grid under 2 cells along an axis, faces of other shapes."""
    u, v = velocity
    arrays = _float64(phi, v)
    if arrays is None:
        return None
    phi, v = arrays
    ny, nx = phi.shape
    if min(nx, ny) < 2 or v.shape != (ny + 1, nx) or getattr(u, "shape", None) != (ny, nx + 1):
        return None
    return phi, v


def _volume_sums_inputs(phi, velocity):
    """``(phi, w)`` as the 3-D sums' kernel takes them (float64, C order),
    or None: a grid under 2 cells along an axis, ``w`` of another shape."""
    arrays = cuda.float64_nd(3, phi, velocity[2])
    if arrays is None:
        return None
    phi, w = arrays
    nz, ny, nx = phi.shape
    if min(nx, ny, nz) < 2 or w.shape != (nz + 1, ny, nx):
        return None
    return phi, w


