"""When a GPU pressure solve does what: its host checks on a wall-clock line.

    python3 scripts/solve_timeline.py [N] [--contrast C] [--rtol R] [--check-every K ...]

On the bubbly column at N^2 (default 4096, contrast 1e3, rtol 1e-8) with the
default solver (``PressureSolver``: PCG with multigrid), for the gravity and a
random zero-mean right-hand side and each ``check_every``: the solve's wall
time (the third solve; the first two compile, capture and pool), its
iterations and true-residual checks, and at each host check the iteration,
the relative residual shown there and the milliseconds since the solve began
(from the ``progress`` hook, which adds no synchronisation).  Where the
no-op iterations after convergence and the restarts of a failed confirmation
cost time shows in the gaps between checks (docs/performance_records.md, under
``device_chunk``).
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import cupy as cp
except ImportError:                              # pragma: no cover
    sys.exit("solve_timeline.py needs CuPy and a GPU")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.problem import bubbly_column  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402


def timeline(solver, rhs):
    marks, start = [], []

    def progress(it, h):
        marks.append((it, h, 1e3 * (time.perf_counter() - start[0])))
    for _ in range(2):
        solver.solve(rhs)
    cp.cuda.Device().synchronize()
    start.append(time.perf_counter())
    _, rec = solver.solve(rhs, progress=progress)
    cp.cuda.Device().synchronize()
    return 1e3 * (time.perf_counter() - start[0]), rec, marks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=4096)
    ap.add_argument("--contrast", type=float, default=1e3)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--check-every", type=int, nargs="+", default=[10, 4])
    args = ap.parse_args()
    A, b, _ = bubbly_column(args.n, args.contrast, backend="cupy")
    r = np.random.default_rng(0).standard_normal(args.n * args.n)
    rhs = {"gravity": b, "random": cp.asarray(r - r.mean())}
    for name, v in rhs.items():
        for every in args.check_every:
            solver = PressureSolver(A, rtol=args.rtol, check_every=every)
            ms, rec, marks = timeline(solver, v)
            checks = ", ".join(f"{i}: {h:.2e}" for i, h in rec.true_residual_checks)
            print(f"{name} rhs, check_every {every}: {ms:.1f} ms, {rec.iterations} iterations "
                  f"({rec.reason}); true residual checks {checks}")
            print("   checks (iteration, residual, ms): "
                  + "  ".join(f"({i}, {h:.1e}, {t:.1f})" for i, h, t in marks))


if __name__ == "__main__":
    main()
