"""Fused GPU iteration of (deflated) preconditioned CG.

The generic loop of :mod:`bubbleflow.linalg.krylov` is written once against the
array backend and is the reference.  On CuPy it runs one library call per
vector operation, and every one of them reads and writes whole grid arrays.
This module runs the same iteration with a handful of fused CUDA kernels,
all scalars kept on the device and all buffers allocated once:

``direction_spmv``  one block per band of rows of a strip of columns (or per
             tile): ``p' = y + Z e + beta p`` on it and its one-cell halo
             (``p`` is double-buffered), ``w = A p'`` from the face couplings,
             and the block's sum of ``p' . w``.  All sums are per block in a
             fixed order, so runs are reproducible bit for bit.  As many
             bands as make one wave of resident blocks.
``alpha``    one block: ``alpha = rz / (p . w)``, the breakdown flag.
``update``   one block per subdomain tile, or per row of a few of them:
             ``x += alpha p``, ``r' = r - alpha w``, the preconditioner
             ``y = M^-1 r'`` (Jacobi, or both passes of scaled incomplete
             Poisson, the halo recomputed from ``r`` and ``w``), and per-tile
             sums of ``r' . y``, ``r' . r'`` and ``Z^T r'`` (the liquid and
             gas part of the tile).  ``r`` is double-buffered so that the
             halo reads never race with a neighbour's writes.
             Both kernels walk their block by columns: one thread per column
             (and row chunk) keeps the rows below and above in registers and
             takes its east and west neighbours from the adjacent lanes by
             warp shuffles, so every value is read once per cell, with no
             shared memory and no per-cell index division.
``restrict`` one block per deflation vector: ``g = Z^T r - (A Z)^T y`` with
             ``(A Z)^T`` in CSR (only cells next to a subdomain boundary have
             entries: the operator's rows sum to zero).
coarse       ``e = E^+ g`` (:class:`bubbleflow.linalg.deflation.coarse.CoarseSolver`; of its
             raw condensed solve, all steps but the gather; of its dense
             inverse, cuBLAS's product with the engine's copy of it).
``beta``     one block: the coarse solve's gather into ``e`` (raw condensed
             solve), ``r . y' = r . y + e . Z^T r``, ``beta``, the recursive
             residual norm into the history.

For A-DEF2 (Tang et al. 2009) this is exactly the generic
``y' = M^-1 r + Z E^+ (Z^T r - (AZ)^T M^-1 r)``.  Preconditioners other than
``none``, ``jacobi`` and ``incomplete_poisson_scaled`` (``block_ic``) are
applied by their own kernels between ``update`` and a fused dot.

Every kernel has its NumPy twin: the generic loop in ``krylov`` computes the
same quantities, and the tests compare the two on the GPU (iterations and
solutions).  Counted traffic per iteration (each array read once and written
once, the floor of the benchmark) is :attr:`FusedEngine.bytes_per_iteration`.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...mesh.grid import Grid

from .. import registry
from ..deflation.coarse import dense_gemm, dense_product, gemm_operand

__all__ = ["FusedEngine", "fused_engine_for"]
# The update kernel's ``#define PREC`` values (registry.FUSED_VARIANTS).
PREC_IDENTITY, PREC_JACOBI, PREC_SCALED_IP, PREC_GENERIC = (
    registry.FUSED_VARIANTS[name].code
    for name in ("identity", "jacobi", "scaled_incomplete_poisson", "generic"))
_VARIANT_OF_CODE = {v.code: v for v in registry.FUSED_VARIANTS.values()}

_THREADS = 256
# Rows a thread walks in a tile's column (two more are read), each the
# fastest measured for its kernel: _CHUNK_ROWS_WIDE for bf_direction_spmv,
# _CHUNK_ROWS_IP for the scaled incomplete Poisson update (its walk starts a
# row early), _CHUNK_ROWS for the other updates (measured:
# docs/performance.md, "Figures behind code choices").
_CHUNK_ROWS = 16
_CHUNK_ROWS_WIDE = 32
_CHUNK_ROWS_IP = 64
# The direction kernel's layout: its sums need no subdomain tiles.  Row
# bands: strips of _DIR_BAND_COLS columns (or the widest of 128, 64, 32 that
# divides the row), cut into as many bands of rows as make one wave of
# resident blocks on the device (see :func:`_dir_bands`).  Where that does
# not apply (rows not a multiple of 32 cells), the update's tiles.  One full
# wave of bands beats tiles and other band counts: the last, partly filled
# wave costs nearly as much as a full one (measured: docs/performance.md,
# "Figures behind code choices").
_DIR_BAND_COLS = 256
_DIR_BAND_MIN_ROWS = 8
# Columns of a scaled incomplete Poisson update block: as many subdomain
# tiles side by side as fit (tiles a whole number of warps wide), fewer halo
# recomputations and longer rows: measured a little faster than one tile a
# block.  (The Jacobi update was slower with wider blocks, so it keeps one
# tile a block.  Figures: docs/performance.md, "Figures behind code choices".)
_IP_BLOCK_COLS = 256
_IDX32_LIMIT = 2 ** 31    # bf_direction_spmv uses 32-bit cell offsets below it
_MAX_TILE_WIDTH = 1024    # one thread per column of a tile

# Scalars on the device, one float64 array: indices.  DONE is set by ``beta``
# when the recursive residual reaches the tolerance; every kernel of the next
# iterations then returns at once (the iterate stays at the converged one).
# INV_BNORM and TOL_REL are the solve's 1 / ||b|| and relative tolerance.
_ALPHA, _BETA, _RZ, _BAD, _DONE, _INV_BNORM, _TOL_REL = range(7)
_NSCAL = 7
#: ``scal[_DONE]``: set by ``beta`` when the solve has converged (the
#: kernels of the iterations left in a graph then return at once).
_DONE = 4

@cuda.kernel_cache
def _module(prec_code: int, defines: str = ""):
    """The iteration's kernels (``fused.cu``, ``fused_update.cu``) compiled
    with ``defines`` and ``#define PREC prec_code`` (one compile per device:
    :mod:`bubbleflow.compute.cuda`)."""
    code = defines + f"#define PREC {prec_code}\n" + cuda.source(__name__, "fused.cu")
    return cuda.module(code, options=("-std=c++14",))


def _kernel(name, prec_code=2, defines=""):
    return _module(prec_code, defines).get_function(name)


def _reduction_blocks():
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return 16 * sms


def _tile_shape(ny, nx, deflation):
    """The update kernel's tile: the deflation's blocks, or a divisor tile."""
    if deflation is not None:
        shape = getattr(deflation, "block_shape", None)
        if shape is None:
            return None
        by, bx = (int(v) for v in shape)
        if ny % by or nx % bx or bx > _MAX_TILE_WIDTH:
            return None
        return by, bx
    for bx in (128, 64, 32, 16, 8):
        if nx % bx == 0:
            break
    else:
        return None
    for by in (32, 16, 8, 4, 2, 1):
        if ny % by == 0:
            return by, bx
    return None


def _dir_bands(ny, nx, kernel):
    """Row bands of the direction kernel: ``(columns, bands)`` or None.

    One block per strip and band, one thread per column; as many bands as
    fill one wave of the blocks the device keeps resident (CUDA's occupancy
    for this kernel, times the multiprocessors), at least
    :data:`_DIR_BAND_MIN_ROWS` rows a band.
    """
    if _DIR_BAND_COLS is None:
        return None
    for bx in (_DIR_BAND_COLS, 128, 64, 32):
        if bx <= _DIR_BAND_COLS and nx % bx == 0:
            break
    else:
        return None
    resident = _resident_blocks(kernel, bx)
    if resident is None:
        return None
    nb = max(1, min(ny // _DIR_BAND_MIN_ROWS, resident // (nx // bx)))
    if ny * nb >= 2 ** 31:
        return None
    return bx, nb


def _resident_blocks(kernel, threads):
    """Blocks of ``threads`` the whole device keeps resident for ``kernel``
    (CUDA's occupancy query), or None where it cannot be asked (then the
    direction kernel walks tiles)."""
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    try:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            getattr(kernel, "kernel", kernel).ptr, int(threads), 0)
    except Exception:
        return None
    return max(1, int(per_sm)) * sms


def _update_group(nx, bx, prec_code):
    """Tiles side by side in one update block (the scaled IP update only):
    the most, up to :data:`_IP_BLOCK_COLS` columns, that divide the row of
    tiles, each a whole number of warps wide.

    >>> _update_group(4096, 64, 2), _update_group(4096, 64, 1), _update_group(96, 48, 2)
    (4, 1, 1)
    """
    if prec_code != PREC_SCALED_IP or bx % 32:
        return 1
    g = 1
    while 2 * g * bx <= _IP_BLOCK_COLS and (nx // bx) % (2 * g) == 0:
        g *= 2
    return g


def _walk_geometry(by, bx, chunk_rows=None):
    """Threads of the column-walking tile kernels: ``(bxp, chunks, threads)``.

    One thread per column of the tile, ``bx`` rounded up to a power of two
    below 32 or to a multiple of 32 (``bxp``), times ``chunks`` row chunks of
    about ``chunk_rows`` rows (at most 256 threads unless one chunk is more),
    rounded up to whole warps.  A tile narrower than a warp is cut into as
    many row chunks as fill one (up to one row each): its lanes would
    otherwise idle while a few walk the tile's rows one after the other.

    >>> _walk_geometry(64, 64)
    (64, 4, 256)
    >>> _walk_geometry(8, 8)
    (8, 4, 32)
    >>> _walk_geometry(2, 8)
    (8, 2, 32)
    >>> _walk_geometry(24, 48)
    (64, 1, 64)
    """
    chunk_rows = _CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
    bxp = 1 << max(0, (bx - 1).bit_length()) if bx < 32 else -(-bx // 32) * 32
    chunks = max(1, min(by // max(1, chunk_rows), 256 // bxp))
    if bxp < 32:
        chunks = max(chunks, min(by, 32 // bxp))
    threads = -(-(bxp * chunks) // 32) * 32
    return bxp, chunks, threads


def _tile_structure(labels, ny, nx, by, bx, k, xp):
    """Per-cell part (0/1) in its tile and the owner slot of every label.

    Returns ``(part, owner)`` or None when a tile holds more than two labels
    or a label spans two tiles (then per-tile sums cannot give ``Z^T r``).
    """
    lab = labels.reshape(ny // by, by, nx // bx, bx)
    lo = lab.min(axis=(1, 3))
    hi = lab.max(axis=(1, 3))
    part = (lab != lo[:, None, :, None])
    ok = (lab == lo[:, None, :, None]) | (lab == hi[:, None, :, None])
    # Every label in exactly one (tile, part) slot.
    slots = xp.stack([lo.ravel(), xp.where(hi != lo, hi, -1).ravel()], axis=1)   # (ntiles, 2)
    used = slots.ravel()
    used = used[used >= 0]
    if not bool(ok.all()) or int(used.size) != k:
        return None
    owner = xp.full(k, -1, dtype=xp.int32)
    idx = xp.nonzero(slots.ravel() >= 0)[0].astype(xp.int32)
    owner[used] = idx
    if bool((owner < 0).any()):
        return None
    part = part.transpose(0, 1, 2, 3).reshape(ny, nx).astype(xp.int8)
    return part, owner


def fused_engine_for(A, prec_obj, prec_name, defl, variant, b, previous=None):
    """A :class:`FusedEngine` when this solve can run fused, else None.

    ``b`` (or any array of its backend and dtype) says where the solve runs.
    ``previous``: an engine of an earlier operator on the same grid; where
    it fits (:meth:`FusedEngine.fits`) it is updated for this operator
    (:meth:`FusedEngine.update`) and returned instead of a new one.
    """
    from ...compute.backend import backend_of
    from ...compute.transfer import on_device

    if not on_device(backend_of(b)) or b.dtype != np.float64:
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
    tile = _tile_shape(ny, nx, defl)
    if tile is None:
        return None
    try:
        if previous is not None and previous.fits(A, prec_obj, prec_name, defl, tile):
            return previous.update(A, prec_obj, defl)
        return FusedEngine(A, prec_obj, prec_name, defl, b, tile)
    except ValueError:                     # labels that are not two parts per tile
        return None


class FusedEngine:
    """Buffers, kernels and launch plan of the fused iteration on one grid.

    The state (``x``, ``r``, ``p``, ``rz``, the breakdown flag) lives in
    device buffers; :meth:`begin` starts a solve, :meth:`load` takes the
    Krylov loop's state after a restart and :meth:`iterate` advances it by
    ``count`` iterations, writing the relative recursive residual into
    ``hist`` (the protocol of :mod:`bubbleflow.linalg.krylov.device`).
    Built once per grid: :meth:`update` takes a new operator (its copies of
    the operator, the preconditioner's coefficients and the deflation's
    pieces), keeping the buffers, kernels and launch plan.

    Every array a kernel reads is a buffer of the engine, kept from solve to
    solve and from operator to operator (the operator's values are copied
    into them; the deflation's pieces into buffers that grow when a space
    needs more); the solve's ``1 / ||b||`` and tolerance are device scalars.
    So the CUDA graphs of the iteration stay valid while the launches are
    the same (:meth:`_signature`: the kernels, their geometry, the buffers
    and the sizes, such as the number of deflation vectors), and are captured
    again only when they change.
    """

    def __init__(self, A, prec_obj, prec_name, defl, b, tile):
        import cupy as cp

        self.cp = cp
        ny, nx = A.grid_shape
        self.ny, self.nx, self.n = ny, nx, ny * nx
        self.by, self.bx = tile
        # The update kernel's tiles: equal boxes of the operator's grid.
        grid = getattr(A, "grid", None) or Grid(nx, ny)
        self.tiles = grid.partition((nx // self.bx, ny // self.by))
        self.ntiles = self.tiles.count
        self._start(A, prec_obj, prec_name, defl, tile)

    def _start(self, A, prec_obj, prec_name, defl, tile):
        """The state every engine starts with, its buffers, plan and binding
        (after the grid's geometry is set)."""
        self.prec_name = prec_name
        self.prec_code = self._code_of(prec_obj, prec_name)
        # CUDA graphs of the current launch signature, by (kind, length, parity).
        self._graphs, self._graph_sig, self._sig_solves = {}, None, 0
        self._capture_stream = None
        self._dense_capture_failed = False           # the dense product would not capture
        self.capture_error = None                     # why the last failed capture failed
        self._kbuf = None                             # the engine's copy of a dense inverse
        self._table, self._sig = {}, None             # launches by (stage, parity), signature
        self._epoch = 0                               # buffers (re)allocated: a new layout
        self._solve_iterations = 0                    # iterations of the last solve
        self._allocate()
        self._plan(tile)
        self._kcap = self._nnzcap = 0
        self._scratch = self._indices = self._data = None
        self._bind(A, prec_obj, defl)
        self.bytes_per_iteration = self._count_bytes()

    @staticmethod
    def _code_of(prec_obj, prec_name):
        """The update kernel's ``PREC`` for this preconditioner (registry)."""
        return PREC_IDENTITY if prec_obj is None else registry.fused_prec_code(prec_name)

    def fits(self, A, prec_obj, prec_name, defl, tile):
        """Can :meth:`update` take this operator (same grid, tile,
        preconditioner branch, with or without deflation)?"""
        return (tuple(A.grid_shape) == (self.ny, self.nx) and tile is not None
                and tuple(tile) == (self.by, self.bx)
                and self._code_of(prec_obj, prec_name) == self.prec_code
                and (defl is None) == (self.defl is None))

    def update(self, A, prec_obj, defl):
        """Take a new operator, preconditioner and deflation space (of the
        same kinds, :meth:`fits`); returns ``self``.  The graphs are kept:
        the next :meth:`begin` captures them again only if the launches
        changed."""
        self._bind(A, prec_obj, defl)
        self.bytes_per_iteration = self._count_bytes()
        return self

    def _bind(self, A, prec_obj, defl):
        """The operator-dependent arrays, copied into the engine's buffers:
        face couplings, the preconditioner's coefficients, the deflation's
        pieces (two kernels where the arrays allow, else one copy each)."""
        cp = self.cp
        ny, nx = self.ny, self.nx
        self.prec_obj = prec_obj
        epoch = self._epoch
        self.defl = defl
        pieces = None
        if defl is None:
            self.k, self.azt_nnz = 0, 0
            self._reserve(1, 0)
            self.e, self.owner = self._ebuf[:1], self._owner[:1]
            self.g = self.part_zr = self.cs = self._dense_K = None
        else:
            pieces = self._deflation_pieces(defl)
            k, nnz = defl.n_vectors, int(pieces[5].size)
            self._reserve(k, nnz)
            if self.labels32 is None:
                self.labels32 = cp.zeros(self.n, dtype=cp.int32)
                self.part = cp.zeros((ny, nx), dtype=cp.int8)
                self._epoch += 1
            self.owner = self._owner[:k]
            self.azt_indptr = self._indptr[:k + 1]
            self.azt_indices, self.azt_data = self._indices[:nnz], self._data[:nnz]
            self.k, self.azt_nnz = k, nnz
            self.g, self.e = self._gbuf[:k], self._ebuf[:k]
            # The coarse solve: the raw condensed one (its gather into e is
            # done by ``beta``), or the dense inverse's product (cuBLAS, on
            # the engine's copy of the inverse), or the solver's own solve.
            coarse = defl.coarse
            self.cs = coarse.raw_solve
            self._dense_K = self._own_dense(getattr(coarse, "dense_inverse", None))
        # The face couplings, (ny, nx - 1) and (ny - 1, nx).  Copied from the
        # east and north diagonals: read in place (row stride nx) both tile
        # kernels were measurably slower (docs/performance.md), more than the
        # copies cost once per operator.
        if not self._bind_grid(A, prec_obj, pieces):
            self._copy_grid(A, prec_obj, pieces)
        if pieces is not None:
            part, owner, labels32, indptr, indices, data = pieces
            args = [owner, indptr, indices, data]
            if all(a.flags.c_contiguous for a in args):
                cuda.launch_1d(self.k_bind_vectors, max(self.k + 1, self.azt_nnz),
                               tuple(args) + (self.owner, self.azt_indptr, self.azt_indices,
                                              self.azt_data, np.int32(self.k),
                                              np.int32(self.azt_nnz)))
            else:
                for dst, src in zip((self.owner, self.azt_indptr, self.azt_indices,
                                     self.azt_data), args):
                    dst[...] = src
        self._rebound(epoch)

    def _own_dense(self, K):
        """The dense coarse inverse ``K`` copied into a buffer of the engine
        (grown when short), so that the product's arguments, and the CUDA
        graphs that hold them, stay the same from operator to operator as
        every other array the iteration reads; ``K`` itself where its product
        is not the raw cuBLAS call (:func:`.coarse.dense_product`), or None."""
        if K is None or dense_gemm() is None or not gemm_operand(K) or K.ndim != 2:
            return K
        size = int(K.size)
        if self._kbuf is None or self._kbuf.size < size:
            self._kbuf = self.cp.empty(max(size, int(1.5625 * size)), dtype=self.cp.float64)
        own = self._kbuf[:size].reshape(K.shape)
        own.data.copy_from_device_async(K.data, K.nbytes)
        return own

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

    def _rebound(self, epoch):
        """After a bind: the launches that read only buffers allocated once
        (direction, alpha, update) are kept while no buffer was reallocated
        (``epoch``); the others are built again, and the signature."""
        keep = ("direction_spmv", "alpha", "update") if epoch == self._epoch else ()
        self._table = {key: v for key, v in self._table.items() if key[0] in keep}
        self._sig = None

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
                structure = _tile_structure(labels, ny, nx, self.by, self.bx, defl.n_vectors, cp)
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

    def _reserve(self, k, nnz):
        """Buffers for ``k`` deflation vectors and ``nnz`` entries of
        ``(A Z)^T``: grown (by a quarter more) when they are short, else kept.
        The scratch block holds the per-tile sums, ``g`` and ``e`` (cleared
        by one fill at every start)."""
        cp = self.cp
        if k > self._kcap or self._scratch is None:
            self._kcap = max(k, int(1.25 * k) if self._kcap else k)
            kc = self._kcap
            sizes = [max(self.ntiles, self.nred), self.ntiles, max(self.nred, self.ndir),
                     2 * self.ntiles, kc, kc]
            self._scratch = cp.zeros(sum(sizes), dtype=cp.float64)
            views, o = [], 0
            for size in sizes:
                views.append(self._scratch[o:o + size])
                o += size
            self.part_ry, self.part_rr, self.part_pw, self._part_zr, self._gbuf, self._ebuf = views
            self._owner = cp.zeros(kc, dtype=cp.int32)
            self._indptr = cp.zeros(kc + 1, dtype=cp.int32)
            self._epoch += 1
        if self.defl is not None:
            self.part_zr = self._part_zr
        if nnz > self._nnzcap or self._indices is None:
            self._nnzcap = max(nnz, int(1.25 * nnz) if self._nnzcap else nnz, 1)
            self._indices = cp.zeros(self._nnzcap, dtype=cp.int32)
            self._data = cp.zeros(self._nnzcap, dtype=cp.float64)
            self._epoch += 1

    def _allocate(self):
        """Vectors and the operator's and preconditioner's buffers, allocated
        once."""
        cp = self.cp
        n = self.n
        self.x = cp.zeros(n, dtype=cp.float64)
        self.r = [cp.zeros(n, dtype=cp.float64), cp.zeros(n, dtype=cp.float64)]
        self.cur = 0
        self.pbuf = [cp.zeros(n, dtype=cp.float64), cp.zeros(n, dtype=cp.float64)]
        self.pcur = 0
        self.w = cp.zeros(n, dtype=cp.float64)
        self.y = cp.zeros(n, dtype=cp.float64)
        self._allocate_operator()
        # Deflation: labels and parts of every cell (allocated with the
        # first space), the rest by _reserve.
        self.labels32 = self.part = None
        self.nred = _reduction_blocks()
        self.scal = cp.zeros(_NSCAL, dtype=cp.float64)
        self.scal[_INV_BNORM] = 1.0
        self.counter = cp.zeros(1, dtype=cp.int32)
        self._hist = None
        self.hist = None
        self._starting = 0

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

    def _plan(self, tile):
        """The kernels and their launch geometry."""
        self._plan_grid(tile)
        self.k_alpha = _kernel("bf_alpha")
        self.k_beta = _kernel("bf_beta")
        self.k_restrict = _kernel("bf_restrict")
        self.k_dot = _kernel("bf_dot_tiles")
        self.k_status = _kernel("bf_status")
        self.k_scalars = _kernel("bf_set_scalars")
        self.k_bind_grid = _kernel("bf_bind_grid")
        self.k_bind_vectors = _kernel("bf_bind_vectors")
        self.status_buf = self.cp.zeros(3, dtype=self.cp.float64)

    def _plan_grid(self, tile):
        """The grid kernels (direction and update) and their geometry."""
        ny, nx = self.ny, self.nx
        # 32-bit cell offsets in bf_direction_spmv when every offset (and the
        # halo's, one row beyond) fits.
        small = self.n + 2 * nx < _IDX32_LIMIT
        idx32 = "#define BF_IDX32 1\n" if small else ""
        # The direction kernel's layout: row bands, else tiles.
        self.k_dirspmv = _kernel("bf_direction_spmv", 2, idx32 + "#define DIR_BANDS 1\n")
        self.dir_bands = _dir_bands(ny, nx, self.k_dirspmv)
        if self.dir_bands is not None:
            dbx, nb = self.dir_bands
            self.dir_tile = None
            self.ndir = (nx // dbx) * nb
            self.dir_launch = ((self.ndir,), (dbx,), (dbx, nb, dbx, 1))
        else:
            self.k_dirspmv = _kernel("bf_direction_spmv", 2, idx32)
            self.dir_tile = dby, dbx = tuple(tile)
            self.ndir = (ny // dby) * (nx // dbx)
            bxp, chunks, threads = _walk_geometry(dby, dbx, _CHUNK_ROWS_WIDE)
            self.dir_launch = ((self.ndir,), (threads,), (dbx, dby, bxp, chunks))
        self.group = _update_group(nx, self.bx, self.prec_code)
        self.k_update = _kernel("bf_update", self.prec_code,
                                f"#define UPD_G {self.group}\n" if self.group > 1 else "")
        # Column-walk geometry (bxp, chunks, threads) of the two tile kernels.
        self.upd_walk = _walk_geometry(self.by, self.group * self.bx,
                                       _CHUNK_ROWS_IP if self.prec_code == PREC_SCALED_IP
                                       else _CHUNK_ROWS)

    def _coarse(self, g, out):
        coarse = self.defl.coarse
        try:
            coarse.solve(g, out=out)
        except TypeError:                  # a solver without ``out``
            out[...] = coarse.solve(g)

    # ------------------------------------------------------------------ model
    def _count_bytes(self):
        """Bytes one iteration moves: each array read once, written once."""
        n8 = 8 * self.n
        arrays = 6.0                    # direction + spmv: y, p, cx, cy -> p', w
        # x, p, r, w (+ M's coefficients) read; x, r (and y) written
        variant = _VARIANT_OF_CODE[self.prec_code]
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

    # ------------------------------------------------------------------ state
    def history(self, size):
        """A zeroed history buffer of ``size`` entries, owned by the engine
        and kept from solve to solve (the graphs hold its address)."""
        if self._hist is None or self._hist.size < size:
            self._hist = self.cp.zeros(max(size, 2 * (self._hist.size if self._hist is not None
                                                      else 0)), dtype=self.cp.float64)
        hist = self._hist[:size]
        hist.fill(0)
        return hist

    def tolerance(self, bnorm, tol_rel):
        """The solve's ``1 / ||b||`` and relative tolerance into the device
        scalars that ``beta`` reads (one small transfer)."""
        self.k_scalars((1,), (1,), (self.scal, self.counter, np.float64(1.0 / bnorm),
                                    np.float64(tol_rel), np.int32(0), np.int32(0)))

    def load(self, x, r, p, rz, bad, hist, it, bnorm, tol_rel=0.0):
        """Take the generic loop's state (after a start or a restart).

        The iteration stops on the device after the iteration whose relative
        recursive residual ``hist[it]`` is ``<= tol_rel`` (see :meth:`settle`).
        """
        self._take(x, r)
        # The first direction is p itself: y = p, beta = 0, e = 0.
        self.pbuf[self.pcur][...] = p
        self.y[...] = p
        self.e[...] = 0
        self.scal[_BETA] = 0
        self.scal[_RZ] = rz
        self.scal[_BAD] = bad
        self.scal[_DONE] = 0
        self._set_hist(hist)
        self.counter[0] = it
        self.tolerance(bnorm, tol_rel)

    def begin(self, x, r, hist, it, bnorm=None, tol_rel=0.0, own=False):
        """Start from ``x`` and its residual ``r`` with the engine's kernels.

        The generic start's ``y = M^-1 r + Z E^+ (Z^T r - (AZ)^T M^-1 r)``,
        ``rz = r . y`` and first direction ``p = y`` (A-DEF2; ``y = M^-1 r``
        without deflation) are the update, restriction, coarse solve and
        ``beta`` kernels of an iteration with ``alpha = 0`` and ``beta = 0``:
        one fused pass instead of a dozen library calls.  The direction is
        formed by the next iteration's first kernel.  Afterwards
        ``scal[_RZ]`` holds ``rz`` and ``scal[_BAD]`` the breakdown flag.

        ``x`` and ``r`` are copied into the engine's buffers (``own`` is
        accepted for the protocol: the buffers stay the engine's, so that
        its graphs stay valid).  ``bnorm`` None: the tolerance is given later
        by :meth:`tolerance` (the start does not need it).
        """
        # A new solve: the buffers' parity and the per-solve state of a
        # fresh engine.
        self.cur = self.pcur = 0
        self._scratch.fill(0)                  # per-tile sums, g, e
        self._take(x, r)
        self.pbuf[self.pcur].fill(0)           # 0 * p and 0 * w must stay 0
        self.w.fill(0)
        # alpha = beta = 0, not bad, not done; the counter at ``it``.
        self.k_scalars((1,), (1,), (self.scal, self.counter,
                                    np.float64(1.0 if bnorm is None else 1.0 / bnorm),
                                    np.float64(0.0 if bnorm is None else tol_rel),
                                    np.int32(it), np.int32(1)))
        self._set_hist(hist)
        self._starting = 1
        try:
            for name, fn in self._stages():
                if name not in ("direction_spmv", "alpha"):
                    fn()
        finally:
            self._starting = 0
        self.cur = 1 - self.cur                # update wrote r' (= r) to the other buffer
        # The graphs of this launch signature: kept from the last solve when
        # nothing changed, else captured now, while the device runs the start.
        self._prepare_graphs()

    def _take(self, x, r):
        """The iterate and the residual into the engine's buffers."""
        if x is not self.x:
            self.x[...] = x.reshape(self.n)
        if r is not self.r[self.cur]:
            self.r[self.cur][...] = r.reshape(self.n)

    def _set_hist(self, hist):
        if self.hist is None or hist.data.ptr != self.hist.data.ptr:
            self._table = {key: v for key, v in self._table.items() if key[0] != "beta"}
            self._table = {key: v for key, v in self._table.items() if key[0] != "iteration"}
            self._sig = None
        self.hist = hist

    def status(self):
        """``(iteration, hist[iteration], broke)`` from the device: one launch
        and one transfer (the host synchronisation of a check)."""
        self.k_status((1,), (1,), (self.counter, self.hist, self.scal, self.status_buf))
        it, h, bad = self.status_buf.get()
        return int(it), float(h), bool(bad != 0.0)

    def settle(self, it, count):
        """After :meth:`iterate` ``(count)`` from ``it``: ``(iteration,
        relative recursive residual, broke)`` (:meth:`status`).

        Fewer than ``count`` iterations ran when the tolerance was reached
        on the device; the buffer parities follow the iterations that ran.
        """
        counter, h, bad = self.status()
        done = counter - it
        if (count - done) % 2:
            self.cur, self.pcur = 1 - self.cur, 1 - self.pcur
        self._solve_iterations = it + done
        return it + done, h, bad

    @property
    def rz(self):
        """``r . y`` on the device (a 0-d view)."""
        return self.scal[_RZ]

    @property
    def bad(self):
        """The breakdown flag on the device (a 0-d view, nonzero: broke)."""
        return self.scal[_BAD]

    @property
    def r_current(self):
        return self.r[self.cur]

    @property
    def p(self):
        """The current search direction."""
        return self.pbuf[self.pcur]

    # ------------------------------------------------------------------ profile
    def profile(self, repeat=50):
        """Median milliseconds of each stage of one iteration (CUDA events).

        Every stage is launched ``repeat`` times on its own, on the current
        state; the iterate is changed by it, so profile after a solve.
        """
        from ...compute.backend import gpu_median_ms

        cp = self.cp
        self.scal[_DONE] = 0                # keep iterating past the tolerance
        self.scal[_TOL_REL] = 0.0
        out = {name: gpu_median_ms(fn, repeat) for name, fn in self._stages()}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        self.iterate(2)
        start.record()
        self.iterate(repeat)
        stop.record()
        stop.synchronize()
        out["iteration"] = cp.cuda.get_elapsed_time(start, stop) / repeat
        return out

    # ------------------------------------------------------------------ kernels
    def _names(self):
        """The stages of one iteration, in order."""
        names = ["direction_spmv", "alpha", "update"]
        if self.prec_code == PREC_GENERIC:
            names.append("precondition")
        if self.defl is not None:
            names += ["restrict", "coarse"]
        names.append("beta")
        return names

    def _entries(self, name, cur, pcur):
        """The launches of stage ``name`` when the buffers' parity is
        ``(cur, pcur)`` as it starts: a list of ``(kernel, grid, block,
        args, shared_mem)`` tuples, or of callables for the stages that are
        library calls (built once per signature, :attr:`_table`)."""
        key = (name, cur, pcur, self._starting)
        table = self._table
        if key in table:
            return table[key]
        nx, ny = np.int32(self.nx), np.int32(self.ny)
        null = np.uint64(0)                 # a NULL pointer argument
        k = self.k
        if name == "direction_spmv":
            dgrid, dthreads, dgeom = self.dir_launch
            labels = self.labels32 if self.defl is not None else null
            out = [(self.k_dirspmv, dgrid, dthreads,
                    (self.y, self.e, labels, self.scal, self.pbuf[pcur], self.pbuf[1 - pcur],
                     self.w, self.cx, self.cy, self.part_pw, nx, ny)
                    + tuple(np.int32(v) for v in dgeom), 0)]
        elif name == "alpha":
            out = [(self.k_alpha, (1,), (1024,), (self.part_pw, np.int32(self.ndir), self.scal),
                    0)]
        elif name == "update":
            bxp, chunks, threads = self.upd_walk
            group = self.group
            opt = [a if a is not None else null for a in (self.s, self.cxs, self.cys)]
            out = [(self.k_update, (self.ntiles // group,), (threads,),
                    (self.pbuf[pcur], self.w, self.r[cur], self.r[1 - cur], self.x, self.y,
                     *opt, self.part if self.defl is not None else null,
                     self.scal, self.part_ry, self.part_rr,
                     self.part_zr if self.part_zr is not None else null,
                     nx, ny, np.int32(group * self.bx), np.int32(self.by),
                     np.int32(bxp), np.int32(chunks)), 0)]
        elif name == "precondition":        # a preconditioner without a fused kernel
            r_new = self.r[1 - cur]
            n = np.int64(self.n)
            dot = (self.k_dot, (self.nred,), (_THREADS,), (r_new, self.y, self.part_ry, n), 0)
            launches = self._prec_launches(r_new)
            if launches is not None:        # its own kernels: captured with the iteration
                out = list(launches) + [dot]
            else:
                def precondition():
                    self.y[...] = self.prec_obj.apply(r_new)
                out = [precondition, dot]
        elif name == "restrict":
            out = [(self.k_restrict, (k,), (128,),
                    (self.azt_indptr, self.azt_indices, self.azt_data, self.y, self.part_zr,
                     self.owner, self.g, np.int32(k), self.scal), 0)]
        elif name == "coarse":
            out = self._coarse_entries()
        else:                               # beta
            nry = self.nred if self.prec_code == PREC_GENERIC else self.ntiles
            zr = self.part_zr if self.part_zr is not None else self.part_ry
            if self.cs is not None:
                gather = self.cs.gather_operands()
            else:
                gather = (null, null, null, np.int32(0), np.int32(0), np.int32(0))
            out = [(self.k_beta, (1,), (1024,),
                    (self.part_ry, np.int32(nry), self.part_rr, np.int32(self.ntiles),
                     self.e, zr, self.owner, np.int32(k), self.scal, self.hist, self.counter,
                     np.int32(self._starting)) + gather, 0)]
        table[key] = out
        return out

    def _prec_launches(self, r_new):
        """The raw launches of ``y = M^-1 r_new`` a generic preconditioner
        offers (``device_launches``: buffers of its own, allocated once), or
        None."""
        offer = getattr(self.prec_obj, "device_launches", None)
        if self.prec_code != PREC_GENERIC or offer is None:
            return None
        return offer(r_new, self.y, self.scal[_DONE:_DONE + 1])

    def _coarse_entries(self):
        """The coarse solve's launches: the raw condensed solve's kernels
        (its gather into e by ``beta``), or a library call."""
        g, e = self.g, self.e
        if self.cs is not None:
            return self.cs.launches(g, e, gather=False)
        K = self._dense_K
        if K is not None:
            return [dense_product(K, g, e)]

        def coarse():
            self._coarse(g, e)
        return [coarse]

    def _stages(self):
        """The launches of one iteration as (name, callable) pairs, each
        launched at the buffers' parity of its call (``direction_spmv``
        turns the direction's parity over, as an iteration does)."""
        def stage(name):
            def run():
                _launch(self._entries(name, self.cur, self.pcur))
                if name == "direction_spmv":
                    self.pcur = 1 - self.pcur
            return run
        return [(name, stage(name)) for name in self._names()]

    def _iteration(self, cur, pcur):
        """The launches of one iteration that starts at parity ``(cur, pcur)``."""
        key = ("iteration", cur, pcur)
        if key not in self._table:
            out, q = [], pcur
            for name in self._names():
                out += self._entries(name, cur, q)
                if name == "direction_spmv":
                    q = 1 - q
            self._table[key] = out
        return self._table[key]

    def _signature(self):
        """What the graphs hold, as a key: the buffers' layout (allocated once,
        or reallocated by :meth:`_reserve`: ``_epoch``), the number of
        deflation vectors (the restriction's grid, ``beta``'s count), the
        history's address, the raw coarse solve's launches (its arrays
        and sizes) and the address of the engine's copy of a dense coarse
        inverse.  The rest of every launch is fixed for the engine's life."""
        if self._sig is None:
            cs = ()
            if self.cs is not None:
                cs = tuple((id(kern), grid, block, shared, tuple(_arg_key(a) for a in args))
                           for kern, grid, block, args, shared in
                           self.cs.launches(self.g, self.e, gather=False))
                cs += tuple(_arg_key(a) for a in self.cs.gather_operands())
            hist = self.hist.data.ptr if self.hist is not None else 0
            dense = self._dense_K.data.ptr if self._dense_K is not None else 0
            prec = ()
            if self.prec_code == PREC_GENERIC:
                prec = tuple((id(entry[0]), entry[1], entry[2], entry[4],
                              tuple(_arg_key(a) for a in entry[3]))
                             for cur in (0, 1) for entry in self._entries("precondition", cur, 0)
                             if entry.__class__ is tuple)
            self._sig = (self._epoch, self.k, hist, self.prec_code, cs, dense, prec)
        return self._sig

    #: Replay iterations from CUDA graphs (see :meth:`iterate`).
    use_graphs = True
    #: Iterations in the long graph (even: the buffer parity is back after it).
    graph_iterations = 8
    #: Capture the dense coarse solve's cuBLAS product in the graphs of
    #: whole iterations (else: graphs between its calls, see :meth:`iterate`).
    capture_dense_product = True

    def _graph_mode(self):
        """``"whole"``: whole iterations are captured (every stage is a raw
        kernel, or the dense coarse solve's cuBLAS product); ``"split"``: the
        runs between the dense coarse solve's library calls are; None:
        direct launches only."""
        if not self.use_graphs:
            return None
        if self.prec_code == PREC_GENERIC and not all(
                _capturable(entry) for cur in (0, 1) for entry in
                self._entries("precondition", cur, 0)):
            return None
        if self.defl is None or self.cs is not None:
            return "whole"
        if self._dense_K is not None:
            capturable = all(_capturable(entry) for entry in self._entries("coarse", 0, 0))
            whole = self.capture_dense_product and capturable and not self._dense_capture_failed
            return "whole" if whole else "split"
        return None

    def _prepare_graphs(self):
        """At a start: drop the graphs if the launches changed since they were
        captured, and capture the split mode's short ones now (whole
        iterations are captured after the first stretch was launched
        directly: see :meth:`iterate`)."""
        mode = self._graph_mode()
        if mode is None:
            return
        sig = self._signature()
        if sig != self._graph_sig:
            self._graphs, self._graph_sig, self._sig_solves = {}, sig, 0
        self._sig_solves += 1
        # Long graphs where they will be used: the launches stayed from the
        # last solve, or it was long (its capture then runs while the device
        # works on the start).
        self._long_ok = self._sig_solves >= 2 or \
            self._solve_iterations >= 4 * int(self.graph_iterations)
        self._solve_iterations = 0
        cur, pcur = self.cur, self.pcur
        if mode == "split":
            self._graph("head", 0, cur, pcur)
            self._graph("link", 0, 1 - cur, 1 - pcur)

    def iterate(self, count):
        """``count`` iterations, no host synchronisation.

        Where an iteration allocates nothing (the fused preconditioners and
        the raw condensed or the dense coarse solve, or no deflation), runs
        of iterations are replayed from CUDA graphs: pairs, and runs of
        :attr:`graph_iterations` once the launches have stayed the same for
        a second solve, or after a long solve (a long graph costs more to
        capture than a short solve saves).  The dense coarse solve's cuBLAS
        product is captured with the kernels (:func:`.coarse.dense_product`:
        cuBLAS's entry points on the capturing stream, with a workspace of
        their own); where that capture fails, or without
        :attr:`capture_dense_product`, the runs between its calls are
        replayed: one graph and one product per iteration.  The graphs are
        captured once per launch signature and buffer parity
        (:meth:`_signature`) and replace about twenty launches per
        iteration; the kernels and their arguments are those of the direct
        launches: the results are the same, bit for bit (measured:
        docs/performance.md, "Figures behind code choices").
        """
        mode = self._graph_mode() if count >= 1 else None
        if mode is not None and self._signature() != self._graph_sig:
            self._graphs, self._graph_sig, self._sig_solves = {}, self._signature(), 1
        if mode == "split":
            self._iterate_split(count)
            return
        lengths = []
        if mode == "whole" and count >= 2:
            long = self._long_length()
            lengths = [2]
            if long and count >= long and getattr(self, "_long_ok", False):
                lengths.insert(0, long)
            if ("whole", 2, self.cur, self.pcur) not in self._graphs:
                # Not captured yet: this stretch by direct launches, the
                # capture after them, while the device runs them.
                parity, count = (self.cur, self.pcur), self._direct(count)
                for length in lengths:
                    self._graph("whole", length, *parity)
                return
            for length in lengths:
                if count < length:
                    continue
                graph = self._graph("whole", length, self.cur, self.pcur)
                if graph is None:
                    break
                for _ in range(count // length):
                    graph.launch()
                count %= length
        self._direct(count)

    def _direct(self, count):
        """``count`` iterations by direct launches."""
        for _ in range(count):
            _launch(self._iteration(self.cur, self.pcur))
            self.cur, self.pcur = 1 - self.cur, 1 - self.pcur
        return 0

    def _long_length(self):
        """The long graph's iterations (:attr:`graph_iterations`, even), or 0."""
        long = int(self.graph_iterations)
        return long if long > 2 and long % 2 == 0 else 0

    def _iterate_split(self, count):
        """Iterations around the dense coarse product: the first one's
        launches before it (graph ``head``), then per iteration the product
        and the next one's ``beta`` with the launches up to its product
        (graph ``link``); the last ``beta`` alone."""
        names = self._names()
        cut = names.index("coarse")
        cur, pcur = self.cur, self.pcur
        graph = self._graph("head", 0, cur, pcur)
        if graph is not None:
            graph.launch()
        else:
            _launch(self._iteration(cur, pcur)[:cut])
        for i in range(count):
            _launch(self._entries("coarse", cur, pcur))
            cur, pcur = 1 - cur, 1 - pcur
            if i + 1 < count:
                graph = self._graph("link", 0, cur, pcur)
                if graph is not None:
                    graph.launch()
                else:
                    _launch(self._entries("beta", cur, pcur) + self._iteration(cur, pcur)[:cut])
            else:
                _launch(self._entries("beta", cur, pcur))
        self.cur, self.pcur = cur, pcur

    def _graph_launches(self, kind, length, cur, pcur):
        """The launches a graph holds: ``whole``: ``length`` iterations from
        parity ``(cur, pcur)``; ``head``: an iteration's launches before the
        coarse solve; ``link``: the previous iteration's ``beta``, then the
        head of the iteration at ``(cur, pcur)``."""
        if kind == "whole":
            out = []
            for _ in range(length):
                out += self._iteration(cur, pcur)
                cur, pcur = 1 - cur, 1 - pcur
            return out
        cut = self._names().index("coarse")
        head = self._iteration(cur, pcur)[:cut]
        return head if kind == "head" else self._entries("beta", cur, pcur) + head

    def _graph(self, kind, length, cur, pcur):
        """The CUDA graph of :meth:`_graph_launches` (captured on first use),
        or None when capture is not possible here (then direct launches are
        used)."""
        key = (kind, length, cur, pcur)
        graphs = self._graphs
        if key in graphs:
            return graphs[key]
        launches = self._graph_launches(kind, length, cur, pcur)
        library = not all(entry.__class__ is tuple for entry in launches)
        if not all(_capturable(entry) for entry in launches) or \
                (library and self._dense_capture_failed):
            graphs[key] = None
            return None
        cp = self.cp
        stream = self._capture_stream
        if stream is None:
            stream = self._capture_stream = cp.cuda.Stream(non_blocking=True)
        graph = None
        try:
            with stream:
                stream.begin_capture()
                try:
                    _launch(launches)
                finally:
                    graph = stream.end_capture()
        except Exception as exc:             # capture unsupported: launch directly
            graph = None
            self.capture_error = repr(exc)
            if library:                      # the library call's capture failed:
                self._dense_capture_failed = True    # split mode from now on
            else:
                self.use_graphs = False
        graphs[key] = graph
        return graph


def _capturable(entry):
    """Can a CUDA graph hold this launch (a raw kernel's tuple, or a library
    call marked ``capturable``)?"""
    return entry.__class__ is tuple or getattr(entry, "capturable", False)


def _arg_key(a):
    """A kernel argument as the graphs see it: a buffer by its address, a
    scalar by its type and value."""
    if isinstance(a, np.generic):
        return (a.dtype.str, a.item())
    return ("ptr", int(a.data.ptr))


def _launch(entries):
    """Launch ``(kernel, grid, block, args, shared_mem)`` tuples and call the
    callables among them, in order."""
    for entry in entries:
        if entry.__class__ is tuple:
            kern, grid, block, args, shared = entry
            kern(grid, block, args, shared_mem=shared)
        else:
            entry()
