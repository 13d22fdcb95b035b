"""Pressure-solve benchmark: ours against the peer a user would pick, side by side.

The standard problem (bubbly column, gravity right-hand side; see
``bubbleflow.bubbly_column``) at each size and contrast, solved on the same
matrix, right-hand side and tolerance by

* our configurations (``PressureSolver``: DPCG A-DEF2 with level-set
  deflation and a preconditioner, by default),
* the peer: CuPy's ``cupyx.scipy.sparse.linalg.cg`` with a Jacobi
  ``LinearOperator`` on a cuSPARSE CSR matrix (GPU), or SciPy's ``cg`` with
  Jacobi (CPU),

and the floor: the bytes one of our iterations must move (our own count,
each array read once and written once, 8 bytes per float64; see
``bytes_per_iteration``) over the copy bandwidth measured in the same run.

    python3 scripts/bench_solver.py --sizes 1024 2048 --contrasts 1e3 [--backend cupy] [--csv FILE]

Columns: iterations, ms per iteration, time to solution, final true
relative residual, bytes per iteration, achieved GB/s, floor ms per
iteration, ratio to floor, speedup over the peer, setup ms, peak GPU memory.
"""
from __future__ import annotations

import argparse
import csv
import platform
import sys
import time

import numpy as np

from bubbleflow import PressureSolver, bubbly_column, get_backend

# Arrays (of N float64) one iteration touches, by piece: our own count.
# matvec with five stored diagonals: 5 coefficients + x read, y written.
_MATVEC = {"diagonals": 7, "matrix_free": 5}
# preconditioner application (reads of coefficients and input, writes of output)
_PRECOND = {"none": 0, "jacobi": 3, "incomplete_poisson": 12, "incomplete_poisson_scaled": 13,
            "block_ic": 14}
# CG vector work: 3 dots (6 reads), x and r updates (6), p update (3)
_VECTORS = 15
# A-DEF2 coarse correction: Z^T r (1 read + labels), (AZ)^T s (about 5 entries per
# row: values and column indices, ~7.5 arrays), prolongation (labels + write), add (3)
_DEFLATION = 14


def bytes_per_iteration(n_cells, preconditioner, deflation, storage="diagonals"):
    arrays = _MATVEC[storage] + _PRECOND[preconditioner] + _VECTORS
    if deflation != "none":
        arrays += _DEFLATION
    return 8 * n_cells * arrays


def copy_bandwidth(backend, nbytes=512 * 2 ** 20, repeat=20):
    """Device copy bandwidth in bytes/s, counting bytes read plus written."""
    xp = backend.xp
    a = xp.random.random(nbytes // 8)
    b = xp.empty_like(a)
    times = []
    for i in range(repeat + 3):
        backend.synchronize()
        t = time.perf_counter()
        b[...] = a
        backend.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t)
    return 2 * nbytes / float(np.median(times))


def peak_memory(backend):
    if backend.name != "cupy":
        return float("nan")
    pool = backend.xp.get_default_memory_pool()
    return pool.total_bytes() / 2 ** 30


def true_residual(A, b, x, backend):
    xp = backend.xp
    bc = b - b.mean()
    r = bc - A.matvec(x - x.mean())
    return float(xp.linalg.norm(r) / xp.linalg.norm(bc))


def run_ours(A, b, phi, pre, defl, rtol, maxiter, backend, blocks):
    def build():
        return PressureSolver(A, method="dpcg" if defl != "none" else "pcg", preconditioner=pre,
                              deflation=defl, phi=phi, subdomains=blocks, rtol=rtol,
                              maxiter=maxiter, check_every=10)
    build().solve(b)                                 # warm-up: compilation, handles
    backend.synchronize()
    t = time.perf_counter()
    s = build()
    backend.synchronize()
    setup = time.perf_counter() - t
    x, rec = s.solve(b)
    return rec.iterations, rec.solve_seconds, true_residual(A, b, x, backend), setup, rec.reason


