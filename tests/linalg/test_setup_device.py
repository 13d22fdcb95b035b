"""The per-step set-up built on the backend against the old host-built pieces.

Operator diagonals, host exports, block IC pivots, deflation labels, ``A Z``
and ``E``: each backend-built piece is compared with a host (NumPy/SciPy)
construction written the way the code did it before the set-up moved to the
backend.  Runs on CuPy with ``pytest --backend cupy``.
"""
import numpy as np
import pytest
import scipy.sparse as sp

from bubbleflow.linalg.deflation.labels import levelset_subdomain_labels, stripe_labels, subdomain_labels
from bubbleflow.linalg.deflation.space import Deflation, make_deflation
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import Circle, build_levelset, phase_fields
from bubbleflow.operators.poisson import PoissonOperator, assemble_pressure_operator
from bubbleflow.linalg.precond import make_preconditioner
from bubbleflow.linalg.precond.block_ic import (BlockIC, block_ic_pivots, block_ic_pivots_scan,
                                        moebius_scan)


def column(nx, ny, contrast=1e3, rule="arithmetic"):
    """A bubbly column on an ``nx x ny`` grid (host): grid, phi, phases."""
    grid = Grid(nx, ny, lx=nx / max(nx, ny), ly=ny / max(nx, ny))
    circles = [Circle(0.3 * grid.lx, 0.35 * grid.ly, 0.15 * grid.ly),
               Circle(0.7 * grid.lx, 0.55 * grid.ly, 0.12 * grid.ly)]
    phi = build_levelset(grid, 0.8 * grid.ly, circles)
    return grid, phi, phase_fields(grid, phi, 1000.0, 1000.0 / contrast, 1e-3, 1e-5, rule=rule)


def old_diagonals(beta_x, beta_y, hx, hy):
    """The host assembly the operator used before (NumPy, float64)."""
    cx, cy = beta_x / hx ** 2, beta_y / hy ** 2
    ny, nx = cx.shape[0], cx.shape[1] + 1
    S, W, E, N = (np.zeros((ny, nx)) for _ in range(4))
    W[:, 1:] = -cx
    E[:, :-1] = -cx
    S[1:, :] = -cy
    N[:-1, :] = -cy
    return S, W, -(S + W + E + N), E, N


def old_csr(diags, dtype=np.float64):
    """The host CSR matrix built from the diagonals as ``to_scipy`` did before."""
    S, W, C, E, N = diags
    ny, nx = C.shape
    idx = np.arange(nx * ny).reshape(ny, nx)
    parts = [(C, idx, idx), (W[:, 1:], idx[:, 1:], idx[:, :-1]), (E[:, :-1], idx[:, :-1], idx[:, 1:]),
             (S[1:, :], idx[1:, :], idx[:-1, :]), (N[:-1, :], idx[:-1, :], idx[1:, :])]
    vals, rows, cols = (np.concatenate([p[i].ravel() for p in parts]) for i in range(3))
    return sp.coo_matrix((vals, (rows, cols)), shape=(nx * ny,) * 2).tocsr().astype(dtype)


def old_deflation(C, labels):
    """The host construction of the deflation pieces used before."""
    _, lab = np.unique(np.asarray(labels).ravel(), return_inverse=True)
    lab = lab.ravel()
    k = int(lab.max()) + 1
    n = lab.size
    Z = sp.csr_matrix((np.ones(n), (np.arange(n), lab)), shape=(n, k))
    AZ = (C @ Z).tocsr()
    E = (Z.T @ AZ).tocsr()
    return lab, k, AZ, 0.5 * (E + E.T)


def host(a):
    """A NumPy array or SciPy matrix from a NumPy/CuPy array or SciPy/cupyx matrix."""
    if sp.issparse(a):
        return a
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return a.get()
    return np.asarray(a)


