"""The implicit viscous solves' Chebyshev steps planned from step to step.

On a GPU a flow's momentum phase with implicit viscosity is launches alone
when its Chebyshev solves take a step count planned ahead
(:func:`.viscosity_chebyshev.steps_ahead` of the steps the previous solves
needed): the phase is then one replayed CUDA graph, and the solves' report
(their final residuals and the steps they needed) is read with the step's
next scalars.  :class:`ViscousPlan` keeps that count, the report until it
is read, and the solves' records; where the count fell short of a
tolerance, the step's momentum phase is done again with its steps planned
from its start, as at the first step and the first after a snapshot.
"""
from __future__ import annotations

import time

import numpy as np

from .viscosity_chebyshev import chebyshev_records, steps_ahead

__all__ = ["ViscousPlan"]


class ViscousPlan:
    """The viscous solves' step count planned ahead, their pending report
    and their records.  ``ahead``: plan ahead at all (a GPU, a slab the
    step's graphs replay); ``ndim`` the solves a step; ``rtol`` theirs."""

    def __init__(self, ahead, ndim, rtol):
        self.ahead, self.ndim, self.rtol = ahead, ndim, rtol
        #: The count the next solves take; None: planned from their start.
        self.steps = None
        #: The last solves' records (:class:`~bubbleflow.linalg.krylov.record.SolveRecord`).
        self.records = None
        self._pending, self._short = None, False

    @property
    def pending(self):
        """The report of the solves planned ahead, on the device, until it
        is read (:meth:`settle`); else None."""
        return None if self._pending is None else self._pending[0]

    def pend(self, report):
        """The solves planned ahead with :attr:`steps` were queued; their
        ``report`` is read later."""
        self._pending, self._short = (report, self.steps, time.perf_counter()), False

    def settle(self, report):
        """The pending solves' ``report``, read on the host: their records,
        and the next count from the steps they needed, or none where a
        solve fell short (:meth:`fell_short` says so once)."""
        _, steps, t0 = self._pending
        self._pending = None
        records = chebyshev_records(report, [steps] * self.ndim, self.rtol,
                                    (time.perf_counter() - t0) / self.ndim)
        self._short = not all(rec.converged for rec in records)
        if self._short:
            self.steps = None
            return
        self.records = records
        self.steps = steps_ahead(np.asarray(report)[:, 2].max())

    @property
    def short(self):
        """Whether the solves settled last fell short of their tolerance
        (:meth:`fell_short` without taking the answer)."""
        return self._short

    def fell_short(self, backend):
        """Whether the step's last viscous solves were planned ahead and
        fell short of their tolerance (their report read now, where nothing
        read it along)."""
        if self._pending is not None:
            self.settle(backend.to_host(self._pending[0]))
        short, self._short = self._short, False
        return short

    def solved_from_start(self, records):
        """The solves of a momentum phase planned from its start gave
        ``records``: the next count from the steps they took."""
        self.records, self._short = records, False
        if self.ahead:
            self.steps = steps_ahead(max(rec.iterations for rec in records))

    def restart(self):
        """The next solves are planned from their start (a snapshot's
        restart point: a restarted run's first step is)."""
        self.steps = None
