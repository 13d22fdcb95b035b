"""The stages of one fused iteration as launches, and how a launch runs.

A launch is a ``(kernel, grid, block, args, shared_mem)`` tuple, or a
callable for a library call (a CUDA graph holds it where it is marked
``capturable``).  :class:`FusedStages` builds the launches of each stage of
the iteration of :mod:`.kernels` (``direction_spmv``, ``alpha``, ``update``,
``precondition``, ``restrict``, ``coarse``, ``beta``) at each parity of the
double buffers, once per launch signature (:meth:`FusedStages._signature`),
and keeps them in a table.  The grid stages (``direction_spmv``,
``update``) are the engine's own (``_grid_entries``: the 2-D and 3-D
engines); the others read only the scalars, the per-block sums and the
deflation's pieces, alike in every dimension.
"""
from __future__ import annotations

import numpy as np

from ...compute.cublas_gemm import dense_product
from .kernels import PREC_GENERIC, THREADS
from .protocol import DONE

__all__ = ["FusedStages", "launch", "capturable", "arg_key"]


def launch(entries):
    """Launch ``(kernel, grid, block, args, shared_mem)`` tuples and call the
    callables among them, in order."""
    for entry in entries:
        if entry.__class__ is tuple:
            kern, grid, block, args, shared = entry
            kern(grid, block, args, shared_mem=shared)
        else:
            entry()


def capturable(entry):
    """Can a CUDA graph hold this launch (a raw kernel's tuple, or a library
    call marked ``capturable``)?"""
    return entry.__class__ is tuple or getattr(entry, "capturable", False)


#: Launch argument tuples whose keys an engine keeps (:meth:`FusedStages._args_key`).
ARGS_KEYS_KEPT = 1024


def arg_key(a):
    """A kernel argument as the graphs see it: a buffer by its address, a
    scalar by its type and value."""
    if isinstance(a, np.generic):
        return (a.dtype.str, a.item())
    return ("ptr", int(a.data.ptr))


