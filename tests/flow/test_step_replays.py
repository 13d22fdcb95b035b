"""The parts of a flow step replayed from CUDA graphs (FlowSolver._replayed
through compute.held_capture.KeyedReplays) against the same steps launched
directly: the same states and reports bit for bit, in 2-D (CLSVOF with
explicit and implicit viscosity, the level set alone) and in 3-D (where the rebuild's host read refuses the
capture); and KeyedReplays itself (copies returned,
a capture refused where the function reads the host or stages a copy from
it).  Run with ``pytest --backend cupy`` on a GPU machine."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.compute.held_capture import KeyedReplays
from bubbleflow.flow import flow_solver

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = {
    "hysing": ("two_phase.yaml", []),
    # (the viscous solves' steps planned ahead: the momentum phase one graph)
    "hysing-implicit": ("two_phase.yaml", ["momentum.viscosity=implicit"]),
    "hysing-levelset": ("two_phase.yaml", ["levelset.method=levelset",
                                           "levelset.reinit_every=3"]),
    "rising3d": ("rising_bubble_3d.yaml", ["grid.nx=16", "grid.ny=16", "grid.nz=32"]),
}


def _run(case, backend, steps, replays):
    flow = flow_solver(case, backend)
    if not replays:
        flow._replays = None
    state = flow.initial_state()
    out = []
    for _ in range(steps):
        state, report = flow.step(state)
        out.append((report.dt, report.diagnostics, report.bounds, report.divergence))
    return flow, state, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_replayed_steps_are_the_launched_steps(name, cupy_backend):
    file, sets = CASES[name]
    case = load_case(os.path.join(ROOT, "cases", file),
                     sets + ["output.bubbles_every=0", "backend=cupy"])
    steps = 9
    flow, state, reports = _run(case, cupy_backend, steps, True)
    plain, ref_state, ref_reports = _run(case, cupy_backend, steps, False)
    if name != "rising3d":          # (the 3-D rebuild reads its region's box on the host)
        assert flow._replays.counts["replayed"] >= 3, flow._replays.counts
    assert plain._replays is None
    np.testing.assert_equal(reports, ref_reports)
    for a, b in ((state.phi, ref_state.phi), (state.c, ref_state.c), (state.p, ref_state.p),
                 *zip(state.velocity, ref_state.velocity)):
        if a is None:
            assert b is None
            continue
        np.testing.assert_array_equal(a.get(), b.get())


def test_keyed_replays_return_copies(cp):
    """A replay's results are new arrays (the graph's own are not handed
    out), one copy for a result returned twice; the key's first call runs,
    the second captures, the third replays; an array from an earlier call
    is not overwritten by a later replay."""
    replays = KeyedReplays()

    def double(x, y):
        z = 2.0 * x + y
        return z, (z, x + 1.0)

    x, y = cp.arange(5.0), cp.ones(5)
    results = [replays("k", double, (x * k, y)) for k in range(4)]
    assert replays.counts == {"run": 1, "captured": 1, "replayed": 3}
    for k, (z, (z2, x1)) in enumerate(results):
        np.testing.assert_array_equal(z.get(), (2.0 * k * x + y).get())
        np.testing.assert_array_equal(x1.get(), (k * x + 1.0).get())
        assert z2 is z
    leaves, _ = replays._graphs["k"].capture.result
    assert all(r[0] is not g for r in results for g in leaves)


@pytest.mark.parametrize("reads", ["device to host", "host to device"])
def test_a_function_that_reads_the_host_is_not_captured(reads, cp):
    """A function that reads a device value on the host, or stages a copy
    from the host (through pinned memory: a graph would replay it from a
    buffer given back to the pool), is not captured: every call runs it."""
    replays = KeyedReplays(failures=2)

    def through_host(x):
        if reads == "device to host":
            return x * float(x.sum())
        return x + cp.asarray(np.full(x.shape, 3.0))

    x = cp.arange(4.0)
    for k in range(5):
        got = replays("k", through_host, (x + k,))
        want = (x + k) * float((x + k).sum()) if reads == "device to host" else x + k + 3.0
        np.testing.assert_array_equal(got.get(), want.get())
    assert replays.counts["replayed"] == 0 and replays.failed == 2
    assert not replays._graphs
    reason = replays.errors["k"]
    if reads == "host to device":
        assert "pinned host memory" in reason
    else:
        assert reason and "pinned" not in reason      # the CUDA error the read raised
    pinned = cp.cuda.alloc_pinned_memory(64)     # the pool serves pinned memory again
    assert pinned.size() >= 64
