"""Conjugate-gradient solvers: CG, PCG and deflated PCG (DEF1 and A-DEF2).

All solvers follow SciPy's conventions::

    x, record = cg(A, b, x0=None, *, rtol=1e-5, atol=0., maxiter=None, M=None, callback=None)
    x, record = dpcg(A, b, x0=None, *, deflation=..., variant="adef2", ...)

``A`` is a :class:`bubbleflow.PoissonOperator`, a SciPy or CuPy sparse
matrix, or anything with ``matvec``; ``M`` a preconditioner name, object,
matrix or callable.  The arrays stay on the backend of ``b`` (NumPy or CuPy).
Instead of SciPy's ``info`` integer they return a :class:`SolveRecord`
(``record.info`` gives SciPy's integer).

Stopping
--------
The iteration stops when the relative residual ``||b - A x|| / ||b||`` is at
most ``rtol`` (or the residual at most ``atol``).  The recursive residual of
CG drifts away from the true one in finite precision, so a pass of the test
is confirmed on the TRUE residual of the returned ``x``.  If that fails the
residual is replaced by the true one and CG restarts; when repeated restarts
no longer improve the true residual the solve stops with reason
``stagnation`` and returns the best ``x`` seen.  The convergence test needs
a host synchronisation, so it runs every ``check_every`` iterations only;
between checks all scalars stay on the device.  The recursive test itself is
made every iteration, on the device: the iteration that reaches the
tolerance freezes the iterate until the check, so the reported count is the
exact first iteration below it, whatever ``check_every``.

Deflation variants (Tang, Nabben, Vuik, Erlangga, J. Sci. Comput. 2009)
-----------------------------------------------------------------------
``def1``   the seed's Algorithm 8: CG on ``P A x^ = P b`` with
           ``P = I - A Q``, ``Q = Z E^-1 Z^T``; final ``x = Q b + P^T x^``.
``adef2``  preconditioner ``P^T M^-1 + Q`` with the start ``x0 = Q b + P^T x``;
           the iterate is the solution itself.  More robust to rounding and
           to inexact coarse solves (default).

Singular systems
----------------
With ``nullspace="constant"`` (automatic for the Neumann pressure operator)
the right-hand side is made compatible by removing its mean, and the answer
is gauged to zero mean.  No matrix entry is altered.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..compute.backend import backend_of

__all__ = ["SolveRecord", "cg", "pcg", "dpcg", "REASONS"]

REASONS = ("converged", "maxiter", "stagnation", "breakdown", "non-finite")


@dataclass
class SolveRecord:
    """What happened in one solve.

    Attributes
    ----------
    iterations : int
        Krylov iterations done.
    residual : float
        Final TRUE relative residual ``||b - A x|| / ||b||`` of the returned x.
    converged : bool
    reason : str
        One of ``converged``, ``maxiter``, ``stagnation``, ``breakdown``,
        ``non-finite``.
    residual_history : ndarray
        Relative recursive residual after each iteration (entry 0: start).
    true_residual_checks : list of (iteration, relative true residual)
    setup_seconds, solve_seconds : float
    engine : str
        ``generic`` (the backend loop) or ``fused`` (:mod:`bubbleflow.linalg.fused`).
    bytes_per_iteration : int
        Device traffic of one fused iteration (our count; 0 for generic).
    precision : str
        ``float64``, or ``float32`` for the mixed-precision refinement of
        :class:`bubbleflow.PressureSolver` (float32 inner solves, float64
        residuals): ``iterations`` then counts all inner iterations,
        ``residual_history`` is theirs end to end, in units of ``||b||``,
        and ``true_residual_checks`` holds the float64 checks.
    refinements : int
        Float32 corrections made (0 in float64).
    inner_iterations : list of int
        Iterations of each float32 correction.
    """

    iterations: int = 0
    residual: float = math.nan
    converged: bool = False
    reason: str = "maxiter"
    residual_history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    true_residual_checks: list = field(default_factory=list)
    setup_seconds: float = 0.0
    solve_seconds: float = 0.0
    method: str = "cg"
    preconditioner: str = "none"
    deflation: str = "none"
    deflation_vectors: int = 0
    variant: str = ""
    rtol: float = 0.0
    rhs_mean_removed: float = 0.0
    engine: str = "generic"
    bytes_per_iteration: int = 0
    precision: str = "float64"
    refinements: int = 0
    inner_iterations: list = field(default_factory=list)

    @property
    def info(self) -> int:
        """SciPy's convention: 0 converged, >0 iterations without convergence, <0 breakdown."""
        if self.converged:
            return 0
        if self.reason in ("maxiter", "stagnation"):
            return max(self.iterations, 1)
        return -1

    def summary(self) -> str:
        status = "converged" if self.converged else f"FAILED ({self.reason})"
        return (f"{status}: {self.iterations} iterations, true relative residual "
                f"{self.residual:.3e}, setup {self.setup_seconds:.3f} s, solve {self.solve_seconds:.3f} s")


