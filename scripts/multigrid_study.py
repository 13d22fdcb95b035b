"""Iterations of CG with the multigrid preconditioner, by grid size, contrast and option.

    python3 scripts/multigrid_study.py [--sizes 128 256 512] [--contrasts 1 1e3 1e6]
        [--variants base degree3 scale1.5 ...] [--rhs random|gravity] [--rtol 1e-8]
        [--backend numpy|cupy]

The standard problem of ``bubbleflow bench`` (:func:`bubbleflow.case.problem.bubbly_column`:
water to 0.85, 3 x 3 bubbles, ``contrast`` = liquid / gas density).  Each
variant is the method (``pcg``: multigrid alone; ``dpcg``: with the level-set
subdomain deflation) and the multigrid options it changes from the defaults;
``--rhs random`` is a zero-mean random right-hand side (seed 0), ``gravity``
the column's.  Printed: iterations per size and contrast for each variant,
then the solve time of the largest size (wall seconds, this backend; the
second of two solves, the first compiles and pools).
"""
import argparse
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.problem import bubbly_column  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402

#: name -> (method, multigrid options)
VARIANTS = {
    "base": ("pcg", {}),                    # the defaults: float32 cycle, W levels auto
    "v_float64": ("pcg", {"cycle_precision": "float64", "w_levels": 0}),
    "deflated": ("dpcg", {}),
    "degree1": ("pcg", {"degree": 1}),
    "degree3": ("pcg", {"degree": 3}),
    "scale1": ("pcg", {"scale": 1.0}),
    "scale1.5": ("pcg", {"scale": 1.5}),
    "scale1.9": ("pcg", {"scale": 1.9}),
    "ratio3": ("pcg", {"ratio": 3.0}),
    "ratio8": ("pcg", {"ratio": 8.0}),
    "coarsest4096": ("pcg", {"coarsest": 4096}),
    "float32": ("pcg", {"cycle_precision": "float32", "w_levels": 0}),
    "w1": ("pcg", {"w_levels": 1, "cycle_precision": "float64"}),
    "w2": ("pcg", {"w_levels": 2, "cycle_precision": "float64"}),
    "w2_float32": ("pcg", {"w_levels": 2, "cycle_precision": "float32"}),
    "w3_float32": ("pcg", {"w_levels": 3, "cycle_precision": "float32"}),
    "deflated_float32": ("dpcg", {"cycle_precision": "float32", "w_levels": 0}),
}


def solve(n, contrast, variant, rhs, rtol, backend):
    A, b, phi = bubbly_column(n, contrast, backend=backend)
    if rhs == "random":
        r = np.random.default_rng(0).standard_normal(n * n)
        b = A.backend.xp.asarray(r - r.mean())
    method, options = VARIANTS[variant]
    solver = PressureSolver(A, method=method, preconditioner="multigrid",
                            deflation="levelset_subdomains" if method == "dpcg" else "none",
                            phi=phi, rtol=rtol, maxiter=500, preconditioner_options=options)
    solver.solve(b)                         # first solve: kernels compiled, memory pooled
    t0 = time.perf_counter()
    _, rec = solver.solve(b)
    return rec, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--contrasts", type=float, nargs="+", default=[1.0, 1e3, 1e6])
    ap.add_argument("--variants", nargs="+", default=["base", "deflated"], choices=sorted(VARIANTS))
    ap.add_argument("--rhs", choices=["random", "gravity"], default="random")
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--backend", default="numpy")
    args = ap.parse_args(argv)
    cols = [(n, c) for n in args.sizes for c in args.contrasts]
    print("| variant | " + " | ".join(f"{n}^2, {c:g}" for n, c in cols) + f" | s at {args.sizes[-1]}^2 |")
    print("|---" * (len(cols) + 2) + "|")
    for variant in args.variants:
        cells, seconds = [], []
        for n, c in cols:
            rec, s = solve(n, c, variant, args.rhs, args.rtol, args.backend)
            cells.append(f"{rec.iterations}" + ("" if rec.converged else f" ({rec.reason})"))
            if n == args.sizes[-1]:
                seconds.append(s)
        print(f"| {variant} | " + " | ".join(cells) + f" | {max(seconds):.2f} |", flush=True)


if __name__ == "__main__":
    main()
