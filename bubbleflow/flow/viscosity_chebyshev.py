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
(:func:`chebyshev_solves`): their starting norms and interval, the plan of
their steps where those scalars are (:func:`chebyshev_plan`), their steps
(:func:`chebyshev_sweep`), their final residuals.  Each system takes the
steps its start needs (one transfer of the starts' scalars,
:func:`solve_chebyshev`), or a count planned ahead from the previous solve
(:func:`steps_ahead`): then the solve is launches alone, which a CUDA graph
can hold, and its report (the final residuals) is read once after.  Where
a system holds a rank's rows (its ``padding`` a slab's), those scalars are
reduced over the ranks (:func:`partition_totals`) and the CG finish sums
over them (the system's ``comm``).

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

from ..compute.backend import backend_of
from ..compute.twins import twin
from ..linalg.functions import cg
from ..linalg.krylov.record import SolveRecord
from . import chebyshev_launch, viscosity_cuda
from .padding import WallPadding

__all__ = ["MAX_CHEBYSHEV_STEPS", "chebyshev_step", "chebyshev_sweep", "chebyshev_interval",
           "chebyshev_iterations", "chebyshev_schedule", "viscous_residual", "residual_scalars",
           "needed_steps", "chebyshev_plan", "partition_totals", "chebyshev_solves",
           "chebyshev_records", "steps_ahead", "solve_chebyshev"]

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
def chebyshev_sweep(systems, xs, rs, ds, schedule, steps):
    """The Chebyshev steps of several systems, in place on ``xs`` and ``rs``
    (``ds``, the first directions, are overwritten): system ``i`` takes
    ``steps[i]`` steps (:func:`chebyshev_step`) with the ``(keep, gain)``
    pairs ``schedule[i, :steps[i]]`` (``schedule`` an array of the backend,
    systems x width x 2, as :func:`chebyshev_plan` gives).  Returns ``xs``.
    (On the GPU one launch a step serves every velocity component.)"""
    xp = systems[0].xp
    ds = list(ds)
    spare = [xp.empty_like(d) for d in ds]
    for k in range(max(steps, default=0)):
        for i, S in enumerate(systems):
            if k < steps[i]:
                chebyshev_step(S, xs[i], rs[i], ds[i], spare[i], schedule[i, k, 0],
                               schedule[i, k, 1])
                ds[i], spare[i] = spare[i], ds[i]
    return xs


def chebyshev_interval(lo, dmax, dmin):
    """``(a, b, sqrt(max D / min D))`` for the Jacobi-preconditioned system
    from ``lo = min rho_f / D`` and the diagonal's extremes: Gershgorin puts
    the eigenvalues of ``D^-1 S`` in ``[a, 2 - a]`` with ``a = lo`` (every
    row's off-diagonal sum is at most ``D - rho_f``), and the last factor
    turns the ``D^-1``-norm bound into a 2-norm one."""
    with np.errstate(divide="ignore", invalid="ignore"):    # (NaN or inf where D is degenerate)
        return lo, 2.0 - lo, float(np.sqrt(np.float64(dmax) / dmin))


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


def needed_steps(fnorm, rnorm, lo, dmax, dmin, rtol, max_steps=MAX_CHEBYSHEV_STEPS):
    """The Chebyshev steps a system needs from its start (a row of
    :func:`residual_scalars`' five over the whole system) to reach
    ``rtol``: 0 where the start meets it, at most ``max_steps``."""
    tol = rtol * fnorm
    if not rnorm > tol:
        return 0
    try:
        a, b, spread = chebyshev_interval(lo, dmax, dmin)
        return min(chebyshev_iterations(a, b, tol / (rnorm * spread)), max_steps)
    except (ArithmeticError, ValueError):
        return max_steps        # (no interval from these figures: as many as allowed, as on a GPU)


@twin
def chebyshev_plan(totals, rtol, width, max_steps):
    """``(schedule, first, needed)`` of the systems whose rows of ``totals``
    are :func:`residual_scalars`' five over the whole systems, as arrays of
    ``totals``' backend: per system the first ``width`` coefficients of its
    recurrence (:func:`chebyshev_schedule`; systems x width x 2), the factor
    of its first direction, and the steps it needs (:func:`needed_steps`
    with ``max_steps``, as float64).  (The GPU computes them where the scalars are: a solve
    planned ahead reads nothing on the host.)"""
    backend = backend_of(totals)
    host = np.asarray(backend.to_host(totals), dtype=np.float64).reshape(-1, 5)
    schedule = np.zeros((len(host), width, 2))
    first, needed = np.zeros(len(host)), np.zeros(len(host))
    for i, (fnorm, rnorm, lo, dmax, dmin) in enumerate(host):
        # (NumPy's scalars: a degenerate interval gives inf and NaN, as on a GPU.)
        with np.errstate(all="ignore"):
            a, b, _ = chebyshev_interval(lo, dmax, dmin)
            first[i], rows = chebyshev_schedule(a, b, width)
        schedule[i] = rows
        needed[i] = needed_steps(fnorm, rnorm, lo, dmax, dmin, rtol, max_steps)
    return tuple(backend.asarray(a) for a in (schedule, first, needed))


def partition_totals(scalars, padding):
    """The systems' scalars (rows of :func:`residual_scalars`' five, an
    array of the backend) of the whole systems, from those of the rows
    ``padding``'s part holds: on a slab (:class:`.slabs.SlabPadding`) the
    norms' squares summed over the ranks (``padding.total``) and the
    extremes taken over them, where they are (NCCL reduces on the device);
    on the walls' padding (one process) the rows as they are, the whole
    systems' already (squaring a norm and taking the root again would
    round it)."""
    if isinstance(padding, WallPadding):
        return scalars
    xp = backend_of(scalars).xp
    norms = xp.sqrt(padding.total(scalars[:, :2] ** 2))
    # The minima as the maxima of their negatives: one collective.
    signed = xp.stack([-scalars[:, 2], scalars[:, 3], -scalars[:, 4]], axis=1)
    peaks = xp.empty_like(signed)
    padding.comm.allreduce_max_into(signed, peaks)
    return xp.stack([norms[:, 0], norms[:, 1], -peaks[:, 0], peaks[:, 1], -peaks[:, 2]], axis=1)


def chebyshev_solves(systems, rhss, x0s, rtol, steps=None):
    """The Chebyshev steps of the systems side by side: ``(xs, report,
    counts)``, ``xs`` the solutions (flat), ``report`` an array of the
    backend with a row per system, ``[||rhs||, ||rhs - S x||, steps
    needed]`` over the whole systems, ``counts`` the steps each took.
    ``steps`` given: every system takes that many (a solve planned ahead:
    launches only, nothing read on the host, so a CUDA graph can hold it);
    None: each takes the steps its start needs (one transfer of the
    starts' scalars).  ``rhss`` flat; ``x0s`` the starting guesses, any
    shape of the rows' size (copied, not changed).  The systems share one
    partition (``systems[0].padding``)."""
    xp = systems[0].xp
    backend, padding = systems[0].backend, systems[0].padding
    xs = [xp.array(x0, dtype=np.float64).reshape(-1) for x0 in x0s]    # (a copy, flat)
    starts = [residual_scalars(S, rhs, x) for S, rhs, x in zip(systems, rhss, xs)]
    rs = [r for r, _ in starts]
    totals = partition_totals(xp.stack([sc for _, sc in starts]), padding)
    if steps is None:
        counts = [needed_steps(*row, rtol) for row in backend.to_host(totals).reshape(-1, 5)]
    else:
        counts = [int(steps)] * len(systems)
    schedule, first, needed = chebyshev_plan(totals, rtol, max(max(counts), 1),
                                             MAX_CHEBYSHEV_STEPS)
    if max(counts):
        ds = [first[i] * (S.inv_diagonal * r) for i, (S, r) in enumerate(zip(systems, rs))]
        chebyshev_sweep(systems, xs, rs, ds, schedule, counts)
    ends = partition_totals(xp.stack([residual_scalars(S, rhs, x)[1]
                                      for S, rhs, x in zip(systems, rhss, xs)]), padding)
    return xs, xp.stack([totals[:, 0], ends[:, 1], needed], axis=1), counts


def chebyshev_records(report, counts, rtol, seconds=0.0):
    """The :class:`~bubbleflow.linalg.krylov.record.SolveRecord` of each
    system from :func:`chebyshev_solves`' ``report`` read on the host and
    its ``counts`` (``engine`` ``"chebyshev"``; ``converged`` where the
    residual meets ``rtol``)."""
    records = []
    for (fnorm, rnorm, _), k in zip(np.asarray(report).reshape(-1, 3), counts):
        record = SolveRecord(method="chebyshev", preconditioner="jacobi", rtol=float(rtol),
                             engine="chebyshev")
        record.iterations = int(k)
        record.residual = float(rnorm / fnorm) if fnorm > 0 else 0.0
        record.converged = bool(rnorm <= rtol * fnorm or fnorm == 0.0)
        record.reason = "converged" if record.converged else "maxiter"
        record.solve_seconds = seconds
        records.append(record)
    return records


def steps_ahead(needed):
    """The steps to plan the next solve with from the most steps this
    solve's systems needed: one more, rounded up to a multiple of an
    eighth of the power of two below it (at most an eighth more steps; the
    count holds over a run's slow changes, so the graphs that hold it stay
    few)."""
    k = int(needed) + 1
    if k <= 8:
        return k
    unit = 1 << (k.bit_length() - 4)
    return -(-k // unit) * unit


def solve_chebyshev(systems, rhss, x0s, rtol):
    """Each ``S x = rhs`` to ``||rhs - S x|| <= rtol ||rhs||`` (over the
    ranks, on slabs), each system with the steps its start needs
    (:func:`chebyshev_solves`); returns a list of ``(x, record)``, ``x``
    the system's rows (flat), ``record`` a
    :class:`~bubbleflow.linalg.krylov.record.SolveRecord` (``engine``
    ``"chebyshev"``, or ``"chebyshev+cg"`` where CG finished; the same on
    every rank)."""
    t0 = time.perf_counter()
    xs, report, counts = chebyshev_solves(systems, rhss, x0s, rtol)
    report = systems[0].backend.to_host(report)
    seconds = (time.perf_counter() - t0) / len(systems)     # (solved together: shared evenly)
    out = []
    for S, rhs, x, record in zip(systems, rhss, xs,
                                 chebyshev_records(report, counts, rtol, seconds)):
        if not record.converged:
            k = record.iterations
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
chebyshev_plan.register("cupy")(chebyshev_launch.chebyshev_plan)
viscous_residual.register("cupy")(viscosity_cuda.viscous_residual_nd)
residual_scalars.register("cupy")(viscosity_cuda.residual_scalars_nd)
