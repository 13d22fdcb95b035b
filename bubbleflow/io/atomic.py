"""Atomic file writing: a temporary file beside the target, renamed into place.

Every file bubbleflow writes (HDF5 results and snapshots, XDMF sidecars,
study summaries, benchmark CSVs, PNG figures) goes through :func:`atomic_path`
or one of its wrappers, so a reader sees either the old file or the complete
new one, also after a crash; results get the permissions of the user's umask
and are flushed to disk before the rename.

A write that fails (a full disk, a quota, a file too large, an I/O error)
raises :class:`OutputWriteError`, an :class:`OSError` naming the file that
was to be written; the temporary is removed and the old file stays.  HDF5
files are written through a file object of this module, never by HDF5 on the
disk itself: see :func:`atomic_h5`.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import tempfile

__all__ = ["atomic_path", "atomic_h5", "atomic_text", "atomic_bytes_writer", "link_or_copy",
           "file_mode", "probe_writable", "OutputWriteError", "WriteFailure", "STORAGE_ERRNOS",
           "write_failure_line"]

#: errno values of a storage that refuses a write: full, over quota, a file
#: larger than allowed, broken.
STORAGE_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO")
                           if hasattr(errno, name))


class WriteFailure(Exception):
    """An output could not be written; ``str()`` is one line naming it and why.

    The base of :class:`OutputWriteError` and of a flow run's
    :class:`~bubbleflow.io.flow_output.SnapshotWriteError`.
    """


def write_failure_line(exc):
    """``exc`` as one line when it is a failed write, else None.

    A :class:`WriteFailure`, or any OSError of a full disk, a quota, a file
    too large or an I/O error (:data:`STORAGE_ERRNOS`): the command that met
    it ends with this line, not a traceback (the fix is room on the disk,
    not in the code).
    """
    if isinstance(exc, WriteFailure):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return None


class OutputWriteError(OSError, WriteFailure):
    """Writing the output file ``filename`` failed; ``errno`` and ``strerror`` say why.

    ``str()`` is one line, ``cannot write FILE: REASON``; the error of the
    failed operation (on the temporary file) is chained as its cause.
    """

    def __str__(self):
        return f"cannot write {self.filename}: {self.strerror}"

    @classmethod
    def of(cls, exc, path):
        """``exc`` (an OSError met while writing ``path``) as an OutputWriteError of ``path``."""
        return cls(exc.errno, exc.strerror or str(exc), os.fspath(path))


def _read_umask():
    """The process umask, read without changing it where the platform allows."""
    # /proc/self/status (Linux >= 4.7) reports it without touching it.
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_by_setting():
    # os.umask can only be read by setting it; setting it is process-global,
    # so a file another thread creates in this instant would get umask 0.  Done
    # once, at import (see _UMASK_AT_IMPORT), never while writing results.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _read_umask()
if _UMASK_AT_IMPORT is None:
    _UMASK_AT_IMPORT = _umask_by_setting()


def file_mode():
    """Permission bits of a new file under the current umask (``0o666 & ~umask``).

    The umask is read from ``/proc/self/status`` where available (so a later
    change is seen); elsewhere the value read once at import is used.
    """
    mask = _read_umask()
    return 0o666 & ~(_UMASK_AT_IMPORT if mask is None else mask)


def probe_writable(folder, name):
    """Create and remove ``folder/name``: raises the OSError a real write would.

    ``os.access`` is no proof (root passes it in folders such as /proc, and
    it knows nothing of name lengths or full disks).
    """
    probe = os.path.join(folder, name)
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    os.unlink(probe)


def _fsync_dir(folder):
    """Persist a rename in ``folder``; best effort (Windows cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass    # some file systems refuse fsync on a folder
    finally:
        os.close(fd)


def _about(exc, paths):
    """Whether the OSError ``exc`` is about one of ``paths`` (or names no file: a write)."""
    return exc.filename is None or os.fspath(exc.filename) in paths


@contextlib.contextmanager
def atomic_path(path):
    """A temporary file name beside ``path``, renamed over ``path`` on success.

    The body writes the file named by the yielded path (it exists, empty, and
    may be truncated or replaced).  When the body returns, the temporary gets
    the permissions of a newly created file (``0o666 & ~umask``; the temporary
    itself is created 0600), is flushed to disk, renamed over ``path``, and the
    rename is flushed too (where the folder can be synced).  Readers therefore
    see either the old file or the complete new one, also after a crash.  On
    any error the temporary is removed and an existing ``path`` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        The final file; its folder is created if missing.

    Yields
    ------
    str
        The temporary path, in the same folder (so the rename is atomic).

    Raises
    ------
    OutputWriteError
        Creating, writing, syncing or renaming the file failed (an OSError
        of the body about the temporary, or about no file, included).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=folder)
    except OSError as exc:
        raise OutputWriteError.of(exc, path) from exc
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
        try:
            os.chmod(tmp, file_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError) \
                and _about(exc, (tmp, path)):
            raise OutputWriteError.of(exc, path) from exc
        raise
    _fsync_dir(folder)


class _SpillingFile:
    """The file object through which HDF5 writes a temporary (h5py's ``fileobj`` driver).

    Writes go to the disk until one fails.  From then on the file lives in
    memory (what is on disk read back, the disk copy truncated to give its
    space back) and the first error is kept for :func:`atomic_h5` to raise
    once HDF5 has closed the file.  HDF5 never sees a failed write: after one
    it leaves datasets half closed, and closes them again when the process
    exits, a use after free (HDF5 2.0: a segmentation fault).  Memory holds
    nothing until a write fails, then at most the file.
    """

    def __init__(self, path):
        self.path = path
        self.disk = open(path, "r+b", buffering=0)      # noqa: SIM115 - closed by close()
        self.memory = None          # io.BytesIO once a write failed
        self.error = None           # the first OSError
        self.pos = 0
        self.size = 0

    def __repr__(self):
        return self.path            # h5py names the HDF5 file by it

    def seek(self, offset, whence=os.SEEK_SET):
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, buf):
        view = memoryview(buf).cast("B")
        done = 0
        if self.memory is None:
            try:
                self.disk.seek(self.pos)
                while done < len(view):
                    n = self.disk.readinto(view[done:])
                    if not n:
                        break
                    done += n
            except OSError as exc:      # (a disk that cannot read back fails the write too)
                self._spill(exc)
        if self.memory is not None:
            self.memory.seek(self.pos)
            done = self.memory.readinto(view)
        # Space allocated but not written yet (or a lost read): zeros, as on disk.
        view[done:] = bytes(len(view) - done)
        self.pos += len(view)
        return len(view)

    def read(self, size=-1):
        size = max(self.size - self.pos, 0) if size is None or size < 0 else size
        buf = bytearray(size)
        self.readinto(buf)
        return bytes(buf)

    def write(self, data):
        view = memoryview(data).cast("B")
        if self.memory is None:
            try:
                self.disk.seek(self.pos)
                done = 0
                while done < len(view):
                    wrote = self.disk.write(view[done:])
                    if not wrote:
                        raise OSError(errno.EIO, "the disk took no bytes of a write")
                    done += wrote
            except OSError as exc:
                self._spill(exc)
        if self.memory is not None:
            self.memory.seek(self.pos)
            self.memory.write(view)
        self.pos += len(view)
        self.size = max(self.size, self.pos)
        return len(view)

    def truncate(self, size=None):
        size = self.pos if size is None else size
        if self.memory is None:
            try:
                self.disk.truncate(size)
            except OSError as exc:
                self._spill(exc)
        if self.memory is not None:
            self.memory.truncate(size)      # (a longer file reads zeros past its end)
        self.size = size
        return size

    def flush(self):
        """Nothing: :func:`atomic_path` syncs the temporary when HDF5 is done."""

    def _spill(self, exc):
        self.error = exc
        self.memory = io.BytesIO()
        with contextlib.suppress(OSError):
            self.disk.seek(0)
            while self.memory.tell() < self.size:
                chunk = self.disk.read(self.size - self.memory.tell())
                if not chunk:
                    break
                self.memory.write(chunk)
        with contextlib.suppress(OSError):
            self.disk.truncate(0)

    def close(self):
        self.disk.close()


@contextlib.contextmanager
def atomic_h5(path):
    """Open a temporary HDF5 file beside ``path``; rename it into place on success.

    See :func:`atomic_path`: on any error the temporary is removed and an
    existing ``path`` is left untouched; the result has the umask's permissions
    and is on disk when the block ends.  HDF5 writes through a file object
    that keeps its writes in memory once the disk refuses one, so the block
    and the closing of the file run to their end; the refusal is then raised.

    Raises
    ------
    OutputWriteError
        A write of the file failed (a full disk, a quota, a file too large,
        an I/O error): raised when the block has ended.
    """
    import h5py

    with atomic_path(path) as tmp:
        target = _SpillingFile(tmp)
        try:
            with h5py.File(target, "w") as fh:
                yield fh
        finally:
            target.close()
        if target.error is not None:
            raise OutputWriteError.of(target.error, path) from target.error


def atomic_text(path, text, encoding="utf-8"):
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`).

    Line endings are written as given (no translation).
    """
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding, newline="") as fh:
            fh.write(text)


@contextlib.contextmanager
def atomic_bytes_writer(path):
    """A binary file object on a temporary beside ``path``, renamed into place on success.

    See :func:`atomic_path` (permissions, durability, clean-up on error).
    """
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            yield fh


def link_or_copy(src, dst):
    """Put ``src`` at ``dst`` (a hard link, else a copy) unless ``dst`` exists.

    The link or copy is made under a temporary name and renamed into place,
    so ``dst`` is either absent or complete.

    Raises
    ------
    OutputWriteError
        The copy or the rename failed (the temporary is removed).
    """
    if os.path.exists(dst):
        return
    tmp = dst + ".link.tmp"
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputWriteError.of(exc, dst) from exc
