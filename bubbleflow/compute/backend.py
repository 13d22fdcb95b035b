"""Array backends: NumPy (CPU) and CuPy (GPU), found by name in a registry.

Array code in bubbleflow is written once against ``backend.xp`` (the array
module) and ``backend.sparse`` (the matching ``scipy.sparse`` or
``cupyx.scipy.sparse``).  CuPy is imported lazily, inside its backend, so a
CPU-only machine never needs it.

Use :func:`get_backend` with ``"auto"``, ``"numpy"`` or ``"cupy"``.
"""
from __future__ import annotations

import functools
import gc
import os
import platform
import threading
import time

import numpy as np

__all__ = ["Backend", "BackendUnavailable", "HostCopy", "get_backend", "backend_of",
           "array_module", "BACKENDS"]


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine."""


class HostCopy:
    """A copy of arrays to host memory, under way: :meth:`wait` gives the host arrays.

    Made by :meth:`Backend.to_host_async`.  :meth:`wait` may be called from
    any thread (a background writer waits for the copy, the time step does
    not); the copy keeps its buffers (pinned host memory and device staging
    arrays on CuPy), which a later :meth:`Backend.to_host_async` reuses when
    given this copy as ``reuse``.
    """

    def __init__(self, host, done=None, device=None, staging=()):
        self.host = list(host)
        self._done = done               # a CUDA event recorded after the copies, or None
        self._device = device
        self.staging = list(staging)

    def wait(self):
        """Block until the copy is complete; the host arrays (a list)."""
        if self._done is not None:
            import cupy

            with cupy.cuda.Device(self._device):
                self._done.synchronize()
        return self.host

    def fits(self, arrays):
        """Whether this copy's buffers have the shapes and dtypes of ``arrays``."""
        return len(arrays) == len(self.host) and all(
            h.shape == a.shape and h.dtype == a.dtype for h, a in zip(self.host, arrays))


class SideWork:
    """Work queued beside the current stream (:meth:`Backend.side_stream`).

    Inside the ``with`` block the backend's work is queued on a stream of its
    own, after what the current stream had queued when the block began; the
    host goes on at once.  :meth:`join` makes the current stream wait for
    the side work (the host does not wait); :attr:`seconds`, once the side
    work is done, is how long it took (on the device: from its start to its
    end on its stream).  On the CPU the block simply runs, and ``seconds`` is
    its wall time.
    """

    def __init__(self):
        self._t0 = self._seconds = None

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self._seconds = time.perf_counter() - self._t0
        return False

    def join(self):
        """The current stream waits for the side work (no host wait)."""

    @property
    def seconds(self):
        return self._seconds


