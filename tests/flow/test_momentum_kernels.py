"""The momentum phase's twins (flow.momentum): the array code against the
2-D formulas, and the 2-D CUDA kernels (flow.momentum_cuda) against the
array code.

On the CPU: the 2-D step's formulas written out here, array by array in the
order the 2-D CUDA kernels (momentum.cu) sum them, and every function of
``flow.momentum`` on a 2-D field give the same bits -- the three
face-density rules, no-slip and free-slip walls, central and upwind
advection, surface tension and reduced gravity with and without each
other, the volumetric gravity, the implicit path.

On the GPU (marked ``gpu``): each CUDA variant is called directly (so a
silent fall-back to the array code cannot pass for it) on flow states of a
few NumPy steps of Hysing case 1 and the bubbly column at small non-square
grids, and compared with its reference run on the same CuPy arrays -- the
same bits, but for the norms' sums in another order (1e-12 relative) --
and with the reference on NumPy (1e-12 relative to the field's largest
value: NumPy's ``sin`` may differ from CUDA's in the last bit).  Each
comparison prints its largest difference (``pytest -rP`` shows them).
"""
import os
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.twins import check_variant, on_device, outputs, relative, same_bits

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow import flow_solver, levelset, momentum
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import heaviside

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RHO_L, RHO_G, MU_L, MU_G = 1000.0, 100.0, 10.0, 1.0


# ---------------------------------------------------------------------------
# The 2-D formulas, written out.
# ---------------------------------------------------------------------------

def properties(phi, eps, rule):
    H = heaviside(phi, eps, np)
    rho = RHO_G + (RHO_L - RHO_G) * H
    mu = MU_G + (MU_L - MU_G) * H
    if rule == "levelset":
        rho_x = RHO_G + (RHO_L - RHO_G) * heaviside(0.5 * (phi[:, 1:] + phi[:, :-1]), eps, np)
        rho_y = RHO_G + (RHO_L - RHO_G) * heaviside(0.5 * (phi[1:, :] + phi[:-1, :]), eps, np)
    elif rule == "harmonic":
        rho_x = 2 * rho[:, 1:] * rho[:, :-1] / (rho[:, 1:] + rho[:, :-1])
        rho_y = 2 * rho[1:, :] * rho[:-1, :] / (rho[1:, :] + rho[:-1, :])
    else:
        rho_x = 0.5 * (rho[:, 1:] + rho[:, :-1])
        rho_y = 0.5 * (rho[1:, :] + rho[:-1, :])
    return H, rho, mu, rho_x, rho_y


def ghosts(u, v, signs):
    """u with ghost rows, v with ghost columns (mirrored with the walls' signs)."""
    (s_left, s_right), (s_bottom, s_top) = signs
    ug = np.concatenate([s_bottom * u[:1], u, s_top * u[-1:]], axis=0)
    vg = np.concatenate([s_left * v[:, :1], v, s_right * v[:, -1:]], axis=1)
    return ug, vg


def corners(mu):
    """mu at the cell corners: the mean of the four cells, edge-copied."""
    m = np.pad(mu, 1, mode="edge")
    return 0.25 * (m[:-1, :-1] + m[1:, :-1] + m[:-1, 1:] + m[1:, 1:])


def hybrid(minus, centre, plus, speed, h, rho, mu):
    # Spacings enter as their inverses (1 / h, and 0.5 / h for 2 h).
    central = (plus - minus) * (0.5 * (1.0 / h))
    upwind = np.where(speed > 0, centre - minus, plus - centre) * (1.0 / h)
    return np.where(rho * np.abs(speed) * h <= 2.0 * mu, central, upwind)


