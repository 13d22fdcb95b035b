"""CUDA twins of the multigrid cycle (CuPy, float64 or float32, 2-D).

Registered on the array code of :mod:`bubbleflow.linalg.precond.multigrid`
(the tests compare the two on the GPU); the kernels are ``multigrid.cu``
beside this file:

* :func:`smooth`: one kernel per Chebyshev step (the first computes the
  residual, the later ones update it with the stencil of the step);
* :func:`residual_restrict`: one kernel, a thread per coarse cell;
* :func:`prolong_add`: one kernel.

The stencil is summed in another order than the array code's flux form, so
results agree to rounding, not bit for bit.  The kernels are compiled once
per value type (``typedef double T;`` or ``float``).  Calls these kernels do
not cover (another dtype, mixed dtypes, another dimension, mismatched shapes)
return
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

#: The value types the kernels are compiled for: C type and scalar type.
_TYPES = {"float64": ("double", np.float64), "float32": ("float", np.float32)}


@cuda.kernel_cache
def _kernel(dtype, kernel_name):
    ctype = _TYPES[dtype][0]
    return cuda.function(f"typedef {ctype} T;\n" + cuda.source(__name__, "multigrid.cu"),
                         kernel_name, options=_OPTIONS)


def _arrays(*arrays):
    """The arrays as C-contiguous 2-d CuPy arrays of one dtype the kernels
    take, and that dtype's name; None where they are not."""
    import cupy

    dtype = str(getattr(arrays[0], "dtype", ""))
    if dtype not in _TYPES or not all(str(getattr(a, "dtype", "")) == dtype
                                      and getattr(a, "ndim", 0) == 2 for a in arrays):
        return None
    return [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays], dtype


def _faces(couplings, shape, dtype):
    """``(cx, cy)`` as contiguous CuPy arrays of the grid ``shape``, or None."""
    if len(couplings) != 2 or len(shape) != 2:
        return None
    got = _arrays(*couplings)
    if got is None or got[1] != dtype:
        return None
    ny, nx = shape
    cx, cy = got[0]
    if cx.shape != (ny, nx - 1) or cy.shape != (ny - 1, nx):
        return None
    return cx, cy


def smooth(couplings, inv_diagonal, b, x, degree, ratio):
    """Chebyshev smoothing (twin: ``multigrid.smooth``): ``degree`` launches."""
    import cupy as cp

    got = _arrays(inv_diagonal, b, *(() if x is None else (x,)))
    faces = None if got is None else _faces(couplings, b.shape, got[1])
    if faces is None or any(f.shape != b.shape for f in got[0]):
        return NotImplemented
    (inv_d, b, *rest), dtype = got
    cx, cy = faces
    x = rest[0] if rest else None
    real = _TYPES[dtype][1]
    ny, nx = b.shape
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    x_out, r, d, d_next = (cp.empty_like(b) for _ in range(4))
    _kernel(dtype, "bf_mg_cheb_start")(grid, block, (
        cx, cy, inv_d, b, b if x is None else x, x_out, r, d, np.int32(nx), np.int32(ny),
        np.int32(x is not None), real(inv_theta)))
    for a, c in steps:
        _kernel(dtype, "bf_mg_cheb_step")(grid, block, (
            cx, cy, inv_d, d, d_next, r, x_out, np.int32(nx), np.int32(ny), real(a), real(c)))
        d, d_next = d_next, d
    return x_out


def residual_restrict(couplings, b, x):
    """``P^T (b - A x)`` (twin: ``multigrid.residual_restrict``): one launch."""
    import cupy as cp

    got = _arrays(b, x)
    faces = None if got is None else _faces(couplings, b.shape, got[1])
    if faces is None or got[0][1].shape != b.shape:
        return NotImplemented
    (b, x), dtype = got
    cx, cy = faces
    ny, nx = b.shape
    ncy, ncx = (ny + 1) // 2, (nx + 1) // 2
    out = cp.empty((ncy, ncx), dtype=b.dtype)
    grid, block = cuda.grid_2d(ncx, ncy, _BLOCK)
    _kernel(dtype, "bf_mg_residual_restrict")(grid, block, (
        cx, cy, b, x, out, np.int32(nx), np.int32(ny), np.int32(ncx), np.int32(ncy)))
    return out


def prolong_add(x, xc, scale):
    """``x + scale P xc`` (twin: ``multigrid.prolong_add``): one launch."""
    import cupy as cp

    got = _arrays(x, xc)
    if got is None:
        return NotImplemented
    (x, xc), dtype = got
    ny, nx = x.shape
    if xc.shape != ((ny + 1) // 2, (nx + 1) // 2):
        return NotImplemented
    out = cp.empty_like(x)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    _kernel(dtype, "bf_mg_prolong_add")(grid, block, (
        x, xc, out, np.int32(nx), np.int32(ny), np.int32(xc.shape[1]),
        _TYPES[dtype][1](scale)))
    return out
