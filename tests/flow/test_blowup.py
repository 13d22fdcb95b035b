"""The physical bounds of a flow (bubbleflow.flow.bounds): a run whose
state leaves them stops in one line, exit 1, status "failed", its earlier
output kept; each bound on crafted states; the shipped cases and a flow
without gas do not trip them; one process in 2-D and 3-D, and 2 ranks."""
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import backend_of
from bubbleflow.flow import flow_solver
from bubbleflow.flow.bounds import (CFL_LIMIT, CLSVOF_VOLUME_CHANGE_LIMIT, FAR_GAS_CELLS,
                                    FRACTION_TOLERANCE, VOLUME_CHANGE_LIMIT, FlowBounds)
from bubbleflow.mesh.grid import Grid
from helpers.cli import ROOT
from helpers.launcher import child_env, mpiexec

COLUMN = os.path.join(ROOT, "cases", "bubbly_column_flow.yaml")
COLUMN_3D = os.path.join(ROOT, "cases", "bubbly_column_3d_flow.yaml")
#: The 2-D column with CLSVOF and a fixed step at its gravity limit at t = 0
#: (sqrt(h/g) = 0.056 s on 16 x 32 cells): stable at rest, too long once the
#: bubbles move.
FIXED_DT = ["grid.nx=16", "grid.ny=32", "levelset.method=clsvof", "time.dt=0.05",
            "time.end=1.0"]


def _sets(overrides):
    return [a for kv in overrides for a in ("--set", kv)]


def _run(capsys, tmp_path, case, overrides):
    rc = main(["run", case, "--backend", "numpy", "--no-progress", "-o", str(tmp_path),
               *_sets(overrides)])
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------- the blow-up

def test_a_fixed_step_too_long_leaves_the_bounds_long_before_anything_is_not_finite(backend):
    """Stepped on without the check, the fixed-step column stays finite until
    its volume fraction reaches 1e2 and more and its gas centroid leaves the
    box; the bounds name the volume fraction from the first step."""
    case = load_case(COLUMN, ["backend=numpy", *FIXED_DT])
    solver = flow_solver(case, backend)
    state = solver.initial_state()
    gas = solver.diagnostics(state)["area"]
    said = []
    with np.errstate(all="ignore"):
        for _ in range(20):
            state, rep = solver.step(state)
            said.append(solver.bounds.broken(rep, gas))
            c, y = backend.to_host(state.c), rep.diagnostics["centroid_y"]
            if c.max() > 100 and not 0 <= y <= 1.0:
                break
    # (Past this the run's bits decide how soon the fields stop being finite.)
    assert c.max() > 100 and not 0 <= y <= 1.0
    assert np.isfinite(c).all() and math.isfinite(y)
    assert len(said) >= 10 and said[0].startswith("volume fraction ") and all(said)


def test_the_fixed_step_blow_up_ends_the_run_failed_in_one_line(capsys, tmp_path):
    rc, _, err = _run(capsys, tmp_path, COLUMN, FIXED_DT)
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: bubbly_column_flow: the flow left its physical bounds "
                               "at step 1 (t = 0.05): volume fraction 1.0"), lines[0]
    assert "outside [0, 1]" in lines[0]
    with h5py.File(tmp_path / "bubbly_column_flow.h5") as fh:
        assert fh.attrs["run_status"] == "failed"
        assert list(fh["fields/time"][()]) == [0.0]             # the snapshot before stays
        assert list(fh["diagnostics/time"][()]) == [0.0, 0.05]


def test_a_level_set_blow_up_names_the_cfl_number_and_its_limit(capsys, tmp_path):
    rc, _, err = _run(capsys, tmp_path, COLUMN,
                      FIXED_DT[:2] + ["levelset.method=levelset"] + FIXED_DT[3:])
    assert rc == 1
    assert err.strip() == ("error: bubbly_column_flow: the flow left its physical bounds at "
                           "step 2 (t = 0.1): advective CFL number max|u| dt / h = 1.32 "
                           "(dt = 0.05 s) above the 1 the scheme can take"), err
    with h5py.File(tmp_path / "bubbly_column_flow.h5") as fh:
        assert fh.attrs["run_status"] == "failed"