def advection(u, v, rho_x, rho_y, mu, hx, hy, signs):
    ug, vg = ghosts(u, v, signs)
    ui, vi = u[:, 1:-1], v[1:-1, :]
    v_at_u = 0.25 * (v[:-1, :-1] + v[:-1, 1:] + v[1:, :-1] + v[1:, 1:])
    mu_x = 0.5 * (mu[:, 1:] + mu[:, :-1])
    adv_u = (ui * hybrid(u[:, :-2], ui, u[:, 2:], ui, hx, rho_x, mu_x)
             + v_at_u * hybrid(ug[:-2, 1:-1], ui, ug[2:, 1:-1], v_at_u, hy, rho_x, mu_x))
    u_at_v = 0.25 * (u[:-1, :-1] + u[:-1, 1:] + u[1:, :-1] + u[1:, 1:])
    mu_y = 0.5 * (mu[1:, :] + mu[:-1, :])
    adv_v = (u_at_v * hybrid(vg[1:-1, :-2], vi, vg[1:-1, 2:], u_at_v, hx, rho_y, mu_y)
             + vi * hybrid(v[:-2, :], vi, v[2:, :], vi, hy, rho_y, mu_y))
    return adv_u, adv_v


def coefficients(phi, yc, yf, hx, hy, sigma, buoyancy, y0):
    cx = cy = None
    if sigma > 0:
        kappa = levelset.curvature(phi, (hx, hy))
        cx = sigma * (0.5 * (kappa[:, 1:] + kappa[:, :-1]))
        cy = sigma * (0.5 * (kappa[1:, :] + kappa[:-1, :]))
    if buoyancy != 0:
        gx, gy = buoyancy * (yc - y0), buoyancy * (yf - y0)
        cx = np.broadcast_to(-gx, (phi.shape[0], phi.shape[1] - 1)) if cx is None else cx - gx
        cy = np.broadcast_to(-gy, (phi.shape[0] - 1, phi.shape[1])) if cy is None else cy - gy
    return None if cx is None else (cx, cy)


def consistency(H, rho_y, G):
    """Reduced gravity's G (rho_hat - rho_y) on the interior v faces."""
    rho = RHO_G + (RHO_L - RHO_G) * H
    return G * (0.5 * (rho[1:, :] + rho[:-1, :]) - rho_y)


def explicit_step(u, v, mu, H, rho_x, rho_y, adv, coef, dt, hx, hy, signs, gravity, G):
    ug, vg = ghosts(u, v, signs)
    ix, iy = 1.0 / hx, 1.0 / hy
    txx = 2 * mu * (u[:, 1:] - u[:, :-1]) * ix
    tyy = 2 * mu * (v[1:, :] - v[:-1, :]) * iy
    txy = corners(mu) * ((ug[1:, :] - ug[:-1, :]) * iy + (vg[:, 1:] - vg[:, :-1]) * ix)
    force_u = (txx[:, 1:] - txx[:, :-1]) * ix + (txy[1:, 1:-1] - txy[:-1, 1:-1]) * iy
    force_v = (txy[1:-1, 1:] - txy[1:-1, :-1]) * ix + (tyy[1:, :] - tyy[:-1, :]) * iy
    if coef is not None:
        force_u = force_u - coef[0] * (H[:, 1:] - H[:, :-1]) * ix
        force_v = force_v - coef[1] * (H[1:, :] - H[:-1, :]) * iy
    if G:
        force_v = force_v + consistency(H, rho_y, G)
    us, vs = u.copy(), v.copy()
    us[:, 1:-1] = u[:, 1:-1] + dt * (-adv[0] + force_u / rho_x)
    if gravity:
        vs[1:-1, :] = v[1:-1, :] + dt * (-adv[1] + force_v / rho_y - gravity)
    else:
        vs[1:-1, :] = v[1:-1, :] + dt * (-adv[1] + force_v / rho_y)
    return us, vs


def implicit_rhs(u, v, mu, rho_x, rho_y, adv, dt, hx, hy):
    mu_n = corners(mu)
    sx = mu_n[:, 1:-1] * (v[:, 1:] - v[:, :-1]) / hx
    sy = mu_n[1:-1, :] * (u[1:, :] - u[:-1, :]) / hy
    return (rho_x * (u[:, 1:-1] - dt * adv[0]) + dt * ((sx[1:, :] - sx[:-1, :]) / hy),
            rho_y * (v[1:-1, :] - dt * adv[1]) + dt * ((sy[:, 1:] - sy[:, :-1]) / hx))


