"""CUDA twin of a level set's cell fractions
(:func:`bubbleflow.flow.vof_fraction.volume_fraction`), CuPy, float64.

A CLSVOF flow builds its initial volume fraction from the case's level set
once; the array code is some thirty small CuPy kernels in 2-D and more in
3-D, each compiled on a machine's first run where the run's own thread
meets it.  Here the whole of it is one launch (``vof_fraction.cu``, ``vof_fraction3.cu`` in 3-D: sources
a run compiles in the background while it starts): one
cut a cell in 2-D and 3-D (``samples=None``), and the quadratic sub-cell
cuts in 3-D (``fit="quadratic"``).  The kernels follow the array code's
order of operations without FMA contraction: the same bits.  Other calls
(the multilinear sub-cells, 2-D quadratic cuts, fewer than two cells along
an axis, another dtype) return ``NotImplemented`` and the array code runs
(and raises where it should).  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from ..mesh.grid import array_axis
from .vof_limits import CUT_MARGIN

__all__ = ["volume_fraction", "taylor_constants"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)

# Listed first for the compile ahead (cuda.prefetch): the case build calls
# them.  The 3-D kernels are a source of their own (a 2-D run compiles none).
_kernel = cuda.float64_kernels(__name__, "vof_fraction.cu", _OPTIONS, ndims=(2,), first=True)
_kernel3 = cuda.float64_kernels(__name__, "vof_fraction3.cu", _OPTIONS, ndims=(3,), first=True)


def taylor_constants(spacing, k):
    """The host constants of ``bf_fraction_taylor3`` for ``spacing`` (x, y,
    z) and ``k`` sub-cells an axis, computed as the array code computes
    them (``vof_fraction3.cu`` lists their order)."""
    nd = 3
    h = [spacing[array_axis(nd, a)] for a in range(nd)]          # per array axis
    pairs = [(1, 0), (2, 0), (2, 1)]
    return np.array(
        [2.0 * hi for hi in h] + [hi ** 2 for hi in h]
        + [4.0 * h[a] * h[b] for a, b in pairs]
        + [(0.5 - 0.5 / k) * hi for hi in h] + [0.5 * hi / k for hi in h]
        + [1.0 - CUT_MARGIN] + [s / k for s in spacing] + [float(k ** nd)]
        + [((q + 0.5) / k - 0.5) * h[a] for a in range(nd) for q in range(k)],
        dtype=np.float64)


def volume_fraction(phi, spacing, samples=None, fit="multilinear"):
    """The ``"cupy"`` variant of :func:`.vof_fraction.volume_fraction`: one
    launch, or ``NotImplemented`` (see the module)."""
    import cupy as cp

    nd = getattr(phi, "ndim", 0)
    arrays = cuda.float64_nd(nd, phi) if nd in (2, 3) else None
    if arrays is None or min(phi.shape) < 2 or len(spacing) != nd:
        return NotImplemented
    phi = arrays[0]
    c = cp.empty_like(phi)
    sizes = [np.int32(n) for n in phi.shape[::-1]]          # nx, ny[, nz]
    h = [np.float64(s) for s in spacing]
    if samples is None:
        kernel = _kernel("bf_fraction_cut2") if nd == 2 else _kernel3("bf_fraction_cut3")
        cuda.launch_1d(kernel, phi.size, (phi, c, *sizes, *h))
        return c
    if nd != 3 or fit != "quadratic" or isinstance(samples, bool):
        return NotImplemented
    try:
        k = int(samples)
    except (TypeError, ValueError):
        return NotImplemented
    if k < 1 or k != samples:
        return NotImplemented
    constants = cp.asarray(taylor_constants(tuple(float(s) for s in spacing), k))
    cuda.launch_1d(_kernel3("bf_fraction_taylor3"), phi.size,
                   (phi, c, *sizes, constants, np.int32(k)))
    return c
