"""The flow step on several ranks: each advances its slab of the grid.

:class:`FlowSolverRanks` is :class:`.navier_stokes_nd.FlowSolverND`'s step
on the slab of planes (array axis 0, the vertical) of one rank
(:class:`~bubbleflow.mesh.ranks.RankSlab`); the state holds the slab's cells
and faces (:mod:`.slabs`: the vertical faces at both ends of the slab, a
face between two slabs held by both ranks).  Each phase runs the
one-process functions:

* the momentum phase, the fluid properties and the projection's correction
  on the slab widened by :data:`WINDOW` planes of each neighbour (one swap
  of the level set, the velocity and the pressure a step), cropped back to
  the slab: a value there reads no plane the widening lacks, so it is the
  one process's value, bit for bit;
* the pressure solve on the ranks (:class:`~bubbleflow.operators.distributed.DistributedOperator`
  from the slab's face densities, :class:`~bubbleflow.linalg.solver_ranks.RankPressureSolver`);
* the level set's advection and reinitialisation with the neighbours'
  planes as their ghost layers (:class:`.slabs.SlabPadding`);
* the step's limits, norms and bubble diagnostics summed or maximised over
  the ranks (so every rank takes the same step and reports the same); in
  2-D the diagnostics are the 2-D solver's (:class:`.navier_stokes.FlowSolver`,
  whose output a 2-D run on one process writes).

CLSVOF's volume fraction is advected and the level set rebuilt from it on
the slab widened by :data:`CLSVOF_WINDOW` planes, cropped back (the same
argument).  What is not on the ranks yet is refused before any work
(:func:`rank_refusal`): slabs thinner than the widest window.  The
implicit viscous solves run on the ranks (:mod:`.viscosity_ranks`).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..linalg.solver_ranks import RankPressureSolver, slab_align
from ..mesh.grid import Grid
from ..mesh.levelset import build_levelset, geometry_circles
from ..mesh.ranks import rank_slab, slab_edges
from ..operators.distributed import DistributedOperator
from ..operators.poisson import PoissonOperator
from . import levelset_nd, levelset_ops, momentum_nd, vof, vof_nd
from .bounds import FlowBounds
from .navier_stokes import CLSVOF_BAND, CLSVOF_CURVATURE_PASSES
from .navier_stokes_nd import FlowSolverND, FlowStateND
from .slabs import SlabPadding

__all__ = ["FlowSolverRanks", "WINDOW", "CLSVOF_WINDOW", "rank_refusal", "slab_state",
           "whole_state", "agreed"]

#: Planes of each neighbour a slab is widened by for the momentum phase:
#: the reach of its stencils (face density, advection, stress, interface
#: force) from a face at the slab's end, plus the smoothing passes before
#: the curvature (:func:`momentum_window`).
WINDOW = 4
#: Planes for CLSVOF's volume fraction: its advection (the level set's
#: normals, one sweep an axis) and its redistancing (the band, then the
#: search ``band + 1`` cells further, from patches a cell or two wide).
CLSVOF_WINDOW = CLSVOF_BAND + 5


def momentum_window(case):
    """The momentum phase's widening for ``case``."""
    return WINDOW + (CLSVOF_CURVATURE_PASSES if case.levelset.method == "clsvof" else 0)


def thickest_window(case):
    """The most planes of a neighbour any phase of ``case`` reads."""
    clsvof = case.levelset.method == "clsvof"
    return max(momentum_window(case), CLSVOF_WINDOW if clsvof else 0)


def rank_refusal(case, ranks):
    """``(key, value, expected)`` of the first thing of the flow ``case``
    that ``ranks`` ranks cannot run, or None."""
    grid = Grid.from_config(case.grid)
    planes = grid.shape[0]
    slow = "grid." + ("nz" if grid.ndim == 3 else "ny")
    need = thickest_window(case) + 1
    try:
        if _thinnest_slab(case, grid, planes, ranks) >= need:
            return None
    except ValueError:
        return None         # the solver's own refusal names why (apps.ranks)
    # Slab edges on the solver's alignment (multigrid's aggregates) can leave
    # one slab thinner than an even share: name a count that works.
    fits = next(p for p in range(max(planes, need * ranks), 64 * need * ranks)
                if _thinnest_slab(case, grid, p, ranks) >= need)
    align = _alignment(case, grid, fits, ranks)
    return (slow, planes, f"a count whose slabs have {need} planes a rank for the neighbours' "
                          f"stencils, such as {fits}"
                          + (f" (slab edges on multiples of {align})" if align > 1 else ""))


