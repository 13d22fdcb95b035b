"""What the benchmark measures besides the solves: copy bandwidth (the floor), device and versions."""
from __future__ import annotations

import platform
import tracemalloc

import numpy as np

__all__ = ["copy_bandwidth", "device_info", "machine_lines", "release", "true_residual",
           "MemoryPeak", "memory_measure"]


def copy_bandwidth(backend, nbytes, repeat=20):
    """Copy bandwidth in bytes/s, counting bytes read plus written.

    Returns ``(best, {method: bandwidth})``.  On the GPU a device-to-device
    copy of ``nbytes`` is timed with CUDA events, both as an elementwise
    kernel (``b[...] = a``) and as ``cudaMemcpyAsync``; the best is the
    floor's bandwidth.  On the CPU ``numpy.copyto`` is timed
    (:meth:`~bubbleflow.compute.backend.Backend.copy_functions`).
    """
    xp = backend.xp
    n = max(1, int(nbytes) // 8)
    a = xp.random.random(n)                       # never time on zeros
    b = xp.empty_like(a)
    found = {}
    try:
        for name, fn in backend.copy_functions(b, a).items():
            try:
                found[name] = 2 * a.nbytes / (backend.median_ms(fn, repeat, warmup=3) / 1e3)
            except Exception:                 # pragma: no cover - old CuPy
                continue
    finally:
        a = b = None
        release(backend)
    return max(found.values()), found


def release(backend):
    """Free what Python no longer holds, and the memory pool's free blocks."""
    backend.release_memory()


def memory_measure(backend):
    """What :class:`MemoryPeak` measures on ``backend``, for the table's header."""
    if backend.pool_bytes() is not None:
        return "memory pool peak"
    return "tracemalloc peak"


class MemoryPeak:
    """The peak bytes allocated inside a ``with`` block, on the backend's device.

    Where the backend has a memory pool (CuPy), the pool's growth over the
    block: the caller releases its free blocks first, and a pool keeps what
    is freed inside the block, so its size at the end is the block's
    high-water mark (blocks rounded up as the pool allocates them).  Without
    one (NumPy), the peak of the allocations tracemalloc traces inside the
    block (NumPy reports its arrays' buffers to it).  Arrays allocated
    before the block (the inputs) are not counted.
    """

    def __init__(self, backend):
        self.backend = backend
        self.bytes = None
        self.measure = memory_measure(backend)

    def __enter__(self):
        self._base = self.backend.pool_bytes()
        self._pool = self._base is not None
        self._started = False
        if not self._pool:
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                self._started = True
            tracemalloc.reset_peak()
            self._base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        if self._pool:
            self.backend.synchronize()
            peak = self.backend.pool_bytes()
        else:
            peak = tracemalloc.get_traced_memory()[1]
            if self._started:
                tracemalloc.stop()
        self.bytes = max(0, int(peak) - int(self._base))
        return False


def true_residual(matvec, b, x, xp):
    """``||b - A (x - mean x)|| / ||b||`` (b is zero-mean)."""
    r = b - matvec(x - x.mean())
    return float(xp.linalg.norm(r)) / float(xp.linalg.norm(b))


def device_info(backend):
    """Lines for the header: device, memory, versions."""
    import scipy

    info = {"device": backend.device_name, "backend": backend.name}
    versions = [f"numpy {np.__version__}", f"scipy {scipy.__version__}",
                f"python {platform.python_version()}"]
    info["memory"] = backend.memory_text()
    versions = backend.versions() + versions
    try:
        import pyamg

        versions.append(f"pyamg {pyamg.__version__}")
    except Exception:
        pass
    from ...version import installed_version

    info["versions"] = f"bubbleflow {installed_version()}, " + ", ".join(versions)
    return info


def machine_lines(info, backend, mib, copy_bw, found, host_note=""):
    """The benchmarks' header lines on the machine: device, versions, and
    the copy bandwidth measured in this run (``found``: by method;
    ``host_note``: what follows it, e.g. the host's bandwidth)."""
    return [f"# device: {info['device']} ({backend.name}), {info['memory']}",
            f"# versions: {info['versions']}",
            f"# copy bandwidth (read + write, {mib} MiB): {copy_bw / 1e9:.0f} GB/s ("
            + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in found.items()) + ")" + host_note]
