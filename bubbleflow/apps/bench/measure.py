"""What the benchmark measures besides the solves: copy bandwidth (the floor), device and versions."""
from __future__ import annotations

import platform

import numpy as np

__all__ = ["copy_bandwidth", "device_info", "machine_lines", "release", "true_residual"]


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
