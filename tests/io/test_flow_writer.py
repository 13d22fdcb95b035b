"""Snapshots written in the background: the step goes on while a
snapshot is written, the files are those of a synchronous writer, and a write
error is not lost."""
import errno
import os
import threading
import time
import types

import h5py
import numpy as np
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.compute.backend import get_backend
from bubbleflow.io import flow_output, result_writer, run_paths
from bubbleflow.io.flow_output import FlowWriter, SnapshotWriteError
from bubbleflow.mesh.grid import Grid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASE = os.path.join(ROOT, "cases", "two_phase.yaml")
SMALL = ["--no-progress", "--set", "grid.nx=16", "--set", "grid.ny=32",
         "--set", "output.interval=0.05",
         "--set", "time.end=0.3"]


def run(tmp, backend, *extra):
    return main(["run", CASE, "--backend", backend.name, "-o", str(tmp), *SMALL, *extra])


def read_all(index):
    """Every dataset of the index (virtual fields read through) and of every snapshot file."""
    out = {}
    with h5py.File(index, "r") as fh:
        fh.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                      else None)
        out["@run_status"] = fh.attrs["run_status"]
    folder = run_paths.run_folder(index)
    for name in sorted(os.listdir(folder)):
        with h5py.File(os.path.join(folder, name), "r") as fh:
            fh.visititems(lambda n, o, name=name: out.__setitem__(f"{name}/{n}", o[()])
                          if isinstance(o, h5py.Dataset) else None)
    return out


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        if not (name.startswith("solver/") and name.endswith("seconds")):     # timings
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, backend):
    """The run with synchronous writes (``FlowWriter.background = False``), the reference."""
    out = tmp_path_factory.mktemp("sync")
    old = FlowWriter.background
    FlowWriter.background = False
    try:
        assert run(out, backend) == 0
    finally:
        FlowWriter.background = old
    return read_all(out / "two_phase.h5")


def test_slow_writer_gives_the_same_files(tmp_path, backend, reference, monkeypatch):
    real = result_writer.write_snapshot
    threads = set()

    def slow(*a, **kw):
        threads.add(threading.current_thread().name)
        time.sleep(0.15)
        real(*a, **kw)

    monkeypatch.setattr(result_writer, "write_snapshot", slow)
    assert run(tmp_path, backend) == 0
    assert threads and all(t.startswith("bubbleflow-writer") for t in threads)
    assert_same(reference, read_all(tmp_path / "two_phase.h5"))
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_the_loop_steps_while_a_snapshot_is_written(tmp_path, backend, reference, monkeypatch):
    """The writer is held in its second snapshot until the main loop has done a step."""
    real_write, real_step = result_writer.write_snapshot, FlowWriter.write_step
    real_submit = FlowWriter.write_snapshot
    held, released = threading.Event(), threading.Event()
    seen = {"steps": 0, "calls": 0, "submitted": 0}

    def holding_write(*a, **kw):
        seen["calls"] += 1
        if seen["calls"] == 2:
            held.set()
            assert released.wait(60), "no step completed while the writer was held"
        real_write(*a, **kw)

    def counting_submit(self, *a, **kw):
        seen["submitted"] += 1
        return real_submit(self, *a, **kw)

    def counting_step(self, report, initial=False):
        real_step(self, report, initial)
        # The first step after the second snapshot was handed over: it
        # completes once the writer holds that snapshot (a loop that reached
        # the next snapshot first would wait there for the writer).
        if seen["submitted"] >= 2 and not released.is_set():
            assert held.wait(60), "the writer never took the second snapshot"
            seen["steps"] += 1
            released.set()

    monkeypatch.setattr(result_writer, "write_snapshot", holding_write)
    monkeypatch.setattr(FlowWriter, "write_snapshot", counting_submit)
    monkeypatch.setattr(FlowWriter, "write_step", counting_step)
    assert run(tmp_path, backend) == 0
    assert seen["steps"] == 1
    assert_same(reference, read_all(tmp_path / "two_phase.h5"))


