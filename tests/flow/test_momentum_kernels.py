"""The momentum step's twins (flow.momentum): the refactor's bits, and the
CUDA kernels (flow.momentum_cuda) against their array code.

On the CPU: a copy of the flow step as it was before its array code moved
into ``flow.momentum`` (:class:`LegacyFlowSolver`, the old formulas kept
here) and the FlowSolver of today run the same steps of Hysing case 1 and of
the bubbly-column flow on NumPy -- explicit and implicit viscosity, reduced
and volumetric gravity, no-slip and free-slip walls, the three face-density
rules, without surface tension, a fixed step -- and every field, the time
step, the divergence ratio and the diagnostics are the same to the bit.

On the GPU (marked ``gpu``): each CUDA variant is called directly (so a
silent fall-back to the array code cannot pass for it) on flow states of a
few NumPy steps of those cases at small non-square grids, and compared with
its reference run on the same CuPy arrays -- the same bits, but for the
norms' sums in another order (1e-12 relative) -- and with the reference on
NumPy (1e-12 relative to the field's largest value: NumPy's ``sin`` may
differ from CUDA's in the last bit).  Each comparison prints its largest
difference (``pytest -rP`` shows them).
"""
import math
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow import levelset_ops, momentum
from bubbleflow.flow.navier_stokes import FlowSolver, FlowState, StepReport, landing_step
from bubbleflow.flow.viscosity import ViscousSystem, corner_viscosity, solve_viscous
from bubbleflow.mesh.levelset import heaviside
from bubbleflow.operators.poisson import PoissonOperator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HYSING = ("two_phase.yaml", "grid.nx=16", "grid.ny=24")              # hx = 1/16, hy = 1/12
COLUMN = ("bubbly_column_flow.yaml", "grid.nx=16", "grid.ny=40")     # hx = 1/32, hy = 1/40

#: Case variants: every scheme, gravity form, wall type and face-density rule.
CONFIGS = {
    "hysing-explicit-reduced": HYSING + ("momentum.viscosity=explicit", "momentum.gravity=reduced"),
    "hysing-explicit-volumetric": HYSING + ("momentum.viscosity=explicit",
                                            "momentum.gravity=volumetric"),
    "hysing-implicit-reduced": HYSING + ("momentum.viscosity=implicit", "momentum.gravity=reduced"),
    "hysing-implicit-volumetric-noslip": HYSING + (
        "momentum.viscosity=implicit", "momentum.gravity=volumetric", "boundaries.left=no_slip",
        "boundaries.right=no_slip"),
    "column-implicit-reduced": COLUMN + ("momentum.viscosity=implicit", "momentum.gravity=reduced"),
    "column-explicit-volumetric-freeslip-harmonic": COLUMN + (
        "momentum.viscosity=explicit", "momentum.gravity=volumetric", "boundaries.top=free_slip",
        "boundaries.bottom=free_slip", "operator.face_density=harmonic"),
    "column-explicit-reduced-arithmetic": COLUMN + (
        "momentum.viscosity=explicit", "momentum.gravity=reduced",
        "operator.face_density=arithmetic"),
    "hysing-no-surface-tension-reduced": HYSING + ("physics.surface_tension=0",
                                                   "momentum.viscosity=explicit"),
    "hysing-no-interface-forces": HYSING + ("physics.surface_tension=0",
                                            "momentum.gravity=volumetric"),
    "column-fixed-dt": COLUMN + ("time.dt=0.0005", "momentum.viscosity=explicit"),
}


def case(name, *more):
    file, *overrides = CONFIGS[name]
    return load_case(os.path.join(ROOT, "cases", file), [*overrides, *more])


# ---------------------------------------------------------------------------
# The flow step as it was (the old formulas, kept here to compare with).
# ---------------------------------------------------------------------------

def shear_x(mu_n, vg, hx):
    """``mu dv/dx`` at the corners, from ``v`` with its ghost columns."""
    return mu_n * (vg[:, 1:] - vg[:, :-1]) / hx


