"""CUDA graphs of the fused iteration's launch table.

Where an iteration allocates nothing (the fused preconditioners, or one
that offers its own kernels, and the raw condensed or the dense coarse
solve, or no deflation), runs of iterations are replayed from CUDA graphs
of the launches :class:`~.stages.FusedStages` tabulates: whole iterations
(pairs, and runs of ``graph_iterations``), or, where the dense coarse
solve's cuBLAS product does not capture, the runs between its calls.
:class:`IterationGraphs` chooses the mode, captures the graphs (by
:class:`~.protocol.DeviceEngine`'s capture, once per launch signature and
buffer parity) and runs the iterations (:meth:`IterationGraphs.iterate`).
"""
from __future__ import annotations

from .kernels import PREC_GENERIC
from .protocol import DeviceEngine
from .stages import capturable, launch

__all__ = ["IterationGraphs"]


class IterationGraphs(DeviceEngine):
    """The graphs of a fused engine (:class:`~.iteration.FusedIteration`):
    keyed by ``(kind, length, cur, pcur)``; ``kind`` ``"whole"`` (``length``
    iterations), ``"head"`` or ``"link"`` (the runs around the dense coarse
    product)."""

    #: Capture the dense coarse solve's cuBLAS product in the graphs of
    #: whole iterations (else: graphs between its calls, see :meth:`iterate`).
    capture_dense_product = True

    def _graph_mode(self):
        """``"whole"``: whole iterations are captured (every stage is a raw
        kernel, or the dense coarse solve's cuBLAS product); ``"split"``: the
        runs between the dense coarse solve's library calls are; None:
        direct launches only.  Kept while the launch signature and the
        capture settings stay (asked at every start and stretch)."""
        if not self.use_graphs:
            return None
        key = (self._signature(), self.capture_dense_product, self._dense_capture_failed)
        memo = self._mode_memo
        if memo is None or memo[0] != key:
            memo = self._mode_memo = (key, self._mode_of_launches())
        return memo[1]

    def _mode_of_launches(self):
        """:meth:`_graph_mode` from the launches themselves."""
        if self.prec_code == PREC_GENERIC and not all(
                capturable(entry) for cur in (0, 1) for entry in
                self._entries("precondition", cur, 0)):
            return None
        if self.defl is None or self.cs is not None:
            return "whole"
        if self._dense_K is not None:
            capturable_product = all(capturable(entry) for entry in self._entries("coarse", 0, 0))
            whole = self.capture_dense_product and capturable_product and \
                not self._dense_capture_failed
            return "whole" if whole else "split"
        return None

    def _prepare_graphs(self, changed=None):
        """At a start: drop the graphs if the launches changed since they were
        captured (``changed``: the start found so already), and capture the
        split mode's short ones now (whole iterations are captured after the
        first stretch was launched directly: see :meth:`iterate`)."""
        mode = self._graph_mode()
        if mode is None:
            return
        if changed is None:
            changed = self._new_signature(self._signature())
        if changed:
            self._sig_solves = 0
        self._sig_solves += 1
        # Long graphs where they will be used: the launches stayed from the
        # last solve, or it was long (its capture then runs while the device
        # works on the start).
        self._long_ok = self._sig_solves >= 2 or \
            self._solve_iterations >= 4 * int(self.graph_iterations)
        self._solve_iterations = 0
        cur, pcur = self.cur, self.pcur
        if mode == "split":
            self._graph("head", 0, cur, pcur)
            self._graph("link", 0, 1 - cur, 1 - pcur)

    def iterate(self, count):
        """``count`` iterations, no host synchronisation.

        Where an iteration allocates nothing (the fused preconditioners and
        the raw condensed or the dense coarse solve, or no deflation), runs
        of iterations are replayed from CUDA graphs: pairs, and runs of
        :attr:`graph_iterations` once the launches have stayed the same for
        a second solve, or after a long solve (a long graph costs more to
        capture than a short solve saves).  The dense coarse solve's cuBLAS
        product is captured with the kernels
        (:func:`~bubbleflow.compute.cublas_gemm.dense_product`: cuBLAS's
        entry points on the capturing stream, with a workspace of their
        own); where that capture fails, or without
        :attr:`capture_dense_product`, the runs between its calls are
        replayed: one graph and one product per iteration.  The graphs are
        captured once per launch signature and buffer parity
        (:meth:`_signature`) and replace about twenty launches per
        iteration; the kernels and their arguments are those of the direct
        launches: the results are the same, bit for bit (measured:
        docs/performance_records.md, "Figures behind code choices").
        """
        mode = self._graph_mode() if count >= 1 else None
        if mode is not None and self._new_signature(self._signature()):
            self._sig_solves = 1
        if mode == "split":
            self._iterate_split(count)
            return
        lengths = []
        if mode == "whole" and count >= 2:
            long = self._long_length()
            lengths = [2]
            if long and count >= long and getattr(self, "_long_ok", False):
                lengths.insert(0, long)
            if ("whole", 2, self.cur, self.pcur) not in self._graphs:
                # Not captured yet: this stretch by direct launches, the
                # capture after them, while the device runs them.
                parity = (self.cur, self.pcur)
                self._direct(count)
                for length in lengths:
                    self._graph("whole", length, *parity)
                return
        self._run(count, lengths, lambda length: self._graph("whole", length, self.cur, self.pcur))

    def _long_length(self):
        """The long graph's iterations (:attr:`graph_iterations`, even), or 0."""
        long = int(self.graph_iterations)
        return long if long > 2 and long % 2 == 0 else 0

    def _iterate_split(self, count):
        """Iterations around the dense coarse product: the first one's
        launches before it (graph ``head``), then per iteration the product
        and the next one's ``beta`` with the launches up to its product
        (graph ``link``); the last ``beta`` alone."""
        names = self._names()
        cut = names.index("coarse")
        cur, pcur = self.cur, self.pcur
        graph = self._graph("head", 0, cur, pcur)
        if graph is not None:
            graph.launch()
        else:
            launch(self._iteration(cur, pcur)[:cut])
        for i in range(count):
            launch(self._entries("coarse", cur, pcur))
            cur, pcur = 1 - cur, 1 - pcur
            if i + 1 < count:
                graph = self._graph("link", 0, cur, pcur)
                if graph is not None:
                    graph.launch()
                else:
                    launch(self._entries("beta", cur, pcur) + self._iteration(cur, pcur)[:cut])
            else:
                launch(self._entries("beta", cur, pcur))
        self.cur, self.pcur = cur, pcur

    def _graph_launches(self, kind, length, cur, pcur):
        """The launches a graph holds: ``whole``: ``length`` iterations from
        parity ``(cur, pcur)``; ``head``: an iteration's launches before the
        coarse solve; ``link``: the previous iteration's ``beta``, then the
        head of the iteration at ``(cur, pcur)``."""
        if kind == "whole":
            out = []
            for _ in range(length):
                out += self._iteration(cur, pcur)
                cur, pcur = 1 - cur, 1 - pcur
            return out
        cut = self._names().index("coarse")
        head = self._iteration(cur, pcur)[:cut]
        return head if kind == "head" else self._entries("beta", cur, pcur) + head

    def _graph(self, kind, length, cur, pcur):
        """The CUDA graph of :meth:`_graph_launches` (captured on first use),
        or None when capture is not possible here (then direct launches are
        used)."""
        key = (kind, length, cur, pcur)
        graphs = self._graphs
        if key in graphs:
            return graphs[key]
        launches = self._graph_launches(kind, length, cur, pcur)
        library = not all(entry.__class__ is tuple for entry in launches)
        if not all(capturable(entry) for entry in launches) or \
                (library and self._dense_capture_failed):
            graphs[key] = None
            return None
        graph, failed = self._capture(lambda: launch(launches))
        if failed:
            if library:                      # the library call's capture failed:
                self._dense_capture_failed = True    # split mode from now on
            else:
                self.use_graphs = False
        graphs[key] = graph
        return graph
