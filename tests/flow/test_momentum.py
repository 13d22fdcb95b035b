"""The momentum step's options: implicit viscosity, reduced gravity, the
pressure solved as an increment."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.case.config import CaseError, load_case
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.viscosity import ViscousSystem, corner_viscosity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def case_file(name, *overrides):
    return load_case(os.path.join(ROOT, "cases", name), list(overrides))


def dense(S):
    n = S.shape[0]
    xp = S.xp
    return np.stack([S.backend.to_host(S.matvec(xp.asarray(np.eye(n)[k]))) for k in range(n)],
                    axis=1)


def random_system(component, signs, backend, ny=5, nx=7, seed=0):
    rng = np.random.default_rng(seed)
    xp = backend.xp
    mu = xp.asarray(rng.uniform(0.1, 3.0, (ny, nx)))
    shape = (ny, nx - 1) if component == "u" else (ny - 1, nx)
    rho_f = xp.asarray(rng.uniform(1.0, 1000.0, shape))
    return ViscousSystem(component, mu, corner_viscosity(mu, xp), rho_f, 0.3, 0.2, 0.1, signs)


@pytest.mark.parametrize("component", ["u", "v"])
@pytest.mark.parametrize("signs", [(-1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)])
def test_viscous_system_is_symmetric_positive_definite(component, signs, backend):
    S = random_system(component, signs, backend)
    M = dense(S)
    assert np.allclose(M, M.T, rtol=0, atol=1e-12 * abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0
    assert np.allclose(np.diag(M), backend.to_host(S.diagonal).ravel(), rtol=1e-14)


@pytest.mark.parametrize("component,signs", [("u", (-1.0, 1.0)), ("v", (1.0, -1.0))])
def test_viscous_stress_matches_the_explicit_formula(component, signs, backend):
    """``L x`` of the implicit system is the explicit step's own-component
    stress (normal stress at centres, shear at corners, mirrored ghosts)."""
    rng = np.random.default_rng(1)
    ny, nx, hx, hy = 6, 5, 0.2, 0.1
    xp = backend.xp
    mu = rng.uniform(0.1, 3.0, (ny, nx))
    mu_n = np.pad(mu, 1, mode="edge")
    mu_n = 0.25 * (mu_n[:-1, :-1] + mu_n[1:, :-1] + mu_n[:-1, 1:] + mu_n[1:, 1:])
    if component == "u":
        u = np.zeros((ny, nx + 1))
        u[:, 1:-1] = rng.standard_normal((ny, nx - 1))
        ug = np.concatenate([signs[0] * u[:1], u, signs[1] * u[-1:]], axis=0)
        txx = 2 * mu * (u[:, 1:] - u[:, :-1]) / hx
        txy = mu_n * (ug[1:] - ug[:-1]) / hy
        want = (txx[:, 1:] - txx[:, :-1]) / hx + (txy[1:, 1:-1] - txy[:-1, 1:-1]) / hy
        x, rho_f = u[:, 1:-1], np.ones((ny, nx - 1))
    else:
        v = np.zeros((ny + 1, nx))
        v[1:-1, :] = rng.standard_normal((ny - 1, nx))
        vg = np.concatenate([signs[0] * v[:, :1], v, signs[1] * v[:, -1:]], axis=1)
        tyy = 2 * mu * (v[1:] - v[:-1]) / hy
        txy = mu_n * (vg[:, 1:] - vg[:, :-1]) / hx
        want = (txy[1:-1, 1:] - txy[1:-1, :-1]) / hx + (tyy[1:] - tyy[:-1]) / hy
        x, rho_f = v[1:-1, :], np.ones((ny - 1, nx))
    S = ViscousSystem(component, xp.asarray(mu), xp.asarray(mu_n), xp.asarray(rho_f), 0.01,
                      hx, hy, signs)
    # L x = (rho_f x - S x) / dt: the component's own part of the stress.
    got = backend.to_host((S.rho_f * xp.asarray(x) - S.matvec(xp.asarray(x).ravel())
                           .reshape(x.shape)) / S.dt)
    assert np.allclose(got, want, rtol=1e-10, atol=1e-10 * abs(want).max())


def test_implicit_viscous_step_matches_a_direct_solve(backend):
    """One implicit step's viscous solves against SciPy's direct solve of the
    same systems, built from the momentum terms independently."""
    from bubbleflow.flow import momentum

    case = case_file("hysing_case2.yaml", "grid.nx=10", "grid.ny=20")
    flow = FlowSolver(case, backend)
    state = flow.initial_state()
    for _ in range(3):
        state, _ = flow.step(state)
    H, rho, mu, rho_x, rho_y = flow.properties(state.phi)
    dt = flow.stable_dt(state, rho, mu)
    u, v, hx, hy = state.u, state.v, flow.hx, flow.hy
    adv_u, adv_v = momentum.advection_terms(u, v, rho_x, rho_y, mu, hx, hy, flow.s_left,
                                            flow.s_right, flow.s_bottom, flow.s_top)
    rhs_u = momentum.implicit_rhs_u(u, v, mu, rho_x, adv_u, dt, hx, hy)
    rhs_v = momentum.implicit_rhs_v(u, v, mu, rho_y, adv_v, dt, hx, hy)
    xu, xv = flow._implicit_solves(state, dt, mu, rho_x, rho_y, rhs_u, rhs_v)
    assert [r.converged for r in flow.viscous_records] == [True, True]
    xp = backend.xp
    for name, rho_f, rhs, x, signs in (("u", rho_x, rhs_u, xu, (flow.s_bottom, flow.s_top)),
                                       ("v", rho_y, rhs_v, xv, (flow.s_left, flow.s_right))):
        S = ViscousSystem(name, mu, corner_viscosity(mu, xp), rho_f, dt, hx, hy, signs)
        direct = spla.spsolve(sp.csr_matrix(dense(S)), backend.to_host(rhs).ravel())
        got = backend.to_host(x).ravel()
        assert np.allclose(got, direct, rtol=1e-8, atol=1e-10 * abs(direct).max()), name


def test_implicit_viscosity_lifts_the_viscous_step_limit(backend):
    """Hysing case 2 (viscosity ratio 100): explicit, the viscous limit sets
    the step; implicit, a larger one (convective/capillary) does, and the
    flow stays divergence-free with its solves converged."""
    steps = {}
    for scheme in ("explicit", "implicit"):
        case = case_file("hysing_case2.yaml", "grid.nx=20", "grid.ny=40", "time.end=0.3",
                         f"momentum.viscosity={scheme}")
        flow = FlowSolver(case, backend)
        state = flow.initial_state()
        n = 0
        while state.time < case.time.end:
            state, rep = flow.step(state)
            assert rep.record.converged and rep.divergence < 1e-8
            n += 1
        steps[scheme] = n
        assert np.isfinite(backend.to_host(state.u)).all()
    print(steps)
    assert steps["implicit"] * 3 <= steps["explicit"]


def test_fixed_dt_above_the_viscous_limit_is_refused_only_when_explicit(tmp_path):
    base = ["grid.nx=20", "grid.ny=40", "time.dt=0.008"]   # viscous limit 0.005
    case_file("hysing_case2.yaml", *base)                      # implicit: no viscous limit
    with pytest.raises(CaseError, match="viscous stability limit"):
        case_file("hysing_case2.yaml", *base, "momentum.viscosity=explicit")


@pytest.mark.parametrize("viscosity", ["explicit", "implicit"])
def test_reduced_gravity_keeps_a_flat_free_surface_at_rest(viscosity, backend):
    """Liquid below a flat free surface, no bubble: with reduced gravity the
    dynamic pressure is ~0 and nothing moves; the total pressure is hydrostatic."""
    case = case_file("bubbly_column_flow.yaml", "grid.nx=16", "grid.ny=32", "time.end=0.05",
                     "geometry.bubbles=[]", "physics.surface_tension=0",
                     f"momentum.viscosity={viscosity}")
    flow = FlowSolver(case, backend)
    state = flow.initial_state()
    while state.time < case.time.end:
        state, rep = flow.step(state)
    umax = max(float(abs(state.u).max()), float(abs(state.v).max()))
    # (what is left is the pressure solves' tolerance, rtol 1e-9)
    assert umax < 1e-6 * 9.81 * case.time.end, umax
    _, rho, _, _, _ = flow.properties(state.phi)
    p = backend.to_host(flow.total_pressure(state.p, rho))
    deep, shallow = p[2].mean(), p[int(0.7 * 32)].mean()
    g, dy = 9.81, (int(0.7 * 32) - 2) / 32
    assert (deep - shallow) == pytest.approx(1000.0 * g * dy, rel=1e-6)


@pytest.mark.parametrize("name,extra", [
    ("two_phase.yaml", ("grid.nx=20", "grid.ny=40", "time.end=0.4")),
    # Contrast 1e5 with the levelset face density: the reduced form needs its
    # consistency term there (momentum._density_mismatch), or the gas runs away.
    ("bubbly_column_flow.yaml", ("grid.nx=32", "grid.ny=64", "time.end=0.02",
                                 "fluids.gas.density=0.01", "operator.face_density=levelset")),
])
@pytest.mark.parametrize("viscosity", ["explicit", "implicit"])
def test_reduced_gravity_is_the_volumetric_form_rewritten(name, extra, viscosity, backend):
    """The two gravity forms are one discretisation: the same steps and the
    same velocities (to the solves' tolerances)."""
    out = {}
    for form in ("reduced", "volumetric"):
        case = case_file(name, *extra, f"momentum.gravity={form}",
                         f"momentum.viscosity={viscosity}")
        flow = FlowSolver(case, backend)
        state = flow.initial_state()
        while state.time < case.time.end:
            state, rep = flow.step(state)
        out[form] = (backend.to_host(state.u), backend.to_host(state.v), state.step)
    (ua, va, na), (ub, vb, nb) = out["reduced"], out["volumetric"]
    assert na == nb
    scale = max(abs(ub).max(), abs(vb).max())
    # (the pressure solves stop at rtol 1e-9 of different right-hand sides; a
    # gas face turns pressure differences into velocity by dt / rho_g)
    assert abs(ua - ub).max() < 1e-4 * scale and abs(va - vb).max() < 1e-4 * scale
    assert scale < 5.0                                   # nothing ran away


def test_pressure_increment_reaches_rtol_of_the_whole_rhs(backend):
    """The solve as an increment stops where ``||b - A p|| <= rtol ||b||``,
    and the record's residual is measured against ``||b||``."""
    case = case_file("two_phase.yaml", "grid.nx=20", "grid.ny=40", "time.end=0.1",
                     "momentum.gravity=volumetric")
    flow = FlowSolver(case, backend)
    state = flow.initial_state()
    for _ in range(3):
        state, rep = flow.step(state)
    xp = backend.xp
    H, rho, mu, rho_x, rho_y = flow.properties(state.phi)
    from bubbleflow.operators.poisson import PoissonOperator
    A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, flow.hx, flow.hy, backend=backend)
    b = xp.asarray(np.random.default_rng(3).standard_normal(state.p.shape))
    b -= b.mean()
    solver = flow.pressure_solver(A, state.phi)
    p, rec = flow.solve_pressure(solver, A, b, state.p)
    r = b - A.matvec(p.ravel()).reshape(b.shape)
    true = float(xp.sqrt((r * r).sum()) / xp.sqrt((b * b).sum()))
    assert rec.converged and rec.rtol == case.solver.rtol
    assert true <= 1.5 * case.solver.rtol
    assert rec.residual == pytest.approx(true, rel=1e-3, abs=1e-13)