def shear_y(mu_n, ug, hy):
    """``mu du/dy`` at the corners, from ``u`` with its ghost rows."""
    return mu_n * (ug[1:, :] - ug[:-1, :]) / hy


class LegacyFlowSolver(FlowSolver):
    """FlowSolver's step with the array code it had before ``flow.momentum``."""

    def properties(self, phi):
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

    def stable_dt(self, state, rho=None, mu=None):
        t = self.case.time
        if t.dt is not None:
            return float(t.dt)
        xp, h = self.xp, self.h
        if rho is None:
            _, rho, mu, _, _ = self.properties(state.phi)
        maxima = [xp.abs(state.u).max(), xp.abs(state.v).max()]
        if not self.implicit_viscosity:
            maxima.append((mu / rho).max())
        maxima = self.backend.to_host(xp.stack(maxima))
        umax = max(float(maxima[0]), float(maxima[1]), 1e-12)
        limits = [t.cfl * h / umax]
        if not self.implicit_viscosity:
            limits.append(0.2 * h * h / float(maxima[2]))
        if self.sigma > 0:
            rho_avg = 0.5 * (self.rho_l + self.rho_g)
            limits.append(math.sqrt(rho_avg * h ** 3 / (2 * math.pi * self.sigma)))
        if self.gravity > 0:
            limits.append(math.sqrt(h / self.gravity))
        if t.dt_max is not None:
            limits.append(t.dt_max)
        return min(limits)

    def _ghosts(self, u, v):
        xp = self.xp
        ug = xp.concatenate([self.s_bottom * u[:1], u, self.s_top * u[-1:]], axis=0)
        vg = xp.concatenate([self.s_left * v[:, :1], v, self.s_right * v[:, -1:]], axis=1)
        return ug, vg

    def provisional_velocity(self, state, dt, H, rho, mu, rho_x, rho_y):
        if self.implicit_viscosity:
            return self._legacy_implicit(state, dt, H, mu, rho_x, rho_y)
        xp = self.xp
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        ug, vg = self._ghosts(u, v)
        ui, vi = u[:, 1:-1], v[1:-1, :]
        adv_u, adv_v = self._advection(u, v, ug, vg, rho_x, rho_y, mu)
        txx = 2 * mu * (u[:, 1:] - u[:, :-1]) / hx
        tyy = 2 * mu * (v[1:, :] - v[:-1, :]) / hy
        mu_n = corner_viscosity(mu, xp)
        txy = mu_n * ((ug[1:, :] - ug[:-1, :]) / hy + (vg[:, 1:] - vg[:, :-1]) / hx)
        visc_u = (txx[:, 1:] - txx[:, :-1]) / hx + (txy[1:, 1:-1] - txy[:-1, 1:-1]) / hy
        visc_v = (txy[1:-1, 1:] - txy[1:-1, :-1]) / hx + (tyy[1:, :] - tyy[:-1, :]) / hy
        force_u, force_v = self._interface_forces(state.phi, H, visc_u, visc_v)
        force_v = self._reduced_consistency(H, rho_y, force_v)
        us = u.copy()
        vs = v.copy()
        us[:, 1:-1] = ui + dt * (-adv_u + force_u / rho_x)
        if self.reduced_gravity:
            vs[1:-1, :] = vi + dt * (-adv_v + force_v / rho_y)
        else:
            vs[1:-1, :] = vi + dt * (-adv_v + force_v / rho_y - self.gravity)
        return us, vs

    def _legacy_implicit(self, state, dt, H, mu, rho_x, rho_y):
        xp = self.xp
        u, v = state.u, state.v
        hx, hy = self.hx, self.hy
        ug, vg = self._ghosts(u, v)
        ui, vi = u[:, 1:-1], v[1:-1, :]
        adv_u, adv_v = self._advection(u, v, ug, vg, rho_x, rho_y, mu)
        mu_n = corner_viscosity(mu, xp)
        sx = shear_x(mu_n, vg, hx)
        sy = shear_y(mu_n, ug, hy)
        cross_u = (sx[1:, 1:-1] - sx[:-1, 1:-1]) / hy
        cross_v = (sy[1:-1, 1:] - sy[1:-1, :-1]) / hx
        rhs_u = rho_x * (ui - dt * adv_u) + dt * cross_u
        rhs_v = rho_y * (vi - dt * adv_v) + dt * cross_v
        us = u.copy()
        vs = v.copy()
        systems = (("u", rho_x, rhs_u, ui, (self.s_bottom, self.s_top), us[:, 1:-1]),
                   ("v", rho_y, rhs_v, vi, (self.s_left, self.s_right), vs[1:-1, :]))
        records = []
        for name, rho_f, rhs, old, signs, out in systems:
            S = ViscousSystem(name, mu, mu_n, rho_f, dt, hx, hy, signs)
            x, rec = solve_viscous(S, rhs.ravel(), old.ravel(), self.case.momentum.viscous_rtol)
            assert rec.converged
            out[...] = x.reshape(out.shape)
            records.append(rec)
        # The forces join after the solves.
        forces = self.sigma > 0 or (self.reduced_gravity and self.gravity > 0)
        if forces:
            zu, zv = self._interface_forces(state.phi, H, 0.0, 0.0)
            us[:, 1:-1] += dt * (zu / rho_x)
            zv = self._reduced_consistency(H, rho_y, zv)
            vs[1:-1, :] += dt * (zv / rho_y)
        if not self.reduced_gravity:
            vs[1:-1, :] -= dt * self.gravity
        self.viscous_records = records
        return us, vs

    def _reduced_consistency(self, H, rho_y, force_v):
        if not (self.reduced_gravity and self.gravity > 0):
            return force_v
        rho = self.rho_g + (self.rho_l - self.rho_g) * H
        return force_v + self.gravity * (0.5 * (rho[1:, :] + rho[:-1, :]) - rho_y)

    def _interface_forces(self, phi, H, force_u, force_v):
        hx, hy = self.hx, self.hy
        cx = cy = None
        if self.sigma > 0:
            kappa = levelset_ops.curvature(phi, hx, hy)
            cx = self.sigma * (0.5 * (kappa[:, 1:] + kappa[:, :-1]))
            cy = self.sigma * (0.5 * (kappa[1:, :] + kappa[:-1, :]))
        if self.reduced_gravity and self.gravity > 0:
            gx = self.buoyancy * (self.yc - self.y0)
            gy = self.buoyancy * (self.yf - self.y0)
            cx = -gx if cx is None else cx - gx
            cy = -gy if cy is None else cy - gy
        if cx is None:
            return force_u, force_v
        return (force_u - cx * (H[:, 1:] - H[:, :-1]) / hx,
                force_v - cy * (H[1:, :] - H[:-1, :]) / hy)

    def _advection(self, u, v, ug, vg, rho_x, rho_y, mu):
        hx, hy = self.hx, self.hy
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
        xp = self.xp
        central = (plus - minus) / (2 * h)
        upwind = xp.where(velocity > 0, centre - minus, plus - centre) / h
        return xp.where(rho * xp.abs(velocity) * h <= 2.0 * mu, central, upwind)

    def solve_pressure(self, solver, A, b, p_old):
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

    def divergence(self, u, v):
        return (u[:, 1:] - u[:, :-1]) / self.hx + (v[1:, :] - v[:-1, :]) / self.hy

    def step(self, state):
        xp = self.xp
        finite = xp.isfinite(state.u).all() & xp.isfinite(state.v).all()
        if not bool(finite & xp.isfinite(state.phi).all()):
            raise FloatingPointError("not finite")
        H, rho, mu, rho_x, rho_y = self.properties(state.phi)
        end = self.case.time.end
        dt = landing_step(state.time, self.stable_dt(state, rho, mu), end,
                          self.case.output.interval)
        us, vs = self.provisional_velocity(state, dt, H, rho, mu, rho_x, rho_y)
        div_star = self.divergence(us, vs)
        A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, self.hx, self.hy, backend=self.backend,
                            dtype=self.dtype, storage=self.case.operator.storage)
        solver = self.pressure_solver(A, state.phi)
        p, record = self.solve_pressure(solver, A, -div_star / dt, state.p)
        u = us.copy()
        v = vs.copy()
        u[:, 1:-1] -= dt / rho_x * (p[:, 1:] - p[:, :-1]) / self.hx
        v[1:-1, :] -= dt / rho_y * (p[1:, :] - p[:-1, :]) / self.hy
        dv = self.divergence(u, v)
        nd, nu_ = (float(n) for n in self.backend.to_host(
            xp.sqrt(xp.stack([(div_star * div_star).sum(), (dv * dv).sum()]))))
        divergence = nu_ / nd if nd > 0 else 0.0
        phi = levelset_ops.advect(state.phi, u, v, dt, self.hx, self.hy)
        step = state.step + 1
        ls = self.case.levelset
        if ls.reinit_every and step % ls.reinit_every == 0:
            phi = levelset_ops.reinitialize(phi, self.hx, self.hy, iterations=ls.reinit_iterations)
        new = FlowState(phi=phi, u=u, v=v, p=p, time=state.time + dt, step=step)
        if abs(new.time - end) <= 1e-12 * end:
            new.time = end
        report = StepReport(step=step, time=new.time, dt=dt, record=record, setup_seconds=0.0,
                            divergence=divergence, diagnostics=self.diagnostics(new))
        return new, report


