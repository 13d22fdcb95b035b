"""CUDA twin of the level set's build (:func:`bubbleflow.mesh.levelset._build`),
CuPy, float64.

The array code passes over the grid once a shape, each pass several small
CuPy kernels: a case with many bubbles makes many passes, and a machine's
first run compiles those kernels where the case build meets them.  Here the
build is one launch (``levelset.cu``, a source the run compiles in the
background while it starts), the shapes in a loop inside it; the same bits
as the array code.  Grids of another dimension than 2 or 3 return
``NotImplemented`` (the array code runs).  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["build"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)

# Listed first for the compile ahead (cuda.prefetch): the case build calls it.
_kernel = cuda.float64_kernels(__name__, "levelset.cu", _OPTIONS, first=True)


def build(grid, free_surface, circles, backend, first, stop):
    """The ``"cupy"`` variant of :func:`.levelset._build`: the level set on
    the planes ``first:stop`` of ``grid`` in one launch."""
    import cupy as cp

    nd = grid.ndim
    if nd not in (2, 3):
        return NotImplemented
    shape = (stop - first,) + tuple(grid.shape[1:])
    axes = [np.asarray(c, dtype=np.float64) for c in grid.centres]
    axes[-1] = axes[-1][first:stop]
    # The bubbles first, then the droplets: the kernel takes the split.
    bubbles = [tuple(c.centre) + (c.radius,) for c in circles if c.gas]
    droplets = [tuple(c.centre) + (c.radius,) for c in circles if not c.gas]
    shapes = bubbles + droplets
    if any(len(s) != nd + 1 for s in shapes):
        return NotImplemented           # (the array code says what is wrong)
    table = cp.asarray(np.asarray(shapes, dtype=np.float64).reshape(-1) if shapes
                       else np.zeros(1))
    surface = free_surface is not None
    level = float(free_surface) if surface else float(sum(grid.lengths))
    phi = cp.empty(shape, dtype=np.float64)
    if phi.size == 0:
        return phi
    name = "bf_levelset_shapes2" if nd == 2 else "bf_levelset_shapes3"
    sizes = [np.int32(n) for n in shape[::-1]]
    cuda.launch_1d(_kernel(name), phi.size,
                   (phi, *(cp.asarray(a) for a in axes), *sizes, table, np.int32(len(bubbles)),
                    np.int32(len(droplets)), np.int32(surface), np.float64(level)))
    return phi
