"""The layout of the 2-D fused kernels on the grid.

The update kernel walks subdomain tiles (:func:`tile_shape`; the
deflation's, whose labels split each tile in at most two parts:
:func:`tile_structure`), several of them side by side in one block for
the scaled incomplete Poisson update.  The direction kernel walks row bands
of column strips, as many as make one wave of resident blocks, else the
update's tiles.  Both walk their block by columns, one thread per column
and row chunk.  :func:`direction_plan` and :func:`update_plan` choose each
kernel's compiled variant (:func:`~.kernels.kernel`) and its launch
geometry; the constants below are the measured choices behind them.
"""
from __future__ import annotations

from ...compute.truth import any_true
from .kernels import PREC_SCALED_IP, kernel

__all__ = ["tile_shape", "tile_structure", "planned_modules", "direction_plan", "update_plan"]

# Rows a thread walks in a tile's column (two more are read), each the
# fastest measured for its kernel: _CHUNK_ROWS_WIDE for bf_direction_spmv,
# _CHUNK_ROWS_IP for the scaled incomplete Poisson update (its walk starts a
# row early), _CHUNK_ROWS for the other updates (measured:
# docs/performance_records.md, "Figures behind code choices").
_CHUNK_ROWS = 16
_CHUNK_ROWS_WIDE = 32
_CHUNK_ROWS_IP = 64
# The direction kernel's layout: its sums need no subdomain tiles.  Row
# bands: strips of _DIR_BAND_COLS columns (or the widest of 128, 64, 32 that
# divides the row), cut into as many bands of rows as make one wave of
# resident blocks on the device (see :func:`_dir_bands`).  Where that does
# not apply (rows not a multiple of 32 cells), the update's tiles.  One full
# wave of bands beats tiles and other band counts: the last, partly filled
# wave costs nearly as much as a full one (measured: docs/performance_records.md,
# "Figures behind code choices").
_DIR_BAND_COLS = 256
_DIR_BAND_MIN_ROWS = 8
# Columns of a scaled incomplete Poisson update block: as many subdomain
# tiles side by side as fit (tiles a whole number of warps wide), fewer halo
# recomputations and longer rows: measured a little faster than one tile a
# block.  (The Jacobi update was slower with wider blocks, so it keeps one
# tile a block.  Figures: docs/performance_records.md, "Figures behind code choices".)
_IP_BLOCK_COLS = 256
_IDX32_LIMIT = 2 ** 31    # bf_direction_spmv uses 32-bit cell offsets below it
_MAX_TILE_WIDTH = 1024    # one thread per column of a tile


def tile_shape(ny, nx, deflation):
    """The update kernel's tile: the deflation's blocks, or a divisor tile."""
    if deflation is not None:
        shape = getattr(deflation, "block_shape", None)
        if shape is None:
            return None
        by, bx = (int(v) for v in shape)
        if ny % by or nx % bx or bx > _MAX_TILE_WIDTH:
            return None
        return by, bx
    for bx in (128, 64, 32, 16, 8):
        if nx % bx == 0:
            break
    else:
        return None
    for by in (32, 16, 8, 4, 2, 1):
        if ny % by == 0:
            return by, bx
    return None


_BANDS_DEFINE = "#define DIR_BANDS 1\n"


def _idx32_define(ny, nx):
    """The direction kernel's 32-bit offsets where every offset (and the
    halo's, one row beyond) fits."""
    return "#define BF_IDX32 1\n" if ny * nx + 2 * nx < _IDX32_LIMIT else ""


def _group_define(group):
    return f"#define UPD_G {group}\n" if group > 1 else ""


def planned_modules(ny, nx, bx, prec_code):
    """The ``(prec_code, defines)`` of the modules (:func:`.kernels.kernel`)
    the plans of a ``ny`` by ``nx`` grid with tiles ``bx`` wide take first:
    the scalar kernels', the banded direction kernel's and the update's
    (the direction kernel on tiles, where bands do not apply, is a fourth)."""
    return [(2, ""), (2, _idx32_define(ny, nx) + _BANDS_DEFINE),
            (prec_code, _group_define(_update_group(nx, bx, prec_code)))]