# ---------------------------------------------------------------------------
# CPU: the refactor keeps every bit.
# ---------------------------------------------------------------------------

def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_steps_have_the_bits_of_the_old_formulas(name):
    """Six steps (a reinitialisation among them) of the old and the new step
    on NumPy: every field, the step, the divergence ratio and the
    diagnostics the same to the bit."""
    numpy = get_backend("numpy")
    new, old = FlowSolver(case(name), numpy), LegacyFlowSolver(case(name), numpy)
    a, b = new.initial_state(), old.initial_state()
    for _ in range(6):
        a, ra = new.step(a)
        b, rb = old.step(b)
        for field in ("phi", "u", "v", "p"):
            assert same_bits(getattr(a, field), getattr(b, field)), (ra.step, field)
        assert (a.time, ra.dt, ra.divergence) == (b.time, rb.dt, rb.divergence)
        assert ra.record.iterations == rb.record.iterations
        assert ra.diagnostics.keys() == rb.diagnostics.keys()
        assert all(same_bits(ra.diagnostics[k], rb.diagnostics[k]) for k in ra.diagnostics)


@pytest.mark.parametrize("name", ["hysing-explicit-volumetric", "column-implicit-reduced",
                                  "hysing-no-interface-forces"])
def test_public_methods_have_the_bits_of_the_old_formulas(name):
    """properties, stable_dt, provisional_velocity and divergence of the new
    solver on a moved state, against the old formulas."""
    numpy = get_backend("numpy")
    new, old = FlowSolver(case(name), numpy), LegacyFlowSolver(case(name), numpy)
    state = new.initial_state()
    for _ in range(3):
        state, _ = new.step(state)
    props = new.properties(state.phi)
    assert all(same_bits(x, y) for x, y in zip(props, old.properties(state.phi)))
    H, rho, mu, rho_x, rho_y = props
    assert new.stable_dt(state) == old.stable_dt(state)
    assert new.stable_dt(state, rho, mu) == old.stable_dt(state, rho, mu)
    dt = 0.7 * new.stable_dt(state)
    for x, y in zip(new.provisional_velocity(state, dt, *props),
                    old.provisional_velocity(state, dt, *props)):
        assert same_bits(x, y)
    assert same_bits(new.divergence(state.u, state.v), old.divergence(state.u, state.v))


