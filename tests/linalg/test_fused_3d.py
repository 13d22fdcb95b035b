"""The fused 3-D CG iteration (linalg.fused.engine3d) against the generic
loop on the GPU: the same iterations and solutions for the identity,
Jacobi and the multigrid cycle (whose kernels are captured with the
iteration), on grids of one xy tile and of several, of one z chunk and of
several, with odd sides; and its byte count."""
import numpy as np
import pytest

from bubbleflow import pcg
from bubbleflow.case.problem import bubbly_column_3d
from bubbleflow.linalg.fused.engine3d import FusedEngine3D
from bubbleflow.linalg.solver import PressureSolver

pytestmark = pytest.mark.gpu


def column(n, backend, contrast=10.0):
    A, b, phi = bubbly_column_3d(n, contrast, backend=backend)
    return A, A.backend.xp.asarray(b), phi


@pytest.mark.parametrize("n", [12, 40])
@pytest.mark.parametrize("prec", ["none", "jacobi", "multigrid"])
def test_fused_3d_equals_the_generic_loop(prec, n, cupy_backend):
    A, b, phi = column(n, cupy_backend, 10.0 if prec == "none" else 1e3)
    results = {}
    for engine in ("generic", "fused"):
        s = PressureSolver(A, method="pcg", preconditioner=prec, rtol=1e-8, maxiter=20000,
                           preconditioner_options={"cycle_precision": "float64"}
                           if prec == "multigrid" else None)
        if engine == "generic":
            s.device = None
        else:
            assert isinstance(s.device, FusedEngine3D)
        x, rec = s.solve(b)
        assert rec.converged, rec.summary()
        assert rec.engine == ("fused" if engine == "fused" else "generic")
        results[engine] = (x.get(), rec.iterations)
    (xg, ig), (xf, itf) = results["generic"], results["fused"]
    # (The two loops' inner products add in different orders: over hundreds
    # of iterations they may end a few apart.)
    assert abs(ig - itf) <= max(1, itf // 100), (ig, itf)
    scale = np.abs(xg).max()
    assert np.abs(xf - xg).max() <= 1e-6 * scale


def test_fused_3d_solves_odd_grids_through_the_api(cupy_backend):
    """A grid of odd sides over several tiles and z chunks, through
    ``pcg`` (engine "fused" explicitly); the answer's true residual meets
    the tolerance; a second solve on the same solver reuses its engine."""
    from bubbleflow.mesh.grid import Grid
    from bubbleflow.operators.poisson import PoissonOperator

    cp = cupy_backend.xp
    nz, ny, nx = 45, 19, 37
    grid = Grid.regular((nx, ny, nz), (1.0, 1.0, 1.0))
    rng = np.random.default_rng(4)
    betas = [cp.asarray(10.0 ** rng.uniform(-3, 0, size=grid.faces_shape(a))) for a in range(3)]
    A = PoissonOperator.from_faces(betas, grid, backend=cupy_backend)
    b = cp.asarray(rng.standard_normal(grid.size))
    b -= b.mean()
    x, info = pcg(A, b, rtol=1e-9, maxiter=5000, engine="fused")
    assert info == 0 and info.engine == "fused"
    r = b - A @ x
    assert float(cp.linalg.norm(r)) <= 1.1e-9 * float(cp.linalg.norm(b))
    s = PressureSolver(A, method="pcg", preconditioner="multigrid", rtol=1e-9)
    engine = s.device
    s.update(A)
    assert s.device is engine
    x2, rec = s.solve(b)
    assert rec.converged and rec.engine == "fused"


def test_fused_3d_bytes_per_iteration(cupy_backend):
    A, b, phi = column(16, cupy_backend)
    n = 16 ** 3
    s = PressureSolver(A, method="pcg", preconditioner="jacobi")
    assert s.device.bytes_per_iteration == 8 * n * 15
    s = PressureSolver(A, method="pcg", preconditioner="multigrid")
    assert s.device.bytes_per_iteration == 8 * n * 15 + s.M.bytes_per_apply()


def test_fused_3d_leaves_grids_past_32_bit_offsets_to_the_generic_loop(cupy_backend,
                                                                       monkeypatch):
    """Its kernels index with 32-bit offsets: a grid of more cells than
    MAX_CELLS gets no fused engine, and the generic loop solves it."""
    from bubbleflow.linalg.fused import engine3d

    A, b, _ = column(12, cupy_backend)
    monkeypatch.setattr(engine3d, "MAX_CELLS", 12 ** 3 - 1)
    s = PressureSolver(A, method="pcg", preconditioner="jacobi", rtol=1e-8)
    assert s.device is None
    x, rec = s.solve(b)
    assert rec.converged and rec.engine == "generic"


def test_an_operator_built_in_the_engines_arrays_is_taken_without_a_copy(cupy_backend):
    """A solver offers its engine's couplings (``operator_arrays``); the next
    operator built in them is updated to and solved with the same bits as
    an operator of its own, and the engine reads those arrays (no copy).
    The solver offers none where its operator is stored as diagonals."""
    from bubbleflow.operators.poisson import PoissonOperator

    cp = cupy_backend.xp
    A, b, phi = column(24, cupy_backend, 1e3)
    grid = A.grid
    rng = np.random.default_rng(7)
    densities = [cp.asarray(10.0 ** rng.uniform(0, 3, size=grid.faces_shape(a)))
                 for a in range(3)]
    answers = []
    for built_in in (False, True):
        s = PressureSolver(A, method="pcg", preconditioner="multigrid", rtol=1e-9)
        out = s.operator_arrays()
        assert isinstance(s.device, FusedEngine3D) and out is not None
        assert all(o is e for o, e in zip(out, (s.device.cx, s.device.cy, s.device.cz)))
        B = PoissonOperator.from_faces(densities, grid, backend=cupy_backend, densities=True,
                                       out=out if built_in else None)
        s.update(B)
        if built_in:
            assert all(c is o for c, o in zip(B.couplings(), out))
        x, rec = s.solve(b)
        assert rec.converged, rec.summary()
        answers.append((x.get(), rec.iterations))
    (x0, i0), (x1, i1) = answers
    assert i0 == i1
    np.testing.assert_array_equal(x0, x1)
    D = PoissonOperator.from_faces(densities, grid, backend=cupy_backend, densities=True,
                                   storage="diagonals")
    assert PressureSolver(D, method="pcg", preconditioner="multigrid").operator_arrays() is None
