"""SciPy's and PyAMG's test cases for the SciPy-style solvers, which keep
SciPy's conventions, so its own cases check them.

The matrices are re-created here from their definitions in

* SciPy: ``scipy/scipy``, ``scipy/sparse/linalg/_isolve/tests/test_iterative.py``
  (``IterativeParams``: poisson1d, poisson2d, rand-sym-pd and their float32
  ``-F`` twins; neg-poisson1d, rand-diag, rand-sym, sym-nonpd; rand,
  nonsymposdef; rand-cmplx, rand-cmplx-herm, rand-cmplx-sym-pd; and the
  matrices of ``test_atol``, ``test_zero_rhs``, ``test_x0_working``,
  ``test_x0_solves_problem_exactly``, ``test_precond_dummy``,
  ``test_precond_inverse``, ``test_maxiter``, ``test_invalid_atol``,
  ``test_positional_error``);
* PyAMG: ``pyamg/pyamg``, ``pyamg/krylov/tests/test_krylov.py``
  (``TestStoppingCriteria``, ``TestKrylov.spd_cases``, ``test_defaults``),
  ``pyamg/tests/test_multilevel.py`` (``test_coarse_grid_solver``,
  ``test_aspreconditioner``: Poisson 2-D with a smoothed-aggregation
  preconditioner) and ``pyamg/aggregation/tests/test_aggregation.py``
  (``linear_elasticity((7, 7))``, Q1 plane elasticity, with its rigid body
  modes).

Every real SPD case is solved by :func:`bubbleflow.cg` with SciPy's
arguments and by :func:`bubbleflow.dpcg` with the user's deflation vectors
(dense ``Z``, sparse ``Z``, integer labels; ``A`` as given and as a
``LinearOperator``), checked on SciPy's criterion ``||b - A x|| <= rtol ||b||``
and against a direct solve to within the condition number.  Complex cases
are refused by design (``ValueError``, one line naming the complex input);
symmetric indefinite and nonsymmetric cases are compared with SciPy's own
``cg`` / ``bicgstab`` outcome.  The issue's list of surprises closes the file.
"""
import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import bubbleflow
from bubbleflow import bicgstab, cg, dpcg
from bubbleflow.linalg.krylov.record import SolveRecord

SCIPY = "scipy/scipy: scipy/sparse/linalg/_isolve/tests/test_iterative.py"
PYAMG_KRYLOV = "pyamg/pyamg: pyamg/krylov/tests/test_krylov.py"
PYAMG_MULTILEVEL = "pyamg/pyamg: pyamg/tests/test_multilevel.py"
PYAMG_AGGREGATION = "pyamg/pyamg: pyamg/aggregation/tests/test_aggregation.py"


# ------------------------------------------------------------------ matrices
def poisson1d(n, dtype=np.float64):
    """tridiag(-1, 2, -1), Dirichlet (SciPy's ``Poisson1D``, PyAMG's ``poisson((n,))``)."""
    e = np.ones(n)
    return sp.diags([2.0 * e, -e[1:], -e[1:]], [0, -1, 1], format="csr").astype(dtype)


def poisson2d(n, dtype=np.float64):
    """The 5-point Laplacian on an ``n x n`` grid: ``kronsum`` of two 1-D ones."""
    T = poisson1d(n)
    return sp.kronsum(T, T, format="csr").astype(dtype)


def poisson_cond(n):
    """Condition number of :func:`poisson1d` (and of :func:`poisson2d`: the same)."""
    lam = 2.0 - 2.0 * np.cos(np.arange(1, n + 1) * np.pi / (n + 1))
    return float(lam[-1] / lam[0])


def q1_elasticity(nx, ny, E=1e5, nu=0.3):
    """Plane elasticity with bilinear (Q1) elements on unit squares, both
    displacements fixed on the boundary: ``nx x ny`` free nodes, two unknowns
    each (x, y interleaved, x fastest), and the three rigid body modes
    (translations and the rotation about the grid centre) on those nodes.
    PyAMG's ``gallery.linear_elasticity((nx, ny))`` (its defaults
    E = 1e5, nu = 0.3, Lame parameters of plane strain)."""
    lam = E * nu / ((1 + nu) * (1 - 2 * nu))
    mu = E / (2 + 2 * nu)
    D = np.array([[lam + 2 * mu, lam, 0.0], [lam, lam + 2 * mu, 0.0], [0.0, 0.0, mu]])
    Ke = np.zeros((8, 8))
    g = 0.5 / np.sqrt(3.0)
    for x, y in itertools.product((0.5 - g, 0.5 + g), repeat=2):   # 2 x 2 Gauss points
        # corners (0,0), (1,0), (1,1), (0,1); N = (1-x)(1-y), x(1-y), xy, (1-x)y
        dx = np.array([-(1 - y), 1 - y, y, -y])
        dy = np.array([-(1 - x), -x, x, 1 - x])
        B = np.zeros((3, 8))
        B[0, 0::2], B[1, 1::2], B[2, 0::2], B[2, 1::2] = dx, dy, dy, dx
        Ke += 0.25 * B.T @ D @ B
    px, py = nx + 2, ny + 2                       # nodes per row / column, boundary included
    node = np.arange(px * py).reshape(py, px)     # node[j, i], x fastest
    corners = np.stack([node[:-1, :-1], node[:-1, 1:], node[1:, 1:], node[1:, :-1]], -1)
    dofs = np.stack([2 * corners, 2 * corners + 1], -1).reshape(-1, 8)
    rows = np.repeat(dofs, 8, axis=1).ravel()
    cols = np.tile(dofs, (1, 8)).ravel()
    K = sp.coo_matrix((np.tile(Ke.ravel(), len(dofs)), (rows, cols)),
                      shape=(2 * px * py, 2 * px * py)).tocsr()
    free_nodes = node[1:-1, 1:-1].ravel()
    free = np.stack([2 * free_nodes, 2 * free_nodes + 1], -1).ravel()
    A = K[free][:, free].tocsr()
    xc = (np.arange(px) - (px - 1) / 2.0)[None, :].repeat(py, 0)[1:-1, 1:-1].ravel()
    yc = (np.arange(py) - (py - 1) / 2.0)[:, None].repeat(px, 1)[1:-1, 1:-1].ravel()
    modes = np.zeros((A.shape[0], 3))
    modes[0::2, 0] = 1.0
    modes[1::2, 1] = 1.0
    modes[0::2, 2], modes[1::2, 2] = -yc, xc
    return A, modes


