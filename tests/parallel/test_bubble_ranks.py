"""``mpiexec -n 2 bubbleflow run``: the ranks' bubble tables (the tracker on
rank 0, fed the gathered state) are one process's: the same samples, ids
and events, the measures to rounding; a run of the ranks restarted from a
checkpoint before the merge ends with the same tables."""
import subprocess
import sys

import h5py
import numpy as np
import pytest

from helpers.launcher import ROOT, child_env, mpiexec

MERGE = ["--no-progress", "-q", "--set", "grid.nx=20",
         "--set", "grid.ny=40",
         "--set", "output.interval=0.1",
         "--set", "geometry.bubbles=[{center: [0.5, 0.45], radius: 0.2}, "
                  "{center: [0.5, 0.92], radius: 0.2}]"]
EXACT = ("step", "id", "events/step", "events/kind", "events/id", "events/other")


def run(ranks, folder, end, *more, backend="numpy"):
    cmd = [sys.executable, "-m", "bubbleflow", "run", str(ROOT / "cases" / "two_phase.yaml"),
           "--backend", backend, *MERGE, "--set", f"time.end={end}", "-o", str(folder), *more]
    if ranks > 1:
        cmd = [mpiexec(), "-n", str(ranks)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=child_env(),
                          cwd=folder.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    with h5py.File(folder / "two_phase.h5", "r") as fh:
        fh["bubbles"].visititems(lambda name, obj: out.__setitem__(name, obj[()])
                                 if isinstance(obj, h5py.Dataset) else None)
    return out


def _same_tables(got, one):
    """``got``'s bubble tables are ``one``'s: the ids, steps and events
    exactly, the measures to rounding."""
    assert sorted(got) == sorted(one)
    for name, values in one.items():
        if name in EXACT:
            np.testing.assert_array_equal(got[name], values, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], values, rtol=1e-9, atol=1e-12, err_msg=name)


def test_the_ranks_track_the_bubbles_of_one_process(tmp_path):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    one = run(1, tmp_path / "one", 0.5)
    two = run(2, tmp_path / "two", 0.5)
    run(2, tmp_path / "half", 0.3)
    cont = run(2, tmp_path / "half", 0.5, "--restart", str(tmp_path / "half" / "two_phase.h5"))
    assert one["events/kind"].tolist() == [0, 0, 1]          # created twice, merged once
    for got in (two, cont):
        _same_tables(got, one)


@pytest.mark.gpu
def test_the_ranks_on_the_gpu_track_the_bubbles_of_one_process(tmp_path, cupy_backend):
    """On CuPy: each sample's slabs gathered on rank 0's device (device to
    device on NCCL) and labelled there give one process's tables."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    every = ["--set", "output.bubbles_every=1"]
    one = run(1, tmp_path / "one", 0.5, *every, backend="cupy")
    two = run(2, tmp_path / "two", 0.5, *every, backend="cupy")
    assert one["events/kind"].tolist() == [0, 0, 1]
    _same_tables(two, one)


def test_a_trackers_state_that_cannot_be_read_is_one_line_on_the_ranks(tmp_path):
    """Checked on rank 0 before the ranks start: one line, said once."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    folder = tmp_path / "run"
    run(1, folder, 0.05)
    index = folder / "two_phase.h5"
    snapshots = sorted(folder.glob("two_phase.snapshots/*/*.h5"))
    assert snapshots, list(folder.rglob("*"))
    with h5py.File(snapshots[-1], "a") as fh:
        del fh["bubble_tracker/ids"]
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "bubbleflow", "run",
           str(ROOT / "cases" / "two_phase.yaml"), "--backend", "numpy", *MERGE,
           "--set", "time.end=0.1",
           "-o", str(folder), "--restart", str(index)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=child_env(),
                          cwd=folder.parent)
    err = [line for line in proc.stderr.strip().splitlines() if "bubble tracker" in line]
    assert proc.returncode == 2 and len(err) == 1, proc.stdout + proc.stderr
    assert "'ids' missing" in err[0] and "Traceback" not in proc.stderr
