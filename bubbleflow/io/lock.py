"""A lock file in a folder: ``flock``'d, never followed through a link, naming its holder.

A run locks ``OUTDIR/.<name>.lock``, a study ``OUTDIR/.<study>.study.lock``.
``flock`` is released by the kernel when the process dies, so a killed
process leaves no stale lock (only its file, which the next holder reuses
and removes).

The holder removes the file when it lets the lock go, so a finished run or
study leaves nothing behind.  It unlinks the file while it still holds the
``flock``, and every acquirer, once its ``flock`` is granted, checks that
the path still names the file it locked (``fstat`` of its descriptor
against ``lstat`` of the path) and starts again if not: a process that
opened the file just before it was removed would otherwise hold a lock on a
file nobody else can see, while a third creates and locks a new one.

The file is opened with ``O_NOFOLLOW`` and must be a regular file of one
link: a symbolic or hard link placed there by someone else is refused, never
truncated, so holding a lock cannot write to another file.
"""
from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat

__all__ = ["FolderLock", "LockBusy", "LockRefused"]

_HOLDER_BYTES = 200
#: Attempts at a lock whose file is removed by its holders between our open
#: and our ``flock`` each time: only a storm of holders coming and going.
_ATTEMPTS = 100


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


def _names(path, fd):
    """Whether ``path`` is (not a link to) the file open as ``fd``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


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
        self._pid = None        # the process that took it (a fork's copy does not remove it)

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
        for _ in range(_ATTEMPTS):
            fd = _open_no_follow(self.path)
            if not _flock(fd):
                try:
                    holder = os.pread(fd, _HOLDER_BYTES, 0).decode(errors="replace").strip()
                finally:
                    os.close(fd)
                raise LockBusy(self.path, " ".join(holder.split()))
            if _names(self.path, fd):
                break
            os.close(fd)        # its holder removed it after our open: lock the path's file
        else:
            raise LockBusy(self.path, "processes taking and letting it go")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self.path)        # still ours: checked above, flock held
            os.close(fd)
            raise
        self._fd, self._pid = fd, os.getpid()
        return self

    def release(self):
        """Remove the lock file and let the lock go.

        The file is unlinked while the ``flock`` is held (closing the file
        releases it), and only when the path still names the file this
        object locked: a file someone put in its place is left alone.  A
        copy of this object in a forked child only closes its descriptor.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # A file that cannot be removed (a folder made read-only) only stays.
            with contextlib.suppress(OSError):
                if self._pid == os.getpid() and _names(self.path, fd):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