def scipy_rand_sym_pd():
    """SciPy's ``rand-sym-pd``: ``R R^T`` for ``R`` uniform 9 x 9, seed 1234."""
    R = np.random.RandomState(1234).rand(9, 9)
    return R @ R.T


def pyamg_4x4():
    return np.array([[1.2, 0.0, 0.0, 0.0],
                     [0.0, 4.0, 2.0, 6.0],
                     [0.0, 0.0, 9.3, -2.31],
                     [-4.0, 0.0, 0.0, -11.0]])


def pyamg_stopping_case():
    """PyAMG ``TestStoppingCriteria``: ``(A + A^T)/2 + n I``, n = 10, with b and x0."""
    rs = np.random.RandomState(9062883)
    A = rs.rand(10, 10)
    b, x0 = rs.rand(10), rs.rand(10)
    return 0.5 * (A + A.T) + 10 * np.eye(10), b, x0


def pyamg_poisson_10_b_x0():
    b = np.array([1.0, 0.0, 0.2, 8.0, 0.0, -1.9, 11.3, 0.0, 0.1, 0.0]).reshape(-1, 1)
    x0 = np.zeros((10, 1))
    x0[4], x0[7] = 11.1, -2.0
    return b, x0


# --------------------------------------------------------------------- cases
@dataclass
class Case:
    name: str
    source: str
    A: object
    b: object = None
    rtol: float = 1e-8
    x0: object = None
    cond: float = None
    Z: object = None                  # the case's own deflation vectors, if any
    maxiter_one: bool = True          # SciPy's test_maxiter applies (not converged in 1)
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        n = self.A.shape[0]
        if self.b is None:            # SciPy's Case: b = arange(n)
            self.b = np.arange(n, dtype=float)
        # SciPy's test_convergence: rtol 1e-8 in double, 1e-2 in single precision.
        if np.dtype(self.A.dtype) == np.float32 and self.rtol == 1e-8:
            self.rtol = 1e-2

    @property
    def n(self):
        return self.A.shape[0]

    def dense(self):
        A = self.A.toarray() if sp.issparse(self.A) else np.asarray(self.A)
        return A.astype(np.float64)

    def condition(self):
        if self.cond is None:
            w = np.linalg.eigvalsh(self.dense())
            self.cond = float(w[-1] / w[0])
        return self.cond

    def reference(self):
        b = np.asarray(self.b, dtype=float).ravel()
        if sp.issparse(self.A):
            return spla.spsolve(self.A.astype(np.float64).tocsc(), b)
        return np.linalg.solve(self.dense(), b)


