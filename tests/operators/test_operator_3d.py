"""The 7-point pressure operator in 3-D: the n-D grid's
matrix-free flux form against an independently assembled SciPy matrix, and
the multigrid-preconditioned CG on the 3-D bubbly column."""
import numpy as np
import pytest
from scipy.sparse.linalg import spsolve

from bubbleflow import cg, dpcg, make_preconditioner
from bubbleflow.case.problem import bubbly_column_3d
from bubbleflow.linalg.solver import PressureSolver
from bubbleflow.mesh.grid import Grid
from bubbleflow.operators.poisson import PoissonOperator
from helpers.operators import seven_point


def random_faces(shape, rng):
    nz, ny, nx = shape
    return (rng.uniform(1e-3, 1.0, (nz, ny, nx - 1)), rng.uniform(1e-3, 1.0, (nz, ny - 1, nx)),
            rng.uniform(1e-3, 1.0, (nz - 1, ny, nx)))


def test_operator_equals_the_textbook_seven_point_matrix(backend):
    rng = np.random.default_rng(0)
    grid = Grid.regular((5, 4, 3), (1.0, 0.8, 0.9))
    faces = random_faces(grid.shape, rng)
    A = PoissonOperator.from_faces([backend.xp.asarray(f) for f in faces], grid, backend=backend)
    ref = seven_point(*faces, grid.spacing)
    assert abs(A.to_scipy() - ref).max() <= 1e-12 * abs(ref).max()
    x = rng.standard_normal(grid.size)
    y = backend.to_host(A @ backend.xp.asarray(x))
    np.testing.assert_allclose(y, ref @ x, rtol=1e-12, atol=1e-12 * abs(ref @ x).max())
    grid_shaped = backend.to_host(A.matvec(backend.xp.asarray(x.reshape(grid.shape))))
    assert grid_shaped.shape == grid.shape
    np.testing.assert_allclose(grid_shaped.ravel(), y, rtol=0, atol=0)
    np.testing.assert_allclose(backend.to_host(A.diagonal()), ref.diagonal(), rtol=1e-14)
    assert A.norm_inf() == pytest.approx(abs(ref).sum(axis=1).max())


def test_faces_of_the_wrong_shape_are_refused():
    grid = Grid.regular((4, 4, 4), (1.0, 1.0, 1.0))
    faces = list(random_faces(grid.shape, np.random.default_rng(1)))
    faces[2] = faces[2][:-1]
    with pytest.raises(ValueError, match="axis z"):
        PoissonOperator.from_faces(faces, grid)
    with pytest.raises(ValueError, match="unknown storage 'dia'"):
        PoissonOperator.from_faces(random_faces(grid.shape, np.random.default_rng(1)), grid,
                                   storage="dia")



def test_an_operator_built_in_given_arrays_holds_them_with_the_same_couplings(backend):
    """``from_faces(out=...)`` writes the couplings into the given arrays
    and the operator holds them: the same values as an operator of its own;
    a second operator built in them overwrites the first's."""
    rng = np.random.default_rng(5)
    grid = Grid.regular((5, 4, 3), (1.0, 0.8, 0.9))
    xp = backend.xp
    faces = [xp.asarray(f) for f in random_faces(grid.shape, rng)]
    own = PoissonOperator.from_faces(faces, grid, backend=backend, densities=True)
    out = tuple(xp.full(grid.faces_shape(a), -1.0) for a in range(3))
    A = PoissonOperator.from_faces(faces, grid, backend=backend, densities=True, out=out)
    assert all(c is o for c, o in zip(A.couplings(), out))
    for c, ref in zip(A.couplings(), own.couplings()):
        np.testing.assert_array_equal(backend.to_host(c), backend.to_host(ref))
    later = [2.0 * f for f in faces]
    B = PoissonOperator.from_faces(later, grid, backend=backend, densities=True, out=out)
    ref = PoissonOperator.from_faces(later, grid, backend=backend, densities=True)
    for c, r in zip(A.couplings(), ref.couplings()):
        np.testing.assert_array_equal(backend.to_host(c), backend.to_host(r))
    assert all(b is a for b, a in zip(B.couplings(), A.couplings()))