def test_snapshots_hold_the_whole_pressure_and_the_dynamic_one(tmp_path):
    """With reduced gravity the file's ``p`` is the whole pressure (hydrostatic
    part added back) and ``p_dynamic`` the solver's, which a restart reads."""
    import glob
    import subprocess
    import sys

    import h5py

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", "run",
                          os.path.join(ROOT, "cases", "bubbly_column_flow.yaml"), "-o", str(tmp_path),
                          "--set", "grid.nx=16", "--set", "grid.ny=32", "--set", "time.end=0.02",
                          "--set", "output.interval=0.01", "--set", "geometry.bubbles=[]",
                          "--backend", "numpy", "--no-progress"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    last = sorted(glob.glob(str(tmp_path / "bubbly_column_flow.snapshots" / "*" / "step_*.h5")))[-1]
    with h5py.File(last, "r") as fh:
        p, pd, rho = fh["p"][()], fh["p_dynamic"][()], fh["rho"][()]
    y = (np.arange(32) + 0.5) / 32
    assert np.allclose(p, pd - 9.81 * rho * (y[:, None] - 0.8), rtol=0, atol=1e-9 * abs(p).max())
    # Liquid at rest under a flat surface: the whole pressure is hydrostatic;
    # the dynamic one only carries the smoothed interface's O(g drho eps) part.
    assert p[2].mean() - p[20].mean() == pytest.approx(1000 * 9.81 * (y[20] - y[2]), rel=1e-6)
    assert abs(pd).max() < 0.02 * abs(p).max()


