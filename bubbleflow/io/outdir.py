"""Where a run writes: checked before any work, locked, never silently replaced.

A run named ``<name>`` writing to ``OUTDIR`` owns ``OUTDIR/<name>.h5``, its
``<name>.xdmf`` sidecar and, in mode flow, the ``<name>.snapshots`` folder.
:class:`RunOutput` is entered before the computation starts:

* the folder is created if needed and probed by creating (and removing) a
  file with the longest name the run will use, so a folder that is a
  regular file, is not writable, lies under a file, or a name that is too
  long is one line at the start, not a traceback at the end;
* a lock (``OUTDIR/.<name>.lock``, :mod:`bubbleflow.io.lock`: released by
  the kernel when the process dies, never followed through a link, its
  file removed when the run lets it go) stops two runs from writing one
  result;
* an existing ``<name>.h5`` is refused unless ``overwrite``; then it is
  renamed to ``<name>.previous.h5`` (with its sidecar; the snapshot files it
  reads stay where they are) and removed only when the new run has
  finished, so a killed new run never costs the old result.

No path is taken from inside a file: a restart index's snapshot folder is
derived from its checked run id (see :func:`bubbleflow.io.run_paths.run_folder`)
before anything is created, and the only folder ever removed is the replaced
run's ``<name>.snapshots/<run id>``, a real folder, never the new run's.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid

from ..case.config import CaseError
from .atomic import probe_writable
from .layout import MODE, RUN_ID, RUN_STATUS, text as _text
from .result_header import read_attrs
from .run_paths import StoredNameError, checked_run_id, run_folder, snapshots_root
from .lock import FolderLock, LockBusy, LockRefused

__all__ = ["RunOutput", "check_name"]

_NAME_LIMIT = 200        # leaves room for the suffixes and temporary names below 255 bytes


def check_name(case):
    """The run name makes file names: no path separators, not too long."""
    name = case.name
    bad = [c for c in (os.sep, os.altsep, "\0") if c and c in name]
    if bad or name in (".", "..") or not name.strip():
        raise CaseError.from_runtime(case, "name", f"got {name!r}",
                                     "a file name without '/' (it names the output file)",
                                     value=name)
    if len(name.encode("utf-8", "surrogateescape")) > _NAME_LIMIT:
        raise CaseError.from_runtime(case, "name", f"got a name of {len(name)} characters",
                                     f"at most {_NAME_LIMIT} bytes (it names the output files)",
                                     value=name[:40] + "...")


class RunOutput:
    """The output files of one run; a context manager holding their lock.

    Parameters
    ----------
    case : Case
        The validated case (for error messages and the run name).
    outdir : str
        Output folder.
    overwrite : bool
        Replace an existing result once this run has finished.
    restart : str, optional
        The index a flow run restarts from; when it is this run's own
        output the run continues in place (appending), which needs no
        ``overwrite``.
    flow : bool
        Mode flow (a snapshot folder belongs to the run).
    """

    def __init__(self, case, outdir, overwrite=False, restart=None, flow=False):
        self.case = case
        self.outdir = outdir
        self.name = case.name
        self.path = os.path.join(outdir, f"{case.name}.h5")
        self.xdmf = os.path.join(outdir, f"{case.name}.xdmf")
        self.previous = os.path.join(outdir, f"{case.name}.previous.h5")
        self.previous_xdmf = os.path.join(outdir, f"{case.name}.previous.xdmf")
        self.overwrite = overwrite
        self.restart = restart
        self.in_place = restart is not None and os.path.abspath(restart) == os.path.abspath(self.path)
        self.flow = flow
        self._lock = FolderLock(outdir, f".{case.name}.lock")
        self.moved_aside = False

    # ------------------------------------------------------------- checks
    def _fail(self, problem, expected, key="output.directory"):
        raise CaseError.from_runtime(self.case, key, problem, expected, value=self.outdir)

    def check_location(self):
        """Create the folder and prove a file of the longest name can be written there."""
        check_name(self.case)
        outdir = self.outdir
        probe_dir = outdir
        while probe_dir and not os.path.exists(probe_dir):
            probe_dir = os.path.dirname(probe_dir.rstrip(os.sep))
        if probe_dir and not os.path.isdir(probe_dir):
            self._fail(f"{probe_dir!r} is a file, not a folder",
                       "a folder (or a path where one can be created)")
        try:
            os.makedirs(outdir, exist_ok=True)
        except OSError as exc:
            self._fail(f"cannot create the folder {outdir!r} ({exc.strerror})",
                       "a writable location")
        # The longest names the run writes: the lock, the set-aside result and
        # the temporary files beside them (atomic writes add ~20 characters).
        longest = f".{self.name}.previous.xdmf.{uuid.uuid4().hex}.tmp"
        try:
            probe_writable(outdir, longest)
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise CaseError.from_runtime(
                    self.case, "name", f"makes file names too long for {outdir!r} "
                    f"({len(longest)} characters)", "a shorter name", value=self.name) from None
            self._fail(f"cannot write in {outdir!r} ({exc.strerror})", "a writable folder")

    def _take_lock(self):
        try:
            self._lock.acquire()
        except LockBusy as exc:
            self._fail(f"another bubbleflow run ({exc.holder}) is writing {self.path}",
                       "one run per output: wait for it, or use another -o or name")
        except LockRefused as exc:
            self._fail(f"the lock file {exc.path} {exc.problem}; bubbleflow never writes "
                       "through it", "a regular file there or nothing (remove it)")

    def _restart_run_id(self):
        """The run id of the restart index, checked with its snapshot folder before
        anything is created; None when there is no restart or the file is not a
        flow index (the restart reader says what it is)."""
        if self.restart is None or not os.path.isfile(self.restart):
            return None
        try:
            return os.path.basename(run_folder(self.restart))
        except StoredNameError as exc:
            raise CaseError(self.restart, exc.key, f"cannot restart from it: {exc.problem}",
                            exc.expected, value=exc.value) from None
        except Exception:       # noqa: BLE001 - not HDF5, not a flow index: said later
            return None

    def _remove_stale_temporaries(self):
        """Half-written temporaries of a killed run of this name (we hold the lock)."""
        prefixes = tuple(f".{self.name}.{ext}." for ext in ("h5", "xdmf", "previous.h5"))
        for entry in os.listdir(self.outdir):
            if entry.startswith(prefixes) and entry.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.outdir, entry))

    def _check_existing(self):
        if self.in_place:
            return
        if os.path.exists(self.previous) and (os.path.exists(self.path) or self.overwrite):
            self._fail(f"{self.previous} is the result an --overwrite run was to replace; "
                       f"that run did not finish ({_status(self.path)})",
                       f"move or delete one of {self.previous} and {self.path} first")
        if not os.path.exists(self.path):
            return
        if not self.overwrite:
            status = _status(self.path)
            self._fail(f"{self.path} exists ({status})",
                       "--overwrite to replace it once this run has finished"
                       + (f", --restart {self.path} to continue it" if self.flow else "")
                       + ", or another -o or name")

    # ------------------------------------------------------------- life
    def __enter__(self):
        run_id = self._restart_run_id() if self.flow else None
        self.check_location()
        self._take_lock()
        try:
            if self.flow:
                from .flow_output import check_snapshot_folders

                check_snapshot_folders(self.path, run_id)
            self._remove_stale_temporaries()
            self._check_existing()
        except BaseException:
            self._unlock()
            raise
        return self

    def set_aside(self):
        """Rename an existing result to ``<name>.previous.*`` (overwrite)."""
        if self.in_place or not self.overwrite or not os.path.exists(self.path):
            return None
        if self.flow or _is_flow(self.path):
            os.replace(self.path, self.previous)
            if os.path.exists(self.xdmf):
                os.replace(self.xdmf, self.previous_xdmf)
            self.moved_aside = True
            return self.previous
        return None          # a pressure result is replaced atomically at the end

    def finished(self):
        """The new result is complete: drop the set-aside one and its snapshots."""
        if not self.moved_aside:
            return
        old = self._replaced_run_folder()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        for p in (self.previous, self.previous_xdmf):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        self.moved_aside = False

    def _replaced_run_folder(self):
        """``<name>.snapshots/<run id>`` of the set-aside result: its run id checked,
        a real folder (not a link) in a real ``<name>.snapshots``, and not the
        new run's (a restart keeps the id of the run it continues); else None."""
        old_id, new_id = _run_id(self.previous), _run_id(self.path)
        if old_id is None or new_id is None or old_id == new_id:
            return None
        root = snapshots_root(self.path)
        folder = os.path.join(root, old_id)
        if not (_real_folder(root) and _real_folder(folder)):
            return None
        return folder

    def _unlock(self):
        self._lock.release()

    def __exit__(self, *exc):
        self._unlock()
        return False


def _attrs(path):
    try:
        return read_attrs(path)
    except Exception:       # noqa: BLE001 - only describes the file
        return None


def _run_id(path):
    """The checked run id of the flow index ``path``, or None."""
    a = _attrs(path)
    if not a or _text(a.get(MODE, "")) != "flow" or RUN_ID not in a:
        return None
    try:
        return checked_run_id(a[RUN_ID])
    except StoredNameError:
        return None


def _real_folder(path):
    """``path`` is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_flow(path):
    a = _attrs(path)
    return bool(a) and _text(a.get(MODE, "")) == "flow"


def _status(path):
    a = _attrs(path)
    if a is None:
        return "not a readable bubbleflow file"
    mode = _text(a.get(MODE, "?"))
    if mode == "flow":
        return f"a flow run, status {_text(a.get(RUN_STATUS, 'unknown'))}"
    return f"a {mode} result"
