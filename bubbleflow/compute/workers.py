"""Background work on threads that live as long as the process.

Work that may touch the device beside the caller (kernel builds, the flow
warm-up, a snapshot's copy and write) runs here, never on a thread of its
own that ends with it.  A thread that has used the CUDA runtime tears its
per-thread state down when it ends, and a teardown while another thread
captures a CUDA graph can crash the driver: so a worker, once started,
waits for the next job for the rest of the process.

:func:`submit` queues a call and returns its :class:`Job`; the pool grows
by one worker whenever every worker is busy, so jobs submitted together
run side by side (a job never waits behind another).  The workers are
daemons: a process that ends does not wait for them, but for the jobs
submitted with ``wait_at_exit`` (a snapshot being written), which it
finishes first.  While it runs a job, a worker carries the job's name (what
a stack dump or a profiler shows).
"""
from __future__ import annotations

import atexit
import queue
import threading

__all__ = ["Job", "submit", "worker_names"]


class Job:
    """One call queued by :func:`submit`: wait for it with :meth:`join`
    (the thread API) or :meth:`result` (the futures API)."""

    def __init__(self, fn, args, kwargs, name):
        self.name = name
        self._call = (fn, args, kwargs)
        self._done = threading.Event()
        self._value = self._error = None
        self._done_callbacks = []

    def _run(self):
        fn, args, kwargs = self._call
        self._call = None
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:    # noqa: BLE001 - kept for result()
            self._error = exc
        finally:
            self._done.set()
            for callback in self._done_callbacks:
                callback(self)

    def is_alive(self):
        """Is the job queued or running?"""
        return not self._done.is_set()

    def done(self):
        return self._done.is_set()

    def join(self, timeout=None):
        """Wait until the job has ended (at most ``timeout`` seconds);
        whether it has."""
        return self._done.wait(timeout)

    def result(self, timeout=None):
        """The call's return value, or its exception raised here;
        ``TimeoutError`` where it has not ended within ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.name} has not ended in {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value


class _Pool:
    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = []
        self._idle = 0          # workers waiting for a job
        self._queued = 0        # jobs no worker has taken yet

    def submit(self, job):
        with self._lock:
            if self._queued + 1 > self._idle:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"bubbleflow-worker-{len(self._threads)}")
                thread.start()          # (a refused start leaves the counts as they were)
                self._threads.append(thread)
                self._idle += 1
            self._queued += 1
            self._queue.put(job)
        return job

    def _work(self):
        me = threading.current_thread()
        own_name = me.name
        while True:
            job = self._queue.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            me.name = job.name
            try:
                job._run()
            finally:
                me.name = own_name
                with self._lock:
                    self._idle += 1

    def names(self):
        with self._lock:
            return [t.name for t in self._threads]


_POOL = _Pool()
#: The jobs a process that ends waits for (submitted with ``wait_at_exit``).
_AT_EXIT: set = set()
_AT_EXIT_LOCK = threading.Lock()


def submit(fn, *args, name="bubbleflow-job", wait_at_exit=False, **kwargs):
    """Run ``fn(*args, **kwargs)`` on a worker; its :class:`Job`.  With
    ``wait_at_exit`` a process that ends waits for the job first (the
    workers run on while the interpreter's exit handlers do)."""
    job = Job(fn, args, kwargs, name)
    if wait_at_exit:
        with _AT_EXIT_LOCK:
            _AT_EXIT.add(job)
        job._done_callbacks.append(_forget)
    try:
        return _POOL.submit(job)
    except BaseException:
        _forget(job)            # it never runs: nothing to wait for at exit
        raise


def _forget(job):
    with _AT_EXIT_LOCK:
        _AT_EXIT.discard(job)


@atexit.register
def _finish_at_exit():
    with _AT_EXIT_LOCK:
        pending = list(_AT_EXIT)
    for job in pending:
        job.join()


def worker_names():
    """The names the workers have now (a busy one's is its job's)."""
    return _POOL.names()
