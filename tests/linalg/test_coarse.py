"""The coarse solve y = E^+ s of bubbleflow.linalg.deflation.coarse, dense and condensed, against pinv."""
import functools

import numpy as np
import pytest
import scipy.sparse as sp

from bubbleflow.compute.backend import get_backend
from bubbleflow.linalg.deflation.coarse import CoarseSolver
from bubbleflow.linalg.deflation.dense_inverses import gauss_jordan_inverse
from bubbleflow.linalg.deflation.graph_partition import partition_groups, separator_mask
from bubbleflow.linalg.deflation.labels import subdomain_labels
from bubbleflow.linalg.deflation.space import make_deflation
from bubbleflow.case.problem import bubbly_column

RTOL = 1e-10


# ---------------------------------------------------------------- matrices
def weighted_laplacian(n, a, b, w, shift=0.0):
    W = sp.coo_matrix((w, (a, b)), shape=(n, n))
    W = (W + W.T).tocsr()
    L = sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W
    return (L + shift * sp.eye(n)).tocsr()


@functools.lru_cache(maxsize=None)
def path_laplacian(k, seed=0):
    w = np.random.default_rng(seed).uniform(0.5, 2.0, k - 1)
    return weighted_laplacian(k, np.arange(k - 1), np.arange(1, k), w)


@functools.lru_cache(maxsize=None)
def grid_laplacian(nx, ny, seed=0, shift=0.0):
    """2D grid graph, edge weights 10^U(-3, 3): six orders of magnitude."""
    idx = np.arange(nx * ny).reshape(ny, nx)
    a = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    b = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    w = 10.0 ** np.random.default_rng(seed).uniform(-3, 3, a.size)
    return weighted_laplacian(nx * ny, a, b, w, shift)


NX, NY = 17, 13                 # k = 221


