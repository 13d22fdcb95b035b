"""Host memory: freed arrays stay in the process (glibc's malloc).

glibc gives a block larger than its mmap threshold (128 KiB at start, raised
as such blocks are freed) a mapping of its own, unmapped when freed, and
returns the heap's free top to the system past its trim threshold.  A NumPy
time step allocates and frees arrays of a few hundred KiB by the hundred, so
every step took their pages afresh from the kernel: about 2,600 page faults
per step for Hysing at h = 1/80, which made advection and diagnostics inside
the step twice as slow as alone (docs/performance_records.md, "Host memory").
:func:`keep_freed_memory` raises both thresholds, once per process: freed
memory is reused, as CuPy's memory pool does on the GPU.

The applications (``bubbleflow run``, ``bench``, ``sweep``) call it at
start; a script using the Python API may call it too.  Settings the user
made through glibc's environment variables (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``) stand.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["keep_freed_memory", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

#: Blocks up to this size come from the heap (glibc's largest on 64 bits).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap's top kept up to this size.
TRIM_THRESHOLD = 512 << 20

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_DONE: list = []


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (:data:`MMAP_THRESHOLD`,
    :data:`TRIM_THRESHOLD`); True where they are set, False where this is
    not Linux with glibc or the user set them in the environment."""
    if _DONE:
        return _DONE[0]
    applied = False
    if sys.platform.startswith("linux") and not any(v in os.environ for v in _ENVIRONMENT):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):     # not glibc (musl has no mallopt)
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
                bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    _DONE.append(applied)
    return applied
