"""SIGTERM / SIGINT stop a flow run at the next step, never lost.

:class:`bubbleflow.apps.stop_signals.StopSignals` on its own (a fake
communicator, real signals sent to this process), then ``mpiexec -n 2
bubbleflow run`` sent SIGTERM at random instants: every rank stops at the
same step, the state is written, ``--restart`` goes on from it.  The random
instants come from a fixed seed, named in every assertion (set
``BUBBLEFLOW_STOP_SEED`` to draw others); the default suite draws
:data:`QUICK` of them, ``pytest -m slow`` :data:`FULL`.
"""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bubbleflow.apps.stop_signals import StopSignals
from helpers.launcher import child_env, is_open_mpi, mpiexec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HELPER = ROOT / "tests" / "helpers" / "stop_signals_run.py"
SEED = int(os.environ.get("BUBBLEFLOW_STOP_SEED", "24"))
QUICK, FULL = 3, 20
#: 127 steps on two ranks (about a second and a half on two idle cores), a
#: snapshot every 0.25 s: the writer is busy at some of the instants.
CASE = ["run", str(ROOT / "cases" / "two_phase.yaml"), "--backend", "numpy", "--no-progress",
        "--set", "grid.nx=16", "--set", "grid.ny=32", "--set", "time.end=2.0",
        "--set", "time.cfl=0.1", "--set", "output.interval=0.25"]
LAUNCH_TIMEOUT = 180         # seconds: a run that has not ended by then hangs


class FakeRanks:
    """Two ranks as :class:`StopSignals` sees them: ``allreduce_max`` of this
    rank's value and the other rank's (``other``), running ``during`` (if
    set) while it reduces, as a signal arriving in the collective would."""

    size = 2

    def __init__(self, other=0, during=None):
        self.other, self.during, self.sent = other, during, []

    def allreduce_max(self, value):
        self.sent.append(value)
        reduced = max(float(value), float(self.other))
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return reduced


def test_a_signal_caught_while_the_ranks_agree_stops_at_the_next_poll():
    stop = StopSignals(FakeRanks())
    stop._comm.during = lambda: stop._handle(signal.SIGTERM, None)
    assert stop.poll() is None          # agreed before the signal came
    assert stop.poll() == "SIGTERM"     # counted at the next poll
    assert stop._comm.sent == [0, signal.SIGTERM]      # one collective a poll
    assert stop.poll() == "SIGTERM" and len(stop._comm.sent) == 2


def test_a_real_signal_in_the_collective_stops_at_the_next_poll():
    """The handler installed by the context, the signal sent to this process
    from inside the reduction: Python runs the handler there."""
    ranks = FakeRanks(during=lambda: os.kill(os.getpid(), signal.SIGTERM))
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals(ranks) as stop:
        assert stop.poll() is None
        assert stop.poll() == "SIGTERM"
    assert ranks.sent == [0, signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == before         # put back


def test_another_ranks_signal_stops_this_rank_at_the_same_poll():
    stop = StopSignals(FakeRanks(other=signal.SIGTERM))
    assert stop.poll() == "SIGTERM" and stop.caught == 0
    # The stop is under way: a SIGINT now interrupts at once.
    with pytest.raises(KeyboardInterrupt):
        stop._handle(signal.SIGINT, None)


def test_the_ranks_agree_on_the_largest_signal():
    stop = StopSignals(FakeRanks(other=signal.SIGTERM))
    stop._handle(signal.SIGINT, None)
    assert stop.poll() == "SIGTERM"


def test_one_process_stops_at_the_poll_after_the_signal():
    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        assert stop.poll() is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.poll() == "SIGTERM"
        os.kill(os.getpid(), signal.SIGTERM)        # a second SIGTERM changes nothing
        assert stop.poll() == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):      # a second Ctrl-C: at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert signal.getsignal(signal.SIGINT) == before


def test_one_sigint_stops_and_a_second_interrupts():
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.poll() == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)


# ---------------------------------------------------------------- mpiexec -n 2


@pytest.fixture(scope="module")
def ranks_available():
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    pytest.importorskip("h5py")