def tile_groups(nx, ny, tx, ty):
    j, i = np.divmod(np.arange(nx * ny), nx)
    return (j // ty) * 1000 + i // tx          # ids need not be contiguous


def strip_groups(nx, ny):
    """Columns 0-5 | column 6 | columns 7-: the middle group gets the largest id, so
    (one- and two-sided) it is all separator: a group with no interior."""
    i = np.arange(nx * ny) % nx
    return np.where(i < 6, 0, np.where(i == 6, 9, 1))


@functools.lru_cache(maxsize=None)
def real_coarse():
    """E of levelset_subdomains (16 x 16 blocks) on a 64 x 64 bubbly column, and groups
    from the subdomain positions (tiles of 4 x 4 blocks)."""
    A, b, phi = bubbly_column(64, 1e3)
    D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(16, 16))
    block = subdomain_labels(64, 64, 16, 16).ravel()
    block_of = np.zeros(D.k, dtype=np.int64)
    block_of[np.asarray(D.labels)] = block
    bj, bi = np.divmod(block_of, 16)
    return D.E.tocsr(), (bj // 4) * 4 + bi // 4


_INVERSES = {}


def reference(E, s, singular):
    """``pinv(E) @ s`` (``inv(E) @ s``); the inverse is computed once per matrix."""
    key = (id(E), singular)
    if key not in _INVERSES:                 # E is kept with it: its id stays unique
        A = E.toarray()
        _INVERSES[key] = (E, np.linalg.pinv(A, hermitian=True) if singular else np.linalg.inv(A))
    return _INVERSES[key][1] @ s


def solve(backend, solver, s):
    return backend.to_host(solver.solve(backend.xp.asarray(s)))


def assert_close(y, ref, rtol=RTOL):
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err < rtol, f"relative error {err:.2e}"


def rhs(k, seed=1):
    return np.random.default_rng(seed).standard_normal(k)     # not in range(E): tests the projection


# Solver settings on the 17 x 13 grid: dense, and condensed with the default
# partition, two-sided separators, explicit groups (tiles; a group with no
# interior; every unknown its own group; a single group).
GRID_CASES = {
    "dense": dict(),
    "condensed": dict(dense_limit=50),
    "condensed-small-groups": dict(dense_limit=50, group_size=24),
    "condensed-two-sided": dict(dense_limit=50, group_size=24, separator="two-sided"),
    "tiles": dict(dense_limit=50, groups=tile_groups(NX, NY, 5, 4)),
    "tiles-two-sided": dict(dense_limit=50, groups=tile_groups(NX, NY, 5, 4), separator="two-sided"),
    "strips-empty-interior": dict(dense_limit=50, groups=strip_groups(NX, NY)),
    "strips-two-sided": dict(dense_limit=50, groups=strip_groups(NX, NY), separator="two-sided"),
    "singletons": dict(dense_limit=50, groups=np.arange(NX * NY)),
    "singletons-two-sided": dict(dense_limit=50, groups=np.arange(NX * NY), separator="two-sided"),
    "one-group": dict(dense_limit=50, groups=np.zeros(NX * NY, dtype=int)),
}


# ---------------------------------------------------------------- accuracy
@pytest.mark.parametrize("kw", [dict(), dict(dense_limit=10, group_size=8),
                                dict(dense_limit=10, group_size=8, separator="two-sided")],
                         ids=["dense", "condensed", "condensed-two-sided"])
def test_path_graph(kw, backend):
    E = path_laplacian(60)
    c = CoarseSolver(E, True, backend, **kw)
    assert c.mode == ("dense" if not kw else "condensed") and c.n == 59 and c.k == 60
    s = rhs(60)
    y = solve(backend, c, s)
    assert_close(y, reference(E, s, True))
    assert abs(y.sum()) < 1e-12 * abs(y).sum()


@pytest.mark.parametrize("case", list(GRID_CASES))
def test_grid_singular(case, backend):
    E = grid_laplacian(NX, NY, seed=3)
    c = CoarseSolver(E, True, backend, **GRID_CASES[case])
    assert c.mode == ("dense" if case == "dense" else "condensed")
    s = rhs(E.shape[0])
    assert_close(solve(backend, c, s), reference(E, s, True))


@pytest.mark.parametrize("case", list(GRID_CASES))
def test_grid_nonsingular(case, backend):
    E = grid_laplacian(NX, NY, seed=4, shift=1e-2)
    c = CoarseSolver(E, False, backend, **GRID_CASES[case])
    assert c.n == c.k == E.shape[0]
    s = rhs(E.shape[0])
    assert_close(solve(backend, c, s), reference(E, s, False))


def test_condensed_structure():
    """Interiors of different groups are never coupled; the padding is right."""
    E = grid_laplacian(NX, NY, seed=3)
    be = get_backend("numpy")
    c = CoarseSolver(E, True, be, dense_limit=50, groups=strip_groups(NX, NY))
    # Column 6 is the separator; the largest interior is columns 7..16 less the
    # grounded (last) unknown.
    assert c.n_separator == NY and c.n_groups == 2
    assert c.block_size == (NX - 7) * NY - 1 and c.separator_width == NY
    c2 = CoarseSolver(E, True, be, dense_limit=50, groups=np.arange(NX * NY), separator="two-sided")
    assert c2.n_groups == 0 and c2.n_separator == c2.n
    M = E[:-1, :-1].tocsr()
    for sep in ("one-sided", "two-sided"):
        g = partition_groups(M, 24)
        mask = separator_mask(M, g, sep)
        C = M.tocoo()
        inner = ~mask[C.row] & ~mask[C.col]
        assert (g[C.row[inner]] == g[C.col[inner]]).all()


@pytest.mark.parametrize("kw", [dict(), dict(dense_limit=50, group_size=32), "tiles"],
                         ids=["dense", "condensed", "condensed-subdomain-groups"])
def test_real_coarse_matrix(kw, backend):
    E, groups = real_coarse()
    if kw == "tiles":
        kw = dict(dense_limit=50, groups=groups)
    if backend.name == "cupy":
        E_in = backend.sparse.csr_matrix(E)          # a device matrix is accepted too
    else:
        E_in = E
    c = CoarseSolver(E_in, True, backend, **kw)
    assert c.k == E.shape[0] > 256
    s = rhs(c.k, seed=5)
    assert_close(solve(backend, c, s), reference(E, s, True))


# ---------------------------------------------------------------- API
@pytest.mark.parametrize("kw", [dict(), dict(dense_limit=50, group_size=24)], ids=["dense", "condensed"])
def test_out_and_input_untouched(kw, backend):
    xp = backend.xp
    E = grid_laplacian(NX, NY, seed=3)
    c = CoarseSolver(E, True, backend, **kw)
    s_host = rhs(c.k)
    ref = reference(E, s_host, True)
    s = xp.asarray(s_host)
    out = xp.full(c.k, np.nan)
    y = c.solve(s, out=out)
    assert y is out
    assert_close(backend.to_host(out), ref)
    np.testing.assert_array_equal(backend.to_host(s), s_host)
    y2 = c.solve(s)
    assert y2 is not s
    np.testing.assert_array_equal(backend.to_host(y2), backend.to_host(out))
    # float32 in, float32 out; an out= of another dtype; out aliasing s.
    y32 = c.solve(s.astype(np.float32))
    assert y32.dtype == np.float32
    assert_close(backend.to_host(y32).astype(np.float64), ref, rtol=1e-5)
    out32 = xp.zeros(c.k, dtype=np.float32)
    assert c.solve(s, out=out32) is out32
    assert_close(backend.to_host(out32).astype(np.float64), ref, rtol=1e-5)
    t = s.copy()
    c.solve(t, out=t)
    assert_close(backend.to_host(t), ref)


def test_single_unknown(backend):
    xp = backend.xp
    c = CoarseSolver(sp.csr_matrix(np.zeros((1, 1))), True, backend)
    assert c.mode == "empty" and c.n == 0 and c.nbytes == 0
    np.testing.assert_array_equal(backend.to_host(c.solve(xp.asarray([3.0]))), [0.0])
    out = xp.asarray([7.0])
    assert c.solve(xp.asarray([3.0]), out=out) is out
    np.testing.assert_array_equal(backend.to_host(out), [0.0])
    c = CoarseSolver(sp.csr_matrix([[4.0]]), False, backend)
    assert c.mode == "dense" and c.n == 1
    np.testing.assert_allclose(backend.to_host(c.solve(xp.asarray([3.0]))), [0.75], rtol=1e-15)


def test_attributes_and_bandwidth_model(backend):
    E = grid_laplacian(24, 24, seed=0)
    d = CoarseSolver(E, True, backend, dense_limit=1000)
    assert d.mode == "dense" and d.dense and d.nbytes == 8 * 576 ** 2
    assert d.setup_seconds > 0
    c = CoarseSolver(E, True, backend, dense_limit=100, group_size=64)
    assert c.mode == "condensed" and not c.dense and c.setup_seconds > 0
    G, m, nS, w = c.n_groups, c.block_size, c.n_separator, c.separator_width
    assert 0 < nS < 0.35 * c.n                   # compact groups: a small separator
    assert c.nbytes >= 8 * (G * m * m + G * m * w + nS * nS)
    assert c.nbytes < d.nbytes
    assert c.groups.shape == (c.n,)
    assert "condensed" in repr(c)


def test_the_dense_limit_is_the_backends_unless_given(backend):
    """Without ``dense_limit`` the backend's crossover decides: the host's
    (NumPy) lies far below a GPU's, where the dense inverse's set-up is
    cheap; a given limit overrides it."""
    from bubbleflow.linalg.deflation.coarse import DENSE_LIMIT, DENSE_LIMITS, dense_limit_of

    assert DENSE_LIMITS["numpy"] < DENSE_LIMIT
    limit = dense_limit_of(backend)
    assert limit == DENSE_LIMITS.get(backend.name, DENSE_LIMIT) and dense_limit_of(backend, 7) == 7
    E = grid_laplacian(24, 24, seed=0)               # 575 grounded unknowns
    mode = CoarseSolver(E, True, backend).mode
    assert mode == ("dense" if 575 <= limit else "condensed")


def test_errors(backend, monkeypatch):
    xp = backend.xp
    E = grid_laplacian(NX, NY, seed=3)
    c = CoarseSolver(E, True, backend, dense_limit=50, group_size=24)
    with pytest.raises(ValueError):
        c.solve(xp.zeros(c.k - 1))
    with pytest.raises(ValueError):
        CoarseSolver(E, True, backend, dense_limit=50, groups=np.zeros(10))
    with pytest.raises(ValueError):
        CoarseSolver(E, True, backend, separator="both")
    indefinite = (E - 1.0 * sp.eye(E.shape[0])).tocsr()
    for kw in (dict(), dict(dense_limit=50, group_size=24)):
        with pytest.raises(np.linalg.LinAlgError):
            CoarseSolver(indefinite, False, backend, **kw)
    monkeypatch.setattr(CoarseSolver, "separator_warn", 5)
    with pytest.warns(RuntimeWarning, match="separator"):
        c = CoarseSolver(E, True, backend, dense_limit=50, group_size=24)
    s = rhs(c.k)
    assert_close(solve(backend, c, s), reference(E, s, True))


def test_solve_does_not_synchronise(backend):
    """On CuPy, solve must only queue work (no .get(), float(), ...)."""
    if backend.name != "cupy":
        pytest.skip("host synchronisation is a CuPy matter")
    import cupyx

    xp = backend.xp
    E, groups = real_coarse()
    s = xp.asarray(rhs(E.shape[0]))
    for kw in (dict(), dict(dense_limit=50, group_size=32)):
        c = CoarseSolver(E, True, backend, **kw)
        out = xp.empty_like(s)
        with cupyx.allow_synchronize(False):
            c.solve(s, out=out)
            y = c.solve(s)
        assert_close(backend.to_host(y), reference(E, backend.to_host(s), True))


def _spd_batch(G, m, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((G, m, m))
    return X @ X.transpose(0, 2, 1) + m * np.eye(m)


def test_gauss_jordan_reference_against_numpy_inv():
    B = _spd_batch(3, 17)
    np.testing.assert_allclose(gauss_jordan_inverse(B), np.linalg.inv(B), rtol=1e-12, atol=1e-14)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 64, 150])
