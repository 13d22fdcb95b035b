"""The Jacobi-preconditioned Chebyshev iteration of the implicit viscous solves.

Each velocity component's backward-Euler system ``S x = rho_f x - dt L x``
(:class:`.viscosity.ViscousSystem`) is symmetric positive definite with
``S``'s off-diagonal row sums at most ``D - rho_f`` (``D`` its diagonal):
Gershgorin bounds the eigenvalues of ``D^-1 S`` from the diagonal alone
(:func:`chebyshev_interval`), so Chebyshev iteration on that interval needs
no inner products: no host synchronisation inside the iteration, one launch
a step on the GPU.  The step count follows from the interval and the
starting residual (:func:`chebyshev_iterations`) and bounds the 2-norm
residual; should rounding leave a system above its tolerance, the
preconditioned CG (:func:`bubbleflow.cg`) finishes it from there.

The systems of the velocity components are solved side by side
(:func:`solve_chebyshev`): one transfer of every system's starting norms and
interval, their steps (:func:`chebyshev_sweep`), one transfer of their final
residuals.  Where a system holds a rank's rows (its ``padding`` a slab's),
those scalars are reduced over the ranks (:func:`partition_scalars`) and the
CG finish sums over them (the system's ``comm``).

What the iteration reads of a system: ``matvec`` (flat in, flat out),
``jacobi``, ``rho_f``, ``diagonal``, ``inv_diagonal`` (flat), ``padding``,
``comm``, ``backend`` and ``xp``.  The CUDA variants of the twins here
(:mod:`.viscosity_cuda`, :mod:`.viscosity3_cuda`) take the one-process 2-D
and 3-D systems, and a rank's 2-D and 3-D systems' Chebyshev sweeps.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..compute.twins import twin
from ..linalg.functions import cg
from ..linalg.krylov.record import SolveRecord
from . import viscosity_cuda
from .padding import WallPadding

__all__ = ["MAX_CHEBYSHEV_STEPS", "chebyshev_step", "chebyshev_sweep", "chebyshev_interval",
           "chebyshev_iterations", "chebyshev_schedule", "viscous_residual", "residual_scalars",
           "partition_scalars", "solve_chebyshev"]

#: Chebyshev steps at most per solve; past them (a very stiff system, where
#: Jacobi bounds are poor) the preconditioned CG takes over.
MAX_CHEBYSHEV_STEPS = 2000


@twin
def chebyshev_step(S, x, r, d, d_new, keep, gain):
    """One Chebyshev step in place: ``x += d``, ``r -= S d``,
    ``d_new = keep d + gain D^-1 r`` (flat arrays); returns ``x``."""
    Sd = S.matvec(d)
    x += d
    r -= Sd
    d_new[...] = keep * d + gain * (S.inv_diagonal * r)
    return x


@twin
def chebyshev_sweep(systems, xs, rs, ds, schedules):
    """The Chebyshev steps of several systems, in place on ``xs`` and ``rs``
    (``ds``, the first directions, are overwritten): system ``i`` takes
    ``len(schedules[i])`` steps (:func:`chebyshev_step`) with the ``(keep,
    gain)`` pairs of ``schedules[i]``.  Returns ``xs``.  (On the GPU one
    launch a step serves every velocity component.)"""
    xp = systems[0].xp
    ds = list(ds)
    spare = [xp.empty_like(d) for d in ds]
    for k in range(max((len(s) for s in schedules), default=0)):
        for i, S in enumerate(systems):
            if k < len(schedules[i]):
                chebyshev_step(S, xs[i], rs[i], ds[i], spare[i], *schedules[i][k])
                ds[i], spare[i] = spare[i], ds[i]
    return xs


def chebyshev_interval(lo, dmax, dmin):
    """``(a, b, sqrt(max D / min D))`` for the Jacobi-preconditioned system
    from ``lo = min rho_f / D`` and the diagonal's extremes: Gershgorin puts
    the eigenvalues of ``D^-1 S`` in ``[a, 2 - a]`` with ``a = lo`` (every
    row's off-diagonal sum is at most ``D - rho_f``), and the last factor
    turns the ``D^-1``-norm bound into a 2-norm one."""
    return lo, 2.0 - lo, math.sqrt(dmax / dmin)


def chebyshev_iterations(a, b, reduction):
    """Steps after which Chebyshev on ``[a, b]`` has cut the error (in the
    preconditioned norm) by ``reduction``: ``2 sigma^k <= reduction``,
    ``sigma = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)``."""
    if reduction >= 2.0:
        return 0
    root = math.sqrt(b / a)
    sigma = (root - 1.0) / (root + 1.0)
    if sigma <= 0.0:
        return 1
    return max(1, math.ceil(math.log(reduction / 2.0) / math.log(sigma)))


def chebyshev_schedule(a, b, steps):
    """``(first, [(keep, gain), ...])``: the factor of the first direction
    ``d = first D^-1 r`` and the ``steps`` coefficients of the three-term
    Chebyshev recurrence on ``[a, b]`` (Saad, Iterative Methods, alg. 12.1)."""
    theta, delta = 0.5 * (b + a), 0.5 * (b - a)
    sigma1 = theta / delta
    rho_k = 1.0 / sigma1
    schedule = []
    for _ in range(steps):
        rho_next = 1.0 / (2.0 * sigma1 - rho_k)
        schedule.append((rho_next * rho_k, 2.0 * rho_next / delta))
        rho_k = rho_next
    return 1.0 / theta, schedule


@twin
def viscous_residual(S, rhs, x):
    """``rhs - S x`` (flat)."""
    return rhs - S.matvec(x)


@twin
def residual_scalars(S, rhs, x):
    """``(r, scalars)``: the residual ``rhs - S x`` (flat) and, on the
    device, ``[||rhs||, ||r||, min rho_f / D, max D, min D]`` of the
    system's rows: what the Chebyshev solve reads (:func:`chebyshev_interval`),
    in one transfer."""
    xp = S.xp
    r = viscous_residual(S, rhs, x)
    d = S.diagonal.ravel()
    return r, xp.stack([xp.sqrt((rhs * rhs).sum()), xp.sqrt((r * r).sum()),
                        (S.rho_f.ravel() / d).min(), d.max(), d.min()])


def partition_scalars(host, padding):
    """The systems' scalars (host rows of :func:`residual_scalars`' five)
    of the whole systems, from those of the rows ``padding``'s part holds:
    on a slab (:class:`.slabs.SlabPadding`) the norms' squares summed over
    the ranks (``padding.total``) and the extremes taken over them; on the
    walls' padding (one process) the rows as they are, the whole systems'
    already (squaring a norm and taking the root again would round it)."""
    if isinstance(padding, WallPadding):
        return host
    comm = padding.comm
    out = np.array(host, dtype=np.float64)
    out[:, :2] = np.sqrt(padding.total(out[:, :2] ** 2))
    # The minima as the maxima of their negatives: one collective.
    signs = np.array([-1.0, 1.0, -1.0])
    out[:, 2:5] = signs * comm.allreduce_maxima(signs * out[:, 2:5])
    return out


def _plans(systems, rs, host, rtol):
    """Per system its tolerance, Chebyshev steps, their schedule and first
    direction (None where the start already meets the tolerance)."""
    tols, steps, schedules, ds = [], [], [], []
    for S, r, (fnorm, rnorm, lo, dmax, dmin) in zip(systems, rs, host):
        tols.append(rtol * fnorm)
        k, schedule, d = 0, [], None
        if rnorm > tols[-1]:
            a, b, spread = chebyshev_interval(lo, dmax, dmin)
            k = min(chebyshev_iterations(a, b, tols[-1] / (rnorm * spread)), MAX_CHEBYSHEV_STEPS)
            first, schedule = chebyshev_schedule(a, b, k)
            d = first * (S.inv_diagonal * r)
        steps.append(k)
        schedules.append(schedule)
        ds.append(d)
    return tols, steps, schedules, ds


def solve_chebyshev(systems, rhss, x0s, rtol):
    """Each ``S x = rhs`` to ``||rhs - S x|| <= rtol ||rhs||`` (over the
    ranks, on slabs); returns a list of ``(x, record)``, ``x`` the system's
    rows (flat), ``record`` a
    :class:`~bubbleflow.linalg.krylov.record.SolveRecord` (``engine``
    ``"chebyshev"``, or ``"chebyshev+cg"`` where CG finished; the same on
    every rank).  ``rhss`` flat; ``x0s`` the starting guesses, any shape of
    the rows' size (copied, not changed).  The systems share one partition
    (``systems[0].padding``)."""
    t0 = time.perf_counter()
    xp = systems[0].xp
    backend, padding = systems[0].backend, systems[0].padding
    xs = [xp.array(x0, dtype=np.float64).reshape(-1) for x0 in x0s]    # (a copy, flat)
    starts = [residual_scalars(S, rhs, x) for S, rhs, x in zip(systems, rhss, xs)]
    rs = [r for r, _ in starts]
    host = np.stack(backend.to_host_many([sc for _, sc in starts])).reshape(-1, 5)
    host = partition_scalars(host, padding)
    tols, steps, schedules, ds = _plans(systems, rs, host, rtol)
    moved = [i for i, k in enumerate(steps) if k]
    rnorms = host[:, 1].copy()
    if moved:
        chebyshev_sweep([systems[i] for i in moved], [xs[i] for i in moved],
                        [rs[i] for i in moved], [ds[i] for i in moved],
                        [schedules[i] for i in moved])
        ends = [residual_scalars(systems[i], rhss[i], xs[i])[1] for i in moved]
        final = np.stack(backend.to_host_many(ends)).reshape(-1, 5)
        rnorms[moved] = partition_scalars(final, padding)[:, 1]
    seconds = (time.perf_counter() - t0) / len(systems)     # (solved together: shared evenly)
    out = []
    for S, rhs, x, fnorm, rnorm, tol, k in zip(systems, rhss, xs, host[:, 0], rnorms, tols,
                                                steps):
        record = SolveRecord(method="chebyshev", preconditioner="jacobi", rtol=float(rtol),
                             engine="chebyshev")
        record.iterations = k
        record.residual = float(rnorm / fnorm) if fnorm > 0 else 0.0
        record.converged = bool(rnorm <= tol or fnorm == 0.0)
        record.reason = "converged" if record.converged else "maxiter"
        record.solve_seconds = seconds
        if not record.converged:
            x, record = cg(S, rhs, x0=x, rtol=rtol, M=S.jacobi, nullspace=None, engine="generic")
            record.iterations += k
            record.engine = "chebyshev+cg"
        out.append((x, record))
    return out


# The CUDA variants (viscosity_cuda.py and viscosity3_cuda.py, kernels in
# viscosity.cu and viscosity3.cu) of the one-process 2-D and 3-D systems:
# one launch a Chebyshev step (every component in one), two a residual and
# its scalars.
chebyshev_step.register("cupy")(viscosity_cuda.chebyshev_step_nd)
chebyshev_sweep.register("cupy")(viscosity_cuda.chebyshev_sweep_nd)
viscous_residual.register("cupy")(viscosity_cuda.viscous_residual_nd)
residual_scalars.register("cupy")(viscosity_cuda.residual_scalars_nd)
