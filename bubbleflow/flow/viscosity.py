"""The variable-viscosity stress of the momentum equation, explicit or implicit.

The stress ``div(2 mu D)`` acting on the x velocity ``u`` (on the vertical
faces) is ``d/dx(2 mu du/dx) + d/dy(mu du/dy) + d/dy(mu dv/dx)``; on ``v``
(horizontal faces) ``d/dy(2 mu dv/dy) + d/dx(mu dv/dx) + d/dx(mu du/dy)``.
Normal stresses live at cell centres (``mu``), shear stresses at cell corners
(``mu_n``, the mean of the four cells around a corner, walls by edge copy).

Implicit (backward Euler), each component solves

    (rho_f - dt L) u* = rho_f u^n + dt (explicit terms + cross term)

where ``L`` is the component's own part of the stress (the first two terms
above) and the cross term (the third) is taken from the old velocity: the
two components decouple into two symmetric positive definite systems, solved
by Jacobi-preconditioned Chebyshev iteration (:func:`solve_viscous`: no inner
products, one launch per step on the GPU; CG finishes should rounding leave
it short).  Walls: zero
normal velocity on the wall faces; tangential velocity by one ghost layer,
mirrored with the sign ``s`` (-1 no-slip, +1 free-slip), which folds into
the diagonal and keeps ``L`` symmetric.  Without the viscous limit the step
is set by the convective and capillary ones (Hysing case 2: viscosity ratio
100, where the explicit limit ``dt <= 0.2 h^2 / nu`` dominated).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..compute.backend import backend_of
from ..compute.twins import twin
from ..linalg.functions import cg
from ..linalg.krylov.record import SolveRecord
from . import viscosity_cuda

__all__ = ["corner_viscosity", "ViscousSystem", "solve_viscous", "solve_viscous_systems",
           "chebyshev_step", "chebyshev_sweep", "chebyshev_interval", "chebyshev_iterations",
           "chebyshev_schedule", "residual_scalars"]


def corner_viscosity(mu, xp):
    """``mu`` at the cell corners ``(ny+1, nx+1)``: the mean of the four
    cells around each corner (edge-copied at the walls)."""
    ny, nx = mu.shape
    mp = xp.empty((ny + 2, nx + 2), dtype=mu.dtype)      # edge padding (xp.pad's, sans overhead)
    mp[1:-1, 1:-1] = mu
    mp[0, 1:-1], mp[-1, 1:-1] = mu[0], mu[-1]
    mp[:, 0], mp[:, -1] = mp[:, 1], mp[:, -2]
    return 0.25 * (mp[:-1, :-1] + mp[1:, :-1] + mp[:-1, 1:] + mp[1:, 1:])


class ViscousSystem:
    """``S x = rho_f x - dt L x`` for one velocity component on its interior faces.

    Parameters
    ----------
    component : {"u", "v"}
    mu : array (ny, nx)
        Cell viscosity.
    mu_n : array (ny+1, nx+1) or None
        Corner viscosity (None: :func:`corner_viscosity` of ``mu``).
    rho_f : array
        Face density on the component's interior faces: ``(ny, nx-1)`` for
        ``u``, ``(ny-1, nx)`` for ``v``.
    dt, hx, hy : float
    signs : (float, float)
        Ghost signs across the component's tangential walls: ``(bottom,
        top)`` for ``u``, ``(left, right)`` for ``v``.

    ``matvec`` takes and returns flat arrays (what the Krylov loop uses);
    ``inv_diagonal`` is the Jacobi preconditioner.
    """

    nullspace = None            # rho_f > 0: definite

    def __init__(self, component, mu, mu_n, rho_f, dt, hx, hy, signs):
        if component not in ("u", "v"):
            raise ValueError(f"component {component!r}; expected 'u' or 'v'")
        self.backend = backend_of(mu)
        self.xp = self.backend.xp
        self.component, self.shape2d = component, rho_f.shape
        self.shape = (rho_f.size, rho_f.size)
        self.dtype = np.dtype(rho_f.dtype)
        self.dt, self.hx, self.hy = float(dt), float(hx), float(hy)
        self.s_low, self.s_high = (float(s) for s in signs)
        self.rho_f = rho_f
        (self.k_plus, self.k_minus, self.t_plus, self.t_minus, self.diagonal,
         self.inv_diagonal) = viscous_coefficients(component, mu, mu_n, rho_f, self.dt, self.hx,
                                                   self.hy, self.s_low, self.s_high)

    def matvec(self, x):
        """``S x`` (flat in, flat out)."""
        xp = self.xp
        x = x.reshape(self.shape2d)
        zero = xp.zeros_like(x[:1, :]) if self.component == "v" else xp.zeros_like(x[:, :1])
        if self.component == "u":
            # Wall faces (zero normal velocity) beside the first and last faces.
            xm = xp.concatenate([zero, x[:, :-1]], axis=1)
            xq = xp.concatenate([x[:, 1:], zero], axis=1)
            ym = xp.concatenate([self.s_low * x[:1, :], x[:-1, :]], axis=0)
            yq = xp.concatenate([x[1:, :], self.s_high * x[-1:, :]], axis=0)
        else:
            xm = xp.concatenate([zero, x[:-1, :]], axis=0)
            xq = xp.concatenate([x[1:, :], zero], axis=0)
            ym = xp.concatenate([self.s_low * x[:, :1], x[:, :-1]], axis=1)
            yq = xp.concatenate([x[:, 1:], self.s_high * x[:, -1:]], axis=1)
        Lx = (self.k_plus * (xq - x) - self.k_minus * (x - xm)
              + self.t_plus * (yq - x) - self.t_minus * (x - ym))
        return (self.rho_f * x - Lx).ravel()

    def jacobi(self, r):
        """``D^-1 r``: the preconditioner."""
        return self.inv_diagonal * r



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
    launch per step serves both velocity components.)"""
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
def viscous_coefficients(component, mu, mu_n, rho_f, dt, hx, hy, s_low, s_high):
    """The couplings of :class:`ViscousSystem` on the component's interior
    faces: ``(k_plus, k_minus, t_plus, t_minus, diagonal, inv_diagonal)``
    (the last flat).  ``mu_n`` None: :func:`corner_viscosity` of ``mu``."""
    xp = backend_of(mu).xp
    if mu_n is None:
        mu_n = corner_viscosity(mu, xp)
    c = dt
    if component == "u":
        # Normal stress along x at the cells east and west of each face;
        # shear along y at the corners above and below.
        k_plus = c * 2.0 * mu[:, 1:] / hx ** 2
        k_minus = c * 2.0 * mu[:, :-1] / hx ** 2
        t_plus = c * mu_n[1:, 1:-1] / hy ** 2
        t_minus = c * mu_n[:-1, 1:-1] / hy ** 2
        first, last = (slice(0, 1), slice(None)), (slice(-1, None), slice(None))
    else:
        k_plus = c * 2.0 * mu[1:, :] / hy ** 2
        k_minus = c * 2.0 * mu[:-1, :] / hy ** 2
        t_plus = c * mu_n[1:-1, 1:] / hx ** 2
        t_minus = c * mu_n[1:-1, :-1] / hx ** 2
        first, last = (slice(None), slice(0, 1)), (slice(None), slice(-1, None))
    diag = rho_f + k_plus + k_minus + t_plus + t_minus
    # The ghost across a tangential wall is s x: its coupling folds into the
    # diagonal, -t (s x - x) = t (1 - s) x, in place of t x.
    diag[first] += t_minus[first] * (-s_low)
    diag[last] += t_plus[last] * (-s_high)
    return k_plus, k_minus, t_plus, t_minus, diag, (1.0 / diag).ravel()


