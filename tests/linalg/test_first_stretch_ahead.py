"""A device engine's first stretch queued before the host reads the start's
figures (``DeviceIterations.first_stretch``: the tolerance taken from the
norms on the device, the stretch and its check read with them): the same
answers, iteration counts, histories and checks as a start read first, bit
for bit, with one host transfer fewer; and where the first check ends the
solve (a zero right-hand side, a start at the tolerance) nothing iterates.
Run with ``pytest --backend cupy`` on a GPU machine."""
import numpy as np
import pytest

from bubbleflow import bubbly_column
from bubbleflow.case.problem import bubbly_column_3d
from bubbleflow.linalg.krylov.device import DeviceIterations
from bubbleflow.linalg.solver import PressureSolver

pytestmark = pytest.mark.gpu

OPTIONS = {
    "multigrid": dict(method="pcg", preconditioner="multigrid", deflation="none"),
    "dpcg": dict(subdomains=(8, 8)),
}


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _solve(backend, ahead, monkeypatch, build, **call):
    """``(x, record, transfers)`` of one solve, with or without the first
    stretch queued ahead."""
    A, b, solver = build()
    if not ahead:
        monkeypatch.setattr(DeviceIterations, "starts_ahead", property(lambda self: False))
    many = backend.to_host_many
    counted = []

    def counting(arrays):
        counted.append(len(arrays))
        return many(arrays)

    monkeypatch.setattr(backend, "to_host_many", counting)
    try:
        x, record = solver.solve(call.pop("rhs", b), **call)
    finally:
        monkeypatch.undo()
    return x, record, len(counted)


def _same(one, two):
    (x1, r1, _), (x2, r2, _) = one, two
    np.testing.assert_array_equal(_host(x1), _host(x2))
    assert (r1.iterations, r1.reason, r1.converged) == (r2.iterations, r2.reason, r2.converged)
    np.testing.assert_array_equal(r1.residual_history, r2.residual_history)
    assert r1.true_residual_checks == r2.true_residual_checks
    assert (r1.residual, r1.rhs_norm, r1.rhs_mean_removed) == \
        (r2.residual, r2.rhs_norm, r2.rhs_mean_removed)


def _builder(n, options, dims=2):
    def build():
        column = bubbly_column if dims == 2 else bubbly_column_3d
        A, b, phi = column(n, 1e3, backend="cupy")
        b = A.backend.xp.asarray(b)
        return A, b, PressureSolver(A, phi=phi, rtol=1e-9, **options)
    return build


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_the_first_stretch_queued_ahead_is_the_same_solve_with_one_read_fewer(
        cupy_backend, monkeypatch, name):
    build = _builder(64, OPTIONS[name])
    runs = [_solve(cupy_backend, ahead, monkeypatch, build) for ahead in (False, True)]
    _same(*runs)
    assert runs[0][1].engine == runs[1][1].engine == "fused"
    assert runs[1][2] == runs[0][2] - 1, (runs[0][2], runs[1][2])


def test_an_increment_held_to_a_reference_and_a_3d_grid(cupy_backend, monkeypatch):
    build = _builder(64, OPTIONS["multigrid"])
    A, b, _ = build()
    reference = 3.0 * b
    runs = [_solve(cupy_backend, ahead, monkeypatch, build, reference=reference)
            for ahead in (False, True)]
    _same(*runs)
    build3 = _builder(32, OPTIONS["multigrid"], dims=3)
    runs = [_solve(cupy_backend, ahead, monkeypatch, build3) for ahead in (False, True)]
    _same(*runs)
    assert runs[1][1].engine == "fused" and runs[1][2] == runs[0][2] - 1


def test_a_first_check_that_ends_the_solve_leaves_nothing_iterated(cupy_backend, monkeypatch):
    build = _builder(64, OPTIONS["multigrid"])
    A, b, solver = build()
    zero = cupy_backend.xp.zeros_like(b)
    runs = [_solve(cupy_backend, ahead, monkeypatch, build, rhs=zero) for ahead in (False, True)]
    _same(*runs)
    assert runs[1][1].iterations == 0 and not _host(runs[1][0]).any()
    x, _ = solver.solve(b)
    # Started at the answer: converged at the first check, x0 itself returned.
    runs = [_solve(cupy_backend, ahead, monkeypatch, build, x0=x) for ahead in (False, True)]
    _same(*runs)
    assert runs[1][1].iterations == 0 and runs[1][1].converged
