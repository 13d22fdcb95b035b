"""Small tables a kernel reads (pointers and scalars of several systems),
placed on the device by launches.

A CUDA graph holds a launch with its arguments, but a copy from the host
only as a read of host memory at each replay, from a buffer that must
outlive the graph and whose content CuPy's staging would reuse.  A table
written by launches (:func:`device_table`: sixteen 8-byte words a launch,
the words the launch's arguments) can be captured beside the kernels that
read it, and written again in stream order after them.  The reference is a
plain copy from the host.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from . import cuda
from .backend import backend_of
from .twins import twin

__all__ = ["WORDS_A_LAUNCH", "device_table"]

#: 8-byte words one launch writes (its arguments; launch_tables.cu).
WORDS_A_LAUNCH = 16


# (Listed for the compile ahead: cuda.prefetch.)
_kernel = cuda.float64_kernels(__name__, "launch_tables.cu")


def _words(table):
    """The bytes of the NumPy array ``table`` as 8-byte words (the last one
    padded with zeros)."""
    raw = np.ascontiguousarray(table).reshape(-1).view(np.uint8)
    words = np.zeros(-(-raw.size // 8), dtype=np.uint64)
    words.view(np.uint8)[:raw.size] = raw
    return words


@twin
def device_table(table, like, out=None):
    """The bytes of the NumPy array ``table`` (a structured row per system)
    as a flat uint8 array of ``like``'s backend, padded with zeros to whole
    8-byte words: written into ``out`` where given (an earlier table of
    the same size), else a new array."""
    words = backend_of(like).xp.asarray(_words(table).view(np.uint8))
    if out is None:
        return words
    out[...] = words
    return out


@device_table.register("cupy")
def _device_table_by_launches(table, like, out=None):
    import cupy as cp

    words = _words(table)
    if out is not None and (out.dtype != np.uint8 or out.size != 8 * words.size
                            or not out.flags.c_contiguous):
        return NotImplemented
    out = cp.empty(words.size, dtype=np.uint64) if out is None else out.view(np.uint64)
    kernel = _kernel("bf_write_words")
    for start in range(0, words.size, WORDS_A_LAUNCH):
        chunk = [np.uint64(w) for w in words[start:start + WORDS_A_LAUNCH]]
        n = len(chunk)
        chunk += [np.uint64(0)] * (WORDS_A_LAUNCH - n)
        kernel((1,), (WORDS_A_LAUNCH,), (out[start:], np.int32(n), *chunk))
    return out.view(np.uint8)
