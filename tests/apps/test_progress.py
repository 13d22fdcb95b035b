"""The progress hook: called at the solver's own host checks, changes nothing."""
import numpy as np
import pytest

from bubbleflow.case.problem import bubbly_column
from bubbleflow.linalg.solver import PressureSolver

N = 64


@pytest.fixture(scope="module")
def column():
    return bubbly_column(N, 1e3)


def _check_calls(calls, rec, check_every):
    its = [i for i, _ in calls]
    assert its and all(type(i) is int for i in its)
    assert all(type(v) is float for _, v in calls)
    assert all(a < b for a, b in zip(its, its[1:]))                # strictly increasing
    assert its[-1] == rec.iterations
    for i, v in calls:                                             # the record's values
        assert v == rec.residual_history[i]
    # At the solver's checks only: not every iteration.
    assert len(calls) <= rec.iterations // check_every + 2 * max(rec.refinements, 1) + 2


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("variant", ["adef2", "def1"])
def test_progress_at_checks_same_bits(column, precision, variant):
    A, b, phi = column
    solver = PressureSolver(A, phi=phi, subdomains=(4, 4), rtol=1e-8, check_every=10,
                            precision=precision, variant=variant)
    x0, rec0 = solver.solve(b)
    calls = []
    x1, rec1 = solver.solve(b, progress=lambda i, r: calls.append((i, r)))
    assert rec1.converged
    np.testing.assert_array_equal(x1, x0)                          # bit for bit
    np.testing.assert_array_equal(rec1.residual_history, rec0.residual_history)
    assert rec1.iterations == rec0.iterations
    _check_calls(calls, rec1, 10)
    if precision == "float64":
        # Every check_every iterations (and the last): check_every is not forced to 1.
        assert all(i % 10 == 0 for i, _ in calls[:-1])
        assert len(calls) == (rec1.iterations - 1) // 10 + 2


def test_progress_without_preconditioner(column):
    A, b, phi = column
    solver = PressureSolver(A, method="cg", preconditioner="none", deflation="none",
                            rtol=1e-6, check_every=25, maxiter=20000)
    calls = []
    x, rec = solver.solve(b, progress=lambda i, r: calls.append((i, r)))
    _check_calls(calls, rec, 25)
    assert calls[0] == (0, rec.residual_history[0])


@pytest.mark.gpu
def test_progress_fused_engine_same_bits():
    import cupy

    A, b, phi = bubbly_column(128, 1e3, backend="cupy")
    solver = PressureSolver(A, phi=phi, subdomains=(8, 8), rtol=1e-8)
    x0, rec0 = solver.solve(b)
    calls = []
    x1, rec1 = solver.solve(b, progress=lambda i, r: calls.append((i, r)))
    assert rec1.engine == "fused" == rec0.engine                    # not disabled by the hook
    assert bool((x1 == x0).all())
    _check_calls(calls, rec1, solver.check_every)
    assert isinstance(x1, cupy.ndarray)
