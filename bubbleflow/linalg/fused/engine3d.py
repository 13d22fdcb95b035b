"""The fused preconditioned CG iteration on a 3-D grid (CuPy, float64).

:class:`~.iteration.FusedIteration` (its scalars on the device, its
buffers allocated once, its CUDA graphs of whole iterations, its protocol
for the Krylov loop) with 3-D grid kernels (``fused3d.cu``):

``direction_spmv``  ``p' = y + beta p`` and ``w = A p'`` from the three face
             couplings, each thread walking a column of cells up a chunk of
             planes, and the blocks' sums of ``p' . w``;
``update``   ``x += alpha p'``, ``r' = r - alpha w`` and the blocks' sums of
             ``r' . r'`` (and, for Jacobi, ``y = D^-1 r'`` and ``r' . y``);
``precondition``  any other preconditioner: its own kernels, captured with
             the iteration where it offers them (the multigrid cycle's
             :meth:`~bubbleflow.linalg.precond.multigrid.Multigrid.device_launches`),
             then ``r' . y``;
``alpha``, ``beta``  the 2-D engine's kernels (:mod:`.kernels`).

No deflation (a deflated 3-D solve runs the generic loop).  The twin is the
generic loop of :mod:`bubbleflow.linalg.krylov`; the tests compare the two
on the GPU.  :func:`engine_for` is the registry's ``fused`` device engine:
this one on a 3-D grid, the 2-D :func:`~.engine.fused_engine_for` on a 2-D
one.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from .engine import fused_engine_for
from .iteration import FusedIteration
from .kernels import PREC_GENERIC, PREC_IDENTITY, PREC_JACOBI
from .protocol import float64_on_device

__all__ = ["FusedEngine3D", "engine_for"]

_TILE = (32, 8)                 # F3_TX, F3_TY in fused3d.cu
_THREADS = 256
#: z chunks of the direction kernel: as many as make about this many blocks
#: (each restarts one plane below), none shorter than _MIN_CHUNK planes.
#: Chosen, not tuned: the kernel's ratio to its floor is in
#: docs/performance_records.md (3-D on the GPU, the fused 3-D iteration).
_DIR_BLOCKS = 1024
_MIN_CHUNK = 8
#: The kernels index with 32-bit offsets: a grid's cells, plus the plane a
#: column's walk steps past its last one and a grid-stride step of the
#: update (its blocks times its threads, below _STRIDE_MARGIN), stay within
#: MAX_CELLS.
MAX_CELLS = 2 ** 31 - 1
_STRIDE_MARGIN = 2 ** 24


@cuda.kernel_cache
def _kernel3(name):
    return cuda.function(cuda.source(__name__, "fused3d.cu"), name, options=("-std=c++14",))


def _direction_geometry(shape):
    """``(grid, chunk)`` of ``bf3_direction_spmv``: xy tiles times z chunks."""
    nz, ny, nx = shape
    tiles = (-(-nx // _TILE[0]), -(-ny // _TILE[1]))
    chunks = max(1, min(-(-_DIR_BLOCKS // (tiles[0] * tiles[1])), nz // _MIN_CHUNK))
    chunk = -(-nz // chunks)
    return (*tiles, -(-nz // chunk)), chunk


def engine_for(A, prec_obj, prec_name, defl, variant, b, previous=None):
    """The fused engine of this solve (the registry's ``fused`` device
    engine): a :class:`FusedEngine3D` on a 3-D grid without deflation, the
    2-D :func:`~.engine.fused_engine_for` on a 2-D grid, else None."""
    if len(getattr(A, "grid_shape", ())) != 3:
        return fused_engine_for(A, prec_obj, prec_name, defl, variant, b, previous)
    if not float64_on_device(b) or defl is not None:
        return None                        # (no deflation kernels in 3-D yet)
    if not (hasattr(A, "couplings") and hasattr(A, "backend")):
        return None
    cells = int(np.prod(A.grid_shape, dtype=np.int64))
    if cells + int(np.prod(A.grid_shape[1:])) + _STRIDE_MARGIN > MAX_CELLS:
        return None                        # past the kernels' 32-bit offsets
    if prec_obj is None and prec_name != "none":
        return None                        # a user's callable: the generic loop applies it
    if prec_obj is not None and not hasattr(prec_obj, "apply"):
        return None
    if isinstance(previous, FusedEngine3D) and previous.fits(A, prec_obj, prec_name, defl, None):
        return previous.update(A, prec_obj, defl)
    return FusedEngine3D(A, prec_obj, prec_name, b)


class FusedEngine3D(FusedIteration):
    """Buffers, kernels and launch plan of the fused iteration on one 3-D grid."""

    def __init__(self, A, prec_obj, prec_name, b):
        import cupy as cp

        super().__init__(cp)
        self.shape = tuple(int(v) for v in A.grid_shape)
        nz, ny, nx = self.shape
        self.nz, self.ny, self.nx, self.n = nz, ny, nx, nz * ny * nx
        self.by = self.bx = None
        self._start(A, prec_obj, prec_name, None, None)

    @staticmethod
    def _code_of(prec_obj, prec_name):
        """Identity, Jacobi (in the update kernel), or the preconditioner's own
        kernels (any other)."""
        if prec_obj is None:
            return PREC_IDENTITY
        code = FusedIteration._code_of(prec_obj, prec_name)
        return PREC_JACOBI if code == PREC_JACOBI else PREC_GENERIC

    def fits(self, A, prec_obj, prec_name, defl, tile):
        return (tuple(A.grid_shape) == self.shape and defl is None
                and self._code_of(prec_obj, prec_name) == self.prec_code)

    def _allocate_operator(self):
        cp = self.cp
        nz, ny, nx = self.shape
        self.cx = cp.zeros((nz, ny, nx - 1), dtype=cp.float64)
        self.cy = cp.zeros((nz, ny - 1, nx), dtype=cp.float64)
        self.cz = cp.zeros((nz - 1, ny, nx), dtype=cp.float64)
        self.s = cp.zeros(self.n, dtype=cp.float64) if self.prec_code == PREC_JACOBI else None
        self.cxs = self.cys = None

    def _plan_grid(self, tile):
        self.k_dirspmv = _kernel3("bf3_direction_spmv")
        self.k_update = _kernel3("bf3_update")
        grid, chunk = _direction_geometry(self.shape)
        self.ndir = int(np.prod(grid))
        self.dir_launch = (grid, (_THREADS,), chunk)
        # The update's blocks, one per per-block sum (beta reads ntiles of them).
        self.ntiles = self.nred

    def _bind_grid(self, A, prec_obj, pieces):
        return False

    def operator_arrays(self):
        """The engine's face couplings per axis (x, y, z), which its
        launches read: an operator built in them
        (:meth:`.PoissonOperator.from_faces`'s ``out``) is taken without a
        copy."""
        return self.cx, self.cy, self.cz

    def _copy_grid(self, A, prec_obj, pieces):
        for dst, src in zip((self.cx, self.cy, self.cz), A.couplings()):
            if src is not dst:
                dst[...] = src
        if self.prec_code == PREC_JACOBI:
            self.s[...] = prec_obj.inv_diagonal.reshape(self.n)

    def _grid_entries(self, name, cur, pcur):
        """The launches of ``direction_spmv`` or ``update`` at parity
        ``(cur, pcur)`` (see :meth:`~.stages.FusedStages._entries`)."""
        nz, ny, nx = (np.int32(v) for v in self.shape)
        null = np.uint64(0)
        if name == "direction_spmv":
            grid, block, chunk = self.dir_launch
            return [(self.k_dirspmv, grid, block,
                     (self.y, self.scal, self.pbuf[pcur], self.pbuf[1 - pcur], self.w,
                      self.cx, self.cy, self.cz, self.part_pw, nx, ny, nz,
                      np.int32(chunk)), 0)]
        write_y = np.int32(self.prec_code != PREC_GENERIC)
        return [(self.k_update, (self.ntiles,), (_THREADS,),
                 (self.pbuf[pcur], self.w, self.r[cur], self.r[1 - cur], self.x, self.y,
                  self.s if self.s is not None else null, self.scal, self.part_ry,
                  self.part_rr, np.int32(self.n), write_y), 0)]

    def _count_bytes(self):
        """Bytes one iteration moves, each array read once and written once:
        the direction reads ``y``, ``p`` and the three couplings and writes
        ``p'`` and ``w`` (7 arrays); the update reads ``p'``, ``w``, ``r``
        and ``x`` and writes ``r'`` and ``x`` (6; Jacobi adds ``D^-1`` read
        and ``y`` written, the identity ``y`` written); another
        preconditioner its own model (``bytes_per_apply``) and ``r' . y`` (2)."""
        arrays = 7 + 6
        extra = 0
        if self.prec_code == PREC_JACOBI:
            arrays += 2
        elif self.prec_code == PREC_IDENTITY:
            arrays += 1
        else:
            arrays += 2
            model = getattr(self.prec_obj, "bytes_per_apply", None)
            extra = int(model()) if model is not None else 0
        return int(arrays * 8 * self.n + extra)
