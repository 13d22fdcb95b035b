"""What a flow run's restart reads: its index's series and its last snapshot.

Strict where :func:`.result_reader.read_run` is tolerant: the run id and
the snapshot folder are checked (:mod:`.run_paths`), every snapshot the
index lists must exist, and an index of an older bubbleflow or without
snapshots is refused, so that ``--restart`` continues only from a
checkpoint it can take up bit for bit.
"""
from __future__ import annotations

import os

import h5py

from .bubble_tables import read_bubble_rows, read_tracker_state
from .layout import (CASE, DIAGNOSTICS_GROUP, DYNAMIC_PRESSURE, GRID, HISTORY, HISTORY_OFFSETS,
                     MODE, RUN_STATUS, SNAPSHOT_DIR, SOLVER, SOLVER_DTYPES, TRUE_CHECKS,
                     VOLUME_FRACTION, diagnostics_names, text)
from .run_paths import snapshot_clock, snapshot_name, stored_run_folder

__all__ = ["read_index", "read_checkpoint", "read_checkpoint_tracker"]


def read_index(path):
    """``(series, snapshots, attrs)`` of a flow index, as
    :func:`.result_writer.write_flow_index` takes them.

    ``series``: ``diagnostics``, ``solver`` (dicts of lists), ``history``
    (one array per solve), ``checks``, ``bubbles`` and ``bubble_events``
    (lists of row tuples); ``snapshots``: ``(step, time, file
    name)``, every file checked to exist; ``attrs``: the root attributes but
    ``run_status``, ``mode`` and ``snapshot_dir``.

    Raises
    ------
    StoredNameError
        Its run id or snapshot folder is not what its writer makes.
    ValueError
        An index of an older bubbleflow, without snapshots, or with one missing.
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in fh.attrs}
        steps, times = snapshot_clock(fh)
        folder = stored_run_folder(path, attrs)
        snaps = [(int(st), float(t), snapshot_name(int(st))) for st, t in zip(steps, times)]
        for _, _, name in snaps:
            if not os.path.isfile(os.path.join(folder, name)):
                raise ValueError(f"its snapshot {os.path.join(folder, name)} is missing")
        d = fh[DIAGNOSTICS_GROUP]
        s = fh[SOLVER]
        offsets = s[HISTORY_OFFSETS][()]
        hist = s[HISTORY][()]
        ndim = 3 if "z" in fh[GRID] else 2
        names = diagnostics_names(ndim)
        series = {
            "diagnostics": {name: d[name][()].tolist() for name in names},
            "solver": {name: s[name][()].tolist() for name in SOLVER_DTYPES},
            "history": [hist[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)],
            "checks": [tuple(row) for row in s[TRUE_CHECKS][()].tolist()],
        }
        series["bubbles"], series["bubble_events"] = read_bubble_rows(fh, ndim)
        series["solver"]["reason"] = [text(r) for r in s["reason"][()]]
    attrs = {k: v for k, v in attrs.items() if k not in (RUN_STATUS, MODE, SNAPSHOT_DIR)}
    return series, snaps, attrs


def read_checkpoint_tracker(path):
    """The bubble tracker's state stored with the last snapshot of the flow
    index ``path`` (a dict of host arrays), or None where that snapshot
    holds none.

    Raises
    ------
    StoredNameError, ValueError
        As :func:`read_checkpoint`.
    """
    with h5py.File(path, "r") as fh:
        steps, _ = snapshot_clock(fh)
        folder = stored_run_folder(path, fh.attrs)
    with h5py.File(os.path.join(folder, snapshot_name(int(steps[-1]))), "r") as fh:
        return read_tracker_state(fh)


def read_checkpoint(path):
    """The last snapshot of a flow run: dict of host arrays, the clock and the case.

    Raises
    ------
    StoredNameError
        Its run id or snapshot folder is not what its writer makes.
    ValueError
        An index of an older bubbleflow or without snapshots.
    """
    with h5py.File(path, "r") as fh:
        steps, times = snapshot_clock(fh)
        case = text(fh.attrs[CASE])
        folder = stored_run_folder(path, fh.attrs)
    snapshot = os.path.join(folder, snapshot_name(int(steps[-1])))
    with h5py.File(snapshot, "r") as fh:
        out = {key: fh[key][()] for key in ("phi", "u", "v", "w", "p", DYNAMIC_PRESSURE,
                                            VOLUME_FRACTION) if key in fh}
    out["step"] = int(steps[-1])
    out["time"] = float(times[-1])
    out["case"] = case
    return out
