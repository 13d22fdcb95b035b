"""A storage that refuses a write (full, over quota, a file too large, an I/O error)
ends a run in one line and exit code 1, never a traceback or a crash; the previous
result, the checkpoints and the index stay, and a restart continues once there is room.

Two storages refuse here: a small tmpfs filled up (where the machine lets this
process mount one) and, needing no privileges, a limit on the size of any file
the run writes (``RLIMIT_FSIZE``, SIGXFSZ ignored: a write past it fails with
EFBIG).
"""
import errno
import io
import os
import signal
import subprocess
import sys
import types
import uuid
from pathlib import Path

import h5py
import numpy as np
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.io import atomic
from bubbleflow.io.atomic import (STORAGE_ERRNOS, OutputWriteError, atomic_h5, atomic_text,
                                  write_failure_line)
from bubbleflow.apps.run import write_pressure_files
from bubbleflow.io.flow_output import SnapshotWriteError
from bubbleflow.mesh.grid import Grid
from helpers.launcher import child_env, mpiexec, said

resource = pytest.importorskip("resource")        # (POSIX: file size limits)

ROOT = Path(__file__).resolve().parents[2]
NUMPY = ["--backend", "numpy", "--no-progress"]
PRESSURE = ["run", "cases/bubbly_column.yaml", *NUMPY]
# Snapshots of about 30 kB (t = 0, at rest) and 64 kB later; the index about 33 kB.
FLOW = ["run", "cases/two_phase.yaml", *NUMPY, "--set", "grid.nx=20", "--set", "grid.ny=40",
        "--set", "output.interval=0.05",
        "--set", "time.end=0.3"]
CODES = [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO]


def _cells(n):
    return ["--set", f"grid.nx={n}", "--set", f"grid.ny={n}"]