def _alignment(case, grid, planes, ranks):
    """What the slab edges of ``planes`` planes on ``ranks`` ranks are multiples of."""
    shape = (planes,) + tuple(grid.shape[1:])
    return slab_align(case.solver, SimpleNamespace(shape=shape, ndim=grid.ndim), ranks)


def _thinnest_slab(case, grid, planes, ranks):
    """The planes of the thinnest slab when ``planes`` planes are shared by ``ranks`` ranks."""
    edges = slab_edges(planes, ranks, _alignment(case, grid, planes, ranks))
    return min(b - a for a, b in zip(edges, edges[1:]))


def slab_state(state, slab, xp=None):
    """The slab's part of a whole-grid :class:`FlowStateND` (or of the 2-D
    solver's :class:`.navier_stokes.FlowState`: a checkpoint of a 2-D run),
    on ``xp`` (default: the state's)."""
    nd = state.phi.ndim
    cells, faces = slice(slab.lo, slab.hi), slice(slab.lo, slab.hi + 1)
    velocity = state.velocity if hasattr(state, "velocity") else (state.u, state.v)
    own = (lambda f: f.copy()) if xp is None else (lambda f: xp.array(f))
    return FlowStateND(phi=own(state.phi[cells]),
                       velocity=tuple(own(v[faces] if a == nd - 1 else v[cells])
                                      for a, v in enumerate(velocity)),
                       p=own(state.p[cells]), time=state.time, step=state.step,
                       c=None if state.c is None else own(state.c[cells]))


def agreed(exc):
    """``exc`` marked as raised by every rank alike (from figures reduced
    over the ranks): the run loop reports it as the flow's failure, where
    one rank's own error ends every rank."""
    exc.agreed = True
    return exc


def whole_state(state, comm, root=0):
    """The ranks' slab states gathered on ``root`` as one whole-grid
    :class:`FlowStateND` on the host (None on the other ranks); every rank
    calls it."""
    from ..compute.backend import backend_of

    host = backend_of(state.phi).to_host
    nd = state.phi.ndim

    def joined(f, faces=False):
        parts = comm.gather(host(f), root)
        if parts is None:
            return None
        if faces:           # a face between two slabs is held by both: once
            parts = [parts[0]] + [q[1:] for q in parts[1:]]
        return np.concatenate(parts, axis=0)

    phi, p = joined(state.phi), joined(state.p)
    velocity = tuple(joined(v, faces=a == nd - 1) for a, v in enumerate(state.velocity))
    c = None if state.c is None else joined(state.c)
    if comm.rank != root:
        return None
    return FlowStateND(phi=phi, velocity=velocity, p=p, time=state.time, step=state.step, c=c)


