"""``A Z``, ``(A Z)^T`` and ``E = Z^T A Z`` of a piecewise-constant deflation space.

``Z`` is never stored: column ``l`` is the indicator of the cells labelled
``l``.  For the grid operator the rows of ``A`` sum to zero, so every entry
comes from the "cut" faces, those whose two cells carry different labels
(:func:`face_pieces`): ``(A Z)_{p,l} = -sum c_f`` over the faces ``f`` from
cell ``p`` to cells labelled ``l != label(p)``, ``(A Z)_{p,label(p)} =
+sum c_f`` over the same faces, ``E_kl = -sum c_f`` over the cut faces
between ``k`` and ``l`` and ``E_kk = sum c_f`` over those leaving ``k``.
Built on the operator's backend from its face couplings, without a host
matrix; ``E`` is exactly symmetric (canonical pairs summed once, then
mirrored).  A general sparse matrix takes sparse products
(:func:`matrix_pieces`).
"""
from __future__ import annotations

import math

import numpy as np

from ...compute.backend import backend_of
from ...compute.twins import twin
from ...mesh.grid import array_axis, face_sides
from .arrays import host_array, scatter_add

__all__ = ["face_pieces", "matrix_pieces"]


def face_pieces(A, labels, k, dtype):
    """``A Z``, ``(A Z)^T`` and ``E`` of the grid operator from its cut faces,
    on its backend (any dimension)."""
    backend = A.backend
    xp = backend.xp
    shape = tuple(A.grid_shape)
    n = math.prod(shape)
    p, q, c = _cut_faces(labels.reshape(shape), A.couplings(), xp)
    a = labels[p]
    b = labels[q]
    # E: canonical pairs (lo < hi) summed once and mirrored, so E is exactly symmetric.
    lo = xp.minimum(a, b)
    hi = xp.maximum(a, b)
    er, ec, ev = _sum_duplicates(lo, hi, c, k)
    diag = scatter_add(xp.concatenate([a, b]), xp.concatenate([c, c]), k, xp)
    ar = xp.arange(k, dtype=xp.int64)
    E = _csr(xp.concatenate([er, ec, ar]), xp.concatenate([ec, er, ar]),
             xp.concatenate([-ev, -ev, diag]), (k, k), backend)
    # (A Z)^T: four entries per cut face, (b, p) -c, (a, q) -c, (a, p) +c, (b, q) +c,
    # summed and sorted by (vector, cell) in one pass: CSR order.  A Z itself is
    # built from it only when asked for (Deflation.AZ; A-DEF2 does not need it).
    rows = xp.concatenate([b, a, a, b])
    cols = xp.concatenate([p, q, p, q])
    vals = xp.concatenate([-c, -c, c, c])
    zr, zc, zv = _sum_duplicates(rows, cols, vals, n)
    zv = zv.astype(dtype, copy=False)
    AZT = _csr(zr, zc, zv, (k, n), backend, presorted=True)
    return None, AZT, E


