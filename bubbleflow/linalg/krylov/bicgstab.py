"""BiCGSTAB for nonsymmetric systems, written once in array code (NumPy or CuPy).

Right-preconditioned BiCGSTAB (van der Vorst, SIAM J. Sci. Stat. Comput.
13, 1992): with ``phat = M^-1 p`` and ``shat = M^-1 s`` the iterate moves by
``alpha phat + omega shat`` and the residual it carries is that of the
unpreconditioned system, so the stop test reads ``||b - A x||`` itself.

As in :mod:`.cg` all scalars stay on the device between host checks (every
``check_every`` iterations, every iteration on the host): a breakdown or the
tolerance reached freezes the iterate on the device, so the reported count
is exact whatever ``check_every``.  A pass of the recursive test is
confirmed on the true residual; if that fails the iteration restarts from
the true residual (``r^`` renewed).

Breakdowns: ``rho = (r^, r) = 0``, ``(r^, A phat) = 0`` or ``omega = 0``.
One after progress restarts the iteration from the true residual with a new
shadow residual ``r^ = r`` (with ``r^ = r0`` of small support, such as the
gravity right-hand side of the pressure equation, ``rho`` can vanish by
accident); one at the first iteration of a (re)start stops with reason
``breakdown`` (``info = -10``, SciPy's value), a non-finite scalar with
``non-finite``.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ...compute.reductions import reductions
from .record import close_record
from .system import check_tolerances, make_system, report_projection

__all__ = ["solve_bicgstab", "begin_solve"]

#: Restarts after a failed confirmation without progress of the true
#: residual before the solve stops (``stagnation``).
STAGNATION_RESTARTS = 2


class _Iteration:
    """The state of the iteration and its steps (no host synchronisation)."""

    def __init__(self, system, x, r, bnorm, tol_rel, hist):
        self.system, self.xp = system, system.backend.xp
        self.dot, self.norm = reductions(system.backend, system.b.dtype)
        self.x, self.hist, self.bnorm, self.tol_rel = x, hist, bnorm, tol_rel
        self.it = 0                       # iterations run, frozen ones included
        xp = self.xp
        self.count = xp.zeros((), dtype=np.int64)      # iterations that moved the iterate
        self.bad = xp.zeros((), dtype=bool)
        self.nonfinite = xp.zeros((), dtype=bool)
        self.done = xp.zeros((), dtype=bool)
        self.current = xp.zeros((), dtype=np.float64)  # relative residual now
        self.restart(r)

    def restart(self, r):
        """Start (again) from ``self.x`` with its residual ``r``."""
        xp = self.xp
        self.r, self.rhat = r, r.copy()
        self.p, self.v = xp.zeros_like(r), xp.zeros_like(r)
        one = xp.ones((), dtype=np.float64)
        self.rho, self.alpha, self.omega = one, one.copy(), one.copy()
        self.bad[...] = False
        self.nonfinite[...] = False
        self.done[...] = False

    def _flag(self, moving, value):
        """A zero or non-finite scalar of a moving iteration is a breakdown:
        ``moving`` and the scalar fine."""
        size = self.xp.abs(value)
        finite = size < np.inf                     # (False for NaN)
        ok = finite & (size > 0)
        self.bad |= moving & ~ok
        self.nonfinite |= moving & ~finite
        return moving & ok

    def _scalar(self, moving, value):
        """``value`` where the iteration moves, else 0, in the vectors' dtype."""
        return self.xp.where(moving, value, 0.0).astype(self.x.dtype, copy=False)

    def run(self, count, callback=None):
        """``count`` BiCGSTAB steps."""
        xp, dot, norm = self.xp, self.dot, self.norm
        prec, matvec = self.system.prec, self.system.matvec
        x, r, rhat, p, v = self.x, self.r, self.rhat, self.p, self.v
        for _ in range(count):
            moving = ~(self.bad | self.done)
            rho = dot(rhat, r)
            moving = self._flag(moving, rho)
            beta = (rho / self.rho) * (self.alpha / self.omega)
            moving = self._flag(moving, beta)
            # p = r + beta (p - omega v); a stopped iteration applies only
            # zeros (never a non-finite scalar: 0 * inf would spoil p).
            p -= self._scalar(moving, self.omega) * v
            p *= self._scalar(moving, beta)
            p += r
            phat = prec(p)
            v[...] = matvec(phat)
            rv = dot(rhat, v)
            moving = self._flag(moving, rv)
            alpha = rho / rv
            moving = self._flag(moving, alpha)
            a = self._scalar(moving, alpha)
            x += a * phat
            r -= a * v                                           # r is now s
            self.count += moving
            h_half = norm(r) / self.bnorm
            # Converged at the half step: s is the residual, no omega needed
            # (and s = 0 exactly would make omega 0 / 0).
            half = moving & (h_half <= self.tol_rel)
            self.done |= half
            going = moving & ~half
            shat = prec(r)
            t = matvec(shat)
            omega = dot(t, r) / dot(t, t)
            going = self._flag(going, omega)
            w = self._scalar(going, omega)
            x += w * shat
            r -= w * t
            self.current = xp.where(going, norm(r) / self.bnorm, h_half)
            self.it += 1
            self.hist[self.it] = self.current
            self.done |= moving & (self.current <= self.tol_rel)
            self.rho, self.alpha, self.omega = rho, alpha, omega
            if callback is not None:
                callback(x)

    def read(self):
        """``(iterations, h, done, bad, nonfinite)`` in one transfer; the
        count of iterations becomes that of the moving ones."""
        values = self.system.backend.to_host_many(
            [self.count, self.current, self.done, self.bad, self.nonfinite])
        count, h, done, bad, nonfinite = (v.item() for v in values)
        self.it = int(count)
        return self.it, float(h), bool(done), bool(bad), bool(nonfinite)


