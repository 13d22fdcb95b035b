"""Incompressible two-phase Navier-Stokes on a MAC grid with a level set.

One time step (Chorin projection, explicit in time), the same for 2-D and
3-D grids and for one process or several ranks:

1. fluid properties from the level set: smoothed Heaviside (epsilon = 1.5 h)
   for the density and viscosity, curvature from phi (filtered first with
   CLSVOF, whose level set is rebuilt from PLIC lines or planes);
2. provisional velocity ``u* = u + dt (-(u.grad)u + div(2 mu D)/rho + g + f_st/rho)``
   with second-order central differences, the variable-viscosity stress in
   divergence form (explicit, or implicit by backward Euler) and the surface
   tension as a balanced-force CSF term ``f_st = -sigma kappa grad H`` on
   the faces, where the pressure gradient lives;
3. pressure: ``-div((1/rho) grad p) = -div(u*)/dt`` solved by the run's one
   pressure solver (warm-started from the previous pressure; the operator
   rebuilt and the solver updated for the moved interface, their set-up
   timed);
4. correction ``u = u* - dt/rho grad p`` (divergence-free up to the
   solver's tolerance);
5. the level set advected with the new velocity (WENO5 + TVD-RK3) and
   reinitialised every few steps; with ``levelset.method: clsvof`` the gas
   volume fraction is advected beside it (conservative: the gas volume is
   kept to round-off) and the level set rebuilt from its PLIC interface
   every step, so the two carry one interface.

Each stage is one n-D function of its module (:mod:`.momentum`,
:mod:`.levelset`, the volume of fluid's (:mod:`.vof_advection`, ...), :mod:`.viscosity`); on a GPU the
2-D grids run their CUDA kernels, registered as those functions' variants.
Where one process and several ranks differ (a slab widened by its
neighbours' planes, figures reduced over the ranks, the slab's pressure
operator) the step asks its partition (:mod:`.partition`): one process is
the one-slab partition whose padding is the walls.

Layout: cell fields ``(n_z, n_y, n_x)`` (2-D ``(n_y, n_x)``); the face
velocity normal to grid axis ``a`` has one more entry along array axis
``ndim - 1 - a``; vertical is the last grid axis (array axis 0): gravity
acts along it and the slabs of the ranks are its planes.  Wall faces carry
zero normal velocity; tangential wall conditions enter through one ghost
layer (no-slip mirrors with a sign change, free-slip mirrors).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..case.time_step import landing_step, step_limits, viscosity_scheme
from ..compute.backend import SideWork
from ..compute.held_capture import keyed_replays
from ..mesh.grid import Grid, interior_face_heights
from . import (boxes, clsvof_transport, interface_force, levelset, momentum, viscosity,
               vof_redistance)
from .bounds import FlowBounds
from .initial_state import initial_state
from .partition import RankSlabs, WholeGrid, slab_alignment
from .reach import (ADVECT_WINDOW, CLSVOF_BAND, CLSVOF_CURVATURE_PASSES, CLSVOF_WINDOW,
                    MAX_SHORTENED_STEPS, TRANSPORT_CFL, WINDOW, momentum_window, rank_refusal,
                    thickest_window)
from .phase_clock import PhaseClock
from .state import FlowState, StepReport
from .state_measures import StateMeasures
from .viscous_plan import ViscousPlan

__all__ = ["FlowState", "FlowSolver", "StepReport", "PhaseClock", "landing_step",
           "CLSVOF_CURVATURE_PASSES", "CLSVOF_BAND", "TRANSPORT_CFL", "MAX_SHORTENED_STEPS",
           "WALL_NAMES", "WINDOW", "CLSVOF_WINDOW", "ADVECT_WINDOW", "momentum_window",
           "thickest_window", "rank_refusal"]

#: The case's wall names per grid axis, low side first.
WALL_NAMES = {2: (("left", "right"), ("bottom", "top")),
              3: (("left", "right"), ("front", "back"), ("bottom", "top"))}


#: The largest slab (cells of a rank, or of the grid) whose momentum phase
#: and end of a step are replayed from CUDA graphs: a replay copies its inputs in and its results
#: out (about sixteen fields), which on larger slabs takes about as long on
#: the device as the launches it saves take on the host, and each graph
#: holds the memory of every array its launches make (a few dozen fields;
#: a graph a sweep order).
REPLAYED_STEP_CELLS = 1 << 20
#: The graphs of a step's parts a run keeps (the oldest goes first): the
#: momentum phase's (with implicit viscosity one a step count planned
#: ahead, and the two around solves planned at a step's start) and the end
#: of the step's one a sweep order, for the step's length and the one
#: before it.
REPLAYED_KEYS = 12


class FlowSolver:
    """Time stepper of a validated ``mode: flow`` case, any dimension.

    Parameters
    ----------
    case : the validated case
    backend : Backend
    comm : the ranks' communicator, or None for one process (a
        communicator of one rank is one process too)
    """

    def __init__(self, case, backend, comm=None):
        self.case, self.backend, self.xp = case, backend, backend.xp
        self.grid = g = Grid.from_config(case.grid)
        self.ndim, self.spacing = g.ndim, g.spacing
        # The kernels compile while the case is built (on the host: nothing).
        backend.prepare_kernels(self.ndim)
        self.h = min(g.spacing)
        self.eps = 1.5 * max(g.spacing)
        fl = case.fluids
        self.rho_l, self.rho_g = fl.liquid.density, fl.gas.density
        self.mu_l, self.mu_g = fl.liquid.viscosity, fl.gas.viscosity
        self.gravity = case.physics.gravity
        self.sigma = case.physics.surface_tension
        sign = {"no_slip": -1.0, "free_slip": 1.0}
        walls = case.boundaries
        # Ghost-layer sign of the tangential velocity per axis: -1 no-slip, +1 free-slip.
        self.signs = tuple((sign[getattr(walls, lo)], sign[getattr(walls, hi)])
                           for lo, hi in WALL_NAMES[g.ndim])
        # Fields are float64 whatever ``precision``: it selects the pressure
        # solver's arithmetic (float32 inner iterations refined in float64).
        self.dtype = np.dtype(np.float64)
        self.implicit_viscosity = viscosity_scheme(case) == "implicit"
        self.reduced_gravity = case.momentum.gravity == "reduced"
        self.y0 = momentum.reduced_origin(case.geometry.free_surface)
        # The interface coefficients' gravity part, (rho_l - rho_g) G: reduced
        # gravity only (0 otherwise).
        self.buoyancy = (self.gravity * (self.rho_l - self.rho_g)
                         if self.reduced_gravity and self.gravity > 0 else 0.0)
        # Filter passes before the curvature: the rebuilt level set of CLSVOF
        # needs them (docs/interface_study.md measures the still bubble).
        self.curvature_passes = CLSVOF_CURVATURE_PASSES if self.clsvof else 0
        self._pressure = None                # built at the first step, then updated
        # The last step's length, and the cells the interface may have moved
        # in it (None: not known; the pressure solver's set-up reads it).
        self._last_dt, self._interface_motion = 0.0, None
        # (state, its start) of the state the last step made (:meth:`_start`).
        self._next = None
        self.clock = PhaseClock(backend)      # per-phase timing (off: no cost)
        self._force_faces = interface_force.KeptFaces()     # the box's force, step to step
        self._gas_box = (None, boxes.UNKNOWN)    # (c, its gas box): the last rebuild's
        self._carried = clsvof_transport.KeptLevelSet()
        self.partition = self._partition(comm)
        self.measures = StateMeasures(backend, self.spacing, self.eps, self.partition.padding)
        self.bounds = FlowBounds(g, self.clsvof, self.partition.comm)
        # The parts of a step replayed from CUDA graphs (_replayed: the
        # momentum phase, _end_of_step): on a GPU, where the ranks' calls
        # are NCCL's (a graph cannot hold MPI's), on slabs of at most
        # REPLAYED_STEP_CELLS cells.
        comm = self.partition.comm
        small = math.prod(g.shape) // (1 if comm is None else comm.size) <= REPLAYED_STEP_CELLS
        self._replays = keyed_replays(backend, comm, kept=REPLAYED_KEYS) if small else None
        # The viscous solves' Chebyshev steps planned ahead from the last
        # solves' (the momentum phase is then launches alone, one graph)
        # where a host read costs a synchronisation and the step is
        # launch-bound.
        self.viscous_plan = ViscousPlan(backend.on_device and small, g.ndim,
                                        case.momentum.viscous_rtol)
        #: Queue the end of an adaptive step before its transport check is
        #: read, and read the check with the step's figures (one host wait
        #: fewer) where a wait costs more than the end's fields kept alive
        #: meanwhile: on a device, where the step is launch-bound.
        self.check_ahead = backend.on_device and small
        #: With :attr:`check_ahead`, also queue the correction and the end of
        #: the step on the pressure solver's candidate answer while its check
        #: is read (the host's launches overlap the device's iterations),
        #: where the step's parts are replayed.  Every rank reads the same
        #: check, so the ranks queue and drop the same collectives.
        self.queue_behind_solve = self.check_ahead and self._replays is not None
        #: Ends queued ahead of their check and then done again (the check
        #: or the viscous solves planned ahead failed).
        self.ends_redone = 0
        self.width = momentum_window(case)
        lo, hi = self.partition.window(self.width)
        heights = self._face_heights()
        # The interface force's face heights on the widened slab's planes,
        # the cells' heights on the slab's own (the total pressure's).
        self.heights = tuple(h[lo:hi - 1] if a == g.ndim - 1 else h[lo:hi]
                             for a, h in enumerate(heights))
        p = self.partition
        self.cell_heights = heights[0][p.lo:p.hi]

    def _partition(self, comm):
        if comm is None or comm.size == 1:
            return WholeGrid(self.grid, self.backend)
        refused = rank_refusal(self.case, comm.size)
        if refused is not None:
            key, value, expected = refused
            raise ValueError(f"{key} = {value!r}: expected {expected}")
        return RankSlabs(self.grid, self.backend, comm,
                         slab_alignment(self.case.solver, self.grid, comm.size))

    def _face_heights(self):
        """The heights of every axis' interior faces (broadcastable, the
        whole grid's): the cells' heights, along the vertical the faces' own."""
        return interior_face_heights(self.grid, self.xp)

    @property
    def clsvof(self):
        """Is the interface a coupled level set and volume of fluid?"""
        return self.case.levelset.method == "clsvof"

    @property
    def slab(self):
        """The rank's slab (:class:`~bubbleflow.mesh.ranks.RankSlab`), or None on one process."""
        return getattr(self.partition, "slab", None)

    # ------------------------------------------------------------------ state
    def initial_state(self):
        """Fluid at rest, the interface from the case geometry, built on
        the backend (:func:`.initial_state.initial_state`)."""
        return initial_state(self.case, self.grid, self.backend, self.partition, self.dtype,
                             self.clsvof)

    def properties(self, phi):
        """``(H, rho, mu, rho_faces)`` (:func:`.momentum.fluid_properties`)."""
        return momentum.fluid_properties(phi, self.eps, self.rho_l, self.rho_g, self.mu_l,
                                            self.mu_g, self.case.operator.face_density,
                                            self.case.momentum.viscosity_mean)

    # --------------------------------------------------------------- time step
    def stable_dt(self, state):
        """Smallest of the convective, viscous, capillary and gravity limits."""
        if self.case.time.dt is not None:
            return float(self.case.time.dt)
        _, rho, mu, _ = self.properties(state.phi)
        return self._dt_limits(self._step_scalars(state, rho, mu))

    def _step_scalars(self, state, rho, mu):
        """``[finite, max |u_a| per axis, max mu/rho]`` of the state's start
        (:meth:`_over_ranks`)."""
        return self._over_ranks(self._device_step_scalars(state, rho, mu))

    def _device_step_scalars(self, state, rho, mu):
        """:meth:`_step_scalars` of this rank, on the device."""
        maxima = self.case.time.dt is None
        return momentum.step_scalars(state.velocity, state.phi, rho, mu, maxima,
                                     maxima and not self.implicit_viscosity)

    def _over_ranks(self, local):
        """This rank's step scalars (on the device, where they are not read
        yet) on the host, maximised over the ranks, the finite flag as its
        minimum: every rank takes the same step."""
        pending = self.viscous_plan.pending
        if pending is None:
            local = self.backend.to_host(local)
        else:                   # (the viscous solves' report in the same transfer)
            local, report = self.backend.to_host_many([local, pending])
            self.viscous_plan.settle(report)
        return self._ranks_maxima(local)

    def _ranks_maxima(self, local):
        """Step scalars read on this rank, maximised over the ranks, the
        finite flag as its minimum."""
        local = np.array(local, dtype=np.float64)
        local[0] = 1.0 - local[0]
        out = self.partition.maxima(local)
        out[0] = 1.0 - out[0]
        return out

    def _dt_limits(self, scalars):
        """The step from the host scalars of :meth:`_step_scalars`: the
        smallest of the flow's limits (:func:`~bubbleflow.case.time_step.step_limits`),
        no viscous one when the viscosity is implicit."""
        if self.case.time.dt is not None:
            return float(self.case.time.dt)
        umax = max(float(s) for s in scalars[1:1 + self.ndim])
        # The interface moved at most this many cells since the previous
        # step's operator (the state's velocity carried it for that step).
        self._interface_motion = umax * self.ndim ** 0.5 * self._last_dt / self.h
        nu = None if self.implicit_viscosity else float(scalars[1 + self.ndim])
        limits = step_limits(self.case, umax=umax, nu=nu, h=self.h)
        return min(limit.dt for limit in limits.values())

    def _time_step(self, state, scalars):
        """The step from the limits, shortened to land exactly on the end
        and on the next snapshot time."""
        return landing_step(state.time, self._dt_limits(scalars), self.case.time.end,
                            self.case.output.interval)

    # ---------------------------------------------------------------- momentum
    def widened_velocity(self, velocity, width):
        """The face velocities on the slab widened by ``width`` planes."""
        part, nd = self.partition, self.ndim
        return tuple(part.widened(f, width, faces=a == nd - 1) for a, f in enumerate(velocity))

    def cropped_velocity(self, velocity, width):
        """The slab's part of face velocities of the slab widened by ``width`` planes."""
        part, nd = self.partition, self.ndim
        return tuple(part.cropped(f, width, faces=a == nd - 1) for a, f in enumerate(velocity))

    def provisional_velocity(self, phi, velocity, dt, H, rho, mu, rho_faces,
                             interface_box=boxes.UNKNOWN):
        """``u*`` on the interior faces of the (widened) slab: explicit
        (:func:`.momentum.provisional_velocity`) or with the viscous
        stress implicit.  Its launches are replayed per ``dt``
        (:meth:`_replayed`): with implicit viscosity the whole phase, its
        solves' steps planned ahead (:attr:`viscous_plan`, their report
        read later), else the launches around the solves planned at the
        step's start (:meth:`_implicit_solves`, their host reads).
        ``interface_box``: the interface force's box on ``phi`` where the
        step has it (:meth:`_start`)."""
        nd = self.ndim
        # Reduced gravity's consistency term on the vertical faces (momentum.density_mismatch).
        reduced = (momentum.ReducedGravity(self.gravity, self.rho_g, self.rho_l)
                   if self.buoyancy != 0 else None)
        gravity = 0.0 if self.reduced_gravity else self.gravity

        def forces(phi):
            # A level set rebuilt from PLIC interfaces is filtered before its
            # curvature is taken (levelset.smooth says why).
            return interface_force.coefficients(phi, self.curvature_passes, self.spacing,
                                                self.sigma, self.heights, self.buoyancy,
                                                self.y0, self.eps, self._force_faces,
                                                interface_box)

        faces = (*velocity, *rho_faces)
        if not self.implicit_viscosity:
            def explicit(phi, H, mu, *faces):
                return momentum.provisional_velocity(faces[:nd], H, mu, faces[nd:], forces(phi),
                                                     dt, self.spacing, self.signs, gravity,
                                                     reduced)
            return self._replayed(("explicit velocity", dt), explicit, (phi, H, mu, *faces))

        def before(phi, mu, *faces):
            u, rf = faces[:nd], faces[nd:]
            adv = momentum.advection_terms(u, rf, mu, self.spacing, self.signs)
            return forces(phi), momentum.implicit_rhs(u, mu, rf, adv, dt, self.spacing)

        def after(H, *faces):
            solutions, u, rf, coefficients = (faces[k * nd:(k + 1) * nd] for k in range(4))
            if coefficients[0] is None:                 # (no surface tension, no buoyancy)
                coefficients = None
            return momentum.implicit_velocity(solutions, u, H, rf, coefficients, dt,
                                              self.spacing, gravity, reduced)

        steps = self.viscous_plan.steps
        if steps is not None:
            def whole(phi, H, mu, *faces):
                # The viscous solves with the steps planned ahead: launches alone.
                coefficients, rhss = before(phi, mu, *faces)
                solutions, report = viscosity.solve_implicit_ahead(
                    faces[:nd], mu, faces[nd:], rhss, dt, self.spacing, self.signs,
                    self.case.momentum.viscous_rtol, steps, padding=self.partition.padding,
                    owned=self.partition.owned_planes(nd, self.width))
                return after(H, *solutions, *faces, *(coefficients or (None,) * nd)), report

            provisional, report = self._replayed(("momentum", dt, steps), whole,
                                                 (phi, H, mu, *faces))
            self.viscous_plan.pend(report)      # (read with the next scalars: _over_ranks)
            return provisional
        # Steps planned from this step's start: the first step, the first
        # after a snapshot, and where the steps planned ahead fell short.
        coefficients, rhss = self._replayed(("viscous right-hand sides", dt), before,
                                            (phi, mu, *faces))
        solutions = self._implicit_solves(velocity, dt, mu, rho_faces, rhss)
        return self._replayed(("implicit velocity", dt), after,
                              (H, *solutions, *faces, *(coefficients or (None,) * nd)))

    def _implicit_solves(self, velocity, dt, mu, rho_faces, rhss):
        """The viscous solves of every component (backward Euler,
        :func:`.viscosity.solve_implicit`) of the right-hand sides ``rhss``
        (:func:`.momentum.implicit_rhs`), side by side: the interior
        faces' velocities before the forces join; the records kept, a solve
        that did not converge raised as ``FloatingPointError`` naming it."""
        part = self.partition
        solved = viscosity.solve_implicit(velocity, mu, rho_faces, rhss, dt, self.spacing,
                                             self.signs, self.case.momentum.viscous_rtol,
                                             padding=part.padding,
                                             owned=part.owned_planes(self.ndim, self.width))
        for name, (_, rec) in zip("uvw", solved):
            if not rec.converged:
                raise part.error(FloatingPointError(
                    f"the implicit viscous solve for {name} did not converge: {rec.reason} "
                    f"after {rec.iterations} iterations, relative residual {rec.residual:.3g}"))
        self.viscous_plan.solved_from_start([rec for _, rec in solved])
        return [x for x, _ in solved]

    @property
    def viscous_records(self):
        """The last implicit viscous solves' records (None before any)."""
        return self.viscous_plan.records

    # ---------------------------------------------------------------- pressure
    @property
    def pressure(self):
        """The run's pressure solver (:meth:`pressure_solver`'s, kept and
        updated from step to step); None before the first step."""
        return self._pressure

    def restart_point(self):
        """The state of this step is written where a run restarts from: the
        next step's pressure set-up is done in full (:meth:`.PressureSolver.renew`),
        as a restarted run's first step does, so the restart reproduces
        the run bit for bit; so are the next viscous solves' steps
        (planned from that step's start)."""
        self.viscous_plan.restart()
        if self._pressure is not None:
            self._pressure.renew()

    def pressure_solver(self, A, phi, check=True):
        """The run's pressure solver, set up for the operator ``A`` of this
        step and its interface ``phi`` (the widened slab's): built at the
        first step, then only updated (preconditioner, deflation space and
        coarse factorisation for the moved interface; its workspace and
        engine kept; ``check=False``: the update's checks left to the solve)."""
        if self._pressure is not None:
            self._pressure.interface_moved(self._interface_motion)
        self._pressure = self.partition.pressure_solver(
            self._pressure, A, self.partition.solver_phi(A, phi, self.width), self.case, check)
        return self._pressure

    def solve_pressure(self, solver, A, b, p_old, behind=None):
        """``(p, record, queued)``: ``A p = b`` as an increment on the
        previous pressure: ``A d = b - A p_old``, ``p = p_old + d``, stopped
        where ``||b - A p|| <= rtol ||b||`` as a direct solve would be.  The
        solver's checks then see the small increment, not the whole
        pressure, whose rounding (``eps |p|`` times the gas cells' large
        coefficients) would floor the attainable residual.  The record's
        relative figures are against ``||b||``.  Each candidate's ``p_old +
        d`` is queued while the solver's check of it is read (the device makes
        it while the host waits), and ``behind(p)`` queues more work on it;
        ``queued`` is what that returned for the pressure accepted, else None."""
        r = A.residual(b, p_old)

        def candidate(d):
            p = p_old + d
            return p, None if behind is None else behind(p)

        d, record = solver.solve(r, reference=b, behind=candidate)
        accepted = solver.accepted_behind
        if accepted is not None:
            p, queued = accepted
            return p, record, queued
        return p_old + d, record, None

    def total_pressure(self, p, rho):
        """The pressure with its hydrostatic part: ``p`` itself, or with
        reduced gravity ``p_d + rho g.(x - x0)`` (g = -G along the vertical)."""
        if not self.reduced_gravity or self.gravity == 0:
            return p
        return p - self.gravity * rho * (self.cell_heights - self.y0)

    # ------------------------------------------------------------------- step
    def step(self, state):
        """Advance one step (on ranks: every rank its slab, at once);
        returns ``(new_state, StepReport)`` with the whole grid's figures.

        Raises ``FloatingPointError`` when the state is no longer finite.

        Host synchronisations: the finite check together with the time
        step's maxima (read with the previous step's figures where
        ``state`` is the one it made, else one transfer), the pressure
        solve's (the set-up's deferred checks and the solver's own), and
        the diagnostics together with the divergence norms, the figures of
        the physical bounds (:meth:`.bounds.FlowBounds.device_figures`),
        the next step's start (one transfer).  With an adaptive step the
        transport's check of the new velocity, with the report of the
        implicit viscous solves planned ahead, is read in that transfer
        where :attr:`check_ahead` (the end of the step queued before the
        check is read; where the check fails, rarely: the first steps from
        rest, the step is done again as the check asks and its end queued
        anew), else in one transfer of its own before the end.  Where
        :attr:`queue_behind_solve`, that end and the correction are queued
        on the pressure solver's candidate answer before the solver reads
        its check, so the device has done them when the step reads.
        """
        clock, part, w = self.clock, self.partition, self.width
        clock.start()
        phi_w, (H, rho, mu, rho_faces), scalars, interface_box = self._start(state)
        if not scalars[0]:
            raise part.error(FloatingPointError(
                f"the velocity or level set is not finite at t = {state.time:.6g}"))
        clock.mark("finite check")
        dt = self._time_step(state, scalars)
        clock.mark("time step")
        # The pressure set-up needs only this step's densities: on one GPU it
        # runs on a stream of its own while the host queues the momentum
        # phase (the solve runs its checks).
        with (self.backend.side_stream() if part.overlap_setup else SideWork()) as setup:
            A = part.operator(rho_faces, self.dtype, self.case.operator.storage, w,
                              out=self._pressure.operator_arrays() if self._pressure else None)
            solver = self.pressure_solver(A, phi_w, check=not part.overlap_setup)
        clock.mark("pressure set-up")
        fields = (phi_w, H, rho, mu, rho_faces, interface_box)
        ahead = self.check_ahead and self.case.time.dt is None
        behind = (functools.partial(self._queue_checked_end, state, dt)
                  if ahead and self.queue_behind_solve and not clock.enabled else None)
        velocity, p, record, norms, queued = self._project(state, dt, fields, A, solver, setup,
                                                           behind)
        step, redone = state.step + 1, 0
        ended = None
        if ahead:
            ended = self._end_checked(state, velocity, p, dt, norms, queued)
        if ended is None:
            velocity, p, record, norms, dt, redone, bounded = self._checked_projection(
                state, velocity, p, record, norms, dt, fields, A, solver)
            del fields, H, rho, mu, rho_faces, phi_w      # (before the end's fields)
            ended = self._end(state, velocity, p, dt, norms, bounded)
        new, diagnostics, (nd, nu), figures, start = ended
        self._last_dt = dt
        self._next = (new, (*start[:2], self._over_ranks(start[2]), start[3]))
        bounds = self.bounds.figures(figures)
        clock.mark("diagnostics")
        report = StepReport(step=step, time=new.time, dt=dt, record=record,
                            setup_seconds=setup.seconds, divergence=nu / nd if nd > 0 else 0.0,
                            diagnostics=diagnostics,
                            phases=dict(clock.seconds) if clock.enabled else None, bounds=bounds,
                            shortened=redone)
        return new, report

    def _checked_projection(self, state, velocity, p, record, norms, dt, fields, A, solver):
        """The step's projection checked on the host before its end:
        ``(velocity, p, record, norms, dt, redone, bounded)``.  A step whose
        new velocity would carry the interface too far is done again,
        shorter: from rest the first step's length is set by the capillary
        or gravity time alone, and the flow it starts can cross several
        cells in it (the set-up, which depends on the densities alone, is
        kept)."""
        redone, bounded = 0, False
        while redone < MAX_SHORTENED_STEPS:
            shorter, bounded = self._transport_step(state, velocity, dt)
            if shorter is None:
                break
            dt, redone = shorter, redone + 1
            velocity, p, record, norms, _ = self._project(state, dt, fields, A, solver, None)
        if self.viscous_plan.fell_short(self.backend):
            # The viscous steps planned ahead left a solve above its
            # tolerance: the step again, its steps planned from its start
            # (the velocity within the solves' tolerance of the one checked).
            velocity, p, record, norms, _ = self._project(state, dt, fields, A, solver, None)
        return velocity, p, record, norms, dt, redone, bounded

    def _queue_checked_end(self, state, dt, velocity, p):
        """The launches of :meth:`_end_checked` (:meth:`_queue_end`), with
        the transport check and the viscous solves' report among the
        arrays to read."""
        checks = [self._device_transport_scalars(state, velocity)]
        if self.viscous_plan.pending is not None:
            checks.append(self.viscous_plan.pending)
        return self._queue_end(state, velocity, p, dt, True, checks)

    def _end_checked(self, state, velocity, p, dt, norms, queued=None):
        """:meth:`_end` of a step whose transport check (and the report of
        the viscous solves planned ahead) is read with its figures, the end
        queued as for a velocity that passes it (``queued``: by
        :meth:`_queue_checked_end` already); None where it does not pass, or
        the viscous solves fell short (nothing of the end kept)."""
        if queued is None:
            queued = self._queue_checked_end(state, dt, velocity, p)
        ended = self._read_end(queued, norms)
        transport, *viscous = ended[-1]
        if viscous:
            self.viscous_plan.settle(viscous[0])
        reach = self._reach(self._ranks_maxima(transport), dt)
        # (A solve that fell short is done again by _checked_projection.)
        if self.viscous_plan.short or not reach <= TRANSPORT_CFL:
            self.ends_redone += 1
            return None
        return ended[:-1]

    def _end(self, state, velocity, p, dt, norms, bounded, checks=()):
        """``(new, diagnostics, norms, figures, start[, checks])`` of the
        step of length ``dt`` that made ``velocity`` and ``p``: the
        interface moved (:meth:`_end_of_step`), the new state, its
        diagnostics with the divergence norms, the bounds' figures and the
        next step's start (its scalars this rank's, on the host) read in
        one transfer, with the device arrays ``checks`` (their host values
        last, where given)."""
        return self._read_end(self._queue_end(state, velocity, p, dt, bounded, checks), norms)

    def _queue_end(self, state, velocity, p, dt, bounded, checks):
        """The launches of :meth:`_end`: ``(new, next_start, figures, sums,
        checks)``, all on the device."""
        step = state.step + 1
        phi, c, next_start, figures, sums = self._end_of_step(state, velocity, dt, step, bounded)
        new = FlowState(phi=phi, velocity=velocity, p=p, time=state.time + dt, step=step, c=c)
        end = self.case.time.end
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        return new, next_start, figures, sums, checks

    def _read_end(self, queued, norms):
        """:meth:`_end`'s result from its launches ``queued``
        (:meth:`_queue_end`) and the divergence ``norms``: one transfer."""
        new, next_start, figures, sums, checks = queued
        # The next step's start is read with this one's figures (one
        # transfer), the interface's box with it where the force takes one.
        bounds = next_start[3]
        read = [figures, next_start[2], *([] if bounds is None else [bounds]), *checks]
        diagnostics, host_norms, (figures, scalars, *checked) = self.measures.read(
            new, norms, read, sums)
        box = boxes.UNKNOWN if bounds is None else boxes.box_of_bounds(checked.pop(0), self.ndim)
        start = (*next_start[:2], scalars, box)
        return (new, diagnostics, host_norms, figures, start) + ((checked,) if checks else ())

    def _end_of_step(self, state, velocity, dt, step, bounded):
        """``(phi, c, next_start, figures, sums)``: the interface moved by
        the new ``velocity`` (:meth:`move_interface`), the next step's start
        on the device (:meth:`_start_on_device`), the physical bounds'
        figures and the diagnostics' sums, all on the device.  Its launches
        depend on the fields, on ``dt``, on the sweeps' order and the
        reinitialisation that ``step`` sets, and on ``bounded``: on a GPU
        they are replayed from a CUDA graph per such key
        (:class:`~bubbleflow.compute.held_capture.KeyedReplays`)."""
        ls = self.case.levelset
        reinit = bool(ls.reinit_every) and step % ls.reinit_every == 0

        def launches(old_phi, old_c, *faces):
            old = FlowState(phi=old_phi, velocity=faces[:self.ndim], p=None, time=state.time,
                            step=state.step, c=old_c)
            new_velocity = faces[self.ndim:]
            phi, c = self.move_interface(old, new_velocity, dt, step, bounded)
            new = FlowState(phi=phi, velocity=new_velocity, p=None, time=state.time + dt,
                            step=step, c=c)
            return (phi, c, self._start_on_device(new, box=True),
                    self.bounds.device_figures(old_phi, old.velocity, phi, new_velocity, c, dt),
                    self.measures.sums(new))

        return self._replayed(("end of step", dt, step % self.ndim, reinit, bounded), launches,
                              (state.phi, state.c, *state.velocity, *velocity))

    def _replayed(self, key, launches, inputs):
        """``launches(*inputs)``: a part of the step whose launches depend
        on the arrays ``inputs`` and on what ``key`` names alone, replayed
        from a CUDA graph per key on a GPU (:attr:`_replays`; not while the
        phase clock times the phases, nor on a grid whose work takes boxes:
        it writes their regions into arrays kept from step to step, and a
        graph would hold one box's region)."""
        if self._replays is None or self.clock.enabled or boxes.worth_a_box(inputs[0]):
            return launches(*inputs)
        return self._replays(key, launches, inputs)

    def _start(self, state):
        """``(phi_w, properties, scalars, interface_box)`` of a step from
        ``state``: the widened level set, its :meth:`properties`, the host
        step scalars (:meth:`_step_scalars`) and the interface force's box,
        as the step that made ``state`` read them with its figures, else now
        (one transfer; the box :data:`.boxes.UNKNOWN`: the force finds it)."""
        made, self._next = self._next, None
        if made is not None and made[0] is state:
            return made[1]
        phi_w, props, scalars, _ = self._start_on_device(state)
        return phi_w, props, self._over_ranks(scalars), boxes.UNKNOWN

    def _start_on_device(self, state, box=False):
        """:meth:`_start` with this rank's step scalars on the device and,
        with ``box``, the bounds of the force's box on ``phi_w``
        (:func:`.interface_force.box_bounds`; else None)."""
        part, w = self.partition, self.width
        phi_w = part.widened(state.phi, w)
        props = self.properties(phi_w)
        self.clock.mark("properties")
        scalars = self._device_step_scalars(state, part.cropped(props[1], w),
                                            part.cropped(props[2], w))
        bounds = (interface_force.box_bounds(phi_w, self.sigma, self.spacing, self.eps)
                  if box else None)
        self.clock.mark("finite check")
        return phi_w, props, scalars, bounds

    def _project(self, state, dt, fields, A, solver, setup, behind=None):
        """The momentum phase, the pressure solve and the correction of a
        step of length ``dt``: ``(velocity, p, record, norms, queued)``
        (``norms`` the device array of ``[||div u*||, ||div u||]``).
        ``setup``: the pressure set-up's side work, joined before the solve
        (None: done).  ``behind(velocity, p)``: work queued on the
        correction of a candidate pressure while the solver's check of it is
        read; ``queued`` is what it returned for the pressure accepted, else
        None."""
        clock, part, w = self.clock, self.partition, self.width
        phi_w, H, rho, mu, rho_faces, interface_box = fields
        provisional_w = self.provisional_velocity(phi_w, self.widened_velocity(state.velocity, w),
                                                  dt, H, rho, mu, rho_faces, interface_box)
        div_star, b = momentum.pressure_rhs(self.cropped_velocity(provisional_w, w),
                                            self.spacing, dt)
        clock.mark("momentum")
        if setup is not None:
            setup.join()

        def correct(p):
            velocity_w, norms = momentum.correct_velocity(
                provisional_w, part.widened(p, w), rho_faces, part.whole_only(div_star), dt,
                self.spacing)
            velocity = self.cropped_velocity(velocity_w, w)
            return velocity, part.divergence_norms(norms, div_star, velocity, self.spacing)

        def corrected_behind(p):
            velocity, norms = correct(p)
            return velocity, norms, behind(velocity, p)

        p, record, queued = self.solve_pressure(solver, A, b, state.p,
                                                None if behind is None else corrected_behind)
        if setup is not None:
            # The record's set-up: the solve's own and this step's (operator
            # and update, timed on their stream), in place of the update's
            # host time.
            record.setup_seconds += setup.seconds - solver.setup_seconds
        clock.mark("pressure solve")
        if queued is None:
            velocity, norms = correct(p)
        else:
            velocity, norms, queued = queued
        clock.mark("correction")
        return velocity, p, record, norms, queued

    def _transport_step(self, state, velocity, dt):
        """``(shorter, bounded)``: ``shorter`` None where the new
        ``velocity`` carries the interface at most :data:`TRANSPORT_CFL`
        cells along any axis in ``dt`` (``bounded`` True then), else the
        shorter step that carries it ``min(time.cfl, TRANSPORT_CFL)`` cells
        (adaptive steps only: a fixed ``time.dt`` is the user's, and the
        physical bounds report what it does).  One small transfer: the
        maxima of the step's scalars (:func:`.momentum.step_scalars`, one
        kernel pass in 2-D on a GPU), over the ranks."""
        if self.case.time.dt is not None:
            return None, False
        scalars = self._over_ranks(self._device_transport_scalars(state, velocity))
        reach = self._reach(scalars, dt)
        if reach <= TRANSPORT_CFL or not math.isfinite(reach):
            return None, reach <= TRANSPORT_CFL
        speeds = scalars[1:1 + self.ndim]
        cfl = min(self.case.time.cfl, TRANSPORT_CFL)
        return min(cfl * h / float(s) for s, h in zip(speeds, self.spacing) if s > 0), False

    def _device_transport_scalars(self, state, velocity):
        """This rank's step scalars of the new ``velocity`` for the
        transport's check, on the device."""
        # (rho and mu are not read without the viscous maximum: phi stands in.)
        return momentum.step_scalars(velocity, state.phi, state.phi, state.phi, True, False)

    def _reach(self, scalars, dt):
        """The most cells the speeds of the step scalars ``scalars`` (on the
        host, over the ranks) carry the interface in ``dt`` along any axis."""
        return max(float(s) * dt / h for s, h in zip(scalars[1:1 + self.ndim], self.spacing))

    def move_interface(self, state, velocity, dt, step, bounded=False):
        """The interface carried by the new velocity: ``(phi, c)`` at step
        ``step`` (``c`` None for the level set alone); ``bounded``: the
        velocity carries it at most :data:`TRANSPORT_CFL` cells in ``dt``.

        Level set: advected, reinitialised every ``reinit_every`` steps.
        CLSVOF: the volume fraction advected conservatively with the normals
        of the old level set (the sweeps' order rotating with the step), the
        level set advected beside it and then rebuilt as the distance to the
        new PLIC interface in a band of :data:`CLSVOF_BAND` cells, which
        keeps its zero level on the conserved volume.  On ranks the phases
        run on the slab widened by :data:`ADVECT_WINDOW` planes (the level
        set's transport) or :data:`CLSVOF_WINDOW` (the volume fraction's),
        cropped back.
        """
        part, spacing = self.partition, self.spacing
        wc = max(CLSVOF_WINDOW, ADVECT_WINDOW) if self.clsvof else ADVECT_WINDOW
        wide_velocity = self.widened_velocity(velocity, wc)
        wide_phi = part.widened(state.phi, wc)
        c = None
        if self.clsvof:
            last_c, gas = self._gas_box
            phi, c = clsvof_transport.transport(
                wide_phi, part.widened(state.c, wc), wide_velocity, dt, spacing,
                step % self.ndim, bounded, gas if last_c is state.c else boxes.UNKNOWN,
                self._carried.for_level_set(wide_phi))
            phi, c = part.cropped(phi, wc), part.cropped(c, wc)
        else:
            phi = part.cropped(levelset.advect(wide_phi, wide_velocity, dt, spacing), wc)
        self.clock.mark("advection")
        ls = self.case.levelset
        if c is not None:
            # The shortest search that finds a segment or patch for every band
            # cell: exact within CLSVOF_BAND + 1 cells of a straight interface,
            # which covers what the curvature reads.
            # The new fraction's gas box, for the rebuild and the next step's
            # transport (a search reads the host: no CUDA graph holds one).
            wide_c = part.widened(c, wc)
            gas = boxes.gas_box(wide_c) if boxes.worth_a_box(wide_c) else boxes.UNKNOWN
            self._gas_box = (c, gas)
            phi = part.cropped(vof_redistance.redistance(part.widened(phi, wc), wide_c, spacing,
                                                         band=CLSVOF_BAND, reach=CLSVOF_BAND + 1,
                                                         gas=gas), wc)
        elif ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset.reinitialize(phi, spacing, iterations=ls.reinit_iterations,
                                           padding=part.padding)
        self.clock.mark("reinitialisation")
        return phi, c

    # ------------------------------------------------------------ diagnostics
    def diagnostics(self, state):
        """Benchmark quantities of the gas (host floats): Hysing et al.
        (2009) in 2-D, the sphere's in 3-D; with a volume fraction the area
        or volume, centroid and rise velocity are its."""
        return self.measures.read(state)[0]

    def regions(self, state):
        """The connected gas regions of the state
        (:func:`.gas_regions.state_regions` of the whole grid: the bubbles a
        :class:`.bubble_tracking.BubbleTracker` follows), in any dimension
        and with either interface method.  On ranks every rank calls it (the
        state is gathered) and rank 0 gets the regions, None elsewhere."""
        from .gas_regions import state_regions

        whole = self.partition.labelled_state(state)
        return None if whole is None else state_regions(whole, self.spacing)
