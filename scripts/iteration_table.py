"""Iteration counts: method x preconditioner x deflation x density contrast.

The bubbly column (``bubbleflow.bubbly_column``), gravity right-hand side,
rtol 1e-8 (1e-6 at contrast 1e6, as in the benchmark notes), 16 x 16 blocks
or 16 stripes.  Prints a table (iterations, and the reason when a solve did
not converge) and writes it as CSV.

    python3 scripts/iteration_table.py --sizes 128 256 [--backend numpy|cupy] [--csv FILE]
"""
from __future__ import annotations

import argparse
import csv
import sys
import time

from bubbleflow import PressureSolver, bubbly_column, get_backend

CONTRASTS = (1.0, 1e3, 1e6)
CONFIGS = (
    [("cg", "none", "none", "")]
    + [("pcg", p, "none", "") for p in ("jacobi", "block_ic", "incomplete_poisson",
                                        "incomplete_poisson_scaled")]
    + [("dpcg", p, d, v)
       for d in ("subdomains", "stripes", "levelset_subdomains")
       for p in ("jacobi", "block_ic", "incomplete_poisson", "incomplete_poisson_scaled")
       for v in ("adef2", "def1")]
)


def run(sizes, backend, maxiter, csv_path, variants, check_every=1):
    rows = []
    for n in sizes:
        problems = {c: bubbly_column(n, c, backend=backend) for c in CONTRASTS}
        for method, pre, defl, variant in CONFIGS:
            if variant and variant not in variants:
                continue
            row = {"n": n, "method": method, "preconditioner": pre, "deflation": defl,
                   "variant": variant}
            for c in CONTRASTS:
                A, b, phi = problems[c]
                rtol = 1e-6 if c >= 1e6 else 1e-8
                s = PressureSolver(A, method=method, preconditioner=pre, deflation=defl, phi=phi,
                                   subdomains=(16, 16), stripes=16, variant=variant or "adef2",
                                   rtol=rtol, maxiter=maxiter, check_every=check_every)
                t = time.perf_counter()
                x, rec = s.solve(b)
                key = f"{c:g}"
                row[f"it_{key}"] = rec.iterations
                row[f"reason_{key}"] = rec.reason
                row[f"res_{key}"] = f"{rec.residual:.2e}"
                row[f"sec_{key}"] = f"{time.perf_counter() - t:.3f}"
            rows.append(row)
            cells = []
            for c in CONTRASTS:
                key = f"{c:g}"
                mark = "" if row[f"reason_{key}"] == "converged" else f" ({row[f'reason_{key}']})"
                cells.append(f"{row[f'it_{key}']}{mark}")
            print(f"{n:5d} {method:5s} {pre:26s} {defl:20s} {variant:6s} " + " ".join(f"{c:>16s}" for c in cells),
                  flush=True)
    if csv_path:
        with open(csv_path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--maxiter", type=int, default=40000)
    ap.add_argument("--variants", nargs="+", default=["adef2", "def1"])
    ap.add_argument("--csv", default=None)
    ap.add_argument("--check-every", type=int, default=1,
                    help="iterations between convergence checks (1 gives exact counts)")
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    print(f"# backend {backend.name} on {backend.device_name}; rtol 1e-8 (1e-6 at contrast 1e6)")
    print(f"{'n':>5s} {'meth':5s} {'preconditioner':26s} {'deflation':20s} {'var':6s} "
          + " ".join(f"{'contrast ' + format(c, 'g'):>16s}" for c in CONTRASTS))
    run(args.sizes, backend, args.maxiter, args.csv, args.variants, args.check_every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
