"""How a flow run stops on SIGTERM / SIGINT, on one process or several ranks."""
from __future__ import annotations

__all__ = ["StopSignals"]


class StopSignals:
    """SIGTERM (a cluster's time limit) and SIGINT end the run after the current step.

    A signal is caught by this process's handler at any instant (during a
    step, a snapshot, the set-up, or while the ranks agree) and kept in
    :attr:`caught`, which only the handler writes: no later read can lose
    it.  :meth:`poll`, called once before each step, turns it into
    :attr:`received`, the signal that stops the run; on several ranks the
    ranks agree on it in one collective, so that every rank stops at the
    same step.  A signal caught while the ranks agree is counted at the
    next poll.  The loop then writes the state and stops.

    A second SIGINT interrupts at once (the files on disk are complete at
    every instant, so nothing is lost but the steps since the last
    snapshot).

    Parameters
    ----------
    comm : communicator, optional
        The ranks' communicator (:mod:`bubbleflow.compute.comm`); None or
        one rank: this process decides alone.

    Attributes
    ----------
    caught : int
        The number of the last signal this process caught, 0 for none.
    received : str or None
        The name of the signal that stops the run (``"SIGTERM"``), once a
        poll has returned it; on several ranks the same on every rank.
    """

    def __init__(self, comm=None):
        self.caught = 0
        self.received = None
        self._old = {}
        self._comm = comm if comm is not None and comm.size > 1 else None

    def poll(self):
        """The name of the signal that stops the run, or None.

        On several ranks a collective (every rank polls before each step):
        the largest signal number any rank has caught, so that they stop
        at the same step, with the same exit code.  Once returned, the
        signal is returned by every later poll.

        Returns
        -------
        str or None
            ``"SIGTERM"``, ``"SIGINT"`` or None.
        """
        import signal

        if self.received is not None:
            return self.received
        # Read once: a signal caught after this read (while the ranks agree)
        # stays in ``caught`` for the next poll.
        mine = self.caught
        agreed = int(self._comm.allreduce_max(mine)) if self._comm is not None else mine
        if agreed:
            self.received = signal.Signals(agreed).name
        return self.received

    def _handle(self, signum, frame):
        import signal

        if signum == signal.SIGINT and (self.caught or self.received is not None):
            raise KeyboardInterrupt
        self.caught = int(signum)

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False
