"""Deflation: the subspace, its projections and the coarse solve.

``space``    :class:`Deflation` (piecewise-constant vectors from labels or
             blocks of the grid's partition, ``A Z``, ``E = Z^T A Z``) and
             :func:`make_deflation` (the kinds of the registry).
``coarse``   :class:`CoarseSolver`: ``E^+ s`` by a dense inverse or the
             condensed block solve.
``kernels``  the CUDA set-up of block deflation spaces and per-tile sums
             (twins of the array code in ``space``).
"""
from .coarse import CoarseSolver
from .space import Deflation, make_deflation

__all__ = ["Deflation", "make_deflation", "CoarseSolver"]
