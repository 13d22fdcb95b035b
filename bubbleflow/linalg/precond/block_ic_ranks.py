"""Block incomplete Cholesky on the ranks of a distributed operator.

The blocks of :class:`~.block_ic.BlockIC` drop every coupling between them,
so where no block straddles two ranks' slabs the preconditioner is, rank by
rank, the blocks of the rank's own rows, and applying it needs no
communication: in 3-D a block lies in one z-plane and any slab of planes
holds whole blocks; in 2-D a block is ``block_lines`` rows, and the slabs'
edges must fall on multiples of it (``mesh.ranks`` aligns them).

A rank factorises its own rows from its slab's couplings alone (widened by
the halo planes, so that the centre entries hold the faces to the
neighbours' planes): the global operator's rows of the slab, the same
preconditioner as the one process's, and no rank holds the whole grid.
"""
from __future__ import annotations

from ...operators.poisson import diagonals_from_couplings
from .block_ic import BlockIC

__all__ = ["block_ic_on_slab"]


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