def implicit_step(xu, xv, u, v, H, rho_x, rho_y, coef, dt, hx, hy, gravity, G):
    us, vs = u.copy(), v.copy()
    us[:, 1:-1] = xu.reshape(rho_x.shape)
    vs[1:-1, :] = xv.reshape(rho_y.shape)
    if coef is not None:
        us[:, 1:-1] += dt * ((-coef[0] * (H[:, 1:] - H[:, :-1]) * (1.0 / hx)) / rho_x)
        force = -coef[1] * (H[1:, :] - H[:-1, :]) * (1.0 / hy)
        if G:
            force = force + consistency(H, rho_y, G)
        vs[1:-1, :] += dt * (force / rho_y)
    if gravity:
        vs[1:-1, :] -= dt * gravity
    return us, vs


def correction(us, vs, p, rho_x, rho_y, div_star, dt, hx, hy):
    u, v = us.copy(), vs.copy()
    u[:, 1:-1] -= dt / rho_x * (p[:, 1:] - p[:, :-1]) / hx
    v[1:-1, :] -= dt / rho_y * (p[1:, :] - p[:-1, :]) / hy
    div = (u[:, 1:] - u[:, :-1]) / hx + (v[1:, :] - v[:-1, :]) / hy
    return u, v, np.sqrt(np.stack([(div_star * div_star).sum(), (div * div).sum()]))


def field_2d(shape=(24, 18), spacing=(1 / 18, 2 / 24), seed=1):
    rng = np.random.default_rng(seed)
    (ny, nx), (hx, hy) = shape, spacing
    y, x = np.meshgrid((np.arange(ny) + .5) * hy, (np.arange(nx) + .5) * hx, indexing="ij")
    phi = np.sqrt((x - .5) ** 2 + (y - .45 * ny * hy) ** 2) - .25 + 0.02 * np.sin(7 * x)
    u, v = rng.standard_normal((ny, nx + 1)), rng.standard_normal((ny + 1, nx))
    u[:, [0, -1]] = 0
    v[[0, -1]] = 0
    yc = ((np.arange(ny) + 0.5) * hy)[:, None]
    yf = (np.arange(1, ny) * hy)[:, None]
    return phi, u, v, rng.standard_normal((ny, nx)), yc, yf


# ---------------------------------------------------------------------------
# CPU: the array code has the formulas' bits.
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["levelset", "harmonic", "arithmetic"])
@pytest.mark.parametrize("signs", [((-1.0, -1.0), (-1.0, -1.0)), ((1.0, -1.0), (-1.0, 1.0))])
@pytest.mark.parametrize("sigma,G", [(0.0, 0.0), (24.5, 0.0), (0.0, 9.81), (24.5, 9.81)])
@pytest.mark.parametrize("shape,spacing", [((24, 18), (1 / 18, 2 / 24)),
                                           ((13, 29), (1 / 29, 0.5 / 13))])
