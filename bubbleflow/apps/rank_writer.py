"""A flow run's output on several ranks: the slabs gathered on rank 0,
written by the one-process writer (:class:`~bubbleflow.io.flow_output.FlowWriter`)."""
from __future__ import annotations

__all__ = ["RankWriter"]


class RankWriter:
    """A flow run's output on the ranks: rank 0 holds the
    :class:`~bubbleflow.io.flow_output.FlowWriter` (``writer``, None on the
    other ranks); a snapshot's slabs are gathered there first, so the file
    is a one-process run's.  Snapshots, their errors and the closing are
    collective: every rank calls them, and a write that failed on rank 0
    raises :class:`~bubbleflow.io.flow_output.SnapshotWriteError` on every
    rank (they stop together)."""

    def __init__(self, comm, writer):
        self.comm, self.writer = comm, writer
        first = None if writer is None else (
            {name: values[:1] for name, values in writer.diag.items()}, writer.last_snapshot_step)
        self.diag, self._last = comm.broadcast(first)
        self.attrs = {} if writer is None else writer.attrs

    @property
    def last_snapshot_step(self):
        return self._last

    @property
    def gas_volume_change(self):
        """Rank 0's writer's (every row is there); None on the other ranks."""
        return None if self.writer is None else self.writer.gas_volume_change

    def write_step(self, report, initial=False):
        if self.writer is not None:
            self.writer.write_step(report, initial=initial)
        # The series' first row on every rank (the run reads whether there is gas).
        row = dict(report.diagnostics, step=report.step, time=report.time, dt=report.dt,
                   divergence=report.divergence)
        for name, values in self.diag.items():
            if not values:
                values.append(row[name])

    @property
    def bubbles(self):
        """Rank 0's writer's bubble rows (empty on the other ranks)."""
        return () if self.writer is None else self.writer.bubbles

    def write_bubbles(self, rows, events):
        """Rank 0's tracker's rows and events to its writer (the tracker is
        there only)."""
        if self.writer is not None:
            self.writer.write_bubbles(rows, events)

    def set_attrs(self, **attrs):
        if self.writer is not None:
            self.writer.set_attrs(**attrs)

    def _together(self, call):
        """Run ``call`` on rank 0; its write error raised on every rank."""
        from ..io.flow_output import SnapshotWriteError

        error = None
        if self.writer is not None:
            try:
                call()
            except SnapshotWriteError as exc:
                error = str(exc)
        error = self.comm.broadcast(error)
        if error is not None:
            raise SnapshotWriteError(error)

    def write_snapshot(self, state, rho, to_host, extra=None, tracker=None):
        import numpy as np

        from ..flow.partition import whole_state

        whole = whole_state(state, self.comm)
        gathered = {name: self.comm.gather_rows(to_host(f))
                    for name, f in [("rho", rho)] + sorted((extra or {}).items())}
        self._last = state.step
        rho = gathered.pop("rho")
        self._together(lambda: self.writer.write_snapshot(whole, rho, np.asarray,
                                                          extra=gathered or None,
                                                          tracker=tracker))

    def wait(self, raise_error=True):
        """Rank 0's writer waited for (not collective: the run is ending on an error)."""
        if self.writer is not None:
            self.writer.wait(raise_error=raise_error)

    def close(self, status="finished"):
        self._together(lambda: self.writer.close(status))
