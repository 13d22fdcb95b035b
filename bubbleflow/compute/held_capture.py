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

import threading
from collections import OrderedDict

from .array_copies import copy_arrays

__all__ = ["HeldCapture", "capture_held", "KeyedReplays", "keyed_replays", "CAPTURABLE"]

#: The communicators whose calls a CUDA graph can hold (NCCL's run on the
#: device; MPI's go through the host).
CAPTURABLE = ("single", "nccl")
#: Keys whose calls :class:`KeyedReplays` counts before it forgets them all
#: (a key with a step's length in it may change at every step).
SEEN_KEPT = 4096


class HeldCapture:
    """A captured graph, the function's result (the arrays it returned) and
    the memory it allocated while it was captured."""

    def __init__(self, graph, result, held):
        self.graph, self.result, self.held = graph, result, held

    def replay(self):
        """The graph's launches on the current stream; its ``result``."""
        self.graph.launch()
        return self.result


def capture_held(run, comm=None, why=None):
    """:class:`HeldCapture` of ``run()``'s launches on a stream of its own,
    or None where the capture fails (on ranks, ``comm``: where it fails on
    any rank, every rank gets None; ``why``, a list: the reason is appended
    to it).  ``run`` must launch only (no host synchronisation, no copy from
    the host): its launches are recorded, not run."""
    import cupy as cp

    held, allocate = [], cp.cuda.get_allocator()
    pinned = _PinnedGuard(cp)

    def holding(size):
        memory = allocate(size)
        held.append(memory)
        return memory

    stream = cp.cuda.Stream(non_blocking=True)
    capture = reason = None
    try:
        with cp.cuda.using_allocator(holding), stream, pinned:
            stream.begin_capture()
            try:
                result = run()
            finally:
                graph = stream.end_capture()
        if pinned.used:
            reason = "pinned host memory requested during the capture (a copy from the host)"
        else:
            capture = HeldCapture(graph, result, held)
    except Exception as exc:                # not capturable here: the caller launches
        capture, reason = None, repr(exc)
    if comm is not None and comm.sum_int(0 if capture is not None else 1):
        if capture is not None:
            reason = "the capture failed on another rank"
        capture = None
    if capture is None and why is not None:
        why.append(reason)
    if capture is not None and comm is not None:
        capture.graph = comm.hold_graph(capture.graph)
    return capture


class _PinnedGuard:
    """While a capture runs, the capturing thread may not take pinned host
    memory: CuPy stages a copy from the host through it, and a graph would
    replay that copy from a buffer the pool has given to someone else.  A
    request from this thread raises (the capture fails); other threads'
    requests go to CuPy's pool as always."""

    def __init__(self, cp):
        self.cp, self.used = cp, False
        self.thread = threading.get_ident()

    def _allocate(self, size):
        if threading.get_ident() == self.thread:
            self.used = True
            raise RuntimeError("pinned host memory requested during a CUDA graph capture")
        return self.cp.get_default_pinned_memory_pool().malloc(size)

    def __enter__(self):
        self.cp.cuda.set_pinned_memory_allocator(self._allocate)
        return self

    def __exit__(self, *exc):
        self.cp.cuda.set_pinned_memory_allocator(self.cp.get_default_pinned_memory_pool().malloc)
        return False


def _flatten(tree, leaves):
    """The arrays of nested tuples and lists (None kept) appended to
    ``leaves``; the nesting, to rebuild them (:func:`_rebuild`)."""
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(_flatten(t, leaves) for t in tree))
    leaves.append(tree)
    return None


def _rebuild(shape, leaves):
    if shape is None:
        return next(leaves)
    kind, parts = shape
    return kind(_rebuild(p, leaves) for p in parts)