def run_peer(A, b, rtol, maxiter, backend):
    """CuPy cg + Jacobi on cuSPARSE CSR (GPU) or SciPy cg + Jacobi (CPU)."""
    xp = backend.xp
    C = A.to_backend_sparse()
    bc = b - b.mean()
    inv_d = 1.0 / C.diagonal()
    if backend.name == "cupy":
        from cupyx.scipy.sparse.linalg import LinearOperator, cg
    else:
        from scipy.sparse.linalg import LinearOperator, cg
    M = LinearOperator(C.shape, matvec=lambda r: inv_d * r, dtype=C.dtype)
    count = [0]

    def cb(_):
        count[0] += 1

    def solve():
        count[0] = 0
        try:
            return cg(C, bc, rtol=rtol, maxiter=maxiter, M=M, callback=cb)
        except TypeError:                             # older CuPy: tol
            return cg(C, bc, tol=rtol, maxiter=maxiter, M=M, callback=cb)

    solve()                                           # warm-up
    backend.synchronize()
    t = time.perf_counter()
    x, info = solve()
    backend.synchronize()
    elapsed = time.perf_counter() - t
    r = bc - C @ x
    return count[0], elapsed, float(xp.linalg.norm(r) / xp.linalg.norm(bc)), info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--contrasts", type=float, nargs="+", default=[1e3])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--configs", nargs="+",
                    default=["jacobi:levelset_subdomains", "incomplete_poisson_scaled:levelset_subdomains",
                             "block_ic:levelset_subdomains"],
                    help="preconditioner:deflation pairs")
    ap.add_argument("--cells-per-subdomain", type=int, default=8,
                    help="deflation block edge in cells (blocks = n // this)")
    ap.add_argument("--maxiter", type=int, default=20000)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    versions = f"numpy {np.__version__}"
    if backend.name == "cupy":
        versions += f", cupy {backend.xp.__version__}"
    import scipy

    versions += f", scipy {scipy.__version__}, python {platform.python_version()}"
    bw = copy_bandwidth(backend)
    print(f"# device: {backend.device_name} ({backend.name}); {versions}")
    print(f"# copy bandwidth (read + write): {bw / 1e9:.0f} GB/s; float64")
    head = (f"{'n':>5} {'contrast':>8} {'solver':>40} {'its':>6} {'ms/it':>8} {'total s':>8} "
            f"{'true res':>9} {'MB/it':>7} {'GB/s':>6} {'floor ms':>8} {'x floor':>7} "
            f"{'speedup':>7} {'setup ms':>8} {'GiB':>5}")
    print(head)
    rows = []
    for n in args.sizes:
        blocks = (max(1, n // args.cells_per_subdomain),) * 2
        for contrast in args.contrasts:
            A, b, phi = bubbly_column(n, contrast, backend=backend)
            rtol = 1e-6 if contrast >= 1e6 else 1e-8
            peer = None
            if not args.no_peer:
                its, sec, res, info = run_peer(A, b, rtol, args.maxiter, backend)
                peer = sec
                name = "cupy cg + jacobi (CSR)" if backend.name == "cupy" else "scipy cg + jacobi"
                rows.append(dict(n=n, contrast=contrast, solver=name, iterations=its,
                                 ms_per_iteration=1e3 * sec / max(its, 1), seconds=sec,
                                 true_residual=res, note=f"info {info}"))
            for cfg in args.configs:
                pre, defl = cfg.split(":")
                its, sec, res, setup, reason = run_ours(A, b, phi, pre, defl, rtol, args.maxiter,
                                                        backend, blocks)
                nbytes = bytes_per_iteration(n * n, pre, defl)
                ms = 1e3 * sec / max(its, 1)
                floor = 1e3 * nbytes / bw
                rows.append(dict(n=n, contrast=contrast, solver=f"{pre}+{defl}", iterations=its,
                                 ms_per_iteration=ms, seconds=sec, true_residual=res,
                                 mb_per_iteration=nbytes / 1e6, gb_per_s=nbytes / (ms * 1e-3) / 1e9,
                                 floor_ms=floor, ratio_to_floor=ms / floor,
                                 speedup=(peer / sec) if peer else float("nan"),
                                 setup_ms=1e3 * setup, peak_gib=peak_memory(backend), note=reason))
            for r in rows:
                if r.get("printed") or r["n"] != n or r["contrast"] != contrast:
                    continue
                r["printed"] = True
                print(f"{r['n']:>5} {r['contrast']:>8g} {r['solver']:>40} {r['iterations']:>6} "
                      f"{r['ms_per_iteration']:>8.3f} {r['seconds']:>8.3f} {r['true_residual']:>9.2e} "
                      f"{r.get('mb_per_iteration', float('nan')):>7.0f} {r.get('gb_per_s', float('nan')):>6.0f} "
                      f"{r.get('floor_ms', float('nan')):>8.3f} {r.get('ratio_to_floor', float('nan')):>7.1f} "
                      f"{r.get('speedup', float('nan')):>7.1f} {r.get('setup_ms', float('nan')):>8.1f} "
                      f"{r.get('peak_gib', float('nan')):>5.1f}  {r.get('note', '')}", flush=True)
    if args.csv:
        keys = sorted({k for r in rows for k in r if k != "printed"})
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
