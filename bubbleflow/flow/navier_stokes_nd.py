"""The two-phase flow step on a MAC grid of any dimension (3-D runs here).

The step of :class:`.navier_stokes.FlowSolver` (Chorin projection with the
level set, explicit in time), written once over the axes with
:mod:`.momentum_nd` and :mod:`.levelset_nd`; the pressure operator is
:meth:`PoissonOperator.from_faces` (7-point in 3-D) and the run's one
:class:`PressureSolver` is updated every step, as in 2-D.  Vertical is the
last grid axis (y in 2-D, z in 3-D): gravity acts along it and the bubble
diagnostics' heights and rise velocity are along it.

The viscous stress is explicit or implicit (``momentum.viscosity``: the
systems of :mod:`.viscosity_nd`, the 2-D ones written over the axes).
The interface is the level set or CLSVOF (``levelset.method: clsvof``:
the volume fraction of :mod:`.vof_nd` advected beside it, the level set
rebuilt from its PLIC planes every step, as in 2-D).
What the 2-D solver has and this one has not (yet): the CUDA kernels of
every phase (here the array code runs on CuPy as on NumPy).  In 2-D this class gives the 2-D solver's steps
to rounding (tests/flow/test_flow_nd.py), which is how its code is checked.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..case.time_step import viscosity_scheme
from ..mesh.grid import Grid
from ..mesh.levelset import build_levelset, geometry_circles
from ..operators.poisson import PoissonOperator
from . import levelset_nd, momentum, momentum_nd, viscosity_nd, vof_nd
from .bounds import FlowBounds
from .navier_stokes import (CLSVOF_BAND, CLSVOF_CURVATURE_PASSES, FlowSolver, PhaseClock,
                            StepReport)

__all__ = ["FlowStateND", "FlowSolverND", "WALL_NAMES"]

#: The case's wall names per grid axis, low side first.
WALL_NAMES = {2: (("left", "right"), ("bottom", "top")),
              3: (("left", "right"), ("front", "back"), ("bottom", "top"))}


@dataclass
class FlowStateND:
    """Everything a restart needs: level set, face velocities (grid-axis
    order), pressure and the clock; ``u``, ``v``, ``w`` name the components."""

    phi: object
    velocity: tuple
    p: object
    time: float = 0.0
    step: int = 0
    c: object = None                 # gas volume fraction (levelset.method clsvof), else None

    u = property(lambda self: self.velocity[0])
    v = property(lambda self: self.velocity[1])
    w = property(lambda self: self.velocity[2])


class FlowSolverND(FlowSolver):
    """Time stepper of a validated ``mode: flow`` case of any dimension.

    Shares with :class:`FlowSolver` the time-step limits, the pressure
    solver's set-up and update and the increment form of the pressure solve.
    """

    def __init__(self, case, backend):
        self.case, self.backend, self.xp = case, backend, backend.xp
        self.grid = g = Grid.from_config(case.grid)
        self.ndim = g.ndim
        self.spacing = g.spacing
        self.h = min(g.spacing)
        self.eps = 1.5 * max(g.spacing)
        fl = case.fluids
        self.rho_l, self.rho_g = fl.liquid.density, fl.gas.density
        self.mu_l, self.mu_g = fl.liquid.viscosity, fl.gas.viscosity
        self.gravity = case.physics.gravity
        self.sigma = case.physics.surface_tension
        sign = {"no_slip": -1.0, "free_slip": 1.0}
        walls = case.boundaries
        self.signs = tuple((sign[getattr(walls, lo)], sign[getattr(walls, hi)])
                           for lo, hi in WALL_NAMES[g.ndim])
        self.dtype = np.dtype(np.float64)
        self.implicit_viscosity = viscosity_scheme(case) == "implicit"
        self.reduced_gravity = case.momentum.gravity == "reduced"
        fs = case.geometry.free_surface
        self.y0 = float(fs) if fs is not None else 0.0
        self.buoyancy = (self.gravity * (self.rho_l - self.rho_g)
                         if self.reduced_gravity and self.gravity > 0 else 0.0)
        self.heights = self._face_heights()
        self.viscous_records = None
        # The level set CLSVOF rebuilds from PLIC planes is filtered before
        # its curvature is taken, as in 2-D.
        self.curvature_passes = CLSVOF_CURVATURE_PASSES if self.clsvof else 0
        self._pressure = None
        self.clock = PhaseClock(backend)
        self.bounds = FlowBounds(g, self.clsvof)

    def _face_heights(self):
        """The height of the interior faces of every axis (broadcastable):
        the cells' heights, but along the vertical axis the faces' own."""
        g, xp, nd = self.grid, self.xp, self.grid.ndim
        shape = [1] * nd
        shape[0] = -1
        cells = xp.asarray(g.centres[-1], dtype=self.dtype).reshape(shape)
        faces = xp.asarray(np.arange(1, g.cells[-1]) * g.spacing[-1], dtype=self.dtype).reshape(shape)
        return tuple(faces if a == nd - 1 else cells for a in range(nd))

    # ------------------------------------------------------------------ state
    def initial_state(self):
        """Fluid at rest, interface from the case geometry."""
        g, xp = self.grid, self.xp
        phi = xp.asarray(build_levelset(g, self.case.geometry.free_surface,
                                        geometry_circles(self.case.geometry, g)), dtype=self.dtype)
        velocity = []
        for a in range(g.ndim):
            shape = list(g.shape)
            shape[g.ndim - 1 - a] += 1
            velocity.append(xp.zeros(tuple(shape), dtype=self.dtype))
        return FlowStateND(phi=phi, velocity=tuple(velocity), p=xp.zeros(g.shape, dtype=self.dtype),
                           c=self._initial_fraction(phi) if self.clsvof else None)

    def _initial_fraction(self, phi):
        """The gas fraction of the initial level set: in 2-D the 2-D
        solver's (one cut per cell); in 3-D, where one cut per cell makes a
        sphere too large by ``0.26 (h/R)^2``, 4^3 sub-cells cut along the
        cell's quadratic model of phi (:func:`.vof_nd.volume_fraction`)."""
        if self.ndim == 2:
            return vof_nd.volume_fraction(phi, self.spacing)
        return vof_nd.volume_fraction(phi, self.spacing, samples=4, fit="quadratic")

    def properties(self, phi):
        """``(H, rho, mu, rho_faces)`` (:func:`.momentum_nd.fluid_properties`)."""
        return momentum_nd.fluid_properties(phi, self.eps, self.rho_l, self.rho_g, self.mu_l,
                                            self.mu_g, self.case.operator.face_density)

    # --------------------------------------------------------------- time step
    def _step_scalars(self, state, rho, mu):
        """``[finite, max |u_a|, 0, max mu/rho]`` on the host, one transfer
        (the layout :meth:`FlowSolver._dt_limits` reads)."""
        xp = self.xp
        maxima = self.case.time.dt is None
        finite = xp.isfinite(state.phi).all()
        speed = xp.zeros((), dtype=self.dtype)
        for f in state.velocity:
            finite = finite & xp.isfinite(f).all()
            if maxima:
                speed = xp.maximum(speed, xp.abs(f).max())
        # (implicit viscosity: no viscous limit, so no max mu/rho.)
        viscous = maxima and not self.implicit_viscosity
        nu = (mu / rho).max() if viscous else xp.zeros((), dtype=self.dtype)
        return self.backend.to_host(xp.stack([finite.astype(self.dtype), speed,
                                              xp.zeros((), dtype=self.dtype), nu]))

    # ---------------------------------------------------------------- momentum
    def provisional_velocity(self, state, dt, H, rho, mu, rho_faces):
        """``u*`` on the interior faces: explicit
        (:func:`.momentum_nd.provisional_velocity`) or with the viscous
        stress implicit (:meth:`_implicit_solves`)."""
        kappa = (levelset_nd.curvature(levelset_nd.smooth(state.phi, self.curvature_passes),
                                       self.spacing) if self.sigma > 0 else None)
        coefficients = momentum_nd.interface_coefficients(kappa, self.sigma, self.heights,
                                                          self.buoyancy, self.y0)
        extra = (momentum_nd.density_mismatch(rho, rho_faces[-1], self.gravity)
                 if self.buoyancy != 0 else None)
        gravity = 0.0 if self.reduced_gravity else self.gravity
        if self.implicit_viscosity:
            solutions = self._implicit_solves(state, dt, mu, rho_faces)
            return momentum_nd.implicit_velocity(solutions, state.velocity, H, rho_faces,
                                                 coefficients, dt, self.spacing, gravity, extra)
        return momentum_nd.provisional_velocity(state.velocity, H, mu, rho_faces, coefficients, dt,
                                                self.spacing, self.signs, gravity, extra)

    def _implicit_solves(self, state, dt, mu, rho_faces):
        """The viscous solves of every component (backward Euler,
        :func:`.viscosity_nd.solve_implicit`), side by side: the interior
        faces' velocities before the forces join; the records kept, a solve
        that failed raised (:meth:`FlowSolver._keep_viscous_records`)."""
        velocity, spacing = state.velocity, self.spacing
        adv = momentum_nd.advection_terms(velocity, rho_faces, mu, spacing, self.signs)
        rhss = momentum_nd.implicit_rhs(velocity, mu, rho_faces, adv, dt, spacing)
        solved = viscosity_nd.solve_implicit(velocity, mu, rho_faces, rhss, dt, spacing,
                                             self.signs, self.case.momentum.viscous_rtol)
        self._keep_viscous_records(state, "uvw", solved)
        return [x for x, _ in solved]

    def operator(self, rho_faces):
        """The pressure operator of this step's face densities."""
        return PoissonOperator.from_faces(rho_faces, self.grid, backend=self.backend,
                                          dtype=self.dtype, densities=True,
                                          storage=self.case.operator.storage)

    def total_pressure(self, p, rho):
        """``p``, or with reduced gravity ``p_d + rho g.(x - x0)``."""
        if not self.reduced_gravity or self.gravity == 0:
            return p
        return p - self.gravity * rho * (self.heights[0] - self.y0)

    def divergence(self, velocity):
        return momentum_nd.divergence(velocity, self.spacing)

    # ------------------------------------------------------------------- step
    def step(self, state):
        """Advance one step; returns ``(new_state, StepReport)``.  Raises
        ``FloatingPointError`` when the state is no longer finite."""
        clock = self.clock
        clock.start()
        H, rho, mu, rho_faces = self.properties(state.phi)
        scalars = self._step_scalars(state, rho, mu)
        if not scalars[0]:
            raise FloatingPointError(f"the velocity or level set is not finite at t = {state.time:.6g}")
        dt = self._time_step(state, scalars)
        clock.mark("time step")
        with self.backend.side_stream() as setup:
            A = self.operator(rho_faces)
            solver = self.pressure_solver(A, state.phi, check=False)
        clock.mark("pressure set-up")
        provisional = self.provisional_velocity(state, dt, H, rho, mu, rho_faces)
        div_star = self.divergence(provisional)
        clock.mark("momentum")
        setup.join()
        p, record = self.solve_pressure(solver, A, -div_star / dt, state.p)
        record.setup_seconds += setup.seconds - solver.setup_seconds
        clock.mark("pressure solve")
        velocity = momentum_nd.correct_velocity(provisional, p, rho_faces, dt, self.spacing)
        norms = momentum.norms(div_star, self.divergence(velocity))
        clock.mark("correction")
        phi, c = self.move_interface(state, velocity, dt, state.step + 1)
        new = FlowStateND(phi=phi, velocity=velocity, p=p, time=state.time + dt,
                          step=state.step + 1, c=c)
        end = self.case.time.end
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        diagnostics = self.diagnostics(new)
        nd, nu_ = (float(x) for x in self.backend.to_host(norms))
        bounds = self.bounds.measure(state.phi, state.velocity, phi, velocity, c, dt)
        clock.mark("diagnostics")
        report = StepReport(step=new.step, time=new.time, dt=dt, record=record,
                            setup_seconds=setup.seconds, divergence=nu_ / nd if nd > 0 else 0.0,
                            diagnostics=diagnostics,
                            phases=dict(clock.seconds) if clock.enabled else None, bounds=bounds)
        return new, report

    def move_interface(self, state, velocity, dt, step):
        """The interface carried by the new velocity: ``(phi, c)`` at step
        ``step`` (:meth:`FlowSolver.move_interface` over the axes).

        Level set: advected, reinitialised every ``reinit_every`` steps.
        CLSVOF: the volume fraction advected conservatively with the old
        level set's normals (the sweeps' order rotating with the step), the
        level set advected beside it and rebuilt from the new PLIC planes in
        a band of :data:`.navier_stokes.CLSVOF_BAND` cells.
        """
        c = None
        if self.clsvof:
            c = vof_nd.advect(state.c, velocity, dt, self.spacing, first_axis=step % self.ndim,
                              normal_from=state.phi)
        phi = levelset_nd.advect(state.phi, velocity, dt, self.spacing)
        self.clock.mark("advection")
        ls = self.case.levelset
        if c is not None:
            # The shortest search that finds a patch for every band cell.
            phi = vof_nd.redistance(phi, c, self.spacing, band=CLSVOF_BAND,
                                    reach=CLSVOF_BAND + 1)
        elif ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset_nd.reinitialize(phi, self.spacing, iterations=ls.reinit_iterations)
        self.clock.mark("reinitialisation")
        return phi, c

    def regions(self, state):
        return None

    def diagnostics(self, state):
        """The bubble quantities of :func:`.levelset_nd.bubble_diagnostics`
        (host floats); with a volume fraction, the volume (area in 2-D),
        centroid and rise velocity are its (:func:`.vof_nd.gas_diagnostics`)."""
        d = levelset_nd.bubble_diagnostics(state.phi, state.velocity, self.spacing, self.eps)
        if state.c is not None:
            d.update(vof_nd.gas_diagnostics(state.c, state.velocity, self.spacing))
        return d
