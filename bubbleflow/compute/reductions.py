"""Inner products and norms of the Krylov iteration, one implementation per backend.

:func:`reductions` looks the pair up by backend name and vector dtype
(:data:`DOTS`), so the solvers never ask which backend they run on.

* float64 on NumPy: ``einsum``'s single-threaded loop.  A threaded BLAS
  ``dot`` wakes sleeping threads for every call and can cost milliseconds per
  reduction on a loaded machine (docs/performance_records.md); ``einsum`` costs
  microseconds.
* float64 on CuPy: two launches (``dot64.cu``: per-block sums, then one
  block adds them, in a fixed order), where ``cupy.dot`` goes through a
  matrix product and costs the host several times more; ``cupy.dot`` for
  vectors of another layout.
* float32, either backend: the products are accumulated in float64 (the
  result is a float64 scalar): a float32 sum of a million terms loses about
  1e-7 relative, which the CG scalars feel; the vectors are still read once,
  as float32.  NumPy: float32 partial sums over blocks of :data:`BLOCK`
  terms (one ``einsum`` pass), added up in float64 (``einsum`` with
  ``dtype=float64`` casts every term and costs two to four times more).
  CuPy: one reduction kernel that reads float32 and adds in double.

>>> import numpy as np
>>> from bubbleflow.compute.backend import get_backend
>>> dot, norm = reductions(get_backend("numpy"))
>>> float(dot(np.ones(4), np.arange(4.0))), float(norm(np.array([3.0, 4.0])))
(6.0, 5.0)
"""
from __future__ import annotations

import functools

import numpy as np

from . import cuda

__all__ = ["reductions", "summed_dots", "several_norms", "DOTS", "NORM", "NORMS", "BLOCK"]

BLOCK = 256          # float32 terms summed before the float64 accumulation (NumPy)
_THREADS = 256


def _numpy_dot64(backend):
    def dot(a, b):
        return np.einsum("i,i->", a, b)
    return dot


_dot64_kernel = cuda.float64_kernels(__name__, "dot64.cu")


def _cupy_dot64(backend):
    import cupy as cp

    def dot(a, b):
        if not (a.dtype == b.dtype == np.float64 and a.size == b.size and a.flags.c_contiguous
                and b.flags.c_contiguous):
            return cp.dot(a, b)
        blocks = cuda.reduce_blocks(a.size, _THREADS)
        partial, out = cp.empty(blocks, dtype=np.float64), cp.empty((), dtype=np.float64)
        _dot64_kernel("bf_dot64_partial")((blocks,), (_THREADS,),
                                          (a, b, np.int64(a.size), partial))
        _dot64_kernel("bf_dot64_final")((1,), (_THREADS,), (partial, np.int32(blocks), out))
        return out
    return dot


def _numpy_dot32(backend):
    def dot(a, b):
        m = a.size - a.size % BLOCK
        s = np.einsum("ij,ij->i", a[:m].reshape(-1, BLOCK), b[:m].reshape(-1, BLOCK))
        total = np.add.reduce(s, dtype=np.float64)
        if m < a.size:
            total = total + np.einsum("i,i->", a[m:], b[m:], dtype=np.float64)
        return np.float64(total)
    return dot


@functools.lru_cache(maxsize=None)
def _cupy_dot32_kernel():
    import cupy

    # (CuPy names the reduction's operands a and b: the inputs are u, v.)
    return cupy.ReductionKernel("float32 u, float32 v", "float64 s",
                                "(double)u * (double)v", "a + b", "s = a", "0.0",
                                "bubbleflow_dot32_acc64")


def _cupy_dot32(backend):
    kernel = _cupy_dot32_kernel()

    def dot(a, b):
        return kernel(a, b)
    return dot


#: ``(backend name, vector dtype name) -> factory(backend) -> dot``.
DOTS = {
    ("numpy", "float64"): _numpy_dot64,
    ("cupy", "float64"): _cupy_dot64,
    ("numpy", "float32"): _numpy_dot32,
    ("cupy", "float32"): _cupy_dot32,
}


def _numpy_squares64(backend):
    def squares(vectors, roots):
        read, rows = _distinct(vectors)
        sums = np.array([np.einsum("i,i->", v, v) for v in read], dtype=np.float64)[rows]
        return np.sqrt(sums) if roots else sums
    return squares


#: Vectors one launch of ``bf_norms64_partial`` reads.
NORMS_A_LAUNCH = 4


