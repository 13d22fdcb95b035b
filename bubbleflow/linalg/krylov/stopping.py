"""When a Krylov solve stops: the stopping policy, its own object.

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
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["StoppingPolicy", "Decision", "device_chunk"]


@dataclass
class Decision:
    """What a host check decided: stop (``reason``, ``final = (x, true
    residual norm)`` when known) or restart from ``x_rec`` or ``x`` with the
    true residual ``r`` (norm ``rtn``); neither: iterate on."""

    reason: str = None
    final: tuple = None
    restart: bool = False
    from_best: bool = False
    r: object = None
    rtn: float = math.nan


class StoppingPolicy:
    """The rules of a solve's host checks.

    Parameters
    ----------
    bnorm, tol : float
        ``||b||`` and the absolute tolerance ``max(rtol ||b||, atol)``.
    solution : callable
        ``x -> `` the gauged solution an iterate stands for.
    verify : callable
        ``x -> (solution, true residual, its norm)``.
    floor : callable
        ``x ->`` the attainable accuracy of the recursion near ``x``
        (about ``eps ||A|| ||x||``, absolute).
    confirm : bool
        Confirm a pass of the recursive test on the true residual (default).
        ``False`` accepts the recursive residual as it is: for inner solves
        whose caller checks the true residual itself, in a higher precision.
    stagnation_restarts : int
        Restarts without progress of the true residual before stopping, at
        the floor (less than halved since the best one; after a breakdown or
        a divergence, less than 10 % better, and at least two).
    """

    def __init__(self, bnorm, tol, solution, verify, floor, confirm=True,
                 stagnation_restarts=1):
        self.bnorm, self.tol, self.tol_rel = bnorm, tol, tol / bnorm
        self.solution, self.verify, self.floor = solution, verify, floor
        self.confirm, self.stagnation_restarts = confirm, stagnation_restarts
        self.true_residual_checks = []
        self.best_true, self.best_x, self.stalls, self.restarts = math.inf, None, 0, 0
        self.first_failure = None        # iteration of the first failed true-residual check
        self._rec_verified = math.inf    # the recursive residual at the last such check
        self.steady = True

    def begin(self, x, h0, copy=True):
        """Before the first check: the iterate with the smallest recursive
        residual so far is ``x`` (a copy is kept; ``copy=False``: ``x`` is
        one).  Near the attainable accuracy rounding can make the recursion
        grow again, and we then go back to it rather than follow the
        growth.  Returns ``"non-finite"`` or None."""
        self.x_rec = x.copy() if copy else x
        self.best_rec, self.last_improvement = float(h0) * self.bnorm, 0
        self._rec_kept = self.best_rec
        self._rec_at_check = self.best_rec
        return None if math.isfinite(self.best_rec) else "non-finite"

    def near_floor(self, x):
        """Near the attainable accuracy?  (A reduction and a host sync:
        asked only when a test needs it.)  Against the best recursive
        residual as it was when the check began."""
        return self._rec_at_check <= 10.0 * self.floor(x)

    def check(self, x, it, h, broke):
        """A host check at iteration ``it`` with relative recursive residual
        ``h``: a :class:`Decision`."""
        rn = h * self.bnorm
        below = h <= self.tol_rel            # the device's test, to the bit
        if below and not self.confirm and not broke and math.isfinite(rn):
            # The caller checks the true residual: accept the recursion.
            return Decision("converged", (self.solution(x), rn))
        # Growth of the recursive residual is normal for CG far from the
        # solution; only near the attainable accuracy is it the rounding
        # instability we must not follow.
        self._rec_at_check = self.best_rec
        diverged = not math.isfinite(rn) or (rn > 10.0 * self.best_rec and self.near_floor(x))
        if not diverged and not broke and rn < self.best_rec:
            if rn < 0.99 * self.best_rec:
                self.last_improvement = it
            self.best_rec = rn
            if not below and rn < 0.5 * self._rec_kept:
                # (below: x itself is verified next.)  A copy each time the
                # best halves: near it, checked every iteration, for little.
                self.x_rec[...] = x
                self._rec_kept = rn
        self.steady = not (self.restarts or broke or diverged)
        # Once a true-residual check has failed the recursion can go on
        # falling far below the true residual: each halving of it since the
        # last check is a probe of the true one.
        probe = self.first_failure is not None and rn < 0.5 * self._rec_verified
        if not (below or broke or diverged or probe):
            return Decision()
        from_best = not (below and not diverged) and not probe
        xf, rt, rtn = self.verify(self.x_rec if from_best else x)
        # The recursion's own residual at the iterate verified.
        rec_there = self._rec_kept if from_best else rn
        self._rec_verified = rec_there
        self.true_residual_checks.append((it, rtn / self.bnorm))
        if not math.isfinite(rtn):
            return Decision("non-finite")
        if rtn <= self.tol:
            return Decision("converged", (xf, rtn))
        # A floor check: the true residual is a quarter or more above what
        # the recursion says there (it drifted: the attainable accuracy is
        # near), a probe, or any check after a floor check.  There a restart gains little, so less than a
        # halving is no progress and one such restart ends the solve: it
        # stops within a few iterations of the floor rather than creeping
        # along it.  A breakdown or a divergence may come far from the floor
        # (on the GPU the iterate kept is the last check's): two restarts
        # that gain less than 10 % end it.
        floor_check = (probe or self.first_failure is not None
                       or (not broke and rtn > 1.25 * rec_there))
        if floor_check and self.first_failure is None:
            self.first_failure = it
        gain = 0.5 if floor_check else 0.9
        self.stalls = 0 if rtn < gain * self.best_true else self.stalls + 1
        if rtn < self.best_true:
            self.best_true, self.best_x = rtn, xf.copy()
        limit = self.stagnation_restarts if floor_check else max(2, self.stagnation_restarts)
        if self.stalls >= limit:
            # No progress at all means the method broke down (an indefinite
            # operator or preconditioner); otherwise we are at the attainable
            # accuracy.
            return Decision("breakdown" if self.best_true >= 0.5 * self.bnorm else "stagnation")
        # The recursive residual drifted from the true one: restart from the
        # checked iterate with its true residual.
        return Decision(restart=True, from_best=from_best, r=rt, rtn=rtn)

    def restarted(self, x, it, rtn):
        """After a restart at ``it`` from ``x`` (true residual norm ``rtn``)."""
        self.best_rec, self.last_improvement = rtn, it
        self.x_rec[...] = x
        self._rec_kept = self._rec_verified = rtn
        self.restarts += 1

    def limit(self, x, it, maxiter):
        """The end of a check: ``"maxiter"``, ``"stagnation"`` or None.

        A plateau is stagnation only at the attainable accuracy: far from it
        CG's residual may stall for long stretches while the error still
        falls, and maxiter is the only honest limit.  Once a true-residual
        check has failed (the recursion reached the tolerance, the true
        residual did not: the attainable accuracy is near), a plateau of a
        tenth of the iterations that took is stagnation.
        """
        if it >= maxiter:
            return "maxiter"
        if self.restarts and self.first_failure is not None:
            window = max(4, self.first_failure // 10)
        else:
            window = max(100, it // 4) if self.restarts else max(500, it // 2)
        if it - self.last_improvement > window and (self.restarts or self.near_floor(x)):
            return "stagnation"
        return None

    def final(self, x, it):
        """No check accepted an iterate: the best of the last iterate, the
        one with the smallest recursive residual and the best one already
        checked, as ``((x, true residual norm), reason or None)``."""
        final = (None, math.inf)
        for candidate in ([x, self.x_rec] if it > 0 else [x]):
            xf, _, rtn = self.verify(candidate)
            if rtn < final[1] or final[0] is None:
                final = (xf, rtn)
        if self.best_x is not None and self.best_true < final[1]:
            final = (self.best_x, self.best_true)
        return final, (None if math.isfinite(final[1]) else "non-finite")


def floor_estimate(norm_A, dtype, norm):
    """``x -> eps ||A|| ||x||``: the attainable accuracy of the recursion
    (absolute), 0 where ``||A||`` is unknown.

    ``norm_A`` may be a callable that returns ``||A||`` (or None): it is then
    asked on the first use only (a host synchronisation on the device that a
    solve which never nears the floor does not pay)."""
    eps = float(np.finfo(dtype).eps)
    known = [norm_A] if not callable(norm_A) else []

    def floor(x):
        if not known:
            known.append(norm_A())
        if known[0] is None:
            return 0.0
        return eps * known[0] * float(norm(x))
    return floor


def device_chunk(check_every, h, prev_check, it, tol_rel, steady, restarted=False):
    """Iterations an engine that tests the tolerance on the device runs
    before the next host check.

    Such an engine stops on the device at the tolerance, so its host checks
    only watch for breakdown, divergence and stagnation; each leaves the GPU
    idle while the host reads the status and queues the next stretch, and
    takes a snapshot of the iterate.  While the recursive residual falls
    steadily the next check is put where its last rate predicts the
    tolerance, plus a quarter of the predicted distance (rounded down, at
    most ``check_every // 2``), between 2 and ``16 * check_every``
    iterations: iterations queued past convergence are no-ops, but each
    still costs its launches, which for a multigrid cycle is a fifth of an
    iteration and more than a check that confirms nothing.  A restart after a failed confirmation
    (``restarted``, ``h`` its true residual) is planned the same way from
    the previous check: it is usually a step or two from the tolerance.
    Otherwise, or without a rate, ``check_every``.  Measured:
    docs/performance_records.md, "Figures behind code choices", under
    ``device_chunk``.

    >>> device_chunk(10, 1e-3, (0, 1.0), 100, 1e-8, True)      # 1e-3 per 100: 167 to go
    160
    >>> device_chunk(10, 1e-7, (80, 1e-6), 100, 1e-8, True)    # 20 to go
    25
    >>> device_chunk(10, 6.4e-8, (0, 1.0), 10, 1e-8, True)      # 1.1 to go
    2
    >>> device_chunk(10, 1.7e-8, (10, 6.4e-8), 11, 1e-8, False, restarted=True)
    2
    >>> device_chunk(10, 1e-3, (0, 1.0), 100, 1e-8, False)
    10
    """
    if not (steady or restarted) or prev_check is None:
        return check_every
    it0, h0 = prev_check
    if not (it > it0 and 0.0 < h < h0 and tol_rel > 0.0 and math.isfinite(h0)):
        return check_every
    if h <= tol_rel:
        return check_every
    rate = math.log(h / h0) / (it - it0)                # < 0
    to_go = math.log(tol_rel / h) / rate                # > 0
    margin = min(check_every // 2, int(to_go / 4))
    # (After a restart at most check_every: near the floor the restarted
    # recursion may diverge, which only a check sees.)
    longest = check_every if restarted else 16 * check_every
    return int(min(longest, max(2, math.ceil(to_go) + margin)))