class _CupySideWork(SideWork):
    def __init__(self, cp, stream):
        super().__init__()
        self._cp, self._stream = cp, stream
        self._start = self._done = None

    def __enter__(self):
        cp = self._cp
        ready = cp.cuda.Event(disable_timing=True)
        ready.record()                              # on the current stream
        self._stream.wait_event(ready)
        self._start = cp.cuda.Event()
        self._start.record(self._stream)
        self._stream.__enter__()
        return self

    def __exit__(self, *exc):
        self._stream.__exit__(*exc)
        self._done = self._cp.cuda.Event()
        self._done.record(self._stream)
        return False

    def join(self):
        self._cp.cuda.get_current_stream().wait_event(self._done)

    @property
    def seconds(self):
        """Device seconds of the side work (waits for its end; read once)."""
        if self._done is None:
            return None
        if self._seconds is None:
            self._done.synchronize()
            self._seconds = self._cp.cuda.get_elapsed_time(self._start, self._done) / 1e3
        return self._seconds


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

    def to_host_many(self, arrays):
        """``arrays`` (small arrays of this backend) as a list of host arrays,
        read with one wait for the device: the values the checks of a step
        read together.  NumPy: the arrays themselves."""
        return [np.asarray(a) for a in arrays]

    def host_blocks(self, a, rows):
        """``a`` (an array of this backend, or a host array) to the host in
        blocks of ``rows`` along its first axis: yields ``(start, block)``,
        ``block`` the host values of ``a[start:start + rows]``, read only
        until the next block is asked for (a writer streams a field to a
        file without a host copy of it all).  NumPy: views of ``a``."""
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] == 0:
            yield 0, a
            return
        for start in range(0, a.shape[0], max(int(rows), 1)):
            yield start, a[start:start + rows]

    def to_host_async(self, arrays, reuse=None):
        """Start copying ``arrays`` (of this backend, or host arrays) to host memory.

        Returns a :class:`HostCopy` whose ``wait()`` gives C-contiguous host
        copies of the same shapes and dtypes.  Once this returns the arrays
        may be changed or freed: the copy is of their values now.  NumPy: a
        plain copy, done here.  CuPy: a device-to-device copy into staging
        arrays, queued on the current stream (the step goes on at once), then
        an asynchronous device-to-host copy into pinned host memory on a
        stream of its own; ``wait()`` waits for that copy only.

        ``reuse``: an earlier copy, waited for and no longer read, whose
        buffers are reused when they fit (allocated once, then reused).
        """
        host = reuse.host if reuse is not None and reuse.fits(arrays) else \
            [np.empty(a.shape, a.dtype) for a in arrays]
        for h, a in zip(host, arrays):
            np.copyto(h, a)
        return HostCopy(host)

    def synchronize(self):
        """Wait for queued device work (no-op on the CPU)."""

    def side_stream(self):
        """A :class:`SideWork` context: the block's device work queued beside
        the current stream, so that it overlaps what the host queues next
        (CPU: the block runs)."""
        return SideWork()

    def is_native(self, a) -> bool:
        return isinstance(a, self.xp.ndarray)

    # ----------------------------------------------------- memory and clocks
    #: Where the arrays live, for messages ("the host", "the GPU").
    memory_place = "the host"
    #: Whether the arrays live in a device's memory, apart from the host's.
    on_device = False

    def available_memory(self):
        """``(free bytes or None, where)``: memory free now for this backend's arrays."""
        return host_available_memory(), self.memory_place

    def pool_bytes(self):
        """Bytes held by the array module's memory pool (None without a pool)."""
        return None

    def release_memory(self):
        """Free what Python no longer holds, and a memory pool's free blocks."""
        gc.collect()

    def clock(self):
        """``time.perf_counter()`` after the queued device work has finished."""
        self.synchronize()
        return time.perf_counter()

    def median_ms(self, fn, repeat=20, warmup=1):
        """Median time of ``fn()`` in milliseconds, each call timed on its own."""
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeat):
            t = self.clock()
            fn()
            times.append(1e3 * (self.clock() - t))
        return float(np.median(times))

    def copy_functions(self, dst, src):
        """``{method: fn}``: calls that copy ``src`` into ``dst`` (for a bandwidth measurement)."""
        return {"memcpy": lambda: np.copyto(dst, src)}

    def prepare_kernels(self, ndim):
        """Start compiling, in the background, the kernels that runs of
        ``ndim``-D grids use (nothing to compile on the host)."""

    def device_id(self):
        """Which device runs the arrays, whatever the numbering ("" on the host)."""
        return ""

    def visible_devices(self):
        """Ids of the devices this process may use (``CUDA_VISIBLE_DEVICES``); [] on the host."""
        return []

    def memory_text(self):
        """The memory of the machine the arrays live on, for a report header."""
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
            return f"{mem:.1f} GiB host memory, {os.cpu_count()} CPUs"
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            return f"{os.cpu_count()} CPUs"

    def versions(self):
        """Versions of the device software this backend runs on (a list of strings)."""
        return []

    def __repr__(self):
        return f"<Backend {self.name}: {self.device_name}>"


