"""The time-dependent flow: projection, still bubble, restart, bad input."""
import os
import time

import h5py
import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow.navier_stokes import FlowSolver
from helpers.cli import ROOT, run_cli, run_interrupted



def hysing(*overrides):
    return load_case(os.path.join(ROOT, "cases/two_phase.yaml"),
                     ["grid.nx=20", "grid.ny=40", *overrides])


def test_corrected_velocity_is_divergence_free_every_step(backend):
    case = hysing("time.end=0.3")
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    worst = 0.0
    while state.time < case.time.end:
        state, rep = solver.step(state)
        assert rep.record.converged
        worst = max(worst, rep.divergence)
        assert rep.divergence < 1e-8, (rep.step, rep.divergence)
    assert state.time == pytest.approx(0.3)
    print(f"worst relative divergence {worst:.2e}")


def test_still_bubble_without_gravity_stays_still(backend):
    """Surface tension alone: the balanced-force CSF keeps spurious currents small."""
    case = hysing("time.end=0.5", "physics.gravity=0")
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    d0 = solver.diagnostics(state)
    umax = []
    while state.time < case.time.end:
        state, rep = solver.step(state)
        umax.append(max(float(abs(state.u).max()), float(abs(state.v).max())))
    d = solver.diagnostics(state)
    capillary_velocity = 24.5 / 10.0           # sigma / mu_liquid
    print(f"spurious currents: max |u| = {max(umax):.2e} m/s "
          f"({max(umax) / capillary_velocity:.1e} sigma/mu)")
    assert max(umax) < 2e-3 * capillary_velocity
    assert abs(d["centroid_y"] - d0["centroid_y"]) < 1e-3
    assert abs(d["area"] - d0["area"]) / d0["area"] < 1e-3


@pytest.mark.parametrize("nx", [20, 40])
def test_restart_equals_uninterrupted_run(tmp_path, nx):
    """A run restarted from its snapshot at t = 0.1 ends where the run that
    went on does, bit for bit: on a hierarchy of one level, and on one of
    two (40 x 80), whose coarsest inverse the uninterrupted run would keep
    across the snapshot but for its renewal there."""
    common = ["--backend", "numpy", "--no-progress", "--set", f"grid.nx={nx}",
              "--set", f"grid.ny={2 * nx}", "--set", "output.interval=0.05"]
    full_file, restart_file, cont_file = run_interrupted("cases/two_phase.yaml", tmp_path, common,
                                                         0.1, 0.15)
    with h5py.File(restart_file) as fh:
        assert fh["fields/time"][-1] == pytest.approx(0.1)
    with h5py.File(full_file) as a, h5py.File(cont_file) as b:
        for name in ("time", "area", "centroid_y", "rise_velocity", "circularity"):
            np.testing.assert_array_equal(a["diagnostics/" + name][()], b["diagnostics/" + name][()])
        np.testing.assert_array_equal(a["fields/p"][-1], b["fields/p"][-1])
        np.testing.assert_array_equal(a["solver/iterations"][()], b["solver/iterations"][()])


def test_snapshots_written_incrementally_and_readable(tmp_path):
    res = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), "--backend", "numpy",
                  "--no-progress", "--set", "grid.nx=20", "--set", "grid.ny=40",
                  "--set", "time.end=0.1",
                  "--set", "output.interval=0.05")
    assert res.returncode == 0, res.stderr
    with h5py.File(tmp_path / "two_phase.h5") as fh:
        np.testing.assert_allclose(fh["fields/time"][()], [0.0, 0.05, 0.1])
        assert fh["fields/u"].shape == (3, 40, 21) and fh["fields/v"].shape == (3, 41, 20)
        n = fh["diagnostics/time"].shape[0]
        assert fh["solver/iterations"].shape[0] == n - 1
        assert fh["solver/history_offsets"][-1] == fh["solver/residual_history"].shape[0]
        assert fh.attrs["mode"] == "flow" and fh.attrs["wall_seconds"] > 0