def test_a_3d_blow_up_ends_the_run_failed(capsys, tmp_path):
    rc, _, err = _run(capsys, tmp_path, COLUMN_3D,
                      ["grid.nx=12", "grid.ny=12", "grid.nz=24", "levelset.method=clsvof",
                       "time.dt=0.05", "time.end=1.0"])
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: bubbly_column_3d_flow: the flow left its physical bounds "
                               "at step 1 (t = 0.05): volume fraction -0.1"), lines[0]
    with h5py.File(tmp_path / "bubbly_column_3d_flow.h5") as fh:
        assert fh.attrs["run_status"] == "failed" and fh["fields/time"][0] == 0.0


def test_the_blow_up_on_two_ranks_is_said_once_and_the_run_failed(tmp_path):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    proc = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "bubbleflow", "run",
                           COLUMN, "--backend", "numpy", "--no-progress", "-o", str(tmp_path),
                           *_sets(FIXED_DT)], capture_output=True, text=True, timeout=300,
                          env=child_env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "the flow left its physical bounds at step 1" in lines[0], \
        proc.stderr
    assert "volume fraction" in lines[0]
    with h5py.File(tmp_path / "bubbly_column_flow.h5") as fh:
        assert fh.attrs["run_status"] == "failed"


# ------------------------------------------------------- no false positives

@pytest.mark.parametrize("case,overrides,steps", [
    ("two_phase.yaml", ["grid.nx=20", "grid.ny=40"], 8),
    ("hysing_case2.yaml", ["grid.nx=20", "grid.ny=40",
                           "levelset.method=clsvof"], 8),
    ("bubbly_column_flow.yaml", ["grid.nx=16", "grid.ny=32"], 8),
    ("rising_bubble_3d.yaml", ["grid.nx=8", "grid.ny=8", "grid.nz=16",
                               "levelset.method=clsvof"], 4),
    ("bubbly_column_3d_flow.yaml", ["grid.nx=12", "grid.ny=12", "grid.nz=24"], 4),
    ("two_phase.yaml", ["grid.nx=16", "grid.ny=32",
                        "geometry.bubbles=[]"], 4),
])
def test_shipped_cases_stay_inside_the_bounds(backend, case, overrides, steps):
    case = load_case(os.path.join(ROOT, "cases", case), ["backend=numpy", *overrides])
    solver = flow_solver(case, backend)
    state = solver.initial_state()
    d0 = solver.diagnostics(state)
    gas = d0["area" if "area" in d0 else "volume"]
    for _ in range(steps):
        state, rep = solver.step(state)
        assert solver.bounds.broken(rep, gas) == "", (rep.step, rep.bounds)
        assert rep.bounds["cfl"] <= CFL_LIMIT and rep.bounds["not_finite"] == 0.0


# ------------------------------------------------------ each bound, crafted

def _grid(ndim):
    return Grid.regular((24, 48) if ndim == 2 else (12, 12, 24),
                        (0.5, 1.0) if ndim == 2 else (0.5, 0.5, 1.0))


def _state(backend, ndim, clsvof=True):
    """A resting bubble of radius 0.15 m at the box's middle: level set,
    zero face velocities, and a volume fraction of 0 and 1 (``clsvof``)."""
    g = _grid(ndim)
    centres = np.meshgrid(*reversed(g.centres), indexing="ij")    # array-axis order
    middle = [0.5 * length for length in reversed(g.lengths)]
    phi = np.sqrt(sum((x - m) ** 2 for x, m in zip(centres, middle))) - 0.15
    velocity = [np.zeros(g.faces_shape(a)) for a in range(ndim)]
    c = (phi < 0).astype(float) if clsvof else None
    xp = backend.xp
    up = (lambda a: None if a is None else xp.asarray(a))
    return g, SimpleNamespace(phi=up(phi), velocity=[up(v) for v in velocity], c=up(c))


def _report(figures, dt=0.01, divergence=1e-12, **diagnostics):
    return SimpleNamespace(bounds=figures, dt=dt, divergence=divergence, diagnostics=diagnostics)


def _broken(backend, ndim, change=None, clsvof=True, dt=0.01, gas=None, **diagnostics):
    """What the bounds say of the resting bubble after ``change(state, grid)``."""
    g, s = _state(backend, ndim, clsvof)
    old_phi, old_velocity = s.phi.copy(), [v.copy() for v in s.velocity]
    if change is not None:
        change(s, g)
    bounds = FlowBounds(g, clsvof)
    figures = bounds.measure(old_phi, old_velocity, s.phi, s.velocity, s.c, dt)
    return bounds.broken(_report(figures, dt, **diagnostics), gas)


