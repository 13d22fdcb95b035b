"""The multigrid cycle and solves on the GPU, piece by piece (CuPy only).

    python3 scripts/multigrid_profile.py [N]        # default N = 4096

On the bubbly column at N^2, contrast 1e3, a random zero-mean right-hand
side: a copy's bandwidth; for a float64 and a float32 cycle (V, and W on
three levels) one cycle (CUDA-event median), the finest level's down and
up kernels with their bandwidth at the modelled arrays, the PCG and DPCG
(level-set subdomains) solves (wall time, the best of three after two
warm-up solves) and the set-up of a new operator (``PressureSolver.update``).
"""
import os
import sys
import time

import numpy as np

try:
    import cupy as cp
except ImportError:                              # pragma: no cover
    sys.exit("multigrid_profile.py needs CuPy and a GPU")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.problem import bubbly_column  # noqa: E402
from bubbleflow.compute.backend import gpu_median_ms  # noqa: E402
from bubbleflow.linalg.precond.multigrid import (  # noqa: E402
    Multigrid, prolong_smooth, smooth_restrict)
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402


def wall_ms(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn()
        cp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best, out


def main(n):
    A, _, phi = bubbly_column(n, 1e3, backend="cupy")
    r = cp.asarray(np.random.default_rng(0).standard_normal(n * n))
    r -= r.mean()
    cells = n * n

    def rate(ms, arrays, item):
        return f"{ms:.3f} ms ({arrays * cells * item / ms / 1e6:.0f} GB/s at {arrays} arrays)"

    print("copy:", rate(gpu_median_ms(lambda: r.copy()), 2, 8))
    rows = []
    for precision, w in (("float64", 0), ("float32", 0), ("float32", 3), ("float64", 3)):
        M = Multigrid(A, cycle_precision=precision, w_levels=w)
        item = np.dtype(precision).itemsize
        print(f"{precision} cycle, w_levels {w}, {len(M.levels)} levels: "
              f"{gpu_median_ms(lambda: M.apply(r)):.3f} ms")
        if w == 0:
            lv = M.levels[0]
            b = r.reshape(n, n).astype(precision)
            x, bc = smooth_restrict(lv.couplings, lv.inv_diagonal, b, 2, 4.0)
            down = gpu_median_ms(lambda: smooth_restrict(lv.couplings, lv.inv_diagonal, b, 2, 4.0))
            up = gpu_median_ms(lambda: prolong_smooth(lv.couplings, lv.inv_diagonal, b, x, bc,
                                                      1.8, 2, 4.0))
            print("  down (finest):", rate(down, 4.25, item))
            print("  up (finest):", rate(up, 5.25, item))
        for method, deflation in (("pcg", "none"), ("dpcg", "levelset_subdomains")):
            s = PressureSolver(A, method=method, preconditioner="multigrid", deflation=deflation,
                               phi=phi, rtol=1e-8, preconditioner_options={
                                   "cycle_precision": precision, "w_levels": w})
            s.solve(r)
            s.solve(r)
            ms, (_, rec) = wall_ms(lambda: s.solve(r))
            update, _ = wall_ms(lambda: s.update(A, phi), repeat=1)
            rows.append((precision, w, method, rec.iterations, ms, update))
    print("\n| cycle | w_levels | method | its | solve ms | update ms |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| %s | %d | %s | %d | %.1f | %.1f |" % row)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
