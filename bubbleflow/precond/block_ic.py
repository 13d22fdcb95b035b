"""Block incomplete Cholesky, IC(0) in blocks of ``m`` grid lines.

The grid rows are grouped into blocks of ``m >= 2`` consecutive lines (block
size ``m * nx``, seed section 7.3 and Appendix B.3); the couplings between
blocks are dropped, so every block is factorised and solved independently.
For the 5-point pattern IC(0) keeps the off-diagonal entries of ``A`` and
only changes the pivots::

    M = (D + L) D^-1 (D + L)^T,   d_p = a_pp - a_pw^2 / d_w - a_ps^2 / d_s

(``w``, ``s`` the west and south neighbours inside the block).  Each block
is a principal submatrix of a singular M-matrix with at least one coupling
dropped, hence non-singular, and the pivots stay positive.

The two triangular solves are :func:`block_sweep`, which runs on the GPU as a
parallel scan over the columns of every block (not a thread walking a block).
"""
from __future__ import annotations

import numpy as np

from .base import Preconditioner, require_grid_operator


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


class BlockIC(Preconditioner):
    """IC(0) in blocks of ``block_lines`` grid lines, inter-block couplings dropped.

    Parameters
    ----------
    A : PoissonOperator
    block_lines : int, default 2
        Grid lines per block; must divide ``ny`` and be smaller than it.
    """

    name = "block_ic"

    def __init__(self, A, block_lines=2):
        A = require_grid_operator(A, self.name)
        ny, nx = A.grid_shape
        m = int(block_lines)
        if m < 1 or ny % m != 0 or m >= ny:
            raise ValueError(f"block_ic: block_lines={m} must divide ny={ny} and be smaller than it")
        self.grid_shape = (ny, nx)
        self.block_lines = m
        S, W, C, E, N = A._diagonals_host
        S = S.copy()
        S[::m, :] = 0.0          # first row of each block: the south coupling is dropped
        N = N.copy()
        N[m - 1::m, :] = 0.0     # last row of each block: the north coupling is dropped
        d = block_ic_pivots(C, W, S, m)
        xp, dtype = A.backend.xp, A.dtype
        self.pivots = xp.asarray(d, dtype=dtype)
        self.inv_pivots = xp.asarray(1.0 / d, dtype=dtype)
        self.W = xp.asarray(W, dtype=dtype)
        self.S = xp.asarray(S, dtype=dtype)
        self.E = xp.asarray(E, dtype=dtype)
        self.N = xp.asarray(N, dtype=dtype)

    def apply(self, r):
        from .block_sweep import block_sweep

        shape = r.shape
        r = r.reshape(self.grid_shape)
        u = block_sweep(r, self.W, self.S, self.inv_pivots, self.block_lines)           # (D+L) u = r
        z = block_sweep(self.pivots * u, self.E, self.N, self.inv_pivots,
                        self.block_lines, reverse=True)                                  # (D+L^T) z = D u
        return z.reshape(shape)