@twin
def viscous_residual(S, rhs, x):
    """``rhs - S x`` (flat)."""
    return rhs - S.matvec(x)


@twin
def residual_scalars(S, rhs, x):
    """``(r, scalars)``: the residual ``rhs - S x`` (flat) and, on the
    device, ``[||rhs||, ||r||, min rho_f / D, max D, min D]``: what the
    Chebyshev solve reads (:func:`chebyshev_interval`), in one transfer."""
    xp = S.xp
    r = viscous_residual(S, rhs, x)
    d = S.diagonal.ravel()
    return r, xp.stack([xp.sqrt((rhs * rhs).sum()), xp.sqrt((r * r).sum()),
                        (S.rho_f.ravel() / d).min(), d.max(), d.min()])


def solve_viscous(S, rhs, x0, rtol):
    """``S x = rhs`` to ``||rhs - S x|| <= rtol ||rhs||``; returns ``(x, record)``
    (:func:`solve_viscous_systems` for one system)."""
    return solve_viscous_systems([S], [rhs], [x0], rtol)[0]


def solve_viscous_systems(systems, rhss, x0s, rtol, reduce=None):
    """Each ``S x = rhs`` to ``||rhs - S x|| <= rtol ||rhs||``; returns a list
    of ``(x, record)`` (:class:`~bubbleflow.linalg.krylov.record.SolveRecord`,
    ``engine`` ``"chebyshev"``).  ``rhss`` flat; ``x0s`` the starting guesses,
    any shape of the system's size (copied, not changed).

    Jacobi-preconditioned Chebyshev iteration on the Gershgorin interval
    (:func:`chebyshev_interval`): no inner products, so no host
    synchronisation inside the iteration.  The step count follows from the
    interval and the starting residual, and bounds the 2-norm residual.  The
    systems (the velocity components) are solved side by side: one transfer
    of every system's starting norms and interval, their steps
    (:func:`chebyshev_sweep`), one transfer of their final residuals.  Should
    rounding leave a system above its tolerance, the preconditioned CG
    (:func:`bubbleflow.cg`) finishes it from there.  ``reduce``: the
    systems' scalars (host, a row of :func:`residual_scalars`' five per
    system) made the whole systems' where each holds a rank's rows
    (:mod:`.viscosity_ranks`).
    """
    t0 = time.perf_counter()
    xp = systems[0].xp
    backend = systems[0].backend
    xs = [xp.array(x0, dtype=np.float64).reshape(-1) for x0 in x0s]    # (a copy, flat)
    starts = [residual_scalars(S, rhs, x) for S, rhs, x in zip(systems, rhss, xs)]
    rs = [r for r, _ in starts]
    host = np.stack(backend.to_host_many([sc for _, sc in starts])).reshape(-1, 5)
    if reduce is not None:
        host = reduce(host)
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
    moved = [i for i, k in enumerate(steps) if k]
    rnorms = host[:, 1].copy()
    if moved:
        chebyshev_sweep([systems[i] for i in moved], [xs[i] for i in moved],
                        [rs[i] for i in moved], [ds[i] for i in moved],
                        [schedules[i] for i in moved])
        ends = [residual_scalars(systems[i], rhss[i], xs[i])[1] for i in moved]
        final = np.stack(backend.to_host_many(ends)).reshape(-1, 5)
        rnorms[moved] = (final if reduce is None else reduce(final))[:, 1]
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


# The CUDA variants (viscosity_cuda.py, kernels in viscosity.cu): one launch per
# Chebyshev step (both components in one), two per residual and its scalars.
chebyshev_step.register("cupy")(viscosity_cuda.chebyshev_step)
chebyshev_sweep.register("cupy")(viscosity_cuda.chebyshev_sweep)
viscous_coefficients.register("cupy")(viscosity_cuda.viscous_coefficients)
viscous_residual.register("cupy")(viscosity_cuda.viscous_residual)
residual_scalars.register("cupy")(viscosity_cuda.residual_scalars)
