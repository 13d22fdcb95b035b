"""The warm-up of a flow's kernels (flow/warm_up.py): its small copy of the
case, its host-built state, and its work run on the suite's backend."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import warm_up
from bubbleflow.flow.gas_regions import GasRegions
from helpers.cli import ROOT

TWO_PHASE = os.path.join(ROOT, "cases/two_phase.yaml")
RISING_3D = os.path.join(ROOT, "cases/rising_bubble_3d.yaml")


@pytest.mark.parametrize("cells, small", [
    ((40, 80), (40, 80)),
    ((32, 32, 64), (32, 32, 64)),
    ((256, 256, 512), (32, 32, 64)),
    ((8192, 8192), (256, 256)),
    ((1024, 24), (1024, 24)),           # halving would leave 12 cells along y
    ((4097, 4096), (4097, 4096)),       # an odd count is not halved
])
def test_small_cells(cells, small):
    assert warm_up.small_cells(cells) == small


def test_no_small_copy_of_a_large_grid_of_odd_counts(monkeypatch):
    from types import SimpleNamespace

    case = load_case(TWO_PHASE, ["grid.nx=1001", "grid.ny=2001"])
    assert warm_up.small_case(case) is None
    monkeypatch.setattr(warm_up, "spare_cores", lambda: 8)
    assert warm_up.start(case, SimpleNamespace(on_device=True)) is None


def test_small_case_keeps_the_domain():
    case = load_case(RISING_3D, ["grid.nx=128", "grid.ny=128", "grid.nz=256"])
    small = warm_up.small_case(case)
    assert small.grid.cells == (32, 32, 64)
    assert small.grid.lengths == case.grid.lengths
    assert small.geometry == case.geometry and small.solver == case.solver
    assert warm_up.small_case(load_case(TWO_PHASE)) == load_case(TWO_PHASE)


@pytest.mark.parametrize("method", ["clsvof", "levelset"])
def test_host_state(method):
    case = load_case(TWO_PHASE, [f"levelset.method={method}"])
    state = warm_up.host_state(case, np)
    assert state.phi.shape == (80, 40) and state.p.shape == (80, 40)
    assert [u.shape for u in state.velocity] == [(80, 41), (81, 40)]
    if method == "levelset":
        assert state.c is None
    else:
        assert state.c.min() == 0.0 and state.c.max() == 1.0
        assert np.all((state.c == 1.0) == (state.phi <= -0.5 * 1 / 40))


@pytest.mark.parametrize("path, overrides", [
    (TWO_PHASE, []),
    (RISING_3D, ["grid.nx=12", "grid.ny=12", "grid.nz=24"]),
])
def test_jobs_run_on_the_backend(path, overrides, backend):
    """Each job runs on the suite's backend: one gas region, a converged
    step, a converged pressure solve."""
    case = load_case(path, overrides + ["output.bubbles_every=0"])
    regions, step, pressure = warm_up.jobs(case, backend)
    found = regions()
    assert isinstance(found, GasRegions) and len(found.volume) == 1
    report = step()
    assert report.step == 1 and report.record.converged
    record = pressure()
    assert record.converged and record.iterations > 0


def test_no_warm_up_on_the_host():
    from bubbleflow.compute.backend import get_backend

    assert warm_up.start(load_case(TWO_PHASE), get_backend("numpy")) is None


@pytest.mark.gpu
def test_warm_up_on_the_device_ends_without_errors(cupy_backend):
    case = load_case(RISING_3D, ["grid.nx=12", "grid.ny=12", "grid.nz=24"])
    started = warm_up.start(case, cupy_backend)
    assert started is not None and len(started.jobs) == 3
    started.join()
    assert not any(job.is_alive() for job in started.jobs)
    assert started.errors == []


def test_a_warm_up_that_cannot_start_leaves_the_run_alone(monkeypatch):
    """A case the small copy cannot be made of: no warm-up, no error."""
    from types import SimpleNamespace

    def refuse(case, backend):
        raise ValueError("no small copy")

    monkeypatch.setattr(warm_up, "jobs", refuse)
    monkeypatch.setattr(warm_up, "spare_cores", lambda: 8)
    assert warm_up.start(load_case(TWO_PHASE), SimpleNamespace(on_device=True)) is None
