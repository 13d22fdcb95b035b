"""Baseline solvers with SciPy's conventions: Jacobi, Gauss-Seidel and BiCGSTAB.

Each returns ``(x, info)`` as :func:`bubbleflow.cg` does: ``info`` is
SciPy's integer (0 converged, > 0 the iterations of an unconverged solve,
-10 a breakdown) and carries the solve's
:class:`~bubbleflow.linalg.krylov.record.SolveRecord` as attributes.  They
run on the backend of ``b`` (NumPy or CuPy), in array code written once.

``jacobi``         the (damped) Jacobi iteration ``x += omega D^-1 (b - A x)``
``gauss_seidel``   red-black sweeps on the grid operator, forward (and
                   backward) lexicographic sweeps on a matrix
``bicgstab``       right-preconditioned BiCGSTAB for nonsymmetric matrices
                   (:mod:`bubbleflow.linalg.krylov.bicgstab`)

The stationary iterations compute the true residual ``b - A x`` every
iteration anyway: their stop test ``||b - A x|| <= max(rtol ||b||, atol)``
is made on the device every iteration and read by the host every
``check_every`` iterations (every iteration on NumPy); the iteration that
passes freezes the iterate, so the reported count is exact.  For the
singular Neumann pressure operator (``nullspace="constant"``) ``b`` loses
its mean and the answer is gauged to zero mean, as with :func:`bubbleflow.cg`.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..compute.reductions import reductions
from .krylov.bicgstab import begin_solve, solve_bicgstab
from .krylov.record import SolveInfo, close_record
from .krylov.system import check_tolerances, make_system, real_scalar

__all__ = ["bicgstab", "jacobi", "gauss_seidel", "ORDERINGS"]

#: Orderings of :func:`gauss_seidel`.
ORDERINGS = ("auto", "red-black", "lexicographic")


def bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
             nullspace="auto", check_every=10):
    """Right-preconditioned BiCGSTAB (van der Vorst 1992) for nonsymmetric systems.

    Parameters
    ----------
    A : PoissonOperator, sparse or dense matrix, LinearOperator or callable (n x n)
    b : array (n,)
        Right-hand side (NumPy or CuPy: the solve runs on its backend).
    x0 : array or "Mb", optional
        Starting guess (default zeros).
    rtol, atol : float
        Stop when ``||b - A x|| <= max(rtol ||b||, atol)`` on the true residual.
    maxiter : int, optional
        Default ``10 n``.
    M : str, Preconditioner, matrix or callable, optional
        ``M^-1`` (SciPy's meaning of ``M``); a name such as ``"jacobi"`` builds it.
    callback : callable, optional
        ``callback(xk)`` after every iteration.
    nullspace : {"auto", "constant", None}
        As :func:`bubbleflow.cg`.
    check_every : int
        Iterations between host checks on the device (every one on the host).

    Returns
    -------
    x : array
    info : SolveInfo
        SciPy's integer (0 converged, > 0 iterations done, -10 breakdown)
        with the solve's record as attributes.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow.linalg.baselines import bicgstab
    >>> A = sp.diags([-1.3, 2.0, -0.7], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> x, info = bicgstab(A, np.ones(50), rtol=1e-10, M="jacobi")
    >>> int(info), info.reason, info.residual < 1e-10
    (0, 'converged', True)
    """
    x, record = solve_bicgstab(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                               callback=callback, nullspace=nullspace, check_every=check_every)
    return x, SolveInfo(record)


def jacobi(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, omega=1.0, callback=None,
           nullspace="auto", check_every=10):
    """The (damped) Jacobi iteration ``x += omega D^-1 (b - A x)``.

    Parameters
    ----------
    A : PoissonOperator, sparse or dense matrix (n x n)
        Anything with ``diagonal()``; no zero on the diagonal.
    b, x0, rtol, atol, maxiter, callback, nullspace :
        As :func:`bicgstab` (``x0="Mb"`` starts from ``b``).
    omega : float
        Damping, ``0 < omega`` (converges for ``omega < 2 / lambda_max(D^-1 A)``
        on a symmetric positive definite ``A``).  The Neumann pressure
        operator needs ``omega < 1``: its 5-point graph is bipartite, so
        ``D^-1 A`` has the eigenvalue 2 (the checkerboard mode), on which the
        undamped iteration oscillates for ever.
    check_every : int
        Iterations between host reads of the stop test on the device
        (each is a synchronisation); every iteration on the host.

    Returns
    -------
    x : array
    info : SolveInfo

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow.linalg.baselines import jacobi
    >>> A = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(30, 30), format="csr")
    >>> x, info = jacobi(A, np.ones(30), rtol=1e-8)
    >>> int(info), info.iterations, info.residual <= 1e-8
    (0, 27, True)
    """
    omega = _positive(omega, "omega", "jacobi")

    def build(system):
        scale = omega / _diagonal(system, "jacobi")
        # (Multiplied by 0 or 1 on the device: a converged solve stays put.)
        return lambda x, r, live: _axpy(x, live, scale * r)

    return _stationary("jacobi", "jacobi", build, A, b, x0, rtol, atol, maxiter, callback,
                       nullspace, check_every)


def gauss_seidel(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, ordering="auto",
                 symmetric=False, callback=None, nullspace="auto", check_every=10):
    """Gauss-Seidel sweeps: red-black on the grid operator, lexicographic on a matrix.

    Parameters
    ----------
    A : PoissonOperator, sparse or dense matrix (n x n)
        No zero on the diagonal.
    b, x0, rtol, atol, maxiter, callback, nullspace :
        As :func:`bicgstab` (``x0="Mb"`` starts from ``b``).
    ordering : {"auto", "red-black", "lexicographic"}
        ``"red-black"`` (the grid operator only): cells coloured by the parity
        of ``i + j``; the 5-point stencil couples only opposite colours, so
        each half-sweep is a Jacobi update of one colour, in array code.
        ``"lexicographic"``: the forward sweep ``x += (D + L)^-1 (b - A x)``
        by a sparse triangular solve (SciPy's or CuPy's
        ``spsolve_triangular``); the grid operator is then taken as its
        sparse matrix.  ``"auto"``: red-black for the grid operator,
        lexicographic otherwise.
    symmetric : bool
        Add the backward sweep (``x += (D + U)^-1 (b - A x)``; red-black:
        the colours in reverse order): symmetric Gauss-Seidel.
    check_every : int
        As :func:`jacobi`.

    Returns
    -------
    x : array
    info : SolveInfo

    Examples
    --------
    >>> import numpy as np
    >>> from bubbleflow import bubbly_column
    >>> from bubbleflow.linalg.baselines import gauss_seidel
    >>> A, b, phi = bubbly_column(8, 10.0)
    >>> x, info = gauss_seidel(A, b, rtol=1e-8)       # red-black: A is the grid operator
    >>> int(info), info.residual <= 1e-8, abs(float(x.mean())) < 1e-12
    (0, True, True)
    """
    if ordering not in ORDERINGS:
        raise ValueError(f"gauss_seidel: ordering={ordering!r}; expected "
                         + ", ".join(repr(o) for o in ORDERINGS))
    grid = hasattr(A, "grid_shape") and hasattr(A, "matvec")
    if ordering == "auto":
        ordering = "red-black" if grid else "lexicographic"
    if ordering == "red-black" and not grid:
        raise ValueError(f"gauss_seidel: ordering='red-black' needs the 5-point grid operator "
                         f"(bubbleflow.PoissonOperator); got {type(A).__name__}: use "
                         "ordering='lexicographic'")

    def build(system):
        d = _diagonal(system, "gauss_seidel")
        if ordering == "red-black":
            return _red_black(system, A.grid_shape, d, symmetric)
        return _lexicographic(system, A, d, symmetric)

    method = "gauss_seidel_" + ordering.replace("-", "_") + ("_symmetric" if symmetric else "")
    return _stationary("gauss_seidel", method, build, A, b, x0, rtol, atol, maxiter, callback,
                       nullspace, check_every)


# ----------------------------------------------------------------- the sweeps
def _axpy(x, live, y):
    """``x += live y`` in place (``live`` a 0-d 0/1 of the device)."""
    x += live * y


def _red_black(system, shape, d, symmetric):
    """``step(x, r, live)``: one red-black sweep from ``x`` and its residual ``r``."""
    xp, b, matvec = system.backend.xp, system.b, system.matvec
    parity = sum(xp.indices(shape)).ravel() % 2
    inv = 1.0 / d
    red = xp.where(parity == 0, inv, 0.0).astype(b.dtype, copy=False)
    black = xp.where(parity == 1, inv, 0.0).astype(b.dtype, copy=False)
    # Forward: red, black; backward: black, red (two black updates in a row
    # are one: the second sees a zero black residual).
    colours = (red, black, red) if symmetric else (red, black)

    def step(x, r, live):
        for k, colour in enumerate(colours):
            if k:
                r = b - matvec(x)
            _axpy(x, live, colour * r)
    return step


def _lexicographic(system, A, d, symmetric):
    """``step(x, r, live)``: a forward (and backward) lexicographic sweep."""
    backend, b, matvec = system.backend, system.b, system.matvec
    sparse = backend.sparse
    if hasattr(A, "to_backend_sparse"):
        C = A.to_backend_sparse()
    elif sparse.issparse(A):
        C = A
    else:
        C = sparse.csr_matrix(backend.xp.asarray(A))
    # The rows scaled by D^-1 once: the triangles have a unit diagonal, which
    # spares the triangular solve its own scaling at every sweep.
    inv = 1.0 / d
    scaled = sparse.diags(inv) @ C
    triangles = [(sparse.tril(scaled, format="csr"), True)]
    if symmetric:
        triangles.append((sparse.triu(scaled, format="csr"), False))
    solve = backend.sparse_linalg.spsolve_triangular

    def step(x, r, live):
        for k, (T, lower) in enumerate(triangles):
            if k:
                r = b - matvec(x)
            _axpy(x, live, solve(T, inv * r, lower=lower, unit_diagonal=True))
    return step


def _diagonal(system, name):
    """The diagonal of ``A`` on the solve's backend (ValueError without one,
    or with zeros on it)."""
    A, xp = system.A, system.backend.xp
    if not hasattr(A, "diagonal"):
        raise ValueError(f"{name}: needs the diagonal of A, and a {type(A).__name__} has none: "
                         "pass the grid operator, a sparse matrix or a dense array")
    d = xp.asarray(A.diagonal()).ravel().astype(system.b.dtype, copy=False)
    zeros = int((d == 0).sum())
    if zeros:
        raise ValueError(f"{name}: A has {zeros} zero diagonal "
                         f"entr{'y' if zeros == 1 else 'ies'}: the iteration divides by them")
    return d


def _positive(value, key, name):
    number = real_scalar(value)
    if number is None or not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name}: {key}={value!r}: expected a real, finite, positive number")
    return number


# -------------------------------------------------------------- the iteration
def _stationary(name, method, build, A, b, x0, rtol, atol, maxiter, callback, nullspace,
                check_every):
    """The loop of a stationary iteration: ``(x, SolveInfo)``; ``method``
    names it in the record (``name`` in messages).

    ``build(system)`` gives ``step(x, r, live)``, which updates ``x`` in
    place from its residual ``r`` (``live``: 1, or 0 once converged).
    """
    rtol, atol, maxiter = check_tolerances(rtol, atol, maxiter, name)
    system, record = make_system(A, b, None, None, "adef2", nullspace, maxiter, check_every,
                                 callback, dict(method=method, rtol=rtol), x0=x0)
    t_setup = time.perf_counter()
    step = build(system)
    record.setup_seconds += time.perf_counter() - t_setup
    t_solve = time.perf_counter()
    backend, xp, b = system.backend, system.backend.xp, system.b
    _, norm = reductions(backend, b.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x, r, bnorm, rn0 = begin_solve(system, record, rtol, atol, norm)
        if bnorm == 0.0:
            close_record(record, backend, t_solve, 0, 0.0, "converged", np.zeros(1))
            return xp.zeros_like(b), SolveInfo(record)
        tol = max(rtol * bnorm, atol)
        hist = xp.zeros(system.maxiter + 1, dtype=np.float64)
        hist[0] = rn0 / bnorm
        it, reason, (xf, rtn) = _sweeps(system, step, x, r, hist, rn0 / bnorm, bnorm, tol, norm,
                                        record, callback)
    history = backend.to_host(hist[: it + 1]).copy()
    close_record(record, backend, t_solve, it, rtn / bnorm, reason, history)
    return xf, SolveInfo(record)


def _sweeps(system, step, x, r, hist, h0, bnorm, tol, norm, record, callback):
    """Sweeps and host checks: ``(iterations, reason, (x, ||b - A x||))``."""
    backend, xp, b, matvec = system.backend, system.backend.xp, system.b, system.matvec
    gauge, maxiter, every = system.nullspace.gauge, system.maxiter, system.check_every
    tol_rel = tol / bnorm
    count = xp.zeros((), dtype=np.int64)          # sweeps that moved the iterate
    done = xp.zeros((), dtype=bool)
    h, it, passed = h0, 0, h0 <= tol_rel
    while True:
        if passed:
            # The answer is the gauged iterate: confirm its residual (equal
            # up to rounding: A 1 = 0), else sweep on from it.
            xf = gauge(x)
            rt = b - matvec(xf)
            rtn = float(norm(rt))
            record.true_residual_checks.append((it, rtn / bnorm))
            if rtn <= tol or not math.isfinite(rtn):
                return it, ("converged" if rtn <= tol else "non-finite"), (xf, rtn)
            x[...], r = xf, rt
            hist[it] = rtn / bnorm
            done[...] = False
        elif not math.isfinite(h):
            return it, "non-finite", (gauge(x), h * bnorm)
        if it >= maxiter:
            xf = gauge(x)
            return it, "maxiter", (xf, float(norm(b - matvec(xf))))
        for _ in range(min(every - it % every, maxiter - it)):
            live = ~done
            step(x, r, live.astype(x.dtype))
            r = b - matvec(x)
            count += live
            it += 1
            current = norm(r) / bnorm
            hist[it] = current
            done |= current <= tol_rel
            if callback is not None:
                callback(x)
        values = backend.to_host_many([count, current, done])
        it, h, passed = int(values[0].item()), float(values[1].item()), bool(values[2].item())
