"""The correction and the end of a step queued on the pressure solver's
candidate answer while the solver's check of it is read
(``FlowSolver.queue_behind_solve``): the same steps, bit for bit, as the end
queued after the solve, whether the solver accepts the candidate or turns it
down; and on a GPU, where the fused engine offers its candidates, the end
queued on them in the steps of a run."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.linalg.solver import PressureSolver
from helpers.cli import ROOT

CASES = [
    ("cases/two_phase.yaml", ["grid.nx=20", "grid.ny=40"]),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=8", "grid.ny=8", "grid.nz=16"]),
]


def _steps(case, backend, behind, count=4):
    flow = FlowSolver(case, backend)
    flow.check_ahead, flow.queue_behind_solve = True, behind
    state, reports = flow.initial_state(), []
    for _ in range(count):
        state, report = flow.step(state)
        reports.append((report.dt, report.diagnostics, report.bounds, report.divergence,
                        report.record.iterations, report.record.residual))
    return flow, state, reports


def _same_states(a, b, to_host):
    for name in ("phi", "c", "p"):
        assert np.array_equal(to_host(getattr(a, name)), to_host(getattr(b, name))), name
    for u, v in zip(a.velocity, b.velocity):
        assert np.array_equal(to_host(u), to_host(v))
    assert (a.time, a.step) == (b.time, b.step)


def _driven(accept, calls):
    """``PressureSolver.solve`` that solves as always, then offers the
    caller's ``behind`` a candidate it turns down and, with ``accept``, the
    answer it returns."""
    solve = PressureSolver.solve

    def driven(self, b, *args, behind=None, **options):
        x, record = solve(self, b, *args, **options)
        self.accepted_behind = None
        if behind is not None:
            calls.append(len(calls))
            behind(x + 1.0)
            if accept:
                self.accepted_behind = behind(x)
        return x, record

    return driven


@pytest.mark.parametrize("case_file,sets", CASES)
@pytest.mark.parametrize("accept", [True, False])
def test_the_end_queued_on_a_candidate_the_solver_accepts_or_not_is_the_same_step(
        backend, monkeypatch, case_file, sets, accept):
    case = load_case(os.path.join(ROOT, case_file), sets)
    _, after, reports_after = _steps(case, backend, False)
    calls = []
    monkeypatch.setattr(PressureSolver, "solve", _driven(accept, calls))
    flow, queued, reports_queued = _steps(case, backend, True)
    assert len(calls) == 4                      # one solve a step, each offered candidates
    _same_states(after, queued, backend.to_host)
    assert reports_after == reports_queued
    assert flow.ends_redone == 0


@pytest.mark.gpu
@pytest.mark.parametrize("case_file,sets", [
    ("cases/two_phase.yaml", ["grid.nx=64", "grid.ny=128"]),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=16", "grid.ny=16", "grid.nz=32"]),
])
def test_a_gpu_step_queues_its_end_on_the_answer_the_fused_solver_accepts(
        cupy_backend, case_file, sets):
    case = load_case(os.path.join(ROOT, case_file), sets)
    accepted, engines = [], []
    runs = {}
    for behind in (False, True):
        flow = FlowSolver(case, cupy_backend)
        assert flow.queue_behind_solve               # (the default on a GPU)
        flow.queue_behind_solve = behind
        state, reports = flow.initial_state(), []
        for _ in range(6):
            state, report = flow.step(state)
            reports.append((report.dt, report.diagnostics, report.bounds, report.divergence,
                            report.record.iterations, report.record.residual))
            if behind:
                accepted.append(flow._pressure.accepted_behind is not None)
                engines.append(report.record.engine)
        runs[behind] = state, reports
    _same_states(runs[False][0], runs[True][0], cupy_backend.to_host)
    assert runs[False][1] == runs[True][1]
    # (The array engine offers no candidate; the fused engine's first check
    # accepts its answer at almost every step.)
    assert engines.count("fused") >= 5, engines
    assert all(e == "fused" for e, a in zip(engines, accepted) if a)
    assert sum(accepted) >= engines.count("fused") - 1, (accepted, engines)
