"""Incompressible two-phase Navier-Stokes on a MAC grid with a level set.

One time step (Chorin projection, explicit in time):

1. fluid properties from the level set: smoothed Heaviside (epsilon = 1.5 h)
   for the density and viscosity, curvature from phi (filtered first with
   CLSVOF, whose level set is rebuilt from PLIC lines);
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
   reinitialised every few steps; with ``levelset.method: clsvof`` the gas
   volume fraction is advected beside it (:mod:`.vof`, conservative: the
   gas volume is kept to round-off) and the level set is rebuilt from its
   PLIC lines every step, so the two carry one interface.

The array code of steps 1, 2 and 4 (and of the finite check, the time
step's maxima and the diagnostics' transfer) is in :mod:`.momentum`, pure
functions that are twins: on CuPy their CUDA kernels
(:mod:`.momentum_cuda`) run, one or two per call.

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

from ..case.time_step import step_limits, viscosity_scheme
from ..mesh.grid import Grid
from ..mesh.levelset import build_levelset, geometry_circles
from ..operators.poisson import PoissonOperator
from ..linalg.solver import PressureSolver
from . import levelset_ops, momentum, vof
from .bounds import FlowBounds
from .viscosity import ViscousSystem, solve_viscous_systems

__all__ = ["FlowState", "FlowSolver", "StepReport", "CLSVOF_CURVATURE_PASSES", "CLSVOF_BAND",
           "landing_step"]

#: Passes of :func:`.levelset_ops.smooth` over the level set of CLSVOF (the
#: distance to the PLIC lines) before its curvature is taken; the level set
#: alone is used as it is.
CLSVOF_CURVATURE_PASSES = 4
#: Half-width in cells of the band CLSVOF rebuilds every step (and its search
#: reach): every value the filtered curvature reads at a face the surface
#: tension acts on (2 cells from an interface cell, eps = 1.5 h), through the
#: curvature's stencil (1) and the filter (1 a pass), is a rebuilt distance.
#: Outside the band the level set is only advected; a narrower band let it
#: bend the curvature and slowed Hysing's case-1 bubble under refinement
#: (docs/interface_study.md).
CLSVOF_BAND = 3 + CLSVOF_CURVATURE_PASSES


@dataclass
class FlowState:
    """Everything a restart needs: fields (on the backend) and the clock."""

    phi: object
    u: object
    v: object
    p: object
    time: float = 0.0
    step: int = 0
    c: object = None        # gas volume fraction (levelset.method clsvof), else None


@dataclass
class StepReport:
    """What one time step did (host scalars)."""

    step: int
    time: float
    dt: float
    record: object          # SolveRecord of the pressure solve
    setup_seconds: float    # operator + preconditioner + deflation for this interface
    #                         (also in ``record.setup_seconds``, with the solve's own)
    divergence: float       # ||div u|| / ||div u*||
    diagnostics: dict
    phases: dict = None     # seconds per phase, when the solver's phase clock is on
    bounds: dict = None     # the state's figures against its physical bounds (.bounds)


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


def landing_step(time, dt, end, interval):
    """``dt`` shortened to land exactly on ``end`` and on the next multiple
    of the snapshot ``interval`` (None: no snapshots) after ``time``."""
    if time + dt > end - 1e-12 * end:
        dt = end - time
    if interval is not None:
        k = math.floor(time / interval + 1e-9) + 1
        if time + dt > k * interval - 1e-12 * end:
            dt = k * interval - time
    return dt


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
        # The interface coefficients' gravity part, (rho_l - rho_g) G: reduced
        # gravity only (0 otherwise).
        self.buoyancy = (self.gravity * (self.rho_l - self.rho_g)
                         if self.reduced_gravity and self.gravity > 0 else 0.0)
        self.viscous_records = None
        # Filter passes before the curvature: the rebuilt level set of CLSVOF
        # needs them (docs/interface_study.md measures the still bubble).
        self.curvature_passes = CLSVOF_CURVATURE_PASSES if self.clsvof else 0
        # The pressure solver: built once per run, updated every step.
        self._pressure = None
        # Per-phase timing of the steps (off: no cost, see PhaseClock).
        self.clock = PhaseClock(backend)
        self.bounds = FlowBounds(g, self.clsvof)

    # ------------------------------------------------------------------ state
    def initial_state(self):
        """Fluid at rest, interface from the case geometry."""
        g, xp = self.grid, self.xp
        circles = geometry_circles(self.case.geometry, g)
        phi = xp.asarray(build_levelset(g, self.case.geometry.free_surface, circles),
                         dtype=self.dtype)
        c = vof.volume_fraction(phi, self.hx, self.hy) if self.clsvof else None
        return FlowState(phi=phi, u=xp.zeros((g.ny, g.nx + 1), dtype=self.dtype),
                         v=xp.zeros((g.ny + 1, g.nx), dtype=self.dtype),
                         p=xp.zeros((g.ny, g.nx), dtype=self.dtype), c=c)

    @property
    def clsvof(self):
        """Is the interface a coupled level set and volume of fluid?"""
        return self.case.levelset.method == "clsvof"

    # ------------------------------------------------------------- properties
    def properties(self, phi):
        """Cell Heaviside, density and viscosity, face densities (interior
        faces): ``(H, rho, mu, rho_x, rho_y)`` (:func:`.momentum.fluid_properties`)."""
        return momentum.fluid_properties(phi, self.eps, self.rho_l, self.rho_g, self.mu_l,
                                         self.mu_g, self.case.operator.face_density)

    # --------------------------------------------------------------- time step
    def stable_dt(self, state, rho=None, mu=None):
        """Smallest of the convective, viscous, capillary and gravity limits."""
        if self.case.time.dt is not None:
            return float(self.case.time.dt)
        if rho is None:
            _, rho, mu, _, _ = self.properties(state.phi)
        return self._dt_limits(self._step_scalars(state, rho, mu))

    def _step_scalars(self, state, rho, mu):
        """``[finite, max |u|, max |v|, max mu/rho]`` on the host: one transfer
        (one host synchronisation) for the finite check and the time step."""
        maxima = self.case.time.dt is None
        return self.backend.to_host(momentum.step_scalars(
            state.u, state.v, state.phi, rho, mu, maxima, maxima and not self.implicit_viscosity))

    def _dt_limits(self, scalars):
        """The step from the host scalars of :meth:`_step_scalars`: the
        smallest of the flow's limits (:func:`~bubbleflow.case.time_step.step_limits`),
        no viscous one when the viscosity is implicit."""
        if self.case.time.dt is not None:
            return float(self.case.time.dt)
        umax = max(float(scalars[1]), float(scalars[2]))
        nu = None if self.implicit_viscosity else float(scalars[3])
        limits = step_limits(self.case, umax=umax, nu=nu, h=self.h)
        return min(limit.dt for limit in limits.values())

    def _time_step(self, state, scalars):
        """The step from the limits, shortened to land exactly on the end
        and on the next snapshot time."""
        return landing_step(state.time, self._dt_limits(scalars), self.case.time.end,
                            self.case.output.interval)

    # ---------------------------------------------------------------- momentum
    def provisional_velocity(self, state, dt, H, rho, mu, rho_x, rho_y):
        """``u*`` on the interior faces (walls keep zero normal velocity):
        advection explicit, the viscous stress explicit or implicit
        (``momentum.viscosity``), gravity volumetric or at the interface
        (``momentum.gravity``)."""
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        adv_u, adv_v = momentum.advection_terms(u, v, rho_x, rho_y, mu, hx, hy, self.s_left,
                                                self.s_right, self.s_bottom, self.s_top)
        # A level set rebuilt from PLIC lines is filtered before its curvature
        # is taken (levelset_ops.smooth says why).
        phi_kappa = levelset_ops.smooth(state.phi, self.curvature_passes)
        cx, cy = momentum.interface_coefficients(phi_kappa, self.yc, self.yf, hx, hy, self.sigma,
                                                 self.buoyancy, self.y0)
        forces = self.sigma > 0 or self.buoyancy != 0
        gravity = 0.0 if self.reduced_gravity else self.gravity
        # Reduced gravity's consistency term on the v faces (momentum._density_mismatch).
        reduced = (self.gravity if self.buoyancy != 0 else 0.0, self.rho_g, self.rho_l)
        if self.implicit_viscosity:
            rhs_u = momentum.implicit_rhs_u(u, v, mu, rho_x, adv_u, dt, hx, hy)
            rhs_v = momentum.implicit_rhs_v(u, v, mu, rho_y, adv_v, dt, hx, hy)
            xu, xv = self._implicit_solves(state, dt, mu, rho_x, rho_y, rhs_u, rhs_v)
            us = momentum.implicit_velocity_u(xu, u, H, cx, rho_x, dt, hx, forces)
            vs = momentum.implicit_velocity_v(xv, v, H, cy, rho_y, dt, hy, forces, gravity,
                                              *reduced)
            return us, vs
        us = momentum.explicit_velocity_u(u, v, mu, H, rho_x, adv_u, cx, dt, hx, hy,
                                          self.s_bottom, self.s_top, forces)
        vs = momentum.explicit_velocity_v(u, v, mu, H, rho_y, adv_v, cy, dt, hx, hy,
                                          self.s_left, self.s_right, gravity, forces, *reduced)
        return us, vs

    def _implicit_solves(self, state, dt, mu, rho_x, rho_y, rhs_u, rhs_v):
        """The two viscous solves (backward Euler, :mod:`.viscosity`), side by
        side: the interior faces' ``u`` and ``v`` before the forces join
        (:func:`.momentum.implicit_velocity_u`)."""
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        mu_n = None                          # (the coefficients' twin forms the corners)
        systems = [ViscousSystem("u", mu, mu_n, rho_x, dt, hx, hy, (self.s_bottom, self.s_top)),
                   ViscousSystem("v", mu, mu_n, rho_y, dt, hx, hy, (self.s_left, self.s_right))]
        solved = solve_viscous_systems(systems, [rhs_u.ravel(), rhs_v.ravel()],
                                       [u[:, 1:-1], v[1:-1, :]],
                                       self.case.momentum.viscous_rtol)
        self._keep_viscous_records(state, "uv", solved)
        return solved[0][0], solved[1][0]

    def _keep_viscous_records(self, state, names, solved):
        """The viscous solves' records (``solved``: ``(x, record)`` per
        component, ``names`` theirs) kept in ``viscous_records``; a solve
        that did not converge raises ``FloatingPointError`` naming it."""
        for name, (_, rec) in zip(names, solved):
            if not rec.converged:
                raise FloatingPointError(
                    f"the implicit viscous solve for {name} did not converge at t = "
                    f"{state.time:.6g}: {rec.reason} after {rec.iterations} iterations, "
                    f"relative residual {rec.residual:.3g}")
        self.viscous_records = [rec for _, rec in solved]

    def pressure_solver(self, A, phi, check=True):
        """The run's pressure solver, set up for the operator ``A`` of this
        step and its interface ``phi``: built at the first step, then only
        updated (:meth:`PressureSolver.update`: preconditioner, deflation
        space and coarse factorisation for the moved interface; its
        workspace and engine kept; ``check=False``: the update's checks left
        to the solve)."""
        if self._pressure is None:
            self._pressure = PressureSolver.from_config(A, self.case.solver, phi=phi,
                                                        precision=self.case.precision)
        else:
            self._pressure.update(A, phi, check=check)
        return self._pressure

    def solve_pressure(self, solver, A, b, p_old):
        """``A p = b`` as an increment on the previous pressure: ``A d = b -
        A p_old``, ``p = p_old + d``, stopped where ``||b - A p|| <= rtol
        ||b||`` as a direct solve would be.  The solver's checks then see the
        small increment, not the whole pressure, whose rounding (``eps |p|``
        times the gas cells' large coefficients) would floor the attainable
        residual.  The record's relative figures are against ``||b||``."""
        r = b - A.matvec(p_old.ravel()).reshape(b.shape)
        bnorm, rnorm = self._two_norms(b, r)
        if bnorm == 0.0 or rnorm == 0.0:
            d, record = solver.solve(r)
        else:
            d, record = solver.solve(r, atol=solver.rtol * bnorm, rtol=0.0)
            record.relative_to(rnorm, bnorm, solver.rtol)
        return p_old + d, record

    def _two_norms(self, a, b):
        """``(||a||, ||b||)``, host floats (one transfer)."""
        return tuple(float(n) for n in self.backend.to_host(momentum.norms(a, b)))

    def total_pressure(self, p, rho):
        """The pressure with its hydrostatic part: ``p`` itself, or with
        reduced gravity ``p_d + rho g.(x - x0)`` (g = -G e_y)."""
        if not self.reduced_gravity or self.gravity == 0:
            return p
        return p - self.gravity * rho * (self.yc - self.y0)

    def divergence(self, u, v):
        return momentum.divergence(u, v, self.hx, self.hy)

    # ------------------------------------------------------------------- step
    def step(self, state):
        """Advance one step; returns ``(new_state, StepReport)``.

        Raises ``FloatingPointError`` when the state is no longer finite.

        Host synchronisations: the finite check together with the time
        step's maxima (one transfer), the implicit viscous solves' (two), the
        pressure solve's (its two starting norms, the set-up's deferred
        checks and the solver's own), the diagnostics together with the
        divergence norms (one transfer) and the figures of the physical
        bounds (one, :meth:`.bounds.FlowBounds.measure`).
        """
        clock = self.clock
        clock.start()
        H, rho, mu, rho_x, rho_y = self.properties(state.phi)
        clock.mark("properties")
        scalars = self._step_scalars(state, rho, mu)
        if not scalars[0]:
            raise FloatingPointError(f"the velocity or level set is not finite at t = {state.time:.6g}")
        clock.mark("finite check")
        dt = self._time_step(state, scalars)
        clock.mark("time step")
        # The pressure set-up needs only this step's densities: on a GPU it
        # runs on a stream of its own while the host queues the momentum
        # phase (the solve runs its checks).
        with self.backend.side_stream() as setup:
            A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, self.hx, self.hy,
                                backend=self.backend, dtype=self.dtype,
                                storage=self.case.operator.storage)
            solver = self.pressure_solver(A, state.phi, check=False)
        clock.mark("pressure set-up")
        us, vs = self.provisional_velocity(state, dt, H, rho, mu, rho_x, rho_y)
        div_star, b = momentum.pressure_rhs(us, vs, self.hx, self.hy, dt)
        clock.mark("momentum")
        setup.join()
        p, record = self.solve_pressure(solver, A, b, state.p)
        # The record's set-up: the solve's own and this step's (operator and
        # update, timed on their stream), in place of the update's host time.
        record.setup_seconds += setup.seconds - solver.setup_seconds
        clock.mark("pressure solve")
        u, v, norms = momentum.correct_velocity(us, vs, p, rho_x, rho_y, div_star, dt,
                                                self.hx, self.hy)
        clock.mark("correction")
        step = state.step + 1
        phi, c = self.move_interface(state, u, v, dt, step)
        new = FlowState(phi=phi, u=u, v=v, p=p, time=state.time + dt, step=step, c=c)
        end = self.case.time.end
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        # The diagnostics and ||div u*||, ||div u|| in one transfer.
        diagnostics, (nd, nu_) = momentum.diagnostics_and_norms(
            new.phi, new.u, new.v, self.hx, self.hy, self.eps, norms)
        if c is not None:
            diagnostics.update(vof.gas_diagnostics(c, new.v, self.hx, self.hy))
        divergence = nu_ / nd if nd > 0 else 0.0
        bounds = self.bounds.measure(state.phi, (state.u, state.v), phi, (u, v), c, dt)
        clock.mark("diagnostics")
        report = StepReport(step=step, time=new.time, dt=dt, record=record,
                            setup_seconds=setup.seconds,
                            divergence=divergence, diagnostics=diagnostics,
                            phases=dict(clock.seconds) if clock.enabled else None,
                            bounds=bounds)
        return new, report

    def move_interface(self, state, u, v, dt, step):
        """The interface carried by the new velocity: ``(phi, c)`` at step
        ``step`` (``c`` None for the level set alone).

        Level set: advected, reinitialised every ``reinit_every`` steps.
        CLSVOF: the volume fraction advected conservatively with the
        normals of the old level set (its sweeps alternate from step to
        step), the level set advected beside it and then rebuilt as the
        distance to the new PLIC lines in a band of :data:`CLSVOF_BAND`
        cells, which keeps its zero level on the conserved volume.
        """
        clock = self.clock
        c = None
        if self.clsvof:
            c = vof.advect(state.c, u, v, dt, self.hx, self.hy, first_axis=step % 2,
                           normal_from=state.phi)
        phi = levelset_ops.advect(state.phi, u, v, dt, self.hx, self.hy)
        clock.mark("advection")
        ls = self.case.levelset
        if c is not None:
            # The shortest search that finds a segment for every band cell
            # (vof_limits.search_window): exact within CLSVOF_BAND + 1 cells of
            # a straight interface, which covers what the curvature reads.
            phi = vof.redistance(phi, c, self.hx, self.hy, band=CLSVOF_BAND,
                                 reach=CLSVOF_BAND + 1)
        elif ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset_ops.reinitialize(phi, self.hx, self.hy, iterations=ls.reinit_iterations)
        clock.mark("reinitialisation")
        return phi, c

    def regions(self, state):
        """Per gas region (CLSVOF): :func:`.vof.region_diagnostics` of the
        state; None for the level set alone.  (The run asks for them at its
        snapshots: labelling the regions costs more than a step.)"""
        if state.c is None:
            return None
        return vof.region_diagnostics(state.c, state.v, self.hx, self.hy, normal_from=state.phi)

    def diagnostics(self, state):
        """Hysing et al. (2009) benchmark quantities of the gas (host floats);
        with a volume fraction, the area, centroid and rise velocity are its
        (:func:`.vof.gas_diagnostics`)."""
        d = levelset_ops.bubble_diagnostics(state.phi, state.u, state.v, self.hx, self.hy, self.eps)
        d = {k: float(val) for k, val in d.items()}
        if state.c is not None:
            d.update(vof.gas_diagnostics(state.c, state.v, self.hx, self.hy))
        return d
