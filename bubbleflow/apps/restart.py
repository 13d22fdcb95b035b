"""Continuing a flow run from the last checkpoint of its index file (``--restart``)."""
from __future__ import annotations

import os

from ..io.layout import DYNAMIC_PRESSURE, VOLUME_FRACTION

__all__ = ["open_restart", "RESTART_FREE"]


# Keys that may differ between a run and the file it restarts from.
RESTART_FREE = (("name",), ("backend",), ("output",), ("time", "end"),
                ("solver", "check_every"), ("solver", "maxiter"))


def open_restart(case, restart, backend, solver):
    """State from the last checkpoint of ``restart``, checked against ``case``."""
    import yaml

    from ..case.config import CaseError, first_difference
    from ..flow.navier_stokes import FlowState
    from ..flow.navier_stokes_nd import FlowStateND
    from ..io.layout import VELOCITY_COMPONENTS, read_checkpoint

    if not os.path.isfile(restart):
        raise CaseError(restart, None, "restart file not found", "an HDF5 file written by a flow run")
    try:
        ck = read_checkpoint(restart)
        theirs = yaml.safe_load(ck["case"])
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
    c = xp.asarray(ck[VOLUME_FRACTION], dtype=dt) if solver.clsvof else None
    if case.grid.ndim != 2:
        return FlowStateND(phi=xp.asarray(ck["phi"], dtype=dt),
                           velocity=tuple(xp.asarray(ck[name], dtype=dt)
                                          for name in VELOCITY_COMPONENTS[:case.grid.ndim]),
                           p=xp.asarray(ck.get(DYNAMIC_PRESSURE, ck["p"]), dtype=dt),
                           time=ck["time"], step=ck["step"], c=c)
    state = FlowState(phi=xp.asarray(ck["phi"], dtype=dt), u=xp.asarray(ck["u"], dtype=dt),
                      v=xp.asarray(ck["v"], dtype=dt),
                      p=xp.asarray(ck.get(DYNAMIC_PRESSURE, ck["p"]), dtype=dt),
                      time=ck["time"], step=ck["step"], c=c)
    return state
