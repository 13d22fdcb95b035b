"""Deflation spaces and the coarse solve.

The deflation vectors are piecewise constant: column ``c`` of ``Z`` is the
indicator of the cells labelled ``c``.  ``Z`` is therefore never stored, only
the label of each cell: ``Z^T r`` is a per-label sum and ``Z y`` a gather.
``A Z`` is a sparse ``N x k`` matrix (about five entries per row) and
``E = Z^T A Z`` a sparse ``k x k`` matrix, factorised once per operator.

Kinds (``make_deflation``):

``subdomains``           ``px x py`` rectangular blocks (default).
``stripes``              the seed's horizontal stripes of grid rows.
``levelset_subdomains``  every block split into its liquid and its gas part
                         (Tang and Vuik 2007): one vector per bubble piece,
                         which captures the small eigenvalues that density
                         contrast creates.

The singular Neumann operator: the labels partition the grid, so ``Z`` spans
the constants and ``E`` is singular with null space ``span{1_k}``.  The
coarse solve projects its right-hand side onto ``range(E)`` (zero sum),
solves with the last vector grounded (``E`` without its last row and
column is positive definite) and returns the zero-mean answer: exactly
``E^+ s``.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .backend import backend_of, get_backend

__all__ = ["Deflation", "CoarseSolver", "make_deflation", "subdomain_labels", "stripe_labels",
           "levelset_subdomain_labels", "DEFLATIONS"]

DEFLATIONS = ("none", "subdomains", "stripes", "levelset_subdomains")


def subdomain_labels(ny, nx, px, py):
    """Label of each cell for ``px x py`` rectangular subdomains (NumPy)."""
    j = (np.arange(ny) * py) // ny
    i = (np.arange(nx) * px) // nx
    return (j[:, None] * px + i[None, :]).astype(np.int64)


def stripe_labels(ny, nx, stripes):
    """Label of each cell for ``stripes`` horizontal stripes of grid rows."""
    j = (np.arange(ny) * stripes) // ny
    return np.repeat(j[:, None], nx, axis=1).astype(np.int64)


def levelset_subdomain_labels(phi, px, py):
    """Subdomains split into liquid (``phi >= 0``) and gas parts."""
    ny, nx = phi.shape
    return 2 * subdomain_labels(ny, nx, px, py) + (np.asarray(phi) < 0)


class CoarseSolver:
    """Solves ``E y = s`` for the sparse symmetric coarse matrix ``E``.

    Parameters
    ----------
    E : scipy.sparse matrix (k x k), host
    singular : bool
        ``E`` has the null space ``span{1}`` (the labels cover the grid and
        the operator annihilates constants).
    backend : Backend
    dense_limit : int
        Up to this many unknowns the coarse matrix is factorised densely
        (Cholesky) and solved on the device; beyond it a sparse LU on the
        host is used.
    """

    def __init__(self, E, singular, backend, dense_limit=4000):
        self.backend = backend
        self.k = E.shape[0]
        self.singular = bool(singular)
        Er = E[:-1, :-1] if self.singular else E
        self.n = Er.shape[0]
        self.dense = self.n <= dense_limit
        if self.n == 0:
            return
        if self.dense:
            L = scipy.linalg.cholesky(Er.toarray(), lower=True)
            xp = backend.xp
            self.L = xp.asarray(L)
            self.LT = xp.asarray(np.ascontiguousarray(L.T))
            if backend.name == "cupy":
                from cupyx.scipy.linalg import solve_triangular
            else:
                from scipy.linalg import solve_triangular
            self._tri = solve_triangular
        else:
            import scipy.sparse.linalg as spla

            self.lu = spla.splu(sp.csc_matrix(Er))

    def solve(self, s):
        xp = self.backend.xp
        if self.singular:
            s = s - s.mean()          # project onto range(E)
        y = xp.zeros_like(s)
        if self.n == 0:
            return y
        rhs = s[: self.n]
        if self.dense:
            t = self._tri(self.L, rhs, lower=True)
            y[: self.n] = self._tri(self.LT, t, lower=False)
        else:
            y[: self.n] = xp.asarray(self.lu.solve(self.backend.to_host(rhs)))
        if self.singular:
            y -= y.mean()             # the minimum-norm answer, E^+ s
        return y


class Deflation:
    """Piecewise-constant deflation space from one label per cell.

    Parameters
    ----------
    A : PoissonOperator, or a SciPy / CuPy sparse matrix
    labels : int array (N,) or grid-shaped
        Cells with equal labels share a deflation vector.  Labels need not
        be contiguous; empty labels are removed.
    kind : str
        A name for reports.
    """

    def __init__(self, A, labels, kind="custom", dense_limit=4000):
        if hasattr(A, "backend"):
            self.backend = A.backend
        else:
            self.backend = backend_of(getattr(A, "data", A))
        xp = self.backend.xp
        self.kind = kind
        lab = np.asarray(self.backend.to_host(labels)).ravel()
        _, lab = np.unique(lab, return_inverse=True)
        lab = lab.astype(np.int64).ravel()
        self.k = int(lab.max()) + 1
        n = lab.size
        A_host = _host_csr(A)
        if A_host.shape != (n, n):
            raise ValueError(f"labels have {n} entries; the matrix is {A_host.shape}")
        Z = sp.csr_matrix((np.ones(n), (np.arange(n), lab)), shape=(n, self.k))
        AZ = (A_host @ Z).tocsr()
        E = (Z.T @ AZ).tocsr()
        E = 0.5 * (E + E.T)
        # Z spans the constants (labels partition the grid); if A kills them,
        # E is singular with null space span{1}.
        diag_scale = float(np.abs(A_host.diagonal()).max()) or 1.0
        singular = float(np.abs(A_host @ np.ones(n)).max()) <= 1e-10 * diag_scale
        dtype = getattr(A, "dtype", np.float64)
        self.labels = xp.asarray(lab)
        self.E = E
        self.coarse = CoarseSolver(E, singular, self.backend, dense_limit)
        if self.backend.name == "cupy":
            self.AZ = self.backend.sparse.csr_matrix(AZ.astype(dtype))
            self.AZT = self.backend.sparse.csr_matrix(AZ.T.tocsr().astype(dtype))
        else:
            self.AZ = AZ.astype(dtype)
            self.AZT = AZ.T.tocsr().astype(dtype)

    @property
    def n_vectors(self):
        return self.k

    def restrict(self, r):
        """``Z^T r``: the sum of ``r`` over each subdomain."""
        return self.backend.xp.bincount(self.labels, weights=r.ravel(), minlength=self.k).astype(r.dtype)

    def prolong(self, y):
        """``Z y``: each cell takes its subdomain's value."""
        return y[self.labels]

    def Q(self, r):
        """``Q r = Z E^+ Z^T r``."""
        return self.prolong(self.coarse.solve(self.restrict(r)))

    def __repr__(self):
        return f"<Deflation {self.kind}: {self.k} vectors on {self.backend.name}>"


