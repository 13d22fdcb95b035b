"""CUDA twin of the PLIC interface's measure in every cell
(:func:`bubbleflow.flow.gas_regions.interface_measure`), CuPy, float64.

With the level set's normals, as a flow's bubble tracking calls it: in
2-D the segments' lengths (:func:`.vof_redistance_cuda.segment_lengths`),
in 3-D the planes' areas in one launch (``interface_measure3.cu``, a short
source of its own that a 3-D run compiles in the background while it
starts, where the array code is some forty small kernels).  The same bits
as the array code in 3-D.  Youngs' normals, another dtype or fewer than
two cells along an axis: ``NotImplemented`` (the array code runs).  CuPy is
imported inside the functions only.
"""
from __future__ import annotations

import math

import numpy as np

from ..compute import cuda
from .vof_limits import CLIP_TOLERANCE, area_step
from .vof_redistance_cuda import segment_lengths

__all__ = ["interface_measure", "plane_areas"]

#: No FMA contraction: the kernel rounds as the array code does.
_OPTIONS = ("--fmad=false",)

_kernel3 = cuda.float64_kernels(__name__, "interface_measure3.cu", _OPTIONS, ndims=(3,))


def interface_measure(c, spacing, normal_from=None):
    """The ``"cupy"`` variant of :func:`.gas_regions.interface_measure`:
    :func:`.vof_redistance_cuda.segment_lengths` in 2-D, :func:`plane_areas`
    in 3-D."""
    if len(spacing) == 2:
        return segment_lengths(c, spacing, normal_from)
    return plane_areas(c, spacing, normal_from)


def plane_areas(c, spacing, normal_from=None):
    """The PLIC plane's area in every interface cell of a 3-D grid with the
    level set ``normal_from``'s normals, zero elsewhere (m^2)."""
    import cupy as cp

    if normal_from is None or len(spacing) != 3:
        return NotImplemented
    arrays = cuda.float64_3d(normal_from, c)
    if arrays is None:
        return NotImplemented
    phi, c = arrays
    if phi.shape != c.shape or min(c.shape) < 2:
        return NotImplemented
    step = area_step(spacing, c.dtype)
    area = cp.empty_like(c)
    nz, ny, nx = c.shape
    cuda.launch_1d(_kernel3("bf_plane_areas3"), c.size, (
        phi, c, area, np.int32(nx), np.int32(ny), np.int32(nz),
        *(np.float64(h) for h in spacing), np.float64(step), np.float64(2.0 * step),
        np.float64(math.prod(spacing)), np.float64(CLIP_TOLERANCE),
        np.float64(1.0 - CLIP_TOLERANCE)))
    return area
