"""CUDA twins of the implicit viscous solve (CuPy, float64).

The ``*_nd`` variants at the end are the ones registered on the twins of
:mod:`.viscosity` and :mod:`.viscosity_chebyshev`: on a 2-D grid they call
the ``planar_*`` adapters (the one-process 2-D systems, their couplings
unpacked into the layout of the kernels here; a rank's Chebyshev steps on
its slab by :func:`slab_chebyshev_sweep`), on a 3-D grid those of
:mod:`.viscosity3_cuda` (kernels ``viscosity3.cu``); a system neither
takes returns ``NotImplemented``.  The 2-D kernels are
``viscosity.cu`` beside this file: one launch per Chebyshev step (of both
velocity components: ``chebyshev_sweep``) where the array code launches
about twenty per component.  Compiled without FMA contraction, in the array
code's order of operations: the same bits (the reductions of
``residual_scalars`` sum in a fixed order of their own).  Another dtype or
layout returns ``NotImplemented`` (the array code runs).  CuPy is imported
inside the functions only.
"""
from __future__ import annotations

import weakref
from types import SimpleNamespace

import numpy as np

from ..compute import cuda
from . import viscosity3_cuda
from .chebyshev_launch import SlabSweepGraphs, SweepPlan, capturing, device_schedule, sweep
from .padding import WALLS, WallPadding

__all__ = ["chebyshev_step", "chebyshev_sweep", "viscous_coefficients", "viscous_residual",
           "residual_scalars", "planar_system", "planar_coefficients", "slab_system",
           "slab_chebyshev_sweep", "planar_chebyshev_step",
           "planar_chebyshev_sweep", "planar_residual", "planar_residual_scalars",
           "viscous_coefficients_nd", "chebyshev_step_nd", "chebyshev_sweep_nd",
           "viscous_residual_nd", "residual_scalars_nd"]

_OPTIONS = ("--fmad=false",)
_THREADS = 256