def _log(folder, rank):
    """``(pid, entered, [(began, name)], left, polls begun)`` from a rank's
    log (None for what is not there yet)."""
    pid = entered = left = None
    polls, begun = [], 0
    path = folder / f"rank{rank}.log"
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        words = line.split() or [""]
        if words[0] == "enter" and len(words) == 3:
            pid, entered = int(words[1]), float(words[2])
        elif words[0] == "poll" and len(words) == 3:
            polls.append((float(words[1]), None if words[2] == "-" else words[2]))
        elif words[0] == "exit" and len(words) == 2:
            left = float(words[1])
        elif words[0] == "polling":
            begun += 1
    return pid, entered, polls, left, begun


def _start(folder, *more, hold=()):
    """``mpiexec -n 2`` the helper on :data:`CASE` into ``folder/out``;
    ``hold``: ``(poll, seconds)`` rank 0 waits before that poll."""
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([mpiexec(), "-n", "2", sys.executable, str(HELPER), str(folder),
                             *map(str, hold), "--", *CASE, "-o", str(folder / "out"), *more],
                            cwd=folder, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc, what):
    """``(returncode, stderr)``; the process group ended and the test failed
    if it outlives :data:`LAUNCH_TIMEOUT`."""
    try:
        _, err = proc.communicate(timeout=LAUNCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what}: still running after {LAUNCH_TIMEOUT} s (a rank hangs)")
    return proc.returncode, err


def _index(folder):
    """The run's status, the step of its last row, its snapshots' steps and
    its last snapshot's fields."""
    import h5py

    with h5py.File(folder / "out" / "two_phase.h5", "r") as fh:
        return (fh.attrs["run_status"], int(fh["diagnostics/step"][-1]),
                fh["diagnostics/step"][...], fh["fields/step"][...],
                float(fh["diagnostics/time"][-1]),
                {k: fh["fields/" + k][-1] for k in ("phi", "u", "v", "p")})


def _wait_entered(proc, folder, rank, what):
    """``(pid, monotonic time)`` of ``rank`` once its handlers are in place."""
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while time.monotonic() < deadline:
        pid, entered = _log(folder, rank)[:2]
        if pid is not None:
            return pid, entered
        if proc.poll() is not None:
            pytest.fail(f"{what}: the run ended before rank {rank}'s handlers were in place: "
                        f"{proc.stderr.read()[-2000:]}")
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"{what}: rank {rank} never put its handlers in place")