def _file_size_limit(limit):
    """A ``preexec_fn``: files of the child cannot grow past ``limit`` bytes (EFBIG)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(
            resource.RLIMIT_FSIZE)[1]))
    return apply


def run_cli(*args, limit=None, ranks=None):
    """``bubbleflow ARGS`` in a child (under ``mpiexec -n ranks``), files limited to ``limit``."""
    command = [sys.executable, "-m", "bubbleflow.apps.cli", *args]
    if ranks is not None:
        command = [mpiexec(), "-n", str(ranks), *command]
    limited = None if limit is None else _file_size_limit(limit)
    return subprocess.run(command, cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=300, preexec_fn=limited)


def assert_one_line_failure(proc, *words):
    """Exit code 1 (no signal), one ``error:`` line on stderr with ``words``, no traceback."""
    lines = said(proc.stderr)         # (less an MPI launcher's own notices)
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "Fatal Python error" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def no_temporaries(folder):
    return [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files
            if f.endswith(".tmp")]


# ---------------------------------------------------------------- storages
class FileSizeLimit:
    """Any file written past ``room`` bytes is refused (EFBIG), until :meth:`restore`."""

    reason = os.strerror(errno.EFBIG)
    #: Room for a flow run's first snapshot and index, not for a later snapshot.
    flow_room = 48_000

    def __init__(self, folder):
        self.folder, self.limit = folder, None

    def refuse(self, room):
        self.limit = room

    def restore(self):
        self.limit = None


class SmallDisk:
    """A 1 MiB tmpfs: :meth:`refuse` fills it up to ``room`` free bytes (ENOSPC)."""

    reason = os.strerror(errno.ENOSPC)
    limit = None
    #: Room for a flow run's first snapshots and index, not for the whole run.
    flow_room = 150_000

    def __init__(self, folder):
        self.folder = folder
        self.filler = folder / f".filler-{uuid.uuid4().hex}"

    def refuse(self, room):
        st = os.statvfs(self.folder)
        with open(self.filler, "wb") as fh:
            fh.write(bytes(max(st.f_bavail * st.f_frsize - room, 0)))

    def restore(self):
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of this test (skipped where this process cannot mount one)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux")
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(folder)
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture(params=["file size limit", "full tmpfs"])
def storage(request, tmp_path):
    """A folder whose storage can be made to refuse writes."""
    if request.param == "file size limit":
        return FileSizeLimit(tmp_path)
    return request.getfixturevalue("small_disk")


# ---------------------------------------------------------------- pressure results
def test_pressure_result_refused_keeps_the_previous_one(storage):
    out = str(storage.folder)
    first = run_cli(*PRESSURE, *_cells(64), "-o", out)
    assert first.returncode == 0, first.stderr
    kept = {name: (storage.folder / name).read_bytes()
            for name in ("bubbly_column.h5", "bubbly_column.xdmf")}
    # The new result (128 x 128 cells) is several times the old one (64 x 64).
    storage.refuse(150_000)
    failed = run_cli(*PRESSURE, *_cells(128), "-o", out, "--overwrite", limit=storage.limit)
    assert_one_line_failure(failed, f"error: bubbly_column: cannot write {out}/bubbly_column.h5: "
                            f"{storage.reason} (the previous result is kept)")
    assert kept == {name: (storage.folder / name).read_bytes() for name in kept}
    assert no_temporaries(storage.folder) == []


def test_pressure_result_refused_on_two_ranks_is_one_line(small_disk):
    # (Not under a file size limit: MPI's shared memory files need megabytes.)
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    out = str(small_disk.folder)
    assert run_cli(*PRESSURE, *_cells(64), "-o", out).returncode == 0
    kept = (small_disk.folder / "bubbly_column.h5").read_bytes()
    small_disk.refuse(150_000)
    failed = run_cli(*PRESSURE, *_cells(128), "-o", out, "-q", "--overwrite", ranks=2)
    assert_one_line_failure(failed, f"error: bubbly_column: cannot write {out}/bubbly_column.h5: "
                            f"{small_disk.reason} (the previous result is kept)")
    assert (small_disk.folder / "bubbly_column.h5").read_bytes() == kept
    assert no_temporaries(small_disk.folder) == []


# ---------------------------------------------------------------- flow runs
def _read_index(path):
    """Every dataset of a flow index (the virtual fields read through), its status."""
    out = {}
    with h5py.File(path, "r") as fh:
        fh.visititems(lambda name, obj: out.__setitem__(name, obj[()])
                      if isinstance(obj, h5py.Dataset) else None)
        out["@run_status"] = fh.attrs["run_status"]
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    done = run_cli(*FLOW, "-o", str(out), "-q")
    assert done.returncode == 0, done.stderr
    return _read_index(out / "two_phase.h5")


def test_flow_snapshot_refused_keeps_the_checkpoints_and_the_restart_continues(storage,
                                                                               uninterrupted):
    index = storage.folder / "two_phase.h5"
    storage.refuse(storage.flow_room)
    failed = run_cli(*FLOW, "-o", str(storage.folder), "-q", limit=storage.limit)
    assert_one_line_failure(failed, "error: two_phase: cannot write", storage.reason,
                            f"--restart {index}")
    assert no_temporaries(storage.folder) == []
    # The index of the last complete checkpoint: committed as failed where the
    # disk still had room for that, else the one of the last snapshot.
    with h5py.File(index, "r") as fh:
        steps = fh["fields/step"][()]
        assert fh.attrs["run_status"] in ("failed", "running") and 1 <= len(steps) < 7
        assert np.isfinite(fh["fields/p"][-1]).all()
    storage.restore()
    cont = run_cli(*FLOW, "-o", str(storage.folder), "-q", "--restart", str(index))
    assert cont.returncode == 0, cont.stderr
    after = _read_index(index)
    assert after["@run_status"] == "finished" and sorted(after) == sorted(uninterrupted)
    for name, values in uninterrupted.items():
        if not name.endswith("seconds") and name != "@run_status":
            np.testing.assert_array_equal(values, after[name], err_msg=name)


def test_flow_restart_whose_index_is_refused_is_one_line(tmp_path):
    stopped = run_cli(*FLOW, "-o", str(tmp_path), "-q", limit=48_000)
    assert stopped.returncode == 1, stopped.stderr
    index = tmp_path / "two_phase.h5"
    before = index.read_bytes()
    # The resumed index (about 33 kB) is larger than any file may be now.
    refused = run_cli(*FLOW, "-o", str(tmp_path), "-q", "--restart", str(index), limit=20_000)
    assert_one_line_failure(refused, "cannot write the index", str(index),
                            os.strerror(errno.EFBIG))
    assert index.read_bytes() == before and no_temporaries(tmp_path) == []


# ---------------------------------------------------------------- in this process
class _RefusingFile(io.FileIO):
    """A file that refuses (with ``code``) any write reaching past ``room`` bytes."""

    code, room = errno.ENOSPC, 0

    def write(self, data):
        if self.tell() + memoryview(data).nbytes > self.room:
            raise OSError(self.code, os.strerror(self.code))
        return super().write(data)


def _refusing_open(code, room):
    """``open`` for the module atomic: its HDF5 temporaries refuse writes past ``room``."""
    refusing = type("Refusing", (_RefusingFile,), {"code": code, "room": room})

    def open_(path, mode="r", buffering=-1, **kw):
        if (mode, buffering) == ("r+b", 0):         # the temporary HDF5 writes through
            return refusing(path, mode)
        return open(path, mode, buffering, **kw)
    return open_


@pytest.mark.parametrize("code", CODES, ids=errno.errorcode.get)
def test_refused_hdf5_write_is_raised_after_the_file_is_closed(tmp_path, monkeypatch, code):
    path = tmp_path / "result.h5"
    with atomic_h5(path) as fh:
        fh["old"] = np.arange(3)
    monkeypatch.setattr(atomic, "open", _refusing_open(code, 20_000), raising=False)
    data = np.random.default_rng(1).random((6, 100, 100))
    with pytest.raises(OutputWriteError) as info:
        with atomic_h5(path) as fh:
            for k, block in enumerate(data):
                fh.create_dataset(f"f{k}", data=block, chunks=(20, 20), compression="gzip")
            # HDF5 reads back what it wrote, before and after the refusal.
            for k, block in enumerate(data):
                np.testing.assert_array_equal(fh[f"f{k}"][()], block)
    assert info.value.errno == code and info.value.filename == str(path)
    assert str(info.value) == f"cannot write {path}: {os.strerror(code)}"
    assert info.value.__cause__.errno == code
    monkeypatch.undo()
    with h5py.File(path, "r") as fh:
        assert list(fh) == ["old"]
    assert os.listdir(tmp_path) == ["result.h5"]


def _pressure_result(grid, value):
    record = types.SimpleNamespace(
        method="pcg", variant="standard", preconditioner="jacobi", deflation="none",
        deflation_vectors=0, rtol=1e-8, iterations=1, residual=1e-9, converged=True,
        reason="converged", setup_seconds=0.0, solve_seconds=0.0, residual_history=[1.0],
        true_residual_checks=[])
    fields = {name: np.full(grid.shape, value) for name in ("phi", "rho", "p")}
    return dict(case_yaml="name: case\n", version="0", backend="numpy", device="cpu",
                precision="float64", face_density="harmonic", grid=grid, record=record,
                **fields)


@pytest.mark.parametrize("refused", ["case.h5", "case.xdmf"])
def test_pressure_result_and_sidecar_are_replaced_together_or_not_at_all(
        tmp_path, monkeypatch, capsys, refused):
    path = str(tmp_path / "case.h5")
    assert write_pressure_files("case", path, **_pressure_result(Grid(4, 6), 1.0))
    kept = {name: (tmp_path / name).read_bytes() for name in ("case.h5", "case.xdmf")}
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(dst) == refused:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert not write_pressure_files("case", path, **_pressure_result(Grid(8, 6), 2.0))
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert err.startswith(f"error: case: cannot write {tmp_path / refused}: "
                          f"{os.strerror(errno.EDQUOT)} (") and err.count("\n") == 1
    if refused == "case.h5":        # the sidecar waits for the result: both old
        assert "(the previous result is kept)" in err
        assert kept == {name: (tmp_path / name).read_bytes() for name in kept}
        assert sorted(os.listdir(tmp_path)) == ["case.h5", "case.xdmf"]
    else:                           # the new result, and no sidecar of the old one
        assert "(the result is written, without its sidecar)" in err
        with h5py.File(path, "r") as fh:
            assert (fh["fields/p"][()] == 2.0).all() and fh["fields/p"].shape == (6, 8)
        assert os.listdir(tmp_path) == ["case.h5"]


def test_refused_text_write_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "a.xdmf"
    atomic_text(path, "old")

    def refuse(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(OutputWriteError, match=f"^cannot write {path}: Input/output error$"):
        atomic_text(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.xdmf"]


@pytest.mark.parametrize("code", CODES, ids=errno.errorcode.get)
def test_write_failures_are_one_line_and_other_errors_are_not(code):
    assert code in STORAGE_ERRNOS
    refused = OutputWriteError(code, os.strerror(code), "/out/x.h5")
    assert write_failure_line(refused) == f"cannot write /out/x.h5: {os.strerror(code)}"
    assert write_failure_line(OSError(code, os.strerror(code), "/out/y.csv")) == \
        f"/out/y.csv: {os.strerror(code)}"
    assert write_failure_line(SnapshotWriteError("cannot write the index x.h5: full")) == \
        "cannot write the index x.h5: full"
    assert write_failure_line(OSError(errno.ENOENT, "No such file or directory")) is None
    assert write_failure_line(RuntimeError("a bug")) is None


def test_the_command_line_ends_a_refused_write_in_one_line(monkeypatch, capsys):
    from bubbleflow.apps import cli

    def refused(args):
        raise OutputWriteError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/out/x.h5")

    monkeypatch.setattr(cli, "cmd_run", refused)
    assert main(["run", "case.yaml"]) == 1
    said = capsys.readouterr().err
    assert said == f"error: cannot write /out/x.h5: {os.strerror(errno.EDQUOT)}\n"