def test_gauss_jordan_kernel_against_reference(m, cupy_backend):
    """The shared-memory kernel (150: over 48 KiB, opt-in shared memory)."""
    import cupy as cp

    from bubbleflow.linalg.deflation.dense_inverses import batched_spd_inverse

    B = _spd_batch(4, m, seed=m)
    got = cp.asnumpy(batched_spd_inverse(get_backend("cupy"), cp.asarray(B)))
    ref = gauss_jordan_inverse(B)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
    np.testing.assert_allclose(got, np.linalg.inv(B), rtol=1e-10, atol=1e-13)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["real", "real-nonsingular", "grid-tiles", "grid-two-sided",
                                  "grid-singletons"])
def test_raw_condensed_kernels_against_backend_twin(case, cupy_backend):
    """The five-kernel condensed solve against the library-call path (its twin,
    what NumPy runs) and against pinv: singular and non-singular E, one- and
    two-sided separators, groups of one unknown."""
    import cupy as cp

    backend = get_backend("cupy")
    if case.startswith("real"):
        E, groups = real_coarse()
        singular = case == "real"
        if not singular:
            E = (E + 1e-2 * sp.eye(E.shape[0])).tocsr()
        kw = dict(dense_limit=50, groups=groups)
    else:
        E, singular = grid_laplacian(NX, NY, seed=3), True
        kw = dict(dense_limit=50, **{
            "grid-tiles": dict(groups=tile_groups(NX, NY, 5, 4)),
            "grid-two-sided": dict(group_size=24, separator="two-sided"),
            "grid-singletons": dict(groups=np.arange(NX * NY)),
        }[case])
    c = CoarseSolver(E, singular, backend, **kw)
    assert c.mode == "condensed" and c.raw_solve is not None
    s_host = rhs(c.k, seed=7)
    s = cp.asarray(s_host)
    raw = c.solve(s, out=cp.full(c.k, np.nan))
    twin = c._solve_condensed(s.copy(), None)
    np.testing.assert_allclose(cp.asnumpy(raw), cp.asnumpy(twin), rtol=0,
                               atol=1e-12 * float(abs(twin).max()))
    assert_close(cp.asnumpy(raw), reference(E, s_host, singular))
    np.testing.assert_array_equal(cp.asnumpy(s), s_host)          # input untouched


