"""The wall time of a flow step's phases (``bubbleflow bench --flow``,
``bubbleflow run --profile``)."""
from __future__ import annotations

import time

__all__ = ["PhaseClock"]


class PhaseClock:
    """Wall time of the phases of a step, for profiling.

    Off (the default) it does nothing: no synchronisation, no clock read,
    and the step's work and results are the same.  On, every :meth:`mark`
    waits for the device, so that each phase is charged with its own device
    work, and adds the time since the previous mark to that phase.
    """

    #: The phases of a flow step in the order a step runs them (the next
    #: step's properties and finite check are taken at the end of a step).
    PHASES = ("properties", "finite check", "time step", "pressure set-up", "momentum",
              "pressure solve", "correction", "advection", "reinitialisation", "diagnostics")

    def __init__(self, backend, enabled=False):
        self.backend, self.enabled = backend, enabled
        self.seconds, self._last = {}, None
        # Called with a phase's name as it ends (a profiler's hook: the
        # ranks' benchmark charges each phase with its messages).
        self.listeners = []

    def start(self):
        if self.enabled:
            self.seconds = dict.fromkeys(self.PHASES, 0.0)
            self.backend.synchronize()
            self._last = time.perf_counter()

    def mark(self, phase):
        if self.enabled:
            self.backend.synchronize()
            now = time.perf_counter()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
            self._last = now
            for listener in self.listeners:
                listener(phase)
