"""How a flow run stops on SIGTERM / SIGINT, on one process or several ranks."""
from __future__ import annotations

__all__ = ["StopSignals"]


class StopSignals:
    """SIGTERM (a cluster's time limit) and SIGINT end the run after the current step.

    The first signal sets :attr:`received`; the loop then writes the state
    and stops.  A second SIGINT interrupts at once (the files on disk are
    complete at every instant, so nothing is lost but the steps since the
    last snapshot).
    """

    def __init__(self, comm=None):
        self.received = None
        self._old = {}
        self._comm = comm if comm is not None and comm.size > 1 else None

    def poll(self):
        """The signal that stops the run, or None; on several ranks the
        first any rank received (a collective: every rank polls each step),
        so that they stop at the same step."""
        import signal

        if self._comm is not None:
            mine = int(getattr(signal, self.received)) if self.received else 0
            agreed = int(self._comm.allreduce_max(mine))
            self.received = signal.Signals(agreed).name if agreed else None
        return self.received

    def _handle(self, signum, frame):
        import signal

        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name

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