def solve_bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
                   nullspace="auto", check_every=10):
    """Right-preconditioned BiCGSTAB: the loop behind :func:`bubbleflow.linalg.baselines.bicgstab`,
    with its parameters (there documented).

    Returns
    -------
    x : array
    record : SolveRecord

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.diags([-1.2, 2.0, -0.8], [-1, 0, 1], shape=(40, 40), format="csr")
    >>> x, rec = solve_bicgstab(A, np.ones(40), rtol=1e-10)
    >>> rec.converged, rec.reason, bool(np.linalg.norm(np.ones(40) - A @ x) <= 1e-10 * np.sqrt(40))
    (True, 'converged', True)
    """
    rtol, atol, maxiter = check_tolerances(rtol, atol, maxiter, "bicgstab")
    system, record = make_system(A, b, M, None, "adef2", nullspace, maxiter, check_every,
                                 callback, dict(method="bicgstab", rtol=rtol), x0=x0)
    t_solve = time.perf_counter()
    backend, xp, b = system.backend, system.backend.xp, system.b
    prepare = getattr(system.prec_obj if system.prec_obj is not None else M, "prepare", None)
    if prepare is not None:
        prepare(b)
    _, norm = reductions(backend, b.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x, r, bnorm, rn0 = begin_solve(system, record, rtol, atol, norm)
        if bnorm == 0.0:
            close_record(record, backend, t_solve, 0, 0.0, "converged", np.zeros(1))
            return xp.zeros_like(b), record
        tol = max(rtol * bnorm, atol)
        hist = xp.zeros(system.maxiter + 1, dtype=np.float64)
        hist[0] = rn0 / bnorm
        state = _Iteration(system, x, r, bnorm, tol / bnorm, hist)
        reason, final = _iterate(state, system, record, norm, tol, rn0, callback)
    xf, rtn = final
    history = backend.to_host(hist[: state.it + 1]).copy()
    close_record(record, backend, t_solve, state.it, rtn / bnorm, reason, history)
    return xf, record


def begin_solve(system, record, rtol, atol, norm):
    """The start of a solve: ``(x, r, ||b||, ||r||)`` from ``system.x0``
    (zeros by default), the norms and the mean removed from ``b`` read in one
    transfer.  The part of ``b`` the null space removed goes into the record,
    with a warning when it exceeds the tolerance (the answer then solves the
    projected system).  The warning names the line that called the public
    solver (this function, the loop, the public function: ``stacklevel=5``)."""
    backend, xp, b = system.backend, system.backend.xp, system.b
    x = xp.zeros_like(b) if system.x0 is None else system.x0
    r = b.copy() if system.x0 is None else system.residual(b, x)
    mean = system.rhs_mean
    values = [norm(b), norm(r)] + ([mean] if mean is not None else [])
    host = [float(v) for v in backend.to_host_many(values)]
    bnorm, rn0 = host[0], host[1]
    record.rhs_mean_removed = host[2] if mean is not None else 0.0
    if bnorm > 0.0:
        report_projection(record, b.size, bnorm, max(rtol * bnorm, atol) / bnorm, stacklevel=5)
    return x, r, bnorm, rn0


def _iterate(state, system, record, norm, tol, rn0, callback):
    """Host checks and stretches of iterations: ``(reason, (x, ||b - A x||))``."""
    b, maxiter = system.b, system.maxiter
    gauge = system.nullspace.gauge
    best = (math.inf, None)
    stalls = 0

    def verify():
        xf = gauge(state.x)
        rt = system.residual(b, xf)
        rtn = float(norm(rt))
        record.true_residual_checks.append((state.it, rtn / state.bnorm))
        return xf, rt, rtn

    if not math.isfinite(rn0):
        return "non-finite", verify()[::2]
    h, done, bad, nonfinite = rn0 / state.bnorm, rn0 <= tol, False, False
    started = 0                        # the iteration of the last (re)start
    while True:
        if done or bad:
            xf, rt, rtn = verify()
            if rtn <= tol:
                return "converged", (xf, rtn)
            if nonfinite or not math.isfinite(rtn):
                return "non-finite", (xf, rtn)
            if bad and state.it == started:
                return "breakdown", (xf, rtn)
            if done:
                # The recursion drifted from the true residual: restart from
                # it unless restarts no longer help.
                stalls = 0 if rtn < 0.9 * best[0] else stalls + 1
                if rtn < best[0]:
                    best = (rtn, xf.copy())
                if stalls >= STAGNATION_RESTARTS:
                    return "stagnation", (best[1], best[0])
            # A breakdown after progress (r^ orthogonal to r by accident, as
            # with an r0 of small support): a new shadow residual r^ = r.
            state.x[...] = xf
            state.restart(rt)
            state.hist[state.it] = rtn / state.bnorm
            started = state.it
        elif not math.isfinite(h):
            return "non-finite", verify()[::2]
        if state.it >= maxiter:
            xf, _, rtn = verify()
            return "maxiter", (xf, rtn)
        count = min(system.check_every - state.it % system.check_every, maxiter - state.it)
        state.run(count, callback)
        _, h, done, bad, nonfinite = state.read()
