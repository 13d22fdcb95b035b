"""The base of the engines that run whole CG iterations on the device.

The Krylov loop drives such an engine through the protocol of
:mod:`bubbleflow.linalg.krylov.device` (``begin``, ``tolerance``, ``load``,
``iterate``, ``settle``, ``status``, ``history``, ``x``, ``r_current``,
``p``, ``rz``, ``bad``, ``bytes_per_iteration``).  :class:`DeviceEngine`
writes once what every engine of this package does alike:

* the solve's scalars on the device, one float64 array whose first
  entries every kernel source indexes the same way (:data:`ALPHA` ...
  :data:`TOL_REL`: ``fused.cu``'s ``scal[]``, ``ranks.cu``'s ``S_*``);
* the history buffer the engine owns (its CUDA graphs hold its address);
* the host check: one status kernel, one transfer;
* the capture of CUDA graphs on a stream of the engine's own
  (:meth:`DeviceEngine._capture`), kept while the launches they hold stay
  the same (:meth:`DeviceEngine._new_signature`);
* the run on the device: graphs of runs of iterations replayed, longest
  first, the rest launched directly (:meth:`DeviceEngine._run`).

An engine supplies its buffers, kernels and reductions: ``begin``,
``load``, ``tolerance``, ``iterate`` (from :meth:`~DeviceEngine._run`),
``_launch_iteration`` (one iteration's launches, at the engine's current
state), ``r_current``, ``p`` and the kernel ``k_status`` with the buffers
``counter``, ``status_buf`` and ``scal``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DeviceEngine", "float64_on_device",
           "ALPHA", "BETA", "RZ", "BAD", "DONE", "INV_BNORM", "TOL_REL"]

# The device scalars' indices.  DONE is set by the kernel that tests the
# tolerance (``beta``, ``direction``) when the recursive residual reaches
# it; every kernel of the next iterations then returns at once (the iterate
# stays at the converged one).  INV_BNORM and TOL_REL are the solve's
# 1 / ||b|| and relative tolerance.
ALPHA, BETA, RZ, BAD, DONE, INV_BNORM, TOL_REL = range(7)


def float64_on_device(b):
    """Does a solve whose right-hand side is ``b`` (or any array of its
    backend and dtype) run on a device, in float64?"""
    from ...compute.backend import backend_of
    from ...compute.transfer import on_device

    return on_device(backend_of(b)) and b.dtype == np.float64


class DeviceEngine:
    """What the device engines share (see the module): the protocol's
    state and host check, the capture of CUDA graphs and the run of
    iterations on the device."""

    #: Replay iterations from CUDA graphs (see the engine's ``iterate``).
    use_graphs = True
    #: Iterations in the long graph.
    graph_iterations = 8
    #: The kernel of :meth:`tolerance_from_norms` (fetched at its first call).
    _k_tolerance = None

    def __init__(self, cp):
        self.cp = cp
        # CUDA graphs of the current launch signature, by the engine's key.
        self._graphs, self._graph_sig = {}, None
        self._capture_stream = None
        self.capture_error = None                     # why the last failed capture failed
        self._hist = None
        self.hist = None

    # ------------------------------------------------------------- protocol
    def history(self, size):
        """A zeroed history buffer of ``size`` entries, owned by the engine
        and kept from solve to solve (the graphs hold its address)."""
        if self._hist is None or self._hist.size < size:
            self._hist = self.cp.zeros(max(size, 2 * (self._hist.size if self._hist is not None
                                                      else 0)), dtype=self.cp.float64)
        hist = self._hist[:size]
        hist.fill(0)
        return hist

    def status(self):
        """``(iteration, hist[iteration], broke)`` from the device: one launch
        and one transfer (the host synchronisation of a check)."""
        self._queue_status()
        it, h, bad = self.status_buf.get()
        return int(it), float(h), bool(bad != 0.0)

    def _queue_status(self):
        """The launch that writes ``(iteration, h, broke)`` into ``status_buf``."""
        self.k_status((1,), (1,), (self.counter, self.hist, self.scal, self.status_buf))

    def tolerance_from_norms(self, norms, rtol, atol, has_reference):
        """The solve's ``1 / ||b||`` and relative tolerance into the device
        scalars from the start's norms on the device (``[||b||, ||r0||,
        ||reference||]``, the last where ``has_reference``; on ranks summed
        over them), with ``hist[0]`` and, where the host's first check ends
        the solve, the done flag: no host read before the first stretch (one
        launch, its kernel fetched once an engine)."""
        if self._k_tolerance is None:
            from .kernels import kernel

            self._k_tolerance = kernel("bf_tolerance_from_norms")
        self._k_tolerance((1,), (1,), (norms, np.int32(bool(has_reference)), np.float64(rtol),
                                       np.float64(atol), self.scal, self.hist))

    def operator_arrays(self):
        """Arrays the next operator may be built in so that the engine's
        update copies nothing (the 3-D engine's face couplings); None: the
        engine binds its operator otherwise."""
        return None

    def settle(self, it, count, extra=(), read=None):
        """After ``iterate(count)`` from ``it``: ``(iteration, relative
        recursive residual, broke)`` (:meth:`status`).  Fewer than ``count``
        iterations ran when the tolerance was reached on the device.  With
        ``extra`` device arrays, read in the same transfer by ``read`` (a
        backend's ``to_host_many``), their host values come fourth."""
        if extra:
            self._queue_status()
            status, *values = read([self.status_buf, *extra])
            counter, h, bad = int(status[0]), float(status[1]), bool(status[2] != 0.0)
        else:
            counter, h, bad = self.status()
        self._settled(it, counter - it, count)
        return (counter, h, bad, values) if extra else (counter, h, bad)

    def _settled(self, it, done, count):
        """``done`` of the ``count`` iterations from ``it`` ran: the engine's
        host state follows them (nothing to follow here)."""

    @property
    def rz(self):
        """``r . y`` on the device (a 0-d view)."""
        return self.scal[RZ]

    @property
    def bad(self):
        """The breakdown flag on the device (a 0-d view, nonzero: broke)."""
        return self.scal[BAD]

    # -------------------------------------------------------- run and graphs
    def _run(self, count, lengths, graph):
        """``count`` iterations, no host synchronisation: ``graph(length)``
        replayed as often as it fits, for each of ``lengths`` in order (the
        first that gives None ends the replays), then the rest by
        :meth:`_direct`."""
        for length in lengths:
            if count < length:
                continue
            replay = graph(length)
            if replay is None:
                break
            for _ in range(count // length):
                replay.launch()
            count %= length
        self._direct(count)

    def _direct(self, count):
        """``count`` iterations by direct launches."""
        for _ in range(count):
            self._launch_iteration()

    def _new_signature(self, sig):
        """Drop the graphs when ``sig`` (what they hold, as a key) is not
        the one they were captured for; True when they were dropped."""
        if sig != self._graph_sig:
            self._graphs, self._graph_sig = {}, sig
            return True
        return False

    def _capture(self, emit, synchronize=False):
        """The CUDA graph of what ``emit()`` launches, captured on the
        engine's own stream: ``(graph, False)``, or ``(None, True)`` where
        capture fails here (:attr:`capture_error` says why).

        ``synchronize``: the current stream's work is finished first.
        """
        cp = self.cp
        stream = self._capture_stream
        if stream is None:
            stream = self._capture_stream = cp.cuda.Stream(non_blocking=True)
        graph = None
        try:
            if synchronize:
                cp.cuda.get_current_stream().synchronize()
            with stream:
                stream.begin_capture()
                try:
                    emit()
                finally:
                    graph = stream.end_capture()
        except Exception as exc:             # capture unsupported: launch directly
            self.capture_error = repr(exc)
            return None, True
        return graph, False
