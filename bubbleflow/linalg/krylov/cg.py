"""Conjugate gradients, written once against the engine interface.

:func:`solve` is the loop behind :func:`bubbleflow.cg`, :func:`~bubbleflow.pcg`
and :func:`~bubbleflow.dpcg` (:mod:`bubbleflow.linalg.functions`):
textbook (deflated) PCG whose pieces come from an engine
(:class:`~.engine.ArrayEngine`, or an engine that runs whole iterations on
the device, given by the caller through ``select``), whose host checks are
decided by a :class:`~.stopping.StoppingPolicy`, and whose answer is gauged by
the system's null-space hook.
"""
from __future__ import annotations

import time

import numpy as np

from .device import DeviceIterations
from .engine import ArrayEngine, ArrayIterations, KrylovState
from .record import close_record
from .stopping import StoppingPolicy, floor_estimate
from .system import check_tolerances, check_variant, make_system, norm_inf, report_projection

__all__ = ["solve"]


def solve(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
          deflation=None, variant="adef2", check_every=10, nullspace="auto", method="cg",
          stagnation_restarts=1, select=None, progress=None, confirm=True, reference=None,
          behind=None):
    """The loop behind :func:`~bubbleflow.cg` and :func:`~bubbleflow.dpcg` (their parameters), plus

    select : callable, optional
        ``select(system) ->`` an engine that runs whole iterations on the
        device (:mod:`.device`), or None for the array engine alone.
        Called once the start is known, unless ``callback`` is given.
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
    reference : array, optional
        A vector laid out as ``b`` whose norm takes the place of ``||b||``
        in ``rtol`` and in the record's relative figures: a solve for an
        increment, ``A d = b - A x_old``, held to a tolerance on the whole
        right-hand side ``b``.  Its norm comes in the start's one transfer;
        where it is zero, ``||b||`` serves.
    behind : callable, optional
        ``behind(x)`` with each candidate answer of a device engine, once its
        check is queued behind a stretch of iterations and before the host
        reads whether the check accepts it: the caller queues work on it
        (launches alone, no host reads) that the device runs while the
        host waits.  Where the check accepts the candidate, the solve
        returns that very array (``x is candidate``); else the caller's
        work is to be dropped.  The record's solve time then includes the
        device time of that work.
    """
    rtol, atol, maxiter = check_tolerances(rtol, atol, maxiter, method)
    check_variant(variant)
    system, record = make_system(A, b, M, deflation, variant, nullspace, maxiter, check_every,
                                 callback, dict(method=method, rtol=rtol), x0=x0)
    x0 = system.x0
    t_solve = time.perf_counter()
    backend, xp, b = system.backend, system.backend.xp, system.b
    prepare = getattr(M, "prepare", None)      # Preconditioner.prepare (a user's M may lack it)
    if prepare is not None:
        prepare(b)
    engine = ArrayEngine(system)
    guess = xp.zeros_like(b) if x0 is None else x0
    device = select(system) if select is not None and callback is None else None
    owned = getattr(device, "history", None)          # a history buffer the engine keeps
    hist = owned(system.maxiter + 1) if owned is not None else \
        xp.zeros(system.maxiter + 1, dtype=np.float64)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # Everything up to the first check is queued before the host reads
        # ||b||, ||r0||, the mean removed from b and the start's breakdown
        # flag, in one transfer.
        # (a device engine takes x and r into buffers of its own)
        x, r = engine.start(guess, x0 is not None, in_place=device is None)
        state = KrylovState(x=x, r=r, hist=hist, bnorm=0.0, tol_rel=0.0,
                            zero=x0 is None and x is guess)
        checks = _TrueResiduals(system, engine, state, device, behind)
        if device is not None:
            # An engine that stops on the device at the tolerance usually ends a
            # stretch there: its check's true residual is queued behind the
            # stretch and read with its status (one host wait, not two).
            iterations = DeviceIterations(device, engine, system.check_every, system.maxiter,
                                          ahead=checks.queue if confirm else None)
        else:
            iterations = ArrayIterations(engine, system.check_every, system.maxiter)
        first = _first_figures(system, engine, iterations, state, record, r, reference,
                               (rtol, atol))
        bnorm, rn0, ahead = first["bnorm"], first["rn0"], first["ahead"]
        if bnorm == 0.0:
            report_projection(record, system.size, bnorm, 0.0)
            record.residual, record.converged, record.reason = 0.0, True, "converged"
            record.residual_history = np.zeros(1)
            return xp.zeros_like(b), record
        # The norm the tolerance and the record's relative figures are against.
        against = first.get("reference") or bnorm
        tol = max(float(rtol) * against, float(atol))
        state.bnorm, state.tol_rel = bnorm, tol / bnorm
        report_projection(record, system.size, bnorm, state.tol_rel)
        h0 = rn0 / bnorm
        if not ahead:
            hist[0] = h0                 # (else written on the device, the same bits)
        iterations.started(state, h0, first.get("broke", 0.0) != 0.0)

        # Attainable accuracy of the recursion: about eps ||A|| ||x|| (absolute);
        # ||A|| asked for only when a test needs it.
        floor = floor_estimate(lambda: norm_inf(A), b.dtype, engine.norm)
        policy = StoppingPolicy(bnorm, tol, checks.solution, checks.verify, floor, confirm,
                                stagnation_restarts)
        reason = (policy.begin(iterations.x_start, h0, copy=False) if ahead
                  else policy.begin(state.x, h0))
        if reason is None:
            record.engine = iterations.name
            record.bytes_per_iteration = iterations.bytes_per_iteration
            reason, final = _iterate(state, iterations, policy, callback, progress)
        else:
            final = None
        if final is None:
            final, non_finite = policy.final(state.x, state.it)
            reason = non_finite or reason
    record.true_residual_checks = policy.true_residual_checks
    xf, rtn = final
    if state.hist_host is not None and state.hist_host[0] == state.it:
        history = state.hist_host[1]
    else:
        history = backend.to_host(hist[: state.it + 1]).copy()
    close_record(record, backend, t_solve, state.it, rtn / bnorm, reason, history)
    if against != bnorm:
        record.relative_to(bnorm, against, rtol)
    return xf, record