def _cut_faces(L, couplings, xp):
    """The interior faces whose two cells carry different labels ``L``
    (grid-shaped): ``(p, q, c)``, the cells below and above them (flat
    indices, ``p < q``) and their couplings (float64).

    Faces are numbered axis by axis (x first), each axis's in the C order of
    its face array (the grid's shape, one cell fewer along the axis); one
    host synchronisation (the number of cut faces).
    """
    ndim = L.ndim
    cuts, first = [], [0]                        # first: the number of each axis's first face
    for axis in range(ndim):
        lower, upper = face_sides(ndim, axis)
        cuts.append((L[upper] != L[lower]).ravel())
        first.append(first[-1] + cuts[-1].size)
    f = xp.flatnonzero(xp.concatenate(cuts))     # host sync: the number of cut faces
    p = q = c = None
    for axis, coupling in enumerate(couplings):
        a = array_axis(ndim, axis)
        stride = math.prod(L.shape[a + 1:])      # from a cell to its neighbour across the face
        layer = max((L.shape[a] - 1) * stride, 1)    # faces per step of the slower axes
        local = f - first[axis]
        # The face array has one cell fewer along the axis than the grid:
        # face i lies above cell i + (i // layer) * stride.
        below = local + (local // layer) * stride
        value = _gather(coupling, local, xp)
        if axis == 0:
            p, q, c = below, below + stride, value
        else:                                    # the faces of this axis and the later ones
            mine = f >= first[axis]
            p = xp.where(mine, below, p)
            q = xp.where(mine, below + stride, q)
            c = xp.where(mine, value, c)
    return p, q, c


def _gather(a, idx, xp):
    """``a.ravel()[idx]`` in float64, with ``idx`` clipped to ``a`` (the caller masks)."""
    if a.size == 0:
        return xp.zeros(idx.shape, dtype=np.float64)
    return a.ravel()[xp.clip(idx, 0, a.size - 1)].astype(np.float64, copy=False)


@twin
def _sum_duplicates(rows, cols, vals, ncols):
    """Entries with equal ``(row, col)`` summed; returned sorted by row, then column."""
    xp = backend_of(rows).xp
    if rows.size == 0:
        return rows, cols, vals
    key = rows * ncols + cols
    order = xp.argsort(key)
    key = key[order]
    vals = vals[order]
    new = xp.empty(key.size, dtype=bool)
    new[0] = True
    xp.not_equal(key[1:], key[:-1], out=new[1:])
    seg = xp.cumsum(new, dtype=xp.int64) - 1
    nu = int(seg[-1]) + 1                        # host sync: the number of distinct entries
    summed = scatter_add(seg, vals, nu, xp)
    ukey = xp.empty(nu, dtype=key.dtype)
    ukey[seg] = key
    return ukey // ncols, ukey % ncols, summed


@_sum_duplicates.register("numpy")
def _sum_duplicates_scipy(rows, cols, vals, ncols):
    """On the host: SciPy's compiled COO to CSR conversion, which sums and
    sorts, in place of a sort of the keys (a tenth of the time for a flow's
    coarse space at h = 1/80)."""
    if rows.size == 0:
        return rows, cols, vals
    import scipy.sparse as sp

    nrows = int(rows.max()) + 1
    m = sp.coo_matrix((vals, (rows, cols)), shape=(nrows, ncols)).tocsr()
    m.sum_duplicates()
    r = np.repeat(np.arange(nrows, dtype=rows.dtype), np.diff(m.indptr))
    return r, m.indices.astype(cols.dtype, copy=False), m.data


def _csr(rows, cols, vals, shape, backend, presorted=False):
    """CSR matrix of the backend from entries without duplicates (in any order,
    or sorted by row and column with ``presorted``): sorted column indices,
    int32 index arrays."""
    xp = backend.xp
    nrows, ncols = shape
    if rows.size and not presorted:
        order = xp.argsort(rows * ncols + cols)
        rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = _row_pointers(rows, nrows).astype(xp.int32)
    return backend.sparse.csr_matrix((vals, cols.astype(xp.int32), indptr), shape=shape)


@twin
def _row_pointers(rows, nrows):
    """CSR row pointers ``(nrows + 1,)`` of the sorted row indices ``rows``:
    a binary search (``cupy.bincount`` would synchronise, twice)."""
    xp = backend_of(rows).xp
    return xp.searchsorted(rows, xp.arange(nrows + 1, dtype=rows.dtype))


@_row_pointers.register("numpy")
def _row_pointers_numpy(rows, nrows):
    # O(n); np.bincount does not synchronise.
    indptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=indptr[1:])
    return indptr


def matrix_pieces(A, labels, k, dtype, backend):
    """``A Z``, ``(A Z)^T``, ``E`` and the singularity of ``E`` for a general matrix."""
    xp = backend.xp
    sparse = backend.sparse
    if sparse.issparse(A):
        As = sparse.csr_matrix(A, dtype=np.float64)
    else:
        As = sparse.csr_matrix(xp.asarray(A, dtype=np.float64))
    n = As.shape[0]
    Z = sparse.csr_matrix((xp.ones(n, dtype=np.float64), labels.astype(xp.int32),
                           xp.arange(n + 1, dtype=xp.int32)), shape=(n, k))
    AZ = (As @ Z).tocsr()
    E = (Z.T.tocsr() @ AZ).tocsr()
    E = (0.5 * (E + E.T.tocsr())).tocsr()
    # Z spans the constants (labels partition the grid); if A kills them,
    # E is singular with null space span{1}.  One host synchronisation.
    scale, res = (float(v) for v in host_array(xp.stack([abs(As.diagonal()).max(),
                                                         abs(As @ xp.ones(n)).max()])))
    singular = res <= 1e-10 * (scale or 1.0)
    AZ = AZ.astype(dtype)
    AZT = AZ.T.tocsr()
    for M in (AZ, AZT, E):
        M.sort_indices()
    return AZ, AZT, E, singular
