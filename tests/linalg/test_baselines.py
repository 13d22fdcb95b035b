"""The baseline solvers with SciPy's conventions: BiCGSTAB, Jacobi and Gauss-Seidel
against SciPy and direct solves, on NumPy and (marked ``gpu``) on CuPy."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.case.problem import bubbly_column
from bubbleflow.compute.backend import BackendUnavailable, get_backend
from bubbleflow.linalg.baselines import bicgstab, gauss_seidel, jacobi

BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def be(request):
    try:
        return get_backend(request.param)
    except BackendUnavailable as exc:
        pytest.skip(f"backend {request.param} unavailable: {exc}")


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def convection_diffusion(m, wind=20.0):
    """Upwind convection-diffusion on an ``m x m`` grid (Dirichlet): nonsymmetric."""
    h = 1.0 / (m + 1)
    T = sp.diags([-1.0 - wind * h, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    S = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(S, sp.eye(m))).tocsr()


def diagonally_dominant(n, seed=0):
    """A random nonsymmetric, strictly diagonally dominant sparse matrix."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=4.0 / n, random_state=rng, format="csr")
    R.data -= 0.5
    R.setdiag(0.0)
    R.eliminate_zeros()
    d = abs(R).sum(axis=1).A1 + 1.0
    return (R + sp.diags(d)).tocsr()


def gauged_reference(C, b):
    """spsolve of the bordered system [[A, 1], [1^T, 0]]: the zero-mean answer."""
    n = C.shape[0]
    one = sp.csr_matrix(np.ones((n, 1)))
    K = sp.bmat([[C, one], [one.T, None]]).tocsc()
    return spla.spsolve(K, np.concatenate([b - b.mean(), [0.0]]))[:n]


def scipy_bicgstab(C, b, rtol, M=None):
    """SciPy's answer and its iteration count (callbacks)."""
    calls = []
    x, info = spla.bicgstab(C, b, rtol=rtol, M=M, maxiter=20000,
                            callback=lambda xk: calls.append(1))
    assert info == 0
    return x, len(calls)


_pressure = {}


def pressure(n, contrast):
    """``(A on the host, b, gauged reference)`` of the bubbly column."""
    if (n, contrast) not in _pressure:
        A, b, _ = bubbly_column(n, contrast)
        _pressure[n, contrast] = (A, b, gauged_reference(A.to_scipy(), b))
    return _pressure[n, contrast]


