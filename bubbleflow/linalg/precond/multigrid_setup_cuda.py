"""CUDA twins of the multigrid hierarchy's set-up (CuPy, float64 couplings;
2-D and 3-D): registered on :func:`.multigrid.coarsen_couplings`,
:func:`.multigrid.level_arrays` and :func:`.coarsest_solve.shifted_dense`,
the kernels in ``multigrid_setup.cu`` beside this file.

A time step of a flow refreshes the hierarchy for its new densities
(:meth:`.multigrid.Multigrid.refresh`): the array code's pair sums, centre
sums and casts are a few dozen launches a level, each costing more to
launch than to run on the coarse levels.  Here a level is one launch per
axis for its coarse couplings and one for its arrays in the cycle's
precision, with the array code's order of sums: the same bits (a level
with a coarser one below writes both in one pass); the
coarsest level's dense matrix is one launch instead of a scatter per face
array.  A 2-D grid runs as a 3-D grid of one plane.  Calls they do not cover (another
dimension, other dtypes) return ``NotImplemented`` and the array code runs.
CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...mesh.grid import array_axis

__all__ = ["coarsen_couplings", "level_arrays", "level_and_coarser", "shifted_dense", "abs_peak",
           "write_io_scale"]

_kernel = cuda.float64_kernels(__name__, "multigrid_setup.cu")
#: The level kernel by the cycle's precision.
_LEVEL = {np.dtype(np.float64): "bf_mg_level_f64", np.dtype(np.float32): "bf_mg_level_f32"}
#: The level kernel that also coarsens, by the cycle's precision.
_LEVEL_COARSEN = {np.dtype(np.float64): "bf_mg_level_coarsen_f64",
                  np.dtype(np.float32): "bf_mg_level_coarsen_f32"}


def _as_3d(a):
    """``a`` (2-d or 3-d) as a 3-d array: a 2-d one as a single plane."""
    return a if a.ndim == 3 else a.reshape((1,) + a.shape)


def _cells(couplings):
    """The cells per array axis of the level whose face ``couplings`` (x
    first) these are."""
    nd = len(couplings)
    shape = list(couplings[0].shape)
    shape[array_axis(nd, 0)] += 1
    return tuple(shape)


def coarsen_couplings(couplings, xp):
    """Twin of ``multigrid.coarsen_couplings``: one ``bf_mg_coarsen`` launch
    per axis."""
    import cupy as cp

    nd = len(couplings)
    if nd not in (2, 3):
        return NotImplemented
    arrays = cuda.float64_nd(nd, *couplings)
    if arrays is None:
        return NotImplemented
    cells = _cells(arrays)
    coarse = tuple((n + 1) // 2 for n in cells)
    out = []
    for a, c in enumerate(arrays):
        k = array_axis(nd, a)
        expected = list(cells)
        expected[k] -= 1
        if c.shape != tuple(expected):
            return NotImplemented
        shape = list(coarse)
        shape[k] -= 1
        o = cp.empty(tuple(shape), dtype=cp.float64)
        if o.size:
            f3, o3 = _as_3d(c), _as_3d(o)
            cuda.launch_1d(_kernel("bf_mg_coarsen"), o.size, (
                f3, o3, *(np.int32(n) for n in f3.shape), *(np.int32(n) for n in o3.shape),
                np.int32(k + 3 - nd)))
        out.append(o)
    return out


def level_arrays(couplings, out_couplings, out_inv_diagonal):
    """Twin of ``multigrid.level_arrays``: one launch of ``bf_mg_level_f32``
    (or ``_f64``) writes the level's couplings and inverse diagonal."""
    level = _level_args(couplings, out_couplings, out_inv_diagonal)
    if level is None:
        return NotImplemented
    args, inv, _ = level
    cuda.launch_1d(_kernel(_LEVEL[inv.dtype]), inv.size,
                   (*args, *(np.int32(n) for n in inv.shape)))
    return None


