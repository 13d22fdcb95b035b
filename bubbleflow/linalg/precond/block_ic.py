"""Block incomplete Cholesky, IC(0) in blocks of ``m`` grid lines.

The grid rows are grouped into blocks of ``m >= 2`` consecutive lines (block
size ``m * nx``, Gupta 2010, section 7.3 and appendix B.3); the couplings between
blocks are dropped, so every block is factorised and solved independently.
For the 5-point pattern IC(0) keeps the off-diagonal entries of ``A`` and
only changes the pivots::

    M = (D + L) D^-1 (D + L)^T,   d_p = a_pp - a_pw^2 / d_w - a_ps^2 / d_s

(``w``, ``s`` the west and south neighbours inside the block).  Each block
is a principal submatrix of a singular M-matrix with at least one coupling
dropped, hence non-singular, and the pivots stay positive.

The two triangular solves are :func:`block_sweep`, which runs on the GPU as a
parallel scan over the columns of every block (not a thread walking a block).

The pivots (:func:`block_ic_pivots_scan`, on any backend) are computed line by
line: once line ``l - 1`` of every block is known, line ``l`` is the scalar
recurrence ``d_i = c_i - w_i^2 / d_{i-1}`` along the columns with
``c_i = a_pp - a_ps^2 / d_s`` known.  Each step is the Moebius map
``f_i(x) = c_i - w_i^2 / x``; Moebius maps compose associatively, so the
recurrence is an inclusive scan of maps (:func:`moebius_scan`), vectorised
over all blocks: ``m`` scans, no loop over columns.  :func:`block_ic_pivots`
(NumPy, a loop over columns and lines) is the reference it is tested against.

On a rank's slab of a distributed operator (:func:`block_ic_on_slab`) the
preconditioner is, rank by rank, the blocks of the rank's own rows, and
applying it needs no communication: the blocks drop every coupling between
them, in 3-D a block lies in one z-plane and any slab of planes holds whole
blocks, and in 2-D the slabs' edges fall on multiples of ``block_lines``
(:func:`slab_alignment`).  A rank factorises its own rows from its slab's
couplings alone (widened by the halo planes, so that the centre entries
hold the faces to the neighbours' planes): the global operator's rows of
the slab, the same preconditioner as the one process's, and no rank holds
the whole grid.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ...compute import cuda
from ...compute.backend import backend_of
from ...compute.transfer import on_device
from ...compute.truth import any_true
from ...compute.twins import twin
from ...operators.poisson import diagonals_from_couplings
from .base import Preconditioner, require_grid_operator

__all__ = ["BlockIC", "block_ic_pivots", "block_ic_pivots_scan", "moebius_scan",
           "block_ic_on_slab", "slab_alignment"]

#: Maps composed sequentially per chunk in :func:`moebius_scan` (one launch each).
SCAN_CHUNK = 8


def block_ic_pivots(C, W, S, m):
    """IC(0) pivots ``d`` of the block-diagonal part of the 5-point matrix.

    ``C``, ``W``, ``S`` are the centre, west and south entries, shape
    (ny, nx), NumPy; ``S`` must already be zero on the first row of each
    block.  Loops over columns and block rows, vectorised over blocks.
    """
    ny, nx = C.shape
    nb = ny // m
    Cb = C.reshape(nb, m, nx)
    Wb = W.reshape(nb, m, nx)
    Sb = S.reshape(nb, m, nx)
    d = np.empty_like(Cb)
    for i in range(nx):
        for l in range(m):
            val = Cb[:, l, i].copy()
            if i > 0:
                val -= Wb[:, l, i] ** 2 / d[:, l, i - 1]
            if l > 0:
                val -= Sb[:, l, i] ** 2 / d[:, l - 1, i]
            d[:, l, i] = val
    if not np.all(d > 0):
        raise FloatingPointError("block_ic: non-positive pivot in the incomplete factorisation")
    return d.reshape(ny, nx)


def block_ic_pivots_scan(C, W, S, m, xp=None, chunk=SCAN_CHUNK):
    """:func:`block_ic_pivots` on the array backend of ``C``, without loops over columns.

    ``C``, ``W``, ``S`` (ny, nx), NumPy or CuPy; ``S`` zero on the first row
    of each block, ``W`` on the first column (a wall) whatever it holds.
    Returns the float64 pivots ``(ny, nx)`` on the same backend.  Loops over
    the ``m`` lines of a block only; each line is one :func:`moebius_scan`
    over all blocks at once.  No check of the signs (no host synchronisation).
    """
    if xp is None:
        xp = backend_of(C).xp
    ny, nx = C.shape
    nb = ny // m
    f64 = np.float64
    Cb = C.reshape(nb, m, nx)
    Wb = W.reshape(nb, m, nx)
    Sb = S.reshape(nb, m, nx)
    d = xp.empty((nb, m, nx), dtype=f64)
    for l in range(m):
        p = Cb[:, l, :].astype(f64)                       # a new contiguous array
        if l > 0:
            s = Sb[:, l, :].astype(f64)
            p -= s * s / d[:, l - 1, :]
        w = Wb[:, l, :].astype(f64)
        q = w * w
        q[:, 0] = 0.0                                     # the west wall: f_0 is the constant c_0
        r = xp.zeros_like(p)
        moebius_scan(p, q, r, xp=xp, chunk=chunk, need_qr=False)
        d[:, l, :] = p                                    # q = 0 in every prefix: F_i = d_i
    return d.reshape(ny, nx)


def moebius_scan(p, q, r, xp=None, chunk=SCAN_CHUNK, need_qr=True):
    """Inclusive scan of Moebius maps along the last axis, in place.

    Element ``i`` of a row is the map ``f_i(x) = p_i - q_i / (x + r_i)``; on
    return it holds ``F_i = f_i o f_(i-1) o ... o f_0`` in the same form
    (``p``, ``q``, ``r`` overwritten; only ``p`` when ``need_qr`` is false).
    Maps of this form compose in closed form (:func:`_compose_numpy`): with
    ``s = p1 + r2``, ``f2 o f1 = (p2 - q2/s, (q2/s)(q1/s), r1 - q1/s)``.  For the
    IC(0) pivots of an M-matrix every ``s`` is positive (the value a segment
    of the row hands on stays to the right of the next segment's pole), so
    nothing overflows and no scaling is needed.

    Arrays of shape ``(rows, n)``, float64, NumPy or CuPy.  Rows are
    independent.  Chunks of ``chunk`` maps are composed sequentially (one
    vectorised step per position, over all chunks and rows), the chunk
    totals are scanned recursively, and the chunk prefixes are composed
    with them: ``chunk - 1`` steps per level, ``log_chunk(n)`` levels.
    """
    if xp is None:
        xp = backend_of(p).xp
    compose = _compose
    rows, n = p.shape
    if n <= 1:
        return p, q, r
    # Chunk-major copies (L, rows, G): position j of every chunk is one contiguous
    # slab (CuPy copies an input whose memory range overlaps an output's, so
    # strided columns would cost copies).  Padding maps (1, 0, 0) go after the
    # last column: nothing reads them.
    L = chunk if n > chunk else n
    G = -(-n // L)
    Tp, Tq, Tr = (_chunk_major(a, pad, G, L, xp) for a, pad in ((p, 1.0), (q, 0.0), (r, 0.0)))
    for j in range(1, L):                        # prefixes inside every chunk
        cur = (Tp[j], Tq[j], Tr[j])              # the same objects in and out: no copy
        compose(Tp[j - 1], Tq[j - 1], Tr[j - 1], *cur, *cur)
    if G > 1:
        moebius_scan(Tp[-1], Tq[-1], Tr[-1], xp=xp, chunk=chunk)   # chunk ends: global prefixes
        # The other positions of chunk g >= 1: (prefix in the chunk) o (global prefix to g-1).
        e = (Tp[-1][None, :, :-1], Tq[-1][None, :, :-1], Tr[-1][None, :, :-1])
        later = (Tp[:-1, :, 1:], Tq[:-1, :, 1:], Tr[:-1, :, 1:])
        compose(*e, *later, *later)
    outs = ((p, Tp), (q, Tq), (r, Tr)) if need_qr else ((p, Tp),)
    for a, t in outs:
        a[...] = t.transpose(1, 2, 0).reshape(rows, G * L)[:, :n]
    return p, q, r


def _chunk_major(a, pad, G, chunk, xp):
    rows, n = a.shape
    if G * chunk != n:
        b = xp.full((rows, G * chunk), pad, dtype=a.dtype)
        b[:, :n] = a
        a = b
    return xp.ascontiguousarray(a.reshape(rows, G, chunk).transpose(2, 0, 1))


@twin
def _compose(p1, q1, r1, p2, q2, r2, po, qo, ro):
    """``(po, qo, ro) = f2 o f1`` elementwise (outputs may alias ``f2``)."""
    s = p1 + r2
    u = q2 / s
    t = q1 / s
    np.subtract(p2, u, out=po)
    np.multiply(u, t, out=qo)
    np.subtract(r1, t, out=ro)


_COMPOSE_CUDA = """
const double s = p1 + r2;
const double u = q2 / s;
const double t = q1 / s;
po = p2 - u;
qo = u * t;
ro = r1 - t;
"""


@_compose.register("cupy")
def _compose_cupy(p1, q1, r1, p2, q2, r2, po, qo, ro):
    """:func:`_compose` as one fused kernel (the same arithmetic, same order)."""
    _compose_kernel()(p1, q1, r1, p2, q2, r2, po, qo, ro)


@cuda.kernel_cache
def _compose_kernel():
    return cuda.elementwise(
        "float64 p1, float64 q1, float64 r1, float64 p2, float64 q2, float64 r2",
        "float64 po, float64 qo, float64 ro", _COMPOSE_CUDA, "bubbleflow_moebius_compose")


class BlockIC(Preconditioner):
    """IC(0) in blocks of ``block_lines`` grid lines, inter-block couplings dropped.

    Parameters
    ----------
    A : PoissonOperator
    block_lines : int, default 2
        Grid lines (along x) per block; must divide ``ny`` and, in 2-D, be
        smaller than it.  In 3-D a block is ``block_lines`` consecutive
        x-lines of one z-plane (the couplings in z are all dropped, those
        in y at the blocks' edges): ``block_lines = ny`` makes the blocks
        whole planes, 1 single lines.
    check_pivots : bool or None
        Raise ``FloatingPointError`` on a non-positive pivot.  The check costs
        a host synchronisation, so the default (None) checks on NumPy only;
        the pivots of the pressure operator (an M-matrix) are positive.

    Everything is built on the operator's backend from its diagonals (no
    host round trip): the pivots by :func:`block_ic_pivots_scan`.  In 3-D
    the lines of all planes are the rows of one ``(nz ny, nx)`` array, so
    the 2-D pivots and sweeps (the scan over the columns, parallel over the
    blocks) serve unchanged.
    """

    name = "block_ic"

    def __init__(self, A, block_lines=2, check_pivots=None):
        A = require_grid_operator(A, self.name)
        m = int(block_lines)
        ny, nx = A.grid_shape[-2:]
        rows = math.prod(A.grid_shape[:-1])
        # One 2-D block of every line keeps every coupling: singular for the
        # Neumann operator, unless the rows couple outside the grid (a rank's
        # slab: the faces to its neighbours' planes are dropped).
        whole = A.ndim == 2 and m >= ny and not getattr(A, "coupled_outside", False)
        if m < 1 or ny % m != 0 or whole:
            plane = "" if A.ndim == 2 else " or equal to it"
            raise ValueError(f"block_ic: block_lines={m} must divide ny={ny} and be smaller "
                             f"than it{plane}")
        self.grid_shape = tuple(A.grid_shape)
        self.block_lines = m
        xp, dtype = A.backend.xp, A.dtype
        S, W, C, E, N = _line_entries(A, rows, nx)           # W and E shared, not copied
        S = S.copy()
        S[::m, :] = 0.0          # first row of each block: the south coupling is dropped
        N = N.copy()
        N[m - 1::m, :] = 0.0     # last row of each block: the north coupling is dropped
        d = block_ic_pivots_scan(C, W, S, m, xp=xp)          # float64
        if check_pivots is None:
            check_pivots = not on_device(A.backend)
        if check_pivots and bool(any_true(~(d > 0))):          # a NaN pivot fails too
            raise FloatingPointError("block_ic: non-positive pivot in the incomplete factorisation")
        self.pivots = d.astype(dtype, copy=False)
        self.inv_pivots = (1.0 / d).astype(dtype, copy=False)
        self.W = W
        self.S = S
        self.E = E
        self.N = N

    def rows(self, lo, hi, grid_shape):
        """The preconditioner of the line rows ``lo:hi`` alone (whole blocks:
        ``lo`` and ``hi`` multiples of ``block_lines``), for a grid of
        ``grid_shape`` (a rank's slab): its blocks are this one's, so it is
        this preconditioner's part for those rows."""
        m = self.block_lines
        if lo % m or hi % m or not 0 <= lo < hi <= self.pivots.shape[0]:
            raise ValueError(f"block_ic: rows {lo}:{hi} are not whole blocks of {m} lines")
        part = copy.copy(self)
        part.grid_shape = tuple(grid_shape)
        for name in ("pivots", "inv_pivots", "W", "S", "E", "N"):
            # Copies: views would keep the whole grid's arrays alive.
            setattr(part, name, getattr(self, name)[lo:hi].copy())
        return part

    def apply(self, r):
        from .block_sweep import block_sweep

        shape = r.shape
        r = r.reshape(self.pivots.shape)
        u = block_sweep(r, self.W, self.S, self.inv_pivots, self.block_lines)           # (D+L) u = r
        z = block_sweep(self.pivots * u, self.E, self.N, self.inv_pivots,
                        self.block_lines, reverse=True)                                  # (D+L^T) z = D u
        return z.reshape(shape)


def _line_entries(A, rows, nx):
    """``(S, W, C, E, N)`` of the x-lines as rows of a ``(rows, nx)`` array:
    the operator's diagonals less, in 3-D, those in z (no block spans
    planes; the centre keeps their couplings)."""
    entries = A.entries()
    return tuple(d.reshape(rows, nx) for d in entries[A.ndim - 2:A.ndim + 3])


class _SlabRows:
    """The global operator's rows of a rank's slab as block IC reads an
    operator (``entries``, ``grid_shape``, ``ndim``, ``backend``, ``dtype``;
    ``coupled_outside``: the rows couple to a neighbour's planes)."""

    def __init__(self, A_rank):
        slab = A_rank.slab
        self.grid_shape = tuple(slab.local_shape)
        self.ndim, self.backend, self.dtype = A_rank.ndim, A_rank.backend, A_rank.dtype
        self.coupled_outside = slab.lower is not None or slab.upper is not None
        self._rank = A_rank

    def entries(self):
        A = self._rank
        _, _, below, _ = A.slab.extended()
        nloc = A.slab.hi - A.slab.lo
        # The widened slab's diagonals: its own planes' are the global ones
        # (every face of theirs is in the widened couplings).
        widened = diagonals_from_couplings(A.couplings(), A.backend.xp)
        return tuple(d[below:below + nloc] for d in widened)


def block_ic_on_slab(A_rank, block_lines=2):
    """The block IC of the global operator on the slab of ``A_rank`` (a
    DistributedOperator whose slab holds whole blocks), from the rank's own
    couplings."""
    return BlockIC(_SlabRows(A_rank), block_lines)


def slab_alignment(shape, ranks, block_lines=2, **options):
    """What the ranks' slab edges of a grid of array ``shape`` (planes
    first) must fall on a multiple of: the 2-D blocks' ``block_lines`` (a
    3-D block lies in one plane: 1)."""
    return int(block_lines) if len(shape) == 2 else 1
