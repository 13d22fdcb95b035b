"""Runs killed at any instant restart and reproduce the uninterrupted run bit for bit;
no result is replaced or lost silently; two runs cannot share one output."""
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILLER = os.path.join(ROOT, "tests", "helpers", "killed_run.py")
COMMON = ["run", "cases/two_phase.yaml", "--backend", "numpy", "--no-progress",
          "--set", "grid.nx=20", "--set", "grid.ny=40",
          "--set", "output.interval=0.05", "--set", "time.end=0.5"]


@pytest.fixture(scope="module", autouse=True)
def _suite_backend(pytestconfig):
    """Runs on the suite's backend (``pytest --backend cupy`` kills GPU runs)."""
    global COMMON
    name = pytestconfig.getoption("--backend")
    COMMON = [name if a == "numpy" else a for a in COMMON]


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def run_killed(where, n, *args):
    return subprocess.run([sys.executable, KILLER, where, str(n), "--", *args], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=600)


def read_all(path):
    """Every dataset of a flow index (virtual fields read through) and its status."""
    out = {}
    with h5py.File(path, "r") as fh:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
        fh.visititems(visit)
        out["@run_status"] = fh.attrs["run_status"]
        out["@run_id"] = fh.attrs["run_id"]
    return out


def assert_same_run(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        if name == "@run_id" or (name.startswith("solver/") and name.endswith("seconds")):
            continue                                        # timings differ
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    res = run_cli(*COMMON, "-o", str(out))
    assert res.returncode == 0, res.stderr
    return read_all(out / "two_phase.h5")


@pytest.mark.parametrize("where,n", [
    ("solve", 4),            # mid-step, before the second snapshot
    ("solve", 17),           # mid-step, later
    ("writing", 3),          # mid-step, while the snapshot before it is still being written
    ("snapshot", 2),         # while a snapshot file is half written
    ("before-index", 3),     # snapshot in place, index not yet updated
    ("index", 3),            # while the index is half written
])
def test_sigkill_then_restart_reproduces_the_run(where, n, tmp_path, uninterrupted):
    killed = run_killed(where, n, *COMMON, "-o", str(tmp_path))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    index = tmp_path / "two_phase.h5"
    with h5py.File(index, "r") as fh:                    # readable after the kill
        assert fh.attrs["run_status"] == "running"
        assert fh["fields/time"].shape[0] >= 1
    # A new run refuses to replace the killed one...
    again = run_cli(*COMMON, "-o", str(tmp_path))
    assert again.returncode == 2 and "--restart" in again.stderr and "Traceback" not in again.stderr
    # ...and a restart in place continues it to the same result, bit for bit.
    cont = run_cli(*COMMON, "-o", str(tmp_path), "--restart", str(index))
    assert cont.returncode == 0, cont.stderr
    assert_same_run(uninterrupted, read_all(index))
    left = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert not left, left


def test_killed_before_the_first_snapshot_leaves_nothing_to_refuse(tmp_path, uninterrupted):
    """No index before the first snapshot (it could not be restarted): a new run just starts."""
    killed = run_killed("snapshot", 1, *COMMON, "-o", str(tmp_path))
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "two_phase.h5").exists()
    again = run_cli(*COMMON, "-o", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert_same_run(uninterrupted, read_all(tmp_path / "two_phase.h5"))


def test_sigkill_from_outside_at_a_random_instant(tmp_path, uninterrupted):
    args = [sys.executable, "-m", "bubbleflow.apps.cli", *COMMON, "-o", str(tmp_path)]
    proc = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    index = tmp_path / "two_phase.h5"
    deadline = time.monotonic() + 120
    while not index.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.15)
    proc.kill()
    proc.communicate()
    with h5py.File(index, "r") as fh:
        done = fh.attrs["run_status"]
    if done == "finished":
        pytest.skip("the run finished before the kill on this machine")
    cont = run_cli(*COMMON, "-o", str(tmp_path), "--restart", str(index))
    assert cont.returncode == 0, cont.stderr
    assert_same_run(uninterrupted, read_all(index))


