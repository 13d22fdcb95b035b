"""Deflation space: labels, Z^T r, A Z, E and the exact singular coarse solve."""
import numpy as np
import pytest

from bubbleflow.linalg.deflation.labels import levelset_subdomain_labels, stripe_labels, subdomain_labels
from bubbleflow.linalg.deflation.space import Deflation, make_deflation
from bubbleflow.case.problem import bubbly_column


def dense_Z(labels, k):
    Z = np.zeros((labels.size, k))
    Z[np.arange(labels.size), labels] = 1.0
    return Z


def test_label_layouts():
    lab = subdomain_labels(8, 12, 3, 2)
    assert lab.shape == (8, 12) and lab.max() == 5
    assert (lab[:4, :4] == 0).all() and (lab[4:, 8:] == 5).all()
    st = stripe_labels(8, 12, 4)
    assert (st[2:4] == 1).all() and st.max() == 3
    phi = np.ones((8, 12))
    phi[1:3, 1:3] = -1
    ls = levelset_subdomain_labels(phi, 3, 2)
    assert set(np.unique(ls)) == {0, 1, 2, 4, 6, 8, 10}


@pytest.mark.parametrize("kind", ["subdomains", "stripes", "levelset_subdomains"])
def test_pieces_match_dense_definitions(kind, backend):
    A, b, phi = bubbly_column(32, 1e3, backend=backend)
    D = make_deflation(kind, A, phi=phi, subdomains=(4, 4), stripes=8)
    labels = backend.to_host(D.labels)
    Z = dense_Z(labels, D.k)
    C = A.to_scipy().toarray()
    if kind == "levelset_subdomains":
        assert D.k > 16                      # blocks cut by bubbles and the surface
    rng = np.random.default_rng(0)
    r = rng.standard_normal(A.shape[0])
    xp = backend.xp
    np.testing.assert_allclose(backend.to_host(D.restrict(xp.asarray(r))), Z.T @ r, rtol=1e-12, atol=1e-12)
    y = rng.standard_normal(D.k)
    np.testing.assert_allclose(backend.to_host(D.prolong(xp.asarray(y))), Z @ y)
    AZ = C @ Z
    np.testing.assert_allclose(backend.to_host(D.AZ @ xp.asarray(y)), AZ @ y, rtol=1e-10, atol=1e-10 * abs(AZ @ y).max())
    E = Z.T @ C @ Z
    np.testing.assert_allclose(D.E.toarray(), E, rtol=1e-12, atol=1e-12 * abs(E).max())
    # E is singular (constants); the coarse solve is E^+ on range(E).
    s = rng.standard_normal(D.k)
    s -= s.mean()
    yc = backend.to_host(D.coarse.solve(xp.asarray(s)))
    assert abs(yc.mean()) < 1e-10 * abs(yc).max()
    np.testing.assert_allclose(E @ yc, s, atol=1e-8 * abs(s).max())
    k = D.k
    bordered = np.block([[E, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
    ref = np.linalg.solve(bordered, np.r_[s, 0.0])[:k]      # E^+ s: the zero-mean solution
    np.testing.assert_allclose(yc, ref, rtol=1e-6, atol=1e-8 * abs(yc).max())


def test_large_coarse_system_uses_sparse_factorisation():
    A, b, phi = bubbly_column(64, 1e3)
    dense = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(16, 16), dense_limit=2048)
    sparse = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(16, 16), dense_limit=10)
    assert dense.coarse.dense and not sparse.coarse.dense
    s = np.random.default_rng(2).standard_normal(dense.k)
    np.testing.assert_allclose(sparse.coarse.solve(s), dense.coarse.solve(s), rtol=1e-8, atol=1e-10)


def test_deflation_of_a_user_matrix_with_labels():
    """A non-singular user matrix: E is factorised as it is."""
    import scipy.sparse as sp

    A = sp.diags([-1, 2.5, -1], [-1, 0, 1], shape=(40, 40), format="csr")
    D = Deflation(A, np.arange(40) // 10)
    assert D.k == 4 and not D.coarse.singular
    s = np.arange(4.0)
    E = D.E.toarray()
    np.testing.assert_allclose(E @ D.coarse.solve(s), s, atol=1e-12)


def test_deferred_factorisation_equals_default(backend):
    """``factorise=False`` then :meth:`Deflation.factorise`: the same coarse solver."""
    A, b, phi = bubbly_column(32, 1e3, backend=backend)
    D1 = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(4, 4))
    D2 = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(4, 4), factorise=False)
    assert D2.coarse is None
    assert D2.factorise() is D2 and D2.coarse is not None and D2.factorise().coarse is D2.coarse
    s = backend.xp.asarray(np.random.default_rng(0).standard_normal(D1.k))
    np.testing.assert_array_equal(backend.to_host(D1.coarse.solve(s)),
                                  backend.to_host(D2.coarse.solve(s)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n,blocks", [(64, (4, 4)), (96, (8, 2)), (48, (1, 3))])
def test_tile_part_sums_kernel_against_array_twin(n, blocks, dtype, cupy_backend):
    """The one-kernel block sums of ``restrict`` on the GPU against the array
    code (its twin), on blocks cut into liquid and gas, square and not."""
    import cupy as cp

    from bubbleflow.linalg.deflation.kernels import tile_part_sums

    A, b, phi = bubbly_column(n, 1e3, backend="cupy")
    D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=blocks)
    assert D.block_shape is not None and bool((D.part != 0).any())
    r = cp.asarray(np.random.default_rng(5).standard_normal(n * n)).astype(dtype)
    got = tile_part_sums(r, D.part, D.block_shape)
    twin = D._block_sums(r)
    assert got.dtype == r.dtype
    tol = 1e-12 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(twin), rtol=tol,
                               atol=tol * float(abs(twin).max()))
    np.testing.assert_array_equal(cp.asnumpy(D.restrict(r)), cp.asnumpy(got[D.owner]))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("which", ["AZT", "AZ"])