@pytest.mark.parametrize("background", [True, False])
@pytest.mark.parametrize("where", ["snapshot", "index", "last snapshot"])
def test_write_error_fails_the_run_in_one_line(tmp_path, backend, reference, monkeypatch,
                                               capsys, where, background):
    """A full disk in the writer: one line, exit 1, an index that restarts to the same run."""
    monkeypatch.setattr(FlowWriter, "background", background)
    real_snap, real_index = result_writer.write_snapshot, result_writer.write_flow_index
    calls = {"snapshot": 0, "index": 0}

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    def snap(path, step, t, fields, compression=None):
        calls["snapshot"] += 1
        if (where == "snapshot" and calls["snapshot"] == 3) or \
                (where == "last snapshot" and t >= 0.3 - 1e-12):
            full(path)
        real_snap(path, step, t, fields, compression)

    def index(path, **kw):
        calls["index"] += 1
        if where == "index" and calls["index"] == 3:
            full(path)
        real_index(path, **kw)

    monkeypatch.setattr(result_writer, "write_snapshot", snap)
    monkeypatch.setattr(result_writer, "write_flow_index", index)
    rc = run(tmp_path, backend)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1 and "No space left on device" in err[0] and "Traceback" not in err[0]
    assert err[0].startswith("error: two_phase: cannot write the ")
    assert ("step_" in err[0]) == (where != "index")
    index_path = tmp_path / "two_phase.h5"
    got = read_all(index_path)                     # every snapshot listed is on disk
    assert got["@run_status"] == "failed"
    n = len(got["fields/step"])
    assert n == {"snapshot": 2, "index": 3, "last snapshot": len(reference["fields/step"]) - 1}[where]
    np.testing.assert_array_equal(got["fields/p"], reference["fields/p"][:n])
    monkeypatch.undo()
    assert run(tmp_path, backend, "--restart", str(index_path)) == 0
    got = read_all(index_path)
    assert_same({k: v for k, v in reference.items() if k != "@run_status"},
                {k: v for k, v in got.items() if k != "@run_status"})


# ---------------------------------------------------------------- the writer alone
def _report(step):
    rec = types.SimpleNamespace(iterations=step, residual=1e-9, converged=True,
                                setup_seconds=0.0, solve_seconds=0.0, reason="converged",
                                residual_history=[1.0, 1e-9], true_residual_checks=[(step, 1e-9)])
    diag = {"area": 1.0, "centroid_y": 0.5, "rise_velocity": 0.0, "circularity": 1.0}
    return types.SimpleNamespace(step=step, time=0.1 * step, dt=0.1, divergence=0.0,
                                 diagnostics=diag, record=rec, setup_seconds=0.0)


def _state(grid, step, xp=np):
    base = float(step)
    return types.SimpleNamespace(
        phi=xp.full((grid.ny, grid.nx), base), p=xp.full((grid.ny, grid.nx), -base),
        u=xp.full((grid.ny, grid.nx + 1), 2 * base), v=xp.full((grid.ny + 1, grid.nx), 3 * base),
        step=step, time=0.1 * step)


def test_a_commit_lists_exactly_the_rows_and_snapshots_up_to_it(tmp_path, monkeypatch):
    backend = get_backend("numpy")
    grid = Grid(4, 6)
    real = result_writer.write_snapshot
    go = threading.Event()

    def held(*a, **kw):
        assert go.wait(60)
        real(*a, **kw)

    monkeypatch.setattr(result_writer, "write_snapshot", held)
    w = FlowWriter.create(tmp_path / "run.h5", {"case": "x"}, grid)
    w.write_step(_report(0), initial=True)
    state = _state(grid, 0)
    t = time.perf_counter()
    w.write_snapshot(state, state.phi + 1, backend.to_host)
    assert time.perf_counter() - t < 5 and not (tmp_path / "run.h5").exists()
    state.phi[...] = 99.0                   # the copy was taken: later changes are not written
    for step in (1, 2, 3):                  # rows after the snapshot, while it is written
        w.write_step(_report(step))
    w.set_attrs(wall_seconds=5.0)
    go.set()
    w.wait()
    with h5py.File(tmp_path / "run.h5", "r") as fh:
        assert fh.attrs["run_status"] == "running" and "wall_seconds" not in fh.attrs
        assert fh["diagnostics/step"][()].tolist() == [0]
        assert fh["solver/step"].shape == (0,) and fh["fields/step"][()].tolist() == [0]
        assert (fh["fields/phi"][0] == 0.0).all() and (fh["fields/rho"][0] == 1.0).all()
    w.write_snapshot(_state(grid, 3), state.phi, backend.to_host)
    w.close("finished")
    with h5py.File(tmp_path / "run.h5", "r") as fh:
        assert fh.attrs["run_status"] == "finished" and fh.attrs["wall_seconds"] == 5.0
        assert fh["diagnostics/step"][()].tolist() == [0, 1, 2, 3]
        assert fh["solver/iterations"][()].tolist() == [1, 2, 3]
        assert fh["fields/step"][()].tolist() == [0, 3]
        assert (fh["fields/v"][1] == 9.0).all()