def spd_cases():
    P1, P2 = poisson1d(40), poisson2d(40)
    elast, modes = q1_elasticity(7, 7)
    stop_A, stop_b, stop_x0 = pyamg_stopping_case()
    A4 = pyamg_4x4()
    b10, x010 = pyamg_poisson_10_b_x0()
    cases = [
        # SciPy IterativeParams, "Symmetric and Positive Definite" and "2-dimensional Poisson".
        Case("scipy-poisson1d", SCIPY, P1, cond=poisson_cond(40)),
        Case("scipy-poisson1d-F", SCIPY, P1.astype(np.float32), cond=poisson_cond(40)),
        Case("scipy-poisson2d", SCIPY, P2, cond=poisson_cond(40)),
        Case("scipy-poisson2d-F", SCIPY, P2.astype(np.float32), cond=poisson_cond(40)),
        # SciPy IterativeParams, "Random pos-def symmetric real".
        Case("scipy-rand-sym-pd", SCIPY, scipy_rand_sym_pd()),
        Case("scipy-rand-sym-pd-F", SCIPY, scipy_rand_sym_pd().astype(np.float32)),
        # PyAMG TestStoppingCriteria: dense and csr_array, x0 random, tol 1e-8.
        Case("pyamg-stopping-dense", PYAMG_KRYLOV, stop_A, stop_b, x0=stop_x0),
        Case("pyamg-stopping-csr", PYAMG_KRYLOV, sp.csr_array(stop_A), stop_b, x0=stop_x0),
        # PyAMG TestKrylov.spd_cases (b and x0 of shape (n, 1)); the 1x1 one
        # converges in its single iteration.
        Case("pyamg-1x1", PYAMG_KRYLOV, np.array([[1.2]]), np.array([[3.9]]),
             x0=np.zeros((1, 1)), maxiter_one=False),
        Case("pyamg-4x4-AtA", PYAMG_KRYLOV, A4.T @ A4, np.array([[1.0], [3.9], [0.0], [-1.23]]),
             x0=np.zeros((4, 1))),
        Case("pyamg-poisson10", PYAMG_KRYLOV, poisson1d(10).toarray(), b10, x0=x010,
             cond=poisson_cond(10)),
        # PyAMG test_defaults: poisson((10,)) csr, b uniform (seed 751537155).
        Case("pyamg-defaults", PYAMG_KRYLOV, poisson1d(10),
             np.random.RandomState(751537155).rand(10), cond=poisson_cond(10)),
        # PyAMG test_coarse_grid_solver: diag(1..4), poisson((4,)), poisson((4, 4)), b = arange.
        Case("pyamg-coarse-diag", PYAMG_MULTILEVEL, sp.csr_array(np.diag(np.arange(1.0, 5.0)))),
        Case("pyamg-coarse-poisson4", PYAMG_MULTILEVEL, poisson1d(4), cond=poisson_cond(4)),
        Case("pyamg-coarse-poisson4x4", PYAMG_MULTILEVEL, poisson2d(4), cond=poisson_cond(4)),
        # PyAMG test_aspreconditioner / test_accel: poisson((50, 50)), b uniform (seed 1331277597).
        Case("pyamg-poisson50x50", PYAMG_MULTILEVEL, poisson2d(50),
             np.random.RandomState(1331277597).rand(2500), cond=poisson_cond(50)),
        # PyAMG aggregation tests: linear_elasticity((7, 7)) and its rigid body modes.
        Case("pyamg-elasticity7x7", PYAMG_AGGREGATION, elast, Z=modes),
    ]
    return cases


SPD = spd_cases()
SPD_IDS = [c.name for c in SPD]
SPD_BY_NAME = {c.name: c for c in SPD}


def identity_precond(n):
    """SciPy test_precond_dummy: the identity as a LinearOperator."""
    return spla.LinearOperator((n, n), matvec=lambda r: r, rmatvec=lambda r: r, dtype=float)


def make_M(kind, case):
    if kind is None:
        return None
    if kind == "identity":
        return identity_precond(case.n)
    return kind                                   # a bubbleflow name ("jacobi")


def check_solution(case, x, info, rtol=None, A=None):
    """SciPy's assertions on ``(x, info)``, the record, and the error against a
    direct solve within ``cond(A) rtol`` (with a factor 2 and rounding)."""
    rtol = case.rtol if rtol is None else rtol
    b = np.asarray(case.b, dtype=float).ravel()
    assert info == 0 and not info and int(info) == 0, info
    assert info.converged and info.reason == "converged"
    assert isinstance(info.record, SolveRecord)
    assert len(info.residual_history) == info.iterations + 1
    assert x.shape == (case.n,)
    res = np.linalg.norm(b - case.A @ x)
    assert res <= rtol * np.linalg.norm(b), (res, rtol)
    assert info.residual <= rtol * (1 + 1e-10)
    assert info.residual == pytest.approx(res / np.linalg.norm(b), rel=1e-3, abs=1e-15)
    ref = case.reference()
    err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    assert err <= 2.0 * case.condition() * rtol + 1e-12 * case.condition(), err


# ------------------------------------------------------------ SPD: cg, pcg
@pytest.mark.parametrize("M", [None, "identity", "jacobi"])
@pytest.mark.parametrize("case", SPD, ids=SPD_IDS)
def test_cg_spd_cases(case, M):
    """SciPy test_convergence (M None, x0 = 0 b or the case's x0) and
    test_precond_dummy (identity M); ``"jacobi"`` is ours."""
    x0 = 0 * case.b if case.x0 is None else case.x0
    x, info = cg(case.A, case.b, x0=x0, rtol=case.rtol, M=make_M(M, case))
    check_solution(case, x, info)
    assert info.method == ("cg" if M is None else "pcg")
    # SciPy test_convergence: x0 is not overwritten.
    assert np.array_equal(x0, 0 * case.b if case.x0 is None else case.x0)


@pytest.mark.parametrize("case", SPD, ids=SPD_IDS)
def test_cg_spd_cases_on_a_linear_operator(case):
    """SciPy test_precond_dummy, second half: A as a LinearOperator."""
    x, info = cg(spla.aslinearoperator(case.A), case.b, x0=0 * case.b, rtol=case.rtol)
    check_solution(case, x, info)


# ------------------------------------------- SPD: dpcg with user deflation vectors
def deflation_input(kind, case):
    """The user's deflation space: ``dense`` (n x k float: the case's own
    vectors, else smooth polynomials in the index), ``sparse`` (piecewise
    constant blocks as a CSR matrix) or ``labels`` (integer, one per unknown)."""
    n = case.n
    if kind == "dense":
        if case.Z is not None:
            return np.array(case.Z)
        t = np.linspace(-1.0, 1.0, n)
        return np.stack([t ** j for j in range(min(3, n))], axis=1)
    blocks = min(4 if kind == "sparse" else 5, n)
    labels = np.arange(n) * blocks // n
    if kind == "labels":
        return labels
    return sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, blocks))