# --------------------------------------------------------------------------- helpers
def _matvec_of(A):
    if hasattr(A, "matvec"):
        return A.matvec
    if callable(A) and not hasattr(A, "shape"):
        return A
    return lambda x: A @ x


def _preconditioner_of(M, A):
    """A function r -> M^-1 r, a name for the record, and the object (or None)."""
    if M is None:
        return (lambda r: r), "none", None
    if isinstance(M, str):
        from .precond import make_preconditioner

        P = make_preconditioner(M, A)
        return P.apply, M, P
    if hasattr(M, "apply"):
        return M.apply, getattr(M, "name", type(M).__name__), M
    if hasattr(M, "matvec"):
        return M.matvec, getattr(M, "name", type(M).__name__), None
    if callable(M) and not hasattr(M, "shape"):
        return M, getattr(M, "__name__", "callable"), None
    return (lambda r: M @ r), type(M).__name__, None


def _sparse_dot(M, v):
    """``M @ v``; for a CuPy CSR matrix in a fixed order of summation
    (:func:`bubbleflow.compute.kernels.csr_matvec`: CuPy's product varies from run
    to run in the last bits)."""
    if type(M).__module__.startswith("cupyx") and getattr(M, "format", None) == "csr":
        from ..compute.kernels import csr_matvec

        return csr_matvec(M, v)
    return M @ v


def _norm_inf(A):
    """Largest absolute row sum of ``A`` when it is cheap to get, else None."""
    if hasattr(A, "norm_inf"):
        return float(A.norm_inf())
    try:
        if hasattr(A, "tocsr") or type(A).__module__.startswith(("scipy.sparse", "cupyx")):
            return float(abs(A).sum(axis=1).max())
        if hasattr(A, "ndim") and A.ndim == 2:
            return float(abs(A).sum(axis=1).max())
    except Exception:
        return None
    return None


def _reductions(backend, dtype=np.float64):
    """Inner product and 2-norm for the Krylov loop.

    On NumPy a threaded BLAS ``dot`` on a busy machine wakes sleeping threads
    for every call and can cost milliseconds per reduction on a loaded
    machine (seen: docs/performance.md); ``einsum``'s single-threaded loop
    costs microseconds.  CuPy keeps cuBLAS.

    For float32 vectors the products are accumulated in float64 (the result
    is a float64 scalar): a float32 sum of a million terms loses about 1e-7
    relative, which the CG scalars feel; the vectors are still read once, as
    float32.
    """
    xp = backend.xp
    if np.dtype(dtype) == np.float32:
        dot = _dot32_accumulate64(backend)
    elif backend.name == "numpy":
        def dot(a, b):
            return np.einsum("i,i->", a, b)
    else:
        dot = xp.dot

    def norm(a):
        return xp.sqrt(dot(a, a))

    return dot, norm


_BLOCK = 256          # float32 terms summed before the float64 accumulation (NumPy)


def _dot32_accumulate64(backend):
    """``dot(a, b)`` of float32 vectors with a float64 accumulation.

    NumPy: float32 partial sums over blocks of 256 terms (one ``einsum``
    pass, reading each vector once), added up in float64; ``einsum`` with
    ``dtype=float64`` casts every term and costs two to four times more.
    CuPy: one reduction kernel that reads float32 and adds in double.
    """
    if backend.name == "numpy":
        def dot(a, b):
            m = a.size - a.size % _BLOCK
            s = np.einsum("ij,ij->i", a[:m].reshape(-1, _BLOCK), b[:m].reshape(-1, _BLOCK))
            total = np.add.reduce(s, dtype=np.float64)
            if m < a.size:
                total = total + np.einsum("i,i->", a[m:], b[m:], dtype=np.float64)
            return np.float64(total)
        return dot
    kernel = _cupy_dot32_kernel()

    def dot(a, b):
        return kernel(a, b)
    return dot


