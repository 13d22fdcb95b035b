"""CUDA twins of the block deflation space (CuPy).

The set-up of a time step rebuilds the deflation space for the new
interface; written with array operations that is a few dozen library
kernels over the grid plus sorts of the cut-face entries, here it is one or
two passes (``deflation_blocks.cu``).  The restriction ``Z^T r`` of a block
layout is one kernel (``tile_part_sums.cu``).  Each is registered on its
array-code twin (:func:`bubbleflow.linalg.deflation.boxes.block_layout`,
:func:`bubbleflow.linalg.deflation.boxes.tile_part_sums`), and the tests
compare the two:

=======================  =============================================  ==========================
kernel                   computes                                       twin
=======================  =============================================  ==========================
``bf_defl_parts``        gas/liquid part of every cell, parts present   ``labels.levelset_subdomain_labels``, ``boxes._block_sums``
``bf_defl_labels``       the vector of every cell (int32)               ``labels.compact_present``
``bf_defl_rows``         ``(A Z)^T`` in CSR and ``E`` per row (ELL)      ``coarse_matrix.face_pieces``
``bf_defl_e``            ``E`` in CSR, exactly symmetric                 ``coarse_matrix.face_pieces``
``bubbleflow_tile_part_sums``  ``Z^T r`` per block and part              ``boxes.tile_part_sums``
=======================  =============================================  ==========================

The kernels are 2-D: a 3-D space, and its sums, take the array code (these
variants decline the call).  The deflation kernels need blocks that tile
the grid exactly (the layout of :meth:`Deflation.from_blocks`): the row of
vector ``v`` of ``(A Z)^T`` then lives in ``v``'s block widened by one
cell, which one thread block walks in row-major order (so the columns come
out sorted, with an ordered block-wide scan), and ``E``'s row has at most
ten entries, the two parts of the block and of its four face neighbours.  Sums run in a fixed order: the results do
not depend on scheduling (the array code adds duplicates with atomics).
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.transfer import on_device

__all__ = ["deflation_blocks", "raw_deflation_ok", "tile_part_sums"]

_THREADS = 256


@cuda.kernel_cache
def _fn(name):
    return cuda.function(cuda.source(__name__, "deflation_blocks.cu"), name,
                         options=("-std=c++14",))



@cuda.kernel_cache
def _tile_sums_kernel(dtype):
    return cuda.raw_kernel(f"typedef {cuda.CTYPE[dtype]} T;\n"
                           + cuda.source(__name__, "tile_part_sums.cu"), "bubbleflow_tile_part_sums")


def raw_deflation_ok(A, *blocks):
    """Can :func:`deflation_blocks` build this deflation space of ``blocks``
    (box counts per grid axis, x first)?  CuPy, the float64 2-D grid
    operator, blocks tiling the grid exactly, 32-bit cell indices."""
    backend = getattr(A, "backend", None)
    if backend is None or not on_device(backend) or not hasattr(A, "grid_shape"):
        return False
    if len(blocks) != 2 or len(A.grid_shape) != 2:
        return False                          # the kernels walk 2-D blocks
    px, py = blocks
    if np.dtype(getattr(A, "dtype", None)) != np.float64:
        return False
    if getattr(A, "storage", None) not in ("diagonals", "matrix_free"):
        return False
    ny, nx = A.grid_shape
    return ny % py == 0 and nx % px == 0 and nx * ny < 2 ** 31 - 1


def deflation_blocks(A, phi, px, py, size, present_table):
    """Labels, ``(A Z)^T`` and ``E`` of the block deflation space on the GPU.

    ``phi`` None: ``px x py`` blocks; else every block split into its liquid
    (``phi >= 0``) and gas part.  ``size`` (host) are the cells per block and
    ``present_table(present)`` the caller's compaction of a host ``present``
    (returns ``k, slot, original``; with ``phi`` one kernel does it on the
    device, ``bf_defl_table``).  Returns ``(pieces, part, present)``, with
    ``pieces`` a dict of ``labels`` (int32, grid-flat), ``k``, ``slot``,
    ``original``, ``AZT`` and ``E`` as ``(data, indices, indptr, shape)`` of
    CSR matrices (built by the caller when it needs them), and with ``phi``
    the layout's ``lut``, ``owner`` and ``groups``.  One host
    synchronisation: ``k`` and the two entry counts, read together (the
    counting pass runs over the most vectors there can be and reads ``k`` on
    the device).  ``size`` is only used without ``phi`` (with it the blocks
    tile the grid: all the same size).
    """
    import cupy as cp

    ny, nx = A.grid_shape
    by, bx = ny // py, nx // px
    nblocks = px * py
    n = nx * ny
    i32 = np.int32
    sizes = cp.zeros(3, dtype=cp.int32)               # k, entries of (A Z)^T, of E
    layout = {}
    if phi is None:
        nparts = 1
        part = cp.zeros((ny, nx), dtype=cp.int8)
        present = size > 0                                   # host: no sync
        k, slot, original = present_table(present)
        slot = cp.asarray(np.ascontiguousarray(slot, dtype=np.int64))
        original = cp.asarray(np.ascontiguousarray(original, dtype=np.int64))
        sizes[0] = k
        kmax = k
    else:
        nparts = 2
        phi = cp.ascontiguousarray(phi, dtype=cp.float64).reshape(ny, nx)
        part = cp.empty((ny, nx), dtype=cp.int8)
        present = cp.empty(2 * nblocks, dtype=cp.bool_)
        _fn("bf_defl_parts")((nblocks,), (_THREADS,),
                             (phi, part, present, i32(nx), i32(bx), i32(by), i32(px)))
        kmax = 2 * nblocks
        slot = cp.empty(kmax, dtype=cp.int64)
        original = cp.empty(kmax, dtype=cp.int64)
        lut = cp.empty((nblocks, 2), dtype=cp.int32)
        owner = cp.empty(kmax, dtype=cp.int32)
        groups = cp.empty(kmax, dtype=cp.int32)
        _fn("bf_defl_table")((1,), (1024,), (present, i32(kmax), slot, lut, original, owner,
                                             groups, sizes))
    labels = cp.empty(n, dtype=cp.int32)
    _fn("bf_defl_labels")(cuda.rows_grid(nx, ny, _THREADS), (_THREADS,),
                          (part, slot, labels, i32(nx), i32(ny), i32(bx), i32(by), i32(px),
                           i32(nparts)))
    if getattr(A, "storage", None) == "matrix_free":
        cx, sx, cy, sign = A.cx, nx - 1, A.cy, 1.0
    else:
        S, W, C, E, N = A.diagonals
        cx, sx, cy, sign = E, nx, N, -1.0
    cx = cp.ascontiguousarray(cx, dtype=cp.float64)
    cy = cp.ascontiguousarray(cy, dtype=cp.float64)
    counts = cp.empty(2 * max(kmax, 1) + 2 * (kmax + 1), dtype=cp.int32)
    azt_cnt, e_cnt = counts[:kmax], counts[kmax:2 * kmax]
    azt_ptr = counts[2 * max(kmax, 1):2 * max(kmax, 1) + kmax + 1]
    e_ptr = counts[2 * max(kmax, 1) + kmax + 1:]
    null = np.uint64(0)
    rows = _fn("bf_defl_rows")
    common = (labels, part, original, slot, i32(nparts), cx, i32(sx), cy, np.float64(sign),
              i32(nx), i32(ny), i32(bx), i32(by), i32(px), i32(py))
    if kmax:
        rows((kmax,), (_THREADS,), common + (azt_cnt, e_cnt, null, null, null, null, null,
                                             i32(0), sizes))
    _fn("bf_defl_ptrs")((1,), (1024,), (azt_cnt, e_cnt, azt_ptr, e_ptr, sizes))
    k, nnz_azt, nnz_e = (int(v) for v in sizes.get())
    azt_ptr, e_ptr = azt_ptr[:k + 1], e_ptr[:k + 1]
    azt_idx = cp.empty(nnz_azt, dtype=cp.int32)
    azt_val = cp.empty(nnz_azt, dtype=cp.float64)
    ell_val = cp.empty(10 * k, dtype=cp.float64)
    ell_col = cp.empty(10 * k, dtype=cp.int32)
    e_idx = cp.empty(nnz_e, dtype=cp.int32)
    e_val = cp.empty(nnz_e, dtype=cp.float64)
    if k:
        rows((k,), (_THREADS,), common + (azt_cnt, e_cnt, azt_ptr, azt_idx, azt_val, ell_val,
                                          ell_col, i32(1), null))
        _fn("bf_defl_e")(((k + _THREADS - 1) // _THREADS,), (_THREADS,),
                         (ell_val, ell_col, original, i32(nparts), e_ptr, e_idx, e_val, i32(k)))
    if phi is not None:
        layout = dict(lut=lut, owner=owner[:k], groups=groups[:k])
    pieces = dict(labels=labels, k=k, slot=slot, original=original[:k],
                  AZT=(azt_val, azt_idx, azt_ptr, (k, n)), E=(e_val, e_idx, e_ptr, (k, k)),
                  **layout)
    return pieces, part, present


def tile_part_sums(r, part, block_shape):
    """``(ntiles * 2,)``: the sums of ``r`` over part 0 and part 1 of every
    block of ``block_shape`` (row-major blocks; CuPy), one kernel.  Its twin
    is :func:`bubbleflow.linalg.deflation.boxes.tile_part_sums` (array code).
    Other dtypes than float64 and float32, or a grid that is not 2-D:
    ``NotImplemented``."""
    import cupy

    if str(r.dtype) not in cuda.CTYPE or part.ndim != 2:
        return NotImplemented

    ny, nx = part.shape
    by, bx = block_shape
    ntiles = (ny // by) * (nx // bx)
    k = _tile_sums_kernel(str(r.dtype))
    sums = cupy.empty(2 * ntiles, dtype=r.dtype)
    k((ntiles,), (256,), (cupy.ascontiguousarray(r.reshape(ny, nx)), part, sums, np.int32(nx),
                          np.int32(bx), np.int32(by)))
    return sums