@pytest.mark.parametrize("form", ["given", "linear_operator"])
@pytest.mark.parametrize("kind", ["dense", "sparse", "labels"])
@pytest.mark.parametrize("case", SPD, ids=SPD_IDS)
def test_dpcg_spd_cases_with_user_deflation(case, kind, form):
    Z = deflation_input(kind, case)
    A = case.A if form == "given" else spla.aslinearoperator(case.A)
    x0 = 0 * case.b if case.x0 is None else case.x0
    x, info = dpcg(A, case.b, x0=x0, rtol=case.rtol, deflation=Z)
    check_solution(case, x, info)
    k = Z.shape[1] if kind != "labels" else len(np.unique(Z))
    assert info.method == "dpcg" and info.deflation_vectors == k


@pytest.mark.parametrize("name", ["scipy-poisson2d", "pyamg-poisson50x50", "pyamg-elasticity7x7"])
def test_dpcg_with_jacobi_and_both_variants(name):
    case = SPD_BY_NAME[name]
    Z = case.Z if case.Z is not None else deflation_input("labels", case)
    for variant in ("adef2", "def1"):
        x, info = dpcg(case.A, case.b, rtol=case.rtol, M="jacobi", deflation=Z, variant=variant)
        check_solution(case, x, info)


# ----------------------------------------------------- SciPy-style conventions
@pytest.mark.parametrize("solver", ["cg", "dpcg"])
@pytest.mark.parametrize("case", SPD, ids=SPD_IDS)
def test_x0_shapes_and_Mb(case, solver):
    """x0 of shape (n,) and (n, 1), and SciPy test_x0_equals_Mb (x0 = "Mb"), b as (n, 1)."""
    kw = dict(rtol=case.rtol)
    if solver == "dpcg":
        kw["deflation"] = deflation_input("labels", case)
    fn = cg if solver == "cg" else dpcg
    b_col = np.asarray(case.b, dtype=float).reshape(-1, 1)
    x0 = np.random.default_rng(3).standard_normal(case.n)
    kept = x0.copy()
    for b, start in [(case.b, x0), (b_col, x0.reshape(-1, 1)), (b_col, "Mb"), (case.b, "Mb")]:
        x, info = fn(case.A, b, x0=start, **kw)
        check_solution(case, x, info)
    assert np.array_equal(x0, kept)                     # x0 not overwritten


@pytest.mark.parametrize("case", [c for c in SPD if c.maxiter_one], ids=lambda c: c.name)
def test_maxiter_one_and_callback(case):
    """SciPy test_maxiter: rtol 1e-12, maxiter 1: one callback, info == 1."""
    b = np.asarray(case.b, dtype=float).ravel()
    seen = []
    x, info = cg(case.A, b, x0=0 * b, rtol=1e-12, maxiter=1,
                 callback=lambda xk: seen.append(np.linalg.norm(b - case.A @ xk)))
    assert len(seen) == 1 and info == 1 and info.iterations == 1
    assert info.reason == "maxiter" and not info.converged
    seen.clear()
    x, info = dpcg(case.A, b, rtol=1e-12, maxiter=1, deflation=deflation_input("sparse", case),
                   callback=lambda xk: seen.append(xk))
    if info:                                       # deflation may solve it in one step
        assert len(seen) == 1 and info == 1 and info.reason == "maxiter"


@pytest.mark.parametrize("name", ["scipy-poisson1d", "scipy-poisson2d", "pyamg-elasticity7x7"])
def test_callback_every_iteration_and_maxiter_reached(name):
    case = SPD_BY_NAME[name]
    Z = case.Z if case.Z is not None else deflation_input("labels", case)
    for fn, kw in [(cg, {}), (cg, {"M": "jacobi"}), (dpcg, {"deflation": Z})]:
        seen = []
        x, info = fn(case.A, case.b, rtol=case.rtol, callback=lambda xk: seen.append(xk.copy()),
                     **kw)
        assert info == 0 and len(seen) == info.iterations > 1
        assert all(xk.shape == (case.n,) for xk in seen)
        np.testing.assert_allclose(seen[-1], x, rtol=1e-12, atol=1e-12 * np.abs(x).max())
        # maxiter reached: info > 0 is the number of iterations done.
        stop = info.iterations // 2
        x, info = fn(case.A, case.b, rtol=case.rtol, maxiter=stop, **kw)
        assert info == stop and info > 0 and info.iterations == stop
        assert info.reason == "maxiter" and not info.converged and bool(info)


@pytest.mark.parametrize("case", SPD, ids=SPD_IDS)
def test_atol_alone(case):
    """``rtol=0`` and an absolute tolerance: ``||b - A x|| <= atol``."""
    b = np.asarray(case.b, dtype=float).ravel()
    atol = case.rtol * np.linalg.norm(b)
    for fn, kw in [(cg, {}), (dpcg, {"deflation": deflation_input("dense", case)})]:
        x, info = fn(case.A, case.b, rtol=0.0, atol=atol, **kw)
        assert info == 0 and np.linalg.norm(b - case.A @ x) <= atol


