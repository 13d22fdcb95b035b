"""A vector less its mean: the gauge of a pure-Neumann solve.

:func:`minus_mean` is the array code (``v - v.mean()`` and the mean); its
CUDA variant for contiguous float64 vectors is two launches
(``mean_removal.cu``: per-block sums, then every block adds them in one
fixed order and subtracts the mean), where the array code's mean and
subtraction cost the host three times more.  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from . import cuda
from .twins import twin

__all__ = ["minus_mean"]

_THREADS = 256

# (Listed for the compile ahead: cuda.prefetch.)
_kernel = cuda.float64_kernels(__name__, "mean_removal.cu")


@twin
def minus_mean(v):
    """``(v - mean(v), mean(v))``: a new array of ``v``'s shape and the
    mean as a 0-d array of ``v``'s backend (no host synchronisation)."""
    mean = v.mean()
    return v - mean, mean


@minus_mean.register("cupy")
def _minus_mean_by_launches(v):
    import cupy as cp

    if v.dtype != np.float64 or not v.flags.c_contiguous or v.size == 0:
        return NotImplemented
    n = v.size
    blocks = cuda.reduce_blocks(n, _THREADS)
    partial = cp.empty(blocks, dtype=np.float64)
    out, mean = cp.empty_like(v), cp.empty((), dtype=np.float64)
    _kernel("bf_sum64_partial")((blocks,), (_THREADS,), (v, np.int64(n), partial))
    _kernel("bf_minus_mean")((blocks,), (_THREADS,),
                             (v, np.int64(n), partial, np.int32(blocks), out, mean))
    return out, mean
