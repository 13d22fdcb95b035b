"""Deflation: the subspace, its projections and the coarse solve.

``space``              :class:`Deflation` (piecewise-constant vectors from
                       labels or boxes of the grid's partition, ``A Z``,
                       ``E = Z^T A Z``) and :func:`make_deflation` (the kinds
                       of the registry).
``labels``             the label of every cell: boxes of the grid's
                       partition, split by the level set; compact numbering.
``boxes``              the layout of a space of boxes and its sums per box
                       and part (``Z^T r``).
``coarse_matrix``      ``A Z``, ``(A Z)^T`` and ``E`` from the cut faces of
                       the grid operator, or by sparse products.
``arrays``             the scatter-add and host read the set-up shares.
``coarse``             :class:`CoarseSolver`: ``E^+ s`` by a dense inverse
                       or the condensed block solve.
``dense_inverses``     the SPD inverses it stores (Cholesky, batched
                       Gauss-Jordan).
``graph_partition``    groups and separator of the condensed solve.
``condensed_layout``   the numbering and index arrays of the condensed solve.
``condensed_kernels``  the condensed solve as five CUDA kernels.
``kernels``            the CUDA set-up of block deflation spaces and per-tile
                       sums (twins of the array code in ``labels``, ``boxes``
                       and ``coarse_matrix``).
``vectors``            deflation by given vectors ``Z``.
``distributed``        a deflation space over the ranks of a slab
                       decomposition.
"""
from .coarse import CoarseSolver
from .space import Deflation, make_deflation

__all__ = ["Deflation", "make_deflation", "CoarseSolver"]
