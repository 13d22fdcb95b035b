"""Lock files are removed by their holder, without letting two processes hold
one lock: a run or a sweep leaves no ``.NAME.lock`` behind, holders still
exclude each other, and an acquirer that opened a file its holder then
removed starts again on the path's file."""
import multiprocessing
import os
import socket
import time

import pytest

from bubbleflow.apps.cli import main
from bubbleflow.io import lock as lock_mod
from bubbleflow.io.lock import FolderLock, LockBusy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMN = os.path.join(ROOT, "cases", "bubbly_column.yaml")
SMALL = ["--backend", "numpy", "--no-progress", "-q", "--set", "grid.nx=16",
         "--set", "grid.ny=16", "--set", "solver.rtol=1e-6"]


def locks_under(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, files in os.walk(folder) for f in files if f.endswith(".lock"))


def test_a_released_lock_leaves_no_file_and_is_taken_again(tmp_path):
    with FolderLock(tmp_path, ".r.lock") as held:
        assert (tmp_path / ".r.lock").read_text() == \
            f"pid {os.getpid()} on {socket.gethostname()}"
        with pytest.raises(LockBusy):
            FolderLock(tmp_path, ".r.lock").acquire()
        assert held.held
    assert not os.listdir(tmp_path)
    with FolderLock(tmp_path, ".r.lock"):
        assert os.listdir(tmp_path) == [".r.lock"]
    assert not os.listdir(tmp_path)


def test_a_stale_lock_file_of_a_killed_holder_is_taken_and_removed(tmp_path):
    (tmp_path / ".r.lock").write_text("pid 1 on elsewhere")      # no flock on it
    with FolderLock(tmp_path, ".r.lock"):
        assert "elsewhere" not in (tmp_path / ".r.lock").read_text()
    assert not os.listdir(tmp_path)


def _open_removed_file_first(monkeypatch, folder, then=None):
    """The acquirer's first open of the lock returns a file whose holder
    removes it and lets it go before the acquirer's flock (the race the
    path check closes); ``then`` runs after that (a third holder).  Returns
    the acquirer's opens: the inodes they returned."""
    real = lock_mod._open_no_follow
    opens = []

    def opened(path):
        if opens:
            fd = real(path)
        else:
            monkeypatch.setattr(lock_mod, "_open_no_follow", real)    # the others' opens
            gone = FolderLock(folder, ".r.lock").acquire()
            fd = os.open(path, os.O_RDWR)
            gone.release()                     # unlinked while held, then closed
            if then is not None:
                then()
            monkeypatch.setattr(lock_mod, "_open_no_follow", opened)
        opens.append(os.fstat(fd).st_ino)
        return fd

    monkeypatch.setattr(lock_mod, "_open_no_follow", opened)
    return opens


def test_an_acquirer_holding_a_removed_file_starts_again_on_the_paths_file(tmp_path,
                                                                          monkeypatch):
    opens = _open_removed_file_first(monkeypatch, tmp_path)
    with FolderLock(tmp_path, ".r.lock"):
        assert len(opens) == 2                 # the removed file was let go
        assert os.stat(tmp_path / ".r.lock").st_ino == opens[1]
    assert not os.listdir(tmp_path)


def test_an_acquirer_holding_a_removed_file_meets_the_new_holder(tmp_path, monkeypatch):
    third = FolderLock(tmp_path, ".r.lock")
    # A new file, locked by a third holder, between the removal and the flock.
    _open_removed_file_first(monkeypatch, tmp_path, then=third.acquire)
    with pytest.raises(LockBusy, match=f"pid {os.getpid()}"):
        FolderLock(tmp_path, ".r.lock").acquire()
    assert third.held and os.listdir(tmp_path) == [".r.lock"]    # the holder's file stays
    third.release()
    assert not os.listdir(tmp_path)


def test_a_lock_file_put_in_the_holders_place_is_not_removed(tmp_path):
    held = FolderLock(tmp_path, ".r.lock").acquire()
    os.unlink(tmp_path / ".r.lock")
    (tmp_path / ".r.lock").write_text("someone else's")
    held.release()
    assert (tmp_path / ".r.lock").read_text() == "someone else's"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_copy_of_the_holder_does_not_remove_the_file(tmp_path):
    held = FolderLock(tmp_path, ".r.lock").acquire()
    pid = os.fork()
    if pid == 0:                                    # the child lets its copy go
        held.release()
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.listdir(tmp_path) == [".r.lock"]
    with pytest.raises(LockBusy):
        FolderLock(tmp_path, ".r.lock").acquire()
    held.release()
    assert not os.listdir(tmp_path)


def _hammer(folder, rounds, inside):
    """Take and let go of the lock ``rounds`` times; while holding it, own
    the file ``inside`` exclusively (O_EXCL: a second holder fails)."""
    done = 0
    while done < rounds:
        try:
            held = FolderLock(folder, ".r.lock").acquire()
        except LockBusy:
            time.sleep(0.0005)
            continue
        try:
            fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            time.sleep(0.0002)
            os.unlink(inside)
        finally:
            held.release()
        done += 1


def test_processes_taking_and_removing_the_lock_never_hold_it_together(tmp_path):
    inside = str(tmp_path / "inside")
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), 150, inside)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]      # a FileExistsError would be 1
    assert not os.listdir(tmp_path)


def test_a_run_leaves_no_lock_file(tmp_path):
    assert main(["run", COLUMN, *SMALL, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "bubbly_column.h5").is_file()
    assert locks_under(tmp_path) == []


def test_a_sweep_leaves_no_lock_file(tmp_path):
    assert main(["sweep", COLUMN, *SMALL, "-o", str(tmp_path / "out"), "--name", "s",
                 "--param", "solver.rtol", "--values", "1e-6,1e-7"]) == 0
    assert sorted(f for f in os.listdir(tmp_path / "out" / "s") if f.endswith(".h5")) == [
        "run_0000.h5", "run_0001.h5", "summary.h5"]
    assert locks_under(tmp_path) == []
