"""Block incomplete Cholesky on the ranks of a distributed operator.

The blocks of :class:`~.block_ic.BlockIC` drop every coupling between them,
so where no block straddles two ranks' slabs the preconditioner is, rank by
rank, the blocks of the rank's own rows, and applying it needs no
communication: in 3-D a block lies in one z-plane and any slab of planes
holds whole blocks; in 2-D a block is ``block_lines`` rows, and the slabs'
edges must fall on multiples of it (``mesh.ranks`` aligns them).  The
factorisation is the one-process factorisation's rows (every rank builds it
from the global operator it holds): the same preconditioner.
"""
from __future__ import annotations

import math

from .block_ic import BlockIC

__all__ = ["block_ic_on_slab"]


def block_ic_on_slab(A, A_rank, block_lines=2):
    """The block IC of the global operator ``A`` on the slab of ``A_rank``
    (a DistributedOperator whose slab holds whole blocks)."""
    slab = A_rank.slab
    rows_per_plane = math.prod(slab.shape[1:-1])   # line rows a plane of axis 0: 2-D 1, 3-D ny
    whole = BlockIC(A, block_lines)
    return whole.rows(slab.lo * rows_per_plane, slab.hi * rows_per_plane, slab.local_shape)
