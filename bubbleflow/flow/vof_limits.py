"""What the volume-of-fluid array code (:mod:`.vof`) and its CUDA twins
(:mod:`.vof_cuda`, :mod:`.vof_redistance_cuda`) share: the clip tolerance of
the volume fraction and the redistancing search's reach.  (A module of its
own: :mod:`.vof` imports the twins to register them, so they cannot import it.)
"""
from __future__ import annotations

import math

__all__ = ["CLIP_TOLERANCE", "search_reach", "search_window", "search_offsets"]

#: Excursions of c outside [0, 1] smaller than this are rounding and are
#: clipped; larger ones are left in place (they mean a too-large time step).
#: Cells within it of 0 or 1 hold no PLIC segment.
CLIP_TOLERANCE = 1e-12


def search_reach(band, hx, hy):
    """Offsets (rows, columns) to search so that every cell within ``band``
    cells of an interface cell finds the foot of its perpendicular on a
    straight interface: that foot is no farther than the interface point in
    the nearest interface cell, at most ``(band + 1/2)`` cells away per axis."""
    far = math.hypot((band + 0.5) * hx, (band + 0.5) * hy)
    return int(math.floor(far / hy + 0.5)), int(math.floor(far / hx + 0.5))


def search_window(band, reach, hx, hy):
    """The rows and columns ``(r_y, r_x)`` the search visits: ``reach`` (by
    default :func:`search_reach`), at least ``band + 1``.  A band cell lies
    within ``band`` cells of a seed, and a seed may be the far cell of an
    interface face whose segment the near cell holds: one cell more always
    finds a segment (a shorter reach left band cells at an infinite
    distance)."""
    r_y, r_x = search_reach(band, hx, hy) if reach is None else (int(reach), int(reach))
    return max(r_y, band + 1), max(r_x, band + 1)


def search_offsets(r_y, r_x, hx, hy):
    """The search's offsets ``(dj, di)`` within ``r_y`` rows and ``r_x``
    columns, nearest first (a stable sort: equal distances keep the
    row-major order), the order in which the first segment met wins a tie."""
    return sorted(((dj, di) for dj in range(-r_y, r_y + 1) for di in range(-r_x, r_x + 1)),
                  key=lambda o: (o[0] * hy) ** 2 + (o[1] * hx) ** 2)
