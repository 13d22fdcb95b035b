"""One sweep per study folder: a second one is refused in one line naming the
first, and touches none of its points."""
import csv
import os
import signal
import socket
import subprocess
import sys
import time

from bubbleflow.apps.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A flow study of two points: the first ends at once, the second runs until stopped.
STUDY = ["sweep", "cases/two_phase.yaml", "--name", "s", "--backend", "numpy", "--no-progress",
         "--set", "grid.nx=16", "--set", "grid.ny=32",
         "--set", "output.interval=1.0", "--param", "time.end", "--values", "0.01,1000"]


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _cli(*args):
    return [sys.executable, "-m", "bubbleflow.apps.cli", *args]


def _rows(folder):
    try:
        with open(folder / "summary.csv", newline="") as fh:
            return {r["run"]: r for r in csv.DictReader(fh)}
    except FileNotFoundError:
        return {}


def _one_error_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_a_second_sweep_of_a_running_study_is_refused_naming_the_first(tmp_path):
    folder = tmp_path / "s"
    first = subprocess.Popen(_cli(*STUDY, "-o", str(tmp_path)), cwd=ROOT, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _rows(folder).get("run_0000", {}).get("status") != "ok":
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        holder = f"pid {first.pid} on {socket.gethostname()}"
        for resume in ([], ["--resume"]):
            second = subprocess.run(_cli(*STUDY, "-o", str(tmp_path), *resume), cwd=ROOT,
                                    env=_env(), capture_output=True, text=True, timeout=300)
            assert second.returncode == 2, second.stderr
            line = _one_error_line(second.stderr)
            assert f"another bubbleflow sweep ({holder}) is running this study" in line
        assert first.poll() is None             # the second never met a finished first
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            out, err = first.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            first.kill()
            out, err = first.communicate()
    assert first.returncode != 0                # stopped in its second point
    rows = _rows(folder)
    assert rows["run_0000"]["status"] == "ok", (rows, err)
    assert (folder / "run_0000.h5").is_file()


def test_a_study_lock_that_is_a_link_is_refused_and_its_target_kept(tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(ROOT)
    target = tmp_path / "keep.txt"
    target.write_text("the user's file")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".s.study.lock").symlink_to(target)
    assert main([*STUDY, "-o", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert ".s.study.lock is a symbolic link" in line and "remove it" in line
    assert target.read_text() == "the user's file"
    assert os.listdir(tmp_path / "out") == [".s.study.lock"]        # no point ran