@pytest.mark.parametrize("component,signs", [("u", (-1.0, -1.0)), ("v", (1.0, -1.0))])
def test_chebyshev_viscous_solve_reaches_rtol_without_cg(component, signs, backend):
    """The Gershgorin interval and the step count make Chebyshev alone reach
    the tolerance (no CG finish), on a stiff system (dt nu / h^2 ~ 50)."""
    from bubbleflow.flow.viscosity import chebyshev_interval, residual_scalars, solve_viscous

    rng = np.random.default_rng(5)
    xp = backend.xp
    ny, nx = 24, 17
    mu = xp.asarray(np.where(rng.random((ny, nx)) < 0.5, 10.0, 0.1))
    shape = (ny, nx - 1) if component == "u" else (ny - 1, nx)
    rho_f = xp.asarray(np.where(rng.random(shape) < 0.5, 1000.0, 1.0))
    S = ViscousSystem(component, mu, corner_viscosity(mu, xp), rho_f, 0.01, 1 / 24, 1 / 24, signs)
    zero = xp.zeros(rho_f.size)
    a, b, _ = chebyshev_interval(*backend.to_host(residual_scalars(S, zero, zero)[1])[2:])
    lam = np.linalg.eigvals(np.diag(1 / np.diag(dense(S))) @ dense(S)).real
    assert a - 1e-12 <= lam.min() and lam.max() <= b + 1e-12
    rhs = xp.asarray(rng.standard_normal(rho_f.size))
    x, rec = solve_viscous(S, rhs, xp.zeros_like(rhs), 1e-10)
    assert rec.converged and rec.engine == "chebyshev" and rec.iterations > 10
    res = backend.to_host(rhs - S.matvec(x))
    assert np.linalg.norm(res) <= 1e-10 * np.linalg.norm(backend.to_host(rhs))
    direct = np.linalg.solve(dense(S), backend.to_host(rhs))
    assert np.allclose(backend.to_host(x), direct, rtol=1e-8, atol=1e-12 * abs(direct).max())


