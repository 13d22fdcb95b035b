"""The implicit viscous solves of any dimension (viscosity,
viscosity_chebyshev, FlowSolver).

The operator against a matrix assembled here face by face from the textbook
stencil (2-D and 3-D), symmetric positive definite, and against the explicit
stress it must be the own part of; the Chebyshev solve against SciPy's
direct one, alone on a stiff system (no CG finish), side by side as one by
one; a slab of one rank as one process; the layout the 2-D CUDA kernels
read against the array code's bits; in 2-D the 2-D solver's implicit steps;
in 3-D a run through the case and the ``auto`` rule.
"""
import itertools
import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.case.config import initial_dt_limits, load_case, viscosity_scheme
from bubbleflow.compute.comm import SingleProcess
from bubbleflow.flow import flow_solver, momentum, viscosity_cuda, viscosity
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.flow.viscosity_chebyshev import (chebyshev_interval, residual_scalars,
                                                 solve_chebyshev)
from bubbleflow.flow.viscosity import ViscousSystem
from bubbleflow.mesh.ranks import rank_slab
from helpers.chebyshev import schedule_arrays, stiff_systems
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


def dense(S):
    """``S`` as a host matrix, column by column."""
    n, xp = S.shape[0], S.xp
    return np.stack([S.backend.to_host(S.matvec(xp.asarray(np.eye(n)[k]))) for k in range(n)],
                    axis=1)


@pytest.mark.parametrize("walls", list(WALLS))
@pytest.mark.parametrize("cells,a", [(CELLS, 0), (CELLS, 1), (CELLS, 2), ((6, 5), 0), ((6, 5), 1)],
                         ids=["3d-x", "3d-y", "3d-z", "2d-x", "2d-y"])
def test_operator_equals_the_textbook_matrix(cells, a, walls, backend):
    mu, rho_faces, _ = _fields(a, cells)
    nd = len(cells)
    dt, signs, spacing = 0.37, WALLS[walls][:nd], SPACING[:nd]
    A = textbook_matrix(a, mu, rho_faces[a], dt, spacing, signs)
    xp, h = backend.xp, backend.to_host
    S = ViscousSystem(a, xp.asarray(mu), xp.asarray(rho_faces[a]), dt, spacing, signs)
    assert S.shape == A.shape
    np.testing.assert_allclose(h(S.diagonal).ravel(), A.diagonal(), rtol=1e-13)
    x = np.random.default_rng(7).standard_normal((3, A.shape[0]))
    for row in x:
        want = A @ row
        np.testing.assert_allclose(h(S.matvec(xp.asarray(row))), want, rtol=0,
                                   atol=1e-13 * np.abs(want).max())
    assert abs(A - A.T).max() <= 1e-13 * abs(A).max()


@pytest.mark.parametrize("cells", [(7, 5), (4, 3, 5)], ids=["2d", "3d"])
@pytest.mark.parametrize("walls", list(WALLS))
def test_viscous_system_is_symmetric_positive_definite(cells, walls, backend):
    mu, rho_faces, _ = _fields(2, cells)
    nd = len(cells)
    xp = backend.xp
    for a in range(nd):
        S = ViscousSystem(a, xp.asarray(mu), xp.asarray(rho_faces[a]), 0.3, SPACING[:nd],
                          WALLS[walls][:nd])
        M = dense(S)
        assert np.allclose(M, M.T, rtol=0, atol=1e-12 * abs(M).max())
        assert np.linalg.eigvalsh(M).min() > 0
        assert np.allclose(np.diag(M), backend.to_host(S.diagonal).ravel(), rtol=1e-14)


@pytest.mark.parametrize("cells", [(6, 5), CELLS], ids=["2d", "3d"])
def test_explicit_stress_is_the_operator_plus_the_cross_terms(cells, backend):
    """``viscous_forces`` = ``L_a u_a`` (the implicit operator) + the cross
    terms the implicit step keeps explicit: the same discretisation."""
    mu, rho_faces, velocity = _fields(3, cells)
    nd, spacing = len(cells), SPACING[:len(cells)]
    signs = WALLS["mixed"][:nd]
    xp, h = backend.xp, backend.to_host
    mu_d, vel_d = xp.asarray(mu), tuple(xp.asarray(u) for u in velocity)
    explicit = momentum.viscous_forces(vel_d, mu_d, spacing, signs)
    cross = momentum.cross_viscous_forces(vel_d, mu_d, spacing)
    dt = 0.01
    for a, ua in enumerate(vel_d):
        S = ViscousSystem(a, mu_d, xp.asarray(rho_faces[a]), dt, spacing, signs)
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
    solved = viscosity.solve_implicit(
        tuple(xp.asarray(u) for u in velocity), xp.asarray(mu),
        tuple(xp.asarray(r) for r in rho_faces), [xp.asarray(r) for r in rhss], dt, SPACING,
        signs, rtol)
    for a, (x, record) in enumerate(solved):
        A = textbook_matrix(a, mu, rho_faces[a], dt, SPACING, signs)
        direct = spla.spsolve(A.tocsc(), rhss[a].ravel())
        assert record.converged and record.iterations > 0 and record.residual <= rtol
        assert record.engine.startswith("chebyshev")
        assert x.shape == rhss[a].shape
        np.testing.assert_allclose(h(x).ravel(), direct, rtol=0,
                                   atol=1e-9 * np.abs(direct).max())