def test_scipy_atol_grid():
    """SciPy test_atol: every (M, rtol, atol) of its grid; an infinite
    tolerance is met at once by the start, as in SciPy; NaN is refused."""
    rng = np.random.default_rng(168441431005389)
    A = rng.uniform(size=[10, 10])
    A = A @ A.T + 10 * np.eye(10)
    b = 1e3 * rng.uniform(size=10)
    M0 = rng.standard_normal(size=(10, 10))
    M0 = M0 @ M0.T
    tols = np.r_[0, np.logspace(-9, 2, 7)]
    for M, rtol, atol in itertools.product([None, 1e-6 * M0, 1e6 * M0], tols, tols):
        if rtol == 0 and atol == 0:
            continue
        x, info = cg(A, b, M=M, rtol=rtol, atol=atol)
        assert info == 0
        err = np.linalg.norm(A @ x - b)
        assert err <= 1.00025 * max(atol, rtol * np.linalg.norm(b))
    for kw in ({"rtol": np.inf}, {"atol": np.inf}):
        x, info = cg(A, b, **kw)
        assert info == 0 and info.iterations == 0 and not x.any()
    for kw in ({"rtol": np.nan}, {"atol": np.nan}):
        with pytest.raises(ValueError, match="non-negative"):
            cg(A, b, **kw)


