"""A performance model of one CG iteration on several ranks, and what it needs
measured (``scripts/model_ranks.py`` prints it beside the measured time).

One iteration of the Krylov loop on a rank (:mod:`bubbleflow.linalg.krylov`,
the array engine, Jacobi) costs

* its memory traffic, ``passes x 8 x cells_on_the_rank`` bytes at the
  rank's share of the node's copy bandwidth (every rank copying at once);
* one halo swap (the operator's product): a message of one plane to each
  neighbour and one from it, overlapped with the slab's own faces but not
  with the rest, costed as a ping-pong of a plane (latency plus bytes over
  the link's bandwidth);
* three all-reduces of one value (``p . w``, ``r . r``, ``r . y``).

The passes are counted on the array code (each NumPy operation reads its
operands and writes its result once): the product, for ``d`` axes, zeroes
the result (1) and per axis forms the difference, the flux and adds it to
both sides (12), then returns a copy (2); ``p . w`` (2), ``x += alpha p``
and ``r -= alpha w`` (5 each: the scaled temporary and the add), ``r . r``
(1: one operand read), ``y = D^-1 r`` (3), ``r . y`` (2), ``p = y + beta p``
(5).  The fused GPU engine's own count replaces them there.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["array_passes", "Link", "predict_iteration"]


def array_passes(ndim):
    """Grid arrays one Jacobi-PCG iteration of the array code reads or writes."""
    product = 1 + 12 * ndim + 2
    return product + 2 + 5 + 5 + 1 + 3 + 2 + 5


@dataclass(frozen=True)
class Link:
    """What was measured of the node: per-rank copy bandwidth (bytes/s, read
    plus written, every rank copying at once), the link's latency (s) and
    bandwidth (bytes/s) from a ping-pong, an all-reduce's latency (s)."""

    copy_bandwidth: float
    latency: float
    bandwidth: float
    allreduce: float


def predict_iteration(cells, plane_cells, ndim, ranks, link, passes=None):
    """Seconds one iteration takes on each of ``ranks`` ranks sharing
    ``cells`` cells (slabs of planes of ``plane_cells`` cells), by the model
    above; returns ``(total, {part: seconds})``."""
    passes = array_passes(ndim) if passes is None else passes
    local = cells / ranks
    parts = {"memory": passes * 8.0 * local / link.copy_bandwidth}
    if ranks > 1:
        parts["halo"] = link.latency + 8.0 * plane_cells / link.bandwidth
        parts["allreduce"] = 3 * link.allreduce
    return sum(parts.values()), parts
