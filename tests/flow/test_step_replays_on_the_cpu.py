"""The flow's replayed parts (FlowSolver._replayed: the momentum phase,
the end of a step) on the CPU, their capture a NumPy stand-in of a CUDA
graph that runs the captured call again on its buffers
(helpers/replays.py): a replay repeats the call it captured, with that call's dt, step
and options, so steps equal the launched ones bit for bit only where each
key names everything its launches depend on besides the arrays.  The CUDA
capture runs on the GPU (test_step_replays.py)."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.held_capture import KeyedReplays
from bubbleflow.flow import flow_solver
from helpers.replays import record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _steps(case, replays, steps, ahead=False):
    flow = flow_solver(case, get_backend("numpy"))
    flow.viscous_plan.ahead = ahead     # (as on a GPU: the viscous steps planned ahead)
    flow._replays = KeyedReplays(capture=record, kept=12) \
        if replays else None
    state, reports = flow.initial_state(), []
    for k in range(steps):
        if ahead and k == steps // 2:
            flow.viscous_plan.steps += 3    # (a new count at the same dt: a graph of its own)
        state, report = flow.step(state)
        reports.append((report.dt, report.diagnostics, report.bounds, report.divergence))
    return flow, state, reports


@pytest.mark.parametrize("sets, ahead", [
    (["momentum.viscosity=implicit"], False),
    (["momentum.viscosity=implicit"], True),
    (["levelset.method=levelset", "levelset.reinit_every=3"], False),
    (["momentum.viscosity=explicit"], False),
], ids=["clsvof-implicit", "clsvof-implicit-planned-ahead", "levelset-reinit", "explicit"])
def test_replayed_parts_repeat_the_launched_steps(sets, ahead):
    case = load_case(os.path.join(ROOT, "cases", "two_phase.yaml"),
                     sets + ["grid.nx=16", "grid.ny=32", "output.bubbles_every=0"])
    flow, state, reports = _steps(case, True, 8, ahead)
    _, ref, ref_reports = _steps(case, False, 8, ahead)
    assert flow._replays.counts["replayed"] >= 6, flow._replays.counts
    if ahead:                           # (one graph a step: the whole momentum phase)
        assert flow.viscous_plan.steps is not None
        assert any(key[0] == "momentum" for key in flow._replays._graphs), flow._replays._graphs
    np.testing.assert_equal(reports, ref_reports)
    for a, b in ((state.phi, ref.phi), (state.c, ref.c), (state.p, ref.p),
                 *zip(state.velocity, ref.velocity)):
        np.testing.assert_array_equal(a, b)
