"""Preconditioners against their matrix definitions (dense, small grids)."""
import numpy as np
import pytest
import scipy.sparse as sp

from bubbleflow.linalg.precond import make_preconditioner, PRECONDITIONERS
from bubbleflow.case.problem import bubbly_column
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import Circle, build_levelset, phase_fields
from bubbleflow.operators.poisson import assemble_pressure_operator


def small_operator(backend, contrast=1e3, nx=12, ny=8):
    grid = Grid(nx, ny, lx=1.5, ly=1.0)
    phi = build_levelset(grid, 0.7, [Circle(0.5, 0.35, 0.2), Circle(1.1, 0.4, 0.15)])
    ph = phase_fields(grid, phi, 1000.0, 1000.0 / contrast, 1e-3, 1e-5)
    return assemble_pressure_operator(grid, ph, backend=backend)


#: Multigrid options of the comparison: three levels on the 12 x 8 grid.
MULTIGRID = dict(degree=2, ratio=4.0, scale=1.8, coarsest=8, min_side=1)
FLOAT64_V = dict(cycle_precision="float64", w_levels=0)        # the definition's arithmetic


def chebyshev_smoother(C, degree, ratio):
    """``q(D^-1 A) D^-1`` with ``1 - lambda q(lambda)`` the scaled Chebyshev
    polynomial ``T_k((theta - lambda) / delta) / T_k(theta / delta)`` on
    ``[2 / ratio, 2]``, from the eigenvectors of ``D^-1/2 A D^-1/2``."""
    d = np.sqrt(np.diag(C))
    lam, V = np.linalg.eigh(C / d[:, None] / d[None, :])
    upper, lower = 2.0, 2.0 / ratio
    theta, delta = (upper + lower) / 2, (upper - lower) / 2
    T = np.polynomial.chebyshev.Chebyshev.basis(degree)
    p = T((theta - lam) / delta) / T(theta / delta)
    dp0 = -T.deriv()(theta / delta) / delta / T(theta / delta)       # p'(0)
    safe = np.where(np.abs(lam) > 1e-12, lam, 1.0)
    f = np.where(np.abs(lam) > 1e-12, (1.0 - p) / safe, -dp0)
    return (V * f) @ V.T / d[:, None] / d[None, :]


