"""The pressure operator: symmetry, null space, and an independent assembly."""
import numpy as np
import pytest
import scipy.sparse as sp

from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import build_levelset, Circle, phase_fields
from bubbleflow.operators.poisson import PoissonOperator, assemble_pressure_operator, gravity_rhs


def random_phases(rng, nx=13, ny=9, rule="arithmetic", contrast=1e3):
    grid = Grid(nx, ny, lx=1.3, ly=0.9)
    circles = [Circle(rng.uniform(0.2, 1.1), rng.uniform(0.2, 0.7), rng.uniform(0.05, 0.2))
               for _ in range(3)]
    phi = build_levelset(grid, rng.uniform(0.5, 0.85), circles)
    return grid, phi, phase_fields(grid, phi, 1000.0, 1000.0 / contrast, 1e-3, 1e-5, rule=rule)


def heaviside_reference(phi, eps):
    out = np.empty_like(phi)
    for k, v in np.ndenumerate(phi):
        if v < -eps:
            out[k] = 0.0
        elif v > eps:
            out[k] = 1.0
        else:
            out[k] = 0.5 * (1 + v / eps + np.sin(np.pi * v / eps) / np.pi)
    return out


def independent_csr(grid, phi, rule, rho_l, rho_g):
    """Cell by cell, face by face, straight from the definition."""
    nx, ny, hx, hy = grid.nx, grid.ny, grid.hx, grid.hy
    eps = 1.5 * max(hx, hy)
    rho = np.where(phi >= 0, rho_l, rho_g)
    A = sp.lil_matrix((nx * ny, nx * ny))
    for j in range(ny):
        for i in range(nx):
            p = j * nx + i
            for dj, di, h in ((0, 1, hx), (0, -1, hx), (1, 0, hy), (-1, 0, hy)):
                jj, ii = j + dj, i + di
                if not (0 <= jj < ny and 0 <= ii < nx):
                    continue                       # Neumann wall: no flux
                if rule == "arithmetic":
                    rf = 0.5 * (rho[j, i] + rho[jj, ii])
                elif rule == "harmonic":
                    rf = 2 * rho[j, i] * rho[jj, ii] / (rho[j, i] + rho[jj, ii])
                else:
                    Hf = heaviside_reference(np.array([0.5 * (phi[j, i] + phi[jj, ii])]), eps)[0]
                    rf = rho_g + (rho_l - rho_g) * Hf
                c = 1.0 / rf / h ** 2
                A[p, p] += c
                A[p, jj * nx + ii] -= c
    return A.tocsr()


@pytest.mark.parametrize("rule", ["arithmetic", "harmonic", "levelset"])
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_operator_matches_independent_assembly(rule, storage, backend):
    rng = np.random.default_rng(7)
    for trial in range(3):
        grid, phi, ph = random_phases(rng, rule=rule)
        A = assemble_pressure_operator(grid, ph, backend=backend, storage=storage)
        ref = independent_csr(grid, phi, rule, 1000.0, 1.0)
        C = A.to_scipy()
        assert abs(C - ref).max() <= 1e-12 * abs(ref).max()
        x = rng.standard_normal(grid.size)
        y = backend.to_host(A.matvec(backend.xp.asarray(x)))
        np.testing.assert_allclose(y, ref @ x, rtol=0, atol=1e-12 * abs(ref @ x).max())


@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_symmetric_rows_sum_to_zero_constants_in_null_space(storage, backend):
    rng = np.random.default_rng(3)
    grid, phi, ph = random_phases(rng, nx=32, ny=24, contrast=1e6)
    A = assemble_pressure_operator(grid, ph, backend=backend, storage=storage)
    C = A.to_scipy()
    assert abs(C - C.T).max() == 0.0
    scale = abs(C).max()
    assert abs(C @ np.ones(grid.size)).max() <= 1e-12 * scale
    ones = backend.xp.ones(grid.size)
    assert float(abs(A @ ones).max()) <= 1e-12 * scale
    # Positive semi-definite with a one-dimensional null space.
    w = np.linalg.eigvalsh(C.toarray())
    assert w[0] > -1e-9 * scale and w[1] > 1e-12 * scale