def test_2d_momentum_terms_have_the_bits_of_the_formulas(rule, signs, sigma, G, shape, spacing):
    phi, u, v, p, yc, yf = field_2d(shape, spacing)
    hx, hy = spacing
    vel = (u, v)
    eps = 1.5 * max(spacing)
    H, rho, mu, rho_x, rho_y = properties(phi, eps, rule)
    got = momentum.fluid_properties(phi, eps, RHO_L, RHO_G, MU_L, MU_G, rule)
    assert all(same_bits(a, b) for a, b in zip((*got[:3], *got[3]), (H, rho, mu, rho_x, rho_y)))
    faces = (rho_x, rho_y)
    for maxima, viscous in ((True, True), (True, False), (False, False)):
        want = [1.0, abs(u).max() if maxima else 0.0, abs(v).max() if maxima else 0.0,
                (mu / rho).max() if viscous else 0.0]
        assert same_bits(momentum.step_scalars(vel, phi, rho, mu, maxima, viscous),
                         np.array(want))
    for scale in (1.0, 1e4):                           # upwind and central advection
        adv = advection(u, v, rho_x, rho_y, scale * mu, hx, hy, signs)
        got = momentum.advection_terms(vel, faces, scale * mu, spacing, signs)
        assert all(same_bits(a, b) for a, b in zip(got, adv))
    adv = advection(u, v, rho_x, rho_y, mu, hx, hy, signs)
    buoyancy, y0 = G * (RHO_L - RHO_G), 0.8
    coef = coefficients(phi, yc, yf, hx, hy, sigma, buoyancy, y0)
    got = momentum.interface_coefficients(phi, spacing, sigma, (yc, yf), buoyancy, y0)
    assert (got is None) == (coef is None)
    if coef is not None:
        assert all(same_bits(a, b) for a, b in zip(got, coef))
    dt = 1e-3
    for gravity, reduced in ((0.98, None), (0.0, G)):
        rg = momentum.ReducedGravity(G, RHO_G, RHO_L) if reduced else None
        want = explicit_step(u, v, mu, H, rho_x, rho_y, adv, coef, dt, hx, hy, signs, gravity,
                             reduced)
        got = momentum.provisional_velocity(vel, H, mu, faces, coef, dt, spacing, signs,
                                               gravity, rg)
        assert all(same_bits(a, b) for a, b in zip(got, want))
        xu, xv = 0.9 * u[:, 1:-1].ravel(), 1.1 * v[1:-1, :].ravel()
        want = implicit_step(xu, xv, u, v, H, rho_x, rho_y, coef, dt, hx, hy, gravity, reduced)
        got = momentum.implicit_velocity((xu, xv), vel, H, faces, coef, dt, spacing, gravity,
                                            rg)
        assert all(same_bits(a, b) for a, b in zip(got, want))
    got = momentum.implicit_rhs(vel, mu, faces, adv, dt, spacing)
    assert all(same_bits(a, b) for a, b in zip(got, implicit_rhs(u, v, mu, rho_x, rho_y, adv, dt,
                                                                 hx, hy)))
    div = (u[:, 1:] - u[:, :-1]) / hx + (v[1:, :] - v[:-1, :]) / hy
    assert same_bits(momentum.divergence(vel, spacing), div)
    got = momentum.pressure_rhs(vel, spacing, dt)
    assert same_bits(got[0], div) and same_bits(got[1], -div / dt)
    (uc, vc), norms = momentum.correct_velocity(vel, p, faces, div, dt, spacing)
    want = correction(u, v, p, rho_x, rho_y, div, dt, hx, hy)
    assert all(same_bits(a, b) for a, b in zip((uc, vc, norms), want))
    assert same_bits(momentum.norms(div, p), np.sqrt(np.stack([(div * div).sum(),
                                                                  (p * p).sum()])))


def test_correction_without_the_divergence_gives_no_norms():
    phi, u, v, p, _, _ = field_2d()
    faces = properties(phi, 0.1, "levelset")[3:]
    spacing = (1 / 18, 2 / 24)
    with_norms, norms = momentum.correct_velocity((u, v), p, faces, p, 1e-3, spacing)
    alone, none = momentum.correct_velocity((u, v), p, faces, None, 1e-3, spacing)
    assert none is None and norms is not None
    assert all(same_bits(a, b) for a, b in zip(with_norms, alone))


def test_the_reference_of_each_twin_is_what_the_flow_calls():
    """The twins dispatch to their array code on NumPy, and each has a CUDA variant."""
    twins = [name for name in momentum.__all__
             if hasattr(getattr(momentum, name), "variants")]
    assert len(twins) == 11
    for name in twins:
        concept = getattr(momentum, name)
        assert concept.variant("numpy") is concept.reference
        assert "cupy" in concept.variants, name


# ---------------------------------------------------------------------------
# GPU: each CUDA variant against its reference.
# ---------------------------------------------------------------------------

HYSING = ("two_phase.yaml", "grid.nx=24", "grid.ny=40")
COLUMN = ("bubbly_column_flow.yaml", "grid.nx=20", "grid.ny=48")

