"""The implicit viscous solves of any dimension (viscosity_nd, FlowSolverND).

The operator against a matrix assembled here face by face from the textbook
stencil, and against the explicit stress it must be the own part of; the
solve against SciPy's direct one; in 2-D the 2-D solver's implicit steps;
in 3-D a run through the case and the ``auto`` rule.
"""
import itertools
import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.case.config import initial_dt_limits, load_case, viscosity_scheme
from bubbleflow.flow import flow_solver, momentum_nd, viscosity_nd
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.navier_stokes_nd import FlowSolverND
from bubbleflow.flow.viscosity_nd import ViscousSystemND
from helpers.cli import ROOT

RISING_3D = os.path.join(ROOT, "cases/rising_bubble_3d.yaml")
SMALL_3D = ["grid.nx=8", "grid.ny=8", "grid.nz=16"]
CELLS = (5, 4, 6)                                       # nx, ny, nz
SPACING = (0.2, 0.25, 1 / 6)
WALLS = {"no-slip": ((-1.0, -1.0),) * 3, "free-slip": ((1.0, 1.0),) * 3,
         "mixed": ((-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0))}


def _fields(seed, cells=CELLS):
    """Random cell viscosity and face densities, and a velocity zero on the walls."""
    rng = np.random.default_rng(seed)
    nd = len(cells)
    mu = rng.uniform(0.05, 3.0, cells[::-1])
    rho_faces, velocity = [], []
    for a in range(nd):
        shape = list(cells[::-1])
        shape[nd - 1 - a] -= 1
        rho_faces.append(rng.uniform(1.0, 1000.0, shape))
        shape[nd - 1 - a] += 2
        u = rng.standard_normal(shape)
        u[(slice(None),) * (nd - 1 - a) + ([0, -1],)] = 0.0
        velocity.append(u)
    return mu, tuple(rho_faces), tuple(velocity)


def textbook_matrix(a, mu, rho_f, dt, spacing, signs):
    """``diag(rho_f) - dt L_a``, face by face: ``L_a x`` the sum over the
    axes ``b`` of ``c (x_q - x_p)`` for both neighbours ``q`` of face ``p``,
    ``c = 2 mu_cell / h_a^2`` along ``a`` (beyond the last face the wall:
    zero), else ``c = mu_edge / h_b^2``, ``mu_edge`` the mean of the four
    cells around the edge (a missing cell: the wall cell), beyond the last
    face the ghost ``s x_p``.  Grid-axis index tuples ``p``, C order of the
    array layout ``(z, y, x)``."""
    nd = mu.ndim
    cells = mu.shape[::-1]
    counts = [n - 1 if b == a else n for b, n in enumerate(cells)]
    shape = tuple(counts[::-1])

    def index(p):
        return np.ravel_multi_index(tuple(p[::-1]), shape)

    def mu_at(cell):
        return mu[tuple(min(max(i, 0), n - 1) for i, n in zip(cell, cells))[::-1]]

    A = sp.lil_matrix((int(np.prod(counts)),) * 2)
    for p in itertools.product(*(range(n) for n in counts)):
        i = index(p)
        A[i, i] += rho_f[tuple(p[::-1])]
        for b, side in itertools.product(range(nd), (-1, 1)):
            q = list(p)
            q[b] += side
            if b == a:                                  # face p[a] + 1 between cells p[a], p[a] + 1
                cell = list(p)
                cell[a] += 1 if side > 0 else 0
                c = 2 * mu_at(cell) / spacing[b] ** 2
            else:
                around = []
                for da, db in itertools.product((0, 1), (0, side)):
                    cell = list(p)
                    cell[a] += da
                    cell[b] += db
                    around.append(mu_at(cell))
                c = np.mean(around) / spacing[b] ** 2
            A[i, i] += dt * c
            if 0 <= q[b] < counts[b]:
                A[i, index(q)] -= dt * c
            elif b != a:
                A[i, i] -= dt * c * signs[b][0 if side < 0 else 1]
    return A.tocsr()


@pytest.mark.parametrize("walls", list(WALLS))
@pytest.mark.parametrize("a", [0, 1, 2])
def test_operator_equals_the_textbook_matrix(a, walls, backend):
    mu, rho_faces, _ = _fields(a)
    dt, signs = 0.37, WALLS[walls]
    A = textbook_matrix(a, mu, rho_faces[a], dt, SPACING, signs)
    xp, h = backend.xp, backend.to_host
    S = ViscousSystemND(a, xp.asarray(mu), xp.asarray(rho_faces[a]), dt, SPACING, signs)
    assert S.shape == A.shape
    np.testing.assert_allclose(h(S.diagonal).ravel(), A.diagonal(), rtol=1e-13)
    x = np.random.default_rng(7).standard_normal((3, A.shape[0]))
    for row in x:
        want = A @ row
        np.testing.assert_allclose(h(S.matvec(xp.asarray(row))), want, rtol=0,
                                   atol=1e-13 * np.abs(want).max())
    assert abs(A - A.T).max() <= 1e-13 * abs(A).max()


@pytest.mark.parametrize("cells", [(6, 5), CELLS], ids=["2d", "3d"])
def test_explicit_stress_is_the_operator_plus_the_cross_terms(cells, backend):
    """``viscous_forces`` = ``L_a u_a`` (the implicit operator) + the cross
    terms the implicit step keeps explicit: the same discretisation."""
    mu, rho_faces, velocity = _fields(3, cells)
    nd, spacing = len(cells), SPACING[:len(cells)]
    signs = WALLS["mixed"][:nd]
    xp, h = backend.xp, backend.to_host
    mu_d, vel_d = xp.asarray(mu), tuple(xp.asarray(u) for u in velocity)
    explicit = momentum_nd.viscous_forces(vel_d, mu_d, spacing, signs)
    cross = momentum_nd.cross_viscous_forces(vel_d, mu_d, spacing)
    dt = 0.01
    for a, ua in enumerate(vel_d):
        S = ViscousSystemND(a, mu_d, xp.asarray(rho_faces[a]), dt, spacing, signs)
        inner = ua[(slice(None),) * (nd - 1 - a) + (slice(1, -1),)]
        got = h(S.stress(inner) / dt + cross[a])
        want = h(explicit[a])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("walls", ["no-slip", "mixed"])
