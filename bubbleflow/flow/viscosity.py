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

__all__ = ["corner_viscosity", "ViscousSystem", "solve_viscous",
           "chebyshev_step", "chebyshev_bounds", "chebyshev_iterations"]


def corner_viscosity(mu, xp):
    """``mu`` at the cell corners ``(ny+1, nx+1)``: the mean of the four
    cells around each corner (edge-copied at the walls)."""
    mp = xp.pad(mu, 1, mode="edge")
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


def chebyshev_bounds(S):
    """``(a, b, sqrt(max D / min D))`` for the Jacobi-preconditioned ``S``:
    Gershgorin puts the eigenvalues of ``D^-1 S`` in ``[a, 2 - a]`` with ``a
    = min rho_f / D`` (every row's off-diagonal sum is at most ``D - rho_f``),
    and the last factor turns the ``D^-1``-norm bound into a 2-norm one.
    One transfer."""
    xp = S.xp
    d = S.diagonal
    lo, dmax, dmin = (float(v) for v in S.backend.to_host(
        xp.stack([(S.rho_f / d).min(), d.max(), d.min()])))
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


def solve_viscous(S, rhs, x0, rtol):
    """``S x = rhs`` to ``||rhs - S x|| <= rtol ||rhs||``; returns ``(x, record)``
    (a :class:`~bubbleflow.linalg.krylov.record.SolveRecord`, ``engine``
    ``"chebyshev"``).

    Jacobi-preconditioned Chebyshev iteration on the Gershgorin interval
    (:func:`chebyshev_bounds`): no inner products, so no host
    synchronisation inside the iteration, one launch per step on the GPU.
    The step count follows from the interval and the starting residual, and
    bounds the 2-norm residual; the true residual is checked once at the
    end, and should rounding have left it above the tolerance the
    preconditioned CG (:func:`bubbleflow.cg`) finishes from there.
    """
    t0 = time.perf_counter()
    xp = S.xp
    x = xp.array(x0, dtype=np.float64)
    r = viscous_residual(S, rhs, x)
    fnorm, rnorm = (float(v) for v in S.backend.to_host(
        xp.sqrt(xp.stack([(rhs * rhs).sum(), (r * r).sum()]))))
    record = SolveRecord(method="chebyshev", preconditioner="jacobi", rtol=float(rtol),
                         engine="chebyshev")
    tol = rtol * fnorm
    steps = 0
    if rnorm > tol:
        a, b, spread = chebyshev_bounds(S)
        steps = min(chebyshev_iterations(a, b, tol / (rnorm * spread)), MAX_CHEBYSHEV_STEPS)
        theta, delta = 0.5 * (b + a), 0.5 * (b - a)
        sigma1 = theta / delta
        rho_k = 1.0 / sigma1
        d = (1.0 / theta) * (S.inv_diagonal * r)
        d_new = xp.empty_like(d)
        for _ in range(steps):
            rho_next = 1.0 / (2.0 * sigma1 - rho_k)
            chebyshev_step(S, x, r, d, d_new, rho_next * rho_k, 2.0 * rho_next / delta)
            d, d_new, rho_k = d_new, d, rho_next
        res = viscous_residual(S, rhs, x)
        rnorm = float(S.backend.to_host(xp.sqrt((res * res).sum())))
    record.iterations = steps
    record.residual = rnorm / fnorm if fnorm > 0 else 0.0
    record.converged = rnorm <= tol or fnorm == 0.0
    record.reason = "converged" if record.converged else "maxiter"
    record.solve_seconds = time.perf_counter() - t0
    if record.converged:
        return x, record
    x, finish = cg(S, rhs, x0=x, rtol=rtol, M=S.jacobi, nullspace=None, engine="generic")
    finish.iterations += steps
    finish.engine = "chebyshev+cg"
    return x, finish


# The CUDA variant (viscosity_cuda.py, kernel in viscosity.cu): one launch per step.
chebyshev_step.register("cupy")(viscosity_cuda.chebyshev_step)
viscous_coefficients.register("cupy")(viscosity_cuda.viscous_coefficients)
viscous_residual.register("cupy")(viscosity_cuda.viscous_residual)
