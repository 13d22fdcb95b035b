"""CUDA twin of the volume-of-fluid advection in 2-D and 3-D (CuPy, float64).

:func:`advect` is the ``"cupy"`` variant of
:func:`bubbleflow.flow.vof_advection.advect` (the tests compare the two on
the GPU); :func:`advect_2d` and :func:`advect_3d` are the calls of each
dimension.  The kernels are ``vof.cu`` beside this file (``vof3.cu`` in
3-D; the gas sums ``vof_gas.cu``).  The array code
launches hundreds of small kernels per step (the PLIC reconstruction, the
slab cuts and the update, for each sweep); a call here launches one kernel
per direction sweep in 2-D (``bf_vof_sweep``: a thread per cell
reconstructs the donor cells' PLIC lines, Youngs' normal or the level
set's and the line constant, cuts the slabs, and writes ``c - (F_out -
F_in) + indicator * dilatation``; the last sweep also clips), and two in
3-D (``bf_vof_mixed3`` lists the cells neither full nor empty,
``bf_vof_planes3`` makes their planes, each once; then ``bf_vof_sweep3``,
the slabs and the update).  Two launches a step in 2-D, nine in 3-D, plus a
few CuPy reductions when ``info`` is asked for.

The kernels are compiled without FMA contraction and follow the array
code's order of operations (the ``info`` sums are the array code's own CuPy
expressions).  Calls they do not cover -- another dtype than float64, a grid
of fewer than 3 cells along an axis, mismatched shapes, ``first_axis`` not
an array axis -- return ``NotImplemented`` and the array code runs (and
raises where it should); so do grids of another dimension.  CuPy is
imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from .padding import WALLS
from .vof_limits import CLIP_TOLERANCE, times_cell_volume

__all__ = ["advect", "advect_2d", "advect_3d", "gas_sums", "region_moments", "REGIONS_A_LAUNCH"]

#: No FMA contraction: the kernel rounds as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads per block: 32 along x (one warp per row segment), 8 rows.
_BLOCK = (32, 8)
#: Cells the kernel needs along each axis.
_MIN_CELLS = 3
#: The launch of bf_vof_planes3, whose number of cells the host does not
#: read: enough threads for the mixed cells of a large grid's gas, each
#: striding past them where there are more.
_PLANE_BLOCKS, _PLANE_THREADS = 1024, 128


_kernel = cuda.float64_kernels(__name__, "vof.cu", _OPTIONS, ndims=(2,))
#: The 3-D kernels: a source of their own (a 2-D run compiles none of them).
_kernel3 = cuda.float64_kernels(__name__, "vof3.cu", _OPTIONS, ndims=(3,))
#: The gas sums: a short source of their own, compiled apart from the sweeps'.
_gas_kernel = cuda.float64_kernels(__name__, "vof_gas.cu", _OPTIONS)


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
    if len(velocity) == 3 and len(spacing) == 3:
        return advect_3d(c, velocity, dt, spacing, first_axis, normal_from, info)
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


def advect_3d(c, velocity, dt, spacing, first_axis=0, normal_from=None, info=None):
    """One step of ``c_t + div(c u) = 0`` on a 3-D grid: per direction, in
    the array code's order, the cells neither full nor empty listed
    (``bf_vof_mixed3``), their planes (``bf_vof_planes3``) and the sweep
    (``bf_vof_sweep3``); with
    ``info``, its two numbers from CuPy reductions as the array code
    computes them."""
    import cupy as cp

    fields = (c,) + tuple(velocity) + (() if normal_from is None else (normal_from,))
    arrays = cuda.float64_3d(*fields)
    if arrays is None or first_axis not in (0, 1, 2):
        return NotImplemented
    c, vel = arrays[0], arrays[1:4]
    phi = arrays[4] if normal_from is not None else c
    nz, ny, nx = c.shape
    faces = ((nz, ny, nx + 1), (nz, ny + 1, nx), (nz + 1, ny, nx))
    if min(nx, ny, nz) < _MIN_CELLS or phi.shape != c.shape \
            or any(v.shape != f for v, f in zip(vel, faces)):
        return NotImplemented
    dt = float(dt)
    hx, hy, hz = (float(h) for h in spacing)
    h = (hx, hy, hz)
    grid, block = cuda.grid_2d(nx, ny * nz, _BLOCK)
    mixed_cells = _kernel3("bf_vof_mixed3")
    sweep, make_planes = _kernel3("bf_vof_sweep3"), _kernel3("bf_vof_planes3")
    out = cp.empty_like(c)
    raw = cp.empty_like(c) if info is not None else out
    work = (cp.empty_like(c), cp.empty_like(c))
    planes = cp.empty(c.shape + (4,), dtype=cp.float64)
    mixed, counts = cp.empty(c.size, dtype=cp.int64), cp.zeros(3, dtype=cp.uint64)
    sizes = (np.int32(nx), np.int32(ny), np.int32(nz))
    spacings = (np.float64(hx), np.float64(hy), np.float64(hz))
    src = c
    for k in range(3):
        # Array axis (first_axis + k) % 3 is grid axis 2 - that.
        axis = 2 - (first_axis + k) % 3
        last = k == 2
        dst = out if last else work[k]
        count = counts[k:k + 1]
        cuda.launch_1d(mixed_cells, c.size, (src, mixed, count, np.int64(c.size)))
        make_planes((_PLANE_BLOCKS,), (_PLANE_THREADS,), (
            src, phi, mixed, count, planes, *sizes, np.int32(normal_from is not None),
            *spacings))
        sweep(grid, block, (
            src, c, planes, vel[axis], dst, raw, *sizes, np.int32(axis), np.int32(last),
            np.int32(last and info is not None), *spacings, np.float64(dt),
            np.float64(dt / h[axis]), np.float64(CLIP_TOLERANCE),
            np.float64(1.0 + CLIP_TOLERANCE)))
        src = dst
    if info is not None:
        info["clipped"] = times_cell_volume(float(cp.sum(out - raw)), spacing)
        info["excursion"] = max(0.0, float(cp.max(cp.maximum(-out, out - 1.0))))
    return out


#: Threads a block of the gas sums' first pass (its blocks:
#: compute.cuda.reduce_blocks).
_REDUCE_THREADS = 256


def gas_sums(c, velocity, spacing, padding=WALLS):
    """Twin of ``vof_diagnostics.gas_sums``: per-block sums
    (``bf_vof_gas_partial``), then one block (``bf_vof_gas_final``), in a
    fixed order: equal to the array code's sums to rounding.  On a rank's
    slab its planes' coordinates are the grid's (``padding.offset``) and
    the sums are totalled over the ranks."""
    import cupy as cp

    nd = getattr(c, "ndim", 0)
    if nd not in (2, 3) or len(velocity) != nd or len(spacing) != nd:
        return NotImplemented
    arrays = cuda.float64_nd(nd, c, velocity[-1])
    if arrays is None:
        return NotImplemented
    c, top = arrays
    faces = (c.shape[0] + 1,) + c.shape[1:]
    if top.shape != faces:
        return NotImplemented
    cells = (1,) * (3 - nd) + c.shape
    hz = spacing[2] if nd == 3 else 0.0
    blocks = cuda.reduce_blocks(c.size, _REDUCE_THREADS)
    partial = cp.empty(5 * blocks, dtype=cp.float64)
    out = cp.empty(nd + 2, dtype=cp.float64)
    _gas_kernel("bf_vof_gas_partial")((blocks,), (_REDUCE_THREADS,), (
        c, top, partial, np.int32(cells[2]), np.int32(cells[1]), np.int32(cells[0]),
        np.float64(spacing[0]), np.float64(spacing[1]), np.float64(hz), np.int32(nd == 3),
        np.int32(padding.offset)))
    _gas_kernel("bf_vof_gas_final")((1,), (_REDUCE_THREADS,), (partial, np.int32(blocks),
                                                              np.int32(nd + 2), out))
    return padding.total(out)


#: Regions one launch of ``bf_region_moments_partial`` sums (``BF_RM_REGIONS``).
REGIONS_A_LAUNCH = 4


def region_moments(owner, labels, c, velocity, spacing, interface, count):
    """Twin of ``gas_regions.region_moments`` for at most
    :data:`REGIONS_A_LAUNCH` regions: per-block sums of every region's
    moments in one pass over the cells (``bf_region_moments_partial``),
    then one block (``bf_vof_gas_final``), in a fixed order: equal to the
    array code's sums to rounding.  More regions: ``NotImplemented``."""
    import cupy as cp

    nd = getattr(c, "ndim", 0)
    if nd not in (2, 3) or not 1 <= count <= REGIONS_A_LAUNCH or len(velocity) != nd:
        return NotImplemented
    arrays = cuda.float64_nd(nd, c, *velocity, interface)
    ints = [a for a in (labels, owner) if a is not None]
    if arrays is None or not all(a.dtype == cp.int32 and a.shape == c.shape for a in ints):
        return NotImplemented
    c, *faces, interface = arrays
    if interface.shape != c.shape:
        return NotImplemented
    single = owner is None                  # every cell region 1
    labels = cp.ascontiguousarray(labels)
    owner = labels if single else cp.ascontiguousarray(owner)
    cells = (1,) * (3 - nd) + c.shape
    faces = list(faces) + [faces[-1]] * (3 - nd)       # (2-D: no w, never read)
    hz = spacing[2] if nd == 3 else 0.0
    quantities = 2 * nd + 3
    blocks = cuda.reduce_blocks(c.size, _REDUCE_THREADS)
    partial = cp.empty(quantities * count * blocks, dtype=cp.float64)
    out = cp.empty(quantities * count, dtype=cp.float64)
    _gas_kernel("bf_region_moments_partial")((blocks,), (_REDUCE_THREADS,), (
        owner, labels, c, *faces, interface, partial, np.int32(cells[2]), np.int32(cells[1]),
        np.int32(cells[0]), np.float64(spacing[0]), np.float64(spacing[1]), np.float64(hz),
        np.int32(nd == 3), np.int32(single), np.int32(count)))
    _gas_kernel("bf_vof_gas_final")((1,), (_REDUCE_THREADS,), (
        partial, np.int32(blocks), np.int32(quantities * count), out))
    return list(cp.asnumpy(out).reshape(quantities, count))
