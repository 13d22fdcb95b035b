"""The momentum step's options: implicit viscosity, reduced gravity, the
pressure solved as an increment."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.case.config import CaseError, load_case
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.viscosity import ViscousSystem

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def case_file(name, *overrides):
    return load_case(os.path.join(ROOT, "cases", name), list(overrides))


def dense(S):
    n = S.shape[0]
    xp = S.xp
    return np.stack([S.backend.to_host(S.matvec(xp.asarray(np.eye(n)[k]))) for k in range(n)],
                    axis=1)


def test_implicit_viscous_step_matches_a_direct_solve(backend):
    """One implicit step's viscous solves against SciPy's direct solve of the
    same systems, built from the momentum terms independently."""
    from bubbleflow.flow import momentum

    case = case_file("hysing_case2.yaml", "grid.nx=10", "grid.ny=20")
    flow = FlowSolver(case, backend)
    state = flow.initial_state()
    for _ in range(3):
        state, _ = flow.step(state)
    H, rho, mu, (rho_x, rho_y) = flow.properties(state.phi)
    dt = flow.stable_dt(state)
    u, v = state.velocity
    hx, hy = flow.spacing
    signs = flow.signs
    adv = momentum.advection_terms((u, v), (rho_x, rho_y), mu, (hx, hy), signs)
    rhs_u, rhs_v = momentum.implicit_rhs((u, v), mu, (rho_x, rho_y), adv, dt, (hx, hy))
    xu, xv = flow._implicit_solves((u, v), dt, mu, (rho_x, rho_y), (rhs_u, rhs_v))
    assert [r.converged for r in flow.viscous_records] == [True, True]
    for a, (name, rho_f, rhs, x) in enumerate((("u", rho_x, rhs_u, xu), ("v", rho_y, rhs_v, xv))):
        S = ViscousSystem(a, mu, rho_f, dt, (hx, hy), signs)
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
    _, rho, _, _ = flow.properties(state.phi)
    p = backend.to_host(flow.total_pressure(state.p, rho))
    deep, shallow = p[2].mean(), p[int(0.7 * 32)].mean()
    g, dy = 9.81, (int(0.7 * 32) - 2) / 32
    assert (deep - shallow) == pytest.approx(1000.0 * g * dy, rel=1e-6)


@pytest.mark.parametrize("name,extra", [
    ("two_phase.yaml", ("grid.nx=20", "grid.ny=40", "time.end=0.4")),
    # Contrast 1e5 with the levelset face density: the reduced form needs its
    # consistency term there (momentum.density_mismatch), or the gas runs away.
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
    H, rho, mu, (rho_x, rho_y) = flow.properties(state.phi)
    from bubbleflow.operators.poisson import PoissonOperator
    A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, *flow.spacing, backend=backend)
    b = xp.asarray(np.random.default_rng(3).standard_normal(state.p.shape))
    b -= b.mean()
    solver = flow.pressure_solver(A, state.phi)
    p, rec, _ = flow.solve_pressure(solver, A, b, state.p)
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