def test_arrays_an_operator_cannot_be_built_in_are_refused():
    """``out`` is for a 3-D matrix-free float64 operator, one float64 array
    per axis of that axis's faces' shape: anything else is refused."""
    rng = np.random.default_rng(6)
    grid = Grid.regular((4, 4, 4), (1.0, 1.0, 1.0))
    faces = random_faces(grid.shape, rng)
    out = [np.zeros(grid.faces_shape(a)) for a in range(3)]
    with pytest.raises(ValueError, match="storage 'diagonals'"):
        PoissonOperator.from_faces(faces, grid, storage="diagonals", out=out)
    with pytest.raises(ValueError, match="dtype float32"):
        PoissonOperator.from_faces(faces, grid, dtype=np.float32, out=out)
    flat = Grid.regular((4, 4), (1.0, 1.0))
    with pytest.raises(ValueError, match="2-D"):
        PoissonOperator.from_faces([np.ones(flat.faces_shape(a)) for a in range(2)], flat,
                                   out=out[:2])
    out[1] = out[1][:-1]
    with pytest.raises(ValueError, match=r"out\[1\]"):
        PoissonOperator.from_faces(faces, grid, out=out)
    out[1] = np.zeros(grid.faces_shape(1), dtype=np.float32)
    with pytest.raises(ValueError, match=r"out\[1\] is a ndarray of float32"):
        PoissonOperator.from_faces(faces, grid, out=out)

def test_bubbly_column_3d_is_singular_and_compatible():
    A, b, phi = bubbly_column_3d(10, 1e3)
    S = A.to_scipy()
    assert abs(S - S.T).max() == 0.0
    assert abs(S @ np.ones(1000)).max() <= 1e-9 * abs(S).max()
    assert abs(b.sum()) <= 1e-9 * abs(b).max()
    assert (phi < 0).sum() > 0 and (phi > 0).sum() > 0      # gas and liquid


@pytest.mark.parametrize("contrast", [1.0, 1e3, 1e6])
def test_multigrid_cg_in_3d(contrast, backend):
    """Iterations flat in the contrast (the 3-D column at 32^3), and the
    answer a direct solve's at 12^3."""
    A, b, _ = bubbly_column_3d(32, contrast, backend=backend)
    rtol = 1e-6 if contrast >= 1e6 else 1e-8
    x, info = cg(A, b, rtol=rtol, M=make_preconditioner("multigrid", A))
    assert info == 0 and info.iterations <= 20, info.summary()
    assert len(make_preconditioner("multigrid", A).levels) >= 3
    A, b, _ = bubbly_column_3d(12, contrast)
    x, info = PressureSolver(A, rtol=1e-10 if contrast < 1e6 else 1e-8).solve(b)
    S = A.to_scipy().tolil()
    S[0, :] = 0
    S[0, 0] = 1.0                     # grounded: the solution with x[0] = 0
    rhs = b.copy()
    rhs[0] = 0.0
    ref = spsolve(S.tocsc(), rhs)
    ref -= ref.mean()
    assert np.linalg.norm(x - ref) <= 1e-5 * np.linalg.norm(ref)


def test_3d_deflation_with_two_block_counts_is_refused_in_one_line():
    A, b, _ = bubbly_column_3d(8, 1e3)
    with pytest.raises(ValueError, match="2 block counts for a 3-D grid"):
        PressureSolver(A, method="dpcg", deflation="subdomains", subdomains=(2, 2))


def test_mixed_precision_solver_in_3d():
    """The float32 copy of a 3-D operator (its face couplings rounded) in the
    PressureSolver's mixed-precision refinement."""
    A, b, _ = bubbly_column_3d(16, 1e3)
    x, rec = PressureSolver(A, rtol=1e-8, precision="float32").solve(b)
    assert rec.converged and rec.precision == "float32" and rec.residual <= 1e-8


