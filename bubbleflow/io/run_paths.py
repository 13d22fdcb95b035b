"""Where a flow run's snapshots lie: run ids, snapshot folders, snapshot file names.

A run's snapshots are ``OUTDIR/<name>.snapshots/<run id>/step_<step>.h5``
beside its index ``OUTDIR/<name>.h5``.  The folder is derived from the
index's own name and its checked run id, never taken from the file: an index
whose ``run_id`` is not one the flow writer makes, or whose stored
``snapshot_dir`` names another folder, is refused (:class:`StoredNameError`),
so that no path is ever built from a name a file holds.
"""
from __future__ import annotations

import os
import re

import h5py

from .layout import FIELDS, RUN_ID, SNAPSHOT_DIR, text

__all__ = ["snapshot_name", "StoredNameError", "RUN_ID_PATTERN", "snapshots_root",
           "checked_run_id", "stored_run_folder", "run_folder", "snapshot_clock"]

_OLDER = "it was written by an older bubbleflow (no run_id); start a new run"


def snapshot_name(step):
    """File name of the snapshot of ``step`` in a run's snapshot folder."""
    return f"step_{step:09d}.h5"


class StoredNameError(ValueError):
    """A name stored in a flow index that is not the one its writer makes.

    The run id names the snapshot folder, so an index whose ``run_id`` is
    not of :data:`RUN_ID_PATTERN`, or whose ``snapshot_dir`` is not the
    folder of that id beside it, is refused: no path is ever built from it.

    Attributes
    ----------
    key : str
        The attribute (``run_id`` or ``snapshot_dir``).
    value : str
        What it holds.
    problem, expected : str
        What is wrong and what would be accepted, as :class:`CaseError` says them.
    """

    def __init__(self, key, value, problem, expected):
        self.key, self.value, self.problem, self.expected = key, value, problem, expected
        super().__init__(f"its {key} {problem}; expected {expected}")


#: A run id as the flow writer makes it: the UTC second it started and six hex digits.
RUN_ID_PATTERN = re.compile(r"[0-9]{8}T[0-9]{6}-[0-9a-f]{6}")
_RUN_ID_SHAPE = "an id such as 20261128T085031-1a2b3c (the flow writer's)"


def snapshots_root(path):
    """``OUTDIR/<name>.snapshots``, the folder of every run's snapshots beside the
    index ``OUTDIR/<name>.h5``."""
    stem, _ = os.path.splitext(os.fspath(path))
    return stem + ".snapshots"


def checked_run_id(value):
    """``value`` (an attribute) as text when it is a run id the flow writer makes.

    Raises
    ------
    StoredNameError
        Anything else (``..``, a path, an empty or non-text value).
    """
    run_id = text(value)
    if run_id is None or not RUN_ID_PATTERN.fullmatch(run_id):
        raise StoredNameError(RUN_ID, run_id, f"{run_id!r} is not a run id", _RUN_ID_SHAPE)
    return run_id


def stored_run_folder(path, attrs):
    """The snapshot folder of the index ``path`` (root ``attrs``), derived from its
    checked run id; its stored ``snapshot_dir`` must name the same folder."""
    if RUN_ID not in attrs:
        raise ValueError(_OLDER)
    folder = os.path.join(snapshots_root(os.path.abspath(path)), checked_run_id(attrs[RUN_ID]))
    expected = os.path.relpath(folder, os.path.dirname(os.path.abspath(path)))
    stored = text(attrs.get(SNAPSHOT_DIR))
    if stored != expected:
        raise StoredNameError(SNAPSHOT_DIR, stored, f"{stored!r} is not the folder of its run id",
                              f"{expected!r} (the index's name and run id)")
    return folder


def run_folder(path):
    """Absolute snapshot folder of the run whose index is ``path``:
    ``<name>.snapshots/<run id>`` beside it.

    Raises
    ------
    StoredNameError
        Its run id is not one the writer makes, or its ``snapshot_dir``
        names another folder.
    ValueError
        An index of an older bubbleflow (no run id).
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in (RUN_ID, SNAPSHOT_DIR) if k in fh.attrs}
    return stored_run_folder(path, attrs)


def snapshot_clock(fh):
    """``(steps, times)`` of an index's snapshots; ValueError for an older or empty one."""
    if RUN_ID not in fh.attrs:
        raise ValueError(_OLDER)
    f = fh[FIELDS]
    steps, times = f["step"][()], f["time"][()]
    if steps.shape[0] == 0:
        raise ValueError("it holds no snapshot")
    return steps, times