class FusedStages:
    """The launch table of a fused engine (:class:`~.iteration.FusedIteration`
    and its 2-D and 3-D engines, which supply ``_grid_entries``)."""

    def _names(self):
        """The stages of one iteration, in order."""
        names = ["direction_spmv", "alpha", "update"]
        if self.prec_code == PREC_GENERIC:
            names.append("precondition")
        if self.defl is not None:
            names += ["restrict", "coarse"]
        names.append("beta")
        return names

    def _entries(self, name, cur, pcur):
        """The launches of stage ``name`` when the buffers' parity is
        ``(cur, pcur)`` as it starts: a list of ``(kernel, grid, block,
        args, shared_mem)`` tuples, or of callables for the stages that are
        library calls (built once per signature, :attr:`_table`)."""
        key = (name, cur, pcur, self._starting)
        table = self._table
        if key in table:
            return table[key]
        if name in ("direction_spmv", "update"):
            out = self._grid_entries(name, cur, pcur)
        else:
            out = self._scalar_entries(name, cur)
        table[key] = out
        return out

    def _scalar_entries(self, name, cur):
        """The launches of the stages other than the grid's (see
        :meth:`_entries`)."""
        null = np.uint64(0)                 # a NULL pointer argument
        k = self.k
        if name == "alpha":
            out = [(self.k_alpha, (1,), (1024,), (self.part_pw, np.int32(self.ndir), self.scal),
                    0)]
        elif name == "precondition":        # a preconditioner without a fused kernel
            r_new = self.r[1 - cur]
            n = np.int64(self.n)
            dot = (self.k_dot, (self.nred,), (THREADS,), (r_new, self.y, self.part_ry, n), 0)
            launches = self._prec_launches(r_new)
            if launches is not None:        # its own kernels: captured with the iteration
                out = list(launches) + [dot]
            else:
                def precondition():
                    self.y[...] = self.prec_obj.apply(r_new)
                out = [precondition, dot]
        elif name == "restrict":
            out = [(self.k_restrict, (k,), (128,),
                    (self.azt_indptr, self.azt_indices, self.azt_data, self.y, self.part_zr,
                     self.owner, self.g, np.int32(k), self.scal), 0)]
        elif name == "coarse":
            out = self._coarse_entries()
        else:                               # beta
            nry = self.nred if self.prec_code == PREC_GENERIC else self.ntiles
            zr = self.part_zr if self.part_zr is not None else self.part_ry
            if self.cs is not None:
                gather = self.cs.gather_operands()
            else:
                gather = (null, null, null, np.int32(0), np.int32(0), np.int32(0))
            out = [(self.k_beta, (1,), (1024,),
                    (self.part_ry, np.int32(nry), self.part_rr, np.int32(self.ntiles),
                     self.e, zr, self.owner, np.int32(k), self.scal, self.hist, self.counter,
                     np.int32(self._starting)) + gather, 0)]
        return out

    def _prec_launches(self, r_new):
        """The raw launches of ``y = M^-1 r_new`` a generic preconditioner
        offers (``device_launches``: buffers of its own, allocated once), or
        None."""
        offer = getattr(self.prec_obj, "device_launches", None)
        if self.prec_code != PREC_GENERIC or offer is None:
            return None
        return offer(r_new, self.y, self.scal[DONE:DONE + 1])

    def _coarse_entries(self):
        """The coarse solve's launches: the raw condensed solve's kernels
        (its gather into e by ``beta``), or a library call."""
        g, e = self.g, self.e
        if self.cs is not None:
            return self.cs.launches(g, e, gather=False)
        K = self._dense_K
        if K is not None:
            return [dense_product(K, g, e)]

        def coarse():
            self._coarse(g, e)
        return [coarse]

    def _stages(self):
        """The launches of one iteration as (name, callable) pairs, each
        launched at the buffers' parity of its call (``direction_spmv``
        turns the direction's parity over, as an iteration does)."""
        def stage(name):
            def run():
                launch(self._entries(name, self.cur, self.pcur))
                if name == "direction_spmv":
                    self.pcur = 1 - self.pcur
            return run
        return [(name, stage(name)) for name in self._names()]

    def _iteration(self, cur, pcur):
        """The launches of one iteration that starts at parity ``(cur, pcur)``."""
        key = ("iteration", cur, pcur)
        if key not in self._table:
            out, q = [], pcur
            for name in self._names():
                out += self._entries(name, cur, q)
                if name == "direction_spmv":
                    q = 1 - q
            self._table[key] = out
        return self._table[key]

    def _launch_iteration(self):
        """One iteration's launches at the buffers' parity, which it turns
        over."""
        launch(self._iteration(self.cur, self.pcur))
        self.cur, self.pcur = 1 - self.cur, 1 - self.pcur

    def _args_key(self, args):
        """:func:`arg_key` of each of a preconditioner's launch ``args``,
        memoised on the tuple itself: its launch lists (built once per set
        of buffers) hand the same tuples to every solve, so a new signature
        after a bind keys them without visiting their arguments again.  The
        memo holds each tuple, so that its ``id`` is not reused while it is
        there, and is emptied when a new preconditioner is bound or it
        reaches :data:`ARGS_KEYS_KEPT` tuples (a tuple's arrays and numbers
        cannot change: the key stays right).  The coarse solve's launches,
        made again with each deflation space's arrays, are keyed afresh:
        held here, those arrays would outlive their space."""
        memo = self._args_keys
        hit = memo.get(id(args))
        if hit is not None and hit[0] is args:
            return hit[1]
        if len(memo) >= ARGS_KEYS_KEPT:
            memo.clear()
        keys = tuple(arg_key(a) for a in args)
        memo[id(args)] = (args, keys)
        return keys

    def _signature(self):
        """What the graphs hold, as a key: the buffers' layout (allocated once,
        or reallocated by :meth:`_reserve`: ``_epoch``), the number of
        deflation vectors (the restriction's grid, ``beta``'s count), the
        history's address, the raw coarse solve's launches (its arrays
        and sizes) and the address of the engine's copy of a dense coarse
        inverse.  The rest of every launch is fixed for the engine's life."""
        if self._sig is None:
            cs = ()
            if self.cs is not None:
                cs = tuple((id(kern), grid, block, shared, tuple(arg_key(a) for a in args))
                           for kern, grid, block, args, shared in
                           self.cs.launches(self.g, self.e, gather=False))
                cs += tuple(arg_key(a) for a in self.cs.gather_operands())
            hist = self.hist.data.ptr if self.hist is not None else 0
            dense = self._dense_K.data.ptr if self._dense_K is not None else 0
            prec = self._prec_signature() if self.prec_code == PREC_GENERIC else ()
            self._sig = (self._epoch, self.k, hist, self.prec_code, cs, dense, prec)
        return self._sig

    def _prec_signature(self):
        """The generic preconditioner's stage of both parities in
        :meth:`_signature`: its launches keyed, and kept while the launch
        lists it offers (:meth:`_prec_launches`, kept by it from call to
        call) and the engine's buffers (``_epoch``) are the same objects, so
        that a bind of a refreshed operator does not key them again."""
        offered = tuple(self._prec_launches(self.r[1 - cur]) for cur in (0, 1))
        memo = self._prec_memo
        if memo is not None and memo[0] == self._epoch and offered[0] is not None and \
                all(a is b for a, b in zip(memo[1], offered)):
            return memo[2]
        key = tuple((id(entry[0]), entry[1], entry[2], entry[4], self._args_key(entry[3]))
                    for cur in (0, 1) for entry in self._entries("precondition", cur, 0)
                    if entry.__class__ is tuple)
        self._prec_memo = (self._epoch, offered, key)
        return key