def _cupy_squares64(backend):
    import cupy as cp

    dot = _cupy_dot64(backend)

    def squares(vectors, roots):
        first = vectors[0]
        if not (len(vectors) <= NORMS_A_LAUNCH and all(
                v.dtype == np.float64 and v.size == first.size and v.flags.c_contiguous
                for v in vectors)):
            sums = cp.stack([dot(v, v) for v in vectors])
            return cp.sqrt(sums) if roots else sums
        read, rows = _distinct(vectors)
        blocks = cuda.reduce_blocks(first.size, _THREADS)
        partial = cp.empty(len(read) * blocks, dtype=np.float64)
        out = cp.empty(len(vectors), np.float64)
        padded = tuple(read) + (first,) * (NORMS_A_LAUNCH - len(read))
        _dot64_kernel("bf_norms64_partial")((blocks, len(read)), (_THREADS,),
                                            padded + (np.int64(first.size), partial))
        _dot64_kernel("bf_norms64_final")((1,), (_THREADS,), (
            partial, np.int32(blocks), np.int32(len(vectors)), np.int32(bool(roots)),
            np.int32(sum(row << (2 * k) for k, row in enumerate(rows))), out))
        return out
    return squares


def _distinct(vectors):
    """``(read, rows)``: the vectors, each array once (a solve's first
    residual is often ``b`` itself), and the place in ``read`` of each."""
    read, rows = [], []
    for v in vectors:
        row = next((k for k, seen in enumerate(read) if seen is v), None)
        if row is None:
            row = len(read)
            read.append(v)
        rows.append(row)
    return read, rows


def _float32_squares(backend):
    dot = DOTS[backend.name, "float32"](backend)
    xp = backend.xp

    def squares(vectors, roots):
        sums = xp.stack([xp.asarray(dot(v, v), dtype=xp.float64) for v in vectors])
        return xp.sqrt(sums) if roots else sums
    return squares


#: ``(backend name, vector dtype name) -> factory(backend) -> squares``:
#: ``squares(vectors, roots)``, the vectors' sums of squares (their norms
#: where ``roots``) as one float64 array, each the bits of ``dot(v, v)``.
NORMS = {
    ("numpy", "float64"): _numpy_squares64,
    ("cupy", "float64"): _cupy_squares64,
    ("numpy", "float32"): _float32_squares,
    ("cupy", "float32"): _float32_squares,
}


def _cupy_norm64(backend):
    squares = _cupy_squares64(backend)

    def norm(a):
        return squares((a,), True).reshape(())
    return norm


#: ``(backend name, vector dtype name) -> factory(backend) -> norm`` where
#: the norm is not ``sqrt(dot(a, a))`` as two calls (the same bits).
NORM = {("cupy", "float64"): _cupy_norm64}


def several_norms(backend, dtype=np.float64, comm=None):
    """``norms(*vectors)``: the norms of vectors of ``dtype`` and one length
    on ``backend`` as one float64 array, each the bits :func:`reductions`'
    ``norm`` gives, in one reduction (on CuPy in float64, four vectors or
    fewer: two launches where each norm takes three); on a rank's parts
    (``comm``) the sums of squares added over the ranks in one all-reduce."""
    kind = "float32" if np.dtype(dtype) == np.float32 else "float64"
    squares = NORMS[backend.name, kind](backend)
    xp = backend.xp
    if comm is None:
        return lambda *vectors: squares(vectors, True)

    def norms(*vectors):
        return xp.sqrt(xp.asarray(comm.allreduce_sum(squares(vectors, False))))
    return norms


def reductions(backend, dtype=np.float64, comm=None):
    """``(dot, norm)`` for vectors of ``dtype`` on ``backend``: ``dot(a, b)``
    and ``norm(a) = sqrt(dot(a, a))`` as 0-d arrays (no host synchronisation).
    Every dtype but float32 reduces as float64.  ``comm``: the vectors are
    a rank's part of distributed ones: each rank's sum in a fixed order,
    then the sum over the ranks (:mod:`.comm`)."""
    kind = "float32" if np.dtype(dtype) == np.float32 else "float64"
    dot = DOTS[backend.name, kind](backend)
    xp = backend.xp
    if comm is not None:
        local_dot = dot

        def dot(a, b):
            return xp.asarray(comm.allreduce_sum(local_dot(a, b)))

    own_norm = NORM.get((backend.name, kind)) if comm is None else None
    if own_norm is not None:
        return dot, own_norm(backend)

    def norm(a):
        return xp.sqrt(dot(a, a))

    return dot, norm


def summed_dots(backend, dtype=np.float64, comm=None):
    """``dots(*pairs)``: the inner products of several vector pairs, each
    the value :func:`reductions`' ``dot`` gives (bit for bit), as a tuple;
    on a rank's parts (``comm``) summed over the ranks in one all-reduce of
    them all, where ``dot`` makes one a pair."""
    kind = "float32" if np.dtype(dtype) == np.float32 else "float64"
    dot = DOTS[backend.name, kind](backend)
    xp = backend.xp

    def dots(*pairs):
        own = xp.stack([xp.asarray(dot(a, b), dtype=xp.float64) for a, b in pairs])
        summed = own if comm is None else xp.asarray(comm.allreduce_sum(own))
        return tuple(summed[i] for i in range(len(pairs)))

    return dots