def test_host_buffers_are_allocated_once(tmp_path, backend):
    grid = Grid(4, 6)
    w = FlowWriter.create(tmp_path / "run.h5", {"case": "x"}, grid)
    w.write_step(_report(0), initial=True)
    buffers = None
    for step in range(3):
        state = _state(grid, step, backend.xp)
        w.write_snapshot(state, state.phi, backend.to_host)
        if buffers is None:
            buffers = [id(h) for h in w._copy.host]
        assert [id(h) for h in w._copy.host] == buffers
    w.close()
    with h5py.File(tmp_path / "run.h5", "r") as fh:
        np.testing.assert_array_equal(fh["fields/p"][:, 0, 0], [0.0, -1.0, -2.0])


def test_to_host_async_copies_now_and_reuses_its_buffers(backend):
    xp = backend.xp
    a = xp.arange(12.0).reshape(3, 4)
    first = backend.to_host_async([a, np.ones(2)])
    a[...] = -1.0                            # after the call: not in the copy
    host = first.wait()
    np.testing.assert_array_equal(host[0], np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(host[1], [1.0, 1.0])
    second = backend.to_host_async([a, np.zeros(2)], reuse=first)
    assert [h is g for h, g in zip(second.wait(), host)] == [True, True]
    assert (second.host[0] == -1.0).all() and (second.host[1] == 0.0).all()
    third = backend.to_host_async([a[:2], np.zeros(2)], reuse=second)    # another shape
    assert third.wait()[0].shape == (2, 4) and third.host[0] is not host[0]


def test_extra_fields_go_into_the_snapshot_file(tmp_path, backend):
    grid = Grid(4, 6)
    w = FlowWriter.create(tmp_path / "run.h5", {"case": "x"}, grid)
    w.write_step(_report(0), initial=True)
    state = _state(grid, 0, backend.xp)
    dyn = backend.xp.full((grid.ny, grid.nx), 7.0)
    w.write_snapshot(state, state.phi, backend.to_host,
                     extra={"p_dynamic": dyn, "u_host": np.ones((grid.ny, grid.nx + 1))})
    for bad in ({"u": dyn}, {"velocity": dyn}, {"a/b": dyn}, {"wrong": np.ones((3, 3))}):
        with pytest.raises(ValueError):
            w.write_snapshot(_state(grid, 1), state.phi, backend.to_host, extra=bad)
    assert w.last_snapshot_step == 0
    w.close()
    with h5py.File(tmp_path / "run.h5", "r") as fh:
        # A field the layout knows is listed in the index too; any other is not.
        assert fh["fields/step"].shape == (1,) and "u_host" not in fh["fields"]
        assert (fh["fields/p_dynamic"][0] == 7.0).all()
        assert fh["fields/p_dynamic"].attrs["units"] == "Pa"
    with h5py.File(os.path.join(w.folder, run_paths.snapshot_name(0)), "r") as fh:
        assert (fh["p_dynamic"][()] == 7.0).all() and fh["p_dynamic"].dtype == np.float64
        assert (fh["u_host"][()] == 1.0).all() and "units" not in fh["u_host"].attrs
        assert fh["p_dynamic"].attrs["units"] == "Pa"          # a field the layout knows
        assert set(fh) == {"phi", "rho", "p", "u", "v", "velocity", "p_dynamic", "u_host"}


def test_error_of_a_background_write_is_raised_at_the_next_snapshot_and_at_close(tmp_path,
                                                                                 monkeypatch):
    backend = get_backend("numpy")
    grid = Grid(4, 6)

    def refuse(path, *a, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(result_writer, "write_snapshot", refuse)
    w = FlowWriter.create(tmp_path / "run.h5", {"case": "x"}, grid)
    w.write_step(_report(0), initial=True)
    w.write_snapshot(_state(grid, 0), np.zeros((6, 4)), backend.to_host)    # returns at once
    with pytest.raises(SnapshotWriteError, match="Permission denied") as info:
        w.write_snapshot(_state(grid, 1), np.zeros((6, 4)), backend.to_host)
    assert "step_000000000.h5" in str(info.value) and "\n" not in str(info.value)
    assert w.snapshots == [] and isinstance(info.value.__cause__, PermissionError)
    w.write_snapshot(_state(grid, 1), np.zeros((6, 4)), backend.to_host)
    with pytest.raises(SnapshotWriteError, match="step 1,"):
        w.close()
    assert not w.closed
    w.close("failed")                       # nothing in flight: the index, without snapshots
    with h5py.File(tmp_path / "run.h5", "r") as fh:
        assert fh.attrs["run_status"] == "failed" and fh["fields/step"].shape == (0,)
    assert flow_output.SnapshotWriteError is SnapshotWriteError
