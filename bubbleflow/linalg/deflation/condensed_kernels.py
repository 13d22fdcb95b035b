"""The condensed coarse solve as five CUDA kernels (CuPy).

A :class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver` in condensed
mode stores the interior block inverses, the products ``F``, ``M_SI`` and
the inverse Schur complement; its array code applies them with about 15
library launches.  :class:`RawCondensedSolve` applies the same stored arrays
with five kernels (``coarse_condensed.cu``), and hands its launches to the
fused engine, which keeps them for every iteration and captures them in its
CUDA graphs.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda

__all__ = ["RawCondensedSolve"]


class RawCondensedSolve:
    """The condensed solve of a
    :class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver` as five CUDA kernels.

    The backend path (``CoarseSolver._solve_condensed``, its twin, also
    what NumPy runs) takes about 15 library launches of tiny kernels, whose
    cost shows in every fused iteration (measured: docs/performance_records.md).  Here:
    the mean of ``s`` (singular ``E``), the interior block products (a
    block per group), the separator (every block forms its right-hand side
    in shared memory, then a warp per row of ``Sc^-1``), the back
    substitution into the interiors, and the gather out with the mean
    removal.  ``solve`` queues work only (no synchronisation); its scratch
    buffers are allocated once.
    """

    @classmethod
    def for_solver(cls, solver):
        """The raw solve of ``solver``, or None when its separator does not
        fit in one block's shared memory."""
        import cupy

        need = 8 * solver.n_separator
        limit = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
        if need > limit or 8 * solver.block_size > limit:
            return None
        return cls(solver)

    def __init__(self, solver):
        import cupy

        mod = _condensed_module()
        self.k_mean = mod.get_function("bf_cs_mean")
        self.k_block = mod.get_function("bf_cs_block")
        self.k_sep = mod.get_function("bf_cs_separator")
        self.k_back = mod.get_function("bf_cs_back")
        self.k_out = mod.get_function("bf_cs_out")
        for kern, nbytes in ((self.k_block, 8 * solver.block_size),
                             (self.k_sep, 8 * solver.n_separator)):
            if nbytes > 48 * 1024:
                kern.max_dynamic_shared_size_bytes = nbytes
        self.solver = solver
        self.singular = bool(solver.singular)
        self.t = cupy.empty(solver.interior_size, dtype=np.float64)
        self.yS = cupy.empty(solver.n_separator, dtype=np.float64)
        self.mean = cupy.zeros(1, dtype=np.float64)
        (data, indices, indptr), _ = solver._esi_parts
        self.esi = (indptr.astype(cupy.int32, copy=False), indices.astype(cupy.int32, copy=False),
                    data.astype(cupy.float64, copy=False))

    def gather_operands(self):
        """What a caller that does the gather itself (``solve(gather=False)``)
        reads: ``(t, yS, take_out, interior size, separator size, singular)``,
        the last three as int32 kernel arguments."""
        c = self.solver
        return (self.t, self.yS, c.take_out, np.int32(c.interior_size), np.int32(c.n_separator),
                np.int32(self.singular))

    def solve(self, s, out, gather=True):
        """``out = E^+ s`` (float64, contiguous, not sharing memory with ``s``).

        ``gather=False`` (the fused iteration, :mod:`bubbleflow.linalg.fused.engine`) stops
        before the gather into ``out``, which the caller then does from
        :attr:`t` and :attr:`yS` with ``take_out`` (and the mean removal), as
        ``bf_cs_out`` does.
        """
        for kern, grid, block, args, shared in self.launches(s, out, gather):
            kern(grid, block, args, shared_mem=shared)
        return out

    def launches(self, s, out, gather=True):
        """The kernel launches of :meth:`solve` as ``(kernel, grid, block,
        args, shared_mem)`` tuples, in order: for a caller that launches
        them itself (the fused engine keeps them for every iteration and
        captures them in its CUDA graphs)."""
        c = self.solver
        Gb, m, nS, GbM, k = c.n_groups, c.block_size, c.n_separator, c.interior_size, c.k
        out_list = []
        mean = np.uint64(0)
        if self.singular:
            out_list.append((self.k_mean, (1,), (1024,), (s, np.int32(k), self.mean), 0))
            mean = self.mean
        rows = (m + 31) // 32                         # 32 warps a block, a warp a row
        out_list.append((self.k_block, (Gb, rows), (1024,),
                         (s, c._take_in, mean, c._Binv, self.t, np.int32(m)), 8 * m))
        indptr, indices, data = self.esi
        out_list.append((self.k_sep, ((nS + 31) // 32,), (1024,),
                         (s, c._take_in, mean, np.int32(GbM), np.int32(nS), indptr, indices,
                          data, self.t, c._Sinv, self.yS), 8 * nS))
        out_list.append((self.k_back, (Gb, rows), (1024,),
                         (self.t, c._F, self.yS, c._sidx, np.int32(m),
                          np.int32(c.separator_width)), 0))
        if gather:
            out_list.append((self.k_out, (1,), (1024,),
                             (self.t, self.yS, c.take_out, np.int32(k), np.int32(GbM),
                              np.int32(nS), np.int32(self.singular), out), 0))
        return out_list


@cuda.kernel_cache
def _condensed_module():
    return cuda.module(cuda.source(__name__, "coarse_condensed.cu"), options=("-std=c++14",))