def test_a_state_that_is_not_finite_is_refused():
    numpy = get_backend("numpy")
    flow = FlowSolver(case("hysing-explicit-reduced"), numpy)
    state = flow.initial_state()
    state.v[3, 4] = np.nan
    with pytest.raises(FloatingPointError, match="not finite at t = 0"):
        flow.step(state)
    state = flow.initial_state()
    state.phi[0, 0] = np.inf
    with pytest.raises(FloatingPointError, match="not finite"):
        flow.step(state)


def test_the_reference_of_each_twin_is_what_the_flow_calls():
    """The twins dispatch to their array code on NumPy (no variant for it)."""
    for name in momentum.__all__:
        concept = getattr(momentum, name)
        if hasattr(concept, "variants"):
            assert concept.variant("numpy") is concept.reference
            assert "cupy" in concept.variants, name


# ---------------------------------------------------------------------------
# GPU: each CUDA variant against its reference.
# ---------------------------------------------------------------------------

#: Flow states for the kernels: the Hysing and column cases at small non-square grids.
GPU_CONFIGS = ["hysing-explicit-reduced", "hysing-implicit-volumetric-noslip",
               "column-implicit-reduced", "column-explicit-volumetric-freeslip-harmonic",
               "column-explicit-reduced-arithmetic", "hysing-no-surface-tension-reduced",
               "hysing-no-interface-forces"]