class NumpyBackend(Backend):
    name = "numpy"

    def __init__(self):
        self.xp = np
        self.device_name = _cpu_name()

    # (SciPy's sparse modules are imported at first use: a run that never
    # builds a sparse matrix starts without them.)
    @property
    def sparse(self):
        import scipy.sparse

        return scipy.sparse

    @property
    def sparse_linalg(self):
        import scipy.sparse.linalg

        return scipy.sparse.linalg


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self):
        try:
            use_precompiled_headers()
            import cupy
        except Exception as exc:  # ImportError, or a broken CUDA install
            raise BackendUnavailable(f"cupy cannot be imported ({type(exc).__name__}: {exc})") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no usable CUDA device ({type(exc).__name__}: {exc})") from None
        if count < 1:
            raise BackendUnavailable("no CUDA device found")
        self.xp = cupy
        self._reads = threading.local()           # (the reads' pinned buffers, by thread)
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)

    @property
    def sparse(self):
        import cupyx.scipy.sparse

        return cupyx.scipy.sparse

    @property
    def sparse_linalg(self):
        import cupyx.scipy.sparse.linalg

        return cupyx.scipy.sparse.linalg

    def to_host(self, a):
        if isinstance(a, self.xp.ndarray):
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def to_host_many(self, arrays):
        """See :meth:`Backend.to_host_many`: one asynchronous copy per array
        into one pinned host buffer on the current stream, then one wait
        (where packing them on the device first costs a kernel per array, an
        allocation and a copy)."""
        import ctypes

        cp = self.xp
        ndarray = cp.ndarray
        pieces, total = [], 0
        for a in arrays:
            if isinstance(a, ndarray):
                # (A 0-d array comes out of ascontiguousarray with one dimension.)
                shape = a.shape
                if not a.flags.c_contiguous:
                    a = cp.ascontiguousarray(a)
            else:
                a = np.asarray(a)
                shape = a.shape
            pieces.append((a, total, shape))
            total += -(-a.nbytes // 16) * 16
        buf = self._pinned(max(total, 16))
        address = buf.ctypes.data
        stream = cp.cuda.get_current_stream()
        for a, at, _ in pieces:
            if isinstance(a, ndarray):
                if a.nbytes:
                    a.data.copy_to_host_async(ctypes.c_void_p(address + at), a.nbytes, stream)
            else:
                buf[at: at + a.nbytes] = a.reshape(-1).view(np.uint8)
        stream.synchronize()
        return [buf[at: at + a.nbytes].view(a.dtype).reshape(shape).copy()
                for a, at, shape in pieces]

    def _pinned(self, nbytes):
        """A pinned host buffer of ``nbytes`` for :meth:`to_host_many`: one
        per thread, kept from read to read (its values are copied out before
        the next), grown when short."""
        import cupyx

        buf = getattr(self._reads, "buffer", None)
        if buf is None or buf.size < nbytes:
            buf = self._reads.buffer = cupyx.empty_pinned(max(nbytes, 4096), dtype=np.uint8)
        return buf[:nbytes]

    def host_blocks(self, a, rows):
        """See :meth:`Backend.host_blocks`: two pinned buffers of a block,
        filled in turn by asynchronous copies on a stream of their own (after
        the current stream's work), the next block's copy running while the
        caller writes this one; a large field never has a whole host copy,
        nor a pinned buffer of its size (whose allocation and release cost
        more than the copy)."""
        import ctypes

        import cupyx

        cp = self.xp
        if not isinstance(a, cp.ndarray):
            yield from Backend.host_blocks(self, a, rows)
            return
        if a.ndim == 0 or a.shape[0] == 0:
            yield 0, cp.asnumpy(a)
            return
        a = cp.ascontiguousarray(a)                     # (after: it gives a 0-d array an axis)
        n, rows = a.shape[0], max(int(rows), 1)
        starts = range(0, n, rows)
        buffers = [cupyx.empty_pinned((min(rows, n),) + a.shape[1:], a.dtype)
                   for _ in range(min(len(starts), 2))]
        stream = cp.cuda.Stream(non_blocking=True)
        ready = cp.cuda.Event(disable_timing=True)
        ready.record()                                  # on the current stream
        stream.wait_event(ready)
        copied = [None, None]

        def fetch(k):
            block = a[starts[k]:starts[k] + rows]
            buf = buffers[k % 2]
            block.data.copy_to_host_async(ctypes.c_void_p(buf.ctypes.data), block.nbytes,
                                          stream)
            copied[k % 2] = cp.cuda.Event(disable_timing=True)
            copied[k % 2].record(stream)

        fetch(0)
        for k, start in enumerate(starts):
            if k + 1 < len(starts):
                fetch(k + 1)            # into the buffer the caller is done with
            copied[k % 2].synchronize()
            yield start, buffers[k % 2][:min(rows, n - start)]

    def to_host_async(self, arrays, reuse=None):
        """See :meth:`Backend.to_host_async`: staging copies on the current stream,
        then pinned device-to-host copies on a stream of their own."""
        import ctypes

        import cupyx

        cp = self.xp
        on_device = [isinstance(a, cp.ndarray) for a in arrays]
        if reuse is not None and reuse.fits(arrays) and \
                [s is not None for s in reuse.staging] == on_device:
            host, staging = reuse.host, reuse.staging
        else:
            host = [cupyx.empty_pinned(a.shape, a.dtype) for a in arrays]
            staging = [cp.empty(a.shape, a.dtype) if dev else None
                       for a, dev in zip(arrays, on_device)]
        for h, s, a in zip(host, staging, arrays):
            if s is None:
                np.copyto(h, a)                      # a host array: copied now
            else:
                cp.copyto(s, a)                      # ordered after the step's kernels
        staged = cp.cuda.Event(disable_timing=True)
        staged.record(cp.cuda.get_current_stream())
        if getattr(self, "_copy_stream", None) is None:
            self._copy_stream = cp.cuda.Stream(non_blocking=True)
        stream = self._copy_stream
        stream.wait_event(staged)
        for h, s in zip(host, staging):
            if s is not None:
                s.data.copy_to_host_async(ctypes.c_void_p(h.ctypes.data), s.nbytes, stream)
        done = cp.cuda.Event(disable_timing=True)
        done.record(stream)
        return HostCopy(host, done=done, device=cp.cuda.Device().id, staging=staging)

    def synchronize(self):
        self.xp.cuda.Stream.null.synchronize()
        self.xp.cuda.get_current_stream().synchronize()
        side = getattr(self, "_side", {}).get(self.xp.cuda.Device().id)
        if side is not None:
            side.synchronize()

    def side_stream(self):
        """See :meth:`Backend.side_stream`: one non-blocking stream per device."""
        cp = self.xp
        streams = self.__dict__.setdefault("_side", {})
        device = cp.cuda.Device().id
        if device not in streams:
            streams[device] = cp.cuda.Stream(non_blocking=True)
        return _CupySideWork(cp, streams[device])

    memory_place = "the GPU"
    on_device = True

    def available_memory(self):
        """The GPU's free memory (``cudaMemGetInfo``) plus what CuPy's pool holds unused."""
        where = f"the GPU ({self.device_name})"
        try:
            free = int(self.xp.cuda.runtime.memGetInfo()[0])
            pool = self.xp.get_default_memory_pool()
            free += int(pool.total_bytes() - pool.used_bytes())
            return free, where
        except Exception:   # no query possible: do not refuse on a guess
            return None, where

    def pool_bytes(self):
        return int(self.xp.get_default_memory_pool().total_bytes())

    def release_memory(self):
        gc.collect()
        self.synchronize()
        self.xp.get_default_memory_pool().free_all_blocks()

    def median_ms(self, fn, repeat=20, warmup=1):
        """Median device time of ``fn()`` in milliseconds (CUDA events, see :func:`gpu_median_ms`)."""
        return gpu_median_ms(fn, repeat, warmup)

    def copy_functions(self, dst, src):
        """An elementwise kernel (``dst[...] = src``) and ``cudaMemcpyAsync``."""
        def kernel():
            dst[...] = src

        def memcpy():
            dst.data.copy_from_device_async(src.data, src.nbytes)

        return {"kernel": kernel, "memcpy": memcpy}

    def prepare_kernels(self, ndim):
        from . import cuda

        cuda.prefetch(ndim)

    def device_id(self):
        """The PCI bus id of the current GPU (``CUDA_VISIBLE_DEVICES`` if it cannot be read)."""
        try:
            return str(self.xp.cuda.Device().pci_bus_id)
        except Exception:   # noqa: BLE001 - informative only
            return str(os.environ.get("CUDA_VISIBLE_DEVICES", ""))

    def visible_devices(self):
        n = int(self.xp.cuda.runtime.getDeviceCount())
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [s.strip() for s in env.split(",") if s.strip()] if env else [str(i) for i in range(n)]
        return ids[:n]

    def memory_text(self):
        rt = self.xp.cuda.runtime
        try:
            total = rt.getDeviceProperties(self.xp.cuda.Device().id)["totalGlobalMem"]
        except Exception:                          # pragma: no cover
            total = rt.memGetInfo()[1]
        return f"{total / 2 ** 30:.1f} GiB GPU memory"

    def versions(self):
        rt = self.xp.cuda.runtime

        def cuda(v):
            return f"{v // 1000}.{(v % 1000) // 10}"

        try:
            cudav = (f"CUDA runtime {cuda(rt.runtimeGetVersion())}, "
                     f"driver {cuda(rt.driverGetVersion())}")
        except Exception:                          # pragma: no cover
            cudav = "CUDA ?"
        return [cudav, f"cupy {self.xp.__version__}"]


BACKENDS = {"numpy": NumpyBackend, "cupy": CupyBackend}


@functools.lru_cache(maxsize=None)
def _make(name: str) -> Backend:
    return BACKENDS[name]()


def use_precompiled_headers() -> bool:
    """Let NVRTC reuse the headers it parsed for an earlier kernel
    (``CUPY_NVRTC_USE_PCH=1``) unless the user has set the variable; True where
    it is on.

    Most of a first run's compilation on a machine is CuPy's small kernels,
    each parsing the same headers again (docs/performance.md).  CuPy reads the
    variable once, when ``cupy`` is imported, and passes ``--pch`` only to an
    NVRTC that has it (12.8 and later; ``cupy/cuda/compiler.py``), so this
    runs before the import.
    """
    return os.environ.setdefault("CUPY_NVRTC_USE_PCH", "1") == "1"


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


def array_module(*arrays):
    """The array module (``numpy`` or ``cupy``) of the backend that owns ``arrays``."""
    return backend_of(*arrays).xp


def host_available_memory():
    """Bytes of host memory available now (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


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
