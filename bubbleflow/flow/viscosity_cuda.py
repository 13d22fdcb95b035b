"""CUDA twin of the implicit viscous solve's Chebyshev step (CuPy, float64).

Registered on :func:`bubbleflow.flow.viscosity.chebyshev_step`; the kernel is
``viscosity.cu`` beside this file: one launch per step where the array code
launches about twenty.  Compiled without FMA contraction, in the array code's
order of operations: the same bits.  Another dtype returns ``NotImplemented``
(the array code runs).  CuPy is imported inside the function only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["chebyshev_step", "viscous_coefficients", "viscous_residual"]

_OPTIONS = ("--fmad=false",)
_THREADS = 256


@cuda.kernel_cache
def _kernel(name="bf_visc_chebyshev_step"):
    code = "typedef double T;\n" + cuda.source(__name__, "viscosity.cu")
    return cuda.function(code, name, options=_OPTIONS)


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

    arrays = (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, rhs, x)
    if any(getattr(a, "dtype", None) != np.float64 for a in arrays) or \
            not all(a.flags.c_contiguous for a in arrays):
        return NotImplemented
    ny, nx = S.shape2d
    out = cp.empty(ny * nx, dtype=np.float64)
    grid, block = _blocks(ny * nx)
    _kernel("bf_visc_residual")(grid, block, (
        S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, rhs, x, out, np.int32(ny),
        np.int32(nx), np.int32(S.component == "u"), np.float64(S.s_low), np.float64(S.s_high)))
    return out


def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """``x += d; r -= S d; d_new = keep d + gain D^-1 r`` (twin:
    ``viscosity.chebyshev_step``): one launch."""
    arrays = (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.inv_diagonal, x, r, d, d_new)
    if any(getattr(a, "dtype", None) != np.float64 for a in arrays) or \
            not all(a.flags.c_contiguous for a in arrays):
        return NotImplemented
    ny, nx = S.shape2d
    grid, block = _blocks(ny * nx)
    _kernel()(grid, block,
              (S.rho_f, S.k_plus, S.k_minus, S.t_plus, S.t_minus, S.inv_diagonal,
               x, r, d, d_new, np.int32(ny), np.int32(nx), np.int32(S.component == "u"),
               np.float64(S.s_low), np.float64(S.s_high), np.float64(keep), np.float64(gain)))
    return x