GPU_GRIDS = {"hysing": ("grid.nx=24", "grid.ny=40"), "column": ("grid.nx=20", "grid.ny=48")}

#: Outputs that are sums (in another order than the array code's).
SUMS = {"norms", "correct_velocity[2]", "diagnostics_and_norms"}
RTOL = 1e-12


@pytest.fixture(scope="module")
def flow_states():
    """``{config: (flow, state, dt)}``: a few NumPy steps of each GPU config."""
    numpy = get_backend("numpy")
    out = {}
    for name in GPU_CONFIGS:
        flow = FlowSolver(case(name, *GPU_GRIDS[name.split("-")[0]]), numpy)
        state = flow.initial_state()
        for _ in range(4):
            state, rep = flow.step(state)
        out[name] = (flow, state, rep.dt)
    return out


def twin_calls(flow, state, dt):
    """``[(label, twin, args)]`` for every twin on host inputs of this state
    (the inputs made by the references, so both backends see the same ones)."""
    m = momentum
    u, v, p, phi = state.u, state.v, state.p, state.phi
    hx, hy = flow.hx, flow.hy
    walls = (flow.s_left, flow.s_right, flow.s_bottom, flow.s_top)
    props = (phi, flow.eps, flow.rho_l, flow.rho_g, flow.mu_l, flow.mu_g,
             flow.case.operator.face_density)
    H, rho, mu, rho_x, rho_y = m.fluid_properties.reference(*props)
    adv_u, adv_v = m.advection_terms.reference(u, v, rho_x, rho_y, mu, hx, hy, *walls)
    coef = (phi, flow.yc, flow.yf, hx, hy, flow.sigma, flow.buoyancy, flow.y0)
    cx, cy = (np.ascontiguousarray(c) for c in m.interface_coefficients.reference(*coef))
    forces = flow.sigma > 0 or flow.buoyancy != 0
    g = 0.0 if flow.reduced_gravity else flow.gravity
    us = m.explicit_velocity_u.reference(u, v, mu, H, rho_x, adv_u, cx, dt, hx, hy,
                                         flow.s_bottom, flow.s_top, forces)
    red = (flow.gravity if flow.buoyancy != 0 else 0.0, flow.rho_g, flow.rho_l)
    vs = m.explicit_velocity_v.reference(u, v, mu, H, rho_y, adv_v, cy, dt, hx, hy,
                                         flow.s_left, flow.s_right, g, forces, *red)
    rhs_u = m.implicit_rhs_u.reference(u, v, mu, rho_x, adv_u, dt, hx, hy)
    rhs_v = m.implicit_rhs_v.reference(u, v, mu, rho_y, adv_v, dt, hx, hy)
    div_star, b = m.pressure_rhs.reference(us, vs, hx, hy, dt)
    r = b - 0.5 * div_star
    norms = m.norms.reference(b, r)
    return [
        ("fluid_properties", m.fluid_properties, props),
        ("step_scalars", m.step_scalars, (u, v, phi, rho, mu, True, True)),
        ("step_scalars-inviscid", m.step_scalars, (u, v, phi, rho, mu, True, False)),
        ("step_scalars-fixed-dt", m.step_scalars, (u, v, phi, rho, mu, False, False)),
        ("advection_terms", m.advection_terms, (u, v, rho_x, rho_y, mu, hx, hy, *walls)),
        ("interface_coefficients", m.interface_coefficients, coef),
        ("explicit_velocity_u", m.explicit_velocity_u,
         (u, v, mu, H, rho_x, adv_u, cx, dt, hx, hy, flow.s_bottom, flow.s_top, forces)),
        ("explicit_velocity_v", m.explicit_velocity_v,
         (u, v, mu, H, rho_y, adv_v, cy, dt, hx, hy, flow.s_left, flow.s_right, g, forces, *red)),
        ("implicit_rhs_u", m.implicit_rhs_u, (u, v, mu, rho_x, adv_u, dt, hx, hy)),
        ("implicit_rhs_v", m.implicit_rhs_v, (u, v, mu, rho_y, adv_v, dt, hx, hy)),
        ("implicit_velocity_u", m.implicit_velocity_u,
         ((rhs_u / rho_x).ravel(), u, H, cx, rho_x, dt, hx, forces)),
        ("implicit_velocity_v", m.implicit_velocity_v,
         ((rhs_v / rho_y).ravel(), v, H, cy, rho_y, dt, hy, forces, g, *red)),
        ("divergence", m.divergence, (us, vs, hx, hy)),
        ("pressure_rhs", m.pressure_rhs, (us, vs, hx, hy, dt)),
        ("norms", m.norms, (b, r)),
        ("correct_velocity", m.correct_velocity, (us, vs, p, rho_x, rho_y, div_star, dt, hx, hy)),
        ("diagnostics_and_norms", m.diagnostics_and_norms, (phi, u, v, hx, hy, flow.eps, norms)),
    ]