@pytest.mark.parametrize("cells,signs", [((17, 24), ((-1.0, -1.0), (1.0, -1.0))),
                                         ((5, 4, 9), WALLS["mixed"])], ids=["2d", "3d"])
def test_chebyshev_solve_reaches_rtol_without_cg(cells, signs, backend):
    """The Gershgorin interval and the step count make Chebyshev alone reach
    the tolerance (no CG finish), on a stiff system (dt nu / h^2 ~ 50)."""
    rng = np.random.default_rng(5)
    xp, nd = backend.xp, len(cells)
    mu = xp.asarray(np.where(rng.random(cells[::-1]) < 0.5, 10.0, 0.1))
    h = 1 / 24
    for a in range(nd):
        shape = list(cells[::-1])
        shape[nd - 1 - a] -= 1
        rho_f = xp.asarray(np.where(rng.random(shape) < 0.5, 1000.0, 1.0))
        S = ViscousSystem(a, mu, rho_f, 0.01, (h,) * nd, signs)
        zero = xp.zeros(rho_f.size)
        lo, hi, _ = chebyshev_interval(*backend.to_host(residual_scalars(S, zero, zero)[1])[2:])
        M = dense(S)
        lam = np.linalg.eigvals(np.diag(1 / np.diag(M)) @ M).real
        assert lo - 1e-12 <= lam.min() and lam.max() <= hi + 1e-12
        rhs = xp.asarray(rng.standard_normal(rho_f.size))
        [(x, rec)] = solve_chebyshev([S], [rhs], [xp.zeros_like(rhs)], 1e-10)
        assert rec.converged and rec.engine == "chebyshev" and rec.iterations > 10
        res = backend.to_host(rhs - S.matvec(x))
        assert np.linalg.norm(res) <= 1e-10 * np.linalg.norm(backend.to_host(rhs))
        direct = np.linalg.solve(M, backend.to_host(rhs))
        assert np.allclose(backend.to_host(x), direct, rtol=1e-8, atol=1e-12 * abs(direct).max())


@pytest.mark.parametrize("cells", [(14, 21), (5, 6, 7)], ids=["2d", "3d"])
def test_systems_solved_together_as_one_by_one(cells, backend):
    """Solving the components side by side gives each one's own solve."""
    rng = np.random.default_rng(9)
    xp = backend.xp
    systems = stiff_systems(xp, rng, cells)
    rhss = [xp.asarray(rng.standard_normal(S.shape[0])) for S in systems]
    x0s = [xp.zeros_like(b) for b in rhss]
    together = solve_chebyshev(systems, rhss, x0s, 1e-10)
    for S, rhs, x0, (x, rec) in zip(systems, rhss, x0s, together):
        [(alone, rec1)] = solve_chebyshev([S], [rhs], [x0], 1e-10)
        assert rec.converged and rec.iterations == rec1.iterations > 5
        assert xp.array_equal(x, alone)
        assert float(backend.to_host(xp.linalg.norm(rhs - S.matvec(x)))) <= \
            1e-10 * float(backend.to_host(xp.linalg.norm(rhs)))


@pytest.mark.parametrize("cells", [(6, 9), (4, 3, 7)], ids=["2d", "3d"])
def test_one_rank_slab_solves_what_one_process_solves(cells, backend):
    """The slab code (owned planes, widened product, norms reduced over the
    ranks) on the one slab of one rank: one process's solutions and steps."""
    mu, rho_faces, velocity = _fields(4, cells)
    nd = len(cells)
    rng = np.random.default_rng(3)
    rhss = [rng.standard_normal(r.shape) * r for r in rho_faces]
    xp, h = backend.xp, backend.to_host
    args = (tuple(xp.asarray(u) for u in velocity), xp.asarray(mu),
            tuple(xp.asarray(r) for r in rho_faces), [xp.asarray(r) for r in rhss], 0.2,
            SPACING[:nd], WALLS["mixed"][:nd], 1e-11)
    padding = SlabPadding(SingleProcess(), rank_slab(mu.shape, 0, 1))
    owned = [(0, r.shape[0]) for r in rho_faces]
    whole = viscosity.solve_implicit(*args)
    slab = viscosity.solve_implicit(*args, padding=padding, owned=owned)
    for (x, rec), (y, rec1) in zip(whole, slab):
        assert rec.converged and rec1.converged and abs(rec.iterations - rec1.iterations) <= 1
        np.testing.assert_allclose(h(y), h(x), rtol=0, atol=1e-12 * np.abs(h(x)).max())
    with pytest.raises(ValueError, match="owns"):
        ViscousSystem(0, args[1], args[2][0], 0.2, SPACING[:nd], WALLS["mixed"][:nd], padding)


