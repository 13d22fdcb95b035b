"""``bubbleflow run --profile``: where a whole run's time went, each part
beside its floor, summing to the time since start-up."""
import re
import subprocess
import sys

import pytest

from bubbleflow.apps.run_profile import RunProfile, TimedCalls
from bubbleflow.compute.backend import get_backend
from helpers.cli import run_cli
from helpers.launcher import child_env, mpiexec


def profile_rows(stdout):
    """``({part: (seconds, floor or None)}, total)`` of the profile table."""
    total = float(re.search(r"^profile: ([0-9.]+) s", stdout, re.M).group(1))
    rows = {}
    for line in stdout.splitlines():
        found = re.match(r"^  (\S.*?)\s+([0-9.]+)\s+[0-9.]+%\s+(\S+)\s+(\S+)$", line)
        if found:
            floor = None if found.group(3) == "-" else float(found.group(3))
            rows[found.group(1)] = (float(found.group(2)), floor)
    return rows, total


def test_timed_calls_add_their_time_and_count_to_the_part():
    profile = RunProfile(get_backend("numpy"), started=0.0)
    log = []
    obj = TimedCalls(log, profile, "output", ("append",))
    obj.append(1)
    obj.append(2)
    assert obj.count(1) == 1                                # not timed, passed through
    assert log == [1, 2] and profile.calls == {"append": 2} and profile.parts["output"] >= 0


def test_a_pressure_case_profile_holds_every_part(tmp_path):
    res = run_cli("run", "cases/bubbly_column.yaml", "--backend", "numpy", "--no-progress",
                  "--profile", "--set", "grid.nx=128", "--set", "grid.ny=128",
                  "-o", str(tmp_path))
    assert res.returncode == 0, res.stderr
    rows, total = profile_rows(res.stdout)
    assert list(rows) == ["start-up", "case build", "pressure set-up", "pressure solve",
                          "output", "the rest"]
    assert sum(s for s, _ in rows.values()) == pytest.approx(total, abs=0.01)
    assert rows["pressure solve"][1] > 0 and rows["case build"][1] > 0
    assert rows["pressure set-up"][1] is None


def test_a_flow_profile_has_its_steps_phase_by_phase(tmp_path):
    res = run_cli("run", "cases/two_phase.yaml", "--backend", "numpy", "--no-progress",
                  "--profile", "--set", "grid.nx=16", "--set", "grid.ny=32",
                  "--set", "time.end=0.1",
                  "-o", str(tmp_path))
    assert res.returncode == 0, res.stderr
    rows, total = profile_rows(res.stdout)
    steps = int(re.search(r"^profile: [0-9.]+ s, (\d+) steps", res.stdout, re.M).group(1))
    assert f"{steps} steps to t = 0.1 s" in res.stdout
    for part in ("start-up", "case build", "output", "bubble tracking", "step: momentum",
                 "step: pressure solve", "step: reinitialisation", "the rest"):
        assert part in rows, part
    assert rows["step: pressure solve"][1] > 0 and rows["output"][1] > 0
    assert sum(s for s, _ in rows.values()) == pytest.approx(total, abs=0.01)
    # The run's own lines come after the table, the gas volume's last.
    assert res.stdout.index("profile:") < res.stdout.index("steps to t = 0.1 s")


def test_profile_on_ranks_is_one_line(tmp_path):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    proc = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "bubbleflow", "run",
                           "cases/two_phase.yaml", "--backend", "numpy", "--profile", "-o",
                           str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=child_env(), cwd=child_env()["PYTHONPATH"].split(":")[0])
    assert proc.returncode == 2, proc.stderr
    assert "--profile with 2 ranks" in proc.stderr and "Traceback" not in proc.stderr


def test_a_flow_profile_on_a_device_says_its_steps_take_less_unprofiled(monkeypatch):
    """The table's last line, for a flow's steps on a device only."""
    from bubbleflow.apps.bench import measure
    from bubbleflow.apps.run_profile import STEPS_ON_A_DEVICE

    monkeypatch.setattr(measure, "copy_bandwidth", lambda backend, nbytes: (1e12, None))

    class Device:
        on_device = True

        def synchronize(self):
            pass

    for backend, steps, said in ((Device(), 3, True), (Device(), 0, False),
                                 (get_backend("numpy"), 3, False)):
        profile = RunProfile(backend, started=0.0)
        profile.steps = steps
        table = profile.table()
        assert (table.splitlines()[-1] == STEPS_ON_A_DEVICE) is said, table