@pytest.mark.parametrize("setting,key", [
    ("geometry.bubbles=[{center: [0.5, 0.25], radius: 0.25}]", "geometry.bubbles[0]"),
    ("time.end=0", "time.end"),
    ("time.end=-1", "time.end"),
    ("time.dt=0", "time.dt"),
    ("levelset.method=vof", "levelset.method"),
])
def test_bad_flow_input_is_one_line(setting, key, tmp_path):
    res = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), "--set", setting)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in res.stderr
    assert not os.listdir(tmp_path)


def test_restart_from_another_case_is_refused_and_nothing_overwritten(tmp_path):
    common = ["--backend", "numpy", "--no-progress", "--set", "grid.nx=20", "--set", "grid.ny=40",
              "--set", "time.end=0.02"]
    a = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), *common)
    assert a.returncode == 0, a.stderr
    target = tmp_path / "two_phase.h5"
    before = target.read_bytes()
    b = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), *common,
                "--set", "fluids.gas.density=1", "--set", "time.end=0.05", "--restart", str(target))
    assert b.returncode == 2
    line = b.stderr.strip()
    assert "\n" not in line and "another case" in line and "fluids.gas.density" in line
    assert target.read_bytes() == before
    assert run_cli("run", "cases/bubbly_column.yaml", "--restart", str(target)).returncode == 2


def load_flow_file(path):
    with h5py.File(path) as fh:
        return {k: fh["diagnostics/" + k][()] for k in fh["diagnostics"]}


@pytest.mark.slow
@pytest.mark.parametrize("n,factor", [(40, 2), (80, 1)])
def test_hysing_case1_within_the_bounds(n, factor, tmp_path):
    """h = 1/40 within twice the acceptance bounds, h = 1/80 within them."""
    from bubbleflow.apps.validation import benchmark_quantities, compare, read_run

    res = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), "--no-progress",
                  "--set", f"grid.nx={n}", "--set", f"grid.ny={2 * n}")
    assert res.returncode == 0, res.stderr
    run = read_run(tmp_path / "two_phase.h5")
    d = run["diagnostics"]
    q = benchmark_quantities(**{k: d[k] for k in ("time", "area", "centroid_y",
                                                    "rise_velocity", "circularity")})
    rows = compare(q, factor=factor)
    for row in rows:
        print(row)
    assert all(row.passed for row in rows), rows
    assert run["solver"]["all_converged"]


@pytest.mark.slow
def test_hysing_case2_h40_runs_to_the_end_converging(tmp_path):
    res = run_cli("run", "cases/hysing_case2.yaml", "-o", str(tmp_path), "--no-progress")
    assert res.returncode == 0, res.stderr
    with h5py.File(tmp_path / "hysing_case2.h5") as fh:
        assert fh["diagnostics/time"][-1] == pytest.approx(3.0)
        assert fh["solver/converged"][()].all()
        worst = fh["solver/residual"][()].max()
        area = fh["diagnostics/area"][()]
    print(f"case 2: worst residual {worst:.2e}, area change {(area[-1] - area[0]) / area[0]:.2%}")
    assert np.isfinite(area).all()


def test_blow_up_is_reported_in_one_line_and_the_file_kept(tmp_path):
    res = run_cli("run", "cases/two_phase.yaml", "-o", str(tmp_path), "--backend", "numpy",
                  "--no-progress", "--set", "grid.nx=20", "--set", "grid.ny=40",
                  "--set", "physics.gravity=500",
                  "--set", "time.dt=0.0099", "--set", "time.end=5")
    # (dt just inside the gravity limit sqrt(h/g) = 0.01 s, far outside the convective one)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "left its physical bounds" in lines[0] or "failed at step" in lines[0]
    with h5py.File(tmp_path / "two_phase.h5") as fh:
        assert fh["fields/time"][0] == 0.0 and fh["diagnostics/time"].shape[0] >= 2
        assert fh.attrs["run_status"] == "failed"