@pytest.mark.parametrize("ndim", [2, 3])
def test_a_resting_bubble_is_inside_the_bounds(backend, ndim):
    size = "area" if ndim == 2 else "volume"
    centroid = {f"centroid_{a}": 0.5 * length for a, length in zip("xyz", _grid(ndim).lengths)}
    assert _broken(backend, ndim, gas=0.07, **{size: 0.07}, **centroid) == ""
    assert _broken(backend, ndim, clsvof=False, gas=0.07, **{size: 0.07}, **centroid) == ""


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("value,said", [(1.3e8, "volume fraction 1.3e+08 outside [0, 1]"),
                                        (-0.25, "volume fraction -0.25 outside [0, 1]"),
                                        (1 + 1e-3, "volume fraction 1.001 outside [0, 1]"),
                                        (1 + FRACTION_TOLERANCE / 2, ""),
                                        (-FRACTION_TOLERANCE / 2, "")])
def test_the_volume_fraction_stays_in_0_1_up_to_rounding(backend, ndim, value, said):
    def change(s, g):
        s.c[tuple(n // 2 for n in g.shape)] = value          # the bubble's middle cell
    assert _broken(backend, ndim, change) == said


@pytest.mark.parametrize("ndim", [2, 3])
def test_the_cfl_number_of_the_step_is_named_with_its_limit(backend, ndim):
    dt = 0.01
    g, s = _state(backend, ndim)
    h = g.spacing[-1]
    # The bound reads the velocity the step starts from: here 2 cells a step
    # upward (a fast new velocity alone is the next step's).
    old_velocity = [v.copy() for v in s.velocity]
    old_velocity[-1][1, ...] = 2.0 * h / dt
    bounds = FlowBounds(g, True)
    figures = bounds.measure(s.phi, old_velocity, s.phi, s.velocity, s.c, dt)
    assert figures["cfl"] == pytest.approx(2.0)
    said = bounds.broken(_report(figures, dt), None)
    assert said == ("advective CFL number max|u| dt / h = 2 (dt = 0.01 s) above the "
                    f"{CFL_LIMIT:g} the scheme can take")
    figures = bounds.measure(s.phi, s.velocity, s.phi, old_velocity, s.c, dt)
    assert figures["cfl"] == 0.0 and bounds.broken(_report(figures, dt), None) == ""


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("clsvof", [True, False])
def test_gas_created_far_from_the_interface(backend, ndim, clsvof):
    def far(s, g):            # gas in a corner cell, 10 to 18 cells from the bubble
        s.phi[(0,) * ndim] = -0.01
        if clsvof:
            s.c[(0,) * ndim] = 1.0

    def near(s, g):           # the bubble one cell wider
        s.phi -= max(g.spacing)
        if clsvof:
            s.c[...] = (s.phi < 0) * 1.0

    g, s = _state(backend, ndim)
    corner = float(backend.to_host(s.phi)[(0,) * ndim]) / max(g.spacing)
    assert corner > FAR_GAS_CELLS
    assert _broken(backend, ndim, far, clsvof) == (
        f"gas created {corner:.3g} cells from the interface (a step carries it at most "
        f"{FAR_GAS_CELLS:g})")
    assert _broken(backend, ndim, near, clsvof) == ""


@pytest.mark.parametrize("ndim", [2, 3])
def test_the_gas_centroid_stays_in_the_box(backend, ndim):
    size = "area" if ndim == 2 else "volume"
    inside = {f"centroid_{a}": 0.5 * length for a, length in zip("xyz", _grid(ndim).lengths)}
    below = dict(inside, **{f"centroid_{'xyz'[ndim - 1]}": -2.8e4})
    said = _broken(backend, ndim, gas=0.07, **{size: 0.07}, **below)
    assert said == f"gas centroid_{'xyz'[ndim - 1]} -2.8e+04 m outside the box [0, 1] m"


@pytest.mark.parametrize("clsvof,change,trips", [
    (False, 0.11, False),                        # the level set's loss on the shipped column
    (False, -1.5 * VOLUME_CHANGE_LIMIT, True),
    (False, 1.5 * VOLUME_CHANGE_LIMIT, True),
    (True, 1e-11, False),                        # CLSVOF's rounding
    (True, 10 * CLSVOF_VOLUME_CHANGE_LIMIT, True),
])
def test_the_gas_volume_keeps_within_its_limit(backend, clsvof, change, trips):
    centroid = {"centroid_x": 0.25, "centroid_y": 0.5}
    said = _broken(backend, 2, clsvof=clsvof, gas=0.07, area=0.07 * (1 + change), **centroid)
    limit = CLSVOF_VOLUME_CHANGE_LIMIT if clsvof else VOLUME_CHANGE_LIMIT
    if trips:
        assert said == (f"gas area changed by {change:+.3g} of the initial 0.07 "
                        f"(at most {limit:g})"), said
    else:
        assert said == ""


@pytest.mark.parametrize("ndim", [2, 3])
def test_non_finite_values_are_named(backend, ndim):
    def nan(s, g):
        s.velocity[0][(0,) * ndim] = np.nan
    assert _broken(backend, ndim, nan) == "non-finite values in the fields or the diagnostics"
    size = "area" if ndim == 2 else "volume"
    assert _broken(backend, ndim, gas=0.07, **{size: math.inf}).startswith("non-finite")


def test_without_gas_the_undefined_bubble_quantities_are_no_bound(backend):
    nan = float("nan")
    assert _broken(backend, 2, gas=None, area=0.0, centroid_x=nan, centroid_y=nan,
                   rise_velocity=nan) == ""
    assert _broken(backend, 2, gas=0.0, area=0.0, centroid_x=nan) == ""


class _TwoRanks:
    """A communicator of two ranks whose other rank measured ``other``."""

    size = 2

    def __init__(self, other):
        self.other = other

    def allreduce_max_into(self, send, out):
        xp = backend_of(send).xp
        out[...] = xp.maximum(send, xp.asarray(self.other))


def test_on_ranks_the_figures_are_the_largest_of_the_ranks(backend):
    g, s = _state(backend, 2)
    other = np.array([0.0, 0.5, 3.0, 0.2, 10.0])     # not_finite, -min c, max c, cfl, far gas
    bounds = FlowBounds(g, True, _TwoRanks(other))
    figures = bounds.measure(s.phi, s.velocity, s.phi, s.velocity, s.c, 0.01)
    assert figures["fraction_low"] == 0.5 and figures["fraction_high"] == 3.0
    assert figures["far_gas"] == 10.0 and figures["cfl"] == 0.2
    said = bounds.broken(_report(figures), None)
    assert said.startswith("volume fraction 3 outside [0, 1]; gas created")


# ------------------------------------------------------- the kernel and its twin

def _figure_fields(xp, shape, clsvof, seed, poison=None):
    """Random level sets, face velocities of every axis and a volume fraction on ``shape``."""
    rng = np.random.default_rng(seed)
    faces = [tuple(n + (a == axis) for a, n in enumerate(shape)) for axis in
             reversed(range(len(shape)))]          # x (the last axis) first
    fields = {"old_phi": rng.standard_normal(shape), "phi": rng.standard_normal(shape),
              "old": [rng.standard_normal(f) for f in faces],
              "new": [rng.standard_normal(f) for f in faces],
              "c": rng.uniform(-0.1, 1.1, shape) if clsvof else None}
    if poison is not None:
        fields["new"][-1].flat[7] = poison
    put = lambda a: None if a is None else xp.asarray(a)   # noqa: E731
    return (put(fields["old_phi"]), [put(a) for a in fields["old"]], put(fields["phi"]),
            [put(a) for a in fields["new"]], put(fields["c"]))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(12, 7), (9, 6, 5)])
@pytest.mark.parametrize("clsvof", [True, False])
@pytest.mark.parametrize("poison", [None, np.inf, np.nan])
def test_the_figures_kernel_gives_the_array_codes_bits(shape, clsvof, poison, cupy_backend):
    from bubbleflow.flow import bounds

    cp = cupy_backend.xp
    old_phi, old, phi, new, c = _figure_fields(cp, shape, clsvof, seed=len(shape), poison=poison)
    steps = tuple(0.01 * (a + 1) for a in range(len(shape)))
    kernel = bounds.field_figures.variant("cupy")(old_phi, tuple(old), phi, tuple(new), c, steps,
                                                  FRACTION_TOLERANCE)
    assert kernel is not NotImplemented
    reference = bounds.field_figures.reference(
        cp.asnumpy(old_phi), tuple(map(cp.asnumpy, old)), cp.asnumpy(phi), tuple(map(cp.asnumpy, new)), None if c is None else cp.asnumpy(c), steps,
        FRACTION_TOLERANCE)
    assert cp.asnumpy(kernel).tolist() == reference.tolist()
    assert cp.asnumpy(kernel)[0] == (0.0 if poison is None else 1.0)