# --------------------------------------------------------------------------- operator
@pytest.mark.parametrize("shape", [(13, 9), (16, 16), (1, 5), (6, 1)])
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_operator_built_on_the_backend_equals_host_assembly(shape, storage, dtype, backend):
    nx, ny = shape
    rng = np.random.default_rng(nx * 100 + ny)
    bx = 10.0 ** rng.uniform(-3, 0, (ny, nx - 1))
    by = 10.0 ** rng.uniform(-3, 0, (ny - 1, nx))
    hx, hy = 1.0 / nx, 0.7 / ny
    xp = backend.xp
    ref = old_diagonals(bx, by, hx, hy)
    if storage == "matrix_free":
        # Only the couplings are stored (in the operator's dtype); the entries are
        # made from them, so in float32 from the rounded couplings.
        cx, cy = ((b / h ** 2).astype(dtype).astype(np.float64) for b, h in ((bx, hx), (by, hy)))
        ref = old_diagonals(cx, cy, 1.0, 1.0)
    for inputs in ((bx, by), (xp.asarray(bx), xp.asarray(by))):     # host or backend inputs
        A = PoissonOperator(*inputs, hx, hy, backend=backend, dtype=dtype, storage=storage)
        assert "diagonals_host" not in A.__dict__                  # no host copy made
        ents = A.entries()
        assert all(isinstance(d, xp.ndarray) and d.dtype == dtype for d in ents)
        for d, r in zip(ents, ref):
            np.testing.assert_array_equal(host(d), r.astype(dtype))
        cx, cy = A.couplings()
        assert isinstance(cx, xp.ndarray) and isinstance(cy, xp.ndarray)
        np.testing.assert_array_equal(host(cx), (bx / hx ** 2).astype(dtype))
        np.testing.assert_array_equal(host(cy), (by / hy ** 2).astype(dtype))
        diag = A.diagonal()
        assert isinstance(diag, xp.ndarray)
        np.testing.assert_array_equal(host(diag), ref[2].ravel().astype(dtype))
        assert A.norm_inf() == pytest.approx(2 * float(ref[2].max().astype(dtype)), rel=1e-7)
        C = A.to_scipy()
        R = old_csr(ref, dtype)
        assert C.dtype == dtype and (C != R).nnz == 0
        assert "diagonals_host" in A.__dict__                      # made lazily, kept
        Bh = host(A.to_backend_sparse())
        assert (Bh != R).nnz == 0 and Bh.nnz == R.nnz and Bh.has_sorted_indices
        for a, r in zip(A.diagonals_host, ref):
            np.testing.assert_array_equal(a, r.astype(dtype))


def test_operator_from_the_flow_phases_stays_on_the_backend(backend):
    """Face densities already on the backend (as in a flow step): no transfer needed."""
    grid, phi, ph = column(24, 20)
    xp = backend.xp
    A = PoissonOperator(1.0 / xp.asarray(ph.rho_x), 1.0 / xp.asarray(ph.rho_y), grid.hx, grid.hy,
                        backend=backend)
    B = assemble_pressure_operator(grid, ph, backend=backend)
    for a, b in zip(A.entries(), B.entries()):
        np.testing.assert_array_equal(host(a), host(b))


# --------------------------------------------------------------------------- block IC pivots
def ic_inputs(nx, ny, m, contrast=1e6, seed=0, rule="arithmetic"):
    grid, phi, ph = column(nx, ny, contrast, rule)
    S, W, C, E, N = old_diagonals(1.0 / ph.rho_x, 1.0 / ph.rho_y, grid.hx, grid.hy)
    S = S.copy()
    S[::m, :] = 0.0
    return C, W, S


@pytest.mark.parametrize("nx,ny,m", [(12, 8, 2), (10, 8, 4), (7, 6, 1), (65, 12, 3), (100, 16, 2),
                                     (1, 4, 2), (2, 4, 1), (9, 24, 8), (64, 64, 2)])