def level_and_coarser(couplings, out_couplings, out_inv_diagonal):
    """Twin of ``multigrid.level_and_coarser``: one launch of
    ``bf_mg_level_coarsen_f32`` (or ``_f64``) writes the level's arrays and
    the next level's float64 couplings, which it returns."""
    import cupy as cp

    level = _level_args(couplings, out_couplings, out_inv_diagonal)
    if level is None:
        return NotImplemented
    args, inv, cells = level
    nd = len(couplings)
    coarse = tuple((n + 1) // 2 for n in cells)
    out = []
    for a in range(nd):
        shape = list(coarse)
        shape[array_axis(nd, a)] -= 1
        out.append(cp.empty(tuple(shape), dtype=cp.float64))
    coarser = [_as_3d(o) for o in out]
    if nd == 2:                            # no z couplings: any array stands in
        coarser.append(coarser[0])
    cuda.launch_1d(_kernel(_LEVEL_COARSEN[inv.dtype]), inv.size, (
        *args, *coarser, *(np.int32(n) for n in inv.shape),
        *(np.int32(n) for n in (1,) * (3 - nd) + coarse)))
    return out


def _level_args(couplings, out_couplings, out_inv_diagonal):
    """``(args, inv, cells)``: the level kernels' arrays (the couplings, the
    outputs, the inverse diagonal; 3-d, a stand-in for z in 2-D), the
    inverse diagonal as 3-d and the level's cells per array axis; None
    where the kernels do not cover the call."""
    nd = len(couplings)
    if nd not in (2, 3) or len(out_couplings) != nd:
        return None
    arrays = cuda.float64_nd(nd, *couplings)
    dtype = out_inv_diagonal.dtype
    if arrays is None or dtype not in _LEVEL:
        return None
    cells = _cells(arrays)
    outputs = (*out_couplings, out_inv_diagonal)
    if out_inv_diagonal.shape != cells or any(
            o.dtype != dtype or not o.flags.c_contiguous for o in outputs) \
            or any(o.shape != c.shape for o, c in zip(out_couplings, arrays)):
        return None
    ins = [_as_3d(c) for c in arrays]
    outs = [_as_3d(o) for o in out_couplings]
    if nd == 2:                            # no z couplings: any array stands in
        ins.append(ins[0])
        outs.append(outs[0])
    inv = _as_3d(out_inv_diagonal)
    return (*ins, *outs, inv), inv, cells


def shifted_dense(couplings, shape, centre, shift):
    """Twin of ``coarsest_solve.shifted_dense``: one ``bf_mg_shifted_dense``
    launch."""
    import cupy as cp

    nd = len(couplings)
    if nd not in (2, 3) or len(shape) != nd:
        return NotImplemented
    arrays = cuda.float64_nd(nd, *couplings)
    n = int(np.prod(shape))
    if arrays is None or _cells(arrays) != tuple(shape) or centre.dtype != cp.float64 \
            or centre.size != n or shift.dtype != cp.float64 or shift.size != 1:
        return NotImplemented
    ins = [_as_3d(c) for c in arrays]
    if nd == 2:                            # no z couplings: any array stands in
        ins.append(ins[0])
    cells = (1,) * (3 - nd) + tuple(shape)
    out = cp.empty((n, n), dtype=cp.float64)
    cuda.launch_1d(_kernel("bf_mg_shifted_dense"), n * n, (
        *ins, cp.ascontiguousarray(centre), cp.ascontiguousarray(shift).reshape(1), out,
        *(np.int32(m) for m in cells)))
    return out


def abs_peak(b):
    """Twin of ``multigrid.abs_peak``: the blocks' maxima, then one block's
    (two launches) for float64 values."""
    import cupy as cp

    if b.dtype != cp.float64 or not b.flags.c_contiguous or not b.size:
        return NotImplemented
    blocks = cuda.reduce_blocks(b.size)
    partial = cp.empty(blocks, dtype=cp.float64)
    _kernel("bf_mg_abs_max_partial")((blocks,), (256,), (b, np.int64(b.size), partial))
    peak = cp.empty(1, dtype=cp.float64)
    _kernel("bf_mg_io_scale")((1,), (256,), (partial, np.int32(blocks), peak, np.uint64(0)))
    return peak


def write_io_scale(peak, io_scale):
    """Twin of ``multigrid.write_io_scale``: one launch."""
    import cupy as cp

    if peak.dtype != cp.float64 or peak.size != 1 or io_scale.dtype != cp.float64 \
            or io_scale.size != 2 or not io_scale.flags.c_contiguous:
        return NotImplemented
    _kernel("bf_mg_io_scale")((1,), (32,), (peak, np.int32(1), np.uint64(0), io_scale))
    return None
