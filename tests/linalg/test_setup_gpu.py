"""The GPU set-up kernels (operators.poisson_cuda, precond.incomplete_poisson, linalg.deflation_cuda) against their array-code twins.

Operator diagonals and scaled incomplete Poisson coefficients: bit for bit.
The block deflation space (labels, parts, ``(A Z)^T``, ``E``): against the
array code on the same GPU (the kernels switched off) and on the CPU, on
level-set and plain layouts, narrow and wide blocks, fragmented parts.
"""
import numpy as np
import pytest

from bubbleflow.linalg.deflation import boxes
from bubbleflow.linalg.deflation.space import make_deflation
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import Circle, build_levelset, phase_fields
from bubbleflow.operators.poisson import PoissonOperator, diagonals_from_couplings
from bubbleflow.linalg.precond.incomplete_poisson import ScaledIncompletePoisson, scaled_coefficients

pytestmark = pytest.mark.gpu


def random_faces(nx, ny, seed):
    rng = np.random.default_rng(seed)
    return 10.0 ** rng.uniform(-3, 0, (ny, nx - 1)), 10.0 ** rng.uniform(-3, 0, (ny - 1, nx))


@pytest.mark.parametrize("shape", [(13, 9), (64, 48), (1, 5), (6, 1), (1, 1)])
def test_operator_diagonals_kernel_equals_array_code(shape, cp):
    from bubbleflow.operators.poisson_cuda import op_diagonals

    nx, ny = shape
    bx, by = random_faces(nx, ny, nx * 7 + ny)
    hx, hy = 1.0 / nx, 0.3 / ny
    got = op_diagonals(cp.asarray(bx), cp.asarray(by), hx, hy)
    twin = diagonals_from_couplings((cp.asarray(bx) / hx ** 2, cp.asarray(by) / hy ** 2), cp)
    for g, t in zip(got, twin):
        assert g.shape == (ny, nx) and g.dtype == np.float64
        np.testing.assert_array_equal(g.get(), t.get())
        assert not np.signbit(g.get()[g.get() == 0]).any()        # +0 across the walls
    # From densities: 1.0 / rho, then / h^2, rounded as the array code does.
    rx, ry = 1.0 / bx, 1.0 / by
    got = op_diagonals(cp.asarray(rx), cp.asarray(ry), hx, hy, reciprocal=True)
    twin = diagonals_from_couplings(((1.0 / cp.asarray(rx)) / hx ** 2,
                                     (1.0 / cp.asarray(ry)) / hy ** 2), cp)
    for g, t in zip(got, twin):
        np.testing.assert_array_equal(g.get(), t.get())


@pytest.mark.parametrize("shape", [(5, 7, 9), (1, 4, 3), (64, 48)])
@pytest.mark.parametrize("reciprocal", [False, True])
def test_face_couplings_kernel_equals_array_code(shape, reciprocal, cp):
    from bubbleflow.operators import poisson_cuda
    from bubbleflow.operators.poisson import face_couplings

    rho = 10.0 ** np.random.default_rng(sum(shape)).uniform(-3, 3, shape)
    h = 0.3 / shape[-1]
    on_device = cp.asarray(rho)
    for beta, device in ((rho, on_device), (rho[..., ::2], on_device[..., ::2])):  # and strided
        host = face_couplings(beta, h, reciprocal)
        got = poisson_cuda.face_couplings(device, h, reciprocal)
        np.testing.assert_array_equal(got.get(), host)
        np.testing.assert_array_equal(face_couplings(device, h, reciprocal).get(), host)


@pytest.mark.parametrize("shape", [(13, 9), (64, 48), (1, 5), (6, 1)])
def test_scaled_incomplete_poisson_kernel_equals_array_code(shape, cupy_backend, cp):
    nx, ny = shape
    bx, by = random_faces(nx, ny, nx + 3 * ny)
    A = PoissonOperator(bx, by, 1.0 / nx, 1.0 / ny, backend=cupy_backend)
    M = ScaledIncompletePoisson(A)                               # the kernel
    twin = scaled_coefficients.reference(*A.entries(), cp)
    got = (M.inv_sqrt_diagonal, M.S, M.W, M.E, M.N)
    for g, t in zip(got, twin):
        np.testing.assert_array_equal(g.get(), t.get())
    r = cp.asarray(np.random.default_rng(1).standard_normal(nx * ny))
    A_host = PoissonOperator(bx, by, 1.0 / nx, 1.0 / ny)
    ref = ScaledIncompletePoisson(A_host).apply(r.get())
    np.testing.assert_allclose(M.apply(r).get(), ref, rtol=1e-13, atol=1e-13 * abs(ref).max())


