"""The labels of a deflation space: which vector every cell belongs to.

A piecewise-constant deflation space is stored as one label per cell
(:class:`~bubbleflow.linalg.deflation.space.Deflation`).  The kinds of the
registry label the boxes of the grid's partition
(:meth:`bubbleflow.mesh.grid.Grid.partition`): :func:`partition_labels` in
any dimension, :func:`subdomain_labels` and :func:`stripe_labels` in 2-D,
and :func:`levelset_subdomain_labels`, every box split into its liquid and
gas part.  Labels need not be contiguous: :func:`compact_labels` and
:func:`compact_present` number the labels present ``0 .. k-1``, without a
sort where the labels are small non-negative integers.
"""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...mesh.grid import AXES, Grid
from .arrays import host_array

__all__ = ["partition_labels", "subdomain_labels", "stripe_labels", "levelset_subdomain_labels",
           "box_partition", "block_counts", "compact_labels", "compact_present", "present_table"]


def partition_labels(grid_shape, blocks, xp=np, planes=None):
    """Label of each cell of an array of ``grid_shape`` (axes reversed:
    ``(ny, nx)``, ``(nz, ny, nx)``) for ``blocks[a]`` boxes along grid axis
    ``a`` (x first), on ``xp``: the boxes of
    :meth:`bubbleflow.mesh.grid.Grid.partition`, numbered with x fastest;
    ``planes = (lo, hi)``: of those planes of array axis 0 only.

    >>> partition_labels((2, 2, 4), (2, 1, 2))[:, 0]
    array([[0, 0, 1, 1],
           [2, 2, 3, 3]])
    """
    return box_partition(grid_shape, blocks).labels(xp, planes)


def box_partition(grid_shape, blocks):
    """The :class:`~bubbleflow.mesh.grid.Partition` of an array of
    ``grid_shape`` (axes reversed) into ``blocks[a]`` boxes along grid axis
    ``a``: the one definition of the boxes (labels, cells per box, shape)."""
    return Grid.regular(tuple(grid_shape)[::-1]).partition(blocks)


def subdomain_labels(ny, nx, px, py, xp=np):
    """Label of each cell for ``px x py`` rectangular subdomains (on ``xp``):
    the boxes of :meth:`bubbleflow.mesh.grid.Grid.partition`.

    Block ``(bj, bi)`` (row ``bj < py``, column ``bi < px``) has label
    ``bj * px + bi``; the block edges are ``floor(j * py / ny)``, so the
    blocks differ by at most one cell when ``py`` does not divide ``ny``.
    (:func:`partition_labels` for any dimension.)
    """
    return partition_labels((ny, nx), (px, py), xp)


def stripe_labels(ny, nx, stripes, xp=np):
    """Label of each cell for ``stripes`` horizontal stripes of grid rows
    (the same as ``subdomain_labels(ny, nx, 1, stripes)``)."""
    return subdomain_labels(ny, nx, 1, stripes, xp=xp)


def levelset_subdomain_labels(phi, *blocks, grid_shape=None, planes=None):
    """Boxes split into liquid (``phi >= 0``) and gas parts:
    ``2 * box + (phi < 0)``, on the array backend of ``phi``.

    ``blocks`` are the box counts per grid axis, x first (``px, py`` for a
    2-D ``phi``, ``px, py, pz`` for a 3-D one); the boxes are those of
    :func:`partition_labels`.  ``phi`` of planes ``lo:hi`` of array axis 0
    of a grid of array shape ``grid_shape`` (a rank's slab): ``planes = (lo, hi)``.
    """
    xp = backend_of(phi).xp
    phi = xp.asarray(phi)
    blocks = block_counts(blocks, phi.ndim, "blocks")
    shape = phi.shape if grid_shape is None else grid_shape
    return 2 * partition_labels(shape, blocks, xp, planes) + (phi < 0)


def compact_labels(lab, xp):
    """Arbitrary labels to ``0 .. k-1``, in increasing order of the original labels.

    Non-negative integer labels not much larger than their number: the
    occupancy of every value is marked (a scatter) and its cumulative sum
    is the lookup table (:func:`compact_present`), no sort; otherwise
    ``xp.unique``.  Returns ``(compact int64 (N,), k, slot, original)``, see
    :func:`compact_present` (``slot`` None after ``unique``).  Host
    synchronisations: the range of the labels and ``k``.
    """
    n = lab.size
    if n == 0:
        return lab.astype(xp.int64), 0, None, lab
    if np.issubdtype(lab.dtype, np.integer):
        lo, hi = (int(v) for v in host_array(xp.stack([lab.min(), lab.max()])))
        if lo >= 0 and hi < 4 * n + 1024:
            lab = lab.astype(xp.int64, copy=False)
            present = xp.zeros(hi + 1, dtype=bool)
            present[lab] = True
            return compact_present(lab, present, xp)
    original, compact = xp.unique(lab, return_inverse=True)
    return compact.ravel().astype(xp.int64, copy=False), int(original.size), None, original


def compact_present(lab, present, xp):
    """Compact labels from the occupancy ``present`` of the possible values ``0 .. len-1``.

    Returns ``(compact int64 (N,), k, slot, original)``: ``slot`` (int64, one
    per possible value) the compact label of every value, -1 where absent;
    ``original`` (``(k,)``) the value of every compact label, both on ``xp``.
    ``present`` may be a host array (then no synchronisation); on the
    device, reading ``k`` is one.
    """
    k, slot, original = present_table(present)
    slot, original = xp.asarray(slot), xp.asarray(original)
    compact = slot[lab.astype(xp.int64, copy=False)]
    return compact, k, slot, original


def present_table(present):
    """``(k, slot, original)`` of :func:`compact_present`, on the array
    backend of ``present`` (reading ``k`` is a sync on the device)."""
    pxp = backend_of(present).xp               # the small table is computed where it lives
    cum = pxp.cumsum(present, dtype=pxp.int64)
    k = int(cum[-1]) if cum.size else 0
    slot = pxp.where(present, cum - 1, -1)
    original = pxp.searchsorted(cum, pxp.arange(1, k + 1, dtype=pxp.int64))
    return k, slot, original


def block_counts(blocks, ndim, option):
    """``blocks`` as a tuple of ``ndim`` positive box counts (one per grid
    axis, x first), or a one-line ValueError naming ``option``."""
    counts = tuple(int(b) for b in blocks)
    if len(counts) != ndim:
        raise ValueError(f"{option} {counts}: {len(counts)} block counts for a {ndim}-D grid; "
                         f"expected one per axis ({', '.join(AXES[:ndim])})")
    if min(counts) < 1:
        raise ValueError(f"{option} {counts} must be positive")
    return counts