def direction_plan(ny, nx, tile):
    """The direction kernel and its launch on a ``ny`` by ``nx`` grid:
    ``(kernel, bands, dir_tile, ndir, launch)``.

    Row bands (``bands`` their ``(columns, count)``, ``dir_tile`` None)
    where :func:`_dir_bands` applies, else the update's ``tile`` walked by
    columns (``bands`` None); ``ndir`` blocks, each with a sum of
    ``p' . w``; ``launch`` ``(grid, block, geometry)``.  32-bit cell
    offsets where every offset (and the halo's, one row beyond) fits.
    """
    idx32 = _idx32_define(ny, nx)
    k_dirspmv = kernel("bf_direction_spmv", 2, idx32 + _BANDS_DEFINE)
    bands = _dir_bands(ny, nx, k_dirspmv)
    if bands is not None:
        dbx, nb = bands
        ndir = (nx // dbx) * nb
        return k_dirspmv, bands, None, ndir, ((ndir,), (dbx,), (dbx, nb, dbx, 1))
    k_dirspmv = kernel("bf_direction_spmv", 2, idx32)
    dir_tile = dby, dbx = tuple(tile)
    ndir = (ny // dby) * (nx // dbx)
    bxp, chunks, threads = _walk_geometry(dby, dbx, _CHUNK_ROWS_WIDE)
    return k_dirspmv, None, dir_tile, ndir, ((ndir,), (threads,), (dbx, dby, bxp, chunks))


def update_plan(nx, by, bx, prec_code):
    """The update kernel of preconditioner branch ``prec_code`` on tiles of
    ``by`` by ``bx`` cells: ``(kernel, group, walk)``, ``group`` tiles side
    by side in a block (:func:`_update_group`), ``walk`` its column-walk
    geometry ``(bxp, chunks, threads)`` (:func:`_walk_geometry`)."""
    group = _update_group(nx, bx, prec_code)
    k_update = kernel("bf_update", prec_code, _group_define(group))
    walk = _walk_geometry(by, group * bx,
                          _CHUNK_ROWS_IP if prec_code == PREC_SCALED_IP else _CHUNK_ROWS)
    return k_update, group, walk


def _dir_bands(ny, nx, k_bands):
    """Row bands of the direction kernel: ``(columns, bands)`` or None.

    One block per strip and band, one thread per column; as many bands as
    fill one wave of the blocks the device keeps resident (CUDA's occupancy
    for ``k_bands``, times the multiprocessors), at least
    :data:`_DIR_BAND_MIN_ROWS` rows a band.
    """
    if _DIR_BAND_COLS is None:
        return None
    for bx in (_DIR_BAND_COLS, 128, 64, 32):
        if bx <= _DIR_BAND_COLS and nx % bx == 0:
            break
    else:
        return None
    resident = _resident_blocks(k_bands, bx)
    if resident is None:
        return None
    nb = max(1, min(ny // _DIR_BAND_MIN_ROWS, resident // (nx // bx)))
    if ny * nb >= 2 ** 31:
        return None
    return bx, nb


def _resident_blocks(kernel, threads):
    """Blocks of ``threads`` the whole device keeps resident for ``kernel``
    (CUDA's occupancy query), or None where it cannot be asked (then the
    direction kernel walks tiles)."""
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    try:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            getattr(kernel, "kernel", kernel).ptr, int(threads), 0)
    except Exception:
        return None
    return max(1, int(per_sm)) * sms


def _update_group(nx, bx, prec_code):
    """Tiles side by side in one update block (the scaled IP update only):
    the most, up to :data:`_IP_BLOCK_COLS` columns, that divide the row of
    tiles, each a whole number of warps wide.

    >>> _update_group(4096, 64, 2), _update_group(4096, 64, 1), _update_group(96, 48, 2)
    (4, 1, 1)
    """
    if prec_code != PREC_SCALED_IP or bx % 32:
        return 1
    g = 1
    while 2 * g * bx <= _IP_BLOCK_COLS and (nx // bx) % (2 * g) == 0:
        g *= 2
    return g


def _walk_geometry(by, bx, chunk_rows=None):
    """Threads of the column-walking tile kernels: ``(bxp, chunks, threads)``.

    One thread per column of the tile, ``bx`` rounded up to a power of two
    below 32 or to a multiple of 32 (``bxp``), times ``chunks`` row chunks of
    about ``chunk_rows`` rows (at most 256 threads unless one chunk is more),
    rounded up to whole warps.  A tile narrower than a warp is cut into as
    many row chunks as fill one (up to one row each): its lanes would
    otherwise idle while a few walk the tile's rows one after the other.

    >>> _walk_geometry(64, 64)
    (64, 4, 256)
    >>> _walk_geometry(8, 8)
    (8, 4, 32)
    >>> _walk_geometry(2, 8)
    (8, 2, 32)
    >>> _walk_geometry(24, 48)
    (64, 1, 64)
    """
    chunk_rows = _CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
    bxp = 1 << max(0, (bx - 1).bit_length()) if bx < 32 else -(-bx // 32) * 32
    chunks = max(1, min(by // max(1, chunk_rows), 256 // bxp))
    if bxp < 32:
        chunks = max(chunks, min(by, 32 // bxp))
    threads = -(-(bxp * chunks) // 32) * 32
    return bxp, chunks, threads


def tile_structure(labels, ny, nx, by, bx, k, xp):
    """Per-cell part (0/1) in its tile and the owner slot of every label.

    Returns ``(part, owner)`` or None when a tile holds more than two labels
    or a label spans two tiles (then per-tile sums cannot give ``Z^T r``).
    """
    lab = labels.reshape(ny // by, by, nx // bx, bx)
    lo = lab.min(axis=(1, 3))
    hi = lab.max(axis=(1, 3))
    part = (lab != lo[:, None, :, None])
    ok = (lab == lo[:, None, :, None]) | (lab == hi[:, None, :, None])
    # Every label in exactly one (tile, part) slot.
    slots = xp.stack([lo.ravel(), xp.where(hi != lo, hi, -1).ravel()], axis=1)   # (ntiles, 2)
    used = slots.ravel()
    used = used[used >= 0]
    if bool(any_true(~ok)) or int(used.size) != k:
        return None
    owner = xp.full(k, -1, dtype=xp.int32)
    idx = xp.nonzero(slots.ravel() >= 0)[0].astype(xp.int32)
    owner[used] = idx
    if bool(any_true(owner < 0)):
        return None
    part = part.transpose(0, 1, 2, 3).reshape(ny, nx).astype(xp.int8)
    return part, owner