@pytest.mark.parametrize("name", ["jacobi", "incomplete_poisson_scaled", "incomplete_poisson"])
def test_preconditioners_in_3d_equal_their_definition(name, backend):
    """Jacobi ``D^-1``, scaled incomplete Poisson ``D^-1/2 (I - L~)(I -
    L~^T) D^-1/2`` (``L~`` the strict lower part of ``D^-1/2 A D^-1/2``) and
    plain incomplete Poisson ``(I - L D^-1)(I - D^-1 L^T)`` (Ament et al.
    2010), from the SciPy matrix, against
    the 3-D face-coupling code."""
    rng = np.random.default_rng(4)
    grid = Grid.regular((5, 4, 3), (1.0, 1.0, 1.0))
    A = PoissonOperator.from_faces([backend.xp.asarray(f) for f in random_faces(grid.shape, rng)],
                                   grid, backend=backend)
    S = A.to_scipy().toarray()
    d = np.diag(S)
    if name == "jacobi":
        Minv = np.diag(1.0 / d)
    elif name == "incomplete_poisson":
        Di, L, I = np.diag(1.0 / d), np.tril(S, -1), np.eye(len(d))
        Minv = (I - L @ Di) @ (I - Di @ L.T)
    else:
        s = np.diag(1.0 / np.sqrt(d))
        L = np.tril(s @ S @ s, -1)
        I = np.eye(len(d))
        Minv = s @ (I - L) @ (I - L.T) @ s
    M = make_preconditioner(name, A)
    r = rng.standard_normal(grid.size)
    y = backend.to_host(M.apply(backend.xp.asarray(r)))
    np.testing.assert_allclose(y, Minv @ r, rtol=1e-12, atol=1e-12 * abs(Minv @ r).max())


def test_ips_and_jacobi_pcg_in_3d():
    """Both converge; in 3-D scaled incomplete Poisson is no better than
    Jacobi on the column (122 against 109 iterations at 16^3, contrast 1e3:
    ``D^-1/2 A D^-1/2`` has six neighbours of about 1/6, and its first-order
    inverse ``2 I - A~`` is weaker than in 2-D), multigrid ten times better."""
    A, b, _ = bubbly_column_3d(16, 1e3)
    its = {}
    for name in ("jacobi", "incomplete_poisson_scaled", "multigrid"):
        x, info = cg(A, b, rtol=1e-8, M=name, maxiter=2000)
        assert info == 0, info.summary()
        its[name] = info.iterations
    assert its["incomplete_poisson_scaled"] < 2 * its["jacobi"]
    assert 5 * its["multigrid"] < its["jacobi"]


def test_dpcg_with_subdomain_labels_in_3d():
    """Labels on a 3-D operator become the user's deflation vectors (no
    block layout yet): 4^3 subdomains save iterations over Jacobi alone."""
    A, b, _ = bubbly_column_3d(16, 1e3)
    block = np.arange(16) // 4
    labels = (block[:, None, None] * 16 + block[None, :, None] * 4 + block[None, None, :]).ravel()
    x, info = dpcg(A, b, rtol=1e-8, M="jacobi", deflation=labels)
    assert info == 0 and info.deflation_vectors == 64
    assert info.iterations < cg(A, b, rtol=1e-8, M="jacobi")[1].iterations


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stencil7_kernel_equals_the_array_code(cupy_backend, dtype):
    """The 3-D matrix-free CUDA apply (``stencil7.cu``) against its twin, the
    array code of ``apply_faces``."""
    import cupy as cp

    from bubbleflow.operators.poisson import apply_faces

    rng = np.random.default_rng(5)
    shape = (5, 6, 7)
    c = [cp.asarray(f, dtype=dtype) for f in random_faces(shape, rng)]
    x = cp.asarray(rng.standard_normal(shape), dtype=dtype)
    got = cp.asnumpy(apply_faces(c, x, cp.empty_like(x)))
    ref = cp.asnumpy(apply_faces.reference(c, x, cp.empty_like(x)))
    tol = 1e-13 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * abs(ref).max())


