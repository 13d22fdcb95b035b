"""The level-set kernels against their array code: ms per call on the GPU.

    python3 scripts/levelset_kernels_timing.py [--grids 160x320,1024x2048,2048x4096]
                                               [--repeat N] [--iterations 4]

For each grid (nx x ny cells; three bubbles under a free surface, face
velocities of both signs) times ``advect``, ``reinitialize`` (``--iterations``
pseudo-time steps), ``curvature`` and ``bubble_sums``: the array code
on CuPy (``.reference``) and the CUDA variant (``flow.levelset_cuda``), each
call synchronised and timed on the host (``perf_counter``; the median of
``--repeat`` calls after two warm-up calls), so launch and transfer overheads
count.  Each is set beside its bandwidth floor: the bytes the call must move
once (its input fields read, its output written, a face field counted as a
cell field) over the copy bandwidth measured in the same run
(:func:`bubbleflow.apps.bench.measure.copy_bandwidth`).  ``diff`` is the
largest difference between the two, relative to the largest value.
"""
import argparse
import time

import numpy as np

from bubbleflow.apps.bench.measure import copy_bandwidth
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow.bubble_measures import bubble_sums
from bubbleflow.flow.levelset import advect, curvature, reinitialize

#: Fields each call must read and write once.
FIELDS = {"advect": 4,             # phi, u, v -> phi
          "reinitialize": 2,       # phi -> phi
          "curvature": 2,          # phi -> kappa
          "bubble_sums": 2}        # phi, v -> six sums


def fields(xp, nx, ny):
    """Three bubbles under a free surface on [0, 1] x [0, ny/nx], and face velocities."""
    h = 1.0 / nx
    x = (xp.arange(nx) + 0.5) * h
    y = (xp.arange(ny) + 0.5) * h
    X, Y = x[None, :], y[:, None]
    Ly = ny * h
    phi = 0.8 * Ly - Y + 0 * X
    for cx, cy, r in [(0.3, 0.3, 0.12), (0.7, 0.35, 0.1), (0.5, 0.6, 0.08)]:
        phi = xp.minimum(phi, xp.sqrt((X - cx) ** 2 + (Y - cy * Ly) ** 2) - r)
    xu = xp.arange(nx + 1) * h
    yv = xp.arange(ny + 1) * h
    u = xp.sin(2 * np.pi * xu[None, :] + 0.3) * xp.cos(2 * np.pi * y[:, None] / Ly + 1.0)
    v = -xp.cos(2 * np.pi * x[None, :] + 0.7) * xp.sin(2 * np.pi * yv[:, None] / Ly) + 0.1
    return phi, u, v, h


def wall_ms(backend, fn, repeat):
    for _ in range(2):
        fn()
    backend.synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        backend.synchronize()
        times.append(1e3 * (time.perf_counter() - t))
    return float(np.median(times))


def difference(backend, a, b):
    if isinstance(a, dict):
        return max((abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in b
                    if not (np.isnan(a[k]) and np.isnan(b[k]))), default=0.0)
    a, b = backend.to_host(a), backend.to_host(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def calls(phi, u, v, h, iterations):
    """``{name: (concept, args)}`` of the four operations."""
    return {"advect": (advect, (phi, (u, v), 0.3 * h, (h, h))),
            "reinitialize": (reinitialize, (phi, (h, h), iterations)),
            "curvature": (curvature, (phi, (h, h))),
            "bubble_sums": (bubble_sums, (phi, (u, v), (h, h), 1.5 * h))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", default="160x320,1024x2048,2048x4096")
    ap.add_argument("--repeat", type=int, default=0, help="calls timed (default: by grid size)")
    ap.add_argument("--iterations", type=int, default=4, help="reinitialisation iterations")
    args = ap.parse_args(argv)
    backend = get_backend("cupy")
    xp = backend.xp
    grids = [tuple(int(s) for s in g.split("x")) for g in args.grids.split(",")]
    nmax = max(nx * ny for nx, ny in grids)
    bandwidth, _ = copy_bandwidth(backend, 8 * nmax)
    print(f"device: {xp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; "
          f"copy bandwidth {bandwidth / 1e9:.0f} GB/s ({8 * nmax / 2 ** 20:.0f} MiB copied)")
    print(f"{'operation':20s} {'grid':>10s} {'array ms':>9s} {'cuda ms':>9s} {'ratio':>7s} "
          f"{'floor ms':>9s} {'cuda/floor':>10s} {'diff':>9s}")
    for nx, ny in grids:
        phi, u, v, h = fields(xp, nx, ny)
        repeat = args.repeat or (20 if nx * ny <= 2 ** 20 else 5)
        for name, (concept, cargs) in calls(phi, u, v, h, args.iterations).items():
            kernel = concept.variant("cupy")
            diff = difference(backend, kernel(*cargs), concept.reference(*cargs))
            ref_ms = wall_ms(backend, lambda: concept.reference(*cargs), repeat)
            cuda_ms = wall_ms(backend, lambda: kernel(*cargs), repeat)
            floor_ms = 1e3 * FIELDS[name] * 8 * nx * ny / bandwidth
            print(f"{name:20s} {f'{nx}x{ny}':>10s} {ref_ms:9.3f} {cuda_ms:9.3f} "
                  f"{ref_ms / cuda_ms:7.1f} {floor_ms:9.4f} {cuda_ms / floor_ms:10.1f} {diff:9.1e}",
                  flush=True)
        phi = u = v = None
        backend.release_memory()


if __name__ == "__main__":
    main()
