"""Subdomain deflation on the ranks of a distributed operator (A-DEF2 and DEF1).

What the Krylov loop asks of a deflation space (``restrict``, ``prolong``,
``AZT``, ``AZ``, ``coarse``, ``n_vectors``), for the rank's slab of a
:class:`~bubbleflow.operators.distributed.DistributedOperator`:

* ``restrict(r) = Z^T r``: the slab's sums per subdomain, then the sum over
  the ranks (one all-reduce of ``k`` values); ``coarse_rhs(r, s) = Z^T r -
  (A Z)^T s`` the same for both products in one all-reduce;
* ``prolong(e) = Z e``: each of the slab's cells takes its subdomain's value;
* ``AZ``: the slab's rows of ``A Z`` (a cell next to the slab's edge couples
  to a subdomain through a halo cell, whose label the rank knows), and
  ``AZT`` its transpose, whose products are summed over the ranks;
* ``E = Z^T A Z``: each rank's entries of ``Z^T (A Z)`` (a few per
  vector) gathered by every rank and summed, then factorised on every rank
  (:class:`~.coarse.CoarseSolver`): every rank solves the same small system.

A subdomain may straddle two ranks.  Each rank gives the labels of its
widened slab (from its level set and the boxes' planes there,
:func:`~.labels.levelset_subdomain_labels` with ``planes``).
The set-up runs on the host; ``A Z``, its transpose, the labels and the
coarse solve live on the operator's backend.

:func:`slab_deflation` is the registry's builder of a deflation space on a
rank's slab (:data:`bubbleflow.linalg.registry.DEFLATIONS`, ``slab``): the
boxes of the one-process space of the same name and options, labelled on
the rank's widened slab.
"""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...compute.transfer import on_backend, to_host
from ...mesh.grid import face_sides
from .. import registry
from .coarse import CoarseSolver
from .arrays import scatter_add
from .labels import levelset_subdomain_labels, partition_labels

__all__ = ["DistributedDeflation", "slab_deflation"]


class _RankSum:
    """``(A Z)^T`` of a slab whose products are summed over the ranks."""

    def __init__(self, local, comm):
        self.local, self.comm = local, comm
        self.shape = local.shape

    def __matmul__(self, v):
        return self.comm.allreduce_sum(self.local @ v)


class DistributedDeflation:
    """The deflation space of subdomain ``labels`` on the slab of ``A``:
    integers on the slab widened by its halo planes (planes ``lo':hi'`` of
    :meth:`RankSlab.extended`, grid-shaped), numbered alike on every rank
    (compacted here to ``0..k-1``, ``k`` the labels present on any rank)."""

    def __init__(self, A, labels, kind="labels"):
        import scipy.sparse as sp

        self.comm, self.kind, self.backend = A.comm, kind, A.backend
        slab = A.slab
        lo, hi, below, _ = slab.extended()
        raw = np.asarray(backend_of(labels).to_host(labels))
        if raw.shape[0] != hi - lo:
            raise ValueError(f"labels of {raw.shape[0]} planes; the widened slab has {hi - lo}")
        # Every rank's labels present, in one sorted list: the numbering of a
        # one-process space of the whole grid's labels.
        present = np.unique(np.concatenate(self.comm.allgather(np.unique(raw))))
        self.k = int(present.size)
        ext = np.searchsorted(present, raw)
        nloc = slab.hi - slab.lo
        own = ext[below:below + nloc].ravel()
        self.labels = on_backend(own, self.backend)
        couplings = [to_host(c, self.backend) for c in A.couplings()]
        rows, cols, vals = _az_entries(couplings, ext, below, nloc)
        n = own.size
        AZ = sp.csr_matrix((vals, (rows, cols)), shape=(n, self.k))
        AZ.sum_duplicates()
        AZ.eliminate_zeros()
        self.AZ = _on_backend_csr(AZ, self.backend)
        self.AZT = _RankSum(_on_backend_csr(AZ.T.tocsr(), self.backend), self.comm)
        Z = sp.csr_matrix((np.ones(n), (np.arange(n), own)), shape=(n, self.k))
        # Each rank's entries of Z^T (A Z) (its subdomains and their
        # neighbours': a few per vector), gathered and summed: E is sparse.
        part = (Z.T @ AZ).tocoo()
        rows, cols, vals = (np.concatenate(self.comm.allgather(a))
                            for a in (part.row, part.col, part.data))
        E = sp.csr_matrix((vals, (rows, cols)), shape=(self.k, self.k))
        E.sum_duplicates()
        self.E = (0.5 * (E + E.T)).tocsr()
        # The constants span the operator's null space: E is singular.
        self.coarse = CoarseSolver(self.E, True, self.backend, symmetric=True)

    @property
    def n_vectors(self):
        return self.k

    def restrict(self, r):
        local = scatter_add(self.labels, r.ravel(), self.k, self.backend.xp)
        return self.comm.allreduce_sum(local).astype(r.dtype, copy=False)

    def prolong(self, e):
        return e[self.labels]

    def coarse_rhs(self, r, s):
        """``Z^T r - (A Z)^T s`` (A-DEF2's coarse right-hand side): both the
        slab's sums, then one all-reduce of the two (each value summed over
        the ranks as :meth:`restrict` and ``AZT`` sum it alone)."""
        xp = self.backend.xp
        own = xp.concatenate([scatter_add(self.labels, r.ravel(), self.k, xp),
                              self.AZT.local @ s])
        both = self.comm.allreduce_sum(own)
        return both[:self.k].astype(r.dtype, copy=False) - both[self.k:]

    def __repr__(self):
        return f"<DistributedDeflation {self.kind}: {self.k} vectors, rank {self.comm.rank}>"