# ----------------------------------------------------------------- BiCGSTAB
@pytest.mark.parametrize("M", [None, "jacobi"])
def test_bicgstab_nonsymmetric_matches_scipy_and_spsolve(M, be):
    C = convection_diffusion(24)
    b = np.random.default_rng(1).standard_normal(C.shape[0])
    x, info = bicgstab(be.sparse.csr_matrix(C), be.xp.asarray(b), rtol=1e-10, M=M)
    x = be.to_host(x)
    assert info == 0 and info.converged and info.reason == "converged"
    assert info.residual <= 1e-10
    assert np.linalg.norm(b - C @ x) <= 1e-10 * np.linalg.norm(b)
    assert rel(x, spla.spsolve(C.tocsc(), b)) <= 1e-8
    xs, its = scipy_bicgstab(C, b, 1e-10, None if M is None else sp.diags(1.0 / C.diagonal()))
    assert rel(x, xs) <= 1e-8
    assert abs(info.iterations - its) <= max(3, its // 5), (info.iterations, its)
    assert len(info.residual_history) == info.iterations + 1
    assert info.residual_history[0] == 1.0 and info.method == "bicgstab"


@pytest.mark.parametrize("M", [None, "jacobi"])
def test_bicgstab_pressure_operator(M, be):
    A_host, b_host, ref = pressure(32, 1e3)
    A, b, _ = bubbly_column(32, 1e3, backend=be)
    x, info = bicgstab(A, b, rtol=1e-8, M=M)
    x = be.to_host(x)
    assert info == 0 and info.residual <= 1e-8, info.summary()
    assert abs(x.mean()) <= 1e-12 * np.abs(x).max()          # gauged to zero mean
    assert rel(x, ref) <= 1e-7
    if M == "jacobi":                                         # (SciPy's takes 7000 without)
        C = A_host.to_scipy()
        xs, _ = scipy_bicgstab(C, b_host - b_host.mean(), 1e-8, sp.diags(1.0 / C.diagonal()))
        assert rel(x, xs - xs.mean()) <= 1e-7


def test_bicgstab_callback_start_and_maxiter(be):
    C = be.sparse.csr_matrix(convection_diffusion(12))
    b = be.xp.ones(C.shape[0])
    seen = []
    x, info = bicgstab(C, b, rtol=1e-8, callback=lambda xk: seen.append(float(xk.sum())))
    assert info == 0 and len(seen) == info.iterations
    # From the answer: no iteration; from "Mb": converges too.
    x1, info1 = bicgstab(C, b, x0=x, rtol=1e-8)
    assert info1 == 0 and info1.iterations == 0
    x2, info2 = bicgstab(C, b, x0="Mb", M="jacobi", rtol=1e-8)
    assert info2 == 0
    x3, info3 = bicgstab(C, b, rtol=1e-12, maxiter=5, check_every=3)
    assert info3 == 5 == info3.iterations and info3.reason == "maxiter" and not info3.converged
    x4, info4 = bicgstab(C, be.xp.zeros(C.shape[0]))
    assert info4 == 0 and float(abs(x4).max()) == 0.0


@pytest.mark.parametrize("A,b", [
    (np.array([[0.0, 1.0], [-1.0, 0.0]]), np.array([1.0, 0.0])),   # (r0, A r0) = 0
    (np.array([[1.0, 1.0], [1.0, 0.0]]), np.array([1.0, 0.0])),    # omega = (t, s)/(t, t) = 0
])
def test_bicgstab_breakdown(A, b, be):
    x, info = bicgstab(be.xp.asarray(A), be.xp.asarray(b))
    xs, info_scipy = spla.bicgstab(A, b)
    assert info < 0 and info_scipy < 0
    assert info == -10 and info.reason == "breakdown" and not info.converged
    assert np.allclose(be.to_host(x), xs)


# ---------------------------------------------------- Jacobi and Gauss-Seidel
def test_stationary_on_a_diagonally_dominant_matrix(be):
    C = diagonally_dominant(300)
    b = np.random.default_rng(2).standard_normal(300)
    ref = spla.spsolve(C.tocsc(), b)
    Cb, bb = be.sparse.csr_matrix(C), be.xp.asarray(b)
    its = {}
    for name, solve, kw in (("jacobi", jacobi, {}), ("gs", gauss_seidel, {}),
                            ("sgs", gauss_seidel, {"symmetric": True}),
                            ("dense", gauss_seidel, {})):
        A = be.xp.asarray(C.toarray()) if name == "dense" else Cb
        x, info = solve(A, bb, rtol=1e-10, maxiter=1000)
        assert info == 0 and info.residual <= 1e-10, (name, info.summary())
        assert rel(be.to_host(x), ref) <= 1e-9, name
        its[name] = info.iterations
    assert its["gs"] < its["jacobi"] and its["sgs"] <= its["gs"] and its["dense"] == its["gs"], its


def test_jacobi_count_is_exact():
    C = diagonally_dominant(200, seed=3)
    b = np.ones(200)
    x, d, k = np.zeros(200), C.diagonal(), 0
    while np.linalg.norm(b - C @ x) > 1e-9 * np.linalg.norm(b):
        x, k = x + 0.9 * (b - C @ x) / d, k + 1
    xj, info = jacobi(C, b, rtol=1e-9, omega=0.9)
    assert info.iterations == k and np.allclose(xj, x, rtol=1e-12, atol=0)
    assert np.allclose(info.residual_history[-1], info.residual)


def test_stationary_on_the_pressure_operator(be):
    _, _, ref = pressure(8, 10.0)
    A, b, _ = bubbly_column(8, 10.0, backend=be)
    its = {}
    for name, solve, kw in (("jacobi", jacobi, {"omega": 0.8}), ("red-black", gauss_seidel, {}),
                            ("symmetric", gauss_seidel, {"symmetric": True})):
        x, info = solve(A, b, rtol=1e-10, maxiter=5000, **kw)
        x = be.to_host(x)
        assert info == 0 and info.residual <= 1e-10, (name, info.summary())
        assert abs(x.mean()) <= 1e-12 * np.abs(x).max()
        assert rel(x, ref) <= 1e-8, name
        its[name] = info.iterations
    assert its["red-black"] < its["jacobi"], its


def test_red_black_and_lexicographic_agree(be):
    A, b, _ = bubbly_column(8, 10.0, backend=be)
    C = be.sparse.csr_matrix(A.to_scipy())
    x_rb, info_rb = gauss_seidel(A, b, rtol=1e-12, maxiter=5000)
    assert info_rb.method == "gauss_seidel_red_black"
    x_lex, info_lex = gauss_seidel(C, b, rtol=1e-12, maxiter=5000, nullspace="constant")
    assert info_lex.method == "gauss_seidel_lexicographic"
    # The grid operator itself, ordered lexicographically: the same sweeps.
    x_op, info_op = gauss_seidel(A, b, rtol=1e-12, maxiter=5000, ordering="lexicographic")
    assert info_rb == info_lex == info_op == 0
    assert info_op.iterations == info_lex.iterations
    assert rel(be.to_host(x_lex), be.to_host(x_rb)) <= 1e-8
    assert rel(be.to_host(x_op), be.to_host(x_lex)) <= 1e-12


def test_maxiter_reached(be):
    A, b, _ = bubbly_column(8, 10.0, backend=be)
    # Undamped Jacobi never converges here: the checkerboard mode has D^-1 A = 2.
    x, info = jacobi(A, b, rtol=1e-8, maxiter=40, check_every=7)
    assert info == 40 == info.iterations and info.reason == "maxiter" and not info.converged
    assert len(info.residual_history) == 41
    x, info = gauss_seidel(A, b, rtol=1e-14, maxiter=3)
    assert info == 3 and info.reason == "maxiter"


# ------------------------------------------------------------------ bad input
def test_bad_inputs_raise_value_error():
    C = diagonally_dominant(20)
    b = np.ones(20)
    cases = [
        (bicgstab, (C, np.ones(21)), {}, "shape"),
        (jacobi, (C, np.ones((20, 2))), {}, "shape"),
        (gauss_seidel, (C, b + 1j), {}, "complex"),
        (bicgstab, (C, b), {"rtol": -1.0}, "rtol"),
        (jacobi, (C, b), {"atol": float("nan")}, "atol"),
        (gauss_seidel, (C, b), {"maxiter": -1}, "maxiter"),
        (jacobi, (C, b), {"omega": 0.0}, "omega"),
        (gauss_seidel, (C, b), {"ordering": "zebra"}, "ordering"),
        (gauss_seidel, (C, b), {"ordering": "red-black"}, "grid operator"),
        (jacobi, (spla.aslinearoperator(C), b), {}, "diagonal"),
    ]
    for solve, args, kw, words in cases:
        with pytest.raises(ValueError, match=words):
            solve(*args, **kw)
    Z = C.tolil()
    Z[3, 3] = Z[7, 7] = 0.0
    for solve in (jacobi, gauss_seidel):
        with pytest.raises(ValueError, match="2 zero diagonal entries"):
            solve(Z.tocsr(), b)
