"""Everything a run file holds, read tolerantly, for the apps that report on it.

:func:`read_run` requires nothing: a pressure result, a flow index (also of
a run still going) or a file missing some part is read as far as it goes,
and each caller (``plot``, ``sweep``, the validations) states what it needs
and says so in its own words.  What a restart reads, checked, is
:mod:`.checkpoint_reader`'s.
"""
from __future__ import annotations

import h5py
import numpy as np
import yaml

from ..case.yaml_reader import load_yaml
from .bubble_tables import read_bubble_tables
from .layout import (CASE, CELL_FIELDS, DIAGNOSTICS_GROUP, FIELDS, GRID, HISTORY,
                     HISTORY_OFFSETS, MODE, SOLVER, SOLVER_DTYPES, TRUE_CHECKS, VOLUME_FRACTION,
                     text)

__all__ = ["read_run"]


def read_run(path, fields=True):
    """What a run file (``mode`` pressure or flow) holds, as host arrays; absent parts None.

    Tolerant: nothing is required, so that each caller states what it needs
    and says so in its own words.

    Parameters
    ----------
    path : str or os.PathLike
    fields : bool
        Also read the fields (a flow run: its last snapshot, and the level
        set of its first).

    Returns
    -------
    dict
        ``attrs`` (root attributes), ``groups`` (top-level names), ``case``
        (the resolved case, parsed; ``{}`` when absent or unreadable),
        ``mode`` (the attribute, else ``flow`` when there are diagnostics,
        else ``pressure``), ``x``, ``y`` (cell centres), ``grid_attrs``;
        ``field_shapes`` (``p``, ``rho``, ``phi`` present under /fields),
        ``fields`` (see :func:`_read_fields`); ``solver_attrs``, ``solver``
        (the per-solve series present, typed as :data:`.layout.SOLVER_DTYPES`, and
        ``reason``; None without /solver), ``histories`` (``(solve, array)``
        of recursive residuals), ``checks`` (pressure: ``(k, 2)`` iteration,
        residual), ``step_checks`` (flow: ``(k, 3)`` step, iteration,
        residual); ``diagnostics`` (every series, float64; None without the
        group); ``bubbles``, ``bubble_events`` (the bubble tables, column
        name -> array: :func:`.bubble_tables.read_bubble_tables`; empty
        dicts without them).
    """
    with h5py.File(path, "r") as fh:
        attrs = {k: fh.attrs[k] for k in fh.attrs}
        mode = text(attrs.get(MODE)) or ("flow" if DIAGNOSTICS_GROUP in fh else "pressure")
        grid = fh.get(GRID)
        run = {"attrs": attrs, "groups": set(fh.keys()), "case": _case(attrs), "mode": mode,
               "x": _array(fh, f"{GRID}/x"), "y": _array(fh, f"{GRID}/y"),
               "z": _array(fh, f"{GRID}/z") if grid is not None and "z" in grid else None,
               "grid_attrs": dict(grid.attrs) if grid is not None else {}}
        f = fh.get(FIELDS)
        run["field_shapes"] = {n: f[n].shape for n in CELL_FIELDS if f is not None and n in f}
        ndim = 2 if run["z"] is None else 3
        run["fields"] = _read_fields(f, mode, ndim) if fields else None
        run.update(_read_solver(fh.get(SOLVER), mode))
        d = fh.get(DIAGNOSTICS_GROUP)
        run["diagnostics"] = (None if d is None else
                              {n: np.asarray(d[n][()], dtype=np.float64).ravel() for n in d})
        run["bubbles"], run["bubble_events"] = read_bubble_tables(fh)
    return run


def _case(attrs):
    try:
        case = load_yaml(text(attrs.get(CASE)) or "", CASE) or {}
    except yaml.YAMLError:
        case = {}
    return case if isinstance(case, dict) else {}


def _array(group, name, dtype=np.float64):
    if group is None or name not in group:
        return None
    return np.asarray(group[name][()], dtype=dtype).ravel()


def _read_fields(f, mode, ndim=2):
    """``p``, ``rho``, ``phi`` as ``ndim``-D float64 arrays, or None (some absent, no snapshot).

    A flow run gives its last snapshot, with ``phi_first`` (the first
    snapshot's level set), ``time_first``, ``time``, ``step``,
    ``snapshots`` (how many) and, where the snapshots hold it, the volume
    fraction ``c``; None also when its fields are not ``(snapshots, [nz,]
    ny, nx)``.
    """
    if f is None or any(n not in f for n in CELL_FIELDS):
        return None
    if mode != "flow":
        return {name: np.asarray(f[name][()], dtype=np.float64) for name in CELL_FIELDS}
    if f["p"].ndim != ndim + 1 or f["p"].shape[0] == 0:
        return None
    k = f["p"].shape[0] - 1
    out = {name: np.asarray(f[name][k], dtype=np.float64) for name in CELL_FIELDS}
    # The first snapshot's interface (t = 0 unless restarted elsewhere).
    out["phi_first"] = np.asarray(f["phi"][0], dtype=np.float64) if k > 0 else out["phi"]
    has_time = "time" in f and f["time"].shape[0]
    out["time_first"] = float(f["time"][0]) if has_time else None
    out["time"] = float(f["time"][k]) if "time" in f and f["time"].shape[0] > k else None
    out["step"] = int(f["step"][k]) if "step" in f and f["step"].shape[0] > k else None
    out["snapshots"] = int(f["p"].shape[0])
    if VOLUME_FRACTION in f and f[VOLUME_FRACTION].shape == f["p"].shape:
        out[VOLUME_FRACTION] = np.asarray(f[VOLUME_FRACTION][k], dtype=np.float64)
    return out


def _read_solver(s, mode):
    """``solver_attrs``, ``solver``, ``histories``, ``checks``, ``step_checks`` of /solver."""
    out = {"solver_attrs": {}, "solver": None, "histories": [], "checks": None,
           "step_checks": None}
    if s is None:
        return out
    out["solver_attrs"] = {k: s.attrs[k] for k in s.attrs}
    series = {name: _array(s, name, dt) for name, dt in SOLVER_DTYPES.items()}
    series["reason"] = [text(r) for r in s["reason"][()]] if "reason" in s else None
    out["solver"] = series
    if TRUE_CHECKS in s:
        raw = np.asarray(s[TRUE_CHECKS][()], dtype=np.float64)
        if raw.ndim == 2 and raw.shape[1] == 3:
            out["step_checks"] = raw
        elif raw.size % 2 == 0 and mode == "pressure":
            out["checks"] = raw.reshape(-1, 2)
    hist = _array(s, HISTORY)
    offsets = _array(s, HISTORY_OFFSETS, np.int64)
    its = series["iterations"]
    if hist is not None and hist.size:
        if offsets is not None and offsets.size >= 2:
            n = min(offsets.size - 1, (len(its) if its is not None else 0) or offsets.size - 1)
            for i in range(n):
                a, b = int(offsets[i]), int(offsets[i + 1])
                if b > a:
                    out["histories"].append((i, hist[a:b]))
        else:
            out["histories"].append((0, hist))
    return out
