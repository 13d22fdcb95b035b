"""CUDA twins of the implicit viscous solve (CuPy, float64).

Registered on :mod:`bubbleflow.flow.viscosity`'s twins; the kernels are
``viscosity.cu`` beside this file: one launch per Chebyshev step (of both
velocity components: ``chebyshev_sweep``) where the array code launches about
twenty per component.  Compiled without FMA contraction, in the array code's
order of operations: the same bits (the reductions of ``residual_scalars``
sum in a fixed order of their own).  Another dtype or layout returns
``NotImplemented`` (the array code runs).  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["chebyshev_step", "chebyshev_sweep", "viscous_coefficients", "viscous_residual",
           "residual_scalars"]

_OPTIONS = ("--fmad=false",)
_THREADS = 256
_REDUCE_BLOCKS = 1024


_kernel = cuda.float64_kernels(__name__, "viscosity.cu", _OPTIONS)


def _blocks(n):
    return (max(1, min(-(-n // _THREADS), 65535)),), (_THREADS,)


def viscous_coefficients(component, mu, mu_n, rho_f, dt, hx, hy, s_low, s_high):
    """Twin of ``viscosity.viscous_coefficients`` (``mu_n`` None only): one launch."""
    import cupy as cp

    if mu_n is not None or getattr(mu, "dtype", None) != np.float64 \
            or getattr(rho_f, "dtype", None) != np.float64 or mu.ndim != 2 or min(mu.shape) < 2:
        return NotImplemented
    ny, nx = mu.shape
    u = component == "u"
    if rho_f.shape != ((ny, nx - 1) if u else (ny - 1, nx)):
        return NotImplemented
    mu, rho_f = cp.ascontiguousarray(mu), cp.ascontiguousarray(rho_f)
    out = [cp.empty_like(rho_f) for _ in range(5)] + [cp.empty(rho_f.size, dtype=np.float64)]
    hn, ht = (hx, hy) if u else (hy, hx)
    grid, block = _blocks(rho_f.size)
    _kernel("bf_visc_coefficients")(grid, block, (
        mu, rho_f, *out, np.int32(ny), np.int32(nx), np.int32(u), np.float64(dt),
        np.float64(dt * 2.0), np.float64(hn ** 2), np.float64(ht ** 2), np.float64(s_low),
        np.float64(s_high)))
    return tuple(out)


def viscous_residual(S, rhs, x):
    """Twin of ``viscosity.viscous_residual``: ``rhs - S x``, one launch."""
    import cupy as cp

    if _system_arrays(S, rhs, x) is None:
        return NotImplemented
    ny, nx = S.shape2d
    out = cp.empty(ny * nx, dtype=np.float64)
    grid, block = _blocks(ny * nx)
    _kernel("bf_visc_residual")(grid, block, (
        S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, rhs, x, out, np.int32(ny),
        np.int32(nx), np.int32(S.component == "u"), np.float64(S.s_low), np.float64(S.s_high)))
    return out


def _system_arrays(S, *work):
    """The kernels' arrays of ``S`` and ``work``, or None if one is not
    contiguous float64, or ``S`` not the 2-D layout (an n-D system,
    :class:`.viscosity_nd.ViscousSystemND`: its array code runs)."""
    if getattr(S, "k_plus", None) is None:
        return None
    arrays = (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.inv_diagonal, *work)
    if any(getattr(a, "dtype", None) != np.float64 for a in arrays) or \
            not all(a.flags.c_contiguous for a in arrays):
        return None
    return arrays


def residual_scalars(S, rhs, x):
    """Twin of ``viscosity.residual_scalars``: the residual and per-block
    partial sums and maxima in one launch, then one block."""
    import cupy as cp

    arrays = _system_arrays(S, rhs, x)
    if arrays is None or S.diagonal.dtype != np.float64 or not S.diagonal.flags.c_contiguous:
        return NotImplemented
    ny, nx = S.shape2d
    r = cp.empty(ny * nx, dtype=np.float64)
    blocks = max(1, min(-(-(ny * nx) // _THREADS), _REDUCE_BLOCKS))
    partial = cp.empty(5 * blocks, dtype=np.float64)
    _kernel("bf_visc_scalars_partial")((blocks,), (_THREADS,), (
        S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.diagonal, rhs, x, r, partial,
        np.int32(ny), np.int32(nx), np.int32(S.component == "u"), np.float64(S.s_low),
        np.float64(S.s_high)))
    out = cp.empty(5, dtype=np.float64)
    _kernel("bf_visc_scalars_final")((1,), (_THREADS,), (partial, np.int32(blocks), out))
    return r, out


#: One system of ``bf_visc_chebyshev_table`` (``struct ViscSystem``): ten
#: pointers, the two wall signs, four ints (112 bytes, no padding).
_SYSTEM_TABLE = np.dtype([(name, np.uint64) for name in
                          ("rho", "kp", "km", "tp", "tm", "inv", "x", "r", "d0", "d1")]
                         + [("s_low", np.float64), ("s_high", np.float64)]
                         + [(name, np.int32) for name in ("ny", "nx", "normal_is_x", "steps")])


def chebyshev_sweep(systems, xs, rs, ds, schedules):
    """Twin of ``viscosity.chebyshev_sweep``: one launch of
    ``bf_visc_chebyshev_table`` per step for every system (``blockIdx.y``
    the system), the systems' arrays and schedules copied to the device once."""
    import cupy as cp

    steps = max((len(s) for s in schedules), default=0)
    table = np.zeros(len(systems), dtype=_SYSTEM_TABLE)
    schedule = np.zeros((len(systems), max(steps, 1), 2), dtype=np.float64)
    spare = [cp.empty_like(d) for d in ds]
    for i, (S, x, r, d, e, sched) in enumerate(zip(systems, xs, rs, ds, spare, schedules)):
        arrays = _system_arrays(S, x, r, d, e)
        if arrays is None:
            return NotImplemented
        row = table[i]
        for name, a in zip(_SYSTEM_TABLE.names[:10], arrays):
            row[name] = a.data.ptr
        row["s_low"], row["s_high"] = S.s_low, S.s_high
        row["ny"], row["nx"] = S.shape2d
        row["normal_is_x"], row["steps"] = S.component == "u", len(sched)
        if sched:
            schedule[i, :len(sched)] = sched
    if steps == 0:
        return xs
    table_d = cp.asarray(table.view(np.uint8))
    schedule_d = cp.asarray(schedule)
    blocks = max(_blocks(S.shape2d[0] * S.shape2d[1])[0][0] for S in systems)
    kernel = _kernel("bf_visc_chebyshev_table")
    grid, block, width = (blocks, len(systems)), (_THREADS,), np.int32(schedule.shape[1])
    for k in range(steps):
        kernel(grid, block, (table_d, schedule_d, width, np.int32(k)))
    # (spare and the two tables go back to CuPy's pool, whose reuse is
    # ordered on this stream, after the launches.)
    return xs


def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """``x += d; r -= S d; d_new = keep d + gain D^-1 r`` (twin:
    ``viscosity.chebyshev_step``): one launch."""
    arrays = _system_arrays(S, x, r, d, d_new)
    if arrays is None:
        return NotImplemented
    ny, nx = S.shape2d
    grid, block = _blocks(ny * nx)
    _kernel("bf_visc_chebyshev_step")(grid, block, (*arrays, np.int32(ny), np.int32(nx), np.int32(S.component == "u"),
                            np.float64(S.s_low), np.float64(S.s_high), np.float64(keep),
                            np.float64(gain)))
    return x