@pytest.mark.gpu
def test_chebyshev_step_kernel_is_its_twin_to_the_bit(backend):
    from bubbleflow.flow.viscosity import chebyshev_step, viscous_coefficients, viscous_residual

    if backend.name != "cupy":
        pytest.skip("the CUDA variant runs on CuPy")
    rng = np.random.default_rng(6)
    xp = backend.xp
    for component, signs, (ny, nx) in (("u", (-1.0, 1.0), (19, 13)), ("v", (1.0, -1.0), (8, 31))):
        mu = xp.asarray(rng.uniform(0.1, 10.0, (ny, nx)))
        shape = (ny, nx - 1) if component == "u" else (ny - 1, nx)
        S = ViscousSystem(component, mu, corner_viscosity(mu, xp),
                          xp.asarray(rng.uniform(1.0, 1000.0, shape)), 0.02, 0.05, 0.04, signs)
        n = S.shape[0]
        args = [xp.asarray(rng.standard_normal(n)) for _ in range(3)]
        ref = [a.copy() for a in args] + [xp.empty(n)]
        out = [a.copy() for a in args] + [xp.empty(n)]
        chebyshev_step.reference(S, *ref, 0.7, 1.3)
        chebyshev_step(S, *out, 0.7, 1.3)
        for a, b in zip(ref, out):
            assert xp.array_equal(a, b)
        # The system's couplings (corners formed in the kernel) and the residual.
        coef = (component, mu, None, S.rho_f, 0.02, 0.05, 0.04, *signs)
        for a, b in zip(viscous_coefficients.reference(*coef), viscous_coefficients(*coef)):
            assert xp.array_equal(a, b)
        rhs, x = args[0], args[1]
        assert xp.array_equal(viscous_residual.reference(S, rhs, x), viscous_residual(S, rhs, x))


