"""The SciPy-style solver functions: :func:`cg` (= :func:`pcg`) and :func:`dpcg`.

Each runs the one Krylov loop (:func:`bubbleflow.linalg.krylov.solve`) with
the engine its ``engine`` argument selects (:mod:`bubbleflow.linalg.engines`):
the selection lives here, with the caller, so that the loop never imports an
engine.
"""
from __future__ import annotations

from .engines import selector
from .krylov import solve
from .krylov.record import SolveInfo

__all__ = ["cg", "pcg", "dpcg"]


def _method_of(M):
    """``(method, M)``: ``cg`` without a preconditioner (``"none"`` too)."""
    if isinstance(M, str) and M == "none":
        M = None
    return ("cg" if M is None else "pcg"), M


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
       residuals=None, check_every=10, nullspace="auto", engine="auto"):
    """(Preconditioned) conjugate gradients.

    Parameters
    ----------
    A : PoissonOperator, sparse matrix or LinearOperator (n x n)
        Symmetric positive (semi-)definite.
    b : array (n,)
        Right-hand side (NumPy or CuPy: the solve runs on its backend).
    x0 : array or "Mb", optional
        Starting guess (default zeros; ``"Mb"``: ``M^-1 b``).
    rtol, atol : float
        Stop when ``||b - A x|| <= max(rtol ||b||, atol)`` on the true residual.
    maxiter : int, optional
        Default ``10 n``.
    M : str, Preconditioner, matrix or callable, optional
        ``M^-1`` (SciPy's meaning of ``M``); a name such as ``"jacobi"`` builds it.
    callback : callable, optional
        ``callback(xk)`` after every iteration.
    residuals : list, optional
        Filled with ``||r_k||`` for ``k = 0 .. iterations`` (PyAMG's
        argument): the recursive residual's norm, the start's and, at a
        restart, the true one.
    check_every : int
        Iterations between host-side convergence checks.  The fused GPU
        engine tests the tolerance on the device every iteration; its host
        checks (breakdown, divergence, stagnation) are spaced out to up to
        ``16 * check_every`` while the residual falls steadily.
    nullspace : {"auto", "constant", None}
        ``"constant"``: singular with constants in the null space (remove the
        mean of ``b``, return the zero-mean answer).  ``"auto"`` takes it from
        ``A.nullspace`` (set by the pressure operator).
    engine : {"auto", "generic", "fused"}
        ``"auto"`` runs the fused GPU iteration (:mod:`bubbleflow.linalg.fused.engine`)
        where it applies (CuPy, float64, grid operator, a fused or grid
        preconditioner, A-DEF2) and the generic backend loop otherwise.

    Returns
    -------
    x : array (n,)
    info : SolveInfo
        SciPy's integer: 0 converged; > 0 not converged (``maxiter``, or
        ``stagnation`` at the attainable accuracy), the iterations done;
        -10 a breakdown.  It carries the :class:`SolveRecord`: ``info.converged``,
        ``info.iterations``, ``info.residual`` (the TRUE relative residual of
        ``x``), ``info.residual_history``, ``info.summary()``, ...

    Notes
    -----
    Differences from SciPy's ``cg`` are deliberate and listed in
    docs/howto/python_api.md: the stop is confirmed on the
    true residual; an unconverged solve returns its best iterate; complex
    input is refused; a singular operator's incompatible ``b`` is projected
    with a warning.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow import cg
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> x, info = cg(A, np.ones(50), rtol=1e-10, M="jacobi")
    >>> info == 0, info.converged, info.residual < 1e-10
    (True, True, True)
    """
    method, M = _method_of(M)
    select = selector(engine)
    x, record = solve(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M, callback=callback,
                      check_every=check_every, nullspace=nullspace, method=method, select=select)
    return x, _info(record, residuals)


def _info(record, residuals):
    """The :class:`SolveInfo` of ``record``; ``residuals`` (a list) filled."""
    if residuals is not None:
        residuals[:] = [float(h) * record.rhs_norm for h in record.residual_history]
    return SolveInfo(record)


pcg = cg


def dpcg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
         residuals=None, deflation, variant="adef2", check_every=10, nullspace="auto",
         engine="auto"):
    """Deflated preconditioned conjugate gradients.

    Parameters are those of :func:`cg`, plus

    deflation : Deflation, int array, float array (n, k) or sparse matrix (n x k)
        The deflation space (:func:`bubbleflow.make_deflation`), one label
        per unknown (unknowns with equal labels share a vector), or the
        vectors ``Z`` themselves, for any operator (a matrix, a
        LinearOperator or a callable: no grid needed).
    variant : {"adef2", "def1"}
        A-DEF2 (default, robust) or DEF1 (Gupta 2010, Algorithm 8).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow import dpcg
    >>> A = sp.diags([-1.0, 2.01, -1.0], [-1, 0, 1], shape=(64, 64), format="csr")
    >>> labels = np.arange(64) // 8            # eight subdomains of eight unknowns
    >>> x, info = dpcg(A, np.ones(64), rtol=1e-10, M="jacobi", deflation=labels)
    >>> int(info)
    0
    """
    if deflation is None:
        raise ValueError("dpcg needs a deflation space; use cg for no deflation")
    _, M = _method_of(M)
    select = selector(engine)
    x, record = solve(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M, callback=callback,
                      deflation=deflation, variant=variant, check_every=check_every,
                      nullspace=nullspace, method="dpcg", select=select)
    return x, _info(record, residuals)
