"""What the momentum step's 2-D and 3-D CUDA twins share (CuPy, float64).

:mod:`.momentum_cuda` (the 2-D twins and the ``*_nd`` variants registered
on :mod:`.momentum`) and :mod:`.momentum3_cuda` (the 3-D twins) both use:

* the compile options, the block shape of the per-face kernels, the
  reductions' threads, the cells the kernels need along an axis and the
  face-density rules' indices;
* :data:`kernel`, the getter of ``momentum.cu`` beside this file: the 2-D
  kernels and the sums of the norms, which the 3-D correction launches too;
* :func:`norms` (per-block sums of squares, then :func:`final_norms`'s one
  block, in a fixed order) and :func:`launch_step_scalars` (the time step's
  maxima and the finite check: per-block maxima, then one block), each
  with the grid's source getter;
* :func:`reduced_scalars` and :func:`vertical_heights`, the arguments of the
  gravity and buoyancy terms.

CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["OPTIONS", "BLOCK", "REDUCE_THREADS", "MIN_CELLS", "RULES", "kernel",
           "reduce_blocks", "launch_step_scalars", "final_norms", "norms", "reduced_scalars",
           "vertical_heights"]

#: No FMA contraction: the kernels round as the array code does.
OPTIONS = ("--fmad=false",)
#: Threads of the per-face kernels: 32 along x (one warp per row segment), 8 rows.
BLOCK = (32, 8)
#: Threads a block of the reductions (their blocks: compute.cuda.reduce_blocks).
REDUCE_THREADS = 256
#: Cells the kernels need along each axis (an interior face on each).
MIN_CELLS = 2
#: ``operator.face_density`` -> the kernel's rule index (anything else: arithmetic).
RULES = {"levelset": 0, "harmonic": 1}

#: Called through this module's attribute by both twins' modules, so that a
#: wrapped getter (scripts/flow_kernel_events.py) sees every launch.
kernel = cuda.float64_kernels(__name__, "momentum.cu", OPTIONS)


def reduce_blocks(n):
    return cuda.reduce_blocks(n, REDUCE_THREADS)


def launch_step_scalars(get, components, phi, rho, mu, maxima, viscous):
    """``momentum.step_scalars`` of contiguous float64 arrays checked by the
    caller (``components``: the velocity's, two or three): per-block maxima
    (``bf_mom_scalars_partial`` of the getter ``get``, the grid's source)
    and one block (``bf_mom_scalars_final``)."""
    import cupy as cp

    nd = len(components)
    w = components[2] if nd == 3 else components[0]          # (unread in 2-D)
    sizes = [np.int64(c.size) for c in components[:2]] + [np.int64(w.size if nd == 3 else 0)]
    blocks = reduce_blocks(max(max(c.size for c in components), phi.size))
    partial = cp.empty(5 * blocks, dtype=cp.float64)
    out = cp.empty(nd + 2, dtype=cp.float64)
    flags = (np.int32(bool(maxima)), np.int32(bool(viscous)))
    get("bf_mom_scalars_partial")((blocks,), (REDUCE_THREADS,), (
        components[0], components[1], w, phi, rho, mu, partial, *sizes, np.int64(phi.size),
        *flags))
    get("bf_mom_scalars_final")((1,), (REDUCE_THREADS,), (
        partial, np.int32(blocks), out, np.int32(nd), *flags))
    return out


def final_norms(partial, blocks):
    """The two norms from ``blocks`` per-block pairs of sums in ``partial``:
    one block of ``bf_mom_norms_final``."""
    import cupy as cp

    out = cp.empty(2, dtype=cp.float64)
    kernel("bf_mom_norms_final")((1,), (REDUCE_THREADS,), (partial, np.int32(blocks), out))
    return out


def norms(a, b):
    """Twin of ``momentum.norms``: per-block sums of squares, then one block
    (fixed order)."""
    import cupy as cp

    if not all(getattr(x, "dtype", None) == np.float64 for x in (a, b)) or a.size == 0 \
            or b.size == 0:
        return NotImplemented
    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
    blocks = reduce_blocks(max(a.size, b.size))
    partial = cp.empty(2 * blocks, dtype=cp.float64)
    kernel("bf_mom_squares_partial")((blocks,), (REDUCE_THREADS,), (
        a, b, partial, np.int64(a.size), np.int64(b.size)))
    return final_norms(partial, blocks)


def reduced_scalars(reduced):
    """The kernels' ``(reduced, rho_g, rho_l)`` of a ``momentum.ReducedGravity``
    (zeros without one: no term)."""
    return (0.0, 0.0, 0.0) if reduced is None else tuple(reduced)


def vertical_heights(heights, phi, buoyancy):
    """The cells' and the interior vertical faces' heights (``heights``'
    first and last entries) as contiguous float64 arrays of ``phi``'s
    dimension, as many as ``phi`` has planes and one fewer; ``(phi, phi)``
    without buoyancy (not read); None where they are not so."""
    if buoyancy == 0:
        return phi, phi
    if not isinstance(heights, (tuple, list)) or len(heights) != phi.ndim:
        return None
    arrays = cuda.float64_nd(phi.ndim, heights[0], heights[-1])
    n = phi.shape[0]
    if arrays is None or arrays[0].size != n or arrays[1].size != n - 1:
        return None
    return arrays
