"""The 3-D flow's pressure operator built in its solver's own arrays
(``PressureSolver.operator_arrays``, ``PoissonOperator.from_faces(out=)``):
from the second step on the operator's couplings are the fused engine's,
and the steps are those of a flow whose operators have arrays of their
own, bit for bit.  Run with ``pytest --backend cupy`` on a GPU machine."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import flow_solver
from bubbleflow.linalg.solver import PressureSolver

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _steps(case, backend, steps):
    flow = flow_solver(case, backend)
    state, reports, held = flow.initial_state(), [], []
    for _ in range(steps):
        state, report = flow.step(state)
        reports.append((report.dt, report.record.iterations, report.diagnostics))
        engine, A = flow._pressure.device, flow._pressure.A
        held.append(all(c is e for c, e in zip(A.couplings(), (engine.cx, engine.cy, engine.cz))))
    return state, reports, held


def test_steps_with_the_operator_in_the_solvers_arrays_are_the_same(cupy_backend, monkeypatch):
    case = load_case(os.path.join(ROOT, "cases", "rising_bubble_3d.yaml"),
                     ["grid.nx=16", "grid.ny=16", "grid.nz=32", "output.bubbles_every=0",
                      "backend=cupy"])
    steps = 6
    state, reports, held = _steps(case, cupy_backend, steps)
    assert held == [False] + [True] * (steps - 1)
    monkeypatch.setattr(PressureSolver, "operator_arrays", lambda self: None)
    ref_state, ref_reports, ref_held = _steps(case, cupy_backend, steps)
    assert not any(ref_held)
    assert reports == ref_reports
    for a, b in [(state.phi, ref_state.phi), (state.p, ref_state.p), (state.c, ref_state.c),
                 *zip(state.velocity, ref_state.velocity)]:
        np.testing.assert_array_equal(a.get(), b.get())
