"""The level set rebuilt from the volume fraction: the CLSVOF coupling.

After each step the level set is made the signed distance to the PLIC
interface of the advected volume fraction (after Sussman and Puckett,
J. Comput. Phys. 162, 2000), in a band of cells round it: the level set
then carries the volume fraction's conserved interface, and its own
normals and curvature stay smooth.  The interface is the cells' PLIC
patches, reconstructed with the level set's normals: in 2-D the segments
of :mod:`.plic_segments`, in 3-D each cell's plane inside the cell.  The
distance of a band cell is searched among the patches of the cells in a
window round it, nearest offsets first (:mod:`.vof_limits`).

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``phi < 0`` in the gas, ``c = 1`` all gas.

The CUDA kernels (:mod:`.vof_redistance_cuda`: two launches a call in
2-D; eight in 3-D, with a host read of the gas's box and a sort of the
band's cells) are :func:`redistance`'s ``"cupy"`` variant; they follow
this code's order of operations.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import numpy as np

from ..compute.backend import array_module, backend_of
from ..compute.truth import any_true
from ..compute.twins import twin
from ..mesh.grid import array_axis
from . import vof_redistance_cuda
from .boxes import UNKNOWN
from .padding import along
from .plic_reconstruction import interface_mask, interface_normal, plane_constants_where
from .plic_segments import cell_segments, face_segments, segment_fields
from .vof_limits import CLIP_TOLERANCE, search_order, search_window

__all__ = ["redistance", "SEARCH_BATCH", "SEARCH_ENTRIES_PER_CELL", "SKIP_MIN_ENTRIES",
           "search_batch", "nearest_of_pairs"]

#: Entries (offset x band cell) the search handles per batch: larger
#: batches mean fewer array operations and more memory per batch; smaller
#: ones let the cells near the interface, whose nearest patch is among the
#: first offsets, drop out before the far offsets are measured.
SEARCH_BATCH = 1 << 22
#: By array module where it measured faster: the first batch's entries per
#: band cell (the batch then grows as cells drop out).  On NumPy 32: with
#: the pairs' nearest taken by ``minimum.at`` it measured the fastest or
#: close to it in 2-D and 3-D (the same distances:
#: docs/performance_records.md, "The 3-D rebuild's search on the CPU");
#: CuPy's array code, bound by its launches, keeps :data:`SEARCH_BATCH`.
SEARCH_ENTRIES_PER_CELL = {"numpy": 32}


#: Searches of at least this many entries (offset x layer) let each band
#: cell skip the entries nearer than its nearest patch cell: the groups this
#: makes cost batches of their own, which the flow's 2-D windows (289
#: offsets) did not repay and its 3-D ones (4913) did, as measured
#: (docs/performance.md, "The level set's rebuild on the CPU").
SKIP_MIN_ENTRIES = 2000


def search_batch(xp, cells):
    """The search's batch of entries for ``cells`` band cells on array
    module ``xp`` (:data:`SEARCH_ENTRIES_PER_CELL`, else :data:`SEARCH_BATCH`)."""
    per_cell = SEARCH_ENTRIES_PER_CELL.get(xp.__name__)
    return SEARCH_BATCH if per_cell is None else per_cell * max(int(cells), 1)


@twin
def redistance(phi, c, spacing, band=3, reach=None, info=None, gas=UNKNOWN):
    """The level set rebuilt from the volume fraction.

    The interface is the PLIC reconstruction of ``c`` with the normals of
    the input ``phi`` (the choice of Sussman and Puckett 2000).  In the
    *band*, the cells within ``band`` cells (Chebyshev distance) of an
    interface cell, ``|phi|`` is the distance from the cell centre to the
    nearest patch among the cells up to ``reach`` away: in 2-D the PLIC
    segment, in 3-D the PLIC plane's part in its cell, its distance
    approximated as :func:`_patch_distance` says (exact where the foot of
    the perpendicular lies in some cell's patch: everywhere for a plane
    interface).  An interface on a grid line (plane) leaves no interface
    cell; a face between a full and an empty cell then counts as a patch,
    and both its cells as interface cells.  Distance ties go to the nearer
    cell offset, the own cell first.

    Sign in the band: the cell's own data's.  A full cell
    (``c >= 1 - CLIP_TOLERANCE``) is gas, an empty one liquid and an
    interface cell takes the side of its own PLIC plane, so the sign always
    agrees with ``c`` and with the reconstruction.  Band cells whose nearest
    patch's plane puts them on the other side (near a patch's edge, where a
    neighbouring plane extended past its cell is a poor guide) are counted
    in ``info``.

    Outside the band the interface is at least ``band + 1/2`` cells away:
    ``phi`` is ``band * min(spacing)`` with the sign of ``c`` (gas where
    ``c > 1/2``), whatever the input there, so that the result depends on
    the input only through its normals in the interface cells (the step's
    transport carries the level set near the gas alone:
    :mod:`.clsvof_transport`).

    Parameters
    ----------
    phi : array
        Level set (its normals in the interface cells for the reconstruction).
    c : array
        Gas volume fraction; it defines the interface.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    band : int, optional
        Half-width of the rebuilt band, in cells.
    reach : int, optional
        Search radius in cells; by default the smallest one for which every
        band cell of a plane interface finds the foot of its perpendicular
        (:func:`.vof_limits.search_window`: 5 for ``band = 3`` on square
        cells); at least ``band + 1``.  ``reach = band + 1`` is cheaper and
        exact only within about ``(band + 1) * min(spacing)`` of a plane
        interface.
    info : dict, optional
        Filled with ``"band_cells"`` and ``"sign_conflicts"`` (the band cells
        whose nearest patch's side disagreed with their own data), ints.
    gas : tuple or None, optional
        :func:`.boxes.gas_box` of ``c`` where the caller has it (the CUDA
        3-D twin's search starts from it; the array code does not read it).

    Returns
    -------
    array
        The new level set (``phi`` and ``c`` are not modified).
    """
    xp = array_module(phi, c)
    band = int(band)
    if band < 1:
        raise ValueError(f"band={band!r}: expected an integer >= 1")
    layers_of = _segment_layers if c.ndim == 2 else _plane_layers
    mask, d, layers, faces = layers_of(c, spacing, phi, xp)
    seed = mask.copy()
    for k, held in faces:
        seed |= held
        seed[along(c.ndim, k, slice(1, None))] |= held[along(c.ndim, k, slice(None, -1))]
    in_band = _dilate(seed, band, xp)
    where = xp.nonzero(in_band)
    dist2, side = _nearest_patch(layers, where, spacing, search_window(band, reach, spacing), xp)
    own = _own_side(c, mask, d, xp)
    dist = xp.zeros_like(phi)
    dist[where] = xp.sqrt(dist2)
    far = band * min(spacing)
    if info is not None:
        mine = own[where]
        info["band_cells"] = int(dist2.shape[0])
        info["sign_conflicts"] = int(xp.sum((side != mine) & (side != 0.0)))
    return xp.where(in_band, own * dist, own * far)


def _own_side(c, mask, d, xp):
    """Each cell's own verdict on its centre: -1 gas, +1 liquid.

    Full cells are gas and empty ones liquid; an interface cell's centre is
    on the side of its own PLIC plane (``m . X = d``, ``X`` from the cell
    centre), and a centre exactly on that plane goes by ``c > 1/2``.
    """
    full = c >= 1.0 - CLIP_TOLERANCE
    empty = c <= CLIP_TOLERANCE
    own = xp.where(full, -1.0, xp.where(empty, 1.0, xp.where(mask, xp.sign(-d), 0.0)))
    return xp.where(own == 0.0, xp.where(c > 0.5, -1.0, 1.0), own)


def _segment_layers(c, spacing, normal_from, xp):
    """The patches of 2-D: ``(mask, d, layers, faces)``, the segments of the
    interface cells and of the grid-line faces (:mod:`.plic_segments`), each
    layer the nine fields of :func:`.plic_segments.segment_fields`."""
    seg = cell_segments(c, spacing, normal_from)
    faces = face_segments(c, spacing)
    layers = [segment_fields(s) for s in [seg] + [f for _, f in faces]]
    return seg[0], seg[3], layers, [(k, f[0]) for k, f in faces]


def _plane_layers(c, spacing, normal_from, xp):
    """The patches of 3-D: ``(mask, d, layers, faces)``.

    A layer is a list of per-cell fields ``[mask, m_x, m_y, m_z, d]``: the
    interface cells' PLIC planes ``m . X = d`` (``X`` from the cell centre),
    then, where the interface lies on a grid plane, the faces between a full
    and an empty cell (held by the lower cell; ``faces`` lists their array
    axes and masks).  Values off the mask are zero."""
    nd = c.ndim
    mask = interface_mask(c)
    m = interface_normal(c, spacing, normal_from)
    alpha = plane_constants_where(m, c, spacing, mask)     # only these planes are read
    d = alpha - 0.5 * sum(mi * h for mi, h in zip(m, spacing))
    zero = xp.zeros_like(c)
    layers = [[mask.astype(c.dtype)] + [xp.where(mask, mi, zero) for mi in m]
              + [xp.where(mask, d, zero)]]
    full = c >= 1.0 - CLIP_TOLERANCE
    empty = c <= CLIP_TOLERANCE
    faces = []
    for a in range(nd):
        k = array_axis(nd, a)
        lo, hi = along(nd, k, slice(None, -1)), along(nd, k, slice(1, None))
        # +1: gas below the face (normal along +axis), -1 the reverse.
        sense = zero.copy()
        sense[lo] = xp.where(full[lo] & empty[hi], 1.0, xp.where(empty[lo] & full[hi], -1.0, 0.0))
        held = sense != 0.0
        if not bool(any_true(held)):
            continue
        layers.append([held.astype(c.dtype)] + [sense if b == a else zero for b in range(nd)]
                      + [sense * (0.5 * spacing[a])])
        faces.append((k, held))
    return mask, d, layers, faces


def _patch_distance(f, p, box2, spacing, xp):
    """Squared distance from the points ``p`` (per grid axis, from the patch
    cell's centre; ``box2`` their squared distance to its box) to the
    patches of fields ``f``, and the side of the patch's plane they are on
    (+1 liquid, -1 gas, 0 on it).

    2-D: the exact distance to the segment.  3-D: the distance to the
    plane's part in the cell is bounded below by ``sqrt(s^2 + e^2)``, ``s``
    the distance to the plane and ``e`` that from the foot of the
    perpendicular to the box, and by the distance to the box; the larger
    bound is taken.  It is exact where the foot is in the cell (for a face
    patch, everywhere); elsewhere a neighbouring cell's patch usually holds
    the foot."""
    if len(p) == 2:
        px, py = p
        rx, ry = px - f[4], py - f[5]
        t = xp.clip((rx * f[6] + ry * f[7]) * f[8], 0.0, 1.0)
        qx, qy = rx - t * f[6], ry - t * f[7]
        dist2 = xp.where(f[0] > 0.0, qx * qx + qy * qy, float("inf"))
        return dist2, xp.sign(f[1] * px + f[2] * py - f[3])
    s = f[1] * p[0] + f[2] * p[1] + f[3] * p[2] - f[4]
    dist2 = s * s
    for a, h in enumerate(spacing):
        e = xp.maximum(xp.abs(p[a] - s * f[1 + a]) - 0.5 * h, 0.0)
        dist2 = dist2 + e * e
    return xp.where(f[0] > 0.0, xp.maximum(dist2, box2), float("inf")), xp.sign(s)


class _SearchPlan(NamedTuple):
    """The search's entries (offset, layer), nearest first, as arrays: each
    one's shift in the padded stack, the searching cell seen from the patch
    cell's centre per grid axis, its box's squared distance, ``later[i]``
    the least of those from entry ``i`` on (``inf`` past the last), and
    ``lead[d]`` how many leading entries have offsets of fewer than ``d``
    cells along every axis (``d`` up to the window's largest reach + 1)."""

    count: int
    shifts: object
    points: tuple
    box2: object
    later: list
    lead: list


@functools.lru_cache(maxsize=64)
def _search_plan(window, spacing, padded, n_layers, size_types):
    """The :class:`_SearchPlan` of a search (the same for every call of a
    grid and window: computed once, in the order and arithmetic of the
    entries one by one).  ``size_types`` (the cell sizes' types) is part of
    the key: Python's ``sum`` adds floats with compensation and NumPy scalars
    without, so the sort's ties can fall otherwise for equal values."""
    nd = len(padded)
    size = math.prod(padded)
    strides = [math.prod(padded[k + 1:]) for k in range(nd)]
    order = search_order(window, spacing)
    entries = list(itertools.product(order.offsets, range(n_layers)))
    # Entries run offset by offset, the layers within: an entry's box and
    # what follows it are its offset's.
    box2 = [b for b in order.box2 for _ in range(n_layers)]
    later = [order.later[i // n_layers] for i in range(len(entries))] + [float("inf")]
    lead = [n * n_layers for n in order.lead]
    shifts = np.array([l * size + sum(o[k] * strides[k] for k in range(nd))
                       for o, l in entries], dtype=np.int64)
    points = tuple(np.array([-o[array_axis(nd, a)] * spacing[a] for o, _ in entries],
                            dtype=np.float64) for a in range(nd))
    return _SearchPlan(len(entries), shifts, points, np.array(box2, dtype=np.float64), later,
                       lead)


def _nearest_patch(layers, where, spacing, window, xp):
    """Squared distance from the cells ``where`` (a tuple of index arrays)
    to the nearest patch within ``window`` (offsets per array axis), and
    that patch's side.

    Offsets nearest first (:func:`.vof_limits.search_offsets`), layers in
    order within an offset, ties to the first met.  The (offset, layer)
    pairs go in batches gathered from one padded array, so the array
    operations go by batch, not by offset; after each batch the cells that
    no later offset can bring nearer (its box farther than their best) drop
    out, so the cells near the interface stop early.  In a search of
    :data:`SKIP_MIN_ENTRIES` entries or more, a cell ``d`` cells (Chebyshev)
    from the nearest cell holding a patch starts past the entries whose
    offsets are all shorter than ``d``: none holds a patch, so the result is
    the same.
    """
    shape = layers[0][0].shape
    nd = len(shape)
    padded = tuple(n + 2 * r for n, r in zip(shape, window))
    strides = [math.prod(padded[k + 1:]) for k in range(nd)]
    dtype = layers[0][1].dtype
    stack = xp.zeros((len(layers[0]), len(layers)) + padded, dtype=dtype)
    inner = tuple(slice(r, r + n) for r, n in zip(window, shape))
    for l, fields in enumerate(layers):
        stack[(slice(None), l) + inner] = xp.stack(fields)
    flat = stack.reshape(len(layers[0]), -1)
    held = stack[0] > 0.0                   # the patch cells of each layer
    pos = sum((i + r) * s for i, r, s in zip(where, window, strides))
    plan = _search_plan(tuple(window), tuple(spacing), padded, len(layers),
                        tuple(type(h) for h in spacing))
    if plan.count < SKIP_MIN_ENTRIES:
        return _search(flat, held.reshape(-1), pos, plan, 0, spacing, xp)
    # A cell d cells (Chebyshev) from the nearest patch cell skips the
    # leading entries whose offsets are all shorter: they hold no patch.
    # The rest are visited as before, so the result is the same.
    gap = _patch_gap(xp.any(held, axis=0), len(plan.lead) - 1, xp).ravel()[pos]
    starts = xp.asarray(np.asarray(plan.lead, dtype=np.int64))[gap]
    best = xp.full(pos.shape, float("inf"), dtype=dtype)
    side = xp.zeros_like(best)
    held_flat = held.reshape(-1)
    for first in np.unique(backend_of(starts).to_host(starts)).tolist():
        cells = xp.nonzero(starts == first)[0]
        best[cells], side[cells] = _search(flat, held_flat, pos[cells], plan, first, spacing, xp)
    return best, side


def _patch_gap(patch, cap, xp):
    """Per cell of the padded grid, the Chebyshev distance in cells to the
    nearest ``patch`` cell, at most ``cap``."""
    nd = patch.ndim
    gap = xp.full(patch.shape, cap, dtype=np.int64)
    near = patch
    for d in range(cap):
        gap[near & (gap == cap)] = d
        for k in range(nd):
            grown = near.copy()
            grown[along(nd, k, slice(1, None))] |= near[along(nd, k, slice(None, -1))]
            grown[along(nd, k, slice(None, -1))] |= near[along(nd, k, slice(1, None))]
            near = grown
    return gap


def _search(flat, held, pos, plan, start, spacing, xp):
    """The nearest patch of the cells at ``pos`` (flat indices of the padded
    stack ``flat``; ``held`` whether each of its cells holds a patch) over
    ``plan``'s entries from ``start`` on: ``(best squared distance, side)``,
    in batches (:func:`_nearest_patch`)."""
    dtype = flat.dtype
    later = plan.later
    best = xp.full(pos.shape, float("inf"), dtype=dtype)
    side = xp.zeros_like(best)
    active = xp.arange(pos.shape[0])
    batch = search_batch(xp, pos.shape[0])
    while start < plan.count and active.shape[0] > 0:
        chunk = slice(start, min(start + max(1, batch // int(active.shape[0])), plan.count))
        shift = xp.asarray(plan.shifts[chunk], dtype=pos.dtype)
        index = shift[:, None] + pos[active][None, :]
        # Only the pairs whose cell holds a patch are measured (a few in a
        # hundred): found as flat indices of the batch, one scan (nonzero's
        # order, row by row), then split into (entry, cell).
        pair = xp.divmod(xp.flatnonzero(xp.take(held, index)), index.shape[1])
        entry = pair[0]
        f = flat[:, index[pair]]
        # The cell seen from the patch cell's centre, per grid axis.
        p = [xp.asarray(points[chunk], dtype=dtype)[entry] for points in plan.points]
        bounds = xp.asarray(plan.box2[chunk], dtype=dtype)[entry]
        measured, signs = _patch_distance(f, p, bounds, spacing, xp)
        bd, bs = nearest_of_pairs(pair, measured, signs, index.shape, xp)
        mine = best[active]
        nearer = bd < mine
        best[active] = xp.where(nearer, bd, mine)
        side[active] = xp.where(nearer, bs, side[active])
        start = chunk.stop
        active = active[best[active] > later[start]]
    return best, side


@twin
def nearest_of_pairs(pair, measured, signs, shape, xp):
    """Per column (cell) of a batch of ``shape`` = (entries, cells), the
    smallest of the distances ``measured`` at the pairs ``pair`` (the
    (entry, cell) index arrays of :func:`numpy.nonzero`) and its side, the
    first entry on a tie: ``(distance, side)``, ``inf`` and 0 in a column
    without a pair.  Array code: the batch filled, then its ``argmin``."""
    dtype = measured.dtype
    dist2 = xp.full(shape, float("inf"), dtype=dtype)
    sd = xp.zeros(shape, dtype=dtype)
    dist2[pair] = measured
    sd[pair] = signs
    j = xp.argmin(dist2, axis=0)[None, :]
    return (xp.take_along_axis(dist2, j, axis=0)[0], xp.take_along_axis(sd, j, axis=0)[0])


@nearest_of_pairs.register("numpy")
def _nearest_of_pairs_grouped(pair, measured, signs, shape, xp):
    """The pairs alone (a few in a hundred of the batch): each cell's
    smallest distance (``minimum.at``), then the first of its pairs at that
    distance (the pairs come row by row, so the first is the least entry:
    ``minimum.at`` of the pairs' positions); the same answer without filling
    the batch, and faster at any share of it (docs/performance_records.md,
    "The 3-D rebuild's search on the CPU").  A NaN distance (which
    ``argmin`` would pick) is left to the array code."""
    if bool(np.isnan(measured).any()):
        return NotImplemented
    dist = np.full(shape[1], np.inf, dtype=measured.dtype)
    side = np.zeros(shape[1], dtype=measured.dtype)
    if not measured.size:
        return dist, side
    cells = pair[1]
    np.minimum.at(dist, cells, measured)
    hits = np.flatnonzero(measured == dist[cells])
    first = np.full(shape[1], measured.size, dtype=np.intp)
    np.minimum.at(first, cells[hits], hits)
    found = first < measured.size
    side[found] = signs[first[found]]
    return dist, side


def _dilate(seed, band, xp):
    """The cells within ``band`` cells (Chebyshev) of a ``seed`` cell."""
    nd = seed.ndim
    out = seed
    for k in range(nd):
        grown = out.copy()
        for s in range(1, min(band, out.shape[k] - 1) + 1):
            grown[along(nd, k, slice(s, None))] |= out[along(nd, k, slice(None, -s))]
            grown[along(nd, k, slice(None, -s))] |= out[along(nd, k, slice(s, None))]
        out = grown
    return out


# The kernels: three launches a call in 2-D, eight in 3-D; NotImplemented (the
# array code runs) for what they do not cover.
redistance.register("cupy")(vof_redistance_cuda.redistance)