def slab_deflation(kind, A, grid, phi=None, subdomains=None, stripes=16,
                   cells_per_subdomain=None):
    """The deflation space ``kind`` on the slab of ``A`` (a
    DistributedOperator), or None for ``"none"``: the boxes of the whole
    ``grid`` (a :class:`~bubbleflow.mesh.grid.Grid`) that the one-process
    space of these options has (``subdomains`` counts, x first, or boxes
    about ``cells_per_subdomain`` cells wide by default; ``stripes`` layers
    along the vertical axis for a space whose entry takes ``stripes``),
    split into liquid and gas by ``phi`` for a space that needs the level
    set (``phi``: the level set on the slab widened by its halo planes)."""
    if kind == "none" or kind is None:
        return None
    entry = registry.deflation(kind)           # an unknown name: the registry's error
    if entry.needs_phi and phi is None:
        raise ValueError(f"{kind} deflation needs the level set phi")
    if "stripes" in entry.options:             # layers along the vertical axis
        blocks = (1,) * (grid.ndim - 1) + (int(stripes),)
    else:
        blocks = subdomains or registry.default_subdomains(grid, cells_per_subdomain)
    lo, hi, _, _ = A.slab.extended()
    if entry.needs_phi:
        labels = levelset_subdomain_labels(np.asarray(backend_of(phi).to_host(phi)), *blocks,
                                           grid_shape=grid.shape, planes=(lo, hi))
    else:
        labels = partition_labels(grid.shape, blocks, planes=(lo, hi))
    return DistributedDeflation(A, labels, kind=kind)


def _on_backend_csr(M, backend):
    """The host CSR matrix ``M`` on ``backend``."""
    xp = backend.xp
    return backend.sparse.csr_matrix((xp.asarray(M.data), xp.asarray(M.indices),
                                      xp.asarray(M.indptr)), shape=M.shape)


def _az_entries(couplings, ext, below, nloc):
    """``(rows, cols, values)`` of the slab's rows of ``A Z`` from the
    widened slab's couplings and labels ``ext``: a face of coupling ``c``
    between cells ``p`` and ``q`` adds ``c`` at ``(p, lab p)`` and ``-c``
    at ``(p, lab q)`` (and the same for ``q``), for the cells in the slab."""
    ndim = ext.ndim
    index = np.arange(ext.size).reshape(ext.shape)
    plane = int(np.prod(ext.shape[1:]))
    first, last = below * plane, (below + nloc) * plane
    rows, cols, vals = [], [], []
    for axis, c in enumerate(couplings):
        lower, upper = face_sides(ndim, axis)
        p, q, cf = index[lower].ravel(), index[upper].ravel(), np.asarray(c).ravel()
        lp, lq = ext.ravel()[p], ext.ravel()[q]
        for a, la, lb in ((p, lp, lq), (q, lq, lp)):
            mine = (a >= first) & (a < last)
            rows += [a[mine] - first, a[mine] - first]
            cols += [la[mine], lb[mine]]
            vals += [cf[mine], -cf[mine]]
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
