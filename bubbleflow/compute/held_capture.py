"""One CUDA graph of what a function launches, with the memory it allocated
while it was captured held for the graph's life.

A capture records launches, not their effects: a function that allocates
its outputs and temporaries from CuPy's pool gets addresses the graph then
writes at every replay.  Were those arrays freed after the capture, the pool
would hand their memory to other arrays, and a replay would overwrite them.
:func:`capture_held` allocates through CuPy's current allocator while the
function runs and keeps every block it handed out with the graph
(:class:`HeldCapture`), so nothing the graph writes goes back to the pool.

The caller replays the graph after copying its inputs into the buffers the
capture read (the function's arguments, allocated before the capture), and
reads its results from the arrays the capture returned, which the next
replay overwrites.  On ranks every rank captures or none does: their NCCL
calls must meet one for one.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

__all__ = ["HeldCapture", "capture_held"]


class HeldCapture:
    """A captured graph, the function's result (the arrays it returned) and
    the memory it allocated while it was captured."""

    def __init__(self, graph, result, held):
        self.graph, self.result, self.held = graph, result, held

    def replay(self):
        """The graph's launches on the current stream; its ``result``."""
        self.graph.launch()
        return self.result


def capture_held(run, comm=None):
    """:class:`HeldCapture` of ``run()``'s launches on a stream of its own,
    or None where the capture fails (on ranks, ``comm``: where it fails on
    any rank, every rank gets None).  ``run`` must launch only (no host
    synchronisation, no copy from the host): its launches are recorded, not
    run."""
    import cupy as cp

    held, allocate = [], cp.cuda.get_allocator()

    def holding(size):
        memory = allocate(size)
        held.append(memory)
        return memory

    stream = cp.cuda.Stream(non_blocking=True)
    capture = None
    try:
        with cp.cuda.using_allocator(holding), stream:
            stream.begin_capture()
            try:
                result = run()
            finally:
                graph = stream.end_capture()
        capture = HeldCapture(graph, result, held)
    except Exception:                       # not capturable here: the caller launches
        capture = None
    if comm is not None and comm.sum_int(0 if capture is not None else 1):
        capture = None
    if capture is not None and comm is not None:
        capture.graph = comm.hold_graph(capture.graph)
    return capture