def dense_multigrid(C, shape, degree, ratio, scale, coarsest, w_levels=0, min_side=16):
    """The V-cycle as a matrix: Galerkin products of piecewise-constant P,
    the Chebyshev smoother before and after, the coarsest level's
    ``(A + mean(diag) / n 1 1^T)^-1`` (at most ``coarsest`` cells, or the
    last of at most 1024 cells before one narrower than ``min_side``); on
    the top ``w_levels`` levels the coarse level's cycle ``B`` is applied
    twice, ``2 B - B A_c B``."""
    n = C.shape[0]
    coarse = tuple((k + 1) // 2 for k in shape)
    if n <= coarsest or (min(coarse) < min_side and n <= 1024):
        return np.linalg.inv(C + np.diag(C).mean() / n)
    j, i = np.indices(shape).reshape(2, -1)
    cols = np.ravel_multi_index((j // 2, i // 2), coarse)
    P = np.zeros((n, int(np.prod(coarse))))
    P[np.arange(n), cols] = 1.0
    Ac = P.T @ C @ P
    Mc = dense_multigrid(Ac, coarse, degree, ratio, scale, coarsest, max(w_levels - 1, 0),
                         min_side)
    if w_levels > 0 and Ac.shape[0] > coarsest:
        Mc = 2 * Mc - Mc @ Ac @ Mc
    S = chebyshev_smoother(C, degree, ratio)
    I = np.eye(n)
    return S + (I - S @ C) @ (S + scale * P @ Mc @ P.T @ (I - C @ S))


def dense_inverse_of(name, A, m=2):
    """M^-1 as a dense matrix, built from the textbook formulas."""
    C = A.to_scipy().toarray()
    n = C.shape[0]
    D = np.diag(np.diag(C))
    L = np.tril(C, -1)
    I = np.eye(n)
    if name == "none":
        return I
    if name == "jacobi":
        return np.linalg.inv(D)
    if name == "incomplete_poisson":
        Di = np.linalg.inv(D)
        return (I - L @ Di) @ (I - Di @ L.T)
    if name == "incomplete_poisson_scaled":
        s = np.diag(1 / np.sqrt(np.diag(C)))
        Ls = np.tril(s @ C @ s, -1)
        return s @ (I - Ls) @ (I - Ls.T) @ s
    if name == "multigrid":
        return dense_multigrid(C, A.grid_shape, **MULTIGRID)
    if name == "block_ic":
        ny, nx = A.grid_shape
        block = np.arange(n) // (m * nx)
        Lb = np.where(block[:, None] == block[None, :], L, 0.0)   # couplings between blocks dropped
        # IC(0) pivots: d_p = a_pp - sum_q<p L_pq^2 / d_q over the block pattern.
        d = np.zeros(n)
        for p in range(n):
            d[p] = C[p, p] - sum(Lb[p, q] ** 2 / d[q] for q in np.nonzero(Lb[p, :p])[0])
        Dd = np.diag(d)
        M = (Dd + Lb) @ np.linalg.inv(Dd) @ (Dd + Lb).T
        return np.linalg.inv(M)
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(PRECONDITIONERS))
@pytest.mark.parametrize("contrast", [1.0, 1e6])
def test_apply_equals_definition(name, contrast, backend):
    A = small_operator(backend, contrast)
    options = {"block_ic": {"block_lines": 2}, "multigrid": dict(MULTIGRID, **FLOAT64_V)}
    M = make_preconditioner(name, A, **options.get(name, {}))
    Minv = dense_inverse_of(name, A)
    rng = np.random.default_rng(1)
    for _ in range(3):
        r = rng.standard_normal(A.shape[0])
        y = backend.to_host(M.apply(backend.xp.asarray(r)))
        ref = Minv @ r
        assert np.linalg.norm(y - ref) <= 1e-10 * np.linalg.norm(ref)


@pytest.mark.parametrize("w_levels", [1, 2])
def test_multigrid_w_levels_equal_definition(w_levels, backend):
    A = small_operator(backend, 1e3, nx=24, ny=16)
    options = dict(MULTIGRID, w_levels=w_levels)
    M = make_preconditioner("multigrid", A, cycle_precision="float64", **options)
    assert len(M.levels) == 4                         # 24 x 16 -> 12 x 8 -> 6 x 4 -> 3 x 2
    Minv = dense_multigrid(A.to_scipy().toarray(), A.grid_shape, **options)
    r = np.random.default_rng(2).standard_normal(A.shape[0])
    y = backend.to_host(M.apply(backend.xp.asarray(r)))
    assert np.linalg.norm(y - Minv @ r) <= 1e-10 * np.linalg.norm(Minv @ r)
    np.testing.assert_allclose(Minv, Minv.T, atol=1e-10 * abs(Minv).max())


@pytest.mark.parametrize("m", [2, 4])
def test_block_ic_reproduces_matrix_on_its_pattern(m, backend):
    """IC(0): (D+L) D^-1 (D+L)^T equals A on the block pattern; SPD."""
    A = small_operator(backend, 1e3, nx=10, ny=8)
    M = make_preconditioner("block_ic", A, block_lines=m)
    C = A.to_scipy().toarray()
    n = C.shape[0]
    Minv = np.column_stack([backend.to_host(M.apply(backend.xp.asarray(e))) for e in np.eye(n)])
    Mmat = np.linalg.inv(Minv)
    block = np.arange(n) // (m * A.nx)
    same_block = block[:, None] == block[None, :]
    pattern = (C != 0) & same_block
    np.testing.assert_allclose(Mmat[pattern], C[pattern], rtol=1e-9, atol=1e-9 * abs(C).max())
    np.testing.assert_allclose(Minv, Minv.T, atol=1e-10 * abs(Minv).max())
    assert np.linalg.eigvalsh(0.5 * (Minv + Minv.T)).min() > 0


@pytest.mark.parametrize("name", ["jacobi", "incomplete_poisson", "incomplete_poisson_scaled"])
def test_preconditioners_symmetric_positive_definite(name, backend):
    A = small_operator(backend, 1e6)
    M = make_preconditioner(name, A)
    n = A.shape[0]
    Minv = np.column_stack([backend.to_host(M.apply(backend.xp.asarray(e))) for e in np.eye(n)])
    np.testing.assert_allclose(Minv, Minv.T, atol=1e-12 * abs(Minv).max())
    assert np.linalg.eigvalsh(Minv).min() > 0


def test_bad_block_lines_and_general_matrix():
    A, b, phi = bubbly_column(16, 10.0)
    with pytest.raises(ValueError, match="block_lines"):
        make_preconditioner("block_ic", A, block_lines=3)
    with pytest.raises(TypeError, match="5-point grid operator"):
        make_preconditioner("incomplete_poisson_scaled", sp.eye(5, format="csr"))
    J = make_preconditioner("jacobi", sp.diags([2.0, 4.0]).tocsr())
    np.testing.assert_allclose(J.apply(np.array([2.0, 2.0])), [1.0, 0.5])


def test_jacobi_rejects_a_non_positive_diagonal_now_or_at_check(backend):
    """The default check raises in the constructor; ``check=False`` defers it
    to :meth:`check`, which PressureSolver calls after its one synchronisation."""
    from bubbleflow.operators.poisson import PoissonOperator
    from bubbleflow.linalg.precond.jacobi import Jacobi
    from bubbleflow.linalg.solver import PressureSolver

    bx, by = np.ones((4, 4)), np.ones((3, 5))
    bx[:, 0] = 0.0
    bx[:, 1] = 0.0
    by[:, 1] = 0.0                                  # cell column 1 is cut off: zero diagonal
    A = PoissonOperator(bx, by, 1.0, 1.0, backend=backend)
    with pytest.raises(ValueError, match="non-positive diagonal"):
        Jacobi(A)
    M = Jacobi(A, check=False)
    with pytest.raises(ValueError, match="non-positive diagonal"):
        M.check()
    M.check()                                       # reported once
    with pytest.raises(ValueError, match="non-positive diagonal"):
        PressureSolver(A, method="pcg", preconditioner="jacobi", deflation="none")
    good = PoissonOperator(np.ones((4, 4)), np.ones((3, 5)), 1.0, 1.0, backend=backend)
    Jacobi(good, check=False).check()