@pytest.mark.parametrize("fn", [cg, dpcg, bicgstab], ids=["cg", "dpcg", "bicgstab"])
def test_scipy_zero_rhs(fn):
    """SciPy test_zero_rhs: b = 0 returns zeros and info 0, whatever x0 and the tolerances."""
    rng = np.random.default_rng(1684414984100503)
    A = rng.random(size=[10, 10])
    A = A @ A.T + 10 * np.eye(10)
    b = np.zeros(10)
    kw = {"deflation": np.arange(10) // 5} if fn is dpcg else {}
    for tol in np.logspace(-10, 2, 7):
        for extra in ({}, {"x0": np.ones(10)}, {"atol": 0, "x0": np.ones(10)},
                      {"atol": tol}, {"atol": 0}):
            x, info = fn(A, b, rtol=tol, **extra, **kw)
            assert info == 0 and not info
            assert not x.any() and x.shape == (10,)


def test_scipy_x0_working():
    """SciPy test_x0_working: ``R R^T`` (no shift, cond ~ 2e4), atol 0, rtol 1e-6."""
    rng = np.random.default_rng(1685363802304750)
    A = rng.random(size=[10, 10])
    A = A @ A.T
    b, x0 = rng.random(10), rng.random(10)
    for fn, kw in [(cg, {}), (dpcg, {"deflation": np.arange(10) // 3})]:
        x, info = fn(A, b, atol=0, rtol=1e-6, **kw)
        assert info == 0 and np.linalg.norm(A @ x - b) <= 1e-6 * np.linalg.norm(b)
        x, info = fn(A, b, x0=x0, atol=0, rtol=1e-6, **kw)
        assert info == 0 and np.linalg.norm(A @ x - b) <= 1e-5 * np.linalg.norm(b)


@pytest.mark.parametrize("fn", [cg, dpcg, bicgstab], ids=["cg", "dpcg", "bicgstab"])
def test_scipy_x0_solves_problem_exactly(fn):
    """SciPy test_x0_solves_problem_exactly (gh-19948)."""
    rhs = np.array([-1.0, -1.0])
    kw = {"deflation": np.array([0, 1])} if fn is dpcg else {}
    sol, info = fn(np.eye(2), rhs, x0=rhs, **kw)
    np.testing.assert_allclose(sol, rhs)
    assert info == 0


@pytest.mark.parametrize("fn", [cg, dpcg, bicgstab], ids=["cg", "dpcg", "bicgstab"])
def test_scipy_positional_error_and_invalid_atol(fn):
    """SciPy test_positional_error (rtol is keyword-only) and test_invalid_atol."""
    rng = np.random.default_rng(1685363802304750)
    A = rng.random(size=[10, 10])
    A = A @ A.T
    b, x0 = rng.random(10), rng.random(10)
    kw = {"deflation": np.arange(10) // 5} if fn is dpcg else {}
    with pytest.raises(TypeError):
        fn(A, b, x0, 1e-5, **kw)
    for atol in ("legacy", None, -1):
        with pytest.raises(ValueError, match="atol"):
            fn(A, b, x0, atol=atol, **kw)


@pytest.mark.parametrize("name", ["scipy-poisson1d", "scipy-poisson2d"])
def test_scipy_precond_inverse(name):
    """SciPy test_precond_inverse: M = A^-1 solves at once; SciPy asserts at
    most 3 products with A (its call passes x0 = 0 b)."""
    case = SPD_BY_NAME[name]
    count = {"A": 0, "M": 0}
    dense = case.A.toarray()

    def matvec(v):
        count["A"] += 1
        return case.A @ v

    def inverse(v):
        count["M"] += 1
        return np.linalg.solve(dense, v)

    A = spla.LinearOperator(case.A.shape, matvec, rmatvec=matvec, dtype=float)
    M = spla.LinearOperator(case.A.shape, inverse, rmatvec=inverse, dtype=float)
    x, info = cg(A, case.b, M=M, x0=0 * case.b, rtol=1e-8)
    assert info == 0 and np.linalg.norm(case.A @ x - case.b) <= 1e-8 * np.linalg.norm(case.b)
    assert count["A"] <= 3 and info.iterations == 1


def test_pyamg_spd_cases_reduce_the_error():
    """PyAMG TestKrylov.test_krylov, "SPD Orthogonal projectors reduce the
    error": cg with tol 1e-16 and a few iterations cuts the error by the
    case's factor (b and x0 of shape (n, 1))."""
    for name, maxiter, factor in [("pyamg-1x1", 1, 1e-10), ("pyamg-4x4-AtA", 4, 1e-10),
                                  ("pyamg-poisson10", 2, 0.98)]:
        case = SPD_BY_NAME[name]
        x, info = cg(case.A, case.b, x0=case.x0, rtol=1e-16, maxiter=maxiter)
        soln = case.reference()
        x0 = np.ravel(case.x0)
        assert np.linalg.norm(soln - x) / np.linalg.norm(soln - x0) < factor, name
        assert info.iterations <= maxiter and info >= 0


def test_pyamg_coarse_grid_solver_is_almost_exact():
    """PyAMG test_coarse_grid_solver: ``cg(A, b)[0]`` with the defaults
    satisfies ``A x = b`` to 7 decimals on its three small matrices."""
    for name in ("pyamg-coarse-diag", "pyamg-coarse-poisson4", "pyamg-coarse-poisson4x4"):
        case = SPD_BY_NAME[name]
        x = cg(case.A, case.b)[0]
        np.testing.assert_almost_equal(case.A @ x, case.b)


def test_pyamg_defaults():
    """PyAMG test_defaults: the default arguments converge."""
    case = SPD_BY_NAME["pyamg-defaults"]
    x, info = cg(case.A, case.b)
    assert info == 0 and np.linalg.norm(case.b - case.A @ x) < np.linalg.norm(case.b)


@pytest.mark.parametrize("cycle", ["V", "W", "F"])
def test_pyamg_smoothed_aggregation_preconditioner(cycle):
    """PyAMG test_aspreconditioner: Poisson 50 x 50 and the smoothed-aggregation
    V, W and F cycles as M, rtol 1e-8, maxiter 30 (needs PyAMG; our check is
    the 2-norm residual, PyAMG's the M-norm)."""
    pyamg = pytest.importorskip("pyamg")
    case = SPD_BY_NAME["pyamg-poisson50x50"]
    M = pyamg.smoothed_aggregation_solver(case.A).aspreconditioner(cycle=cycle)
    x, info = cg(case.A, case.b, M=M, rtol=1e-8, maxiter=30, atol=0)
    check_solution(case, x, info, rtol=1e-8)
    x, info = dpcg(case.A, case.b, M=M, rtol=1e-8, maxiter=30, atol=0,
                   deflation=deflation_input("labels", case))
    check_solution(case, x, info, rtol=1e-8)


def test_elasticity_matrix_is_pyamgs():
    """Our Q1 re-creation equals PyAMG's ``linear_elasticity((7, 7))`` (needs PyAMG)."""
    pyamg = pytest.importorskip("pyamg")
    A, B = pyamg.gallery.linear_elasticity((7, 7), format="csr")
    case = SPD_BY_NAME["pyamg-elasticity7x7"]
    assert abs(sp.csr_matrix(A) - case.A).max() <= 1e-10 * abs(case.A).max()
    np.testing.assert_allclose(B, case.Z, atol=1e-12)


# --------------------------------------------------- not SPD: indefinite, nonsymmetric
def neg_poisson1d():
    return -poisson1d(40)


def rand_diag():
    """SciPy ``rand-diag``: diag(6, -5, 2, 7, -1, 10, 4, -3, -8, 9)."""
    return sp.diags([np.array([6, -5, 2, 7, -1, 10, 4, -3, -8, 9], dtype=float)], [0],
                    format="csr")


def rand_sym():
    R = np.random.RandomState(1234).rand(4, 4)
    return R + R.T


def sym_nonpd():
    """SciPy ``sym-nonpd``: [[0, C], [C^T, -I]] with a saddle-point zero block;
    b = e_5 (``b^T A b = 0``: CG breaks down at once)."""
    A = np.zeros((11, 11))
    A[:5, 5] = A[5, :5] = [1, 2, 2, 2, 1]
    A[:5, 6:] = A[6:, :5] = -np.eye(5)
    A[6:, 6:] = -np.eye(5)
    b = np.zeros(11)
    b[5] = 1.0
    return A, b


def nonsymposdef():
    """SciPy ``nonsymposdef``: lower bidiagonal (2 on the diagonal, -1 below)."""
    return sp.diags([2.0 * np.ones(10), -np.ones(9)], [0, -1], format="csr")


INDEFINITE = [
    ("neg-poisson1d", neg_poisson1d(), None),
    ("neg-poisson1d-F", neg_poisson1d().astype(np.float32), None),
    ("rand-diag", rand_diag(), None),
    ("rand-diag-F", rand_diag().astype(np.float32), None),
    ("rand-sym", rand_sym(), None),
    ("rand-sym-F", rand_sym().astype(np.float32), None),
    ("sym-nonpd", *sym_nonpd()),
]

NONSYMMETRIC = [
    ("rand", np.random.RandomState(1234).rand(4, 4), None),
    ("rand-F", np.random.RandomState(1234).rand(4, 4).astype(np.float32), None),
    ("nonsymposdef", nonsymposdef(), None),
    ("sym-nonpd", *sym_nonpd()),                 # SciPy: bicgstab breaks down on it
]


def _scipy_rtol(A):
    return 1e-2 if np.dtype(A.dtype) == np.float32 else 1e-8


def _check_against_scipy(ours, theirs, A, b, rtol):
    x, info = ours
    x_s, info_s = theirs
    assert np.isfinite(x).all()
    if info_s == 0:
        assert info == 0 and not info
        assert np.linalg.norm(b - A @ x) <= rtol * np.linalg.norm(b)
    else:
        assert info != 0 and not info.converged
        assert np.linalg.norm(A @ x - b) <= np.linalg.norm(b)   # SciPy's test_convergence


@pytest.mark.parametrize("name,A,b", INDEFINITE, ids=[c[0] for c in INDEFINITE])
def test_cg_symmetric_indefinite_like_scipy(name, A, b):
    """SciPy IterativeParams' symmetric cases that it skips for cg: our CG goes
    on through negative curvature as SciPy's does; info 0 where SciPy's cg
    converges on the same call, else a nonzero info and no exception."""
    b = np.arange(A.shape[0], dtype=float) if b is None else b
    rtol = _scipy_rtol(A)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = spla.cg(A, b, x0=0 * b, rtol=rtol)
    _check_against_scipy(cg(A, b, x0=0 * b, rtol=rtol), theirs, A, b, rtol)


@pytest.mark.parametrize("x0", [None, "Mb"])
@pytest.mark.parametrize("name,A,b", NONSYMMETRIC, ids=[c[0] for c in NONSYMMETRIC])
def test_bicgstab_nonsymmetric_like_scipy(name, A, b, x0):
    """SciPy IterativeParams' nonsymmetric cases (and sym-nonpd, SciPy's
    bicgstab breakdown case) with :func:`bubbleflow.bicgstab`."""
    b = np.arange(A.shape[0], dtype=float) if b is None else b
    rtol = _scipy_rtol(A)
    with np.errstate(all="ignore"):
        theirs = spla.bicgstab(A, b, x0=x0, rtol=rtol)
    if x0 == "Mb" and name == "nonsymposdef":
        theirs = (theirs[0], 0)      # SciPy skips it for numerical noise (gh-15533); ours converges
    ours = bicgstab(A, b, x0=x0, rtol=rtol)
    _check_against_scipy(ours, theirs, A, b, rtol)
    if theirs[1] < 0:
        assert ours[1] < 0 and ours[1].reason == "breakdown"


@pytest.mark.parametrize("name", ["rand", "nonsymposdef"])
def test_bicgstab_maxiter_one(name):
    """SciPy test_maxiter for bicgstab: one callback, info == 1."""
    A = dict((c[0], c[1]) for c in NONSYMMETRIC)[name]
    b = np.arange(A.shape[0], dtype=float)
    seen = []
    x, info = bicgstab(A, b, x0=0 * b, rtol=1e-12, maxiter=1, callback=seen.append)
    assert len(seen) == 1 and info == 1


# ------------------------------------------------------------------- complex
def _complex_cases():
    rs = np.random.RandomState(1234)
    R = rs.rand(4, 4) + 1j * rs.rand(4, 4)
    rs = np.random.RandomState(1234)
    H = rs.rand(4, 4) + 1j * rs.rand(4, 4)
    H = H + H.T.conj()
    rs = np.random.RandomState(1234)
    P = rs.rand(9, 9) + 1j * rs.rand(9, 9)
    P = P.conj() @ P.T
    C = np.array(pyamg_4x4(), dtype=complex)
    C[0, 0] += 3.1j
    C[3, 3] -= 1.34j
    C[1, 3] *= 1.0j
    C[1, 2] += 1.0j
    cases = [("rand-cmplx", SCIPY, R), ("rand-cmplx-herm", SCIPY, H),
             ("rand-cmplx-sym-pd", SCIPY, P)]
    cases += [(n + "-F", s, a.astype(np.complex64)) for n, s, a in cases]
    cases += [("nonsymposdef-F", SCIPY, nonsymposdef().astype(np.complex64)),
              ("pyamg-4x4-imaginary-AhA", PYAMG_KRYLOV, C.conj().T @ C)]
    return cases


COMPLEX = _complex_cases()


def _call(fn, A, b, **kw):
    if fn is dpcg:
        kw.setdefault("deflation", np.arange(A.shape[0]) % 2)
    return fn(A, b, **kw)


@pytest.mark.parametrize("fn", [cg, dpcg, bicgstab], ids=["cg", "dpcg", "bicgstab"])
@pytest.mark.parametrize("name,source,A", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_cases_are_refused(name, source, A, fn):
    """Complex systems are refused by design: ValueError, one line naming A."""
    b = np.arange(A.shape[0], dtype=float)
    for AA in (A, sp.csr_matrix(A)):
        with pytest.raises(ValueError, match=r"A is complex(64|128)") as exc:
            _call(fn, AA, b)
        assert "\n" not in str(exc.value)
        with pytest.raises(ValueError, match=r"A is complex"):
            _call(fn, AA, b.astype(complex))


@pytest.mark.parametrize("fn", [cg, dpcg, bicgstab], ids=["cg", "dpcg", "bicgstab"])
def test_complex_b_x0_M_Z_with_real_A_are_refused(fn):
    case = SPD_BY_NAME["scipy-poisson1d"]
    A, b = case.A, case.b
    for what, kw in [("b", {"b": b + 1j}), ("x0", {"x0": b * (1 + 1j)}),
                     ("M", {"M": sp.identity(40, dtype=complex, format="csr")})]:
        args = {"b": b, **kw}
        with pytest.raises(ValueError, match=f"{what} is complex") as exc:
            _call(fn, A, **args)
        assert "\n" not in str(exc.value)
    if fn is dpcg:
        with pytest.raises(ValueError, match="real"):
            dpcg(A, b, deflation=np.ones((40, 2), dtype=complex))


# ---------------------------------------------------- the surprises
def test_surprise_a_info_is_false_when_converged():
    case = SPD_BY_NAME["scipy-poisson1d"]
    x, info = cg(case.A, case.b)
    failed = False
    if info:
        failed = True
    assert not failed and info == 0 and info.converged


def test_surprise_b_real_A_complex_b_is_refused():
    case = SPD_BY_NAME["scipy-poisson1d"]
    with pytest.raises(ValueError, match="b is complex"):
        cg(case.A, case.b + 0.5j)


def test_surprise_c_complex_hermitian_A_is_refused():
    H = dict((c[0], c[2]) for c in COMPLEX)["rand-cmplx-sym-pd"]
    for fn in (cg, dpcg):
        with pytest.raises(ValueError, match="A is complex"):
            _call(fn, H, np.ones(9))
        with pytest.raises(ValueError, match="A is complex"):
            _call(fn, H, np.ones(9), M="jacobi")


def test_surprise_d_incompatible_rhs_warns_and_is_recorded():
    A, b, _ = bubbleflow.bubbly_column(16, 1e3)
    assert A.nullspace == "constant"
    for AA, kw in [(A, {}), (A.to_scipy(), {"nullspace": "constant"})]:
        with pytest.warns(RuntimeWarning, match="not compatible"):
            x, info = cg(AA, b + 1.0, rtol=1e-8, **kw)
        assert info.rhs_removed_fraction > 0 and info == 0
        assert abs(x.mean()) < 1e-10 * np.abs(x).max()


def test_surprise_e_non_square_and_3d_A_are_refused():
    with pytest.raises(ValueError, match=r"\(5, 3\)"):
        cg(np.ones((5, 3)), np.zeros(5))
    with pytest.raises(ValueError, match=r"\(3, 3, 3\)"):
        cg(np.ones((3, 3, 3)), np.zeros(3))


def test_surprise_f_bad_atol_is_a_value_error():
    case = SPD_BY_NAME["scipy-poisson1d"]
    for atol in ("x", None):
        with pytest.raises(ValueError, match="atol"):
            cg(case.A, case.b, atol=atol)


def test_surprise_g_dpcg_takes_a_linear_operator_with_user_Z():
    case = SPD_BY_NAME["pyamg-elasticity7x7"]
    x, info = dpcg(spla.aslinearoperator(case.A), case.b, rtol=1e-8, deflation=case.Z)
    check_solution(case, x, info)
    assert info.deflation_vectors == 3


def test_surprise_h_maxiter_zero_is_not_success():
    """A deliberate difference: SciPy returns info 0 for maxiter=0."""
    case = SPD_BY_NAME["scipy-poisson1d"]
    for fn, kw in [(cg, {}), (dpcg, {"deflation": np.arange(40) // 8}), (bicgstab, {})]:
        x, info = fn(case.A, case.b, maxiter=0, **kw)
        assert info == 1 and info.reason == "maxiter" and not info.converged


@pytest.mark.parametrize("name", ["scipy-poisson1d", "scipy-poisson2d"])
def test_surprise_i_exact_preconditioner_one_iteration(name):
    """M = A^-1: one iteration, at most two products with each of A and M
    (SciPy: one of each; our extra A product confirms the true residual)."""
    case = SPD_BY_NAME[name]
    count = {"A": 0, "M": 0}
    Ainv = np.linalg.inv(case.A.toarray())

    def matvec(v):
        count["A"] += 1
        return case.A @ v

    def inverse(v):
        count["M"] += 1
        return Ainv @ v

    A = spla.LinearOperator(case.A.shape, matvec, dtype=float)
    M = spla.LinearOperator(case.A.shape, inverse, dtype=float)
    x, info = cg(A, case.b, M=M, rtol=1e-8)
    assert info == 0 and info.iterations == 1
    assert count["A"] <= 2 and count["M"] <= 2, count
    assert np.linalg.norm(case.A @ x - case.b) <= 1e-8 * np.linalg.norm(case.b)


# ------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["scipy-poisson2d", "pyamg-poisson50x50", "pyamg-elasticity7x7"])
def test_gpu_cases_on_cupy(name, cupy_backend):
    """The SPD cases on CuPy: cg (M none and Jacobi) and dpcg with dense Z,
    sparse Z and labels, on ``cupyx.scipy.sparse.csr_matrix``."""
    xp, sparse = cupy_backend.xp, cupy_backend.sparse
    case = SPD_BY_NAME[name]
    A = sparse.csr_matrix(sp.csr_matrix(case.A))
    b = xp.asarray(np.asarray(case.b, dtype=float))
    runs = [(cg, {}), (cg, {"M": "jacobi"})]
    for kind in ("dense", "sparse", "labels"):
        Z = deflation_input(kind, case)
        Z = sparse.csr_matrix(Z) if sp.issparse(Z) else xp.asarray(Z)
        runs.append((dpcg, {"deflation": Z}))
    for fn, kw in runs:
        x, info = fn(A, b, rtol=case.rtol, **kw)
        check_solution(case, cupy_backend.to_host(x), info)