def _first_figures(system, engine, iterations, state, record, r, reference, tolerances):
    """The start queued (``iterations.begin``), then in one transfer the
    norms of ``b``, ``r`` and ``reference`` (``bnorm``, ``rn0``,
    ``reference``: one reduction), the mean removed from ``b`` (``mean``)
    and the start's breakdown flag (``broke``), as a dict of host floats
    (``||b||`` and the mean go into ``record``).  Where the engine takes the
    tolerance (``tolerances``: rtol, atol) from these norms on the device,
    the first stretch and its check are queued before that transfer and
    read in it (``iterations.first_stretch``; ``ahead`` True in the dict)."""
    b = system.b
    vectors = [b, r]
    if reference is not None:
        vectors.append(system.backend.xp.asarray(reference, dtype=b.dtype).reshape(b.shape))
    ahead = (*tolerances, reference is not None) \
        if getattr(iterations, "starts_ahead", False) else None
    names, values = [], [engine.norms(*vectors)]
    iterations.begin(state)
    for name, value in (("mean", system.rhs_mean), ("broke", iterations.flag(state))):
        if isinstance(value, float):
            record.rhs_mean_removed = value      # already on the host
        elif value is not None:
            names.append(name)
            # (The flag as the start left it: the first stretch may set it.)
            values.append(value.copy() if ahead is not None and name == "broke" else value)
    read = system.backend.to_host_many
    if ahead is None:
        host = read(values)
    else:
        host = []

        def read_with_start(arrays):
            figures = read(values + list(arrays))
            host.extend(figures[:len(values)])
            return figures[len(values):]

        iterations.first_stretch(state, values[0], *ahead, read_with_start)
    norms, *rest = host
    first = dict(zip(("bnorm", "rn0", "reference"), (float(v) for v in norms)))
    first.update(zip(names, (float(v) for v in rest)))
    record.rhs_norm = first["bnorm"]
    if "mean" in first:
        record.rhs_mean_removed = first["mean"]
    first["ahead"] = ahead is not None
    return first


class _TrueResiduals:
    """The true residuals of the iterates a solve checks: the solution an
    iterate stands for (gauged) and ``b - A x``, read with the history up
    to the check in one transfer; or, for a device engine, queued behind a
    stretch of its iterations and read with their status (:meth:`queue`,
    ``state.ahead``), then taken by the check at that iteration."""

    def __init__(self, system, engine, state, device, behind=None):
        self.system, self.engine, self.state = system, engine, state
        self.behind = behind
        # (A device engine iterates in buffers of its own, reused by its next
        # solve: the answer must not be one of them.)
        self.copied = device is not None

    def solution(self, x):
        xf = self.system.nullspace.gauge(self.engine.finish(x))
        return xf.copy() if self.copied and xf is x else xf

    def _residual(self, candidate):
        xf = self.solution(candidate)
        return xf, self.system.residual(self.system.b, xf)

    def queue(self, state, stop):
        """The check's work for the current iterate, and the arrays it reads
        (the history up to ``stop``, the furthest the check can be); the
        caller's work on the candidate answer queued behind it (``behind``)."""
        xf, rt = self._residual(state.x)
        reads = [self.engine.norm(rt), state.hist[: stop + 1]]
        if self.behind is not None:
            self.behind(xf)
        return (state.x, xf, rt), reads

    def verify(self, candidate):
        """``(solution, true residual, its norm)`` of ``candidate``; the
        history up to the check comes with the norm."""
        state = self.state
        it, ahead = state.it, state.ahead
        if ahead is not None and ahead[0] == it and ahead[1][0] is candidate:
            (_, xf, rt), (rtn, history) = ahead[1], ahead[2]
            history = history[: it + 1]
        else:
            xf, rt = self._residual(candidate)
            rtn, history = self.system.backend.to_host_many([self.engine.norm(rt),
                                                             state.hist[: it + 1]])
        state.hist_host = (it, np.array(history, dtype=np.float64))
        return xf, rt, float(rtn)


def _iterate(state, iterations, policy, callback, progress):
    """Host checks and stretches of iterations until the policy stops:
    ``(reason, final)`` (``final`` None when no check accepted an iterate)."""
    maxiter = iterations.maxiter
    while True:
        h, broke = iterations.read(state)
        it = state.last_check = state.it
        shown = (it, h)
        decision = policy.check(state.x, it, h, broke)
        state.ahead = None             # (queued for this check only)
        reason = decision.reason
        if decision.restart:
            if decision.from_best:
                state.x[...] = policy.x_rec
            iterations.restart(state, decision.r)
            state.hist[it] = decision.rtn / state.bnorm
            state.hist_host = None                 # the history read at the check is stale
            shown = (it, decision.rtn / state.bnorm)
            policy.restarted(state.x, it, decision.rtn)
        iterations.plan(it, shown[1], policy.steady, decision.restart)
        if reason is None:
            reason = policy.limit(state.x, it, maxiter)
        if progress is not None and (reason is not None or it % iterations.report_every == 0):
            progress(*shown)
        if reason is not None:
            return reason, decision.final
        iterations.run(state, iterations.chunk(state), callback)