def _viscous_pair(xp, rng):
    """A u and a v system of one 2-D grid, random viscosity and face densities."""
    ny, nx = 21, 14
    mu = xp.asarray(np.where(rng.random((ny, nx)) < 0.5, 10.0, 0.1))
    return [ViscousSystem(c, mu, None, xp.asarray(rng.uniform(1.0, 1000.0, shape)), 0.01,
                          1 / 14, 1 / 21, signs)
            for c, shape, signs in (("u", (ny, nx - 1), (-1.0, 1.0)),
                                    ("v", (ny - 1, nx), (1.0, -1.0)))]


@pytest.mark.gpu
def test_viscous_sweep_and_scalars_kernels_match_their_twins(backend):
    """Both components' Chebyshev steps in one launch per step are the
    single-system steps to the bit (the systems taking different numbers of
    steps, one alone, one taking none); the residual's scalars match the
    array code's."""
    from bubbleflow.flow.viscosity import chebyshev_sweep, residual_scalars

    if backend.name != "cupy":
        pytest.skip("the CUDA variant runs on CuPy")
    rng = np.random.default_rng(8)
    xp = backend.xp
    systems = _viscous_pair(xp, rng)
    schedules = [[(0.3 + 0.01 * k, 1.1 - 0.02 * k) for k in range(n)] for n in (7, 4)]
    start = [[xp.asarray(rng.standard_normal(S.shape[0])) for _ in range(3)] for S in systems]
    ref = [[a.copy() for a in arrays] for arrays in start]
    out = [[a.copy() for a in arrays] for arrays in start]
    chebyshev_sweep.reference(systems, *zip(*ref), schedules)
    sweep = chebyshev_sweep.variant("cupy")
    assert sweep(systems, *zip(*out), schedules) is not NotImplemented
    for a, b in zip(ref, out):
        assert xp.array_equal(a[0], b[0]) and xp.array_equal(a[1], b[1])
    # One system alone, and a system with no steps beside one with some.
    alone = [a.copy() for a in start[1]]
    assert sweep(systems[1:], *zip(alone), schedules[1:]) is not NotImplemented
    assert xp.array_equal(alone[0], ref[1][0]) and xp.array_equal(alone[1], ref[1][1])
    idle = [[a.copy() for a in arrays] for arrays in start]
    sweep(systems, *zip(*idle), [[], schedules[1]])
    assert xp.array_equal(idle[0][0], start[0][0]) and xp.array_equal(idle[1][0], ref[1][0])
    for S, (rhs, x, _) in zip(systems, start):
        r_ref, sc_ref = residual_scalars.reference(S, rhs, x)
        r, sc = residual_scalars(S, rhs, x)
        assert xp.array_equal(r_ref, r)
        assert np.allclose(backend.to_host(sc), backend.to_host(sc_ref), rtol=1e-13, atol=0)
        assert xp.array_equal(sc[2:], sc_ref[2:])          # extremes are exact


def test_viscous_systems_solved_together_as_one_by_one(backend):
    """Solving the two components side by side gives each one's own solve."""
    from bubbleflow.flow.viscosity import solve_viscous, solve_viscous_systems

    rng = np.random.default_rng(9)
    xp = backend.xp
    systems = _viscous_pair(xp, rng)
    rhss = [xp.asarray(rng.standard_normal(S.shape[0])) for S in systems]
    x0s = [xp.zeros_like(b) for b in rhss]
    together = solve_viscous_systems(systems, rhss, x0s, 1e-10)
    for S, rhs, x0, (x, rec) in zip(systems, rhss, x0s, together):
        alone, rec1 = solve_viscous(S, rhs, x0, 1e-10)
        assert rec.converged and rec.iterations == rec1.iterations > 5
        assert xp.array_equal(x, alone)
        assert float(backend.to_host(xp.linalg.norm(rhs - S.matvec(x)))) <= \
            1e-10 * float(backend.to_host(xp.linalg.norm(rhs)))