def layouts():
    """(nx, ny, blocks, phi kind): narrow and wide blocks, one block, stripes."""
    return [(64, 48, (8, 6), "bubbles"), (64, 48, (8, 6), None), (40, 30, (40, 1), "bubbles"),
            (40, 30, (1, 30), "random"), (32, 32, (1, 1), "bubbles"), (48, 32, (4, 4), "random"),
            (96, 64, (3, 8), "bubbles"), (33, 1, (3, 1), "random")]


def make_phi(kind, grid, seed=0):
    if kind == "bubbles":
        circles = [Circle(0.3 * grid.lx, 0.35 * grid.ly, 0.15 * grid.ly),
                   Circle(0.7 * grid.lx, 0.55 * grid.ly, 0.12 * grid.ly),
                   Circle(0.52 * grid.lx, 0.2 * grid.ly, 0.05 * grid.ly)]
        return build_levelset(grid, 0.8 * grid.ly, circles)
    return np.random.default_rng(seed).standard_normal((grid.ny, grid.nx))   # fragmented parts


def operator_and_phi(nx, ny, phi_kind, backend, storage="diagonals"):
    grid = Grid(nx, ny, lx=nx / max(nx, ny), ly=ny / max(nx, ny))
    phi = make_phi(phi_kind or "bubbles", grid)
    ph = phase_fields(grid, phi, 1000.0, 1.0, 1e-3, 1e-5)
    A = PoissonOperator(1.0 / ph.rho_x, 1.0 / ph.rho_y, grid.hx, grid.hy, backend=backend,
                        storage=storage)
    return A, (phi if phi_kind else None)


def build(A, phi, blocks):
    kind = "levelset_subdomains" if phi is not None else "subdomains"
    return make_deflation(kind, A, phi=phi, subdomains=blocks)


def compare(D, T):
    """Deflation D (kernels) against T (array code): equal structure, equal values
    to rounding, exactly symmetric E."""
    host = lambda a: a.get() if hasattr(a, "get") else np.asarray(a)
    assert D.k == T.k
    np.testing.assert_array_equal(host(D.labels), host(T.labels))
    for name in ("part", "lut", "owner", "groups"):
        np.testing.assert_array_equal(host(getattr(D, name)), host(getattr(T, name)))
    np.testing.assert_array_equal(D.coarse_groups, T.coarse_groups)
    A1, A2 = (a.get() if hasattr(a, "get") else a for a in (D.AZT, T.AZT))
    np.testing.assert_array_equal(A1.indptr, A2.indptr)
    np.testing.assert_array_equal(A1.indices, A2.indices)
    assert A1.has_sorted_indices
    scale = abs(A2.data).max() if A2.nnz else 1.0
    np.testing.assert_allclose(A1.data, A2.data, rtol=1e-14, atol=1e-15 * scale)
    E1, E2 = D.E, T.E
    np.testing.assert_array_equal(E1.indptr, E2.indptr)
    np.testing.assert_array_equal(E1.indices, E2.indices)
    assert (E1 != E1.T).nnz == 0
    scale = abs(E2.data).max() if E2.nnz else 1.0
    np.testing.assert_allclose(E1.data, E2.data, rtol=1e-13, atol=1e-14 * scale)


@pytest.mark.parametrize("nx,ny,blocks,phi_kind", layouts())
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_deflation_kernels_equal_array_code(nx, ny, blocks, phi_kind, storage, cupy_backend,
                                            monkeypatch):
    A, phi = operator_and_phi(nx, ny, phi_kind, cupy_backend, storage)
    from bubbleflow.linalg.deflation.kernels import raw_deflation_ok

    assert raw_deflation_ok(A, *blocks)
    D = build(A, phi, blocks)
    assert D.labels.dtype == np.int32 and D.labels32 is D.labels
    monkeypatch.delitem(boxes.block_layout.variants, "cupy")
    T = build(A, phi, blocks)                                  # the array code, same GPU
    assert T.labels.dtype == np.int64
    compare(D, T)
    A_host, _ = operator_and_phi(nx, ny, phi_kind, "numpy", storage)
    compare(D, build(A_host, phi, blocks))                     # and on the CPU