def test_csr_matvec_kernel_against_scipy_and_repeatable(which, dtype, cupy_backend):
    """The fixed-order CSR product (one block per long row of ``(A Z)^T``,
    one thread per short row of ``A Z``, rows without entries too) against
    SciPy's, and bit for bit the same on every call."""
    import cupy as cp

    from bubbleflow.compute.sparse import CSR_BLOCK_ROW_NNZ, csr_matvec

    A, b, phi = bubbly_column(256, 1e3, backend="cupy")
    D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(4, 4))
    M = getattr(D, which)
    assert (M.nnz >= CSR_BLOCK_ROW_NNZ * M.shape[0]) == (which == "AZT")
    assert bool((cp.diff(M.indptr) == 0).any()) or which == "AZT"
    x = cp.asarray(np.random.default_rng(7).standard_normal(M.shape[1])).astype(dtype)
    got = csr_matvec(M.astype(dtype), x)
    ref = M.get().astype(np.float64) @ cp.asnumpy(x).astype(np.float64)
    assert got.dtype == np.dtype(dtype) and got.shape == (M.shape[0],)
    tol = 1e-12 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(cp.asnumpy(got), ref, rtol=tol, atol=tol * float(abs(ref).max()))
    for _ in range(10):
        np.testing.assert_array_equal(cp.asnumpy(csr_matvec(M.astype(dtype), x)),
                                      cp.asnumpy(got))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["adef2", "def1"])
def test_restarted_dpcg_is_reproducible(variant, cupy_backend):
    """A solve that restarts (its recursive residual reaches the tolerance
    before the true one) is the same bit for bit twice: the restart's
    deflation products are summed in a fixed order."""
    from bubbleflow import dpcg

    A, b, phi = bubbly_column(256, 1e3, backend="cupy")
    D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(4, 4))
    runs = [dpcg(A, b, rtol=3e-10, M="jacobi", deflation=D, variant=variant, maxiter=3000)
            for _ in range(3)]
    assert len(runs[0][1].true_residual_checks) >= 2          # it did restart
    for x, rec in runs[1:]:
        np.testing.assert_array_equal(_to_host(x), _to_host(runs[0][0]))
        np.testing.assert_array_equal(rec.residual_history, runs[0][1].residual_history)


def _to_host(a):
    import cupy as cp

    return cp.asnumpy(a)
