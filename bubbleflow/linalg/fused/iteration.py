"""The host side of the fused iteration (:mod:`.kernels`), shared by the 2-D
and 3-D engines.

:class:`FusedIteration` holds what does not depend on the grid's dimension:
the vectors and scalars on the device, the scratch of per-block sums and of
the deflation's pieces, the operator bound to the engine's buffers, the
start (:meth:`FusedIteration.begin`) and restart
(:meth:`FusedIteration.load`) of a solve, and the per-stage profile; its
launch table is :class:`~.stages.FusedStages`', its graphs
:class:`~.graphs.IterationGraphs`'.  An engine of one dimension
(:mod:`.engine`, :mod:`.engine3d`) supplies its grid: the buffers of its
operator (``_allocate_operator``), its grid kernels and their geometry
(``_plan_grid``), their launches (``_grid_entries``), the copies of an
operator into its buffers (``_bind_grid``, ``_copy_grid``), the deflation
space's layout on its tiles (``_deflation_pieces``, 2-D), ``fits`` and its
byte count (``_count_bytes``).
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.array_copies import copy_arrays
from ...compute.cublas_gemm import dense_gemm, gemm_operand

from .. import registry
from .graphs import IterationGraphs
from .kernels import NSCAL, PREC_IDENTITY, kernel, reduction_blocks
from .protocol import BETA, BAD, DONE, INV_BNORM, RZ, TOL_REL
from .stages import FusedStages, launch

__all__ = ["FusedIteration"]


class FusedIteration(FusedStages, IterationGraphs):
    """Buffers, kernels and launch plan of the fused iteration on one grid.

    The state (``x``, ``r``, ``p``, ``rz``, the breakdown flag) lives in
    device buffers; :meth:`begin` starts a solve, :meth:`load` takes the
    Krylov loop's state after a restart and :meth:`iterate` advances it by
    ``count`` iterations, writing the relative recursive residual into
    ``hist`` (the protocol of :mod:`bubbleflow.linalg.krylov.device`).
    Built once per grid: :meth:`update` takes a new operator (its copies of
    the operator, the preconditioner's coefficients and the deflation's
    pieces), keeping the buffers, kernels and launch plan.

    Every array a kernel reads is a buffer of the engine, kept from solve to
    solve and from operator to operator (the operator's values are copied
    into them; the deflation's pieces into buffers that grow when a space
    needs more); the solve's ``1 / ||b||`` and tolerance are device scalars.
    So the CUDA graphs of the iteration stay valid while the launches are
    the same (:meth:`_signature`: the kernels, their geometry, the buffers
    and the sizes, such as the number of deflation vectors), and are captured
    again only when they change.
    """

    def _start(self, A, prec_obj, prec_name, defl, tile):
        """The state every engine starts with, its buffers, plan and binding
        (after the grid's geometry is set)."""
        self.prec_name = prec_name
        self.prec_code = self._code_of(prec_obj, prec_name)
        self._sig_solves = 0                          # solves of the graphs' signature
        self._dense_capture_failed = False           # the dense product would not capture
        self._mode_memo = None                       # (key, graph mode): _graph_mode
        self._prec_memo = None                       # (epoch, offered launches, key): _prec_signature
        self._kbuf = None                             # the engine's copy of a dense inverse
        self._table, self._sig = {}, None             # launches by (stage, parity), signature
        self._args_keys, self.prec_obj = {}, None     # launch arguments' keys (_args_key)
        self._epoch = 0                               # buffers (re)allocated: a new layout
        self._solve_iterations = 0                    # iterations of the last solve
        self._allocate()
        self._plan(tile)
        self._kcap = self._nnzcap = 0
        self._scratch = self._indices = self._data = None
        self._bind(A, prec_obj, defl)
        self.bytes_per_iteration = self._count_bytes()

    @staticmethod
    def _code_of(prec_obj, prec_name):
        """The update kernel's ``PREC`` for this preconditioner (registry)."""
        return PREC_IDENTITY if prec_obj is None else registry.fused_prec_code(prec_name)

    def update(self, A, prec_obj, defl):
        """Take a new operator, preconditioner and deflation space (of the
        same kinds, ``fits``); returns ``self``.  The graphs are kept:
        the next :meth:`begin` captures them again only if the launches
        changed."""
        self._bind(A, prec_obj, defl)
        self.bytes_per_iteration = self._count_bytes()
        return self

    # ------------------------------------------------------------ binding
    def _bind(self, A, prec_obj, defl):
        """The operator-dependent arrays, copied into the engine's buffers:
        face couplings (none that are the buffers already:
        :meth:`operator_arrays`), the preconditioner's coefficients, the
        deflation's pieces (two kernels where the arrays allow, else one
        copy each)."""
        cp = self.cp
        if prec_obj is not self.prec_obj:
            self._args_keys = {}                      # (they hold the old one's arrays)
            self._prec_memo = None
        self.prec_obj = prec_obj
        epoch = self._epoch
        self.defl = defl
        pieces = None
        if defl is None:
            self.k, self.azt_nnz = 0, 0
            self._reserve(1, 0)
            self.e, self.owner = self._ebuf[:1], self._owner[:1]
            self.g = self.part_zr = self.cs = self._dense_K = None
        else:
            pieces = self._deflation_pieces(defl)
            k, nnz = defl.n_vectors, int(pieces[5].size)
            self._reserve(k, nnz)
            if self.labels32 is None:
                self.labels32 = cp.zeros(self.n, dtype=cp.int32)
                self.part = cp.zeros((self.ny, self.nx), dtype=cp.int8)
                self._epoch += 1
            self.owner = self._owner[:k]
            self.azt_indptr = self._indptr[:k + 1]
            self.azt_indices, self.azt_data = self._indices[:nnz], self._data[:nnz]
            self.k, self.azt_nnz = k, nnz
            self.g, self.e = self._gbuf[:k], self._ebuf[:k]
            # The coarse solve: the raw condensed one (its gather into e is
            # done by ``beta``), or the dense inverse's product (cuBLAS, on
            # the engine's copy of the inverse), or the solver's own solve.
            coarse = defl.coarse
            self.cs = coarse.raw_solve
            self._dense_K = self._own_dense(getattr(coarse, "dense_inverse", None))
        # The face couplings, (ny, nx - 1) and (ny - 1, nx).  Copied from the
        # east and north diagonals: read in place (row stride nx) both tile
        # kernels were measurably slower (docs/performance_records.md), more than the
        # copies cost once per operator.
        if not self._bind_grid(A, prec_obj, pieces):
            self._copy_grid(A, prec_obj, pieces)
        if pieces is not None:
            part, owner, labels32, indptr, indices, data = pieces
            args = [owner, indptr, indices, data]
            if all(a.flags.c_contiguous for a in args):
                cuda.launch_1d(self.k_bind_vectors, max(self.k + 1, self.azt_nnz),
                               tuple(args) + (self.owner, self.azt_indptr, self.azt_indices,
                                              self.azt_data, np.int32(self.k),
                                              np.int32(self.azt_nnz)))
            else:
                for dst, src in zip((self.owner, self.azt_indptr, self.azt_indices,
                                     self.azt_data), args):
                    dst[...] = src
        self._rebound(epoch)

    def _own_dense(self, K):
        """The dense coarse inverse ``K`` copied into a buffer of the engine
        (grown when short), so that the product's arguments, and the CUDA
        graphs that hold them, stay the same from operator to operator as
        every other array the iteration reads; ``K`` itself where its product
        is not the raw cuBLAS call
        (:func:`~bubbleflow.compute.cublas_gemm.dense_product`), or None."""
        if K is None or dense_gemm() is None or not gemm_operand(K) or K.ndim != 2:
            return K
        size = int(K.size)
        if self._kbuf is None or self._kbuf.size < size:
            self._kbuf = self.cp.empty(max(size, int(1.5625 * size)), dtype=self.cp.float64)
        own = self._kbuf[:size].reshape(K.shape)
        own.data.copy_from_device_async(K.data, K.nbytes)
        return own

    def _rebound(self, epoch):
        """After a bind: the launches that read only buffers allocated once
        (direction, alpha, update) are kept while no buffer was reallocated
        (``epoch``); the others are built again, and the signature."""
        keep = ("direction_spmv", "alpha", "update") if epoch == self._epoch else ()
        self._table = {key: v for key, v in self._table.items() if key[0] in keep}
        self._sig = None

    def _reserve(self, k, nnz):
        """Buffers for ``k`` deflation vectors and ``nnz`` entries of
        ``(A Z)^T``: grown (by a quarter more) when they are short, else kept.
        The scratch block holds the per-tile sums, ``g`` and ``e`` (cleared
        by one fill at every start)."""
        cp = self.cp
        if k > self._kcap or self._scratch is None:
            self._kcap = max(k, int(1.25 * k) if self._kcap else k)
            kc = self._kcap
            sizes = [max(self.ntiles, self.nred), self.ntiles, max(self.nred, self.ndir),
                     2 * self.ntiles, kc, kc]
            self._scratch = cp.zeros(sum(sizes), dtype=cp.float64)
            views, o = [], 0
            for size in sizes:
                views.append(self._scratch[o:o + size])
                o += size
            self.part_ry, self.part_rr, self.part_pw, self._part_zr, self._gbuf, self._ebuf = views
            self._owner = cp.zeros(kc, dtype=cp.int32)
            self._indptr = cp.zeros(kc + 1, dtype=cp.int32)
            self._epoch += 1
        if self.defl is not None:
            self.part_zr = self._part_zr
        if nnz > self._nnzcap or self._indices is None:
            self._nnzcap = max(nnz, int(1.25 * nnz) if self._nnzcap else nnz, 1)
            self._indices = cp.zeros(self._nnzcap, dtype=cp.int32)
            self._data = cp.zeros(self._nnzcap, dtype=cp.float64)
            self._epoch += 1

    def _allocate(self):
        """Vectors and the operator's and preconditioner's buffers, allocated
        once."""
        cp = self.cp
        n = self.n
        self.x = cp.zeros(n, dtype=cp.float64)
        self.r = [cp.zeros(n, dtype=cp.float64), cp.zeros(n, dtype=cp.float64)]
        self.cur = 0
        self.pbuf = [cp.zeros(n, dtype=cp.float64), cp.zeros(n, dtype=cp.float64)]
        self.pcur = 0
        self.w = cp.zeros(n, dtype=cp.float64)
        self.y = cp.zeros(n, dtype=cp.float64)
        self._allocate_operator()
        # Deflation: labels and parts of every cell (allocated with the
        # first space), the rest by _reserve.
        self.labels32 = self.part = None
        self.nred = reduction_blocks()
        self.scal = cp.zeros(NSCAL, dtype=cp.float64)
        self.scal[INV_BNORM] = 1.0
        self.counter = cp.zeros(1, dtype=cp.int32)
        self._starting = 0

    def _plan(self, tile):
        """The kernels and their launch geometry."""
        self._plan_grid(tile)
        self.k_alpha = kernel("bf_alpha")
        self.k_beta = kernel("bf_beta")
        self.k_restrict = kernel("bf_restrict")
        self.k_dot = kernel("bf_dot_tiles")
        self.k_status = kernel("bf_status")
        self.k_scalars = kernel("bf_set_scalars")
        self.k_bind_grid = kernel("bf_bind_grid")
        self.k_bind_vectors = kernel("bf_bind_vectors")
        self.status_buf = self.cp.zeros(3, dtype=self.cp.float64)

    def _coarse(self, g, out):
        coarse = self.defl.coarse
        try:
            coarse.solve(g, out=out)
        except TypeError:                  # a solver without ``out``
            out[...] = coarse.solve(g)

    # -------------------------------------------------------------- state
    def tolerance(self, bnorm, tol_rel):
        """The solve's ``1 / ||b||`` and relative tolerance into the device
        scalars that ``beta`` reads (one small transfer)."""
        self.k_scalars((1,), (1,), (self.scal, self.counter, np.float64(1.0 / bnorm),
                                    np.float64(tol_rel), np.int32(0), np.int32(0)))

    def load(self, x, r, p, rz, bad, hist, it, bnorm, tol_rel=0.0):
        """Take the generic loop's state (after a start or a restart).

        The iteration stops on the device after the iteration whose relative
        recursive residual ``hist[it]`` is ``<= tol_rel`` (see ``settle``).
        """
        self._take(x, r)
        # The first direction is p itself: y = p, beta = 0, e = 0.
        self.pbuf[self.pcur][...] = p
        self.y[...] = p
        self.e[...] = 0
        self.scal[BETA] = 0
        self.scal[RZ] = rz
        self.scal[BAD] = bad
        self.scal[DONE] = 0
        self._set_hist(hist)
        self.counter[0] = it
        self.tolerance(bnorm, tol_rel)

    def begin(self, x, r, hist, it, bnorm=None, tol_rel=0.0, own=False):
        """Start from ``x`` (None: zero) and its residual ``r`` with the engine's kernels.

        The generic start's ``y = M^-1 r + Z E^+ (Z^T r - (AZ)^T M^-1 r)``,
        ``rz = r . y`` and first direction ``p = y`` (A-DEF2; ``y = M^-1 r``
        without deflation) are the update, restriction, coarse solve and
        ``beta`` kernels of an iteration with ``alpha = 0`` and ``beta = 0``:
        one fused pass instead of a dozen library calls.  The direction is
        formed by the next iteration's first kernel.  Afterwards
        ``scal[RZ]`` holds ``rz`` and ``scal[BAD]`` the breakdown flag.

        ``x`` and ``r`` are copied into the engine's buffers (``own`` is
        accepted for the protocol: the buffers stay the engine's, so that
        its graphs stay valid).  ``bnorm`` None: the tolerance is given later
        by :meth:`tolerance` (the start does not need it).
        """
        # A new solve: the buffers' parity and the per-solve state of a
        # fresh engine.
        self.cur = self.pcur = 0
        self._take(x, r)
        # alpha = beta = 0, not bad, not done; the counter at ``it``.
        self.k_scalars((1,), (1,), (self.scal, self.counter,
                                    np.float64(1.0 if bnorm is None else 1.0 / bnorm),
                                    np.float64(0.0 if bnorm is None else tol_rel),
                                    np.int32(it), np.int32(1)))
        self._set_hist(hist)
        # (without graphs there is nothing a new signature would drop)
        changed = self._new_signature(self._signature()) if self.use_graphs else True
        self._starting = 1
        try:
            launches = [entry for name in self._names() if name not in ("direction_spmv", "alpha")
                        for entry in self._entries(name, self.cur, self.pcur)]
        finally:
            self._starting = 0
        self._start_stages(launches, capture=not changed)
        self.cur = 1 - self.cur                # update wrote r' (= r) to the other buffer
        # The graphs of this launch signature: kept from the last solve when
        # nothing changed, else captured now, while the device runs the start.
        self._prepare_graphs(changed)

    def _start_stages(self, launches, capture):
        """The start's clears and its stages' ``launches``: replayed from a
        CUDA graph of this launch signature where every launch is a raw
        kernel's, captured (``capture``: the signature is the last solve's,
        so it is likely to serve again) after they were launched directly,
        while the device runs them."""
        key = ("start", 0, self.cur, self.pcur)
        graph = self._graphs.get(key) if self.use_graphs else None
        if graph is not None:
            graph.launch()
            return

        def emit():
            self._scratch.fill(0)              # per-tile sums, g, e
            self.pbuf[self.pcur].fill(0)       # 0 * p and 0 * w must stay 0
            self.w.fill(0)
            launch(launches)

        emit()
        if capture and key not in self._graphs and self._graph_mode() is not None and \
                all(entry.__class__ is tuple for entry in launches):
            self._graphs[key] = self._capture(emit)[0]

    def _take(self, x, r):
        """The iterate (None: zero, set without a copy of zeros) and the
        residual into the engine's buffers (one launch for both copies)."""
        if x is None:
            self.x.fill(0)
        pairs = [(dst, src.reshape(self.n)) for dst, src in ((self.x, x), (self.r[self.cur], r))
                 if src is not None and src is not dst]
        copy_arrays([dst for dst, _ in pairs], [src for _, src in pairs])

    def _set_hist(self, hist):
        if self.hist is None or hist.data.ptr != self.hist.data.ptr:
            self._table = {key: v for key, v in self._table.items() if key[0] != "beta"}
            self._table = {key: v for key, v in self._table.items() if key[0] != "iteration"}
            self._sig = None
        self.hist = hist

    def _settled(self, it, done, count):
        """The buffer parities follow the ``done`` iterations that ran (fewer
        than ``count`` where the tolerance was reached on the device)."""
        if (count - done) % 2:
            self.cur, self.pcur = 1 - self.cur, 1 - self.pcur
        self._solve_iterations = it + done

    @property
    def r_current(self):
        return self.r[self.cur]

    @property
    def p(self):
        """The current search direction."""
        return self.pbuf[self.pcur]

    # ------------------------------------------------------------ profile
    def profile(self, repeat=50):
        """Median milliseconds of each stage of one iteration (CUDA events).

        Every stage is launched ``repeat`` times on its own, on the current
        state; the iterate is changed by it, so profile after a solve.
        """
        from ...compute.backend import gpu_median_ms

        cp = self.cp
        self.scal[DONE] = 0                # keep iterating past the tolerance
        self.scal[TOL_REL] = 0.0
        out = {name: gpu_median_ms(fn, repeat) for name, fn in self._stages()}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        self.iterate(2)
        start.record()
        self.iterate(repeat)
        stop.record()
        stop.synchronize()
        out["iteration"] = cp.cuda.get_elapsed_time(start, stop) / repeat
        return out
