"""Connected regions of a mask: the array library's labelling, and sums over
the regions that come out the same on every run; one twin per backend.

:func:`label_regions` numbers the 4-connected regions of a boolean mask
(SciPy's ``ndimage.label`` on NumPy, CuPy's ``cupyx.scipy.ndimage.label`` on
the GPU, which keeps the field on the device).  The numbering may differ
between the two; callers that report regions order them by what they
describe, not by their numbers.

:func:`region_sums` totals weights over the cells of each label.  NumPy's
``bincount`` adds in the cells' order; CuPy's adds with atomics, in an order
that varies from run to run, so a restarted run would not reproduce its
tables bit for bit.  The CuPy variant sums with the library's reductions
(a fixed tree): over the whole grid a label at a time where the labels are
few (:data:`FEW_LABELS`), else over fixed chunks of the cells sorted by
label, then the chunks' sums in order on the host.

>>> import numpy as np
>>> labels, count = label_regions(np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=bool))
>>> count, labels.tolist()
(3, [[1, 0, 2], [1, 0, 0], [0, 0, 3]])
"""
from __future__ import annotations

import numpy as np

from .twins import twin

__all__ = ["label_regions", "region_sums"]

#: Up to this many labels the CuPy variant of :func:`region_sums` reduces
#: the grid once per label (a few launches each) rather than sorting.
FEW_LABELS = 4
#: Cells a chunk of the CuPy variant of :func:`region_sums` sums at once.
SUM_CHUNK = 1024


@twin
def label_regions(mask):
    """``(labels, count)``: ``labels`` an int32 array of ``mask``'s shape, 0
    outside the mask and ``1 .. count`` on its 4-connected regions."""
    from scipy import ndimage

    labels, count = ndimage.label(np.asarray(mask, dtype=bool))
    return labels.astype(np.int32, copy=False), int(count)


@label_regions.register("cupy")
def _label_regions_cupy(mask):
    import cupy as cp
    from cupyx.scipy import ndimage

    labels, count = ndimage.label(mask.astype(cp.bool_, copy=False))
    return labels.astype(cp.int32, copy=False), int(count)


@twin
def region_sums(labels, weights, count):
    """Per label ``1 .. count``, the sums of each weight over its cells.

    Parameters
    ----------
    labels : array of int
        A label per cell, ``0 .. count`` (0 is left out of the sums).
    weights : sequence of arrays
        Of ``labels``' shape, on its backend.
    count : int
        The largest label.

    Returns
    -------
    list of numpy.ndarray
        One float64 host array of ``count`` sums per weight.
    """
    flat = np.asarray(labels).ravel()
    return [np.bincount(flat, weights=np.asarray(w, dtype=np.float64).ravel(),
                        minlength=count + 1)[1:] for w in weights]


@region_sums.register("cupy")
def _region_sums_cupy(labels, weights, count):
    import cupy as cp

    flat = labels.ravel()
    stack = cp.stack([w.ravel() for w in weights]).astype(cp.float64, copy=False)
    if count <= FEW_LABELS:
        sums = cp.stack([cp.where(flat == k, stack, 0.0).sum(axis=1)
                         for k in range(1, count + 1)], axis=1) if count else \
            cp.zeros((len(weights), 0))
        return list(cp.asnumpy(sums))
    # Only labelled cells with some weight count: a cell adding zero changes no sum.
    cells = cp.flatnonzero((flat > 0) & cp.any(stack != 0.0, axis=0))
    # Unique keys: the order does not depend on the sort's stability.
    key = flat[cells].astype(cp.int64) * (flat.size + 1) + cells
    cells = cells[cp.argsort(key)]
    owner = flat[cells].astype(cp.int64)
    per_label = cp.bincount(owner, minlength=count + 1)       # integers: exact
    chunks = -(-per_label // SUM_CHUNK)
    first_chunk = cp.cumsum(chunks) - chunks
    first_cell = cp.cumsum(per_label) - per_label
    rank = cp.arange(cells.size, dtype=cp.int64) - first_cell[owner]
    n_chunks = int(chunks.sum())
    padded = cp.zeros((len(weights), max(n_chunks, 1) * SUM_CHUNK), dtype=cp.float64)
    padded[:, (first_chunk[owner] + rank // SUM_CHUNK) * SUM_CHUNK + rank % SUM_CHUNK] = \
        stack[:, cells]
    chunk_sums = padded.reshape(len(weights), -1, SUM_CHUNK).sum(axis=2)
    chunk_sums, chunks = cp.asnumpy(chunk_sums), cp.asnumpy(chunks)
    out = np.zeros((len(weights), count + 1))
    nonempty = np.flatnonzero(chunks)
    if nonempty.size:
        starts = np.concatenate([[0], np.cumsum(chunks)])[nonempty]
        out[:, nonempty] = np.add.reduceat(chunk_sums[:, :n_chunks], starts, axis=1)
    return list(out[:, 1:])