def test_sigterm_ends_cleanly_with_the_state_written(tmp_path, uninterrupted):
    args = [sys.executable, "-m", "bubbleflow.apps.cli", *COMMON, "-o", str(tmp_path)]
    proc = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    index = tmp_path / "two_phase.h5"
    deadline = time.monotonic() + 120
    while not index.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.15)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    with h5py.File(index, "r") as fh:
        status = fh.attrs["run_status"]
        last_diag_step = fh["diagnostics/step"][-1]
        last_snap_step = fh["fields/step"][-1]
    if status == "finished":
        pytest.skip("the run finished before SIGTERM on this machine")
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert status == "stopped" and "--restart" in err and "Traceback" not in err
    assert last_snap_step == last_diag_step                # the last state is written
    cont = run_cli(*COMMON, "-o", str(tmp_path), "--restart", str(index))
    assert cont.returncode == 0, cont.stderr
    b = read_all(index)
    # The stop adds one snapshot off the interval; every other dataset is identical.
    extra = [k for k, t in enumerate(b["fields/time"]) if t not in uninterrupted["fields/time"]]
    assert len(extra) <= 1
    keep = [k for k in range(len(b["fields/time"])) if k not in extra]
    for name in uninterrupted:
        if name.startswith("fields/"):
            np.testing.assert_array_equal(uninterrupted[name], b[name][keep], err_msg=name)
        elif not name.endswith("seconds") and name != "@run_id":
            np.testing.assert_array_equal(uninterrupted[name], b[name], err_msg=name)


def test_existing_result_is_refused_then_kept_until_the_new_run_finishes(tmp_path):
    short = [a if a != "time.end=0.5" else "time.end=0.05" for a in COMMON]
    assert run_cli(*short, "-o", str(tmp_path)).returncode == 0
    index = tmp_path / "two_phase.h5"
    first = read_all(index)
    refused = run_cli(*short, "-o", str(tmp_path))
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "--overwrite" in refused.stderr
    assert_same_run(first, read_all(index))
    # --overwrite killed mid-run: the old result is still there, under .previous.h5.
    killed = run_killed("solve", 3, *short, "-o", str(tmp_path), "--overwrite",
                        "--set", "physics.gravity=1.5")
    assert killed.returncode == -signal.SIGKILL
    assert_same_run(first, read_all(tmp_path / "two_phase.previous.h5"))
    # Another overwrite now would put it at risk: refused.
    again = run_cli(*short, "-o", str(tmp_path), "--overwrite")
    assert again.returncode == 2 and "previous" in again.stderr
    os.unlink(index)
    os.replace(tmp_path / "two_phase.previous.h5", index)
    assert_same_run(first, read_all(index))                 # snapshots still readable
    done = run_cli(*short, "-o", str(tmp_path), "--overwrite", "--set", "physics.gravity=1.5")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "two_phase.previous.h5").exists()
    runs = os.listdir(tmp_path / "two_phase.snapshots")
    with h5py.File(index, "r") as fh:
        assert fh.attrs["run_id"] in runs
    assert first["@run_id"] not in runs            # the replaced result's snapshots are gone


def test_restart_into_another_folder_leaves_the_input_untouched(tmp_path, uninterrupted):
    part = tmp_path / "part"
    killed = run_killed("solve", 12, *COMMON, "-o", str(part))
    assert killed.returncode == -signal.SIGKILL
    before = {p: (part / p).read_bytes() for p in os.listdir(part) if p.endswith(".h5")}
    cont = run_cli(*COMMON, "-o", str(tmp_path / "cont"), "--restart", str(part / "two_phase.h5"))
    assert cont.returncode == 0, cont.stderr
    assert_same_run(uninterrupted, read_all(tmp_path / "cont" / "two_phase.h5"))
    assert before == {p: (part / p).read_bytes() for p in before}


def test_two_runs_on_one_output_cannot_both_succeed(tmp_path):
    # The first run is long and is stopped (SIGTERM) once the second has
    # tried: the second always meets it running, however fast the machine.
    longer = {"time.end=0.5": "time.end=30", "output.interval=0.05": "output.interval=1.0"}
    slow = [longer.get(a, a) for a in COMMON]
    args = [sys.executable, "-m", "bubbleflow.apps.cli", *slow, "-o", str(tmp_path)]
    first = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "two_phase.h5").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    second = run_cli(*slow, "-o", str(tmp_path), "--overwrite")
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=600)
    assert second.returncode == 2 and "another bubbleflow run" in second.stderr
    assert first.returncode == 128 + signal.SIGTERM, err
    with h5py.File(tmp_path / "two_phase.h5", "r") as fh:
        assert fh.attrs["run_status"] == "stopped"     # the first run's result, kept
