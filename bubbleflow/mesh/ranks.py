"""The ranks' boxes of a grid: slabs along its slowest axis, with halos.

A distributed solve gives each rank a slab of whole planes (rows in 2-D):
a slab's cells are contiguous in memory, so its halo (one plane from each
neighbour) is contiguous too and travels as one message.  Slab edges fall
on multiples of ``align`` cells (the deflation blocks' height, so that a
block never straddles two ranks); the slabs differ by at most ``align``
planes.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RankSlab", "slab_edges", "rank_slab", "coarsening_align"]


def slab_edges(planes, ranks, align=1):
    """The ``ranks + 1`` plane indices that cut ``planes`` planes into
    ``ranks`` slabs, each edge a multiple of ``align``; ValueError where
    some rank would get none.

    >>> slab_edges(10, 3), slab_edges(64, 4, align=16), slab_edges(48, 3, align=8)
    ([0, 4, 7, 10], [0, 16, 32, 48, 64], [0, 16, 32, 48])
    """
    if ranks < 1 or align < 1:
        raise ValueError(f"ranks={ranks}, align={align}: expected integers >= 1")
    units = -(-planes // align)                     # blocks of align planes (the last may be short)
    if units < ranks:
        raise ValueError(f"{planes} planes in blocks of {align} cannot be shared by {ranks} "
                         f"ranks: at most {units}")
    base, extra = divmod(units, ranks)
    edges, u = [0], 0
    for r in range(ranks):
        u += base + (1 if r < extra else 0)
        edges.append(min(u * align, planes))
    return edges


@dataclass(frozen=True)
class RankSlab:
    """Rank ``rank``'s slab of ``shape`` (the grid's array shape): planes
    ``lo:hi`` of array axis 0, its neighbours' ranks below and above (None
    at the walls)."""

    shape: tuple
    rank: int
    size: int
    lo: int
    hi: int

    @property
    def lower(self):
        return self.rank - 1 if self.rank > 0 else None

    @property
    def upper(self):
        return self.rank + 1 if self.rank < self.size - 1 else None

    @property
    def local_shape(self):
        return (self.hi - self.lo,) + tuple(self.shape[1:])

    @property
    def cells(self):
        return slice(self.lo, self.hi)

    def extended(self):
        """The planes of the slab and its halos: ``(lo', hi', below, above)``,
        ``below`` and ``above`` the number of halo planes (0 at a wall)."""
        below = 1 if self.lower is not None else 0
        above = 1 if self.upper is not None else 0
        return self.lo - below, self.hi + above, below, above


def rank_slab(shape, rank, size, align=1):
    """Rank ``rank``'s :class:`RankSlab` of a grid of array ``shape``."""
    edges = slab_edges(shape[0], size, align)
    return RankSlab(tuple(shape), rank, size, edges[rank], edges[rank + 1])


def coarsening_align(planes, ranks):
    """The largest power of two ``a`` with at least two blocks of ``a``
    planes a rank on average: slab edges on multiples of ``a`` stay on
    aggregate edges for ``log2(a)`` coarsenings (the multigrid's slabbed
    levels), the slabs within about a block of each other.

    >>> coarsening_align(256, 4), coarsening_align(64, 3), coarsening_align(10, 4)
    (32, 8, 1)
    """
    align = 1
    while planes // (2 * align) >= 2 * ranks:
        align *= 2
    return align