class FlowSolverRanks(FlowSolverND):
    """The time stepper of a flow case on the slab of rank ``comm.rank``."""

    def __init__(self, case, backend, comm):
        super().__init__(case, backend)
        refused = rank_refusal(case, comm.size)
        if refused is not None:
            key, value, expected = refused
            raise ValueError(f"{key} = {value!r}: expected {expected}")
        self.comm = comm
        g = self.grid
        self.bounds = FlowBounds(g, self.clsvof, comm)
        self.slab = rank_slab(g.shape, comm.rank, comm.size,
                              slab_align(case.solver, g, comm.size))
        self.padding = SlabPadding(comm, self.slab)
        s = self.slab
        self.width = momentum_window(case)
        self.window = self._window(self.width)
        self.window_grid = g.planes(*self.window)
        # The interface force's face heights on the window's planes, the
        # cells' heights on the slab's (the total pressure's).
        wlo, whi = self.window
        self.heights = tuple(h[wlo:whi - 1] if a == g.ndim - 1 else h[wlo:whi]
                             for a, h in enumerate(self.heights))
        self.slab_heights = self.xp.asarray(g.centres[-1][s.lo:s.hi], dtype=self.dtype).reshape(
            (-1,) + (1,) * (g.ndim - 1))

    # ------------------------------------------------------------------ state
    def initial_state(self):
        """Fluid at rest, the interface from the case geometry: built on the
        host for the whole grid, the slab's part on the backend."""
        g, xp, dtype = self.grid, self.xp, self.dtype
        phi = np.asarray(build_levelset(g, self.case.geometry.free_surface,
                                        geometry_circles(self.case.geometry, g)), dtype=dtype)
        c = self._initial_fraction(phi) if self.clsvof else None
        s, nd = self.slab, g.ndim
        cells = slice(s.lo, s.hi)
        velocity = []
        for a in range(nd):
            shape = list(s.local_shape)
            shape[nd - 1 - a] += 1
            velocity.append(xp.zeros(tuple(shape), dtype=dtype))
        return FlowStateND(phi=xp.array(phi[cells]), velocity=tuple(velocity),
                           p=xp.zeros(s.local_shape, dtype=dtype),
                           c=None if c is None else xp.array(c[cells]))

    def _window(self, width):
        """The planes ``(lo, hi)`` of the slab widened by ``width`` planes."""
        s = self.slab
        return max(s.lo - width, 0), min(s.hi + width, self.grid.shape[0])

    def _widened_velocity(self, velocity, width):
        return tuple(self.padding.widened(v, width, faces=a == self.ndim - 1)
                     for a, v in enumerate(velocity))

    def widened(self, state):
        """The state on the slab widened by the momentum phase's planes."""
        pad, w = self.padding, self.width
        return FlowStateND(phi=pad.widened(state.phi, w),
                           velocity=self._widened_velocity(state.velocity, w),
                           p=pad.widened(state.p, w), time=state.time, step=state.step)

    def cropped(self, f, faces=False, width=None):
        """The slab's part of a field of the slab widened by ``width``
        planes (default the momentum phase's)."""
        start = self.slab.lo - self._window(self.width if width is None else width)[0]
        return f[start:start + self.slab.hi - self.slab.lo + (1 if faces else 0)]

    def _cropped_velocity(self, velocity):
        return tuple(self.cropped(v, faces=a == self.ndim - 1) for a, v in enumerate(velocity))

    # --------------------------------------------------------------- time step
    def _step_scalars(self, state, rho, mu):
        """The slab's scalars, maximised over the ranks (the finite flag as
        its minimum): every rank takes the same step."""
        local = np.asarray(super()._step_scalars(state, rho, mu), dtype=np.float64)
        local[0] = 1.0 - local[0]
        out = np.array([self.comm.allreduce_max(v) for v in local])
        out[0] = 1.0 - out[0]
        return out

    def _two_norms(self, a, b):
        """``(||a||, ||b||)`` over the ranks, host floats."""
        local = self.xp.stack([(a * a).sum(), (b * b).sum()])
        return tuple(float(np.sqrt(v))
                     for v in self.backend.to_host(self.comm.allreduce_sum(local)))

    # ---------------------------------------------------------------- momentum
    def _keep_viscous_records(self, state, names, solved):
        # The records are the ranks' (their norms reduced): a failure is agreed.
        try:
            super()._keep_viscous_records(state, names, solved)
        except FloatingPointError as exc:
            raise agreed(exc) from None

    def _owned(self, a):
        """The planes ``(start, stop)`` of component ``a``'s unknowns (its
        interior faces) on the widened slab that this rank owns: its cells'
        planes, for the vertical component the faces above its cells."""
        s, wlo = self.slab, self.window[0]
        top = s.hi if a != self.ndim - 1 else min(s.hi, self.grid.shape[0] - 1)
        return s.lo - wlo, top - wlo

    def _implicit_solves(self, state, dt, mu, rho_faces):
        """The viscous solves on the ranks (:mod:`.viscosity_ranks`) from the
        widened slab's ``state``, ``mu`` and ``rho_faces``: per component
        its interior faces on the widened slab, the solution on the owned
        planes and the neighbours' beside them (the rest is cropped away)."""
        from .levelset_nd import along
        from .viscosity_ranks import SlabViscousSystem, solve_slab_systems

        nd, velocity, spacing = self.ndim, state.velocity, self.spacing
        adv = momentum_nd.advection_terms(velocity, rho_faces, mu, spacing, self.signs)
        rhss = momentum_nd.implicit_rhs(velocity, mu, rho_faces, adv, dt, spacing)
        systems, rhs_own, starts = [], [], []
        for a, (ua, rho_f, rhs) in enumerate(zip(velocity, rho_faces, rhss)):
            start, stop = self._owned(a)
            systems.append(SlabViscousSystem(a, mu, rho_f, dt, spacing, self.signs,
                                             (start, stop), self.padding))
            rhs_own.append(rhs[start:stop].ravel())
            starts.append(ua[along(nd, nd - 1 - a, slice(1, -1))][start:stop])
        solved = solve_slab_systems(systems, rhs_own, starts, self.case.momentum.viscous_rtol)
        self._keep_viscous_records(state, "uvw", solved)
        out = []
        for S, rhs, (x, _) in zip(systems, rhss, solved):
            full = self.xp.zeros_like(rhs)
            full[S.ext[0]:S.ext[1]] = S.widened(x)
            out.append(full)
        return out

    # ---------------------------------------------------------------- pressure
    def operator(self, rho_faces):
        """The rank's rows of the pressure operator of the widened slab's
        face densities."""
        A = PoissonOperator.from_faces(rho_faces, self.window_grid, backend=self.backend,
                                       dtype=self.dtype, densities=True, storage="matrix_free")
        return DistributedOperator.from_couplings(A.couplings(), self.slab, self.comm,
                                                  self.backend, first=self.window[0])

    def pressure_solver(self, A, phi, check=True):
        if self._pressure is None:
            self._pressure = RankPressureSolver(self.case.solver, self.grid)
        lo, hi, _, _ = A.slab.extended()
        start = lo - self.window[0]
        return self._pressure.update(A, phi=phi[start:start + hi - lo])

    def total_pressure(self, p, rho):
        if not self.reduced_gravity or self.gravity == 0:
            return p
        return p - self.gravity * rho * (self.slab_heights - self.y0)

    # ------------------------------------------------------------------- step
    def step(self, state):
        """Advance the slab one step (every rank at once); returns
        ``(new_state, StepReport)`` with the whole grid's figures."""
        from .navier_stokes import StepReport

        clock = self.clock
        clock.start()
        wide = self.widened(state)
        Hw, rhow, muw, rho_faces_w = self.properties(wide.phi)
        rho, mu = self.cropped(rhow), self.cropped(muw)
        scalars = self._step_scalars(state, rho, mu)
        if not scalars[0]:
            raise agreed(FloatingPointError(
                f"the velocity or level set is not finite at t = {state.time:.6g}"))
        dt = self._time_step(state, scalars)
        clock.mark("time step")
        A = self.operator(rho_faces_w)
        solver = self.pressure_solver(A, wide.phi)
        clock.mark("pressure set-up")
        provisional_w = self.provisional_velocity(wide, dt, Hw, rhow, muw, rho_faces_w)
        provisional = self._cropped_velocity(provisional_w)
        div_star = self.divergence(provisional)
        clock.mark("momentum")
        p, record = self.solve_pressure(solver, A, -div_star / dt, state.p)
        clock.mark("pressure solve")
        p_w = self.padding.widened(p, self.width)
        velocity = self._cropped_velocity(
            momentum_nd.correct_velocity(provisional_w, p_w, rho_faces_w, dt, self.spacing))
        nd_, nu_ = self._two_norms(div_star, self.divergence(velocity))
        clock.mark("correction")
        phi, c = self.move_interface(state, velocity, dt, state.step + 1)
        new = FlowStateND(phi=phi, velocity=velocity, p=p, time=state.time + dt,
                          step=state.step + 1, c=c)
        end = self.case.time.end
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        diagnostics = self.diagnostics(new)
        bounds = self.bounds.measure(state.phi, state.velocity, phi, velocity, c, dt)
        clock.mark("diagnostics")
        report = StepReport(step=new.step, time=new.time, dt=dt, record=record,
                            setup_seconds=solver.setup_seconds,
                            divergence=nu_ / nd_ if nd_ > 0 else 0.0, diagnostics=diagnostics,
                            phases=dict(clock.seconds) if clock.enabled else None, bounds=bounds)
        return new, report

    def move_interface(self, state, velocity, dt, step):
        """The level set advected with the neighbours' planes as ghost
        layers, reinitialised every ``reinit_every`` steps; with CLSVOF the
        volume fraction advected and the level set rebuilt from it on the
        slab widened by :data:`CLSVOF_WINDOW` planes (cropped back)."""
        pad, w = self.padding, CLSVOF_WINDOW
        c = None
        if self.clsvof:
            c = self.cropped(vof_nd.advect(pad.widened(state.c, w),
                                           self._widened_velocity(velocity, w), dt,
                                           self.spacing, first_axis=step % self.ndim,
                                           normal_from=pad.widened(state.phi, w)), width=w)
        phi = levelset_nd.advect(state.phi, velocity, dt, self.spacing, padding=pad)
        self.clock.mark("advection")
        ls = self.case.levelset
        if c is not None:
            phi = self.cropped(vof_nd.redistance(pad.widened(phi, w), pad.widened(c, w),
                                                 self.spacing, band=CLSVOF_BAND,
                                                 reach=CLSVOF_BAND + 1), width=w)
        elif ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset_nd.reinitialize(phi, self.spacing, iterations=ls.reinit_iterations,
                                           padding=pad)
        self.clock.mark("reinitialisation")
        return phi, c

    def regions(self, state):
        """2-D CLSVOF: the gas regions of the whole grid (the one-process
        solver's, :func:`.vof.region_diagnostics`), on rank 0 from the
        gathered state (the run asks at its snapshots); None elsewhere."""
        if state.c is None or self.ndim != 2:
            return None
        whole = whole_state(state, self.comm)
        if whole is None:
            return None
        hx, hy = self.spacing
        return vof.region_diagnostics(whole.c, whole.velocity[1], hx, hy, normal_from=whole.phi)

    def diagnostics(self, state):
        """The bubble quantities over the ranks: in 3-D those of
        :func:`.levelset_nd.bubble_diagnostics`, in 2-D the 2-D solver's
        (:func:`.levelset_ops.bubble_diagnostics`: the contour's length and
        area by marching squares, each lattice square summed by one rank)."""
        if self.ndim != 2:
            d = levelset_nd.bubble_diagnostics(state.phi, state.velocity, self.spacing,
                                               self.eps, padding=self.padding)
            if state.c is not None:
                d.update(self._gas_diagnostics(state))
            return d
        widened = self.padding.widened(state.phi, 1)
        squares = widened[1:] if self.slab.lower is not None else widened
        hx, hy = self.spacing
        sums = levelset_ops.bubble_sums_slab(state.phi, squares, *state.velocity, hx, hy,
                                             self.eps, self.slab.lo)
        d = levelset_ops.bubble_quantities(self.comm.allreduce_sum(sums), hx, hy)
        d = {k: float(v) for k, v in d.items()}
        if state.c is not None:
            d.update(self._gas_diagnostics(state))
        return d

    def _gas_diagnostics(self, state):
        """The volume fraction's gas quantities over the ranks (those of
        :func:`.vof.gas_diagnostics` in 2-D, :func:`.vof_nd.gas_diagnostics`
        in 3-D): the slab's sums, summed over the ranks."""
        xp, nd, c = self.xp, self.ndim, state.c
        top = state.velocity[-1]
        sums = [xp.sum(c)]
        for a, h in enumerate(self.spacing):
            k = nd - 1 - a
            first = self.slab.lo if k == 0 else 0
            shape = [1] * nd
            shape[k] = c.shape[k]
            x = ((xp.arange(first, first + c.shape[k], dtype=c.dtype) + 0.5) * h).reshape(shape)
            sums.append(xp.sum(c * x))
        sums.append(xp.sum(c * (0.5 * (top[:-1] + top[1:]))))
        mass, *moments = (float(v) for v in self.backend.to_host(
            self.comm.allreduce_sum(xp.stack(sums))))
        size = "area" if nd == 2 else "volume"
        names = ["centroid_" + "xyz"[a] for a in range(nd)]
        if mass <= 0.0:
            nan = float("nan")
            return {size: 0.0, **{n: nan for n in names}, "rise_velocity": nan}
        out = {size: mass * math.prod(self.spacing)}
        out.update({n: w / mass for n, w in zip(names, moments[:nd])})
        out["rise_velocity"] = moments[nd] / mass
        return out