_kernel = cuda.float64_kernels(__name__, "viscosity.cu", _OPTIONS, ndims=(2,))


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
    :class:`.viscosity.ViscousSystem`: its array code runs)."""
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
    blocks = cuda.reduce_blocks(ny * nx, _THREADS)
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


def chebyshev_sweep(systems, xs, rs, ds, schedule, steps):
    """Twin of ``viscosity.chebyshev_sweep``: one launch of
    ``bf_visc_chebyshev_table`` per step for every system (``blockIdx.y``
    the system), the systems' arrays in a table written on the device
    (:func:`sweep_plan`)."""
    return sweep(sweep_plan, systems, xs, rs, ds, schedule, steps)


def sweep_plan(systems, xs, rs, ds, spare, schedule, steps):
    """The :class:`.chebyshev_launch.SweepPlan` of a sweep of ``systems``
    (directions ``ds`` and ``spare`` alternating), or NotImplemented."""
    schedule = device_schedule(schedule, len(systems))
    if schedule is None:
        return NotImplemented
    table = np.zeros(len(systems), dtype=_SYSTEM_TABLE)
    keep = []
    for i, (S, x, r, d, e, k) in enumerate(zip(systems, xs, rs, ds, spare, steps)):
        arrays = _system_arrays(S, x, r, d, e)
        if arrays is None:
            return NotImplemented
        keep.append(arrays)
        row = table[i]
        for name, a in zip(_SYSTEM_TABLE.names[:10], arrays):
            row[name] = a.data.ptr
        row["s_low"], row["s_high"] = S.s_low, S.s_high
        row["ny"], row["nx"] = S.shape2d
        row["normal_is_x"], row["steps"] = S.component == "u", k
    blocks = max((_blocks(S.shape2d[0] * S.shape2d[1])[0][0] for S in systems), default=1)
    return SweepPlan(_kernel("bf_visc_chebyshev_table"), (blocks, len(systems)), (_THREADS,),
                     table.view(np.uint8), schedule, max(steps, default=0), keep)


def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """``x += d; r -= S d; d_new = keep d + gain D^-1 r`` (twin:
    ``viscosity.chebyshev_step``): one launch."""
    arrays = _system_arrays(S, x, r, d, d_new)
    if arrays is None:
        return NotImplemented
    ny, nx = S.shape2d
    grid, block = _blocks(ny * nx)
    _kernel("bf_visc_chebyshev_step")(grid, block, (
        *arrays, np.int32(ny), np.int32(nx), np.int32(S.component == "u"), np.float64(S.s_low),
        np.float64(S.s_high), np.float64(keep), np.float64(gain)))
    return x


# ---------------------------------------------------------------- n-D adapters
def planar_coefficients(a, mu, rho_f, dt, spacing, signs, padding=WALLS):
    """Twin of ``viscosity.viscous_coefficients`` for one process in
    2-D: :func:`viscous_coefficients`' couplings as ``(before, after)``
    pairs per grid axis (``k`` along the component's axis, ``t`` across)."""
    if getattr(mu, "ndim", None) != 2 or not isinstance(padding, WallPadding):
        return NotImplemented
    s_low, s_high = (float(s) for s in signs[1 - a])
    out = viscous_coefficients("u" if a == 0 else "v", mu, None, rho_f, dt, *spacing, s_low,
                               s_high)
    if out is NotImplemented:
        return out
    k_plus, k_minus, t_plus, t_minus, diag, inv_diag = out
    couplings, ghost_signs = [None, None], [None, None]
    couplings[a], couplings[1 - a] = (k_minus, k_plus), (t_minus, t_plus)
    ghost_signs[a], ghost_signs[1 - a] = (0.0, 0.0), (s_low, s_high)
    return tuple(couplings), tuple(ghost_signs), diag, inv_diag


def _kernel_view(S, shape, rho_f, diagonal, inv_diagonal, array=lambda a: a):
    """``S``'s couplings and wall signs in the kernels' layout (``k`` along
    the component's axis, ``t`` across), each through ``array``, with the
    given shape, face density and diagonals."""
    a = S.component
    (k_minus, k_plus), (t_minus, t_plus) = S.couplings[a], S.couplings[1 - a]
    s_low, s_high = S.ghost_signs[1 - a]
    return SimpleNamespace(component="u" if a == 0 else "v", shape2d=shape, rho_f=rho_f,
                           k_plus=array(k_plus), k_minus=array(k_minus), t_plus=array(t_plus),
                           t_minus=array(t_minus), diagonal=diagonal, inv_diagonal=inv_diagonal,
                           s_low=s_low, s_high=s_high)


def planar_system(S):
    """A :class:`.viscosity.ViscousSystem` as the kernels read it (the
    attributes of ``viscosity.ViscousSystem``), or None where it is not a
    one-process 2-D system."""
    if not getattr(S, "planar", False) or getattr(S, "comm", None) is not None:
        return None                 # (a slab's products need the neighbours' planes)
    return _kernel_view(S, S.shape_nd, S.rho_f, S.diagonal, S.inv_diagonal)


def slab_system(S):
    """A rank's :class:`.viscosity.ViscousSystem` as the kernels read it on
    its planes ``ext`` (the owned planes and the neighbours' planes beside
    them, which an exchange fills before every product; the kernels' results
    on those planes are not used), or None where ``S`` is not a rank's
    system: in 2-D this module's layout, in 3-D a one-process system of
    those planes for :mod:`.viscosity3_cuda`."""
    if getattr(S, "comm", None) is None:
        return None
    import cupy as cp

    c = cp.ascontiguousarray
    if getattr(S, "ndim", None) == 3:
        diagonal, planes = c(S.diagonal_ext), S.rho_ext.shape[0]
        return SimpleNamespace(ndim=3, comm=None, padding=WALLS, owned=(0, planes),
                               ext=(0, planes), rho_f=c(S.rho_ext), couplings=S.couplings,
                               ghost_signs=S.ghost_signs, diagonal=diagonal,
                               inv_diagonal=(1.0 / diagonal).ravel())
    if not getattr(S, "planar", False):
        return None
    diagonal = c(S.diagonal_ext)
    return _kernel_view(S, S.rho_ext.shape, c(S.rho_ext), diagonal, (1.0 / diagonal).ravel(), c)


#: Per communicator, its slab sweeps' work arrays and graphs.
_SLAB_GRAPHS = weakref.WeakKeyDictionary()


def slab_chebyshev_sweep(systems, xs, rs, ds, schedule, steps):
    """Twin of ``viscosity_chebyshev.chebyshev_sweep`` for a rank's
    systems: :func:`sweep_plan` (in 3-D ``viscosity3_cuda``'s) on their
    planes ``ext`` (:func:`slab_system`), each system's direction exchanged
    with the neighbours before every step (the owned end planes out, the
    neighbours' into the planes beside them), where the array code swaps
    inside every product.  The planes' work arrays are kept from sweep to
    sweep and a sweep of the same step counts is replayed from a CUDA graph
    (:class:`.chebyshev_launch.SlabSweepGraphs`); a sweep that a caller
    captures takes work arrays of its own, which the caller's graph holds."""
    import cupy as cp

    views = [slab_system(S) for S in systems]
    if not views or any(v is None for v in views):
        return NotImplemented
    plan_of = viscosity3_cuda.sweep_plan if _of_3d_grids(*systems) else sweep_plan
    comm = systems[0].comm
    shapes = [S.rho_ext.shape for S in systems]
    graphs = None
    if not capturing():
        graphs = _SLAB_GRAPHS.get(comm)
        if graphs is None:
            graphs = _SLAB_GRAPHS[comm] = SlabSweepGraphs()
    work = (graphs.arrays(shapes) if graphs is not None else
            [[cp.zeros(int(np.prod(s)), dtype=np.float64) for _ in range(4)] for s in shapes])
    for S, arrays, rows in zip(systems, work, zip(xs, rs, ds)):
        for ext, part in zip(arrays, rows):
            ext.reshape(S.rho_ext.shape)[S.keep] = part.reshape(S.shape_nd)
    xe, re, de, spare = (list(a) for a in zip(*work))

    def exchange(k, directions):
        handles = []
        for S, d, count in zip(systems, directions, steps):
            lower, upper = S.padding.slab.lower, S.padding.slab.upper
            if k >= count or (lower is None and upper is None):
                continue
            plane = d.reshape(S.rho_ext.shape)
            own = plane[S.keep]
            handles.append((S.comm, S.comm.start_exchange(
                lower, upper, own[:1], own[-1:], plane[:1] if lower is not None else None,
                plane[-1:] if upper is not None else None)))
        for system_comm, handle in handles:
            system_comm.wait(handle)

    plan = plan_of(views, xe, re, de, spare, schedule, steps)
    if plan is NotImplemented:
        return plan
    if plan.steps and graphs is None:
        plan.run(*plan.upload(), de, spare, exchange)
    elif plan.steps:
        graphs.run(comm, plan, de, spare, exchange, list(steps))
    for S, x, r, x_ext, r_ext in zip(systems, xs, rs, xe, re):
        x[...] = x_ext.reshape(S.rho_ext.shape)[S.keep].ravel()
        r[...] = r_ext.reshape(S.rho_ext.shape)[S.keep].ravel()
    return xs


def planar_chebyshev_step(S, x, r, d, d_new, keep, gain):
    """Twin of ``viscosity_chebyshev.chebyshev_step``: :func:`chebyshev_step`."""
    view = planar_system(S)
    return NotImplemented if view is None else chebyshev_step(view, x, r, d, d_new, keep, gain)


def planar_chebyshev_sweep(systems, xs, rs, ds, schedule, steps):
    """Twin of ``viscosity_chebyshev.chebyshev_sweep``: :func:`chebyshev_sweep`."""
    views = [planar_system(S) for S in systems]
    if any(v is None for v in views):
        return NotImplemented
    return chebyshev_sweep(views, xs, rs, ds, schedule, steps)


def planar_residual(S, rhs, x):
    """Twin of ``viscosity_chebyshev.viscous_residual``: :func:`viscous_residual`."""
    view = planar_system(S)
    return NotImplemented if view is None else viscous_residual(view, rhs, x)


def planar_residual_scalars(S, rhs, x):
    """Twin of ``viscosity_chebyshev.residual_scalars``: :func:`residual_scalars`."""
    view = planar_system(S)
    return NotImplemented if view is None else residual_scalars(view, rhs, x)


# ------------------------------------------------------ variants of the twins
# One CuPy variant a twin: the 2-D adapters above, or on a 3-D grid those of
# viscosity3_cuda (each returns NotImplemented for what it does not take).

def _of_3d_grids(*systems):
    """Whether every system is of a 3-D grid."""
    return bool(systems) and all(getattr(S, "ndim", None) == 3 for S in systems)


def viscous_coefficients_nd(a, mu, rho_f, dt, spacing, signs, padding=WALLS):
    """Variant of ``viscosity.viscous_coefficients``: :func:`planar_coefficients`,
    in 3-D ``viscosity3_cuda.viscous_coefficients``."""
    if getattr(mu, "ndim", None) == 3:
        return viscosity3_cuda.viscous_coefficients(a, mu, rho_f, dt, spacing, signs, padding)
    return planar_coefficients(a, mu, rho_f, dt, spacing, signs, padding)


def chebyshev_step_nd(S, x, r, d, d_new, keep, gain):
    """Variant of ``viscosity_chebyshev.chebyshev_step``: :func:`planar_chebyshev_step`,
    in 3-D ``viscosity3_cuda.chebyshev_step``."""
    step = viscosity3_cuda.chebyshev_step if _of_3d_grids(S) else planar_chebyshev_step
    return step(S, x, r, d, d_new, keep, gain)


def chebyshev_sweep_nd(systems, xs, rs, ds, schedule, steps):
    """Variant of ``viscosity_chebyshev.chebyshev_sweep``: :func:`planar_chebyshev_sweep`,
    in 3-D ``viscosity3_cuda.chebyshev_sweep``; a rank's systems:
    :func:`slab_chebyshev_sweep`."""
    if any(getattr(S, "comm", None) is not None for S in systems):
        return slab_chebyshev_sweep(systems, xs, rs, ds, schedule, steps)
    run = viscosity3_cuda.chebyshev_sweep if _of_3d_grids(*systems) else planar_chebyshev_sweep
    return run(systems, xs, rs, ds, schedule, steps)


def viscous_residual_nd(S, rhs, x):
    """Variant of ``viscosity_chebyshev.viscous_residual``: :func:`planar_residual`,
    in 3-D ``viscosity3_cuda.viscous_residual``."""
    return (viscosity3_cuda.viscous_residual if _of_3d_grids(S) else planar_residual)(S, rhs, x)


def residual_scalars_nd(S, rhs, x):
    """Variant of ``viscosity_chebyshev.residual_scalars``: :func:`planar_residual_scalars`,
    in 3-D ``viscosity3_cuda.residual_scalars``."""
    scalars = viscosity3_cuda.residual_scalars if _of_3d_grids(S) else planar_residual_scalars
    return scalars(S, rhs, x)
