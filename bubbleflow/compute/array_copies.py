"""Several arrays copied at once: one launch for up to eight on a GPU.

A part of a step replayed from a CUDA graph (:mod:`.held_capture`) copies
its inputs into the graph's buffers and its results out of them, a dozen
arrays a replay; one launch a copy costs the host more than the copies
cost the device.  :func:`copy_arrays` is the array code (``dst[...] =
src`` each); its CUDA variant copies the contiguous pairs of one dtype
and shape eight to a launch (``array_copies.cu``), the others as the array
code does.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from . import cuda
from .twins import twin

__all__ = ["COPIES_A_LAUNCH", "copy_arrays"]

#: Arrays one launch copies (array_copies.cu).
COPIES_A_LAUNCH = 8
_THREADS = 256


# (Listed for the compile ahead: cuda.prefetch.)
_kernel = cuda.float64_kernels(__name__, "array_copies.cu")


@twin
def copy_arrays(dsts, srcs):
    """``dst[...] = src`` for each pair of the sequences ``dsts`` and
    ``srcs`` (arrays of one backend; ``dst`` of ``src``'s shape and
    dtype); returns ``dsts``."""
    for dst, src in zip(dsts, srcs):
        dst[...] = src
    return dsts


@copy_arrays.register("cupy")
def _copy_arrays_by_launches(dsts, srcs):
    import cupy as cp

    ndarray = cp.ndarray
    kernel = _kernel("bf_copy_arrays")
    args, count, most, rest = [None], 0, 0, []
    for dst, src in zip(dsts, srcs):
        nbytes = dst.nbytes if type(dst) is ndarray and type(src) is ndarray else 0
        if not (nbytes and (dst.dtype is src.dtype or dst.dtype == src.dtype)
                and dst.shape == src.shape and dst.flags.c_contiguous
                and src.flags.c_contiguous):
            rest.append((dst, src))
            continue
        args += (dst, src, _sizes.get(nbytes) or _size(nbytes))
        count += 1
        if nbytes > most:
            most = nbytes
        if count == COPIES_A_LAUNCH:
            _launch(kernel, args, count, most)
            args, count, most = [None], 0, 0
    if count:
        _launch(kernel, args, count, most)
    for dst, src in rest:
        dst[...] = src
    return dsts


def _launch(kernel, args, count, most):
    """One launch of ``bf_copy_arrays`` for the ``count`` pairs of ``args``
    (its first slot the count's), ``most`` bytes the largest."""
    args[0] = np.int32(count)
    # The unused slots repeat the first pair (blockIdx.y >= count returns):
    # arrays cost the launch less to pack than null pointers.
    args += args[1:4] * (COPIES_A_LAUNCH - count)
    words = -(-most // 8)
    blocks = max(1, min(-(-words // _THREADS), 1024))
    kernel((blocks, count), (_THREADS,), tuple(args))


# Sizes as the kernel's int64 arguments, made once each (a copy's sizes
# repeat from call to call; making the scalar costs more than finding it).
_sizes: dict = {}


def _size(nbytes):
    if len(_sizes) > 4096:
        _sizes.clear()
    value = _sizes[nbytes] = np.int64(nbytes)
    return value
