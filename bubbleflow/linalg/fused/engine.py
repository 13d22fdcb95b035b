"""The fused GPU iteration of (deflated) preconditioned CG on a 2-D grid.

:class:`FusedEngine` is :class:`~.iteration.FusedIteration` with the 2-D
grid kernels of :mod:`.kernels` (``direction_spmv`` on row bands or tiles,
``update`` on subdomain tiles: :mod:`.layout`): their buffers (the face
couplings ``cx``, ``cy`` and the preconditioner's coefficients), their
launches, the copies of an operator into those buffers, the deflation
space's pieces on the update's tiles (A-DEF2), and the traffic they count.
:func:`fused_engine_for` says whether a solve can run so.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...compute import cuda
from ...mesh.grid import Grid

from .iteration import FusedIteration
from .kernels import PREC_GENERIC, PREC_JACOBI, PREC_SCALED_IP, VARIANT_OF_CODE, module
from .layout import direction_plan, planned_modules, tile_shape, tile_structure, update_plan
from .protocol import float64_on_device

__all__ = ["FusedEngine", "fused_engine_for"]


def fused_engine_for(A, prec_obj, prec_name, defl, variant, b, previous=None):
    """A :class:`FusedEngine` when this solve can run fused, else None.

    ``b`` (or any array of its backend and dtype) says where the solve runs.
    ``previous``: an engine of an earlier operator on the same grid; where
    it fits (:meth:`FusedEngine.fits`) it is updated for this operator
    (:meth:`FusedEngine.update`) and returned instead of a new one.
    """
    if not float64_on_device(b):
        return None
    if not (hasattr(A, "grid_shape") and hasattr(A, "entries") and hasattr(A, "backend")):
        return None
    if len(A.grid_shape) != 2:
        return None                        # (3-D: .engine3d)
    if defl is not None and variant != "adef2":
        return None
    if prec_obj is None and prec_name != "none":
        return None                        # a user's callable: the generic loop applies it
    if prec_obj is not None and not hasattr(prec_obj, "apply"):
        return None
    ny, nx = A.grid_shape
    tile = tile_shape(ny, nx, defl)
    if tile is None:
        return None
    try:
        if previous is not None and previous.fits(A, prec_obj, prec_name, defl, tile):
            return previous.update(A, prec_obj, defl)
        return FusedEngine(A, prec_obj, prec_name, defl, b, tile)
    except ValueError:                     # labels that are not two parts per tile
        return None


class FusedEngine(FusedIteration):
    """The fused iteration on one 2-D grid (see the module and
    :class:`~.iteration.FusedIteration`)."""

    def __init__(self, A, prec_obj, prec_name, defl, b, tile):
        import cupy as cp

        super().__init__(cp)
        ny, nx = A.grid_shape
        self.ny, self.nx, self.n = ny, nx, ny * nx
        self.by, self.bx = tile
        # The update kernel's tiles: equal boxes of the operator's grid.
        grid = getattr(A, "grid", None) or Grid(nx, ny)
        self.tiles = grid.partition((nx // self.bx, ny // self.by))
        self.ntiles = self.tiles.count
        # The plans fetch their modules one after the other: compile them side by side.
        cuda.build_in_background(*(partial(module, code, defines) for code, defines
                                   in planned_modules(ny, nx, self.bx,
                                                      self._code_of(prec_obj, prec_name))))
        self._start(A, prec_obj, prec_name, defl, tile)

    def fits(self, A, prec_obj, prec_name, defl, tile):
        """Can :meth:`update` take this operator (same grid, tile,
        preconditioner branch, with or without deflation)?"""
        return (tuple(A.grid_shape) == (self.ny, self.nx) and tile is not None
                and tuple(tile) == (self.by, self.bx)
                and self._code_of(prec_obj, prec_name) == self.prec_code
                and (defl is None) == (self.defl is None))

    # ------------------------------------------------------------ buffers
    def _allocate_operator(self):
        """The operator's face couplings and the preconditioner's coefficients."""
        cp = self.cp
        ny, nx = self.ny, self.nx
        self.cx = cp.zeros((ny, nx - 1), dtype=cp.float64)
        self.cy = cp.zeros((ny - 1, nx), dtype=cp.float64)
        self.s = self.cxs = self.cys = None
        if self.prec_code == PREC_JACOBI:
            self.s = cp.zeros((ny, nx), dtype=cp.float64)
        elif self.prec_code == PREC_SCALED_IP:
            self.s = cp.zeros((ny, nx), dtype=cp.float64)
            self.cxs = cp.zeros((ny, nx - 1), dtype=cp.float64)
            self.cys = cp.zeros((ny - 1, nx), dtype=cp.float64)

    def _plan_grid(self, tile):
        """The grid kernels (direction and update) and their geometry."""
        self.k_dirspmv, self.dir_bands, self.dir_tile, self.ndir, self.dir_launch = \
            direction_plan(self.ny, self.nx, tile)
        self.k_update, self.group, self.upd_walk = \
            update_plan(self.nx, self.by, self.bx, self.prec_code)

    # ------------------------------------------------------------ binding
    def _prec_sources(self, prec_obj):
        """``(s, E~, N~)`` of the preconditioner (None where it has none)."""
        if self.prec_code == PREC_JACOBI:
            return prec_obj.inv_diagonal, None, None
        if self.prec_code == PREC_SCALED_IP:
            return prec_obj.inv_sqrt_diagonal, prec_obj.E, prec_obj.N
        return None, None, None

    def _bind_grid(self, A, prec_obj, pieces):
        """The grid-sized copies in one kernel (diagonals storage, float64
        contiguous arrays); False where it does not apply."""
        cp = self.cp
        if getattr(A, "storage", None) != "diagonals":
            return False
        S, W, C, E, N = A.entries()
        srcs = [E, N, *self._prec_sources(prec_obj)]
        cells = [] if pieces is None else [pieces[2], pieces[0]]
        if not all(a.dtype == cp.float64 and a.flags.c_contiguous and a.size == self.n
                   for a in srcs if a is not None):
            return False
        if not all(a.flags.c_contiguous and a.size == self.n for a in cells):
            return False
        null = np.uint64(0)
        opt = [a if a is not None else null for a in srcs[2:]]
        lab, part = (cells[0], cells[1]) if cells else (null, null)
        outs = [a if a is not None else null for a in (self.s, self.cxs, self.cys)]
        cuda.launch_1d(self.k_bind_grid, self.n,
                       (E, N, *opt, lab, part, self.cx, self.cy, *outs,
                        self.labels32 if cells else null, self.part if cells else null,
                        np.int32(self.nx), np.int32(self.ny)))
        return True

    def _copy_grid(self, A, prec_obj, pieces):
        """The grid-sized copies one by one (any storage and layout)."""
        cp = self.cp
        ny, nx = self.ny, self.nx
        if getattr(A, "storage", None) == "matrix_free":
            self.cx[...] = A.cx
            self.cy[...] = A.cy
        else:
            S, W, C, E, N = A.entries()
            cp.negative(E[:, :-1], out=self.cx)
            cp.negative(N[:-1, :], out=self.cy)
        s, Es, Ns = self._prec_sources(prec_obj)
        if s is not None:
            self.s[...] = s.reshape(ny, nx)
        if Es is not None:
            cp.negative(Es[:, :-1], out=self.cxs)
            cp.negative(Ns[:-1, :], out=self.cys)
        if pieces is not None:
            self.labels32[...] = pieces[2].reshape(self.n)
            self.part[...] = pieces[0].reshape(ny, nx)

    def _deflation_pieces(self, defl):
        """``(part, owner, labels32, indptr, indices, data)`` of the deflation
        space for this engine's tiles, built once per space (every solve of
        a time step shares it)."""
        cp = self.cp
        ny, nx = self.ny, self.nx
        cache = defl.engine_cache
        if (self.by, self.bx) not in cache:
            layout = getattr(defl, "owner", None) is not None and \
                tuple(defl.block_shape) == (self.by, self.bx)
            if layout:                 # built with the deflation space (its set-up)
                structure = (defl.part, defl.owner)
                labels32 = defl.labels32
            else:
                labels = defl.labels.reshape(ny, nx)
                structure = tile_structure(labels, ny, nx, self.by, self.bx, defl.n_vectors, cp)
                if structure is None:
                    raise ValueError("fused DPCG needs labels that split each tile in at "
                                     "most two parts")
                labels32 = labels.ravel().astype(cp.int32)
            if hasattr(defl, "azt_arrays"):
                indptr, indices, data = defl.azt_arrays()
            else:
                indptr, indices, data = defl.AZT.indptr, defl.AZT.indices, defl.AZT.data
            cache[(self.by, self.bx)] = tuple(structure) + (
                labels32, indptr.astype(cp.int32, copy=False),
                indices.astype(cp.int32, copy=False), data.astype(cp.float64, copy=False))
        return cache[(self.by, self.bx)]

    # ----------------------------------------------------------- launches
    def _grid_entries(self, name, cur, pcur):
        """The launches of ``direction_spmv`` or ``update`` at parity
        ``(cur, pcur)`` (see :meth:`~.stages.FusedStages._entries`)."""
        nx, ny = np.int32(self.nx), np.int32(self.ny)
        null = np.uint64(0)                 # a NULL pointer argument
        if name == "direction_spmv":
            dgrid, dthreads, dgeom = self.dir_launch
            labels = self.labels32 if self.defl is not None else null
            return [(self.k_dirspmv, dgrid, dthreads,
                     (self.y, self.e, labels, self.scal, self.pbuf[pcur], self.pbuf[1 - pcur],
                      self.w, self.cx, self.cy, self.part_pw, nx, ny)
                     + tuple(np.int32(v) for v in dgeom), 0)]
        bxp, chunks, threads = self.upd_walk
        group = self.group
        opt = [a if a is not None else null for a in (self.s, self.cxs, self.cys)]
        return [(self.k_update, (self.ntiles // group,), (threads,),
                 (self.pbuf[pcur], self.w, self.r[cur], self.r[1 - cur], self.x, self.y,
                  *opt, self.part if self.defl is not None else null,
                  self.scal, self.part_ry, self.part_rr,
                  self.part_zr if self.part_zr is not None else null,
                  nx, ny, np.int32(group * self.bx), np.int32(self.by),
                  np.int32(bxp), np.int32(chunks)), 0)]

    # -------------------------------------------------------------- model
    def _count_bytes(self):
        """Bytes one iteration moves: each array read once, written once."""
        n8 = 8 * self.n
        arrays = 6.0                    # direction + spmv: y, p, cx, cy -> p', w
        # x, p, r, w (+ M's coefficients) read; x, r (and y) written
        variant = VARIANT_OF_CODE[self.prec_code]
        arrays += variant.update_arrays
        if variant.extra_arrays:
            arrays += variant.extra_arrays             # r . y after the generic M
        if self.defl is not None:
            arrays += 0.5 + 0.125                      # int32 labels, int8 parts
        extra = 0
        if self.defl is not None:
            nnz = int(self.azt_nnz)
            extra += nnz * (8 + 4 + 8) + (self.k + 1) * 4 + 3 * 8 * self.k
            extra += int(getattr(self.defl.coarse, "nbytes", 8 * self.k * self.k))
        if self.prec_code == PREC_GENERIC:                 # the preconditioner's own model
            model = getattr(self.prec_obj, "bytes_per_apply", None)
            extra += int(model()) if model is not None else 0
        return int(arrays * n8 + extra)
