"""Incompressible two-phase Navier-Stokes on a MAC grid with a level set.

One time step (Chorin projection, explicit in time):

1. fluid properties from the level set: smoothed Heaviside (epsilon = 1.5 h)
   for the density and viscosity, curvature from phi;
2. provisional velocity ``u* = u + dt (-(u.grad)u + div(2 mu D)/rho + g + f_st/rho)``
   with second-order central differences, the variable-viscosity stress in
   divergence form and the surface tension as a balanced-force CSF term
   ``f_st = -sigma kappa grad H`` evaluated on the faces, where the
   pressure gradient lives;
3. pressure: ``-div((1/rho) grad p) = -div(u*)/dt`` solved by the core
   solver (warm-started from the previous pressure; the operator rebuilt and
   the run's one pressure solver updated for the moved interface:
   preconditioner, deflation space and coarse factorisation, their set-up
   timed);
4. correction ``u = u* - dt/rho grad p`` (exactly divergence-free up to the
   solver tolerance);
5. the level set is advected with the new velocity (WENO5 + TVD-RK3) and
   reinitialised every few steps.

Grid layout: ``p, phi`` at cell centres ``(ny, nx)``; ``u`` on vertical faces
``(ny, nx+1)``, ``v`` on horizontal faces ``(ny+1, nx)``; wall faces carry
zero normal velocity.  Tangential wall conditions enter through one ghost
layer: no-slip mirrors with a sign change, free-slip mirrors.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..case.config import viscosity_scheme
from ..mesh.grid import Grid
from ..mesh.levelset import build_levelset, geometry_circles, heaviside
from ..operators.poisson import PoissonOperator
from ..linalg.solver import PressureSolver
from . import levelset_ops
from .viscosity import ViscousSystem, corner_viscosity, shear_x, shear_y, solve_viscous

__all__ = ["FlowState", "FlowSolver", "StepReport"]


@dataclass
class FlowState:
    """Everything a restart needs: fields (on the backend) and the clock."""

    phi: object
    u: object
    v: object
    p: object
    time: float = 0.0
    step: int = 0


@dataclass
class StepReport:
    """What one time step did (host scalars)."""

    step: int
    time: float
    dt: float
    record: object          # SolveRecord of the pressure solve
    setup_seconds: float    # operator + preconditioner + deflation for this interface
    divergence: float       # ||div u|| / ||div u*||
    diagnostics: dict
    phases: dict = None     # seconds per phase, when the solver's phase clock is on


class PhaseClock:
    """Wall time of the phases of a step, for profiling.

    Off (the default) it does nothing: no synchronisation, no clock read,
    and the step's work and results are the same.  On, every :meth:`mark`
    waits for the device, so that each phase is charged with its own device
    work, and adds the time since the previous mark to that phase.
    """

    def __init__(self, backend, enabled=False):
        self.backend, self.enabled = backend, enabled
        self.seconds, self._last = {}, None

    def start(self):
        if self.enabled:
            self.seconds = {}
            self.backend.synchronize()
            self._last = time.perf_counter()

    def mark(self, phase):
        if self.enabled:
            self.backend.synchronize()
            now = time.perf_counter()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
            self._last = now


class FlowSolver:
    """Time stepper for a validated ``mode: flow`` case on a backend."""

    def __init__(self, case, backend):
        self.case = case
        self.backend = backend
        self.xp = backend.xp
        self.grid = Grid.from_config(case.grid)
        g = self.grid
        self.hx, self.hy = g.hx, g.hy
        self.h = min(g.hx, g.hy)
        self.eps = 1.5 * max(g.hx, g.hy)
        fl = case.fluids
        self.rho_l, self.rho_g = fl.liquid.density, fl.gas.density
        self.mu_l, self.mu_g = fl.liquid.viscosity, fl.gas.viscosity
        self.gravity = case.physics.gravity
        self.sigma = case.physics.surface_tension
        b = case.boundaries
        # Ghost-layer sign of the tangential velocity: -1 no-slip, +1 free-slip.
        sign = {"no_slip": -1.0, "free_slip": 1.0}
        self.s_left, self.s_right = sign[b.left], sign[b.right]
        self.s_bottom, self.s_top = sign[b.bottom], sign[b.top]
        # Fields are float64 whatever ``precision``: it selects the pressure
        # solver's arithmetic (float32 inner iterations refined in float64).
        self.dtype = np.dtype(np.float64)
        self.yc = self.xp.asarray(g.y, dtype=self.dtype)[:, None]
        # Interior horizontal faces' heights (the v faces between rows).
        self.yf = self.xp.asarray(np.arange(1, g.ny) * g.hy, dtype=self.dtype)[:, None]
        mom = case.momentum
        self.implicit_viscosity = viscosity_scheme(case) == "implicit"
        self.reduced_gravity = mom.gravity == "reduced"
        # Reduced gravity: p_d = p - rho g.(x - x0), with x0 on the free
        # surface when there is one (a flat surface at rest then carries no
        # force and p_d ~ 0 in the liquid), else on the bottom wall.
        fs = case.geometry.free_surface
        self.y0 = float(fs) if fs is not None else 0.0
        self.buoyancy = self.gravity * (self.rho_l - self.rho_g)
        self.viscous_records = None
        # The pressure solver: built once per run, updated every step.
        self._pressure = None
        # Per-phase timing of the steps (off: no cost, see PhaseClock).
        self.clock = PhaseClock(backend)

    # ------------------------------------------------------------------ state
    def initial_state(self):
        """Fluid at rest, interface from the case geometry."""
        g, xp = self.grid, self.xp
        circles = geometry_circles(self.case.geometry, g)
        phi = build_levelset(g, self.case.geometry.free_surface, circles)
        return FlowState(phi=xp.asarray(phi, dtype=self.dtype),
                         u=xp.zeros((g.ny, g.nx + 1), dtype=self.dtype),
                         v=xp.zeros((g.ny + 1, g.nx), dtype=self.dtype),
                         p=xp.zeros((g.ny, g.nx), dtype=self.dtype))

    # ------------------------------------------------------------- properties
    def properties(self, phi):
        """Cell density and viscosity, face densities (interior faces)."""
        xp = self.xp
        H = heaviside(phi, self.eps, xp)
        rho = self.rho_g + (self.rho_l - self.rho_g) * H
        mu = self.mu_g + (self.mu_l - self.mu_g) * H
        rule = self.case.operator.face_density
        if rule == "levelset":
            Hx = heaviside(0.5 * (phi[:, 1:] + phi[:, :-1]), self.eps, xp)
            Hy = heaviside(0.5 * (phi[1:, :] + phi[:-1, :]), self.eps, xp)
            rho_x = self.rho_g + (self.rho_l - self.rho_g) * Hx
            rho_y = self.rho_g + (self.rho_l - self.rho_g) * Hy
        elif rule == "harmonic":
            rho_x = 2 * rho[:, 1:] * rho[:, :-1] / (rho[:, 1:] + rho[:, :-1])
            rho_y = 2 * rho[1:, :] * rho[:-1, :] / (rho[1:, :] + rho[:-1, :])
        else:
            rho_x = 0.5 * (rho[:, 1:] + rho[:, :-1])
            rho_y = 0.5 * (rho[1:, :] + rho[:-1, :])
        return H, rho, mu, rho_x, rho_y

    # --------------------------------------------------------------- time step
    def stable_dt(self, state, rho=None, mu=None):
        """Smallest of the convective, viscous, capillary and gravity limits."""
        t = self.case.time
        if t.dt is not None:
            return float(t.dt)
        xp, h = self.xp, self.h
        if rho is None:
            _, rho, mu, _, _ = self.properties(state.phi)
        # The maxima in one transfer (one host synchronisation).
        maxima = [xp.abs(state.u).max(), xp.abs(state.v).max()]
        if not self.implicit_viscosity:
            maxima.append((mu / rho).max())
        maxima = self.backend.to_host(xp.stack(maxima))
        umax = max(float(maxima[0]), float(maxima[1]), 1e-12)
        limits = [t.cfl * h / umax]
        if not self.implicit_viscosity:
            nu = float(maxima[2])
            limits.append(0.2 * h * h / nu)                  # explicit viscous (2-D: < h^2/4nu)
        if self.sigma > 0:
            rho_avg = 0.5 * (self.rho_l + self.rho_g)
            limits.append(math.sqrt(rho_avg * h ** 3 / (2 * math.pi * self.sigma)))
        if self.gravity > 0:
            limits.append(math.sqrt(h / self.gravity))          # free fall over one cell
        if t.dt_max is not None:
            limits.append(t.dt_max)
        return min(limits)

    # ---------------------------------------------------------------- momentum
    def _ghosts(self, u, v):
        """u with ghost rows (ny+2, nx+1), v with ghost columns (ny+1, nx+2)."""
        xp = self.xp
        ug = xp.concatenate([self.s_bottom * u[:1], u, self.s_top * u[-1:]], axis=0)
        vg = xp.concatenate([self.s_left * v[:, :1], v, self.s_right * v[:, -1:]], axis=1)
        return ug, vg

    def provisional_velocity(self, state, dt, H, rho, mu, rho_x, rho_y):
        """``u*`` on the interior faces (walls keep zero normal velocity):
        advection explicit, the viscous stress explicit or implicit
        (``momentum.viscosity``), gravity volumetric or at the interface
        (``momentum.gravity``)."""
        if self.implicit_viscosity:
            return self._implicit_velocity(state, dt, H, mu, rho_x, rho_y)
        xp = self.xp
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        ug, vg = self._ghosts(u, v)
        ui, vi = u[:, 1:-1], v[1:-1, :]
        adv_u, adv_v = self._advection(u, v, ug, vg, rho_x, rho_y, mu)
        # Viscous stresses: normal ones at cell centres, shear at cell corners.
        txx = 2 * mu * (u[:, 1:] - u[:, :-1]) / hx
        tyy = 2 * mu * (v[1:, :] - v[:-1, :]) / hy
        mu_n = corner_viscosity(mu, xp)
        txy = mu_n * ((ug[1:, :] - ug[:-1, :]) / hy + (vg[:, 1:] - vg[:, :-1]) / hx)
        visc_u = (txx[:, 1:] - txx[:, :-1]) / hx + (txy[1:, 1:-1] - txy[:-1, 1:-1]) / hy
        visc_v = (txy[1:-1, 1:] - txy[1:-1, :-1]) / hx + (tyy[1:, :] - tyy[:-1, :]) / hy
        force_u, force_v = self._interface_forces(state.phi, H, visc_u, visc_v)
        us = u.copy()
        vs = v.copy()
        us[:, 1:-1] = ui + dt * (-adv_u + force_u / rho_x)
        if self.reduced_gravity:
            vs[1:-1, :] = vi + dt * (-adv_v + force_v / rho_y)
        else:
            vs[1:-1, :] = vi + dt * (-adv_v + force_v / rho_y - self.gravity)
        return us, vs

    def _implicit_velocity(self, state, dt, H, mu, rho_x, rho_y):
        """``u*`` with the viscous stress backward Euler (:mod:`.viscosity`)."""
        xp = self.xp
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        ug, vg = self._ghosts(u, v)
        ui, vi = u[:, 1:-1], v[1:-1, :]
        adv_u, adv_v = self._advection(u, v, ug, vg, rho_x, rho_y, mu)
        mu_n = corner_viscosity(mu, xp)
        # The cross-derivative shear terms, from the old velocity.
        sx = shear_x(mu_n, vg, hx)
        sy = shear_y(mu_n, ug, hy)
        cross_u = (sx[1:, 1:-1] - sx[:-1, 1:-1]) / hy
        cross_v = (sy[1:-1, 1:] - sy[1:-1, :-1]) / hx
        force_u, force_v = self._interface_forces(state.phi, H, cross_u, cross_v)
        # The old pressure gradient joins the forces for the viscous solve and
        # leaves after it (as Basilisk's centred solver does): the solve then
        # sees forces and pressure nearly in balance, and does not smear the
        # large balanced parts (the surface tension and reduced-gravity jumps
        # against the pressure's), which the projection could no longer
        # remove exactly.
        p = state.p
        grad_u = (p[:, 1:] - p[:, :-1]) / hx
        grad_v = (p[1:, :] - p[:-1, :]) / hy
        rhs_u = rho_x * (ui - dt * adv_u) + dt * (force_u - grad_u)
        rhs_v = rho_y * (vi - dt * adv_v) + dt * (force_v - grad_v)
        if not self.reduced_gravity:
            rhs_v = rhs_v - dt * self.gravity * rho_y
        us = u.copy()
        vs = v.copy()
        systems = (("u", rho_x, rhs_u, ui, (self.s_bottom, self.s_top), us[:, 1:-1]),
                   ("v", rho_y, rhs_v, vi, (self.s_left, self.s_right), vs[1:-1, :]))
        records = []
        for name, rho_f, rhs, old, signs, out in systems:
            S = ViscousSystem(name, mu, mu_n, rho_f, dt, hx, hy, signs)
            x, rec = solve_viscous(S, rhs.ravel(), old.ravel(), self.case.momentum.viscous_rtol)
            if not rec.converged:
                raise FloatingPointError(
                    f"the implicit viscous solve for {name} did not converge at t = "
                    f"{state.time:.6g}: {rec.reason} after {rec.iterations} iterations, "
                    f"relative residual {rec.residual:.3g}")
            out[...] = x.reshape(out.shape)
            records.append(rec)
        us[:, 1:-1] += dt * grad_u / rho_x
        vs[1:-1, :] += dt * grad_v / rho_y
        self.viscous_records = records
        return us, vs

    def _interface_forces(self, phi, H, force_u, force_v):
        """``force_u, force_v`` plus the interface terms on the faces: the
        balanced-force surface tension ``-sigma kappa grad H`` and, with
        reduced gravity, ``(rho_l - rho_g) G (y - y0) grad H``: both on the
        discrete gradient of ``H`` the pressure correction uses."""
        hx, hy = self.hx, self.hy
        cx = cy = None
        if self.sigma > 0:
            kappa = levelset_ops.curvature(phi, hx, hy)
            cx = self.sigma * (0.5 * (kappa[:, 1:] + kappa[:, :-1]))
            cy = self.sigma * (0.5 * (kappa[1:, :] + kappa[:-1, :]))
        if self.reduced_gravity and self.gravity > 0:
            # The potential rho g.(x - x0) per unit density jump, at the faces.
            gx = self.buoyancy * (self.yc - self.y0)
            gy = self.buoyancy * (self.yf - self.y0)
            cx = -gx if cx is None else cx - gx
            cy = -gy if cy is None else cy - gy
        if cx is None:
            return force_u, force_v
        return (force_u - cx * (H[:, 1:] - H[:, :-1]) / hx,
                force_v - cy * (H[1:, :] - H[:-1, :]) / hy)

    def _advection(self, u, v, ug, vg, rho_x, rho_y, mu):
        """``(u.grad) u`` on the interior u and v faces."""
        hx, hy = self.hx, self.hy
        # Advection, hybrid scheme (Spalding): central differences where the
        # cell Reynolds number rho |u| h / mu is at most 2 (second order, and
        # stable there: the viscous benchmark flows are central everywhere),
        # first-order upwind where it is larger (water and air at the grid
        # scale), which keeps the explicit step stable.
        ui = u[:, 1:-1]
        v_at_u = 0.25 * (v[:-1, :-1] + v[:-1, 1:] + v[1:, :-1] + v[1:, 1:])
        mu_x = 0.5 * (mu[:, 1:] + mu[:, :-1])
        dudx = self._hybrid(u[:, :-2], ui, u[:, 2:], ui, hx, rho_x, mu_x)
        dudy = self._hybrid(ug[:-2, 1:-1], ui, ug[2:, 1:-1], v_at_u, hy, rho_x, mu_x)
        adv_u = ui * dudx + v_at_u * dudy
        vi = v[1:-1, :]
        u_at_v = 0.25 * (u[:-1, :-1] + u[:-1, 1:] + u[1:, :-1] + u[1:, 1:])
        mu_y = 0.5 * (mu[1:, :] + mu[:-1, :])
        dvdy = self._hybrid(v[:-2, :], vi, v[2:, :], vi, hy, rho_y, mu_y)
        dvdx = self._hybrid(vg[1:-1, :-2], vi, vg[1:-1, 2:], u_at_v, hx, rho_y, mu_y)
        adv_v = u_at_v * dvdx + vi * dvdy
        return adv_u, adv_v

    def _hybrid(self, minus, centre, plus, velocity, h, rho, mu):
        """d/dx of a face velocity: central, or upwind where rho |c| h / mu > 2."""
        xp = self.xp
        central = (plus - minus) / (2 * h)
        upwind = xp.where(velocity > 0, centre - minus, plus - centre) / h
        return xp.where(rho * xp.abs(velocity) * h <= 2.0 * mu, central, upwind)

    def pressure_solver(self, A, phi):
        """The run's pressure solver, set up for the operator ``A`` of this
        step and its interface ``phi``: built at the first step, then only
        updated (:meth:`PressureSolver.update`: preconditioner, deflation
        space and coarse factorisation for the moved interface; its
        workspace and engine kept)."""
        if self._pressure is None:
            self._pressure = PressureSolver.from_config(A, self.case.solver, phi=phi,
                                                        precision=self.case.precision)
        else:
            self._pressure.update(A, phi)
        return self._pressure

    def solve_pressure(self, solver, A, b, p_old):
        """``A p = b`` as an increment on the previous pressure: ``A d = b -
        A p_old``, ``p = p_old + d``, stopped where ``||b - A p|| <= rtol
        ||b||`` as a direct solve would be.  The solver's checks then see the
        small increment, not the whole pressure, whose rounding (``eps |p|``
        times the gas cells' large coefficients) would floor the attainable
        residual.  The record's relative figures are against ``||b||``."""
        xp = self.xp
        r = b - A.matvec(p_old.ravel()).reshape(b.shape)
        bnorm, rnorm = (float(n) for n in
                        self.backend.to_host(xp.sqrt(xp.stack([(b * b).sum(), (r * r).sum()]))))
        if bnorm == 0.0 or rnorm == 0.0:
            d, record = solver.solve(r)
        else:
            d, record = solver.solve(r, atol=solver.rtol * bnorm, rtol=0.0)
            record.relative_to(rnorm, bnorm, solver.rtol)
        return p_old + d, record

    def total_pressure(self, p, rho):
        """The pressure with its hydrostatic part: ``p`` itself, or with
        reduced gravity ``p_d + rho g.(x - x0)`` (g = -G e_y)."""
        if not self.reduced_gravity or self.gravity == 0:
            return p
        return p - self.gravity * rho * (self.yc - self.y0)

    def divergence(self, u, v):
        return (u[:, 1:] - u[:, :-1]) / self.hx + (v[1:, :] - v[:-1, :]) / self.hy

    # ------------------------------------------------------------------- step
    def step(self, state):
        """Advance one step; returns ``(new_state, StepReport)``.

        Raises ``FloatingPointError`` when the state is no longer finite.
        """
        xp = self.xp
        clock = self.clock
        clock.start()
        finite = xp.isfinite(state.u).all() & xp.isfinite(state.v).all()
        if not bool(finite & xp.isfinite(state.phi).all()):
            raise FloatingPointError(f"the velocity or level set is not finite at t = {state.time:.6g}")
        clock.mark("finite check")
        H, rho, mu, rho_x, rho_y = self.properties(state.phi)
        clock.mark("properties")
        dt = self.stable_dt(state, rho, mu)
        end = self.case.time.end
        if state.time + dt > end - 1e-12 * end:
            dt = end - state.time
        interval = self.case.output.interval
        if interval is not None:
            # Land exactly on the next snapshot time.
            k = math.floor(state.time / interval + 1e-9) + 1
            if state.time + dt > k * interval - 1e-12 * end:
                dt = k * interval - state.time
        clock.mark("time step")
        us, vs = self.provisional_velocity(state, dt, H, rho, mu, rho_x, rho_y)
        div_star = self.divergence(us, vs)
        clock.mark("momentum")
        t0 = time.perf_counter()
        A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, self.hx, self.hy, backend=self.backend,
                            dtype=self.dtype, storage=self.case.operator.storage)
        solver = self.pressure_solver(A, state.phi)
        self.backend.synchronize()
        setup = time.perf_counter() - t0
        clock.mark("pressure set-up")
        p, record = self.solve_pressure(solver, A, -div_star / dt, state.p)
        clock.mark("pressure solve")
        u = us.copy()
        v = vs.copy()
        u[:, 1:-1] -= dt / rho_x * (p[:, 1:] - p[:, :-1]) / self.hx
        v[1:-1, :] -= dt / rho_y * (p[1:, :] - p[:-1, :]) / self.hy
        # (sum of squares, not linalg.norm: a threaded BLAS call per step is slow on a busy CPU)
        dv = self.divergence(u, v)
        nd, nu_ = (float(n) for n in self.backend.to_host(
            xp.sqrt(xp.stack([(div_star * div_star).sum(), (dv * dv).sum()]))))
        divergence = nu_ / nd if nd > 0 else 0.0
        clock.mark("correction")
        phi = levelset_ops.advect(state.phi, u, v, dt, self.hx, self.hy)
        clock.mark("advection")
        step = state.step + 1
        ls = self.case.levelset
        if ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset_ops.reinitialize(phi, self.hx, self.hy, iterations=ls.reinit_iterations)
        clock.mark("reinitialisation")
        new = FlowState(phi=phi, u=u, v=v, p=p, time=state.time + dt, step=step)
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        diagnostics = self.diagnostics(new)
        clock.mark("diagnostics")
        report = StepReport(step=step, time=new.time, dt=dt, record=record, setup_seconds=setup,
                            divergence=divergence, diagnostics=diagnostics,
                            phases=dict(clock.seconds) if clock.enabled else None)
        return new, report

    def diagnostics(self, state):
        """Hysing et al. (2009) benchmark quantities of the gas (host floats)."""
        d = levelset_ops.bubble_diagnostics(state.phi, state.u, state.v, self.hx, self.hy, self.eps)
        return {k: float(val) for k, val in d.items()}