def test_pressure_solver_built_once_per_run_and_updated_each_step(backend, monkeypatch):
    """The flow builds one PressureSolver and only updates it per step; the
    steps are the same, bit for bit, as with a new solver every step where
    the multigrid recomputes its coarsest inverse at every update
    (``coarse_refresh=1``; by default it keeps it while the bubble moves
    little: the test below)."""
    from bubbleflow.linalg.solver import PressureSolver

    case = hysing("time.end=0.06", "solver.preconditioner.coarse_refresh=1")
    built = []
    real = PressureSolver.from_config.__func__

    def counting(cls, *a, **k):
        built.append(1)
        return real(cls, *a, **k)

    monkeypatch.setattr(PressureSolver, "from_config", classmethod(counting))
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    states, reports = [], []
    while state.time < case.time.end:
        state, rep = solver.step(state)
        states.append(state)
        reports.append(rep)
    assert len(reports) >= 3 and len(built) == 1
    assert all(r.setup_seconds > 0 for r in reports)
    # The same steps with a new pressure solver each step.
    fresh = FlowSolver(case, backend)
    state = fresh.initial_state()
    for ref, rep in zip(states, reports):
        fresh._pressure = None
        state, rep2 = fresh.step(state)
        assert rep2.record.iterations == rep.record.iterations
        for name in ("p", "u", "v", "phi"):
            np.testing.assert_array_equal(backend.to_host(getattr(state, name)),
                                          backend.to_host(getattr(ref, name)))


def test_a_flow_keeps_the_coarsest_inverse_while_the_bubble_moves_little(backend, monkeypatch):
    """By default the flow tells the pressure solver how far the interface
    may have moved, and the multigrid recomputes its coarsest inverse only
    once that adds up to half a cell (or every 16 steps): far fewer times
    than the steps, with the same run to the solver's tolerance.  (On a
    grid whose hierarchy is one level the inverse is the operator's and is
    recomputed every step.)"""
    from bubbleflow.linalg.precond import multigrid

    real, computed = multigrid.coarse_solve, []

    def counting(*a):
        computed.append(1)
        return real(*a)

    monkeypatch.setattr(multigrid, "coarse_solve", counting)
    runs = {}
    for option in ("auto", "1"):
        computed.clear()
        case = hysing("grid.nx=40", "grid.ny=80", "time.end=0.2",
                      f"solver.preconditioner.coarse_refresh={option}")
        solver = FlowSolver(case, backend)
        state, steps = solver.initial_state(), []
        while state.time < case.time.end:
            state, rep = solver.step(state)
            steps.append(rep)
        assert all(r.record.converged for r in steps)
        runs[option] = (len(computed), steps, state)
    (kept, steps, state), (every, steps1, state1) = runs["auto"], runs["1"]
    print("coarsest inverses computed", kept, "of", every, "steps",
          "iterations", sum(r.record.iterations for r in steps),
          sum(r.record.iterations for r in steps1))
    assert every == len(steps1) and 1 <= kept <= every // 3
    assert [r.dt for r in steps] == pytest.approx([r.dt for r in steps1], rel=1e-6)
    for name in ("u", "v", "phi"):
        a, b = backend.to_host(getattr(state, name)), backend.to_host(getattr(state1, name))
        assert np.abs(a - b).max() <= 1e-6 * np.abs(b).max(), name


def test_phase_clock_times_the_phases_and_changes_nothing(backend):
    """The profiling clock (scripts/flow_phases.py): off by default (no
    phases in the report); on, every phase of the step is timed, they add
    up to about the step, and the state is the same to the bit."""
    case = hysing("time.end=0.3")
    quiet, timed = FlowSolver(case, backend), FlowSolver(case, backend)
    timed.clock.enabled = True
    a, b = quiet.initial_state(), timed.initial_state()
    for _ in range(6):
        t0 = time.perf_counter()
        b, rb = timed.step(b)
        wall = time.perf_counter() - t0
        a, ra = quiet.step(a)
        assert ra.phases is None
        assert set(rb.phases) >= {"properties", "momentum", "pressure set-up", "pressure solve",
                                  "correction", "advection", "reinitialisation", "diagnostics"}
        assert all(v >= 0 for v in rb.phases.values()) and sum(rb.phases.values()) <= wall
    for name in ("u", "v", "p", "phi"):
        assert np.array_equal(backend.to_host(getattr(a, name)), backend.to_host(getattr(b, name)))
