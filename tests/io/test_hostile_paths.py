"""Names stored in a file never become paths, and no file is written through a link.

Each test crafts an output folder (a flow result whose ``snapshot_dir`` or
``run_id`` attribute was edited, a lock file or snapshot folder that is a
symbolic link), runs the command line on it as a user would, and compares
a snapshot of every file and folder of the tmp root outside ``OUT`` (hashes,
modes, link targets) taken before and after: nothing there may be created,
changed or removed.  A refusal is one ``error:`` line with exit status 2.
"""
import hashlib
import os
import shutil
import socket
import stat

import h5py
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.io import checkpoint_reader, layout, run_paths
from bubbleflow.io.flow_output import FlowWriter, _new_run_id
from bubbleflow.io.lock import FolderLock, LockBusy, LockRefused
from helpers.cli import ROOT, run_cli

NAME = "two_phase"
TINY = ["cases/two_phase.yaml", "--backend", "numpy", "--no-progress", "--set", "grid.nx=16",
        "--set", "grid.ny=32",
        "--set", "output.interval=0.01"]
FIRST_END = ["--set", "time.end=0.02"]
LATER_END = ["--set", "time.end=0.03"]


@pytest.fixture(scope="module", autouse=True)
def _suite_backend(pytestconfig):
    """The command lines run on the suite's backend (``pytest --backend``)."""
    global TINY
    name = pytestconfig.getoption("--backend")
    TINY = [name if a == "numpy" else a for a in TINY]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One finished tiny flow run, copied into each test's OUT."""
    out = tmp_path_factory.mktemp("template") / "out"
    case = [os.path.join(ROOT, a) if a.startswith("cases/") else a for a in TINY]
    assert main(["run", *case, *FIRST_END, "-o", str(out)]) == 0
    return out


@pytest.fixture
def root(tmp_path, template):
    """``tmp/victim`` (the user's other files) and ``tmp/out``, a finished run with
    a file of the user's beside it."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "keep.txt").write_text("the user's file")
    (victim / "sub" / "data.bin").write_bytes(os.urandom(64))
    shutil.copytree(template, tmp_path / "out", symlinks=True)
    (tmp_path / "out" / "notes.txt").write_text("mine")
    return tmp_path


def tree(top, skip=()):
    """Every file, folder and link under ``top`` (not entering ``skip``): path ->
    (kind, mode, content hash or link target)."""
    found = {}
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skip]
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                what = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                what = ("dir", None)
            else:
                with open(path, "rb") as fh:
                    what = ("file", hashlib.sha256(fh.read()).hexdigest())
            found[os.path.relpath(path, top)] = (what[0], stat.S_IMODE(st.st_mode), what[1])
    return found


def hostile(root, *args, out="out"):
    """Run the CLI; assert nothing outside ``root/out`` was created, changed or removed."""
    outside = lambda: tree(root, skip={str(root / out)})     # noqa: E731
    before = outside()
    res = run_cli(*args)
    assert "Traceback" not in res.stderr, res.stderr
    assert outside() == before, res.stderr
    return res


def refused(res, *fragments):
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def set_attr(index, key, value):
    with h5py.File(index, "r+") as fh:
        fh.attrs[key] = value


def run_id_of(index):
    with h5py.File(index, "r") as fh:
        return layout.text(fh.attrs["run_id"])


def assert_complete(out):
    """The new result in ``out``: readable through its own snapshot folder, the
    user's file beside it kept, nothing set aside left."""
    index = out / f"{NAME}.h5"
    folder = run_paths.run_folder(index)
    assert os.path.isdir(folder) and os.listdir(folder)
    with h5py.File(index, "r") as fh:
        assert fh.attrs["run_status"] == "finished"
        assert fh["fields/p"].shape[0] == len(os.listdir(folder))
        assert not (fh["fields/p"][()] != fh["fields/p"][()]).any()      # no NaN: files found
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / f"{NAME}.previous.h5").exists()


def absolute(root, value):
    return str(root / "victim") if value == "ABSOLUTE" else value