def outputs(label, result):
    """``[(label, host array or dict)]`` of one call's result."""
    if isinstance(result, tuple):
        return [item for k, r in enumerate(result) for item in outputs(f"{label}[{k}]", r)]
    if isinstance(result, dict):
        return [(label, result)]
    return [(label, np.asarray(result.get() if hasattr(result, "get") else result))]


def relative(got, ref):
    if isinstance(ref, dict):
        worst = 0.0
        for k, r in ref.items():
            if np.isnan(r):
                assert np.isnan(got[k]), k
                continue
            worst = max(worst, abs(got[k] - r) / max(abs(r), 1e-300))
        return worst
    assert got.shape == ref.shape and got.dtype == ref.dtype
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300)) if ref.size else 0.0


def is_sum(label):
    return label.split("[")[0] in SUMS or label in SUMS or label.startswith("diagnostics_and_norms")


@pytest.mark.gpu
@pytest.mark.parametrize("config", GPU_CONFIGS)
def test_cuda_variants_match_their_reference(config, flow_states, cupy_backend):
    cp = cupy_backend.xp
    flow, state, dt = flow_states[config]
    worst_bits, worst_host = 0.0, 0.0
    for label, concept, args in twin_calls(flow, state, dt):
        dev = tuple(cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
        got = concept.variants["cupy"](*dev)
        assert got is not NotImplemented, label
        on_gpu = outputs(label, concept.reference(*dev))
        on_cpu = outputs(label, concept.reference(*args))
        for (name, g), (_, r), (_, h) in zip(outputs(label, got), on_gpu, on_cpu):
            bits = relative(g, r)
            host = relative(g, h)
            equal = all(x == y or (np.isnan(x) and np.isnan(y)) for x, y in
                        zip(g.values(), r.values())) if isinstance(r, dict) else same_bits(g, r)
            print(f"maxdiff {config} {name}: {bits:.2e} against the reference on CuPy "
                  f"(equal bits: {equal}), {host:.2e} against NumPy")
            if is_sum(name):
                assert bits <= RTOL, name
            else:
                assert equal, name
            assert host <= RTOL, name
            worst_bits, worst_host = max(worst_bits, bits), max(worst_host, host)
    print(f"maxdiff {config} all: {worst_bits:.2e} (CuPy reference), {worst_host:.2e} (NumPy)")


@pytest.mark.gpu
@pytest.mark.parametrize("config", ["hysing-explicit-reduced", "column-implicit-reduced"])
def test_flow_steps_on_the_gpu_follow_numpy(config, cupy_backend):
    """A few whole steps on CuPy (the kernels) and on NumPy: the same flow to
    the solves' tolerances (the pressure's and the implicit viscous ones:
    the first steps' small velocities, and so the time steps, differ by
    about their rtol), divergence-free."""
    runs = {}
    for backend in (get_backend("numpy"), cupy_backend):
        flow = FlowSolver(case(config, *GPU_GRIDS[config.split("-")[0]]), backend)
        state, reports = flow.initial_state(), []
        for _ in range(6):
            state, rep = flow.step(state)
            reports.append(rep)
            assert rep.divergence < 1e-8
        runs[backend.name] = (state, reports, backend)
    (a, ra, _), (b, rb, gpu) = runs["numpy"], runs["cupy"]
    worst = max(abs(y.dt - x.dt) / x.dt for x, y in zip(ra, rb))
    print(f"maxdiff {config} dt: {worst:.2e}")
    assert worst < 1e-5
    for x, y in zip(ra, rb):
        assert y.diagnostics["centroid_y"] == pytest.approx(x.diagnostics["centroid_y"], rel=1e-8)
    for field in ("u", "v", "p", "phi"):
        ref, got = getattr(a, field), gpu.to_host(getattr(b, field))
        diff = relative(got, ref)
        print(f"maxdiff {config} {field} after 6 steps: {diff:.2e}")
        assert diff < 1e-5


@pytest.mark.gpu
def test_fallbacks_run_the_reference(cupy_backend):
    """float32 and grids under the kernels' reach: the variants decline."""
    cp = cupy_backend.xp
    m = momentum
    phi = cp.linspace(-1, 1, 12, dtype=cp.float32).reshape(3, 4)
    assert m.fluid_properties.variants["cupy"](phi, 0.1, 1000.0, 1.0, 1.0, 0.1,
                                               "levelset") is NotImplemented
    out = m.fluid_properties(phi, 0.1, 1000.0, 1.0, 1.0, 0.1, "levelset")
    assert out[1].dtype == cp.float32
    thin = cp.linspace(-1, 1, 5, dtype=cp.float64).reshape(5, 1)
    assert m.fluid_properties.variants["cupy"](thin, 0.1, 1000.0, 1.0, 1.0, 0.1,
                                               "levelset") is NotImplemented
    u, v = cp.zeros((5, 2)), cp.zeros((6, 1))
    assert m.divergence.variants["cupy"](u, v, 0.1, 0.1) is NotImplemented
    assert m.divergence(u, v, 0.1, 0.1).shape == (5, 1)
    assert m.norms.variants["cupy"](phi, phi) is NotImplemented


@pytest.mark.gpu
def test_kernels_are_deterministic(flow_states, cupy_backend):
    """The same input gives the same bits, sums included (a restart is
    compared bit for bit)."""
    cp = cupy_backend.xp
    flow, state, dt = flow_states["column-implicit-reduced"]
    runs = []
    for _ in range(2):
        row = []
        for label, concept, args in twin_calls(flow, state, dt):
            dev = tuple(cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
            row += [r for _, r in outputs(label, concept.variants["cupy"](*dev))
                    if not isinstance(r, dict)]
        runs.append(row)
    for a, b in zip(*runs):
        assert same_bits(a, b)