def test_no_entry_pinned_and_grid_shapes(backend):
    grid = Grid(6, 4)
    A = PoissonOperator(np.ones((4, 5)), np.ones((3, 6)), grid.hx, grid.hy, backend=backend)
    C = A.to_scipy().toarray()
    # Every row of a pure-Neumann Laplacian sums to zero: the last row too.
    np.testing.assert_allclose(C.sum(axis=1), 0, atol=1e-10)
    x = backend.xp.asarray(np.arange(24.0).reshape(4, 6))
    assert A.matvec(x).shape == (4, 6)


def test_gravity_rhs_is_compatible():
    grid = Grid(16, 20, ly=2.0)
    f = gravity_rhs(grid, 9.81)
    assert abs(f.sum()) < 1e-12
    np.testing.assert_allclose(f[0], 9.81 / grid.hy)
    np.testing.assert_allclose(f[-1], -9.81 / grid.hy)
    assert not f[1:-1].any()


def test_uniform_columns_give_hydrostatic_pressure():
    """No bubbles, flat surface: the exact answer is rho g (h - y) per column."""
    from bubbleflow.linalg.functions import cg

    grid = Grid(8, 32)
    phi = build_levelset(grid, 0.5)
    ph = phase_fields(grid, phi, 1000.0, 1.0, 1e-3, 1e-5)
    A = assemble_pressure_operator(grid, ph)
    p, rec = cg(A, gravity_rhs(grid, 9.81).ravel(), rtol=1e-12)
    p = p.reshape(grid.shape)
    dp = p[1:, :] - p[:-1, :]                 # p_{j+1} - p_j = -rho_f g hy
    np.testing.assert_allclose(dp, -ph.rho_y * 9.81 * grid.hy, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_operator_from_densities_equals_operator_from_reciprocals(storage, backend):
    rng = np.random.default_rng(11)
    rho_x, rho_y = 10.0 ** rng.uniform(0, 3, (9, 12)), 10.0 ** rng.uniform(0, 3, (8, 13))
    A = PoissonOperator(rho_x, rho_y, 0.1, 0.2, backend=backend, storage=storage, densities=True)
    B = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, 0.1, 0.2, backend=backend, storage=storage)
    for a, b in zip(A.entries(), B.entries()):
        np.testing.assert_array_equal(backend.to_host(a), backend.to_host(b))


def test_flux_apply_any_dimension():
    """The couplings-per-axis apply in 3-D: symmetric, rows sum to zero, its
    diagonal is the centre the diagonals storage would hold."""
    from bubbleflow.operators.poisson import apply_faces, centre_from_couplings

    rng = np.random.default_rng(1)
    shape = (3, 4, 5)                                   # (nz, ny, nx)
    c = [rng.random((3, 4, 4)), rng.random((3, 3, 5)), rng.random((2, 4, 5))]
    n = int(np.prod(shape))
    M = np.zeros((n, n))
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0
        M[:, k] = apply_faces(c, e.reshape(shape), np.empty(shape)).ravel()
    assert np.allclose(M, M.T) and np.allclose(M.sum(axis=1), 0.0)
    assert np.allclose(np.diag(M), centre_from_couplings(c).ravel())
    # x-neighbours couple through the x couplings
    assert M[1, 0] == -c[0][0, 0, 0]


def test_operator_carries_its_grid():
    grid = Grid(16, 20, ly=2.0)
    phi = build_levelset(grid, 1.2, ())
    A = assemble_pressure_operator(grid, phase_fields(grid, phi, 1000.0, 1.0, 1e-3, 1e-5))
    assert A.grid is grid and A.ndim == 2
    assert A.grid.partition((4, 4)).labels().shape == (20, 16)
    with pytest.raises(ValueError):
        PoissonOperator(np.ones((20, 15)), np.ones((19, 16)), 0.1, 0.1, grid=Grid(8, 8))
