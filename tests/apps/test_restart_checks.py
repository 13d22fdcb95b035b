"""A restart from a checkpoint whose snapshot arrays do not fit the case's
grid is refused in one line (the file, the array, its shape, the expected
shape), exit 2, before anything is moved aside or written."""
import glob
import os
import shutil

import h5py
import numpy as np
import pytest

from helpers.cli import run_cli

COMMON = ["--backend", "numpy", "--no-progress", "--set", "grid.nx=20", "--set", "grid.ny=40"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A tiny flow run to t = 0.02: its index file (checkpoint at step 1)."""
    out = tmp_path_factory.mktemp("run")
    res = run_cli("run", "cases/two_phase.yaml", "-o", str(out), *COMMON, "--set", "time.end=0.02")
    assert res.returncode == 0, res.stderr
    return out / "two_phase.h5"


@pytest.fixture
def crafted(finished, tmp_path):
    """A copy of the run (index and snapshots) whose last snapshot the test edits."""
    folder = tmp_path / "crafted"
    shutil.copytree(finished.parent, folder)
    index = folder / "two_phase.h5"
    last = sorted(glob.glob(str(folder / "two_phase.snapshots" / "*" / "step_*.h5")))[-1]
    return index, last


def _replace(snapshot, name, value):
    with h5py.File(snapshot, "a") as fh:
        if name in fh:
            del fh[name]
        if value is not None:
            fh[name] = value


def _restart(index, out):
    return run_cli("run", "cases/two_phase.yaml", "-o", str(out), *COMMON,
                   "--set", "time.end=0.05", "--restart", str(index))


@pytest.mark.parametrize("name, value, said", [
    ("u", np.zeros((3, 3)), "array 'u' of the checkpoint at step 1 has shape (3, 3), dtype float64"),
    ("v", np.zeros((40, 20)), "array 'v' of the checkpoint at step 1 has shape (40, 20)"),
    ("phi", np.zeros((40, 20), dtype=np.int64), "array 'phi' of the checkpoint at step 1 has "
                                                "shape (40, 20), dtype int64"),
    ("p_dynamic", np.zeros((20, 40)), "array 'p_dynamic' of the checkpoint at step 1 has shape "
                                      "(20, 40)"),
    ("phi", np.float64(1.5), "array 'phi' of the checkpoint at step 1 is not an array"),
    ("u", np.bytes_(b"text"), "array 'u' of the checkpoint at step 1 is not an array"),
    ("u", None, "the checkpoint at step 1 has no array 'u'"),
])
def test_a_checkpoint_array_that_does_not_fit_is_one_line(crafted, tmp_path, name, value, said):
    index, snapshot = crafted
    _replace(snapshot, name, value)
    out = tmp_path / "out"
    res = _restart(index, out)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    line = lines[0]
    # The file (a long path is shortened from its start).
    assert line.startswith("error: ") and "crafted/two_phase.h5: " in line, line
    assert said in line, line
    expected = {"u": "(40, 21)", "v": "(41, 20)"}.get(name, "(40, 20)")
    assert f"expected a floating-point array of shape {expected} (grid 20 x 40)" in line, line
    # Nothing written: no result, no snapshot folder (only the hidden lock file).
    written = [f for f in os.listdir(out) if not f.startswith(".")] if out.exists() else []
    assert written == []


def test_a_refused_in_place_restart_leaves_the_run_as_it_was(crafted):
    """Restarting into the run's own folder with --overwrite: the previous
    result is not moved aside and no byte of it changes."""
    index, snapshot = crafted
    _replace(snapshot, "v", np.zeros((7, 7)))
    folder = index.parent
    before = {p: open(p, "rb").read() for p in glob.glob(str(folder / "**" / "*.h5"),
                                                         recursive=True)}
    res = run_cli("run", "cases/two_phase.yaml", "-o", str(folder), *COMMON, "--overwrite",
                  "--set", "time.end=0.05", "--restart", str(index))
    assert res.returncode == 2 and "array 'v'" in res.stderr, res.stderr
    after = {p: open(p, "rb").read() for p in glob.glob(str(folder / "**" / "*.h5"),
                                                        recursive=True)}
    assert after == before
    assert not glob.glob(str(folder / "*previous*"))


def test_a_fitting_checkpoint_still_restarts(crafted, tmp_path):
    """The check passes the arrays a run writes (and float32 ones)."""
    index, snapshot = crafted
    with h5py.File(snapshot, "r") as fh:
        phi = fh["phi"][()]
    _replace(snapshot, "phi", phi.astype(np.float32))
    res = _restart(index, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "two_phase.h5").exists()
