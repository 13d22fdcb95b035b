"""Dense inverses of symmetric positive definite matrices, on the backend.

The coarse solve of deflation (:class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver`)
only multiplies by stored inverses, so that a solve is free of triangular
solves and host synchronisations.  This module forms them: the inverse of
one SPD matrix by Cholesky (LAPACK on the host, cuSOLVER on the GPU), the
pseudo-inverse of a singular coarse matrix from its grounded block
(:func:`dense_pseudo_inverse`, :func:`grounded_inverse`), and the inverses of
a batch of small SPD matrices (:func:`batched_spd_inverse`; on the GPU
Gauss-Jordan elimination in shared memory, :func:`gauss_jordan_inverse` its
NumPy reference).  On the GPU a failed factorisation is reported through
flags on the device (``spd_inverse_deferred``, ``dense_pseudo_inverse``),
read with the caller's other checks; the host raises at once.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ...compute import cuda
from ...compute.backend import backend_of
from ...compute.blas import single_threaded
from ...compute.truth import all_finite
from ...compute.twins import twin

__all__ = ["spd_inverse", "spd_inverse_deferred", "dense_pseudo_inverse", "grounded_inverse",
           "batched_spd_inverse", "gauss_jordan_inverse", "linalg_errors", "not_spd",
           "raise_failed_inverses"]


@twin
def linalg_errors(backend):
    """A context in which a failed factorisation raises (NumPy does)."""
    return contextlib.nullcontext()


@linalg_errors.register("cupy")
def _linalg_errors_cupy(backend):
    import cupyx

    return cupyx.errstate(linalg="raise")      # CuPy only checks its info flags when asked


def not_spd(n, exc):
    """The error of a coarse matrix (``n x n``) that is not positive
    definite after grounding; ``exc`` says why."""
    return np.linalg.LinAlgError(f"coarse matrix ({n} x {n}) is not positive definite "
                                 f"after grounding: {exc}")


def raise_failed_inverses(flags, values=None):
    """Raise ``numpy.linalg.LinAlgError`` for the first of the deferred
    checks ``flags`` (``(flag, order)`` pairs of :func:`spd_inverse_deferred`;
    each flag ``[potrf, potrs, nonfinite]`` on the device) that says an
    inverse failed: a matrix not positive definite, or an inverse that is
    not finite.  ``values``: the flags' host values, read now (one
    transfer) when None."""
    if not flags:
        return
    if values is None:
        values = backend_of(flags[0][0]).to_host_many([f for f, _ in flags])
    for (_, size), value in zip(flags, values):
        potrf, potrs, nonfinite = (int(v) for v in np.asarray(value).ravel()[:3])
        for routine, info in (("potrf", potrf), ("potrs", potrs)):
            if info != 0:
                raise not_spd(size, np.linalg.LinAlgError(
                    f"Error reported by {routine} in cuSOLVER. devInfo = {info}. "
                    f"Please refer to the cuSOLVER documentation."))
        if nonfinite:
            raise np.linalg.LinAlgError(
                f"coarse matrix ({size} x {size}): the inverse is not finite")


@twin
def _unsymmetrised_inverse(backend, A):
    """The inverse of the SPD backend matrix ``A`` by Cholesky (the host:
    LAPACK's ``potrf`` and ``potri``, the lower triangle mirrored; its CuPy
    twin is :func:`_posv_inverse`)."""
    from scipy.linalg import lapack

    n = A.shape[0]
    # Small orders on one BLAS thread (compute/blas.py: threads that wait
    # for each other on a busy small machine cost far more than they share).
    with single_threaded(n):
        factor, info = lapack.dpotrf(A, lower=True, clean=False)
        if info > 0:
            raise not_spd(n, f"{info}-th leading minor not positive definite")
        if info < 0:
            raise ValueError(f"potrf: illegal argument {-info}")
        inv, info = lapack.dpotri(factor, lower=True)
        if info != 0:
            raise not_spd(n, f"potri info {info}")
    lower = np.tril(inv)
    lower += np.tril(inv, -1).T
    return lower


@_unsymmetrised_inverse.register("cupy")
def _posv_inverse(backend, A):
    """cuSOLVER's ``posv`` with the identity (the factorisation and two
    triangular solves: faster than Cholesky, a triangular inverse and a
    product; docs/performance_records.md); a failed factorisation raises."""
    import cupyx
    from cupyx import lapack

    n = A.shape[0]
    with cupyx.errstate(linalg="raise"):
        try:
            return lapack.posv(A, backend.xp.eye(n, dtype=A.dtype))
        except np.linalg.LinAlgError as exc:
            raise not_spd(n, exc) from None


def spd_inverse(backend, A):
    """Symmetric inverse of the SPD backend matrix ``A`` (which may be
    overwritten): :func:`_unsymmetrised_inverse`, then made exactly
    symmetric."""
    n = A.shape[0]
    inv = _unsymmetrised_inverse(backend, A)
    inv += inv.T.copy()
    inv *= 0.5
    if not bool(all_finite(inv)):
        raise np.linalg.LinAlgError(f"coarse matrix ({n} x {n}): the inverse is not finite")
    return inv


@twin
def spd_inverse_deferred(backend, A, overwrite=False):
    """``(inverse, flags)``: :func:`spd_inverse` of the SPD backend matrix
    ``A`` (exactly symmetric; overwritten with ``overwrite``), its failures
    raised now (NumPy: ``flags`` is empty); the CuPy twin
    (:func:`_spd_inverse_cuda`) defers them to
    :meth:`~bubbleflow.linalg.deflation.coarse.CoarseSolver.check`."""
    return spd_inverse(backend, A), []


def _posv_identity(A, overwrite):
    """cuSOLVER's ``potrf`` and ``potrs`` with the identity, as
    ``cupyx.lapack.posv(A, I)`` calls them (the same routines, arguments and
    workspace: the same bits), without its host check of ``devInfo``:
    ``(X, info)``, ``X`` column-major, ``info`` int32 ``[potrf, potrs, 0]`` on
    the device.  ``A`` is exactly symmetric, so its row-major array is the
    column-major copy ``posv`` makes; with ``overwrite`` it is factorised in
    place."""
    import cupy
    from cupy_backends.cuda.libs import cublas, cusolver

    n = A.shape[0]
    a = A if overwrite and A.flags.c_contiguous else cupy.array(A, dtype=np.float64, copy=True)
    handle = cupy.cuda.device.get_cusolver_handle()
    cusolver.setStream(handle, cupy.cuda.get_current_stream().ptr)    # (a side stream too)
    uplo = cublas.CUBLAS_FILL_MODE_LOWER
    info = cupy.zeros(3, dtype=np.int32)
    worksize = cusolver.dpotrf_bufferSize(handle, uplo, n, a.data.ptr, n)
    work = cupy.empty(worksize, dtype=np.float64)
    cusolver.dpotrf(handle, uplo, n, a.data.ptr, n, work.data.ptr, worksize, info.data.ptr)
    x = cupy.eye(n, dtype=np.float64)               # symmetric: its own column-major copy
    cusolver.dpotrs(handle, uplo, n, n, a.data.ptr, n, x.data.ptr, n, info.data.ptr + 4)
    return x, info


@cuda.kernel_cache
def _dense_kernel(name):
    return cuda.function(cuda.source(__name__, "coarse_dense.cu"), name,
                         options=("-std=c++14", "--fmad=false"))


def _blocks(count, threads=256):
    return (max(1, -(-int(count) // threads)),)


@spd_inverse_deferred.register("cupy")
def _spd_inverse_cuda(backend, A, overwrite=False):
    n = A.shape[0]
    if A.dtype != np.float64 or A.ndim != 2 or n == 0:
        return NotImplemented
    x, info = _posv_identity(A, overwrite)
    inv = backend.xp.empty((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_inverse")(_blocks(n * n), (256,),
                                       (x, np.int32(n), np.int32(n), inv, info[2:]))
    return inv, [(info, n)]


@twin
def dense_pseudo_inverse(backend, E_backend, n, singular):
    """``(K, flags)`` of the dense mode from ``E`` on the backend (exactly
    symmetric, canonical CSR): ``K = E^+`` (singular: grounded, then both
    projections) or ``E^-1``.  The array code raises its failures now
    (``flags`` empty); the CuPy twin (:func:`_dense_pseudo_inverse_cuda`, a few
    kernels around cuSOLVER, equal bit for bit) defers them."""
    xp = backend.xp
    k = E_backend.shape[0]
    Md = E_backend.toarray()[:n, :n]
    Md += Md.T.copy()
    Md *= 0.5
    Minv = spd_inverse(backend, xp.ascontiguousarray(Md))
    del Md
    return (grounded_inverse(Minv, k, xp) if singular else Minv), []


def grounded_inverse(Minv, k, xp):
    """``P K P`` (``k x k``, exactly symmetric) for a singular ``E`` from the
    inverse ``Minv`` of its grounded leading block: the pseudo-inverse the
    deflation applies."""
    n = Minv.shape[0]
    K = xp.zeros((k, k), dtype=np.float64)
    K[:n, :n] = Minv
    c = K.mean(axis=1)                 # P K P, K symmetric
    K -= c[:, None]
    K -= c[None, :]
    K += c.mean()
    K += K.T.copy()
    K *= 0.5
    return K


@dense_pseudo_inverse.register("cupy")
def _dense_pseudo_inverse_cuda(backend, E_backend, n, singular):
    xp = backend.xp
    k = E_backend.shape[0]
    i32 = np.int32
    D = xp.zeros((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_scatter")(_blocks(n), (256,),
                                       (E_backend.indptr, E_backend.indices, E_backend.data,
                                        i32(n), D))
    M = xp.empty((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_symmetric")(_blocks(n * n), (256,), (D, i32(n), M))
    del D
    x, info = _posv_identity(M, overwrite=True)
    del M
    K = xp.empty((k, k), dtype=np.float64)
    _dense_kernel("bf_coarse_inverse")(_blocks(k * k), (256,), (x, i32(n), i32(k), K, info[2:]))
    del x
    if singular:
        c = K.mean(axis=1)             # as the array code: its reduction, its order
        cm = c.mean()
        _dense_kernel("bf_coarse_project")(_blocks(k * k), (256,), (K, c, cm, i32(k)))
    return K, [(info, n)]


def gauss_jordan_inverse(B):
    """Inverses of a batch of SPD matrices ``(G, m, m)`` by Gauss-Jordan
    elimination without pivoting (NumPy): the reference of the GPU kernel.

    Pivots of an SPD matrix are the diagonals of its successive Schur
    complements, all positive: no pivoting is needed.
    """
    A = np.array(B, dtype=np.float64, copy=True)
    m = A.shape[-1]
    for k in range(m):
        piv = 1.0 / A[:, k, k]
        col = A[:, :, k].copy()
        row = A[:, k, :] * piv[:, None]
        A -= col[:, :, None] * row[:, None, :]
        A[:, k, :] = row
        A[:, :, k] = -col * piv[:, None]
        A[:, k, k] = piv
    return A


@cuda.kernel_cache
def _gj_kernel():
    return cuda.raw_kernel(cuda.source(__name__, "gauss_jordan.cu"), "bf_gauss_jordan")


@twin
def batched_spd_inverse(backend, B, overwrite=False):
    """Inverses of the SPD batch ``B`` (G, m, m): a new array, or ``B``
    itself overwritten with ``overwrite`` (on the GPU path).

    The library's batched inverse (on the host on one BLAS thread for
    small orders: :func:`single_threaded`); on the GPU
    (:func:`_gauss_jordan_cuda`) one thread block inverts one matrix in
    shared memory.
    """
    with single_threaded(B.shape[-1]):
        return backend.xp.linalg.inv(B)


@batched_spd_inverse.register("cupy")
def _gauss_jordan_cuda(backend, B, overwrite=False):
    """One thread block per matrix, in shared memory (:func:`gauss_jordan_inverse`
    is its NumPy twin): cuBLAS' batched LU is built for tiny matrices and took
    milliseconds here.  Matrices too big for shared memory: ``NotImplemented``
    (the library's batched inverse)."""
    import cupy

    xp = backend.xp
    G, m, _ = B.shape
    if not (G and m):
        return NotImplemented
    need = 8 * (m * m + 2 * m)
    limit = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    if need > limit:
        return NotImplemented
    kern = _gj_kernel()
    if need > 48 * 1024:
        kern.max_dynamic_shared_size_bytes = need
    out = xp.ascontiguousarray(B, dtype=xp.float64)
    if out is B and not overwrite:
        out = B.copy()
    kern((G,), (1024,), (out, np.int32(m)), shared_mem=need)
    return out
