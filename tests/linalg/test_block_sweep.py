"""block_sweep: NumPy against scipy's triangular solve, CuPy against NumPy."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve_triangular

from bubbleflow.linalg.precond.block_ic import block_ic_pivots
from bubbleflow.linalg.precond.block_sweep import (MAX_KERNEL_M, _SHARED_BYTES, _scan_threads,
                                            _sub_blocks, block_sweep)


# --------------------------------------------------------------------------- #
# Test data
# --------------------------------------------------------------------------- #
def random_data(ny, nx, rng, dtype=np.float64):
    """Couplings of magnitudes 1e-6..1 (density contrast), a diagonally dominant row.

    Returns ``r, W, S, E, N, invd``; ``invd`` is one over the sum of the four
    coupling magnitudes, so every row of the factor is diagonally dominant.
    """
    W, S, E, N = (-(10.0 ** rng.uniform(-6, 0, (ny, nx))) for _ in range(4))
    invd = 1.0 / (np.abs(W) + np.abs(S) + np.abs(E) + np.abs(N))
    r = rng.standard_normal((ny, nx))
    return tuple(a.astype(dtype) for a in (r, W, S, E, N, invd))


def poisson_ic_data(ny, nx, m, contrast, rng):
    """Block IC(0) of a 5-point variable-coefficient Poisson matrix.

    The coefficient is 1 in the liquid and ``1/contrast`` in a few random
    bubbles; face couplings are harmonic means.  Returns ``r, W, S, E, N, invd``
    with ``invd`` the inverse IC pivots of the blocks of ``m`` rows; ``S`` and
    ``N`` keep their values across block edges (the sweep must mask them).
    """
    y, x = np.mgrid[0:ny, 0:nx] + 0.5
    k = np.ones((ny, nx))
    for _ in range(4):
        cy, cx = rng.uniform(0, ny), rng.uniform(0, nx)
        rad = rng.uniform(0.15, 0.35) * min(nx, ny)
        k[(y - cy) ** 2 + (x - cx) ** 2 < rad ** 2] = 1.0 / contrast
    fx = 2.0 / (1.0 / k[:, 1:] + 1.0 / k[:, :-1])        # (ny, nx-1)
    fy = 2.0 / (1.0 / k[1:, :] + 1.0 / k[:-1, :])        # (ny-1, nx)
    W = np.zeros((ny, nx)); W[:, 1:] = -fx
    E = np.zeros((ny, nx)); E[:, :-1] = -fx
    S = np.zeros((ny, nx)); S[1:, :] = -fy
    N = np.zeros((ny, nx)); N[:-1, :] = -fy
    C = -(W + E + S + N)
    C += 1e-3 * C                                         # mildly definite (Neumann otherwise)
    d = block_ic_pivots(C, W, S, m)                       # raises on a non-positive pivot
    assert np.all(d > 0)
    r = rng.standard_normal((ny, nx))
    return r, W, S, E, N, 1.0 / d


def spoil_masked(W, S, m, reverse, value):
    """Write ``value`` where the sweep must ignore ``W`` and ``S``."""
    W, S = W.copy(), S.copy()
    if reverse:
        W[:, -1] = value
        S[m - 1::m, :] = value
    else:
        W[:, 0] = value
        S[::m, :] = value
    return W, S


def assemble(W, S, invd, m, reverse=False):
    """The block triangular factor as a CSR matrix (couplings between blocks dropped)."""
    ny, nx = W.shape
    n = ny * nx
    p = np.arange(n)
    j, i = np.divmod(p, nx)
    Wf, Sf = W.ravel(), S.ravel()
    rows, cols, vals = [p], [p], [1.0 / invd.ravel()]
    if reverse:
        kw, ks = i < nx - 1, j % m != m - 1
        rows += [p[kw], p[ks]]
        cols += [p[kw] + 1, p[ks] + nx]
    else:
        kw, ks = i > 0, j % m != 0
        rows += [p[kw], p[ks]]
        cols += [p[kw] - 1, p[ks] - nx]
    vals += [Wf[kw], Sf[ks]]
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n, n))


def rel_err(got, ref):
    return np.max(np.abs(got - ref)) / np.max(np.abs(ref))


def sweep_args(data, reverse):
    """``(r, W, S, invd)`` for the forward sweep, ``(r, E, N, invd)`` for the backward one."""
    r, W, S, E, N, invd = data
    return (r, E, N, invd) if reverse else (r, W, S, invd)


# --------------------------------------------------------------------------- #
# NumPy reference against scipy
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 6, 12])
@pytest.mark.parametrize("shape", [(12, 17), (12, 5), (24, 1)])
def test_numpy_matches_spsolve_triangular(shape, m, reverse):
    ny, nx = shape
    rng = np.random.default_rng(100 * m + nx + reverse)
    r, W, S, invd = sweep_args(random_data(ny, nx, rng), reverse)
    A = assemble(W, S, invd, m, reverse)
    ref = spsolve_triangular(A, r.ravel(), lower=not reverse).reshape(ny, nx)
    Wx, Sx = spoil_masked(W, S, m, reverse, 1e3)     # values the sweep must not see
    u = block_sweep(r, Wx, Sx, invd, m, reverse=reverse)
    assert isinstance(u, np.ndarray) and u.shape == (ny, nx) and u.dtype == np.float64
    np.testing.assert_allclose(u, ref, rtol=1e-11, atol=1e-13 * np.max(np.abs(ref)))
    # and it really is the solve: A u = r
    np.testing.assert_allclose(A @ u.ravel(), r.ravel(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("contrast", [1.0, 1e3, 1e6])
def test_numpy_ic_factor_high_contrast(m, reverse, contrast):
    ny, nx = 12, 17
    rng = np.random.default_rng(7 + m)
    data = poisson_ic_data(ny, nx, m, contrast, rng)
    r, W, S, invd = sweep_args(data, reverse)
    ref = spsolve_triangular(assemble(W, S, invd, m, reverse), r.ravel(),
                             lower=not reverse).reshape(ny, nx)
    u = block_sweep(r, W, S, invd, m, reverse=reverse)
    assert rel_err(u, ref) < 1e-12


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
def test_numpy_masked_entries_are_never_read(reverse):
    ny, nx, m = 12, 17, 3
    r, W, S, invd = sweep_args(random_data(ny, nx, np.random.default_rng(3)), reverse)
    clean = block_sweep(r, *spoil_masked(W, S, m, reverse, 0.0), invd, m, reverse=reverse)
    with np.errstate(invalid="raise"):
        u = block_sweep(r, *spoil_masked(W, S, m, reverse, np.nan), invd, m, reverse=reverse)
    np.testing.assert_array_equal(u, clean)


@pytest.mark.parametrize("m", [1, 2, 4])
def test_block_ic_apply_is_symmetric(m):
    """Forward sweep with (W, S), backward with (E, N) = (W, S)^T: a symmetric M^-1."""
    ny, nx = 8, 11
    rng = np.random.default_rng(11)
    _, W, S, E, N, invd = poisson_ic_data(ny, nx, m, 1e6, rng)

    def apply(x):
        u = block_sweep(x, W, S, invd, m)
        return block_sweep(u / invd, E, N, invd, m, reverse=True)

    X = rng.standard_normal((4, ny, nx))
    G = np.array([[np.vdot(a, apply(b)) for b in X] for a in X])
    np.testing.assert_allclose(G, G.T, rtol=1e-10, atol=1e-12 * np.max(np.abs(G)))
    assert np.all(np.linalg.eigvalsh(0.5 * (G + G.T)) > 0)


def test_numpy_float32():
    ny, nx, m = 12, 17, 2
    data64 = random_data(ny, nx, np.random.default_rng(5))
    data32 = tuple(a.astype(np.float32) for a in data64)
    for reverse in (False, True):
        u32 = block_sweep(*sweep_args(data32, reverse), m, reverse=reverse)
        u64 = block_sweep(*sweep_args(data64, reverse), m, reverse=reverse)
        assert u32.dtype == np.float32
        assert rel_err(u32.astype(np.float64), u64) < 1e-4


def test_numpy_out_and_noncontiguous_inputs():
    ny, nx, m = 12, 17, 3
    r, W, S, E, N, invd = random_data(ny, nx, np.random.default_rng(9))
    ref = block_sweep(r, W, S, invd, m)
    out = np.full((ny, nx), np.nan)
    u = block_sweep(r, W, S, invd, m, out=out)
    assert u is out
    np.testing.assert_array_equal(out, ref)
    # Fortran-ordered and strided views are accepted
    rF = np.asfortranarray(r)
    big = np.zeros((ny, 2 * nx)); big[:, ::2] = W
    np.testing.assert_array_equal(block_sweep(rF, big[:, ::2], S, invd, m), ref)


def test_numpy_argument_errors():
    ny, nx = 12, 17
    r, W, S, E, N, invd = random_data(ny, nx, np.random.default_rng(2))
    with pytest.raises(ValueError):
        block_sweep(r, W, S, invd, 5)                     # does not divide ny
    with pytest.raises(ValueError):
        block_sweep(r, W, S, invd, 0)
    with pytest.raises(ValueError):
        block_sweep(r, W[:, :-1], S, invd, 2)             # shape mismatch
    with pytest.raises(ValueError):
        block_sweep(r, W, S, invd, 2, out=r)              # out aliases r
    with pytest.raises(ValueError):
        block_sweep(r, W, S, invd, 2, out=np.empty((ny, nx), np.float32))
    with pytest.raises(ValueError):
        block_sweep(r, W, S, invd, 2, out=np.empty((nx, ny)))


def test_kernel_launch_parameters():
    for m in range(1, 40):
        blocks = _sub_blocks(m)
        assert sum(blocks) == m and max(blocks) <= MAX_KERNEL_M and len(set(blocks)) <= 2
    for M in range(1, MAX_KERNEL_M + 1):
        for itemsize in (4, 8):
            for nx in (1, 17, 100, 1000, 4096):
                nt, shared = _scan_threads(M, itemsize, nx)
                assert 32 <= nt <= 256 and shared <= _SHARED_BYTES


# --------------------------------------------------------------------------- #
# CuPy against the NumPy reference
# --------------------------------------------------------------------------- #
GPU_SHAPES = {
    "narrow": 17,        # nx < threads per block
    "odd": 1000,         # nx not a multiple of the thread count
    "wide": 4099,        # several columns per thread, ragged last chunk
}


def _gpu_compare(cupy_backend, data, m, reverse, tol=1e-10):
    xp = cupy_backend.xp
    args = sweep_args(data, reverse)
    ref = block_sweep(*args, m, reverse=reverse)
    got = block_sweep(*(xp.asarray(a) for a in args), m, reverse=reverse)
    assert isinstance(got, xp.ndarray) and got.dtype == ref.dtype
    got = cupy_backend.to_host(got)
    err = rel_err(got, ref)
    assert err < tol, f"relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 12, 16])
@pytest.mark.parametrize("width", sorted(GPU_SHAPES))
def test_cupy_matches_numpy_random(cupy_backend, width, m, reverse):
    nx = GPU_SHAPES[width]
    ny = m * 5
    rng = np.random.default_rng(1000 * m + nx + reverse)
    r, W, S, E, N, invd = random_data(ny, nx, rng)
    # garbage where the sweep must mask: the kernel must not rely on zeros there
    W, S = spoil_masked(W, S, m, False, np.nan)
    E, N = spoil_masked(E, N, m, True, np.nan)
    _gpu_compare(cupy_backend, (r, W, S, E, N, invd), m, reverse)


@pytest.mark.gpu
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8])
def test_cupy_ic_factor_contrast_1e6(cupy_backend, m, reverse):
    ny, nx = 12 * m, 700
    data = poisson_ic_data(ny, nx, m, 1e6, np.random.default_rng(m))
    _gpu_compare(cupy_backend, data, m, reverse)


@pytest.mark.gpu
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("m", [1, 2, 4, 8, 16])
def test_cupy_large_1024(cupy_backend, m, reverse):
    data = poisson_ic_data(1024, 1024, m, 1e6, np.random.default_rng(42))
    _gpu_compare(cupy_backend, data, m, reverse)


@pytest.mark.gpu
def test_cupy_out_float32_and_views(cupy_backend):
    xp = cupy_backend.xp
    ny, nx, m = 24, 300, 4
    data = random_data(ny, nx, np.random.default_rng(8))
    r, W, S, E, N, invd = data
    dr, dW, dS, dinvd = (xp.asarray(a) for a in (r, W, S, invd))
    ref = block_sweep(r, W, S, invd, m)
    out = xp.full((ny, nx), xp.nan)
    got = block_sweep(dr, dW, dS, dinvd, m, out=out)
    assert got is out
    assert rel_err(cupy_backend.to_host(out), ref) < 1e-10
    # the same out reused for the backward sweep
    ref_b = block_sweep(r, E, N, invd, m, reverse=True)
    block_sweep(dr, xp.asarray(E), xp.asarray(N), dinvd, m, reverse=True, out=out)
    assert rel_err(cupy_backend.to_host(out), ref_b) < 1e-10
    with pytest.raises(ValueError):
        block_sweep(dr, dW, dS, dinvd, m, out=dr)
    # non-contiguous device inputs
    big = xp.zeros((ny, 2 * nx)); big[:, ::2] = dW
    got = block_sweep(xp.asfortranarray(dr), big[:, ::2], dS, dinvd, m)
    assert rel_err(cupy_backend.to_host(got), ref) < 1e-10
    # float32
    d32 = tuple(a.astype(np.float32) for a in data)
    for reverse in (False, True):
        args = sweep_args(d32, reverse)
        ref32 = block_sweep(*args, m, reverse=reverse)
        got32 = block_sweep(*(xp.asarray(a) for a in args), m, reverse=reverse)
        assert got32.dtype == xp.float32
        assert rel_err(cupy_backend.to_host(got32).astype(np.float64), ref32) < 1e-5
