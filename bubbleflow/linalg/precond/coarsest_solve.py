"""The coarsest multigrid level's solve: a dense inverse of ``A + c 1 1^T``
on the device (and on the host up to :data:`HOST_DENSE_CELLS` cells), a
sparse factorisation on the host above that.

``A`` is singular (Neumann walls); ``c = mean(diag) / n`` makes it
positive definite, and for a compatible right-hand side (zero sum, which
every level's residual keeps) the solve gives the solution of ``A`` with
zero mean.  The set-up recomputes it at every refresh of the hierarchy
(:meth:`.multigrid.Multigrid.refresh`): the dense matrix in one launch on
the GPU (:func:`shifted_dense`'s CUDA twin), its inverse by Cholesky
(:func:`.dense_inverses.spd_inverse_deferred`: on the GPU without a host
synchronisation, a failure reported through flags the solver reads with
its other checks).
"""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...compute.transfer import on_device
from ...compute.twins import twin
from ...mesh.grid import face_sides
from ...operators.poisson import centre_from_couplings, faces_to_scipy
from ..deflation.dense_inverses import spd_inverse_deferred
from . import multigrid_setup_cuda

__all__ = ["HOST_DENSE_CELLS", "BANDED_WORK", "coarse_solve", "coarsest_matrix", "coarsest_shift",
           "shifted_dense", "dense_inverse", "HostCoarseSolve", "coarse_solve_bytes"]

#: On the host, coarsest levels larger than this are solved by a sparse
#: factorisation (:class:`HostCoarseSolve`) rather than a dense inverse.
HOST_DENSE_CELLS = 256


def coarse_solve(couplings, shape, dtype):
    """The coarsest level's solve from its float64 face ``couplings`` on an
    array of ``shape``: ``(solve, flags)``, the solve :func:`dense_inverse`
    in ``dtype`` (or on the host above :data:`HOST_DENSE_CELLS` cells a
    :class:`HostCoarseSolve`) and the device flags of its deferred checks
    (``(flag, order)`` pairs for :func:`.dense_inverses.raise_failed_inverses`;
    none where the host checked at once)."""
    backend = backend_of(couplings[0])
    if not on_device(backend) and int(np.prod(shape)) > HOST_DENSE_CELLS:
        return HostCoarseSolve(couplings, shape), []
    inverse, flags = dense_inverse(couplings, shape)
    return inverse.astype(dtype, copy=False), flags


def face_pairs(couplings, shape, xp):
    """``(p, q, coupling)`` per axis: the flat indices of the two cells of
    every interior face and the face's coupling."""
    index = xp.arange(int(np.prod(shape))).reshape(shape)
    for axis, c in enumerate(couplings):
        lower, upper = face_sides(len(shape), axis)
        yield index[lower].ravel(), index[upper].ravel(), c.ravel()


def coarsest_shift(centre, xp):
    """``c`` of ``A + c 1 1^T``: the mean of the diagonal ``centre`` over its
    cells (a device scalar); a level without couplings (a single cell)
    takes the identity's scale."""
    return xp.where(centre.mean() > 0, centre.mean(), 1.0) / centre.size


def coarsest_matrix(couplings, shape, xp):
    """The coarsest level's dense ``A + c 1 1^T`` (``c``:
    :func:`coarsest_shift`), positive definite: for a compatible right-hand
    side its solution is the one of ``A`` with zero mean.  Exactly
    symmetric."""
    C = centre_from_couplings(couplings, xp).ravel()
    return shifted_dense(couplings, shape, C, coarsest_shift(C, xp))


@twin
def shifted_dense(couplings, shape, centre, shift):
    """The dense ``A + shift 1 1^T`` of the operator of face ``couplings``
    (x first) on an array of ``shape``, its diagonal ``centre`` (flat) given;
    ``shift`` a device scalar."""
    xp = backend_of(centre).xp
    n = int(np.prod(shape))
    A = xp.zeros((n, n), dtype=centre.dtype)
    for p, q, c in face_pairs(couplings, shape, xp):
        A[p, q] = -c
        A[q, p] = -c
    A[xp.arange(n), xp.arange(n)] = centre
    A += shift
    return A


