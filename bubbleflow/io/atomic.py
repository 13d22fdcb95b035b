"""Atomic file writing: a temporary file beside the target, renamed into place.

Every file bubbleflow writes (HDF5 results and snapshots, XDMF sidecars,
study summaries, benchmark CSVs, PNG figures) goes through :func:`atomic_path`
or one of its wrappers, so a reader sees either the old file or the complete
new one, also after a crash; results get the permissions of the user's umask
and are flushed to disk before the rename.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

__all__ = ["atomic_path", "atomic_h5", "atomic_text", "atomic_bytes_writer", "link_or_copy",
           "file_mode", "probe_writable"]


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
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
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
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


@contextlib.contextmanager
def atomic_h5(path):
    """Open a temporary HDF5 file beside ``path``; rename it into place on success.

    See :func:`atomic_path`: on any error the temporary is removed and an
    existing ``path`` is left untouched; the result has the umask's permissions
    and is on disk when the block ends.
    """
    import h5py

    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as fh:
            yield fh


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
    """
    if os.path.exists(dst):
        return
    tmp = dst + ".link.tmp"
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
