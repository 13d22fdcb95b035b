"""Array backends: NumPy (CPU) and CuPy (GPU), found by name in a registry.

Array code in bubbleflow is written once against ``backend.xp`` (the array
module) and ``backend.sparse`` (the matching ``scipy.sparse`` or
``cupyx.scipy.sparse``).  CuPy is imported lazily, inside its backend, so a
CPU-only machine never needs it.

Use :func:`get_backend` with ``"auto"``, ``"numpy"`` or ``"cupy"``.
"""
from __future__ import annotations

import functools
import platform

import numpy as np

__all__ = ["Backend", "BackendUnavailable", "get_backend", "backend_of", "BACKENDS"]


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine."""


class Backend:
    """One array backend.

    Attributes
    ----------
    name : str
        ``"numpy"`` or ``"cupy"``.
    xp : module
        The array module (``numpy`` or ``cupy``).
    sparse : module
        ``scipy.sparse`` or ``cupyx.scipy.sparse``.
    device_name : str
        Human-readable device (CPU model or GPU name).
    """

    name = "abstract"

    def asarray(self, a, dtype=None):
        return self.xp.asarray(a, dtype=dtype)

    def to_host(self, a):
        """Return ``a`` as a NumPy array (no copy on the NumPy backend)."""
        return np.asarray(a)

    def synchronize(self):
        """Wait for queued device work (no-op on the CPU)."""

    def is_native(self, a) -> bool:
        return isinstance(a, self.xp.ndarray)

    def __repr__(self):
        return f"<Backend {self.name}: {self.device_name}>"


class NumpyBackend(Backend):
    name = "numpy"

    def __init__(self):
        import scipy.sparse
        import scipy.sparse.linalg

        self.xp = np
        self.sparse = scipy.sparse
        self.sparse_linalg = scipy.sparse.linalg
        self.device_name = _cpu_name()


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self):
        try:
            import cupy
            import cupyx.scipy.sparse
            import cupyx.scipy.sparse.linalg
        except Exception as exc:  # ImportError, or a broken CUDA install
            raise BackendUnavailable(f"cupy cannot be imported ({type(exc).__name__}: {exc})") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no usable CUDA device ({type(exc).__name__}: {exc})") from None
        if count < 1:
            raise BackendUnavailable("no CUDA device found")
        self.xp = cupy
        self.sparse = cupyx.scipy.sparse
        self.sparse_linalg = cupyx.scipy.sparse.linalg
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)

    def to_host(self, a):
        if isinstance(a, self.xp.ndarray):
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def synchronize(self):
        self.xp.cuda.Stream.null.synchronize()
        self.xp.cuda.get_current_stream().synchronize()


BACKENDS = {"numpy": NumpyBackend, "cupy": CupyBackend}


@functools.lru_cache(maxsize=None)
def _make(name: str) -> Backend:
    return BACKENDS[name]()


def get_backend(name: str = "auto") -> Backend:
    """Return the backend called ``name``.

    ``"auto"`` gives CuPy when a GPU is usable and NumPy otherwise.  Asking for
    ``"cupy"`` on a machine without one raises :class:`BackendUnavailable`.
    """
    if isinstance(name, Backend):
        return name
    if name == "auto":
        try:
            return _make("cupy")
        except BackendUnavailable:
            return _make("numpy")
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; expected one of auto, {', '.join(BACKENDS)}")
    return _make(name)


def backend_of(*arrays) -> Backend:
    """The backend that owns ``arrays`` (CuPy if any of them is a CuPy array)."""
    for a in arrays:
        mod = type(a).__module__
        if mod.startswith("cupy") or mod.startswith("cupyx"):
            return _make("cupy")
    return _make("numpy")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def gpu_median_ms(fn, repeat=20, warmup=1):
    """Median device time of ``fn()`` in milliseconds, timed with CUDA events
    (each call on its own, after ``warmup`` untimed calls)."""
    import cupy

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))
