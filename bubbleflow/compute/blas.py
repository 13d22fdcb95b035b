"""The CPU BLAS's threads: one thread for small dense work.

NumPy and SciPy ship OpenBLAS, which splits a factorisation of a few hundred
unknowns over every core.  On a small machine that is busy with the rest of
the step (two cores: the flow's array work, a snapshot being written) the
threads wait for each other, and a small factorisation inside a flow step
took a hundred times what it takes alone, its threads then slowing the
phases after it (docs/performance_records.md, the flow step on the 2-core CPU).
:func:`single_threaded` runs a block on one BLAS thread and restores the
count afterwards.  Ranks of one run share the machine's cores
(:func:`share_cores`, said by their communicator): then every such block
runs on one thread, whatever its size.

The OpenBLAS libraries are found among the loaded shared objects (Linux
``/proc/self/maps``) by their thread-count functions (plain OpenBLAS and the
``scipy_openblas`` builds of NumPy and SciPy wheels).  Where none is found
(another BLAS, another system) the block runs unchanged.
"""
from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

__all__ = ["single_threaded", "share_cores", "SMALL_DENSE"]

#: Dense problems up to this order run on one BLAS thread (order^3 / 3
#: flops: well under a second on one core).
SMALL_DENSE = 1024

_NAMES = (("openblas_get_num_threads", "openblas_set_num_threads"),
          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
          ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
          ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"))
_HANDLES: dict = {}           # library path -> (get, set) or None
_CACHE: dict = {}             # the last scan, and len(sys.modules) when it was made
_LOCK = threading.Lock()
#: Whether this process is one of several ranks sharing the cores.
_SHARED = {"cores": False}


def share_cores(shared=True):
    """Say that this process is one of several ranks on the machine's
    cores: :func:`single_threaded` blocks then take one BLAS thread at any
    order (each rank's threads would wait for the others')."""
    _SHARED["cores"] = bool(shared)


def _loaded_openblas():
    """The paths of the loaded shared objects whose name says OpenBLAS."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ()
    paths = {line.split(None, 5)[-1] for line in lines if "openblas" in line.lower()}
    return sorted(p for p in paths if p.startswith("/"))


def _controls():
    """``[(get, set)]`` thread-count functions of the loaded OpenBLAS libraries.

    Scanning the process's mappings costs about as much as a small
    factorisation, so the answer is kept until a module is imported (new
    shared libraries come with imports: SciPy's OpenBLAS with scipy.linalg)."""
    key = len(sys.modules)
    if _CACHE.get("key") != key:
        _CACHE.update(key=key, controls=_scan())
    return _CACHE["controls"]


def _scan():
    out = []
    for path in _loaded_openblas():
        if path not in _HANDLES:
            handle = None
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                lib = None
            for get, put in _NAMES if lib is not None else ():
                g, s = getattr(lib, get, None), getattr(lib, put, None)
                if g is not None and s is not None:
                    g.restype, s.argtypes = ctypes.c_int, [ctypes.c_int]
                    handle = (g, s)
                    break
            _HANDLES[path] = handle
        if _HANDLES[path] is not None:
            out.append(_HANDLES[path])
    return out


@contextlib.contextmanager
def single_threaded(order=0):
    """Run the block with the CPU BLAS on one thread when ``order`` (the
    dense problem's size) is at most :data:`SMALL_DENSE`, or at any order
    on ranks that share the cores (:func:`share_cores`); larger problems of
    one process keep every thread.

    >>> import numpy as np
    >>> with single_threaded(3):
    ...     float(np.linalg.cholesky(4.0 * np.eye(3))[0, 0])
    2.0
    """
    if order > SMALL_DENSE and not _SHARED["cores"]:
        yield
        return
    with _LOCK:
        controls = _controls()
        before = [get() for get, _ in controls]
        for _, put in controls:
            put(1)
    try:
        yield
    finally:
        with _LOCK:
            for (_, put), n in zip(controls, before):
                put(n)