#: Case variants: every scheme, gravity form, wall type and face-density rule.
CONFIGS = {
    "hysing-explicit-reduced": HYSING + ("momentum.viscosity=explicit", "momentum.gravity=reduced"),
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
}

#: Outputs that are sums (in another order than the array code's).
SUMS = {"norms", "correct_velocity[1]"}
RTOL = 1e-12


def case(name):
    file, *overrides = CONFIGS[name]
    return load_case(os.path.join(ROOT, "cases", file), overrides)


def flow_setup(c):
    """What the momentum phase's calls take from the case ``c``."""
    g = Grid.from_config(c.grid)
    sign = {"no_slip": -1.0, "free_slip": 1.0}
    b, fl = c.boundaries, c.fluids
    rho_l, rho_g = fl.liquid.density, fl.gas.density
    G = c.physics.gravity
    reduced = c.momentum.gravity == "reduced"
    buoyancy = G * (rho_l - rho_g) if reduced and G > 0 else 0.0
    fs = c.geometry.free_surface
    ny, hy = g.cells[1], g.spacing[1]
    return SimpleNamespace(
        spacing=g.spacing, eps=1.5 * max(g.spacing), signs=((sign[b.left], sign[b.right]),
                                                            (sign[b.bottom], sign[b.top])),
        props=(rho_l, rho_g, fl.liquid.viscosity, fl.gas.viscosity, c.operator.face_density),
        sigma=c.physics.surface_tension, buoyancy=buoyancy, y0=float(fs) if fs is not None else 0.0,
        gravity=0.0 if reduced else G,
        reduced=momentum.ReducedGravity(G, rho_g, rho_l) if buoyancy != 0 else None,
        heights=(((np.arange(ny) + 0.5) * hy)[:, None], (np.arange(1, ny) * hy)[:, None]))


@pytest.fixture(scope="module")
def flow_states():
    """``{config: (setup, state, dt)}``: a few NumPy steps of each config."""
    numpy = get_backend("numpy")
    out = {}
    for name in CONFIGS:
        c = case(name)
        flow = flow_solver(c, numpy)
        state = flow.initial_state()
        for _ in range(4):
            state, rep = flow.step(state)
        out[name] = (flow_setup(c), state, rep.dt)
    return out


def twin_calls(s, state, dt):
    """``[(label, twin, args)]`` for every twin on host inputs of this state
    (the inputs made by the references, so both backends see the same ones)."""
    m = momentum
    velocity = state.velocity if hasattr(state, "velocity") else (state.u, state.v)
    phi, p, spacing, signs = state.phi, state.p, s.spacing, s.signs
    props = (phi, s.eps, *s.props)
    H, rho, mu, faces = m.fluid_properties.reference(*props)
    adv = m.advection_terms.reference(velocity, faces, mu, spacing, signs)
    coef_args = (phi, spacing, s.sigma, s.heights, s.buoyancy, s.y0)
    coef = m.interface_coefficients.reference(*coef_args)
    coef = None if coef is None else tuple(np.ascontiguousarray(c) for c in coef)
    explicit = (velocity, H, mu, faces, coef, dt, spacing, signs, s.gravity, s.reduced)
    provisional = m.provisional_velocity.reference(*explicit)
    rhss = m.implicit_rhs.reference(velocity, mu, faces, adv, dt, spacing)
    solutions = tuple((r / f).ravel() for r, f in zip(rhss, faces))
    div_star, b = m.pressure_rhs.reference(provisional, spacing, dt)
    r = b - 0.5 * div_star
    calls = [
        ("fluid_properties", m.fluid_properties, props),
        ("step_scalars", m.step_scalars, (velocity, phi, rho, mu, True, True)),
        ("step_scalars-inviscid", m.step_scalars, (velocity, phi, rho, mu, True, False)),
        ("step_scalars-fixed-dt", m.step_scalars, (velocity, phi, rho, mu, False, False)),
        ("advection_terms", m.advection_terms, (velocity, faces, mu, spacing, signs)),
        ("provisional_velocity", m.provisional_velocity, explicit),
        ("implicit_rhs", m.implicit_rhs, (velocity, mu, faces, adv, dt, spacing)),
        ("implicit_velocity", m.implicit_velocity,
         (solutions, velocity, H, faces, coef, dt, spacing, s.gravity, s.reduced)),
        ("divergence", m.divergence, (provisional, spacing)),
        ("pressure_rhs", m.pressure_rhs, (provisional, spacing, dt)),
        ("norms", m.norms, (b, r)),
        ("correct_velocity", m.correct_velocity, (provisional, p, faces, div_star, dt, spacing)),
        ("correct_velocity-slab", m.correct_velocity, (provisional, p, faces, None, dt, spacing)),
    ]
    if coef is not None:                # (nothing acts: None, no kernel)
        calls.append(("interface_coefficients", m.interface_coefficients, coef_args))
    return calls


