"""CUDA variant of :func:`bubbleflow.flow.bounds.field_figures`: one kernel.

``bf_bounds_figures`` (``bounds.cu``) reads the cells and the faces of every
axis once, as one range of indices, and takes the five maxima with atomic
maxima (order-free: the figures repeat bit for bit).  Where the fields are
finite it gives the array code's bits; a non-finite value sets the flag,
and NaN is never a maximum.  Arrays that are not float64, or more than three
axes, return ``NotImplemented`` (the array code runs).  CuPy is imported
inside the function only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["field_figures"]

_kernel = cuda.float64_kernels(__name__, "bounds.cu")
#: Threads a block of the pass (its blocks: compute.cuda.reduce_blocks).
_THREADS = 256
#: The velocity components the kernel takes (fewer axes pass empty ones).
_AXES = 3


@cuda.kernel_cache
def _starts(without_c):
    """The figures where no cell updates them (-min c and max c are 0 and 1
    without c), on the device once: a copy of them starts each pass (a
    device copy, which a CUDA graph of the step can hold)."""
    import cupy as cp

    return cp.asarray([0.0, 0.0, 1.0, 0.0, -np.inf] if without_c
                      else [0.0, -np.inf, -np.inf, 0.0, -np.inf])


def field_figures(old_phi, old_velocity, phi, velocity, c, steps, gas_fraction):
    """Twin of ``bounds.field_figures``: one launch of ``bf_bounds_figures``."""
    import cupy as cp

    fields = (old_phi, phi, *old_velocity, *velocity) + (() if c is None else (c,))
    if len(velocity) > _AXES or any(getattr(a, "dtype", None) != np.float64 for a in fields):
        return NotImplemented
    if phi.shape != old_phi.shape or (c is not None and c.shape != phi.shape):
        return NotImplemented
    flat = [cp.ascontiguousarray(a).ravel() for a in fields]
    old_phi, phi, *faces = flat[:2 + 2 * len(velocity)]
    c = None if c is None else flat[-1]
    old = faces[:len(velocity)] + [faces[0]] * (_AXES - len(velocity))
    new = faces[len(velocity):] + [faces[0]] * (_AXES - len(velocity))
    sizes = [a.size for a in faces[len(velocity):]] + [0] * (_AXES - len(velocity))
    scales = list(steps) + [0.0] * (_AXES - len(velocity))
    out = _starts(c is None).copy()
    total = phi.size + sum(sizes)
    blocks = cuda.reduce_blocks(total, _THREADS)
    _kernel("bf_bounds_figures")((blocks,), (_THREADS,), (
        phi, old_phi, np.uint64(0) if c is None else c, np.int64(phi.size), np.float64(gas_fraction),
        *new, *old, *(np.int64(n) for n in sizes), *(np.float64(s) for s in scales), out))
    return out