def _kernel_product(view, x):
    """``S x`` as the 2-D kernels form it (viscosity.cu's ``visc_apply``),
    from the system's arrays as they read them."""
    x = x.reshape(view.shape2d)
    zero_x, zero_y = np.zeros_like(x[:, :1]), np.zeros_like(x[:1, :])
    if view.component == "u":
        xm, xq = np.hstack([zero_x, x[:, :-1]]), np.hstack([x[:, 1:], zero_x])
        ym = np.vstack([view.s_low * x[:1], x[:-1]])
        yq = np.vstack([x[1:], view.s_high * x[-1:]])
    else:
        xm, xq = np.vstack([zero_y, x[:-1]]), np.vstack([x[1:], zero_y])
        ym = np.hstack([view.s_low * x[:, :1], x[:, :-1]])
        yq = np.hstack([x[:, 1:], view.s_high * x[:, -1:]])
    Lx = (view.k_plus * (xq - x) - view.k_minus * (x - xm) + view.t_plus * (yq - x)
          - view.t_minus * (x - ym))
    return (view.rho_f * x - Lx).ravel()


@pytest.mark.parametrize("walls", list(WALLS))
def test_kernel_layout_gives_the_array_code_bits(walls):
    """The one-process 2-D system unpacked as the CUDA kernels read it
    (viscosity_cuda.planar_system): their product and diagonal, formed here
    in their order, are the array code's to the bit; a 3-D system and a
    slab's are not theirs (the kernels decline)."""
    mu, rho_faces, _ = _fields(6, (9, 7))
    rng = np.random.default_rng(2)
    signs = WALLS[walls][:2]
    for a in range(2):
        S = ViscousSystem(a, mu, rho_faces[a], 0.05, SPACING[:2], signs)
        view = viscosity_cuda.planar_system(S)
        x = rng.standard_normal(S.shape[0])
        x[::5] = -0.0
        assert view.shape2d == rho_faces[a].shape and (view.s_low, view.s_high) == signs[1 - a]
        assert np.array_equal(_kernel_product(view, x), S.matvec(x))
        diag = view.rho_f + view.k_plus + view.k_minus + view.t_plus + view.t_minus
        first = (slice(None), slice(0, 1)) if a else (slice(0, 1), slice(None))
        last = (slice(None), slice(-1, None)) if a else (slice(-1, None), slice(None))
        diag[first] += view.t_minus[first] * (-view.s_low)
        diag[last] += view.t_plus[last] * (-view.s_high)
        assert np.array_equal(diag, S.diagonal)
    mu3, rho3, _ = _fields(6, (3, 4, 5))
    S3 = ViscousSystem(0, mu3, rho3[0], 0.05, SPACING, WALLS["mixed"])
    slab = ViscousSystem(0, mu, rho_faces[0], 0.05, SPACING[:2], signs,
                         SlabPadding(SingleProcess(), rank_slab(mu.shape, 0, 1)),
                         (0, mu.shape[0]))
    for S in (S3, slab):
        assert viscosity_cuda.planar_system(S) is None
        n = S.shape[0]
        assert viscosity_cuda.planar_residual(S, np.zeros(n), np.zeros(n)) is NotImplemented
        work = [[np.zeros(n)] for _ in range(3)]
        assert viscosity_cuda.planar_chebyshev_sweep([S], *work, *schedule_arrays(np, [[(0.5, 0.5)]])) is NotImplemented
    assert viscosity_cuda.planar_coefficients(0, mu3, rho3[0], 0.05, SPACING,
                                              WALLS["mixed"]) is NotImplemented


def test_3d_implicit_run_through_the_case(backend):
    # (The level set keeps the case's x <-> y symmetry to rounding; CLSVOF's
    # split advection does not, see test_flow_nd.)
    case = load_case(RISING_3D, SMALL_3D + ["momentum.viscosity=implicit", "time.end=0.2",
                                            "levelset.method=levelset"])
    solver = flow_solver(case, backend)
    assert isinstance(solver, FlowSolver) and solver.implicit_viscosity
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
    solve = viscosity.solve_chebyshev

    def short(*args):
        out = solve(*args)
        out[2][1].converged, out[2][1].reason = False, "maxiter"
        return out

    monkeypatch.setattr(viscosity, "solve_chebyshev", short)
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