def dense_inverse(couplings, shape):
    """``(inverse, flags)``: the symmetric float64 inverse of
    :func:`coarsest_matrix` by Cholesky, and its deferred checks'
    ``(flag, order)`` pairs (:func:`coarse_solve`)."""
    backend = backend_of(couplings[0])
    return spd_inverse_deferred(backend, coarsest_matrix(couplings, shape, backend.xp),
                                overwrite=True)


#: The host factorises the grounded coarsest matrix as a band (LAPACK's
#: banded Cholesky, about ``n b^2`` operations for ``n`` cells of bandwidth
#: ``b``) where ``n b^2`` is at most this, by a sparse LU above it.
BANDED_WORK = 2 ** 25


class _BandedCholesky:
    """The Cholesky factor of an SPD sparse matrix of bandwidth ``band``
    (entries at most ``band`` off the diagonal), LAPACK's banded storage."""

    def __init__(self, matrix, band):
        from scipy.linalg import cholesky_banded

        n = matrix.shape[0]
        lower = np.zeros((band + 1, n))
        for k in range(band + 1):
            lower[k, :n - k] = matrix.diagonal(-k)
        self.factor = cholesky_banded(lower, lower=True, check_finite=False)
        self.nbytes = self.factor.nbytes

    def solve(self, b):
        from scipy.linalg import cho_solve_banded

        return cho_solve_banded((self.factor, True), b, check_finite=False)


class _SparseLU:
    """SuperLU's factors of a sparse matrix."""

    def __init__(self, matrix):
        from scipy.sparse.linalg import splu

        lu = self.lu = splu(matrix.tocsc())
        self.nbytes = sum(int(f.nnz) * (f.data.itemsize + f.indices.itemsize)
                          for f in (lu.L, lu.U))

    def solve(self, b):
        return self.lu.solve(b)


class HostCoarseSolve:
    """The coarsest level's solve on the host, ``(A + c 1 1^T)^-1 b`` (the
    operator of :func:`dense_inverse`), by a sparse factorisation: the
    grounded ``A_g = A + c e_0 e_0^T`` (positive definite) factorised once,
    as a band where that is cheap (:data:`BANDED_WORK`; the flat index runs
    fastest along the last array axis, so the band is the product of the
    other axes' cells) and by a sparse LU otherwise, and the rank-two rest
    ``c (1 1^T - e_0 e_0^T)`` by Sherman-Morrison-Woodbury.  A dense
    inverse of a few hundred cells costs tens of milliseconds on one core,
    redone at every time step of a flow; this costs a fraction of one."""

    def __init__(self, couplings, shape):
        import scipy.sparse as sp

        n = int(np.prod(shape))
        c = float(coarsest_shift(centre_from_couplings(couplings, np).ravel(), np))
        grounded = (faces_to_scipy(couplings, shape)
                    + sp.csr_matrix(([c], ([0], [0])), shape=(n, n))).tocsr()
        band = int(np.prod(shape[1:]))
        self.factor = (_BandedCholesky(grounded, band) if n * band * band <= BANDED_WORK
                       else _SparseLU(grounded))
        U = np.zeros((n, 2))
        U[:, 0] = 1.0
        U[0, 1] = 1.0
        self.U, self.W = U, self.factor.solve(U)
        self.S = np.linalg.inv(np.diag([1.0 / c, -1.0 / c]) + U.T @ self.W)

    def __matmul__(self, b):
        y = self.factor.solve(np.asarray(b, dtype=np.float64))
        return (y - self.W @ (self.S @ (self.U.T @ y))).astype(b.dtype, copy=False)


def coarse_solve_bytes(inverse):
    """Bytes one coarsest-level solve reads: the dense inverse, or the
    factors of the host's factorisation (the band, or the sparse factors'
    values and row indices)."""
    nbytes = getattr(inverse, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    factor = getattr(inverse, "factor", None)
    return 0 if factor is None else int(factor.nbytes)


# The CUDA variant (multigrid_setup_cuda.py): the dense matrix in one launch.
shifted_dense.register("cupy")(multigrid_setup_cuda.shifted_dense)