def test_implicit_solve_equals_a_direct_solve(walls, backend):
    mu, rho_faces, velocity = _fields(5)
    dt, signs, rtol = 0.5, WALLS[walls], 1e-12
    rng = np.random.default_rng(9)
    rhss = [rng.standard_normal(r.shape) * r for r in rho_faces]
    xp, h = backend.xp, backend.to_host
    solved = viscosity_nd.solve_implicit(
        tuple(xp.asarray(u) for u in velocity), xp.asarray(mu),
        tuple(xp.asarray(r) for r in rho_faces), [xp.asarray(r) for r in rhss], dt, SPACING,
        signs, rtol)
    for a, (x, record) in enumerate(solved):
        A = textbook_matrix(a, mu, rho_faces[a], dt, SPACING, signs)
        direct = spla.spsolve(A.tocsc(), rhss[a].ravel())
        assert record.converged and record.iterations > 0 and record.residual <= rtol
        assert record.engine.startswith("chebyshev")
        np.testing.assert_allclose(h(x), direct, rtol=0, atol=1e-9 * np.abs(direct).max())


@pytest.mark.parametrize("gravity", ["reduced", "volumetric"])
def test_implicit_steps_equal_the_2d_solver(backend, gravity):
    case = load_case(os.path.join(ROOT, "cases/two_phase.yaml"),
                     ["grid.nx=16", "grid.ny=32", "solver.deflation.subdomains=[4,4]",
                      "momentum.viscosity=implicit", f"momentum.gravity={gravity}",
                      "boundaries.right=no_slip", "solver.rtol=1e-12"])
    two, nd = FlowSolver(case, backend), FlowSolverND(case, backend)
    assert two.implicit_viscosity and nd.implicit_viscosity
    a, b = two.initial_state(), nd.initial_state()
    for _ in range(4):
        a, ra = two.step(a)
        b, rb = nd.step(b)
        assert rb.dt == pytest.approx(ra.dt, rel=1e-14)
        assert [r.iterations for r in nd.viscous_records] == \
               [r.iterations for r in two.viscous_records]
    h = backend.to_host
    for x, y in ((a.phi, b.phi), (a.u, b.u), (a.v, b.v)):
        np.testing.assert_allclose(h(y), h(x), rtol=0, atol=1e-10 * max(np.abs(h(x)).max(), 1e-300))
    np.testing.assert_allclose(h(b.p), h(a.p), rtol=0, atol=1e-9 * np.abs(h(a.p)).max())


def test_3d_implicit_run_through_the_case(backend):
    case = load_case(RISING_3D, SMALL_3D + ["momentum.viscosity=implicit", "time.end=0.2"])
    solver = flow_solver(case, backend)
    assert isinstance(solver, FlowSolverND) and solver.implicit_viscosity
    state = solver.initial_state()
    for _ in range(3):
        state, rep = solver.step(state)
        assert rep.record.converged and rep.divergence < 1e-6
        assert len(solver.viscous_records) == 3 and all(r.converged for r in solver.viscous_records)
    h = backend.to_host
    assert all(np.isfinite(h(f)).all() for f in (*state.velocity, state.p, state.phi))
    assert np.abs(h(state.w)).max() > 0
    # The case is symmetric in x <-> y: so are the implicit solves.
    np.testing.assert_allclose(np.swapaxes(h(state.u), 1, 2), h(state.v),
                               atol=1e-10 * np.abs(h(state.v)).max())


def test_3d_viscous_solve_that_fails_says_so(backend, monkeypatch):
    case = load_case(RISING_3D, SMALL_3D + ["momentum.viscosity=implicit"])
    solver = flow_solver(case, backend)
    solve = viscosity_nd.solve_viscous_systems

    def short(*args):
        out = solve(*args)
        out[2][1].converged, out[2][1].reason = False, "maxiter"
        return out

    monkeypatch.setattr(viscosity_nd, "solve_viscous_systems", short)
    with pytest.raises(FloatingPointError, match="implicit viscous solve for w did not converge"):
        solver.step(solver.initial_state())


def test_3d_case_takes_implicit_and_auto():
    assert viscosity_scheme(load_case(RISING_3D, ["momentum.viscosity=implicit"])) == "implicit"
    # auto by the 2-D rule: implicit where the viscous limit (0.4 / 3 h^2 / nu
    # in 3-D) is below the others at t = 0.
    assert viscosity_scheme(load_case(RISING_3D, ["momentum.viscosity=auto"])) == "explicit"
    viscous = ["momentum.viscosity=auto", "fluids.liquid.viscosity=100", "fluids.gas.viscosity=10"]
    case = load_case(RISING_3D, viscous)
    assert viscosity_scheme(case) == "implicit" and "viscous" not in initial_dt_limits(case)
    limits = initial_dt_limits(load_case(RISING_3D, viscous[1:]))        # explicit
    assert limits["viscous"][0] == pytest.approx(0.4 / 3 / 32 ** 2 / 0.1)
    assert limits["viscous"][0] < min(v for k, (v, _) in limits.items() if k != "viscous")