def _host_csr(A):
    if hasattr(A, "to_scipy"):
        return A.to_scipy()
    if sp.issparse(A):
        return sp.csr_matrix(A)
    mod = type(A).__module__
    if mod.startswith("cupyx"):
        return A.get().tocsr()
    return sp.csr_matrix(np.asarray(A))


def make_deflation(kind, A, phi=None, subdomains=(16, 16), stripes=16, dense_limit=4000):
    """Build the deflation space ``kind`` for the grid operator ``A``.

    Returns None for ``"none"``.  ``phi`` (grid-shaped) is needed for
    ``levelset_subdomains``.
    """
    if kind == "none" or kind is None:
        return None
    ny, nx = A.grid_shape
    px, py = (int(v) for v in subdomains)
    if kind == "subdomains":
        labels = subdomain_labels(ny, nx, px, py)
    elif kind == "stripes":
        labels = stripe_labels(ny, nx, int(stripes))
    elif kind == "levelset_subdomains":
        if phi is None:
            raise ValueError("levelset_subdomains deflation needs the level set phi")
        phi = get_backend("numpy").to_host(A.backend.to_host(phi)).reshape(ny, nx)
        labels = levelset_subdomain_labels(phi, px, py)
    else:
        raise ValueError(f"unknown deflation {kind!r}; expected one of {', '.join(DEFLATIONS)}")
    return Deflation(A, labels, kind=kind, dense_limit=dense_limit)
