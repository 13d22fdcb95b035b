"""Deflation by the user's own vectors, for any operator: no grid needed.

:class:`VectorDeflation` takes the columns of a dense or sparse ``Z``
(``n x k``) and an operator that only has to multiply (a matrix, a sparse
matrix, a SciPy ``LinearOperator`` or a callable).  It gives the Krylov
loop's array engine what :class:`~.space.Deflation` gives it (``restrict``,
``prolong``, ``AZ``, ``AZT``, ``coarse.solve``), with ``E = Z^T A Z``
solved through its pseudo-inverse: whatever ``Z`` spans (the constants of
a singular operator included), the coarse solve is well defined.
"""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...compute.blas import single_threaded
from ...compute.products import fixed_order_dot

__all__ = ["VectorDeflation", "deflation_from_input"]

#: Eigenvalues of ``E`` below this fraction of the largest are its null
#: space (``Z`` spanning a null vector of ``A``, or dependent columns).
RANK_TOLERANCE = 1e-12


class _PseudoInverse:
    """``E^+ s`` by a dense product with the pseudo-inverse (host-built,
    stored on the backend); ``refine`` adds one step of iterative
    refinement on the range of ``E``."""

    mode = "dense"

    def __init__(self, E, xp):
        with single_threaded(E.shape[0]):
            w, V = np.linalg.eigh(0.5 * (E + E.T))
        keep = w > RANK_TOLERANCE * max(float(np.abs(w).max(initial=0.0)), np.finfo(float).tiny)
        self.rank = int(keep.sum())
        self.singular = self.rank < E.shape[0]
        self.k = E.shape[0]
        Ek = (V[:, keep] / w[keep]) @ V[:, keep].T
        self._inverse, self._E = xp.asarray(Ek), xp.asarray(E)

    def solve(self, s, out=None, refine=False):
        y = self._inverse @ s
        if refine:
            y = y + self._inverse @ (s - self._E @ y)
        if out is not None:
            out[...] = y
            return out
        return y.astype(s.dtype, copy=False)


class VectorDeflation:
    """The deflation space spanned by the columns of ``Z``.

    Parameters
    ----------
    A : matrix, sparse matrix, LinearOperator or callable (n x n)
        Only its products are used: ``A Z`` is formed once (column by
        column for a callable or a LinearOperator).
    Z : array (n, k) or (n,), or a SciPy / CuPy sparse matrix (n x k)
        Real; on the backend of the solve's right-hand side.  ``k <= n``.
    kind : str
        A name for reports.

    Attributes
    ----------
    k, n_vectors : int
    AZ, AZT : ``A Z`` (n x k) and its transpose, dense (sparse when both
        ``A`` and ``Z`` are sparse)
    E : ndarray (k x k), host, float64
        ``Z^T A Z``, symmetrised.
    coarse : the coarse solve ``E^+ s`` (``rank`` and ``singular`` say what
        ``E`` was found to be)
    """

    def __init__(self, A, Z, kind="vectors"):
        self.backend = backend_of(getattr(Z, "data", Z))
        xp, sparse = self.backend.xp, self.backend.sparse
        self.kind = kind
        is_sparse = sparse.issparse(Z)
        if not is_sparse:
            Z = xp.asarray(Z)
            if Z.ndim == 1:
                Z = Z[:, None]
        if len(Z.shape) != 2:
            raise ValueError(f"deflation vectors Z have shape {tuple(Z.shape)}: expected (n, k)")
        if np.dtype(Z.dtype).kind not in "iuf":
            raise ValueError(f"deflation vectors Z have dtype {Z.dtype}: expected real numbers")
        n, k = (int(v) for v in Z.shape)
        shape = getattr(A, "shape", None)
        if shape is not None and tuple(shape) != (n, n):
            raise ValueError(f"deflation vectors Z have {n} rows; A has shape {tuple(shape)}")
        if not 1 <= k <= n:
            raise ValueError(f"deflation vectors Z have {k} columns: expected 1 to {n}")
        self.Z = Z.astype(np.float64) if is_sparse else xp.asarray(Z, dtype=np.float64)
        self.ZT = self.Z.T.tocsr() if is_sparse else self.Z.T
        self.k = k
        self.AZ = _products(A, self.Z, is_sparse, xp, sparse)
        self.AZT = self.AZ.T.tocsr() if sparse.issparse(self.AZ) else xp.ascontiguousarray(self.AZ.T)
        E = self.ZT @ self.AZ
        E = E.toarray() if sparse.issparse(E) else E
        self.E = np.asarray(self.backend.to_host(E), dtype=np.float64)
        self.coarse = _PseudoInverse(self.E, xp)

    @property
    def n_vectors(self):
        return self.k

    def restrict(self, r):
        """``Z^T r``."""
        return self.ZT @ r

    def prolong(self, y):
        """``Z y``."""
        return self.Z @ y

    def coarse_rhs(self, r, s):
        """``Z^T r - (A Z)^T s``: A-DEF2's coarse right-hand side."""
        return self.restrict(r) - fixed_order_dot(self.AZT, s)

    def Q(self, r):
        """``Q r = Z E^+ Z^T r``."""
        return self.prolong(self.coarse.solve(self.restrict(r)))

    def __repr__(self):
        return f"<VectorDeflation {self.kind}: {self.k} vectors on {self.backend.name}>"


def _products(A, Z, is_sparse, xp, sparse):
    """``A Z``: one product where ``A`` takes matrices, else column by column."""
    if is_sparse and sparse.issparse(A):
        return (A @ Z).tocsr()
    Zd = Z.toarray() if is_sparse else Z
    if sparse.issparse(A) or (getattr(A, "ndim", 0) == 2 and not hasattr(A, "matvec")):
        return xp.asarray(A @ Zd)
    matvec = A.matvec if hasattr(A, "matvec") else A
    return xp.stack([xp.asarray(matvec(Zd[:, j])).ravel() for j in range(Zd.shape[1])], axis=1)


def deflation_from_input(deflation, A):
    """The deflation space a solve was given: a space (returned as it is),
    one integer label per unknown, or vectors ``Z`` (a float array
    ``(n, k)`` or ``(n,)``, or a sparse matrix); labels for an operator
    that is neither a matrix nor a grid operator become sparse vectors.
    None: no deflation."""
    from .space import Deflation

    if deflation is None or hasattr(deflation, "restrict"):
        return deflation
    backend = backend_of(getattr(deflation, "data", deflation))
    xp, sparse = backend.xp, backend.sparse
    if sparse.issparse(deflation):
        return VectorDeflation(A, deflation)
    arr = xp.asarray(deflation)
    if arr.dtype.kind == "f":
        return VectorDeflation(A, arr)
    if arr.dtype.kind not in "iub":
        raise ValueError(f"deflation has dtype {arr.dtype}: expected a Deflation, integer labels "
                         "or real vectors Z (n x k)")
    grid_operator = hasattr(A, "couplings") and hasattr(A, "grid_shape")   # any dimension
    matrix = sparse.issparse(A) or grid_operator or \
        (getattr(A, "ndim", 0) == 2 and not hasattr(A, "matvec") and not hasattr(A, "couplings"))
    if matrix:
        return Deflation(A, arr, kind="labels")
    labels = arr.ravel().astype(xp.int64)
    _, labels = xp.unique(labels, return_inverse=True)
    n = labels.size
    Z = sparse.csr_matrix((xp.ones(n), labels.ravel().astype(xp.int32),
                           xp.arange(n + 1, dtype=xp.int32)), shape=(n, int(labels.max()) + 1))
    return VectorDeflation(A, Z, kind="labels")
