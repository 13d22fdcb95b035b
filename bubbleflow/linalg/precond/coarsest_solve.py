"""The coarsest multigrid level's solve: a dense inverse of ``A + c 1 1^T``
on the device (and on the host up to :data:`HOST_DENSE_CELLS` cells), a
sparse factorisation on the host above that.

``A`` is singular (Neumann walls); ``c = mean(diag) / n`` makes it
nonsingular, and for a compatible right-hand side (zero sum, which every
level's residual keeps) the solve gives the solution of ``A`` with zero
mean.  The set-up recomputes it at every refresh of the hierarchy
(:meth:`.multigrid.Multigrid.refresh`).
"""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...compute.blas import single_threaded
from ...compute.transfer import on_device
from ...mesh.grid import face_sides
from ...operators.poisson import centre_from_couplings, faces_to_scipy

__all__ = ["HOST_DENSE_CELLS", "coarse_solve", "coarsest_matrix", "dense_inverse",
           "HostCoarseSolve", "coarse_solve_bytes"]

#: On the host, coarsest levels larger than this are solved by a sparse
#: factorisation (:class:`HostCoarseSolve`) rather than a dense inverse.
HOST_DENSE_CELLS = 256


def coarse_solve(couplings, shape, dtype):
    """The coarsest level's solve from its float64 face ``couplings`` on an
    array of ``shape``: :func:`dense_inverse` in ``dtype``, or on the host
    above :data:`HOST_DENSE_CELLS` cells a :class:`HostCoarseSolve`."""
    backend = backend_of(couplings[0])
    if not on_device(backend) and int(np.prod(shape)) > HOST_DENSE_CELLS:
        return HostCoarseSolve(couplings, shape)
    return dense_inverse(couplings, shape, backend.xp).astype(dtype, copy=False)


def face_pairs(couplings, shape, xp):
    """``(p, q, coupling)`` per axis: the flat indices of the two cells of
    every interior face and the face's coupling."""
    index = xp.arange(int(np.prod(shape))).reshape(shape)
    for axis, c in enumerate(couplings):
        lower, upper = face_sides(len(shape), axis)
        yield index[lower].ravel(), index[upper].ravel(), c.ravel()


def coarsest_matrix(couplings, shape, xp):
    """The coarsest level's dense ``A + c 1 1^T`` (``c = mean(diag) / n``),
    nonsingular: for a compatible right-hand side its solution is the one
    of ``A`` with zero mean."""
    n = int(np.prod(shape))
    C = centre_from_couplings(couplings, xp).ravel()
    A = xp.zeros((n, n), dtype=C.dtype)
    for p, q, c in face_pairs(couplings, shape, xp):
        A[p, q] = -c
        A[q, p] = -c
    A[xp.arange(n), xp.arange(n)] = C
    # (A level without couplings, a single cell: the identity's scale.)
    A += xp.where(C.mean() > 0, C.mean(), 1.0) / n
    return A


def dense_inverse(couplings, shape, xp):
    """The symmetric inverse of :func:`coarsest_matrix`."""
    A = coarsest_matrix(couplings, shape, xp)
    with single_threaded(A.shape[0]):          # a no-op for the GPU's library
        inv = xp.linalg.inv(A)
    return 0.5 * (inv + inv.T)


class HostCoarseSolve:
    """The coarsest level's solve on the host, ``(A + c 1 1^T)^-1 b`` (the
    operator of :func:`dense_inverse`), by a sparse factorisation: the
    grounded ``A_g = A + c e_0 e_0^T`` (positive definite) factorised once,
    and the rank-two rest ``c (1 1^T - e_0 e_0^T)`` by Sherman-Morrison-
    Woodbury.  A dense inverse of a few hundred cells costs tens of
    milliseconds on one core, redone at every time step of a flow; this
    costs about one."""

    def __init__(self, couplings, shape):
        import scipy.sparse as sp
        from scipy.sparse.linalg import splu

        n = int(np.prod(shape))
        C = centre_from_couplings(couplings, np).ravel()
        c = float(C.mean()) / n if C.mean() > 0 else 1.0 / n
        grounded = faces_to_scipy(couplings, shape) + sp.csr_matrix(([c], ([0], [0])),
                                                                      shape=(n, n))
        self.lu = splu(grounded.tocsc())
        U = np.zeros((n, 2))
        U[:, 0] = 1.0
        U[0, 1] = 1.0
        self.U, self.W = U, self.lu.solve(U)
        self.S = np.linalg.inv(np.diag([1.0 / c, -1.0 / c]) + U.T @ self.W)

    def __matmul__(self, b):
        y = self.lu.solve(np.asarray(b, dtype=np.float64))
        return (y - self.W @ (self.S @ (self.U.T @ y))).astype(b.dtype, copy=False)


def coarse_solve_bytes(inverse):
    """Bytes one coarsest-level solve reads: the dense inverse, or the
    sparse factors of the host's factorisation (values and row indices)."""
    nbytes = getattr(inverse, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    lu = getattr(inverse, "lu", None)
    if lu is None:
        return 0
    return sum(int(f.nnz) * (f.data.itemsize + f.indices.itemsize) for f in (lu.L, lu.U))