@pytest.mark.gpu
@pytest.mark.parametrize("config", list(CONFIGS))
def test_cuda_variants_match_their_reference(config, flow_states, cupy_backend):
    cp = cupy_backend.xp
    s, state, dt = flow_states[config]
    worst_bits, worst_host = 0.0, 0.0
    for label, concept, args in twin_calls(s, state, dt):
        bits, host = check_variant(config, label, concept, args, cp, SUMS, RTOL)
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
        flow = flow_solver(case(config), backend)
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
    """float32, grids under the kernels' reach and 3-D calls they do not
    cover (the interface coefficients without their heights): the variants
    decline and the array code runs (tests/flow/test_momentum_kernels_3d.py
    has the 3-D kernels)."""
    cp = cupy_backend.xp
    m = momentum
    phi = cp.linspace(-1, 1, 12, dtype=cp.float32).reshape(3, 4)
    args = (0.1, 1000.0, 1.0, 1.0, 0.1, "levelset")
    assert m.fluid_properties.variants["cupy"](phi, *args) is NotImplemented
    assert m.fluid_properties(phi, *args)[1].dtype == cp.float32
    thin = cp.linspace(-1, 1, 5, dtype=cp.float64).reshape(5, 1)
    assert m.fluid_properties.variants["cupy"](thin, *args) is NotImplemented
    u, v = cp.zeros((5, 2)), cp.zeros((6, 1))
    assert m.divergence.variants["cupy"]((u, v), (0.1, 0.1)) is NotImplemented
    assert m.divergence((u, v), (0.1, 0.1)).shape == (5, 1)
    assert m.norms.variants["cupy"](phi, phi) is NotImplemented
    cube = cp.linspace(-1, 1, 64, dtype=cp.float64).reshape(4, 4, 4)
    velocity = (cp.zeros((4, 4, 5)), cp.zeros((4, 5, 4)), cp.zeros((5, 4, 4)))
    spacing = (0.25, 0.25, 0.25)
    assert m.divergence(velocity, spacing).shape == (4, 4, 4)
    interface = m.interface_coefficients.variants["cupy"]
    assert interface(cube.astype(cp.float32), spacing, 1.0, (None,) * 3, 0.0, 0.0) \
        is NotImplemented
    assert interface(cube, spacing, 0.0, (None,) * 3, 2.0, 0.0) is NotImplemented
    assert m.interface_coefficients(cube, spacing, 0.0, (None,) * 3, 0.0, 0.0) is None


@pytest.mark.gpu
def test_kernels_are_deterministic(flow_states, cupy_backend):
    """The same input gives the same bits, sums included (a restart is
    compared bit for bit)."""
    cp = cupy_backend.xp
    s, state, dt = flow_states["column-implicit-reduced"]
    runs = []
    for _ in range(2):
        row = []
        for label, concept, args in twin_calls(s, state, dt):
            row += [r for _, r in outputs(label, concept.variants["cupy"](*on_device(args, cp)))
                    if r is not None]
        runs.append(row)
    for a, b in zip(*runs):
        assert same_bits(a, b)
