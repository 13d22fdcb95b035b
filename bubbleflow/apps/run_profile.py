"""Where a whole run's time goes: ``bubbleflow run --profile``.

The run goes as it would, and says at its end how its wall time divides:
start-up (the package's imports and the case file, from the moment
``bubbleflow`` was first imported), the case build (grid, level set,
phases, operator; a flow's stepper and first state), the pressure set-up
and solve of a pressure case, a flow's steps phase by phase (its phase
clock on: every phase is launched directly and ends with a device
synchronisation, so each is charged with its own device work; on a GPU an
unprofiled run replays a small step's parts from CUDA graphs and queues
work ahead of its reads, so its steps take less than the profiled ones,
and the table says so), and the output this process waits for (rows, the copies
of the snapshots to the host, the index; a flow's snapshot files are
written in a background thread while the steps go on).

Each part is set beside its floor where it has one: the bytes it must move
at the copy bandwidth measured at the end of the run (the device's; the
host's for the case build on the host and the output), as ``bench --flow``
counts them (:mod:`.bench.flow_floors`).
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager

__all__ = ["RunProfile", "TimedCalls", "pressure_floors", "cells_bytes", "STEPS_ON_A_DEVICE"]

#: The table's last line for a flow's steps on a device.
STEPS_ON_A_DEVICE = ("  (each phase of a step launched directly and waited for; unprofiled, "
                     "a small step's parts are replayed from CUDA graphs and queued ahead of "
                     "its reads, so its steps take less)")


class TimedCalls:
    """An object whose named methods add their wall time to a profile part.

    Every attribute is the wrapped object's; calls of ``methods`` are timed
    (the time a call takes in this thread) and added to ``profile``'s part
    ``part``."""

    def __init__(self, wrapped, profile, part, methods):
        self._wrapped, self._profile, self._part = wrapped, profile, part
        self._methods = frozenset(methods)

    def __getattr__(self, name):
        attr = getattr(self._wrapped, name)
        if name not in self._methods or not callable(attr):
            return attr

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._profile.add(self._part, time.perf_counter() - t0)
                calls = self._profile.calls
                calls[name] = calls.get(name, 0) + 1
        return timed


class RunProfile:
    """The parts of a run's wall time (seconds), in the order first met.

    Parameters
    ----------
    backend : Backend
        The run's (its device is synchronised around each part).
    started : float, optional
        ``time.perf_counter()`` at the process's start-up (default: when
        the ``bubbleflow`` package was imported).
    """

    def __init__(self, backend, started=None):
        from .. import IMPORTED

        self.backend = backend
        self.parts = {}
        self.floors = {}              # part -> (bytes, bandwidth "device" or "host")
        self.steps = 0
        self.calls = {}               # method -> calls timed by TimedCalls
        self.case = None              # a flow's (its floors' fields)
        self.add("start-up", time.perf_counter() - (IMPORTED if started is None else started))

    def add(self, part, seconds):
        self.parts[part] = self.parts.get(part, 0.0) + seconds

    @contextmanager
    def part(self, name):
        """Time the block as part ``name`` (the device waited for at both ends)."""
        self.backend.synchronize()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.backend.synchronize()
            self.add(name, time.perf_counter() - t0)

    def floor(self, part, nbytes, where="device"):
        """Part ``part`` must move ``nbytes`` at the ``where`` bandwidth."""
        moved, _ = self.floors.get(part, (0.0, where))
        self.floors[part] = (moved + float(nbytes), where)

    def add_step(self, report, case, solver):
        """A flow step's phases (its report's, the phase clock on) and floors."""
        from .bench.flow_floors import phase_bytes, solve_bytes_per_iteration

        self.steps += 1
        self.case = case
        for name, seconds in (report.phases or {}).items():
            self.add(f"step: {name}", seconds)
            moved = phase_bytes(case, name)
            if moved is not None:
                self.floor(f"step: {name}", moved)
        its = int(report.record.iterations)
        self.floor("step: pressure solve",
                   its * solve_bytes_per_iteration(case, report.record, solver.pressure))

    def table(self):
        """The parts with their share of the time since start-up and their
        floors (the bandwidths measured now); what no part holds (the loop
        itself, the progress bar, the checks between the parts) last."""
        from .. import IMPORTED
        from ..compute.backend import get_backend
        from .bench.measure import copy_bandwidth

        total = time.perf_counter() - IMPORTED
        self.add("the rest", max(total - sum(self.parts.values()), 0.0))
        if self.case is not None:
            _flow_floors(self, self.case)

        bw = {"device": copy_bandwidth(self.backend, 64 * 2 ** 20)[0]}
        bw["host"] = (bw["device"] if not self.backend.on_device
                      else copy_bandwidth(get_backend("numpy"), 64 * 2 ** 20)[0])
        lines = [f"profile: {total:.3f} s"
                 + (f", {self.steps} steps" if self.steps else "")
                 + f"; copy bandwidth {bw['device'] / 1e9:.0f} GB/s"
                 + (f" (host {bw['host'] / 1e9:.0f} GB/s)" if self.backend.on_device else ""),
                 f"  {'part':<28} {'seconds':>9} {'share':>7} {'floor s':>9} {'x floor':>8}"]
        for name, seconds in self.parts.items():
            moved, where = self.floors.get(name, (0.0, "device"))
            floor = moved / bw[where] if moved else None
            lines.append(f"  {name:<28} {seconds:9.3f} {seconds / total:7.1%} "
                         f"{'-' if floor is None else f'{floor:.3g}':>9} "
                         f"{'-' if not floor else f'{seconds / floor:.3g}':>8}")
        if self.steps and self.backend.on_device:
            lines.append(STEPS_ON_A_DEVICE)
        return "\n".join(lines)


def cells_bytes(grid, fields):
    """Bytes of ``fields`` float64 fields of ``grid``'s cells."""
    return 8.0 * fields * math.prod(grid.cells)


def _flow_floors(profile, case):
    """A flow's case build writes its first state's fields (phi, the
    velocity, p, and c with CLSVOF) once; its output the snapshots' fields
    (:data:`.bench.flow_floors.OUTPUT_FIELDS`) at the host's bandwidth."""
    from .bench.flow_floors import OUTPUT_FIELDS, field_count

    nd = case.grid.ndim
    first = nd + 2 + (case.levelset.method == "clsvof")
    profile.floor("case build", cells_bytes(case.grid, first), "host")
    written = profile.calls.get("write_snapshot", 0) * field_count(OUTPUT_FIELDS, case)
    profile.floor("output", cells_bytes(case.grid, written), "host")


def pressure_floors(profile, case, prob, solver, record):
    """The floors of a pressure case's parts: the case build writes phi,
    rho, mu, the face densities and the operator's arrays once (host); the
    solve moves its iterations' bytes (the engine's count, else the model);
    the output writes phi, rho and p (host)."""
    from .bench.flow_floors import OPERATOR_ARRAYS, solve_bytes_per_iteration

    grid = prob.grid
    nd = grid.ndim
    profile.floor("case build",
                  cells_bytes(grid, 3 + nd + OPERATOR_ARRAYS[case.operator.storage](nd)), "host")
    profile.floor("pressure solve",
                  int(record.iterations) * solve_bytes_per_iteration(case, record, solver))
    profile.floor("output", cells_bytes(grid, 3), "host")