# -------------------------------------------------------------------- snapshot_dir
@pytest.mark.parametrize("stored", ["../victim", ".", "ABSOLUTE"])
def test_overwrite_never_removes_what_snapshot_dir_names(root, stored):
    index = root / "out" / f"{NAME}.h5"
    old_id = run_id_of(index)
    set_attr(index, "snapshot_dir", absolute(root, stored))
    res = hostile(root, "run", *TINY, *FIRST_END, "-o", str(root / "out"), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert_complete(root / "out")
    # The replaced run's own folder, derived from its run id, is what goes.
    assert os.listdir(root / "out" / f"{NAME}.snapshots") == [run_id_of(index)] != [old_id]


@pytest.mark.parametrize("stored", ["../victim", ".", "ABSOLUTE"])
@pytest.mark.parametrize("in_place", [False, True])
def test_restart_from_a_foreign_snapshot_dir_is_refused(root, stored, in_place):
    index = root / "out" / f"{NAME}.h5"
    set_attr(index, "snapshot_dir", absolute(root, stored))
    before = index.read_bytes()
    target = root / "out" if in_place else root / "cont"
    res = hostile(root, "run", *TINY, *LATER_END, "-o", str(target), "--restart", str(index))
    refused(res, "snapshot_dir: cannot restart from it", "is not the folder of its run id")
    assert not (root / "cont").exists()
    assert index.read_bytes() == before


def test_reading_a_foreign_snapshot_dir_is_refused(root):
    index = root / "out" / f"{NAME}.h5"
    set_attr(index, "snapshot_dir", "../victim")
    with pytest.raises(run_paths.StoredNameError, match="snapshot_dir"):
        checkpoint_reader.read_checkpoint(index)
    with pytest.raises(run_paths.StoredNameError, match="snapshot_dir"):
        checkpoint_reader.read_index(index)


# -------------------------------------------------------------------- run_id
@pytest.mark.parametrize("stored", ["../../x", "/tmp/x", "..", "ABSOLUTE"])
def test_restart_from_a_foreign_run_id_is_refused_and_creates_nothing(root, stored):
    index = root / "out" / f"{NAME}.h5"
    value = absolute(root, stored)
    set_attr(index, "run_id", value)
    existed = os.path.lexists("/tmp/x")
    res = hostile(root, "run", *TINY, *LATER_END, "-o", str(root / "a" / "b"),
                  "--restart", str(index))
    line = refused(res, "run_id: cannot restart from it", "is not a run id")
    assert stored == "ABSOLUTE" or repr(value) in line
    assert not (root / "a").exists() and not (root / "x").exists()
    assert existed or not os.path.lexists("/tmp/x")


@pytest.mark.parametrize("stored", ["../../x", ".."])
def test_in_place_restart_from_a_foreign_run_id_is_refused(root, stored):
    index = root / "out" / f"{NAME}.h5"
    set_attr(index, "run_id", stored)
    before = tree(root / "out")
    res = hostile(root, "run", *TINY, *LATER_END, "-o", str(root / "out"), "--restart", str(index))
    refused(res, "run_id: cannot restart from it")
    assert tree(root / "out") == before


@pytest.mark.parametrize("stored", ["..", "../../x"])
def test_overwrite_of_a_foreign_run_id_removes_no_folder(root, stored):
    index = root / "out" / f"{NAME}.h5"
    old_id = run_id_of(index)
    set_attr(index, "run_id", stored)
    res = hostile(root, "run", *TINY, *FIRST_END, "-o", str(root / "out"), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert_complete(root / "out")
    # Not provably the replaced run's: its folder stays.
    assert sorted(os.listdir(root / "out" / f"{NAME}.snapshots")) == sorted(
        [old_id, run_id_of(index)])


def test_the_writer_takes_only_its_own_shape_of_run_id(tmp_path):
    assert run_paths.RUN_ID_PATTERN.fullmatch(_new_run_id())
    for bad in ("../../x", "/tmp/x", "..", "", "20261128T085031-1a2b3c/..",
                "20261128T085031-1A2B3C"):
        with pytest.raises(run_paths.StoredNameError):
            FlowWriter(tmp_path / "r.h5", {}, None, bad)
    assert not os.listdir(tmp_path)


# -------------------------------------------------------------------- links
@pytest.mark.parametrize("target", ["keep.txt", "absent.txt"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(root, target):
    lock = root / "out" / f".{NAME}.lock"
    lock.unlink(missing_ok=True)          # (a finished run removes its lock file)
    lock.symlink_to(root / "victim" / target)
    res = hostile(root, "run", *TINY, *FIRST_END, "-o", str(root / "out"), "--overwrite")
    refused(res, f".{NAME}.lock is a symbolic link", "remove it")
    assert (root / "victim" / "keep.txt").read_text() == "the user's file"
    assert not (root / "victim" / "absent.txt").exists()


def test_a_snapshot_folder_that_is_a_link_is_refused(root):
    out = root / "fresh"
    out.mkdir()
    (out / f"{NAME}.snapshots").symlink_to(root / "victim")
    res = hostile(root, "run", *TINY, *FIRST_END, "-o", str(out), out="fresh")
    refused(res, f": {NAME}.snapshots is a symbolic link")
    assert not (out / f"{NAME}.h5").exists()


def test_a_linked_run_folder_is_refused_in_place_and_never_removed(root):
    out = root / "out"
    index = out / f"{NAME}.h5"
    run_folder = out / f"{NAME}.snapshots" / run_id_of(index)
    elsewhere = root / "elsewhere"
    shutil.move(str(run_folder), str(elsewhere))
    run_folder.symlink_to(elsewhere)
    res = hostile(root, "run", *TINY, *LATER_END, "-o", str(out), "--restart", str(index))
    refused(res, f": {NAME}.snapshots/{run_folder.name} is a symbolic link")
    # --overwrite: the new run succeeds; the link is not followed to remove the old files.
    res = hostile(root, "run", *TINY, *FIRST_END, "-o", str(out), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert os.path.islink(run_folder) and os.listdir(elsewhere)


def test_a_lock_names_its_holder_and_takes_no_link(tmp_path):
    with FolderLock(tmp_path, ".r.lock"):
        with pytest.raises(LockBusy) as busy:
            FolderLock(tmp_path, ".r.lock").acquire()
        assert busy.value.holder == f"pid {os.getpid()} on {socket.gethostname()}"
    with FolderLock(tmp_path, ".r.lock") as again:      # released: taken again
        assert again.held
    mine = tmp_path / "mine.txt"
    mine.write_text("kept")
    os.link(mine, tmp_path / ".hard.lock")
    os.mkfifo(tmp_path / ".fifo.lock")
    for name, problem in ((".hard.lock", "hard link"), (".fifo.lock", "not a regular file")):
        with pytest.raises(LockRefused, match=problem):
            FolderLock(tmp_path, name).acquire()
    assert mine.read_text() == "kept"
