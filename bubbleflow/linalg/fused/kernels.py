"""The kernels of the fused GPU iteration of (deflated) preconditioned CG.

The generic loop of :mod:`bubbleflow.linalg.krylov` is written once against the
array backend and is the reference.  On CuPy it runs one library call per
vector operation, and every one of them reads and writes whole grid arrays.
The fused engines run the same iteration with a handful of fused CUDA
kernels (``fused.cu``, ``fused_update.cu``), all scalars kept on the device
and all buffers allocated once:

``direction_spmv``  one block per band of rows of a strip of columns (or per
             tile): ``p' = y + Z e + beta p`` on it and its one-cell halo
             (``p`` is double-buffered), ``w = A p'`` from the face couplings,
             and the block's sum of ``p' . w``.  All sums are per block in a
             fixed order, so runs are reproducible bit for bit.  As many
             bands as make one wave of resident blocks.
``alpha``    one block: ``alpha = rz / (p . w)``, the breakdown flag.
``update``   one block per subdomain tile, or per row of a few of them:
             ``x += alpha p``, ``r' = r - alpha w``, the preconditioner
             ``y = M^-1 r'`` (Jacobi, or both passes of scaled incomplete
             Poisson, the halo recomputed from ``r`` and ``w``), and per-tile
             sums of ``r' . y``, ``r' . r'`` and ``Z^T r'`` (the liquid and
             gas part of the tile).  ``r`` is double-buffered so that the
             halo reads never race with a neighbour's writes.
             Both kernels walk their block by columns: one thread per column
             (and row chunk) keeps the rows below and above in registers and
             takes its east and west neighbours from the adjacent lanes by
             warp shuffles, so every value is read once per cell, with no
             shared memory and no per-cell index division.
``restrict`` one block per deflation vector: ``g = Z^T r - (A Z)^T y`` with
             ``(A Z)^T`` in CSR (only cells next to a subdomain boundary have
             entries: the operator's rows sum to zero).
coarse       ``e = E^+ g`` (:class:`bubbleflow.linalg.deflation.coarse.CoarseSolver`; of its
             raw condensed solve, all steps but the gather; of its dense
             inverse, cuBLAS's product with the engine's copy of it).
``beta``     one block: the coarse solve's gather into ``e`` (raw condensed
             solve), ``r . y' = r . y + e . Z^T r``, ``beta``, the recursive
             residual norm into the history.

For A-DEF2 (Tang et al. 2009) this is exactly the generic
``y' = M^-1 r + Z E^+ (Z^T r - (AZ)^T M^-1 r)``.  Preconditioners other than
``none``, ``jacobi`` and ``incomplete_poisson_scaled`` (``block_ic``) are
applied by their own kernels between ``update`` and a fused dot.  The 3-D
engine (:mod:`.engine3d`) has grid kernels of its own and shares the
scalar ones.

Every kernel has its NumPy twin: the generic loop in ``krylov`` computes the
same quantities, and the tests compare the two on the GPU (iterations and
solutions).  Counted traffic per iteration (each array read once and written
once, the floor of the benchmark) is each engine's ``bytes_per_iteration``.
"""
from __future__ import annotations

from ...compute import cuda

from .. import registry

__all__ = ["module", "kernel", "reduction_blocks", "PREC_IDENTITY", "PREC_JACOBI", "PREC_SCALED_IP",
           "PREC_GENERIC", "VARIANT_OF_CODE", "THREADS", "NSCAL"]

# The update kernel's ``#define PREC`` values (registry.FUSED_VARIANTS).
PREC_IDENTITY, PREC_JACOBI, PREC_SCALED_IP, PREC_GENERIC = (
    registry.FUSED_VARIANTS[name].code
    for name in ("identity", "jacobi", "scaled_incomplete_poisson", "generic"))
#: The registry's variant of each ``PREC`` value.
VARIANT_OF_CODE = {v.code: v for v in registry.FUSED_VARIANTS.values()}

#: Threads of the grid-stride reduction kernels.
THREADS = 256
#: The device scalars (:mod:`.protocol`'s indices).
NSCAL = 7


@cuda.kernel_cache
def module(prec_code: int, defines: str = ""):
    """The iteration's kernels (``fused.cu``, ``fused_update.cu``) compiled
    with ``defines`` and ``#define PREC prec_code`` (one compile per device:
    :mod:`bubbleflow.compute.cuda`)."""
    code = defines + f"#define PREC {prec_code}\n" + cuda.source(__name__, "fused.cu")
    return cuda.module(code, options=("-std=c++14",))


def kernel(name, prec_code=2, defines=""):
    """The kernel ``name`` of :func:`module` ``(prec_code, defines)``."""
    return module(prec_code, defines).get_function(name)


def reduction_blocks():
    """Blocks of the grid-stride reductions: 16 a multiprocessor."""
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return 16 * sms
