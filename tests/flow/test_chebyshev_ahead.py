"""The viscous solves' Chebyshev steps planned on the device and ahead
(viscosity_chebyshev.chebyshev_plan, chebyshev_solves with ``steps``,
steps_ahead; the table the sweep kernels read, written by launches):
the plan against the host's formulas, a solve planned ahead against one
planned from its start, a count that falls short reported as such, and a
flow whose momentum phase is planned ahead against one planned at each
step (one process; on the GPU with ``--backend cupy``)."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import flow_solver
from bubbleflow.flow.viscosity_chebyshev import (MAX_CHEBYSHEV_STEPS, chebyshev_plan,
                                                 chebyshev_records, chebyshev_schedule,
                                                 chebyshev_solves, needed_steps,
                                                 residual_scalars, solve_chebyshev, steps_ahead)
from helpers.chebyshev import stiff_systems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _starts(xp, rng, systems):
    rhss = [xp.asarray(rng.standard_normal(S.shape[0])) for S in systems]
    return rhss, [xp.asarray(0.01 * rng.standard_normal(S.shape[0])) for S in systems]


@pytest.mark.parametrize("cells", [(14, 21), (5, 6, 7)], ids=["2d", "3d"])
def test_plan_is_the_host_formulas(cells, backend):
    """Per system the steps its start needs, the factor of its first
    direction and the recurrence's coefficients, as the host computes them
    (the same bits on NumPy; to rounding on a GPU, the same counts)."""
    rng = np.random.default_rng(3)
    xp = backend.xp
    systems = stiff_systems(xp, rng, cells)
    rhss, x0s = _starts(xp, rng, systems)
    totals = xp.stack([residual_scalars(S, b, x)[1] for S, b, x in zip(systems, rhss, x0s)])
    schedule, first, needed = (backend.to_host(a) for a in
                               chebyshev_plan(totals, 1e-10, 40, MAX_CHEBYSHEV_STEPS))
    host = backend.to_host(totals)
    exact = backend.name == "numpy"
    for i, (fnorm, rnorm, lo, dmax, dmin) in enumerate(host):
        f, rows = chebyshev_schedule(lo, 2.0 - lo, 40)
        assert needed[i] == needed_steps(fnorm, rnorm, lo, dmax, dmin, 1e-10) > 10
        if exact:
            assert first[i] == f and np.array_equal(schedule[i], np.array(rows))
        else:
            np.testing.assert_allclose(schedule[i], np.array(rows), rtol=1e-14, atol=0)
            assert first[i] == pytest.approx(f, rel=1e-15)
    # A start that meets the tolerance needs none; a degenerate row as many as allowed.
    met = host.copy()
    met[:, 1] = 0.0
    assert not backend.to_host(chebyshev_plan(xp.asarray(met), 1e-10, 4, 30)[2]).any()
    broken = host.copy()
    broken[:, 2] = np.nan
    assert (backend.to_host(chebyshev_plan(xp.asarray(broken), 1e-10, 4, 30)[2]) == 30).all()


@pytest.mark.parametrize("cells", [(14, 21), (5, 6, 7)], ids=["2d", "3d"])
def test_solves_planned_ahead(cells, backend):
    """Steps planned ahead (at least those needed) reach the tolerance with
    nothing read on the host and report the steps the start needed; too
    few are reported short, where the solve planned from its start finishes."""
    rng = np.random.default_rng(6)
    xp = backend.xp
    systems = stiff_systems(xp, rng, cells)
    rhss, x0s = _starts(xp, rng, systems)
    planned = solve_chebyshev(systems, rhss, x0s, 1e-10)
    need = max(rec.iterations for _, rec in planned)
    xs, report, counts = chebyshev_solves(systems, rhss, x0s, 1e-10, steps=steps_ahead(need))
    report = backend.to_host(report)
    assert counts == [steps_ahead(need)] * len(systems)
    assert [int(k) for k in report[:, 2]] == [rec.iterations for _, rec in planned]
    records = chebyshev_records(report, counts, 1e-10)
    assert all(rec.converged and rec.residual <= 1e-10 for rec in records)
    for S, b, x, (y, _) in zip(systems, rhss, xs, planned):
        res = backend.to_host(b - S.matvec(x))
        assert np.linalg.norm(res) <= 1e-10 * np.linalg.norm(backend.to_host(b))
        scale = float(abs(backend.to_host(y)).max())
        assert float(abs(backend.to_host(x - y)).max()) <= 1e-9 * scale
    _, short, counts = chebyshev_solves(systems, rhss, x0s, 1e-10, steps=2)
    assert not any(rec.converged for rec in chebyshev_records(backend.to_host(short), counts,
                                                              1e-10))


def test_steps_ahead_hold_at_most_an_eighth_more():
    got = {k: steps_ahead(k) for k in range(0, 600)}
    assert [got[k] for k in (0, 7, 15, 21, 22, 23, 100)] == [1, 8, 16, 22, 24, 24, 104]
    for k, s in got.items():
        assert k + 1 <= s <= max(k + 1, 8) * 9 / 8
    assert len(set(got[k] for k in range(150, 170))) <= 3


def _flow(backend, ahead, steps, restart_at=None, sets=()):
    case = load_case(os.path.join(ROOT, "cases", "two_phase.yaml"),
                     ["grid.nx=24", "grid.ny=48", "momentum.viscosity=implicit",
                      "output.bubbles_every=0", f"backend={backend.name}", *sets])
    flow = flow_solver(case, backend)
    flow.viscous_plan.ahead = ahead
    state, planned = flow.initial_state(), []
    for k in range(steps):
        if k == restart_at:
            flow.restart_point()
        state, _ = flow.step(state)
        planned.append(flow.viscous_plan.steps)
    return flow, state, planned


@pytest.mark.parametrize("sets", [(), ("time.dt=0.002",)], ids=["adaptive", "fixed-dt"])
def test_momentum_planned_ahead_is_the_step_planned_at_its_start(backend, sets):
    """A flow whose viscous steps are planned ahead (its momentum phase one
    graph on a GPU, their report read with the transport's check, or alone
    where a fixed step has none) against the same flow planned at every
    step: the same velocities to the solves' tolerance; the second step
    falls short of the first's count (the flow at rest needs none) and is
    done again from its start; a snapshot's restart point plans the next
    step from its start."""
    flow, state, planned = _flow(backend, True, 12, restart_at=8, sets=sets)
    _, ref, never = _flow(backend, False, 12, sets=sets)
    assert never == [None] * 12
    assert planned[0] == 1 and all(k is not None and k > 1 for k in planned[1:])
    assert all(rec.converged for rec in flow.viscous_records)
    h = backend.to_host
    for a, b in zip(state.velocity, ref.velocity):
        assert float(np.abs(h(a) - h(b)).max()) <= 1e-7 * float(np.abs(h(b)).max())
    flow.restart_point()
    assert flow.viscous_plan.steps is None


@pytest.mark.gpu
def test_device_table_is_the_hosts_bytes_and_a_graph_can_hold_it(cp):
    """The table the sweep kernels read, written by launches, is the host
    table's bytes (padded to whole words); written into a buffer inside a
    captured graph, each replay writes it again."""
    from bubbleflow.compute.launch_tables import device_table

    table = np.zeros(3, dtype=[("p", np.uint64), ("s", np.float64), ("n", np.int32)])
    table["p"], table["s"], table["n"] = [1, 2 ** 63 + 5, 7], [0.5, -1e300, np.pi], [1, 2, -3]
    ref = device_table.reference(table, cp.zeros(1))
    got = device_table(table, cp.zeros(1))
    assert got.dtype == cp.uint8 and cp.array_equal(got, ref)
    assert bytes(got.get()[:table.nbytes]) == table.tobytes()
    out = cp.zeros_like(got)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        device_table(table, cp.zeros(1), out=out)
        graph = stream.end_capture()
        assert not out.any()            # (captured: not run)
        graph.launch()
        stream.synchronize()
    assert cp.array_equal(out, ref)


def test_plan_says_a_short_count_once_and_for_the_last_solves_only():
    """The plan's bookkeeping: a report that falls short drops the count
    and is said once; solves after it (planned ahead, or from their start)
    answer for themselves; a report read along with other figures is not
    read again."""
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow.viscous_plan import ViscousPlan
    from bubbleflow.linalg.krylov.record import SolveRecord

    host = get_backend("numpy")
    met, short = np.array([[1.0, 1e-11, 7.0]] * 2), np.array([[1.0, 1e-9, 30.0]] * 2)
    plan = ViscousPlan(True, 2, 1e-10)
    plan.steps = 9
    plan.pend(met.copy())
    assert plan.pending is not None
    plan.settle(met)                    # (read along with the step's scalars)
    assert plan.pending is None and plan.steps == steps_ahead(7) and not plan.fell_short(host)
    plan.pend(short)
    assert plan.fell_short(host) and plan.steps is None and not plan.fell_short(host)
    plan.steps = 9
    plan.pend(short)
    plan.settle(short)
    record = SolveRecord(method="chebyshev", rtol=1e-10)
    record.iterations, record.converged = 12, True
    plan.solved_from_start([record, record])      # (the step done again, planned at its start)
    assert not plan.fell_short(host) and plan.steps == steps_ahead(12)
    plan.restart()
    assert plan.steps is None
