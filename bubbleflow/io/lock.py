"""A lock file in a folder: ``flock``'d, never followed through a link, naming its holder.

A run locks ``OUTDIR/.<name>.lock``, a study ``OUTDIR/.<study>.study.lock``.
``flock`` is released by the kernel when the process dies, so a killed
process leaves no stale lock; the file itself stays (removing it would let
a third process lock a new file while a second still holds the old one).

The file is opened with ``O_NOFOLLOW`` and must be a regular file of one
link: a symbolic or hard link placed there by someone else is refused, never
truncated, so holding a lock cannot write to another file.
"""
from __future__ import annotations

import errno
import os
import socket
import stat

__all__ = ["FolderLock", "LockBusy", "LockRefused"]

_HOLDER_BYTES = 200


class LockBusy(Exception):
    """Another process holds the lock.

    Attributes
    ----------
    path : str
        The lock file.
    holder : str
        What the holder wrote in it (``"pid 123 on host"``), or ``"unknown
        process"``.
    """

    def __init__(self, path, holder):
        self.path, self.holder = path, holder or "unknown process"
        super().__init__(f"{path} is held by {self.holder}")


class LockRefused(Exception):
    """The lock file cannot be used: a link, not a regular file, or not openable.

    Attributes
    ----------
    path : str
        The lock file.
    problem : str
        Why, as a phrase after the path (``"is a symbolic link"``).
    """

    def __init__(self, path, problem):
        self.path, self.problem = path, problem
        super().__init__(f"{path} {problem}")


def _flock(fd):
    """True once ``fd`` is locked (or cannot be: no ``flock``), False if held elsewhere."""
    try:
        import fcntl
    except ImportError:        # pragma: no cover - no flock (Windows): unlocked
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        return True             # a file system without locks: proceed unlocked


def _open_no_follow(path):
    """``path`` opened for reading and writing (created if absent), never through a link."""
    if os.path.islink(path):        # also where O_NOFOLLOW is unknown
        raise LockRefused(path, "is a symbolic link")
    flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NONBLOCK", 0))        # a FIFO placed there must not block the open
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or os.path.islink(path):
            raise LockRefused(path, "is a symbolic link") from None
        raise LockRefused(path, f"cannot be opened ({exc.strerror})") from None
    st = os.fstat(fd)
    problem = ("is not a regular file" if not stat.S_ISREG(st.st_mode) else
               "is a hard link of another file" if st.st_nlink > 1 else None)
    if problem:
        os.close(fd)
        raise LockRefused(path, problem)
    return fd


class FolderLock:
    """The lock file ``folder/name``; a context manager holding it.

    Parameters
    ----------
    folder : str
        An existing folder.
    name : str
        The lock file's name in it.
    """

    def __init__(self, folder, name):
        self.path = os.path.join(os.fspath(folder), name)
        self._fd = None

    @property
    def held(self):
        """This object holds the lock."""
        return self._fd is not None

    def acquire(self):
        """Take the lock and write this process into the file.

        Raises
        ------
        LockBusy
            Another process holds it (nothing is written).
        LockRefused
            The file is a link or not a regular file (nothing is written).
        """
        if self._fd is not None:
            return self
        fd = _open_no_follow(self.path)
        if not _flock(fd):
            try:
                holder = os.pread(fd, _HOLDER_BYTES, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise LockBusy(self.path, " ".join(holder.split()))
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self):
        """Let the lock go (closing the file releases the ``flock``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
