"""``PressureSolver.solve(..., behind=...)``: the caller's work queued on a
device engine's candidate answer while the solver reads its check.  The
answer is the same bits with or without it; ``accepted_behind`` is what the
work returned for the answer the solver accepted, None where it accepted
none (the array engine offers no candidates)."""
import numpy as np
import pytest

from bubbleflow import bubbly_column
from bubbleflow.linalg.solver import PressureSolver

OPTIONS = {
    "multigrid": dict(method="pcg", preconditioner="multigrid", deflation="none"),
    "dpcg": dict(subdomains=(8, 8)),
}


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _solves(backend, options):
    A, b, phi = bubbly_column(64, 1e3, backend=backend)
    plain = PressureSolver(A, phi=phi, rtol=1e-9, **options)
    queued = PressureSolver(A, phi=phi, rtol=1e-9, **options)
    x, record = plain.solve(b)
    offered = []

    def behind(candidate):
        offered.append(candidate)
        return ("queued", len(offered), 2.0 * candidate)

    y, queued_record = queued.solve(b, behind=behind)
    assert record.iterations == queued_record.iterations
    np.testing.assert_array_equal(_host(x), _host(y))
    np.testing.assert_array_equal(record.residual_history, queued_record.residual_history)
    return y, queued, offered


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_the_array_engine_offers_no_candidate(name):
    _, solver, offered = _solves("numpy", OPTIONS[name])
    assert offered == [] and solver.accepted_behind is None


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_a_device_engine_offers_its_answer_before_the_check_is_read(cupy_backend, name):
    y, solver, offered = _solves("cupy", OPTIONS[name])
    assert offered, "no candidate offered"
    accepted = solver.accepted_behind
    assert accepted is not None and accepted[:2] == ("queued", len(offered))
    assert offered[-1].shape == y.shape
    np.testing.assert_array_equal(_host(offered[-1]), _host(y))
    np.testing.assert_array_equal(_host(accepted[2]), 2.0 * _host(y))
    # The next solve forgets it where nothing is offered.
    solver.solve(2.0 * y)
    assert solver.accepted_behind is None
