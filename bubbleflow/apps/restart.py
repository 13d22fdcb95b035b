"""Continuing a flow run from the last checkpoint of its index file (``--restart``)."""
from __future__ import annotations

import os

import numpy as np

from ..io.layout import DYNAMIC_PRESSURE, VOLUME_FRACTION

__all__ = ["open_restart", "restart_tracker", "check_checkpoint_arrays", "RESTART_FREE"]


# Keys that may differ between a run and the file it restarts from.
RESTART_FREE = (("name",), ("backend",), ("output",), ("time", "end"),
                ("solver", "check_every"), ("solver", "maxiter"))


def open_restart(case, restart, backend, solver):
    """State from the last checkpoint of ``restart``, checked against ``case``."""
    from ..case.config import CaseError, first_difference
    from ..case.yaml_reader import load_yaml
    from ..flow.state import FlowState
    from ..io.checkpoint_reader import read_checkpoint
    from ..io.layout import VELOCITY_COMPONENTS

    if not os.path.isfile(restart):
        raise CaseError(restart, None, "restart file not found", "an HDF5 file written by a flow run")
    try:
        ck = read_checkpoint(restart)
        theirs = load_yaml(ck["case"], "stored case")
    except Exception as exc:    # not HDF5, not ours, no snapshot
        raise CaseError(restart, None, f"cannot restart from it ({type(exc).__name__}: {exc})",
                        "an HDF5 file written by a bubbleflow flow run") from None
    diff = first_difference(theirs, case.to_dict(), skip=RESTART_FREE)
    if diff:
        key, there, here = diff
        raise CaseError(restart, key, f"restart file is from another case ({key} is {there!r} "
                        f"there, {here!r} here)", f"a file written by case {case.name!r} "
                        "with the same physics, grid and solver")
    if ck["time"] >= case.time.end:
        raise CaseError(restart, "time.end", f"the checkpoint is at t = {ck['time']:g}, "
                        f"not before time.end = {case.time.end:g}", "a later time.end",
                        value=case.time.end)
    xp, dt = backend.xp, solver.dtype
    if solver.clsvof and VOLUME_FRACTION not in ck:
        raise CaseError(restart, "levelset.method", "the checkpoint has no volume fraction "
                        f"{VOLUME_FRACTION!r}", "a file written by a clsvof run",
                        value=case.levelset.method)
    check_checkpoint_arrays(restart, ck, case, clsvof=solver.clsvof)
    c = xp.asarray(ck[VOLUME_FRACTION], dtype=dt) if solver.clsvof else None
    pressure = ck[DYNAMIC_PRESSURE] if DYNAMIC_PRESSURE in ck else ck["p"]
    return FlowState(phi=xp.asarray(ck["phi"], dtype=dt),
                     velocity=tuple(xp.asarray(ck[name], dtype=dt)
                                    for name in VELOCITY_COMPONENTS[:case.grid.ndim]),
                     p=xp.asarray(pressure, dtype=dt), time=ck["time"], step=ck["step"], c=c)


def restart_tracker(restart):
    """The bubble tracker stored with the last checkpoint of ``restart``
    (:class:`~bubbleflow.flow.bubble_tracking.BubbleTracker`), or None where
    it holds none (a run that tracked nothing).  Read after
    :func:`open_restart` accepted the file.

    Raises
    ------
    CaseError
        The stored state is not a tracker's (one line naming the file).
    """
    from ..case.config import CaseError
    from ..flow.bubble_tracking import BubbleTracker
    from ..io.checkpoint_reader import read_checkpoint_tracker

    state = read_checkpoint_tracker(restart)
    if state is None:
        return None
    try:
        return BubbleTracker.from_state(state)
    except (ValueError, TypeError) as exc:
        raise CaseError(restart, None, f"its checkpoint's bubble tracker cannot be read ({exc})",
                        "a file written by a bubbleflow flow run") from None


def _shape_text(shape):
    return "(" + ", ".join(str(n) for n in shape) + ")"


def check_checkpoint_arrays(path, checkpoint, case, clsvof=False):
    """Refuse a checkpoint whose snapshot arrays do not fit ``case``'s grid.

    Every array the restart reads (``phi``, the velocity components, the
    pressure it continues from, and ``c`` of a CLSVOF run) must be present,
    a floating-point array and of the shape :func:`~bubbleflow.io.layout.field_shapes`
    gives for the case's grid.

    Parameters
    ----------
    path : str
        The index file restarted from (named in the error).
    checkpoint : dict
        What :func:`bubbleflow.io.checkpoint_reader.read_checkpoint` returns.
    case : Case
        The case that restarts.
    clsvof : bool
        The run carries a volume fraction ``c``.

    Raises
    ------
    CaseError
        One line naming the file, the array, what it is and what was expected.
    """
    from ..case.config import CaseError
    from ..io.layout import VELOCITY_COMPONENTS, field_shapes
    from ..mesh.grid import Grid

    grid = Grid.from_config(case.grid)
    shapes = field_shapes(grid)
    cells = tuple(grid.shape)
    # The pressure the run continues from: the dynamic one where the
    # snapshot has it (reduced gravity), else the whole pressure.
    pressure = DYNAMIC_PRESSURE if DYNAMIC_PRESSURE in checkpoint else "p"
    wanted = {"phi": shapes["phi"], pressure: cells}
    wanted.update((name, shapes[name]) for name in VELOCITY_COMPONENTS[:grid.ndim])
    if clsvof:
        wanted[VOLUME_FRACTION] = cells
    where = f"checkpoint at step {checkpoint.get('step')}"
    grid_text = " x ".join(map(str, grid.cells))
    for name, shape in wanted.items():
        expected = f"a floating-point array of shape {_shape_text(shape)} (grid {grid_text})"
        if name not in checkpoint:
            raise CaseError(path, None, f"the {where} has no array {name!r}", expected)
        value = checkpoint[name]
        if not isinstance(value, np.ndarray):
            raise CaseError(path, None, f"array {name!r} of the {where} is not an array "
                            f"(got {type(value).__name__} {str(value)[:40]})", expected)
        if value.dtype.kind != "f" or tuple(value.shape) != shape:
            raise CaseError(path, None, f"array {name!r} of the {where} has shape "
                            f"{_shape_text(value.shape)}, dtype {value.dtype}", expected)
