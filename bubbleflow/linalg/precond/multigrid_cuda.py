"""CUDA twins of the multigrid cycle (CuPy, float64, 2-D).

Registered on the array code of :mod:`bubbleflow.linalg.precond.multigrid`
(the tests compare the two on the GPU); the kernels are ``multigrid.cu``
beside this file:

* :func:`smooth`: one kernel per Chebyshev step (the first computes the
  residual, the later ones update it with the stencil of the step);
* :func:`residual_restrict`: one kernel, a thread per coarse cell;
* :func:`prolong_add`: one kernel.

The stencil is summed in another order than the array code's flux form, so
results agree to rounding, not bit for bit.  Calls these kernels do not cover
(another dtype, another dimension, mismatched shapes) return
``NotImplemented`` and the array code runs.  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from .chebyshev import chebyshev_coefficients

__all__ = ["smooth", "residual_restrict", "prolong_add"]

_OPTIONS = ("--fmad=false",)
_BLOCK = (32, 8)

_kernel = cuda.float64_kernels(__name__, "multigrid.cu", _OPTIONS)


def _faces(couplings, shape):
    """``(cx, cy)`` as contiguous float64 CuPy arrays of the grid ``shape``, or None."""
    if len(couplings) != 2 or len(shape) != 2:
        return None
    arrays = cuda.float64_2d(*couplings)
    if arrays is None:
        return None
    ny, nx = shape
    cx, cy = arrays
    if cx.shape != (ny, nx - 1) or cy.shape != (ny - 1, nx):
        return None
    return cx, cy


def smooth(couplings, inv_diagonal, b, x, degree, ratio):
    """Chebyshev smoothing (twin: ``multigrid.smooth``): ``degree`` launches."""
    import cupy as cp

    fields = cuda.float64_2d(inv_diagonal, b, *(() if x is None else (x,)))
    faces = None if fields is None else _faces(couplings, b.shape)
    if faces is None or any(f.shape != b.shape for f in fields):
        return NotImplemented
    cx, cy = faces
    inv_d, b = fields[0], fields[1]
    x = fields[2] if x is not None else None
    ny, nx = b.shape
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    x_out, r, d, d_next = (cp.empty_like(b) for _ in range(4))
    _kernel("bf_mg_cheb_start")(grid, block, (
        cx, cy, inv_d, b, b if x is None else x, x_out, r, d, np.int32(nx), np.int32(ny),
        np.int32(x is not None), np.float64(inv_theta)))
    for a, c in steps:
        _kernel("bf_mg_cheb_step")(grid, block, (
            cx, cy, inv_d, d, d_next, r, x_out, np.int32(nx), np.int32(ny), np.float64(a),
            np.float64(c)))
        d, d_next = d_next, d
    return x_out


def residual_restrict(couplings, b, x):
    """``P^T (b - A x)`` (twin: ``multigrid.residual_restrict``): one launch."""
    import cupy as cp

    fields = cuda.float64_2d(b, x)
    faces = None if fields is None else _faces(couplings, b.shape)
    if faces is None or fields[1].shape != b.shape:
        return NotImplemented
    cx, cy = faces
    b, x = fields
    ny, nx = b.shape
    ncy, ncx = (ny + 1) // 2, (nx + 1) // 2
    out = cp.empty((ncy, ncx), dtype=cp.float64)
    grid, block = cuda.grid_2d(ncx, ncy, _BLOCK)
    _kernel("bf_mg_residual_restrict")(grid, block, (
        cx, cy, b, x, out, np.int32(nx), np.int32(ny), np.int32(ncx), np.int32(ncy)))
    return out


def prolong_add(x, xc, scale):
    """``x + scale P xc`` (twin: ``multigrid.prolong_add``): one launch."""
    import cupy as cp

    fields = cuda.float64_2d(x, xc)
    if fields is None:
        return NotImplemented
    x, xc = fields
    ny, nx = x.shape
    if xc.shape != ((ny + 1) // 2, (nx + 1) // 2):
        return NotImplemented
    out = cp.empty_like(x)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    _kernel("bf_mg_prolong_add")(grid, block, (
        x, xc, out, np.int32(nx), np.int32(ny), np.int32(xc.shape[1]), np.float64(scale)))
    return out
