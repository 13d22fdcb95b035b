"""The box layout of a block deflation space, and its sums per box.

The registry's kinds are spaces of boxes
(:meth:`bubbleflow.mesh.grid.Grid.partition`), each possibly split into its
liquid and gas part.  :func:`block_layout` builds the labels and the layout
(which boxes and parts are present, the part of every cell) on the
operator's backend, and on CuPy, for 2-D boxes that tile the grid, the
whole space in a few kernels
(:func:`bubbleflow.linalg.deflation.kernels.deflation_blocks`).
:func:`tile_part_sums` is the restriction ``Z^T r`` of such a layout: the
sums over the two parts of every box, reductions in a fixed order (one
kernel on CuPy in 2-D).
"""
from __future__ import annotations

import math

import numpy as np

from ...compute.backend import backend_of
from ...compute.transfer import on_backend
from ...compute.twins import twin
from . import kernels as deflation_cuda
from .arrays import scatter_add
from .labels import box_partition, levelset_subdomain_labels, partition_labels, present_table

__all__ = ["block_layout", "tile_part_sums", "even_box_shape"]


def even_box_shape(grid_shape, blocks):
    """The array shape of a box when the boxes tile the grid exactly (every
    count divides its axis's cells), else None."""
    partition = box_partition(grid_shape, blocks)
    return partition.box_shape if partition.even else None


def _box_split(grid_shape, counts):
    """The grid's array shape with every axis split into (box, cell in the
    box), for boxes tiling it: ``(py, ny // py, px, nx // px)`` in 2-D.
    ``counts`` are the boxes per array axis (slowest first)."""
    return tuple(v for n, count in zip(grid_shape, counts) for v in (count, n // count))


def _block_sums(a, blocks, xp):
    """Sum of the grid array ``a`` over each box of :func:`partition_labels`,
    ``(prod(blocks),)``.

    A reshaped reduction when the boxes tile the grid exactly; otherwise a
    scatter-add over the box labels (float64, exact for counts).
    """
    if even_box_shape(a.shape, blocks) is not None:
        split = _box_split(a.shape, blocks[::-1])
        return a.reshape(split).sum(axis=tuple(range(1, len(split), 2))).ravel()
    labels = partition_labels(a.shape, blocks, xp).ravel()
    return scatter_add(labels, a.ravel().astype(np.float64), math.prod(blocks),
                        xp).astype(xp.int64)


@twin
def tile_part_sums(r, part, block_shape):
    """``(blocks * 2,)``: the sums of ``r`` over the liquid (``part == 0``)
    and the gas part of every block of ``block_shape`` tiling the grid of
    ``part`` (any dimension; array code on the backend of ``r``; on CuPy in
    2-D one kernel, :func:`bubbleflow.linalg.deflation.kernels.tile_part_sums`)."""
    xp = backend_of(r).xp
    boxes = tuple(n // m for n, m in zip(part.shape, block_shape))
    split = _box_split(part.shape, boxes)
    inside = tuple(range(1, len(split), 2))            # the axes within a box
    rb = r.reshape(split)
    gas = part.reshape(split)
    s_gas = xp.where(gas != 0, rb, 0).sum(axis=inside).ravel()
    s_liquid = xp.where(gas == 0, rb, 0).sum(axis=inside).ravel()
    return xp.stack([s_liquid, s_gas], axis=1).ravel()


tile_part_sums.register("cupy")(deflation_cuda.tile_part_sums)


@twin
def block_layout(A, phi, blocks, size):
    """The labels and the layout of the boxes of the grid operator ``A``
    (``blocks`` per grid axis, x first; split into liquid and gas parts by
    ``phi`` when given), on A's backend: ``(labels, pieces, layout)`` for
    :class:`~bubbleflow.linalg.deflation.space.Deflation`, ``size`` (host)
    the cells per box.  Array code
    (``pieces`` None), any dimension; on CuPy, for 2-D boxes that tile the
    grid, a few kernels build the whole space (``pieces``:
    :func:`bubbleflow.linalg.deflation.kernels.deflation_blocks`, ``labels``
    None)."""
    backend = A.backend
    xp = backend.xp
    shape = tuple(A.grid_shape)
    if phi is None:
        labels = partition_labels(shape, blocks, xp)
        nparts, part = 1, None
        present = size > 0                                    # host: k without a sync
    else:
        phi = on_backend(phi, backend).reshape(shape)
        labels = levelset_subdomain_labels(phi, *blocks)
        nparts, part = 2, labels % 2
        gas = _block_sums(part, blocks, xp)                   # gas cells per box
        present = xp.stack([gas < xp.asarray(size), gas > 0], axis=1).ravel()
    layout = dict(blocks=blocks, nparts=nparts, present=present, part=part, grid_shape=shape)
    return labels, None, layout


@block_layout.register("cupy")
def _block_layout_cuda(A, phi, blocks, size):
    if not deflation_cuda.raw_deflation_ok(A, *blocks):
        return NotImplemented             # 3-D, or boxes not tiling the grid: the array code
    shape = tuple(A.grid_shape)
    if phi is not None:
        phi = on_backend(phi, A.backend).reshape(shape)
    pieces, part, present = deflation_cuda.deflation_blocks(A, phi, *blocks, size,
                                                            present_table)
    nparts = 1 if phi is None else 2
    layout = dict(blocks=blocks, nparts=nparts, present=present, part=part, grid_shape=shape)
    return None, pieces, layout
