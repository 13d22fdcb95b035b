"""CUDA variants of the implicit viscous solve's twins for the one-process
3-D systems (CuPy, float64).

Called through the ``*_nd`` dispatchers of :mod:`.viscosity_cuda` (registered
on the twins of :mod:`.viscosity` and :mod:`.viscosity_chebyshev`); the
kernels are ``viscosity3.cu`` beside this file:

* :func:`viscous_coefficients`: one launch (the edges' viscosity formed in
  the kernel); the couplings of each grid axis ``b`` are the two views
  ``(before, after)`` of one array ``c_b``, as the array code's are;
* :func:`chebyshev_sweep`: one launch a step for every component
  (``blockIdx.z`` the system), the systems' arrays in a table written on
  the device once; :func:`chebyshev_step`, :func:`viscous_residual`: one
  launch;
* :func:`residual_scalars`: per-block partials then one block.

Compiled without FMA contraction, in the array code's n-D order of
operations (:func:`.viscosity.planar_order`): the same bits (the norms of
``residual_scalars`` sum in a fixed order of their own).  Calls these do not
cover return ``NotImplemented`` and the array code runs: another dimension,
a rank's slab (a padding other than the walls', a system with a
communicator: ``viscosity_cuda.slab_chebyshev_sweep`` gives the Chebyshev
steps the planes of its slab as a one-process system), another dtype than
float64, work arrays or couplings not laid out contiguously, fewer than
:data:`_MIN_CELLS` cells along an axis.  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from .chebyshev_launch import SweepPlan, device_schedule, sweep
from .padding import WALLS, WallPadding, along

__all__ = ["viscous_coefficients", "system_arrays", "chebyshev_step", "chebyshev_sweep",
           "viscous_residual", "residual_scalars"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads of the per-unknown kernels: 32 along x, 8 rows (BF_CELLS3).
_BLOCK = (32, 8)
#: Threads a block of the residual's reduction.
_THREADS = 256
#: Cells the kernels take along each axis at least (an interior face on each).
_MIN_CELLS = 2

_kernel3 = cuda.float64_kernels(__name__, "viscosity3.cu", _OPTIONS, ndims=(3,))


def _grid(shape, systems=1):
    """Launch shape of a BF_CELLS3 kernel over unknowns of ``shape`` (the
    largest of ``systems`` systems, one a ``blockIdx.z``)."""
    n0, n1, n2 = shape
    (gx, gy), block = cuda.grid_2d(n2, n1 * n0, _BLOCK)
    return (gx, gy, systems), block


def _extended(shape, k):
    """``shape`` with one more entry along array axis ``k``: a coupling
    array's."""
    out = list(shape)
    out[k] += 1
    return tuple(out)


def viscous_coefficients(a, mu, rho_f, dt, spacing, signs, padding=WALLS):
    """Twin of ``viscosity.viscous_coefficients`` on a 3-D grid of one
    process: one launch of ``bf_visc3_coefficients``."""
    import cupy as cp

    if not isinstance(padding, WallPadding) or len(spacing) != 3 or a not in (0, 1, 2):
        return NotImplemented
    arrays = cuda.float64_nd(3, mu, rho_f)
    if arrays is None:
        return NotImplemented
    mu, rho_f = arrays
    unknowns = list(mu.shape)
    unknowns[2 - a] -= 1
    if min(mu.shape) < _MIN_CELLS or rho_f.shape != tuple(unknowns):
        return NotImplemented
    ghost_signs = tuple((0.0, 0.0) if b == a else tuple(float(s) for s in signs[b])
                        for b in range(3))
    couplings = [cp.empty(_extended(rho_f.shape, 2 - b), dtype=np.float64) for b in range(3)]
    diag = cp.empty_like(rho_f)
    inv_diag = cp.empty(rho_f.size, dtype=np.float64)
    nz, ny, nx = mu.shape
    # (dt * 2.0 and h ** 2 formed here as the array code forms them.)
    _kernel3("bf_visc3_coefficients")(*_grid(rho_f.shape), (
        mu, rho_f, *couplings, diag, inv_diag, np.int32(nz), np.int32(ny), np.int32(nx),
        np.int32(a), np.float64(dt), np.float64(dt * 2.0), *(np.float64(h ** 2) for h in spacing),
        *(np.float64(s) for pair in ghost_signs for s in pair)))
    pairs = tuple((c[along(3, 2 - b, slice(None, -1))], c[along(3, 2 - b, slice(1, None))])
                  for b, c in enumerate(couplings))
    return pairs, ghost_signs, diag, inv_diag


def _coupling_array(before, after, k):
    """The one array ``c`` whose views along array axis ``k`` are
    ``before = c[:-1]`` and ``after = c[1:]`` (C-contiguous float64), on the
    same memory; None where the two are not laid out so."""
    import cupy as cp

    if before.dtype != np.float64 or after.dtype != np.float64 or before.shape != after.shape:
        return None
    shape = _extended(before.shape, k)
    strides, step = [], 8
    for n in reversed(shape):
        strides.append(step)
        step *= n
    strides = tuple(reversed(strides))
    if before.strides != strides or after.strides != strides \
            or after.data.ptr - before.data.ptr != strides[k]:
        return None
    return cp.ndarray(shape, np.float64, before.data)


def _contiguous_float64(*arrays):
    return all(getattr(a, "dtype", None) == np.float64 and a.flags.c_contiguous for a in arrays)