def test_seven_diagonal_storage_equals_the_matrix_free_operator(backend):
    """The diagonal storage of Gupta (2010) in 3-D: seven diagonals (B, S, W, C, E, N, T), the
    same matrix and apply as the face couplings, its couplings recovered."""
    from bubbleflow.mesh.grid import Grid
    from bubbleflow.operators.poisson import PoissonOperator

    rng = np.random.default_rng(4)
    grid = Grid.regular((5, 4, 3), (1.0, 0.8, 0.6))
    betas = [rng.uniform(0.1, 2.0, grid.faces_shape(a)) for a in range(3)]
    free = PoissonOperator.from_faces(betas, grid, backend=backend)
    dia = PoissonOperator.from_faces(betas, grid, backend=backend, storage="diagonals")
    assert len(dia.entries()) == 7
    h = backend.to_host
    ref = free.to_scipy().toarray()
    np.testing.assert_allclose(dia.to_scipy().toarray(), ref, rtol=1e-14, atol=1e-12)
    x = backend.xp.asarray(rng.standard_normal(grid.size))
    np.testing.assert_allclose(h(dia @ x), ref @ h(x), rtol=1e-12, atol=1e-12 * abs(ref).max())
    for c, d in zip(free.couplings(), dia.couplings()):
        np.testing.assert_allclose(h(d), h(c), rtol=1e-15)
    np.testing.assert_allclose(h(dia.diagonal()), np.diag(ref), rtol=1e-15)
    assert dia.norm_inf() == pytest.approx(np.abs(ref).sum(axis=1).max())


def test_seven_diagonal_storage_in_the_solvers(backend):
    from bubbleflow.case.config import load_case
    from bubbleflow.case.problem import build_pressure_problem

    for storage in ("diagonals", "matrix_free"):
        case = load_case("cases/bubbly_column_3d.yaml", ["grid.nx=16", "grid.ny=16", "grid.nz=16",
                                                         f"operator.storage={storage}"])
        prob = build_pressure_problem(case, backend)
        assert prob.A.storage == storage
        x, rec = PressureSolver(prob.A, rtol=1e-8, precision="float32").solve(prob.rhs)
        assert rec.converged and rec.residual <= 1e-8
    assert load_case("cases/bubbly_column_3d.yaml").operator.storage == "matrix_free"


def _ic0(a):
    """IC(0) of a dense SPD matrix on its own pattern (the textbook loop)."""
    a = a.copy()
    n = a.shape[0]
    pattern = a != 0
    for k in range(n):
        a[k, k] = np.sqrt(a[k, k])
        below = np.flatnonzero(pattern[k + 1:, k]) + k + 1
        a[below, k] /= a[k, k]
        for j in below:
            rows = below[below >= j]
            keep = pattern[rows, j]
            a[rows[keep], j] -= a[rows[keep], k] * a[j, k]
    return np.tril(a)


@pytest.mark.parametrize("block_lines", [1, 2, 4])
def test_block_ic_in_3d_is_ic0_of_its_blocks(block_lines, backend):
    """3-D block IC: blocks of ``block_lines`` x-lines of one z-plane (4: the
    whole plane), IC(0) inside each block, the couplings between blocks
    dropped, the full diagonal kept; against the textbook IC(0)."""
    A, _, _ = bubbly_column_3d(4, 1e3, backend=backend)
    M = make_preconditioner("block_ic", A, block_lines=block_lines)
    dense = A.to_scipy().toarray()
    k, j, i = np.unravel_index(np.arange(64), (4, 4, 4))
    same_block = (k[:, None] == k[None, :]) & (j[:, None] // block_lines == j[None, :] // block_lines)
    kept = np.where(same_block | np.eye(64, dtype=bool), dense, 0.0)
    L = _ic0(kept)
    r = np.random.default_rng(5).standard_normal(64)
    z = backend.to_host(M.apply(backend.xp.asarray(r)))
    np.testing.assert_allclose(L @ (L.T @ z), r, rtol=0, atol=1e-10 * np.abs(r).max())


def test_block_ic_in_3d_solves_and_checks_its_lines():
    A, b, _ = bubbly_column_3d(8, 1e3)
    x, rec = PressureSolver(A, preconditioner="block_ic", block_lines=8, rtol=1e-8).solve(b)
    assert rec.converged
    with pytest.raises(ValueError, match="block_lines=3 must divide ny=8"):
        make_preconditioner("block_ic", A, block_lines=3)


def test_default_subdomains_are_8_cells_wide_in_3d_and_16_in_2d():
    from bubbleflow.linalg.registry import default_subdomains

    assert default_subdomains(Grid.regular((32, 32, 64), (1.0, 1.0, 2.0))) == (4, 4, 8)
    assert default_subdomains(Grid(256, 128)) == (16, 8)
    # The cap of 4096 boxes widens them on large grids.
    assert default_subdomains(Grid.regular((512,) * 3, (1.0,) * 3)) == (16, 16, 16)