@pytest.fixture(scope="module")
def uninterrupted(ranks_available, tmp_path_factory):
    """The run without a signal: its steps, its end and its last snapshot."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    code, err = _finish(_start(folder), "the uninterrupted run")
    assert code == 0, err[-3000:]
    status, last, _, snaps, t_end, fields = _index(folder)
    polls = _log(folder, 0)[2]
    assert status == "finished" and snaps[-1] == last == len(polls), (status, last, len(polls))
    assert all(name is None for _, name in polls)
    return {"steps": last, "time": t_end, "fields": fields}


def _wait_polls(proc, folder, rank, count, what):
    """``rank``'s polls once it has returned from ``count`` of them (or has
    put its handlers back, or the run has ended)."""
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while time.monotonic() < deadline:
        _, _, polls, left, _ = _log(folder, rank)
        if len(polls) >= count or left is not None or proc.poll() is not None:
            return polls
        time.sleep(0.001)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"{what}: rank {rank} made no {count} polls in {LAUNCH_TIMEOUT} s")


def _signal_one_rank(folder, rank, polls, fraction, what):
    """Start the run and send SIGTERM to ``rank``: as soon as its handlers
    are in place (``polls`` 0), else ``fraction`` of its last step's time
    after its poll number ``polls`` returned.  ``(returncode, stderr,
    monotonic time the signal was sent, the signalled rank's entry time)``."""
    proc = _start(folder)
    pid, entered = _wait_entered(proc, folder, rank, what)
    if polls:
        done = _wait_polls(proc, folder, rank, polls, what)
        begins = [entered] + [began for began, _ in done]
        time.sleep(fraction * (begins[-1] - begins[-2]))
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:          # the rank has already ended
        pass
    sent = time.monotonic()
    code, err = _finish(proc, what)
    return code, err, sent, entered


def _check_stop(folder, rank, sent, code, err, reference, what):
    """The run ended as it must for a SIGTERM to ``rank`` sent at ``sent``:
    stopped at the first or second poll begun after it (a signal is
    delivered within one poll: the second covers the delivery), the same
    step on both ranks, the state written; or finished, the signal having
    come after the last poll.  Returns the status."""
    logs = [_log(folder, r) for r in (0, 1)]
    status, last, steps, snaps, t_last, _ = _index(folder)
    polls = [log[2] for log in logs]
    after = [p for p in polls[rank] if p[0] > sent]
    where = (f"{what}: status {status}, exit {code}, {len(polls[rank])} polls on the rank, "
             f"{len(after)} begun after the signal, the last step {last}; "
             f"stderr: {err[-1500:]}")
    assert np.array_equal(steps, np.arange(len(steps))), where     # one row a step
    assert snaps[-1] == last, where                                # the last state written
    assert len(polls[0]) == len(polls[1]), where                   # the same step on each rank
    if status == "stopped":
        assert code == 128 + signal.SIGTERM, where
        assert [p[-1][1] for p in polls] == ["SIGTERM", "SIGTERM"], where
        assert all(name is None for p in polls for _, name in p[:-1]), where
        assert last == len(polls[0]) - 1 and len(after) <= 2, where
        assert "stopped by SIGTERM" in err and "--restart" in err, where
        # The command to type goes on with as many ranks.
        assert "continue with: mpiexec -n 2 bubbleflow run " in err, where
    else:
        assert status == "finished", where
        assert last == reference["steps"] == len(polls[0]), where
        assert all(name is None for p in polls for _, name in p), where
        assert len(after) <= 1, where               # (no signal lost before the last poll)
        left = logs[rank][3]
        # After the handlers are put back, SIGTERM's default ends the rank.
        assert code == 0 or (left is not None and sent > left and code == signal.SIGTERM), where
    return status


def _check_restart(folder, reference, what):
    """``--restart`` from the stopped run's file (into a folder of its own)
    ends where the uninterrupted run does, bit for bit."""
    again = folder / "again"
    proc = _start(again, "--restart", str(folder / "out" / "two_phase.h5"))
    code, err = _finish(proc, what + ", restarted")
    status, last, steps, snaps, t_last, fields = _index(again)
    where = f"{what}, restarted: status {status}, exit {code}: {err[-2000:]}"
    assert code == 0 and status == "finished", where
    assert np.array_equal(steps, np.arange(len(steps))) and snaps[-1] == last, where
    assert last == reference["steps"] and t_last == reference["time"], where
    for name, field in reference["fields"].items():
        np.testing.assert_array_equal(fields[name], field, err_msg=f"{where}: {name}")


def _random_instants(count, tmp_path, reference):
    rng = random.Random(SEED)
    outcomes = []
    for k in range(count):
        rank = rng.randrange(2)
        # A quarter as soon as the handlers are in place (the set-up, the
        # first snapshot), the rest in any step, its poll included, or after
        # the last (the end written, the handlers put back): instants that
        # follow the run's progress, whatever the machine's load.
        polls = 0 if rng.random() < 0.25 else rng.randrange(1, reference["steps"] + 1)
        fraction = rng.uniform(0.0, 2.0) if polls else 0.0
        what = (f"seed {SEED}, instant {k + 1} of {count}: SIGTERM to rank {rank} "
                + (f"{fraction:.3f} steps after its poll {polls}" if polls
                   else "once its handlers are in place"))
        folder = tmp_path / f"instant{k}"
        code, err, sent, entered = _signal_one_rank(folder, rank, polls, fraction, what)
        what += f" (sent at +{sent - entered:.3f} s)"
        status = _check_stop(folder, rank, sent, code, err, reference, what)
        before = sum(began < sent for began, _ in _log(folder, rank)[2])
        print(f"{what}: {status} ({before} polls on the rank before the signal)")
        if status == "stopped":
            _check_restart(folder, reference, what)
        outcomes.append(status)
    return outcomes


def test_sigterm_to_a_rank_at_random_instants_stops_every_rank(ranks_available, tmp_path,
                                                              uninterrupted):
    """The first :data:`QUICK` instants drawn from :data:`SEED` (the default suite)."""
    outcomes = _random_instants(QUICK, tmp_path, uninterrupted)
    assert "stopped" in outcomes, f"seed {SEED}: {outcomes}"


@pytest.mark.slow
def test_sigterm_to_a_rank_at_twenty_random_instants_stops_every_rank(ranks_available,
                                                                      tmp_path, uninterrupted):
    """:data:`FULL` instants drawn from :data:`SEED`, the default suite's first."""
    outcomes = _random_instants(FULL, tmp_path, uninterrupted)
    assert outcomes.count("stopped") >= FULL // 2, f"seed {SEED}: {outcomes}"


def test_sigterm_while_a_rank_waits_in_the_agreement_stops_at_the_next_step(
        ranks_available, tmp_path, uninterrupted):
    """Rank 0 held before its poll of step 20: rank 1 waits in that poll's
    collective when SIGTERM reaches it; the ranks agree on it at the next
    poll."""
    held = 20
    proc = _start(tmp_path, hold=(held, 2.0))
    pid = _wait_entered(proc, tmp_path, 1, "SIGTERM in the agreement")[0]
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while _log(tmp_path, 1)[4] < held and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(0.5)                     # (rank 1 in the collective, rank 0 held)
    waiting = len(_log(tmp_path, 1)[2]) == held - 1
    os.kill(pid, signal.SIGTERM)
    code, err = _finish(proc, "SIGTERM in the agreement")
    polls = [_log(tmp_path, r)[2] for r in (0, 1)]
    status, last, _, snaps, _, _ = _index(tmp_path)
    where = (f"status {status}, exit {code}, {[len(p) for p in polls]} polls, the last step "
             f"{last}: {err[-2000:]}")
    assert waiting, "rank 1 had left the collective before the signal: " + where
    # MPICH's launcher ends with the ranks' code; Open MPI's with its own.
    assert status == "stopped" and (code != 0 if is_open_mpi()
                                    else code == 128 + signal.SIGTERM), where
    assert len(polls[0]) == len(polls[1]) == held + 1 == last + 1 == snaps[-1] + 1, where
    assert [p[-1][1] for p in polls] == ["SIGTERM", "SIGTERM"], where


def test_sigterm_to_mpiexec_stops_every_rank_with_exit_143(ranks_available, tmp_path,
                                                         uninterrupted):
    """The launcher passes SIGTERM on to every rank; it ends with their code.
    (Rank 0 is held before its poll of the middle step, so that a busy
    machine cannot finish the run before the signal arrives; briefly, since
    Open MPI's launcher kills the ranks a second after it passes SIGTERM
    on.)"""
    half = uninterrupted["steps"] // 2
    proc = _start(tmp_path, hold=(half, 0.5))
    _wait_entered(proc, tmp_path, 0, "SIGTERM to mpiexec")
    _wait_polls(proc, tmp_path, 0, half - 1, "SIGTERM to mpiexec")
    proc.send_signal(signal.SIGTERM)
    code, err = _finish(proc, "SIGTERM to mpiexec")
    status, last, _, snaps, _, _ = _index(tmp_path)
    polls = [_log(tmp_path, r)[2] for r in (0, 1)]
    where = f"status {status}, exit {code}, the last step {last}: {err[-2000:]}"
    # MPICH's launcher ends with the ranks' code; Open MPI's with its own.
    assert status == "stopped" and (code != 0 if is_open_mpi()
                                    else code == 128 + signal.SIGTERM), where
    assert len(polls[0]) == len(polls[1]) == last + 1 and snaps[-1] == last, where
    assert [p[-1][1] for p in polls] == ["SIGTERM", "SIGTERM"], where


def test_sigterm_after_the_last_poll_lets_the_run_finish(ranks_available, tmp_path,
                                                         uninterrupted):
    """A signal after the last step began (the run writes its end): the run
    finishes, exit 0; past the run's handlers, SIGTERM's default ends the
    rank, its files complete."""
    proc = _start(tmp_path)
    pid, _ = _wait_entered(proc, tmp_path, 0, "SIGTERM after the last poll")
    _wait_polls(proc, tmp_path, 0, uninterrupted["steps"], "SIGTERM after the last poll")
    os.kill(pid, signal.SIGTERM)
    sent = time.monotonic()
    code, err = _finish(proc, "SIGTERM after the last poll")
    status = _check_stop(tmp_path, 0, sent, code, err, uninterrupted,
                         "SIGTERM to rank 0 after its last poll")
    assert status == "finished"