@pytest.mark.parametrize("values", [
    np.array([5, 3, 5, 0, 3, 9]),                  # small non-negative: occupancy table
    np.array([7000, 12, 7000, 3]),                 # large range: np.unique
    np.array([-2, 4, -2, 1]),                      # negative: np.unique
    np.zeros(0, dtype=np.int64),
])
def test_set_up_index_helpers_equal_numpy_unique(values):
    from bubbleflow.linalg.deflation.condensed_layout import _dense_ids, _sorted_unique

    np.testing.assert_array_equal(_dense_ids(values),
                                  np.unique(values, return_inverse=True)[1].ravel())
    np.testing.assert_array_equal(_sorted_unique(values), np.unique(values))


def test_leading_entries_equal_scipy_slicing():
    """``_leading_entries`` (the entries of E[:n, :n] read from E's arrays)
    against SciPy's slicing, explicit zeros dropped, in CSR order."""
    from bubbleflow.linalg.deflation.coarse import _leading_entries

    rng = np.random.default_rng(4)
    E = sp.random(40, 40, density=0.2, random_state=5, format="csr")
    E = (E + E.T).tocsr()
    E.data[rng.random(E.nnz) < 0.1] = 0.0           # explicit zeros
    E.sort_indices()
    for n in (40, 39, 17, 0):
        r, c, v = _leading_entries(E, n)
        ref = E[:n, :n].tocsr()
        ref.eliminate_zeros()
        ref = ref.tocoo()
        assert r.dtype == c.dtype == np.int64
        np.testing.assert_array_equal(r, ref.row)
        np.testing.assert_array_equal(c, ref.col)
        np.testing.assert_array_equal(v, ref.data)
