"""CUDA twin of the volume fraction's rebuilding of the level set in 2-D
and 3-D (CuPy, float64).

:func:`redistance` is the ``"cupy"`` variant of
:func:`bubbleflow.flow.vof_redistance.redistance`; :func:`redistance_2d` is
the same call with the cell sizes as separate arguments, and
:func:`redistance_3d` the 3-D call (the kernels of ``vof_redistance3.cu``,
after the gas's box: the cells' planes near that box; over the box widened
by the band, each cell's distance to the nearest band seed, one axis a
launch; the cells outside the band; and a search like the 2-D one over the
planes and faces, for the band's cells listed block after block).  The
array code batches the search's (offset, layer) entries, several array
operations a batch; here three kernels of ``vof_redistance.cu`` beside this
file do the whole 2-D call:

* ``bf_vof_rd_segments``: per cell, the flags (an interface cell, the
  interface faces it holds and their sense, the band seed) and the PLIC
  segment of an interface cell, reconstructed with the normals of ``phi``
  (:func:`.plic_segments.cell_segments`, :func:`.plic_segments.face_segments`,
  :func:`.plic_segments.segment_fields`);
* ``bf_vof_rd_band_rows``: per cell, whether a band seed lies in its row
  within the band (the search's band test then reads a column of these);
* ``bf_vof_rd_search``: per cell, the band and, for a band cell, the nearest
  segment among the cells in reach, the offsets visited in the array code's
  order (nearest first, :func:`.vof_limits.search_offsets`, the first
  met winning a tie) and within an offset its layers in its order (the cell's
  segment, the right face, the top face); then the array code's sign rules
  and the new level set.

:func:`segment_lengths` (the ``"cupy"`` variant of
:func:`.gas_regions.interface_measure` in 2-D) launches the first kernel
alone and takes each interface cell's segment length from it.

With ``info`` the search also counts the band cells and the sign conflicts
(atomic integer adds: the same totals in any order), and one device-to-host
read fills ``info``.  So a call is three launches, four with ``info`` (the
counters' zeroing), and one host-to-device copy of the offsets the first time
a reach and cell size are met (they are kept per device).

The kernels are compiled without FMA contraction and follow the array code's
order of operations, ``numpy.minimum``/``maximum``/``clip``/``sign`` with
NumPy's NaN rules, so the result has the reference's bits.  The clip
tolerance and the search's reach are :mod:`.vof_limits`'s, as the array
code's.  Calls the kernels do not cover -- a grid of another dimension,
another dtype than float64, ``phi`` and ``c`` of different shapes, a grid
of fewer than 2 cells along an axis, cell sizes that are not Python or
NumPy float64 scalars, ``band < 1`` (the reference raises) -- return
``NotImplemented`` and the array code runs.  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..compute import cuda
from .boxes import UNKNOWN
from .boxes_cuda import gas_box
from .vof_limits import CLIP_TOLERANCE, search_offsets, search_order, search_window

__all__ = ["redistance", "redistance_2d", "redistance_3d", "segment_lengths"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads of the per-cell kernels: 32 along x (one warp per row segment), 8 rows.
_BLOCK = (32, 8)
#: Cells the kernels need along each axis (the one-sided gradient reads two).
_MIN_CELLS = 2
#: Numbers per interface cell in the segment array (bf_vof_rd_segments).
_NSEG = 8
#: Numbers per interface cell in the 3-D plane array (bf_vof_rd3_planes).
_NPLANE = 4
#: Cells along each axis of a block of the 3-D search's patch bits (a 64-bit
#: word a block: bf_vof_rd3_bits).
_BLOCK_SIDE = 4
#: The largest distance a byte of bf_vof_rd3_reach's distances holds.
_BYTE = 255


_kernel = cuda.float64_kernels(__name__, "vof_redistance.cu", _OPTIONS, ndims=(2,))
#: The 3-D kernels: a source of their own (a 2-D run compiles none of them).
_kernel3 = cuda.float64_kernels(__name__, "vof_redistance3.cu", _OPTIONS, ndims=(3,))


@cuda.kernel_cache
def _device_offsets(r_y, r_x, hx, hy, hx_type, hy_type):
    """:func:`.vof_limits.search_offsets` (the array code's order) as a
    device array of int32 pairs, kept per device
    (keyed by the sizes' types too: ``**`` of a NumPy scalar and of a Python
    float need not round alike, and the sort's ties follow it)."""
    import cupy as cp

    offsets = search_offsets((r_y, r_x), (hx, hy))
    return cp.asarray(np.array(offsets, dtype=np.int32).reshape(-1))


def _cell_size(h):
    """A Python or NumPy float64 (or int) cell size: the kernels' arithmetic
    then is the array code's."""
    return isinstance(h, (float, int)) and not isinstance(h, bool) \
        and type(h).__module__ in ("builtins", "numpy")


def redistance(phi, c, spacing, band=3, reach=None, info=None, gas=UNKNOWN):
    """The level set rebuilt from the volume fraction (twin:
    ``vof_redistance.redistance``, same arguments, same result bits and
    ``info``): :func:`redistance_2d` with ``spacing = (hx, hy)``,
    :func:`redistance_3d` with ``(hx, hy, hz)``."""
    if len(spacing) == 2:
        return redistance_2d(phi, c, *spacing, band, reach, info)
    if len(spacing) == 3:
        return redistance_3d(phi, c, spacing, band, reach, info, gas)
    return NotImplemented


def redistance_2d(phi, c, hx, hy, band=3, reach=None, info=None):
    """The level set rebuilt from the volume fraction on a 2-D grid of cell
    sizes ``hx``, ``hy``: ``bf_vof_rd_segments``, ``bf_vof_rd_band_rows``
    and ``bf_vof_rd_search``, one launch each."""
    import cupy as cp

    arrays = cuda.float64_2d(phi, c)
    if arrays is None or not (_cell_size(hx) and _cell_size(hy)):
        return NotImplemented
    phi, c = arrays
    ny, nx = c.shape
    band = int(band)
    if phi.shape != c.shape or min(nx, ny) < _MIN_CELLS or band < 1:
        return NotImplemented
    r_y, r_x = search_window(band, reach, (hx, hy))
    offs = _device_offsets(r_y, r_x, hx, hy, type(hx), type(hy))
    tol, one_tol = np.float64(CLIP_TOLERANCE), np.float64(1.0 - CLIP_TOLERANCE)
    fhx, fhy = np.float64(hx), np.float64(hy)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    flags = cp.empty((ny, nx), dtype=cp.uint8)
    seg = cp.empty((ny, nx, _NSEG), dtype=cp.float64)
    _kernel("bf_vof_rd_segments")(grid, block, (
        phi, c, flags, seg, np.int32(nx), np.int32(ny), fhx, fhy, tol, one_tol))
    near = cp.empty((ny, nx), dtype=cp.uint8)
    _kernel("bf_vof_rd_band_rows")(grid, block, (flags, near, np.int32(nx), np.int32(ny),
                                                 np.int32(band)))
    counts = cp.zeros(2, dtype=cp.uint64) if info is not None else cp.empty(2, dtype=cp.uint64)
    out = cp.empty_like(phi)
    _kernel("bf_vof_rd_search")(grid, block, (
        phi, c, flags, near, seg, offs, np.int32(offs.size // 2), out, counts,
        np.int32(info is not None), np.int32(nx), np.int32(ny), fhx, fhy, np.int32(band),
        np.float64(band * min(hx, hy)), tol, one_tol))
    if info is not None:
        band_cells, conflicts = (int(n) for n in counts.get())
        info["band_cells"] = band_cells
        info["sign_conflicts"] = conflicts
    return out


@cuda.kernel_cache
def _device_search_3d(window, spacing, spacing_types):
    """The 3-D search's tables, kept per device (keyed by the sizes' types,
    as :func:`_device_offsets`): each offset's place in the array code's
    order (int32, the window's offsets row-major), each one's box distance
    squared in that order, the block offsets near a cell's block (int32
    triples, by their floor, :func:`_block_floor`, then by their centres'
    distance), those floors and their count."""
    import cupy as cp

    order = search_order(window, spacing)
    offsets = np.array(order.offsets, dtype=np.int64).reshape(-1, 3)
    sides = 2 * np.array(window, dtype=np.int64) + 1
    rank = np.empty(len(offsets), dtype=np.int32)
    rank[np.ravel_multi_index(tuple((offsets + np.array(window)).T), tuple(sides))] = \
        np.arange(len(offsets), dtype=np.int32)
    # The blocks of _BLOCK_SIDE cells a window reaches from a cell's block
    # (from any cell of it), nearest first: the visit order (free, a choice
    # for speed: one order for every cell keeps a warp's loads together).
    reach = [-(-w // _BLOCK_SIDE) for w in window]
    near = np.array(list(itertools.product(*(range(-r, r + 1) for r in reach))), dtype=np.int32)
    h = np.array(spacing[::-1], dtype=np.float64)
    floor = _block_floor(near, h)
    near_order = np.lexsort((((near * h) ** 2).sum(axis=1), floor))
    return (cp.asarray(rank), cp.asarray(np.array(order.box2, dtype=np.float64)),
            cp.asarray(near[near_order].reshape(-1)), cp.asarray(floor[near_order]), len(near))


def _block_floor(near, h):
    """Per block offset (rows dk, dj, di; ``h`` the cell sizes in that order),
    the least squared distance from any cell of a block to the box of the
    block that far: ``4 |d| - 3.5`` cells along an axis (``rd3_block_gap``
    of the nearest pair), none within the own block.  Shrunk by a part in
    10^12 so that rounding never lifts it over the kernel's own gap: the
    search stops at the first block, in this order, whose floor is past the
    best distance yet (every later one is farther still)."""
    gap = np.maximum(_BLOCK_SIDE * np.abs(near) - (_BLOCK_SIDE - 0.5), 0.0) * h
    return (gap ** 2).sum(axis=1) * (1.0 - 1e-12)



def _region(box, far, shape):
    """The region of the 3-D kernels: ``box`` (:func:`.boxes_cuda.gas_box`'s,
    ``(lo, hi)`` per array axis) widened by ``far`` cells within the grid of
    ``shape`` (nz, ny, nx), as ``(i0, j0, k0, rx, ry, rz)``; all zero without
    a box."""
    if box is None:
        return (0,) * 6
    lo = [max(b[0] - far, 0) for b in box[::-1]]
    hi = [min(b[1] + far, n - 1) for b, n in zip(box[::-1], shape[::-1])]
    return tuple(lo) + tuple(h - l + 1 for l, h in zip(lo, hi))


def redistance_3d(phi, c, spacing, band=3, reach=None, info=None, gas=UNKNOWN):
    """The level set rebuilt from the volume fraction on a 3-D grid:
    the gas's box (``gas``, else ``bf_box_where``, read by the host),
    ``bf_vof_rd3_planes`` near it, three launches of ``bf_vof_rd3_reach``
    over the region, ``bf_vof_rd3_outside``, ``bf_vof_rd3_band_blocks``
    (the band's cells, block after block, listed by ``flatnonzero``: the
    host reads their number), ``bf_vof_rd3_bits`` and ``bf_vof_rd3_search``
    over the band's cells."""
    import cupy as cp

    arrays = cuda.float64_3d(phi, c)
    if arrays is None or not all(_cell_size(h) for h in spacing):
        return NotImplemented
    phi, c = arrays
    nz, ny, nx = c.shape
    band = int(band)
    if phi.shape != c.shape or min(nx, ny, nz) < _MIN_CELLS or not 1 <= band < _BYTE:
        return NotImplemented
    window = search_window(band, reach, tuple(spacing))
    rank, box2, near, near_floor, n_near = _device_search_3d(window, tuple(spacing),
                                                           tuple(type(h) for h in spacing))
    tol, one_tol = np.float64(CLIP_TOLERANCE), np.float64(1.0 - CLIP_TOLERANCE)
    hx, hy, hz = (np.float64(h) for h in spacing)
    sizes = (np.int32(nx), np.int32(ny), np.int32(nz))
    grid, block = cuda.grid_3d(nx, ny, nz, _BLOCK)
    # Every patch and seed lies within one cell of the gas's box (a face's
    # patch and seeds beside a full cell), so every band cell within band + 1
    # of it: the flags and planes are made within one cell, and the region's
    # kernels need no more than band + 2.
    gas = gas_box(c) if gas is UNKNOWN else gas
    flags = cp.zeros(c.shape, dtype=cp.uint8)
    planes = cp.empty(c.shape + (_NPLANE,), dtype=cp.float64)
    near_gas = _region(gas, 1, c.shape)
    if near_gas[3]:
        pgrid, _ = cuda.grid_2d(near_gas[3], near_gas[4] * near_gas[5], _BLOCK)
        _kernel3("bf_vof_rd3_planes")(pgrid, block, (
            phi, c, flags, planes, *sizes, *(np.int32(v) for v in near_gas), hx, hy, hz, tol,
            one_tol))
    region = _region(gas, band + 2, c.shape)
    rargs = tuple(np.int32(v) for v in region)
    rx, ry, rz = region[3:]
    dist, spare = (cp.empty((rz, ry, rx), dtype=cp.uint8) for _ in range(2))
    if dist.size:
        rgrid, _ = cuda.grid_3d(rx, ry, rz, _BLOCK)
        reach_pass = _kernel3("bf_vof_rd3_reach")
        for axis, (src, dst) in enumerate(((spare, dist), (dist, spare), (spare, dist))):
            reach_pass(rgrid, block, (flags, src, dst, np.int32(axis == 0), np.int32(axis),
                                      np.int32(band + 1), np.int32(nx), np.int32(ny), *rargs))
    out = cp.empty_like(phi)
    _kernel3("bf_vof_rd3_outside")(grid, block, (
        phi, c, flags, dist, np.int32(band), *rargs, planes, out, *sizes,
        np.float64(band * min(spacing)), tol, one_tol))
    counts = cp.zeros(2, dtype=cp.uint64) if info is not None else cp.empty(2, dtype=cp.uint64)
    blocks = tuple(-(-n // _BLOCK_SIDE) for n in (rx, ry, rz))
    n_padded = int(np.prod(blocks)) * _BLOCK_SIDE ** 3
    # The band's cells listed block after block: a warp's threads search
    # from the same block, so they meet the same blocks and patches in step
    # (in raster order or by their distance, a warp's cells lie in many
    # blocks and its threads take their own turns).
    in_band = cp.empty(n_padded, dtype=cp.bool_)
    if n_padded:
        cuda.launch_1d(_kernel3("bf_vof_rd3_band_blocks"), n_padded, (
            dist, in_band, np.int32(band), *(np.int32(n) for n in (rx, ry, rz) + blocks[:2]),
            np.int64(n_padded)))
    cells = cp.flatnonzero(in_band)
    if cells.size:
        bits = cp.empty(blocks[::-1], dtype=cp.uint64)
        bgrid, _ = cuda.grid_2d(blocks[0], blocks[1] * blocks[2], _BLOCK)
        _kernel3("bf_vof_rd3_bits")(bgrid, block, (flags, bits, np.int32(nx), np.int32(ny),
                                                   *rargs, *(np.int32(n) for n in blocks)))
        wk, wj, wi = window
        cuda.launch_1d(_kernel3("bf_vof_rd3_search"), cells.size, (
            cells, np.int64(cells.size), c, flags, planes, bits, near, near_floor,
            np.int32(n_near), rank, box2, out, counts, np.int32(info is not None),
            np.int32(nx), np.int32(ny), hx, hy, hz, tol, one_tol, *rargs, np.int32(wi),
            np.int32(wj), np.int32(wk)))
    if info is not None:
        band_cells, conflicts = (int(n) for n in counts.get())
        info["band_cells"] = band_cells
        info["sign_conflicts"] = conflicts
    return out


def segment_lengths(c, spacing, normal_from=None):
    """The PLIC segment's length in every interface cell, zero elsewhere
    (twin: :func:`.gas_regions.interface_measure` in 2-D with the level
    set's normals): ``bf_vof_rd_segments`` and one element-wise pass.  The
    length is that of the segment's vector from its cell's centre, where the
    array code subtracts its ends in the grid's coordinates: equal to
    rounding.  Youngs' normals (no ``normal_from``), another dimension or a
    call the kernel does not cover: ``NotImplemented``."""
    import cupy as cp

    if normal_from is None or len(spacing) != 2:
        return NotImplemented
    hx, hy = spacing
    arrays = cuda.float64_2d(normal_from, c)
    if arrays is None or not (_cell_size(hx) and _cell_size(hy)):
        return NotImplemented
    phi, c = arrays
    ny, nx = c.shape
    if phi.shape != c.shape or min(nx, ny) < _MIN_CELLS:
        return NotImplemented
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    flags = cp.empty((ny, nx), dtype=cp.uint8)
    seg = cp.empty((ny, nx, _NSEG), dtype=cp.float64)
    _kernel("bf_vof_rd_segments")(grid, block, (
        phi, c, flags, seg, np.int32(nx), np.int32(ny), np.float64(hx), np.float64(hy),
        np.float64(CLIP_TOLERANCE), np.float64(1.0 - CLIP_TOLERANCE)))
    return _masked_length(flags, seg[..., 5], seg[..., 6])


@cuda.kernel_cache
def _length_kernel():
    import cupy as cp

    return cp.ElementwiseKernel(
        "uint8 flags, float64 ex, float64 ey", "float64 length",
        "length = (flags & 1) ? sqrt(ex * ex + ey * ey) : 0.0", "bf_segment_length")


def _masked_length(flags, ex, ey):
    """``sqrt(ex^2 + ey^2)`` where the interface-cell flag (bit 1 of
    ``bf_vof_rd_segments``' flags) is set, else 0 (the segment array is
    not written outside those cells)."""
    return _length_kernel()(flags, ex, ey)