@pytest.mark.parametrize("contrast", [1.0, 1e3, 1e6])
def test_block_ic_pivot_scan_equals_reference(nx, ny, m, contrast, backend):
    C, W, S = ic_inputs(nx, ny, m, contrast)
    ref = block_ic_pivots(C, W, S, m)
    xp = backend.xp
    got = block_ic_pivots_scan(xp.asarray(C), xp.asarray(W), xp.asarray(S), m)
    assert isinstance(got, xp.ndarray) and got.dtype == np.float64
    np.testing.assert_allclose(host(got), ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("chunk", [2, 3, 8])
def test_block_ic_pivot_scan_random_couplings_every_length(chunk, backend):
    """Lengths 1..70 (padding, 1 to 3 recursion levels), random couplings over 3 decades."""
    rng = np.random.default_rng(chunk)
    xp = backend.xp
    for nx in list(range(1, 20)) + [31, 32, 33, 64, 65, 70]:
        ny, m = 6, 2
        cx = 10.0 ** rng.uniform(-3, 0, (ny, nx - 1))
        cy = 10.0 ** rng.uniform(-3, 0, (ny - 1, nx))
        S, W, C, E, N = old_diagonals(cx, cy, 1.0, 1.0)
        S[::m] = 0.0
        ref = block_ic_pivots(C, W, S, m)
        got = block_ic_pivots_scan(*(xp.asarray(a) for a in (C, W, S)), m, chunk=chunk)
        np.testing.assert_allclose(host(got), ref, rtol=1e-12, atol=0)


def test_moebius_scan_equals_sequential_composition(backend):
    """The inclusive scan of general maps (q != 0 at the start) against a plain loop."""
    rng = np.random.default_rng(5)
    rows, n = 3, 41
    w2 = rng.uniform(0.1, 1.0, (rows, n)) ** 2
    c = 2.5 + rng.uniform(0, 1, (rows, n))       # c > 2 max|w|: d stays > 1, s > 0
    r0 = np.zeros((rows, n))
    xp = backend.xp
    p, q, r = (xp.asarray(a.copy()) for a in (c, w2, r0))
    moebius_scan(p, q, r, chunk=4)
    P, Q, R = (host(a) for a in (p, q, r))
    for x in (1.7, 3.0, 50.0):                   # F_i(x) equals i+1 steps of d <- c - w^2/d
        d = np.full(rows, x)
        for i in range(n):
            d = c[:, i] - w2[:, i] / d
            np.testing.assert_allclose(P[:, i] - Q[:, i] / (x + R[:, i]), d, rtol=1e-13)


@pytest.mark.parametrize("m", [1, 2, 4])
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_block_ic_built_on_backend_equals_host_built(m, storage, backend):
    grid, phi, ph = column(20, 16, 1e6)
    A = assemble_pressure_operator(grid, ph, backend=backend, storage=storage)
    M = make_preconditioner("block_ic", A, block_lines=m)
    S, W, C, E, N = old_diagonals(1.0 / ph.rho_x, 1.0 / ph.rho_y, grid.hx, grid.hy)
    S[::m, :] = 0.0
    N[m - 1::m, :] = 0.0
    d = block_ic_pivots(C, W, S, m)
    xp = backend.xp
    assert isinstance(M.pivots, xp.ndarray)
    np.testing.assert_allclose(host(M.pivots), d, rtol=1e-12)
    np.testing.assert_allclose(host(M.inv_pivots), 1.0 / d, rtol=1e-12)
    for got, ref in ((M.W, W), (M.S, S), (M.E, E), (M.N, N)):
        np.testing.assert_array_equal(host(got), ref)


def test_block_ic_pivot_check(backend):
    grid, phi, ph = column(8, 8)
    A = assemble_pressure_operator(grid, ph, backend=backend)
    A.diagonals[2][3, 3] = -1.0                      # not an M-matrix any more
    with pytest.raises(FloatingPointError, match="non-positive pivot"):
        BlockIC(A, block_lines=2, check_pivots=True)


# --------------------------------------------------------------------------- deflation
CASES = [  # nx, ny, kind, (px, py), stripes
    (32, 32, "subdomains", (4, 4), 8),
    (30, 20, "subdomains", (4, 3), 8),           # blocks do not tile the grid
    (32, 32, "levelset_subdomains", (4, 4), 8),
    (30, 21, "levelset_subdomains", (4, 5), 8),
    (40, 24, "levelset_subdomains", (40, 1), 8),  # one-column blocks
    (32, 32, "stripes", (4, 4), 8),
    (17, 23, "stripes", (4, 4), 5),
    (16, 8, "subdomains", (1, 1), 4),            # one vector: E = [0]
]


def reference_labels(kind, phi, px, py, stripes):
    ny, nx = phi.shape
    if kind == "subdomains":
        return subdomain_labels(ny, nx, px, py)
    if kind == "stripes":
        return stripe_labels(ny, nx, stripes)
    return 2 * subdomain_labels(ny, nx, px, py) + (phi < 0)


def check_pieces(D, backend, C, labels_ref):
    lab, k, AZ, E = old_deflation(C, labels_ref)
    xp = backend.xp
    assert D.k == k and D.n_vectors == k
    assert isinstance(D.labels, xp.ndarray) and D.labels.dtype in (np.int64, np.int32)
    np.testing.assert_array_equal(host(D.labels), lab)
    AZd, AZTd = host(D.AZ), host(D.AZT)
    assert AZd.shape == AZ.shape and AZTd.shape == AZ.T.shape
    # Row by row against the row's diagonal: the host product's rounding scale
    # (its rows of uncut cells hold rounding noise instead of exact zeros).
    assert (sp.diags(1.0 / C.diagonal()) @ abs(AZd - AZ)).max() <= 1e-12
    assert (AZTd != AZd.T).nnz == 0
    assert AZd.has_sorted_indices and AZTd.has_sorted_indices
    Ed = D.E
    assert sp.issparse(Ed) and Ed.shape == (k, k)
    Eb = host(D.E_backend)
    assert (Eb != Ed).nnz == 0
    assert (Ed != Ed.T).nnz == 0                                 # exactly symmetric
    # The host product sums whole rows of A: rounding noise up to eps * sum(diag A).
    assert abs(Ed - E).max() <= 1e-12 * abs(E).max() + 1e-14 * C.diagonal().sum()
    return AZd, AZ


@pytest.mark.parametrize("nx,ny,kind,blocks,stripes", CASES)
def test_deflation_built_on_backend_equals_host_built(nx, ny, kind, blocks, stripes, backend):
    grid, phi, ph = column(nx, ny, 1e6)
    A = assemble_pressure_operator(grid, ph, backend=backend)
    C = A.to_scipy()
    xp = backend.xp
    for phi_in in (phi, xp.asarray(phi)):                           # host or backend phi
        D = make_deflation(kind, A, phi=phi_in, subdomains=blocks, stripes=stripes)
        labels_ref = reference_labels(kind, phi, *blocks, stripes)
        AZd, AZ = check_pieces(D, backend, C, labels_ref)
        # Only cells with a cut face (a neighbour of another label) have entries in A Z.
        L = labels_ref
        cut = np.zeros(L.shape, bool)
        cut[:, 1:] |= L[:, 1:] != L[:, :-1]
        cut[:, :-1] |= L[:, 1:] != L[:, :-1]
        cut[1:, :] |= L[1:, :] != L[:-1, :]
        cut[:-1, :] |= L[1:, :] != L[:-1, :]
        np.testing.assert_array_equal(np.diff(AZd.indptr) > 0, cut.ravel())
        on_cut = AZ[np.flatnonzero(cut.ravel())]
        on_cut.eliminate_zeros()
        assert AZd.nnz == on_cut.nnz            # the host product's entries on those rows
        assert D.coarse.singular


@pytest.mark.parametrize("nx,ny,kind,blocks,stripes", CASES)
def test_deflation_layout_attributes(nx, ny, kind, blocks, stripes, backend):
    grid, phi, ph = column(nx, ny, 1e3)
    A = assemble_pressure_operator(grid, ph, backend=backend)
    D = make_deflation(kind, A, phi=phi, subdomains=blocks, stripes=stripes)
    px, py = (1, stripes) if kind == "stripes" else blocks
    block = subdomain_labels(ny, nx, px, py)
    gas = (phi < 0) if kind == "levelset_subdomains" else np.zeros(phi.shape, bool)
    lab = host(D.labels).reshape(ny, nx)
    groups = host(D.groups)
    assert groups.dtype == np.int32 and groups.shape == (D.k,)
    np.testing.assert_array_equal(groups[lab], block)               # the block of every vector
    if nx % px or ny % py:
        assert D.block_shape is None and D.part is None and D.lut is None
        return
    assert D.block_shape == (ny // py, nx // px)
    part = host(D.part)
    assert part.dtype == np.int8 and part.shape == (ny, nx)
    np.testing.assert_array_equal(part, gas.astype(np.int8))
    lut = host(D.lut)
    assert lut.dtype == np.int32 and lut.shape == (px * py, 2)
    ref = np.full((px * py, 2), -1)
    ref[block.ravel(), gas.ravel().astype(int)] = lab.ravel()
    np.testing.assert_array_equal(lut, ref)


def test_arbitrary_labels_generic_and_face_paths_agree(backend):
    """Labels given by hand (negative, sparse, huge values: the ``unique`` path, and
    small ones: the occupancy path) for the grid operator (cut faces) and for its
    CSR matrix (sparse products): both equal the host construction."""
    grid, phi, ph = column(18, 14, 1e6)
    A = assemble_pressure_operator(grid, ph, backend=backend)
    C = A.to_scipy()
    rng = np.random.default_rng(3)
    base = subdomain_labels(14, 18, 3, 2) * 2 + (phi < 0)
    for labels in (base * 7 + 3, base - 5, base * 10 ** 12, rng.integers(0, 6, size=(14, 18))):
        for op in (A, A.to_backend_sparse()):
            D = Deflation(op, backend.xp.asarray(labels))
            assert D.groups is None and D.block_shape is None
            check_pieces(D, backend, C, labels)
            assert D.coarse.singular


def test_label_functions_run_on_the_backend(backend):
    xp = backend.xp
    np.testing.assert_array_equal(host(subdomain_labels(7, 9, 3, 2, xp=xp)),
                                  subdomain_labels(7, 9, 3, 2))
    np.testing.assert_array_equal(host(stripe_labels(7, 9, 3, xp=xp)), stripe_labels(7, 9, 3))
    phi = np.random.default_rng(0).standard_normal((7, 9))
    got = levelset_subdomain_labels(xp.asarray(phi), 3, 2)
    assert isinstance(got, xp.ndarray)
    np.testing.assert_array_equal(host(got), levelset_subdomain_labels(phi, 3, 2))