def system_arrays(S, *work):
    """``(rho_f, (c_0, c_1, c_2), signs)`` of a one-process 3-D
    :class:`.viscosity.ViscousSystem` as the kernels read it (``signs`` the
    six ghost signs, grid-axis order, low first), or None where ``S`` is not
    one or an array of it or of ``work`` (each of the system's size) is not
    contiguous float64."""
    if getattr(S, "ndim", None) != 3 or getattr(S, "comm", None) is not None \
            or not isinstance(getattr(S, "padding", None), WallPadding):
        return None
    rho = S.rho_f
    if rho.ndim != 3 or min(rho.shape) < 1 or tuple(S.owned) != (0, rho.shape[0]) \
            or tuple(S.ext) != tuple(S.owned):
        return None                 # (a slab's rows: the neighbours' planes are needed)
    if not _contiguous_float64(rho, S.diagonal, S.inv_diagonal, *work) \
            or any(w.size != rho.size for w in work):
        return None
    couplings = []
    for b, (before, after) in enumerate(S.couplings):
        c = _coupling_array(before, after, 2 - b)
        if c is None or before.shape != rho.shape:
            return None
        couplings.append(c)
    signs = tuple(np.float64(s) for pair in S.ghost_signs for s in pair)
    return rho, tuple(couplings), signs


def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """Twin of ``viscosity_chebyshev.chebyshev_step`` (``x += d; r -= S d;
    d_new = keep d + gain D^-1 r``): one launch of ``bf_visc3_chebyshev_step``."""
    view = system_arrays(S, x, r, d, d_new)
    if view is None:
        return NotImplemented
    rho, couplings, signs = view
    _kernel3("bf_visc3_chebyshev_step")(*_grid(rho.shape), (
        rho, *couplings, S.inv_diagonal, x, r, d, d_new, *(np.int32(n) for n in rho.shape),
        *signs, np.float64(keep), np.float64(gain)))
    return x


#: One system of ``bf_visc3_chebyshev_table`` (``struct Visc3System``): nine
#: pointers, six wall signs, four ints (136 bytes, no padding).
_SYSTEM_TABLE = np.dtype([(name, np.uint64) for name in
                          ("rho", "c0", "c1", "c2", "inv", "x", "r", "d0", "d1")]
                         + [(f"s{q}", np.float64) for q in range(6)]
                         + [(name, np.int32) for name in ("n0", "n1", "n2", "steps")])


def chebyshev_sweep(systems, xs, rs, ds, schedule, steps):
    """Twin of ``viscosity_chebyshev.chebyshev_sweep``: one launch of
    ``bf_visc3_chebyshev_table`` per step for every system, the systems'
    arrays in a table written on the device (:func:`sweep_plan`)."""
    return sweep(sweep_plan, systems, xs, rs, ds, schedule, steps)


def sweep_plan(systems, xs, rs, ds, spare, schedule, steps):
    """The :class:`.chebyshev_launch.SweepPlan` of a sweep of ``systems``
    (directions ``ds`` and ``spare`` alternating), or NotImplemented."""
    schedule = device_schedule(schedule, len(systems))
    if schedule is None:
        return NotImplemented
    table = np.zeros(len(systems), dtype=_SYSTEM_TABLE)
    shapes, keep = [], []
    for i, (S, x, r, d, e, k) in enumerate(zip(systems, xs, rs, ds, spare, steps)):
        view = system_arrays(S, x, r, d, e)
        if view is None:
            return NotImplemented
        keep.append(view)
        rho, couplings, signs = view
        row = table[i]
        for name, arr in zip(_SYSTEM_TABLE.names[:9],
                             (rho, *couplings, S.inv_diagonal, x, r, d, e)):
            row[name] = arr.data.ptr
        for q, s in enumerate(signs):
            row[f"s{q}"] = s
        row["n0"], row["n1"], row["n2"] = rho.shape
        row["steps"] = k
        shapes.append(rho.shape)
    grid = tuple(max(g) for g in zip(*(_grid(s, len(systems))[0] for s in shapes))) or (1,)
    return SweepPlan(_kernel3("bf_visc3_chebyshev_table"), grid, _BLOCK, table.view(np.uint8),
                     schedule, max(steps, default=0), keep)


def viscous_residual(S, rhs, x):
    """Twin of ``viscosity_chebyshev.viscous_residual``: ``rhs - S x``, one
    launch of ``bf_visc3_residual``."""
    import cupy as cp

    view = system_arrays(S, rhs, x)
    if view is None:
        return NotImplemented
    rho, couplings, signs = view
    out = cp.empty(rho.size, dtype=np.float64)
    _kernel3("bf_visc3_residual")(*_grid(rho.shape), (
        rho, *couplings, rhs, x, out, *(np.int32(n) for n in rho.shape), *signs))
    return out


def residual_scalars(S, rhs, x):
    """Twin of ``viscosity_chebyshev.residual_scalars``: the residual and
    per-block partial sums and maxima in one launch
    (``bf_visc3_scalars_partial``), then one block (``bf_visc_scalars_final``)."""
    import cupy as cp

    view = system_arrays(S, rhs, x)
    if view is None:
        return NotImplemented
    rho, couplings, signs = view
    r = cp.empty(rho.size, dtype=np.float64)
    blocks = cuda.reduce_blocks(rho.size, _THREADS)
    partial = cp.empty(5 * blocks, dtype=np.float64)
    _kernel3("bf_visc3_scalars_partial")((blocks,), (_THREADS,), (
        rho, *couplings, S.diagonal, rhs, x, r, partial, *(np.int32(n) for n in rho.shape),
        *signs))
    out = cp.empty(5, dtype=np.float64)
    _kernel3("bf_visc_scalars_final")((1,), (_THREADS,), (partial, np.int32(blocks), out))
    return r, out