class KeyedReplays:
    """The launches of a function replayed from CUDA graphs, one per key.

    ``replays(key, fn, inputs)`` gives ``fn(*inputs)``: nested tuples and
    lists of device arrays (or None) that ``fn`` computes from the device
    arrays ``inputs`` (or None) by launches alone, everything else it
    depends on named by ``key``.  The first :attr:`launched` calls of a key
    run ``fn``; the next captures it on input buffers of its own
    (:attr:`capture`, :func:`capture_held`); later calls copy ``inputs``
    into them (:func:`.array_copies.copy_arrays`: eight to a launch on a
    GPU), replay,
    and return copies of the results (an array returned twice is copied
    once), so that nothing a caller keeps is overwritten by a later replay.
    At most :attr:`kept` keys keep their graphs (the oldest goes first);
    after :attr:`failures` captures of a kind of key that fail (a tuple's
    first item names its kind), every call of that kind runs ``fn``;
    :attr:`errors` says why a kind's last capture failed.  On
    ranks (``comm``) every rank must call with the same keys: they capture
    together or not at all.
    """

    def __init__(self, comm=None, launched=1, kept=4, failures=2, capture=capture_held):
        self.comm, self.launched, self.kept, self.failures = comm, launched, kept, failures
        self.capture = capture              # capture_held, or a stand-in (the CPU tests')
        self._seen, self._graphs, self._kind_failed = {}, OrderedDict(), {}
        #: Why the last failed capture of each kind of key failed.
        self.errors = {}
        #: Calls run, captured and replayed (for the tests and benches).
        self.counts = {"run": 0, "captured": 0, "replayed": 0}

    @property
    def failed(self):
        """Captures that failed, of every kind of key."""
        return sum(self._kind_failed.values())

    def __call__(self, key, fn, inputs):
        entry = self._graphs.get(key)
        if entry is None:
            seen = self._seen.get(key, 0)
            if self._kind_failed.get(_kind(key), 0) >= self.failures or seen < self.launched:
                if len(self._seen) >= SEEN_KEPT:       # (a key that changes every call)
                    self._seen.clear()
                self._seen[key] = seen + 1
                self.counts["run"] += 1
                return fn(*inputs)
            entry = self._capture(key, fn, inputs)
            if entry is None:
                self.counts["run"] += 1
                return fn(*inputs)
        copy_arrays(entry.buffers, [inputs[i] for i in entry.filled])
        entry.capture.replay()
        fresh = [_empty_like(a) for a in entry.results]
        copy_arrays(fresh, entry.results)
        self.counts["replayed"] += 1
        return _rebuild(entry.shape, iter([None if j < 0 else fresh[j] for j in entry.slots]))

    def _capture(self, key, fn, inputs):
        array = type(next(a for a in inputs if a is not None))
        buffers = tuple(None if a is None else _empty_like(a) for a in inputs)

        def run():
            leaves = []
            shape = _flatten(fn(*buffers), leaves)
            if not all(a is None or isinstance(a, array) for a in leaves):
                raise TypeError("a replayed function returns arrays of its inputs' kind only")
            return leaves, shape

        why = []
        capture = self.capture(run, self.comm, why)
        if capture is None:
            kind = _kind(key)
            self._kind_failed[kind] = self._kind_failed.get(kind, 0) + 1
            self.errors[kind] = why[-1] if why else "the capture was refused"
            return None
        self.counts["captured"] += 1
        self._graphs[key] = entry = _Replay(buffers, capture)
        while len(self._graphs) > self.kept:
            self._graphs.popitem(last=False)
        return entry


class _Replay:
    """A key's graph and what its replays copy: the input buffers its
    inputs go into (:attr:`buffers`, at the inputs' places :attr:`filled`),
    the distinct arrays of its result (:attr:`results`, copied out), and
    for each leaf of the result the index of its array among them
    (:attr:`slots`; -1 for None) and the result's nesting (:attr:`shape`)."""

    def __init__(self, buffers, capture):
        self.capture = capture
        self.filled = [i for i, b in enumerate(buffers) if b is not None]
        self.buffers = [buffers[i] for i in self.filled]
        leaves, self.shape = capture.result
        index, self.results, self.slots = {}, [], []
        for a in leaves:
            if a is None:
                self.slots.append(-1)
                continue
            if id(a) not in index:
                index[id(a)] = len(self.results)
                self.results.append(a)
            self.slots.append(index[id(a)])


def _empty_like(a):
    """A new C-contiguous array of ``a``'s shape and dtype, of its type."""
    return type(a)(a.shape, dtype=a.dtype)


def _kind(key):
    """The kind of a key: a tuple's first item, else the key itself."""
    return key[0] if isinstance(key, tuple) and key else key


def keyed_replays(backend, comm=None, **options):
    """A :class:`KeyedReplays` for functions of ``backend``'s arrays, or
    None where their launches cannot be replayed (the host's arrays, or
    ranks whose calls go through the host: MPI's)."""
    if backend.name != "cupy" or (comm is not None
                                  and getattr(comm, "name", None) not in CAPTURABLE):
        return None
    return KeyedReplays(comm, **options)
