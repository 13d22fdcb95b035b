"""The bubble tracking of a flow run: when the run loop samples the gas, and
where the samples go.

Every ``output.bubbles_every`` steps (the steps that are multiples of it,
step 0 included; 0: never) the stepper labels the gas regions of the whole
grid (:meth:`bubbleflow.flow.navier_stokes.FlowSolver.regions`; on ranks
gathered on rank 0, so every rank calls it), rank 0's
:class:`~bubbleflow.flow.bubble_tracking.BubbleTracker` links them to the
previous sample's, and the new rows and events go to the writer, which
writes them with the next index (``/bubbles``,
:mod:`bubbleflow.io.bubble_tables`).  The tracker's state goes into every
snapshot (:meth:`BubbleSampling.state`), and ``--restart`` makes the
tracker again from the checkpoint's (:func:`.restart.restart_tracker`).

Why samples at multiples of the interval and not at the snapshots: a
restarted run then samples the steps an uninterrupted run does, whatever
the checkpoint it continues from (a stop by a signal writes one off the
snapshot interval), so that its tables are the uninterrupted run's.
"""
from __future__ import annotations

__all__ = ["BubbleSampling", "gas_regions_text"]


class BubbleSampling:
    """The run loop's bubble tracking.

    Parameters
    ----------
    every : int
        Steps between samples (``output.bubbles_every``); 0: no tracking.
    solver : FlowSolver
        The stepper (its :meth:`regions`).
    writer : FlowWriter or RankWriter
        Where the rows go (:meth:`write_bubbles`).
    lead : bool
        This process holds the tracker (one process, or rank 0).
    tracker : BubbleTracker, optional
        The tracker to continue (a restart's); by default a new one.
    """

    def __init__(self, every, solver, writer, lead=True, tracker=None):
        from ..flow.bubble_tracking import BubbleTracker

        self.every = int(every)
        self.solver, self.writer = solver, writer
        self.tracker = None
        if self.every > 0 and lead:
            self.tracker = tracker if tracker is not None else BubbleTracker()
            # Ids are never reused, also by a tracker that starts over on
            # tables written before (a checkpoint without a tracker's state).
            written = [row[2] for row in getattr(writer, "bubbles", ())]
            self.tracker.next_id = max([self.tracker.next_id] + [i + 1 for i in written])
        #: ``(bubbles, layers, time)`` of the last sample (None before one).
        self.last = None

    def due(self, step):
        """Whether ``step`` is sampled."""
        return self.every > 0 and step % self.every == 0

    def sample(self, state):
        """Sample ``state`` if its step is due (every rank calls it: on ranks
        the state is gathered)."""
        if not self.due(state.step):
            return
        regions = self.solver.regions(state)
        if regions is None or self.tracker is None:
            return
        self.tracker.update(state.step, state.time, regions)
        self.writer.write_bubbles(*self.tracker.drain())
        layers = int(regions.layer.sum())
        self.last = (len(regions.layer) - layers, layers, state.time)

    def gas_text(self, time=None):
        """``6 bubbles + gas layer at t = 0.1 s``: the regions of the last
        sample where the gas was more than one region (what the whole gas
        phase's diagnostics then stand for); None otherwise.  Where that
        sample is not at ``time`` (the state's), the text says it is the
        last sample's."""
        if self.last is None or sum(self.last[:2]) < 2:
            return None
        bubbles, layers, when = self.last
        last = "" if time is None or when == time else ", the last tracking sample"
        return f"{gas_regions_text(bubbles, layers)} at t = {when:g} s{last}"

    def state(self):
        """The tracker's state to store with a snapshot (host arrays); None
        without tracking or off rank 0."""
        return None if self.tracker is None else self.tracker.state()


def gas_regions_text(bubbles, layers):
    """``6 bubbles + gas layer``: what ``bubbles`` bubbles and ``layers`` gas
    layers are in words (``no gas`` for none)."""
    parts = [f"{bubbles} bubble{'s' if bubbles != 1 else ''}"] if bubbles else []
    if layers:
        parts.append("gas layer" if layers == 1 else f"{layers} gas layers")
    return " + ".join(parts) if parts else "no gas"