_DOT32 = None


def _cupy_dot32_kernel():
    global _DOT32
    if _DOT32 is None:
        import cupy

        # (CuPy names the reduction's operands a and b: the inputs are u, v.)
        _DOT32 = cupy.ReductionKernel("float32 u, float32 v", "float64 s",
                                      "(double)u * (double)v", "a + b", "s = a", "0.0",
                                      "bubbleflow_dot32_acc64")
    return _DOT32


def _nullspace_of(A, nullspace):
    if nullspace == "auto":
        return getattr(A, "nullspace", None)
    if nullspace not in (None, "constant"):
        raise ValueError(f"nullspace={nullspace!r}; expected 'auto', 'constant' or None")
    return nullspace


def _deflation_of(deflation, A):
    from .deflation import Deflation

    if deflation is None or isinstance(deflation, Deflation):
        return deflation
    return Deflation(A, deflation, kind="labels")


# ------------------------------------------------------------------------ the solver
def _solve(A, b, x0, rtol, atol, maxiter, M, callback, deflation, variant, check_every,
           nullspace, method, stagnation_restarts=2, engine="auto", progress=None, confirm=True):
    """The loop behind :func:`cg` and :func:`dpcg` (their parameters), plus

    progress : callable, optional
        ``progress(iteration, relative_residual)`` (a Python int and float) at
        each host check, with the value the returned ``residual_history``
        holds at that iteration; iterations strictly increase.  Unlike
        ``callback`` it adds no synchronisation and changes nothing in the
        iteration: the result is the same bits with or without it.
    confirm : bool
        Confirm a pass of the recursive test on the true residual (default).
        ``False`` accepts the recursive residual as it is (``record.residual``
        is then the recursive one): for inner solves whose caller checks the
        true residual itself, in a higher precision.
    """
    if rtol < 0 or atol < 0:
        raise ValueError(f"rtol={rtol} and atol={atol} must be non-negative")
    if variant not in ("adef2", "def1"):
        raise ValueError(f"variant={variant!r}; expected 'adef2' or 'def1'")
    if engine not in ("auto", "generic", "fused"):
        raise ValueError(f"engine={engine!r}; expected 'auto', 'generic' or 'fused'")
    t_setup = time.perf_counter()
    backend = backend_of(b)
    xp = backend.xp
    matvec = _matvec_of(A)
    prec, prec_name, prec_obj = _preconditioner_of(M, A)
    defl = _deflation_of(deflation, A)
    nullspace = _nullspace_of(A, nullspace)
    # The caller's b is never changed: copied below (with the mean removed).
    b = xp.asarray(b).ravel()
    if not np.issubdtype(b.dtype, np.floating):
        b = b.astype(np.float64)
    n = b.size
    if maxiter is None:
        maxiter = 10 * n
    check_every = max(1, int(check_every))
    if callback is not None:
        check_every = 1          # the callback sees every iteration: none may be a frozen one
    record = SolveRecord(method=method, preconditioner=prec_name, rtol=float(rtol),
                         deflation=getattr(defl, "kind", "none") if defl is not None else "none",
                         deflation_vectors=defl.n_vectors if defl is not None else 0,
                         variant=variant if defl is not None else "")
    if nullspace == "constant":
        mean_b = float(b.mean())
        b = b - mean_b                     # the copy, in the same pass
        record.rhs_mean_removed = mean_b
    else:
        b = b.copy()
    backend.synchronize()
    record.setup_seconds = time.perf_counter() - t_setup

    t_solve = time.perf_counter()
    dot, norm = _reductions(backend, b.dtype)
    bnorm = float(norm(b))
    x = xp.zeros_like(b) if x0 is None else xp.array(x0, dtype=b.dtype, copy=True).ravel()
    if x.shape != b.shape:
        raise ValueError(f"x0 has {x.size} entries; b has {n}")
    if bnorm == 0.0:
        record.residual, record.converged, record.reason = 0.0, True, "converged"
        record.residual_history = np.zeros(1)
        return xp.zeros_like(b), record
    tol = max(float(rtol) * bnorm, float(atol))

    def residual0(x):
        """``b - A x`` for the initial guess (``b`` itself, not a copy, for
        the default zero guess: no product with A)."""
        return b if x0 is None else b - matvec(x)

    # The pieces that differ between CG/PCG, DEF1 and A-DEF2.
    if defl is None:
        def apply_prec(r):
            return prec(r)

        def apply_op(p):
            return matvec(p)

        def start(x):
            r = residual0(x)
            return x, (r.copy() if r is b else r)   # r is updated in place

        def finish(x):
            return x
    elif variant == "adef2":
        def apply_prec(r):                      # y = P^T M^-1 r + Q r
            s = prec(r)
            g = defl.restrict(r) - _sparse_dot(defl.AZT, s)
            return s + defl.prolong(defl.coarse.solve(g))

        def apply_op(p):
            return matvec(p)

        def start(x):                           # x0 = Q b + P^T x = x + Q (b - A x)
            r = residual0(x)
            q = defl.prolong(defl.coarse.solve(defl.restrict(r)))
            x = q if x0 is None else x + q      # (x is zero without x0)
            return x, b - matvec(x)             # = r - A Z y: no A Z needed

        def finish(x):
            return x
    else:
        def apply_prec(r):
            return prec(r)

        # DEF1 needs accurate coarse solves (E y = s to rounding): refine.
        def coarse(s):
            return defl.coarse.solve(s, refine=True)

        def apply_op(p):                        # w = P A p = A p - A Z E^+ Z^T A p
            w = matvec(p)
            return w - _sparse_dot(defl.AZ, coarse(defl.restrict(w)))

        def start(x):                           # r^ = P (b - A x)
            r = residual0(x)
            return x, r - _sparse_dot(defl.AZ, coarse(defl.restrict(r)))

        def finish(x):                          # x = Q b + P^T x^ = x^ + Q (b - A x^)
            return x + defl.prolong(coarse(defl.restrict(b - matvec(x))))

    # Attainable accuracy of the recursion: about eps ||A|| ||x|| (absolute).
    norm_A = _norm_inf(A)
    eps = float(np.finfo(b.dtype).eps)

    def floor_estimate(x):
        if norm_A is None:
            return 0.0
        return eps * norm_A * float(norm(x))

    def verify(candidate):
        """The solution an iterate stands for, gauged, with its true residual."""
        xf = finish(candidate)
        if nullspace == "constant":
            xf = xf - xf.mean()
        rt = b - matvec(xf)
        return xf, rt, float(norm(rt))

    hist = xp.zeros(maxiter + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x, r = start(x)
        hist[0] = norm(r) / bnorm
        fused = None
        if engine != "generic" and callback is None:
            from .fused import fused_engine_for

            fused = fused_engine_for(A, prec_obj, prec_name, defl, variant, b)
            if fused is None and engine == "fused":
                raise ValueError("engine='fused' needs CuPy float64, the grid operator, a "
                                 "preconditioner among none/jacobi/incomplete_poisson_scaled/"
                                 "block_ic, A-DEF2, and tiles that divide the grid")
        if fused is not None:
            # The first preconditioned residual and direction by the engine's
            # own kernels (the generic apply_prec is a dozen library calls).
            fused.begin(x, r, hist, 0, bnorm, tol / bnorm, own=True)
            x, r, p = fused.x, fused.r_current, fused.p
            rz = fused.scal[2]
            # The engine keeps its breakdown flag (read by ``status``); this
            # one only carries the cleared flag into ``load`` at a restart.
            bad = xp.zeros((), dtype=bool)
            status = fused.status()[1:]
        else:
            y = apply_prec(r)
            p = y.copy()
            rz = dot(r, y)
            bad = xp.zeros((), dtype=bool)
            status = None
        # Set on the device when the recursive residual reaches the tolerance:
        # later iterations until the next check leave the iterate as it is, so
        # the count is the exact first iteration below it (no host sync).
        done = xp.zeros((), dtype=bool)
        tol_rel = tol / bnorm
        it = last_check = 0
        best_true, best_x, stalls, restarts = math.inf, None, 0, 0
        # The iterate with the smallest recursive residual so far: near the
        # attainable accuracy rounding can make the recursion grow again, and
        # we then go back to it rather than follow the growth.
        x_rec = x.copy()
        best_rec, last_improvement = float(hist[0]) * bnorm, 0
        reason = None
        final = None                            # (x, true residual norm) when known
        if not math.isfinite(best_rec):
            reason = "non-finite"
            fused = None
        fused_chunk, prev_check = check_every, None
        if fused is not None:
            record.engine = "fused"
            record.bytes_per_iteration = fused.bytes_per_iteration
        # (iteration, relative residual) of the last host check, reported
        # once the check is over: a restart there rewrites its history entry.
        shown = None
        while reason is None:
            if fused is not None or it % check_every == 0 or it >= maxiter:
                if status is not None:
                    # Fused: read by ``status``/``settle`` in one transfer (the
                    # engine stops on the device at the tolerance: no ``done``).
                    h, broke = status
                    status = None
                else:
                    if bool(done):
                        # The tolerance was reached inside the last stretch:
                        # the iterate has been frozen since.  Its iteration.
                        seg = hist[last_check + 1: it + 1] <= tol_rel
                        it = last_check + 1 + int(xp.argmax(seg))
                    h = float(hist[it])         # the one host synchronisation
                    broke = bool(bad)
                rn = h * bnorm
                below = h <= tol_rel            # the device's test, to the bit
                last_check = it
                shown = (it, h)
                if below and not confirm and not broke and math.isfinite(rn):
                    # The caller checks the true residual: accept the recursion.
                    xf = finish(x)
                    if nullspace == "constant":
                        xf = xf - xf.mean()
                    reason, final = "converged", (xf, rn)
                    break
                # Growth of the recursive residual is normal for CG far from
                # the solution; only near the attainable accuracy is it the
                # rounding instability we must not follow.  Near it?  (A
                # reduction and a host sync: asked only when a test needs it.)
                def near_floor(rec=best_rec):
                    return rec <= 10.0 * floor_estimate(x)


                diverged = not math.isfinite(rn) or (rn > 10.0 * best_rec and near_floor())
                if not diverged and not broke and rn < best_rec:
                    if rn < 0.99 * best_rec:
                        last_improvement = it
                    best_rec = rn
                    if not below:               # below: x itself is verified next
                        x_rec[...] = x
                if fused is not None:
                    fused_chunk = _fused_chunk(check_every, h, prev_check, it, tol_rel,
                                               steady=not (restarts or broke or diverged))
                    prev_check = (it, h)
                if below or broke or diverged:
                    candidate = x if (below and not diverged) else x_rec
                    xf, rt, rtn = verify(candidate)
                    record.true_residual_checks.append((it, rtn / bnorm))
                    if not math.isfinite(rtn):
                        reason = "non-finite"
                        break
                    if rtn <= tol:
                        reason, final = "converged", (xf, rtn)
                        break
                    if rtn < best_true:
                        stalls = 0 if rtn < 0.9 * best_true else stalls + 1
                        best_true, best_x = rtn, xf.copy()
                    else:
                        stalls += 1
                    if stalls >= stagnation_restarts:
                        # No progress at all means the method broke down (an
                        # indefinite operator or preconditioner); otherwise we
                        # are at the attainable accuracy.
                        reason = "breakdown" if best_true >= 0.5 * bnorm else "stagnation"
                        break
                    # The recursive residual drifted from the true one: restart
                    # from the checked iterate with its true residual.
                    if candidate is x_rec:
                        x[...] = x_rec
                    r = rt
                    y = apply_prec(r)
                    p = y.copy()
                    rz = dot(r, y)
                    bad[...] = False
                    done[...] = False
                    if fused is not None:
                        fused.load(x, r, p, rz, bad, hist, it, bnorm, tol_rel)
                        x, r, p = fused.x, fused.r_current, fused.p
                    hist[it] = rtn / bnorm
                    shown = (it, rtn / bnorm)
                    best_rec, last_improvement = rtn, it
                    x_rec[...] = x
                    restarts += 1
                if it >= maxiter:
                    reason = "maxiter"
                    break
                # A plateau is stagnation only at the attainable accuracy: far
                # from it CG's residual may stall for long stretches while the
                # error still falls, and maxiter is the only honest limit.
                window = max(100, it // 4) if restarts else max(500, it // 2)
                if it - last_improvement > window and (restarts or near_floor()):
                    reason = "stagnation"
                    break
            if shown is not None and progress is not None:
                progress(*shown)
            shown = None
            if fused is not None:
                count = max(1, min(fused_chunk, maxiter - it))
                if count % 2 and count < maxiter - it:
                    # Even: the buffers' parity, and so the CUDA graphs
                    # captured for it, stay the same (iterations past the
                    # tolerance are no-ops on the device).
                    count += 1
                fused.iterate(count)
                # Stopped on the device at the tolerance?  (One transfer.)
                it, h_dev, broke_dev = fused.settle(it, count)
                status = (h_dev, broke_dev)
                r = fused.r_current
                continue
            w = apply_op(p)
            pw = dot(p, w)
            # A non-positive or non-finite curvature (rounding near the
            # attainable accuracy, or an indefinite operator) freezes the
            # iterate until the next check, which looks at the true residual.
            bad |= ~(pw > 0)
            frozen = bad | done
            # The scalars are float64 (0-d arrays); cast to the vectors' dtype
            # so that float32 updates stay float32 (no-op for float64).
            alpha = xp.where(frozen, 0.0, rz / pw).astype(x.dtype, copy=False)
            x += alpha * p
            r -= alpha * w
            y = apply_prec(r)
            rz_new = dot(r, y)
            bad |= ~(rz_new >= 0)
            beta = xp.where(bad | frozen, 0.0, rz_new / rz).astype(x.dtype, copy=False)
            rz = rz_new
            p *= beta
            p += y
            it += 1
            hist[it] = xp.sqrt(dot(r, r)) / bnorm
            done |= hist[it] <= tol_rel
            if callback is not None:
                callback(finish(x))

        if shown is not None and progress is not None:
            progress(*shown)
        if final is None:
            # Return the best of: the last iterate, the one with the smallest
            # recursive residual, and the best one already checked.
            final = (None, math.inf)
            for candidate in ([x, x_rec] if it > 0 else [x]):
                xf, _, rtn = verify(candidate)
                if rtn < final[1] or final[0] is None:
                    final = (xf, rtn)
            if best_x is not None and best_true < final[1]:
                final = (best_x, best_true)
            if not math.isfinite(final[1]):
                reason = "non-finite"
    xf, rtn = final
    _close_record(record, backend, t_solve, it, rtn / bnorm, reason,
                  backend.to_host(hist[: it + 1]).copy())
    return xf, record


def _close_record(record, backend, t_solve, iterations, residual, reason, history):
    """The outcome of a solve into ``record``, timed after the device is done."""
    backend.synchronize()
    record.solve_seconds = time.perf_counter() - t_solve
    record.iterations = iterations
    record.residual = residual
    record.converged = reason == "converged"
    record.reason = reason
    record.residual_history = history


def _fused_chunk(check_every, h, prev_check, it, tol_rel, steady):
    """Iterations the fused engine runs before the next host check.

    The fused engine tests the tolerance on the device every iteration and
    stops there, so its host checks only watch for breakdown, divergence and
    stagnation; each leaves the GPU idle while the host reads the status and
    queues the next stretch, and takes a snapshot of the iterate.  While the
    recursive residual falls steadily the next check is put where its last
    rate predicts the tolerance, plus ``check_every // 2`` iterations, at
    most ``16 * check_every`` and at least ``check_every``: iterations
    queued past convergence are no-ops, but each still costs its launches
    (much less than a check).  On the residual histories of the standard
    problem this takes fewer checks than aiming at half the predicted
    distance, with few no-op iterations queued (measured:
    docs/performance.md, "Figures behind code choices").

    >>> _fused_chunk(10, 1e-3, (0, 1.0), 100, 1e-8, True)      # 1e-3 per 100: 167 to go
    160
    >>> _fused_chunk(10, 1e-7, (80, 1e-6), 100, 1e-8, True)    # 20 to go
    25
    >>> _fused_chunk(10, 1e-3, (0, 1.0), 100, 1e-8, False)
    10
    """
    if not steady or prev_check is None:
        return check_every
    it0, h0 = prev_check
    if not (it > it0 and 0.0 < h < h0 and tol_rel > 0.0 and math.isfinite(h0)):
        return check_every
    if h <= tol_rel:
        return check_every
    rate = math.log(h / h0) / (it - it0)                # < 0
    to_go = math.log(tol_rel / h) / rate                # > 0
    return int(min(16 * check_every, max(check_every, math.ceil(to_go) + check_every // 2)))


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
       check_every=10, nullspace="auto", engine="auto"):
    """(Preconditioned) conjugate gradients.

    Parameters
    ----------
    A : PoissonOperator, sparse matrix or LinearOperator (n x n), symmetric
        positive (semi-)definite.
    b : array (n,)
        Right-hand side (NumPy or CuPy: the solve runs on its backend).
    x0 : array, optional
        Starting guess (default zeros).
    rtol, atol : float
        Stop when ``||b - A x|| <= max(rtol ||b||, atol)`` on the true residual.
    maxiter : int, optional
        Default ``10 n``.
    M : str, Preconditioner, matrix or callable, optional
        ``M^-1`` (SciPy's meaning of ``M``); a name such as ``"jacobi"`` builds it.
    callback : callable, optional
        ``callback(xk)`` after every iteration.
    check_every : int
        Iterations between host-side convergence checks.  The fused GPU
        engine tests the tolerance on the device every iteration; its host
        checks (breakdown, divergence, stagnation) are spaced out to up to
        ``8 * check_every`` while the residual falls steadily.
    nullspace : {"auto", "constant", None}
        ``"constant"``: singular with constants in the null space (remove the
        mean of ``b``, return the zero-mean answer).  ``"auto"`` takes it from
        ``A.nullspace`` (set by the pressure operator).
    engine : {"auto", "generic", "fused"}
        ``"auto"`` runs the fused GPU iteration (:mod:`bubbleflow.linalg.fused`)
        where it applies (CuPy, float64, grid operator, a fused or grid
        preconditioner, A-DEF2) and the generic backend loop otherwise.

    Returns
    -------
    x : array
    record : SolveRecord

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow import cg
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> x, rec = cg(A, np.ones(50), rtol=1e-10, M="jacobi")
    >>> rec.converged, rec.residual < 1e-10
    (True, True)
    """
    method = "cg" if M is None or (isinstance(M, str) and M == "none") else "pcg"
    if isinstance(M, str) and M == "none":
        M = None
    return _solve(A, b, x0, rtol, atol, maxiter, M, callback, None, "adef2", check_every,
                  nullspace, method, engine=engine)


pcg = cg


def dpcg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
         deflation, variant="adef2", check_every=10, nullspace="auto", engine="auto"):
    """Deflated preconditioned conjugate gradients.

    Parameters are those of :func:`cg`, plus

    deflation : Deflation or int array
        The deflation space (:func:`bubbleflow.make_deflation`), or one label
        per unknown (unknowns with equal labels share a vector).
    variant : {"adef2", "def1"}
        A-DEF2 (default, robust) or the seed's DEF1 (Algorithm 8).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bubbleflow import dpcg
    >>> A = sp.diags([-1.0, 2.01, -1.0], [-1, 0, 1], shape=(64, 64), format="csr")
    >>> labels = np.arange(64) // 8            # eight subdomains of eight unknowns
    >>> x, rec = dpcg(A, np.ones(64), rtol=1e-10, M="jacobi", deflation=labels)
    >>> rec.converged
    True
    """
    if deflation is None:
        raise ValueError("dpcg needs a deflation space; use cg for no deflation")
    if isinstance(M, str) and M == "none":
        M = None
    return _solve(A, b, x0, rtol, atol, maxiter, M, callback, deflation, variant, check_every,
                  nullspace, "dpcg", engine=engine)