def test_deflation_kernels_are_deterministic(cupy_backend):
    A, phi = operator_and_phi(96, 64, "random", cupy_backend)
    D1, D2 = build(A, phi, (12, 8)), build(A, phi, (12, 8))
    assert (D1.AZT.get() != D2.AZT.get()).nnz == 0
    assert (D1.E != D2.E).nnz == 0


def test_deflation_kernels_not_used_for_uneven_blocks(cupy_backend):
    """Blocks that do not tile the grid take the array code (int64 labels)."""
    A, phi = operator_and_phi(50, 30, "bubbles", cupy_backend)
    D = build(A, phi, (8, 7))
    assert D.labels.dtype == np.int64 and D.block_shape is None


def test_deflated_solve_with_kernel_built_space_matches_cpu(cupy_backend):
    """A DPCG solve on the kernel-built space: the NumPy backend's count and answer."""
    from bubbleflow.linalg.solver import PressureSolver

    A, phi = operator_and_phi(64, 64, "bubbles", cupy_backend)
    A_host, _ = operator_and_phi(64, 64, "bubbles", "numpy")
    b = np.random.default_rng(5).standard_normal(64 * 64)
    b -= b.mean()
    x_gpu, rec_gpu = PressureSolver(A, phi=phi, subdomains=(8, 8)).solve(cupy_backend.xp.asarray(b))
    x_cpu, rec_cpu = PressureSolver(A_host, phi=phi, subdomains=(8, 8)).solve(b)
    assert rec_gpu.converged and rec_cpu.converged
    assert abs(rec_gpu.iterations - rec_cpu.iterations) <= 2
    np.testing.assert_allclose(x_gpu.get(), x_cpu, atol=1e-6 * abs(x_cpu).max())


@pytest.mark.parametrize("singular", [True, False])
def test_dense_coarse_kernels_equal_array_code(singular, cupy_backend):
    """The dense coarse factorisation from E on the device (scatter,
    symmetric part, cuSOLVER without its host check, the inverse's symmetric
    part, both projections): the array code's K bit for bit."""
    import cupyx.scipy.sparse as csp

    from bubbleflow.linalg.deflation.dense_inverses import dense_pseudo_inverse

    A, phi = operator_and_phi(96, 64, "bubbles", cupy_backend)
    Eb = build(A, phi, (12, 8)).E_backend
    k = Eb.shape[0]
    if not singular:
        Eb = (Eb + csp.identity(k, format="csr")).tocsr()
        Eb.sort_indices()
    n = k - 1 if singular else k
    K, flags = dense_pseudo_inverse(cupy_backend, Eb, n, singular)
    ref, none = dense_pseudo_inverse.reference(cupy_backend, Eb, n, singular)
    assert none == [] and len(flags) == 1
    np.testing.assert_array_equal(K.get(), ref.get())
    assert not flags[0][0].get().any()


def test_dense_coarse_on_the_device_defers_its_checks(cupy_backend):
    """An indefinite E factorised on the device: the failure is raised by
    check() (PressureSolver reads every check in its one transfer), or at
    once by default."""
    import cupyx.scipy.sparse as csp

    from bubbleflow.linalg.deflation.coarse import CoarseSolver

    A, phi = operator_and_phi(64, 48, "bubbles", cupy_backend)
    Eb = build(A, phi, (8, 6)).E_backend
    bad = (Eb - 1e9 * csp.identity(Eb.shape[0], format="csr")).tocsr()
    bad.sort_indices()
    c = CoarseSolver(bad, False, cupy_backend, E_backend=bad, symmetric=True, check=False)
    assert c.mode == "dense" and c.check_flags()
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        c.check()
    c.check()                                       # reported once
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        CoarseSolver(bad, False, cupy_backend, E_backend=bad, symmetric=True)
