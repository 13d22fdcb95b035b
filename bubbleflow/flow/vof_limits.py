"""What the volume-of-fluid array code and its CUDA twins share: the clip
tolerance of the volume fraction, the margin of the initial fraction's cut
test, the difference step of a plane's area, the redistancing search's
window and order, and the cell-volume scaling of sums.  (A module of its own: the
array code imports the twins to register them, so they cannot import it.)
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from ..mesh.grid import array_axis

__all__ = ["CLIP_TOLERANCE", "CUT_MARGIN", "area_step", "search_reach", "search_window",
           "search_offsets", "box_distance2", "SearchOrder", "search_order", "times_cell_volume"]

#: Excursions of c outside [0, 1] smaller than this are rounding and are
#: clipped; larger ones are left in place (they mean a too-large time step).
#: Cells within it of 0 or 1 hold no PLIC segment.
CLIP_TOLERANCE = 1e-12

#: Relative margin of the quadratic sub-cell cuts' test whether a cell may
#: be cut (:func:`.vof_fraction._may_be_cut`), far above the rounding of the
#: sub-cells' values and planes.
CUT_MARGIN = 1e-8


def area_step(spacing, dtype):
    """The step of the central difference that gives a PLIC plane's area
    (the fraction's rate in the plane constant): sqrt(eps) of ``dtype``
    times the largest cell size."""
    return math.sqrt(float(np.finfo(dtype).eps)) * max(spacing)


def search_reach(band, spacing):
    """Offsets per array axis to search so that every cell within ``band``
    cells of an interface cell finds the foot of its perpendicular on a
    plane (straight) interface: that foot is no farther than the interface
    point in the nearest interface cell, at most ``band + 1/2`` cells away
    per axis.

    Parameters
    ----------
    band : int
        Half-width of the band, in cells.
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    tuple of ints
        Per array axis (``(r_y, r_x)`` in 2-D).
    """
    far = math.hypot(*((band + 0.5) * h for h in spacing))
    return tuple(int(math.floor(far / h + 0.5)) for h in reversed(spacing))


def search_window(band, reach, spacing):
    """The offsets per array axis the redistancing search visits: ``reach``
    cells (by default :func:`search_reach`), at least ``band + 1``.

    A band cell lies within ``band`` cells of a seed, and a seed may be the
    far cell of an interface face whose segment the near cell holds: one
    cell more always finds a segment (a shorter reach leaves band cells at
    an infinite distance).

    Parameters
    ----------
    band : int
        Half-width of the band, in cells.
    reach : int or None
        Search radius in cells, the same along every axis.
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    tuple of ints
        Per array axis (``(r_y, r_x)`` in 2-D).
    """
    r = search_reach(band, spacing) if reach is None else (int(reach),) * len(spacing)
    return tuple(max(x, band + 1) for x in r)


def search_offsets(window, spacing):
    """The search's offsets within ``window`` (per array axis), nearest first.

    A stable sort of the row-major offsets by their squared length, so
    equal distances keep the row-major order: the order in which the first
    segment met wins a tie.

    Parameters
    ----------
    window : tuple of ints
        Reach per array axis (:func:`search_window`).
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    list of tuples
        Offsets per array axis (``(dj, di)`` in 2-D).
    """
    nd = len(window)
    h = [spacing[array_axis(nd, k)] for k in range(nd)]
    return sorted(itertools.product(*(range(-r, r + 1) for r in window)),
                  key=lambda o: sum((o[k] * h[k]) ** 2 for k in range(nd)))


def box_distance2(offset, spacing):
    """Squared distance from a cell centre to the box of the cell ``offset``
    (per array axis) away: no patch of that cell is nearer.

    Parameters
    ----------
    offset : tuple of ints
        Offset per array axis (:func:`search_offsets`).
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    float
    """
    nd = len(offset)
    return sum(max(abs(offset[array_axis(nd, a)]) - 0.5, 0.0) ** 2 * h * h
               for a, h in enumerate(spacing))


class SearchOrder(NamedTuple):
    """A search's offsets and what its stopping and skipping read, offset by
    offset (:func:`search_order`)."""

    #: Offsets per array axis, nearest first (:func:`search_offsets`).
    offsets: list
    #: Each offset's :func:`box_distance2`.
    box2: list
    #: ``later[i]``: the least ``box2`` from offset ``i`` on (``inf`` past the last).
    later: list
    #: ``lead[d]``: how many leading offsets are shorter than ``d`` cells
    #: along every axis, ``d`` from 0 to the window's largest reach + 1.
    lead: list


def search_order(window, spacing):
    """The :class:`SearchOrder` of the offsets within ``window``: what the
    array code's search and the 3-D kernel's both visit, stop by and skip by.

    Parameters
    ----------
    window : tuple of ints
        Reach per array axis (:func:`search_window`).
    spacing : tuple of floats
        Cell sizes in grid-axis order (their type fixes the sort's ties:
        :func:`search_offsets`).

    Returns
    -------
    SearchOrder
    """
    offsets = search_offsets(window, spacing)
    box2 = [box_distance2(o, spacing) for o in offsets]
    later = box2 + [float("inf")]
    for i in range(len(offsets) - 1, -1, -1):
        later[i] = min(later[i], later[i + 1])
    reach = [max(abs(x) for x in o) for o in offsets]
    lead = [next((i for i, r in enumerate(reach) if r >= d), len(offsets))
            for d in range(max(window) + 2)]
    return SearchOrder(offsets, box2, later, lead)


def times_cell_volume(value, spacing):
    """``value`` times the cell volume, a host float: ``value hx hy`` in
    2-D, ``value prod(spacing)`` in 3-D.  The order of the products fixes
    the last bit, and each dimension keeps its own."""
    if len(spacing) == 2:
        return value * spacing[0] * spacing[1]
    return value * math.prod(spacing)
