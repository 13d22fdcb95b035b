"""Where one fused DPCG iteration spends its time, kernel by kernel (GPU).

    python3 scripts/profile_fused.py --sizes 1024 4096 --contrast 1e3

For each size and preconditioner: the standard bubbly column, level-set
deflation on ``--cells-per-subdomain`` blocks, a solve with the fused engine
(iterations, true residual), then each stage of the iteration timed on its
own with CUDA events (median of ``--repeat``), the whole iteration, our byte
count and the floor from the copy bandwidth measured in the same run.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--contrast", type=float, default=1e3)
    ap.add_argument("--preconditioners", nargs="+",
                    default=["jacobi", "incomplete_poisson_scaled", "block_ic"])
    ap.add_argument("--cells-per-subdomain", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--no-deflation", action="store_true")
    args = ap.parse_args(argv)

    import cupy as cp

    from bubbleflow import bubbly_column, cg, dpcg, get_backend, make_deflation
    from bubbleflow.apps.bench import copy_bandwidth
    from bubbleflow.linalg.fused.engine import fused_engine_for
    from bubbleflow.linalg.precond import make_preconditioner

    bw, _ = copy_bandwidth(get_backend("cupy"), 1 << 30)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, copy {bw / 1e12:.2f} TB/s",
          flush=True)
    rows = []
    for n in args.sizes:
        A, b, phi = bubbly_column(n, args.contrast, backend="cupy")
        m = args.cells_per_subdomain
        defl = None
        if not args.no_deflation:
            defl = make_deflation("levelset_subdomains", A, phi=phi, subdomains=(n // m, n // m))
            if getattr(defl, "block_shape", None) is None:
                defl.block_shape = (m, m)
        for prec in args.preconditioners:
            M = make_preconditioner(prec, A)
            rtol = 1e-8 if args.contrast < 1e5 else 1e-6
            if defl is None:
                x, rec = cg(A, b, rtol=rtol, M=M, maxiter=50000)
            else:
                x, rec = dpcg(A, b, rtol=rtol, M=M, deflation=defl, maxiter=5000)
            eng = fused_engine_for(A, M, prec, defl, "adef2", b)
            rng = np.random.default_rng(0)
            r = cp.asarray(rng.standard_normal(b.size))
            eng.load(cp.asarray(rng.standard_normal(b.size)), r, M.apply(r), cp.asarray(1.0),
                     cp.asarray(False), cp.zeros(4 * args.repeat + 16), 0, 1.0)
            prof = eng.profile(args.repeat)
            floor = eng.bytes_per_iteration / bw * 1e3
            print(f"n={n} {prec}: {rec.summary()} engine={rec.engine}", flush=True)
            print("   " + "  ".join(f"{k} {v:.4f}" for k, v in prof.items()), flush=True)
            rows.append((n, prec, rec.iterations, rec.residual, prof["iteration"], floor,
                         eng.bytes_per_iteration / (8 * n * n), prof))
    print()
    print(f"{'n':>5} {'preconditioner':<26} {'its':>5} {'true res':>9} {'ms/it':>7} "
          f"{'floor':>7} {'ratio':>6} {'arrays':>6}  per stage (ms)")
    for n, prec, its, res, ms, floor, arrays, prof in rows:
        stages = " ".join(f"{k}={v:.3f}" for k, v in prof.items() if k != "iteration")
        print(f"{n:>5} {prec:<26} {its:>5} {res:>9.2e} {ms:>7.3f} {floor:>7.3f} "
              f"{ms / floor:>6.2f} {arrays:>6.1f}  {stages}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
