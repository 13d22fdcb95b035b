"""Per-time-step set-up benchmark: operator, preconditioners, deflation spaces.

Every time step of a flow run rebuilds, for the new interface, the pressure
operator, the preconditioner and the deflation space (labels, ``A Z``,
``E = Z^T A Z`` and the coarse factorisation).  This script times each piece
on the standard problem (``bubbleflow.bubbly_column``: unit square, water to
0.85, 3 x 3 gas bubbles) at the given sizes on the given backend, with the
inputs already on the backend (face ``1/rho`` and the level set ``phi``, as
a flow run has them).  The clock is read after a backend synchronisation;
each piece is run once to warm up (compilation, memory pool) and then
``--repeats`` times; the table shows the median in milliseconds.

    python3 scripts/bench_setup.py --sizes 256 1024 [--backend cupy] [--repeats 5]

Rows: ``operator[storage]`` (assembly from the face coefficients),
``precond:NAME`` (``make_preconditioner``), ``deflation:KIND``
(``make_deflation``, coarse factorisation included; for the level-set kind
the number of vectors ``k`` and the coarse factorisation of its ``E`` alone
follow) and ``solver setup`` (``PressureSolver`` with the default
preconditioner and deflation: the whole per-step set-up but the operator).
Run from the repository root after ``pip install -e .`` (or with
``PYTHONPATH=.``).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from bubbleflow import PressureSolver, get_backend, make_deflation
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import Circle, build_levelset, phase_fields
from bubbleflow.operators.poisson import PoissonOperator
from bubbleflow.linalg.precond import PRECONDITIONERS, make_preconditioner

DEFLATIONS = ("subdomains", "stripes", "levelset_subdomains")


def standard_inputs(n, contrast, backend, rule="arithmetic", rho_liquid=1000.0):
    """Face ``1/rho`` and ``phi`` of ``bubbly_column(n, contrast)``, on the backend."""
    grid = Grid(n, n)
    circles = [Circle(x, y, 0.08) for y in (0.2, 0.4, 0.6) for x in (0.25, 0.5, 0.75)]
    phi = build_levelset(grid, 0.85, circles)
    ph = phase_fields(grid, phi, rho_liquid, rho_liquid / contrast, 1e-3, 1.8e-5, rule=rule)
    xp = backend.xp
    return grid, xp.asarray(1.0 / ph.rho_x), xp.asarray(1.0 / ph.rho_y), xp.asarray(phi)


def median_ms(fn, backend, repeats):
    """Median wall time of ``fn()`` in ms (synchronised), after one warm-up call."""
    fn()
    backend.synchronize()
    times = []
    for _ in range(repeats):
        backend.synchronize()
        t = time.perf_counter()
        fn()
        backend.synchronize()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def bench(n, args, backend):
    grid, bx, by, phi = standard_inputs(n, args.contrast, backend)
    out = {}
    for storage in ("diagonals", "matrix_free"):
        out[f"operator[{storage}]"] = median_ms(
            lambda: PoissonOperator(bx, by, grid.hx, grid.hy, backend=backend, storage=storage),
            backend, args.repeats)
    A = PoissonOperator(bx, by, grid.hx, grid.hy, backend=backend)
    for name in sorted(PRECONDITIONERS):
        if name == "none":
            continue
        opts = {"block_lines": args.block_lines} if name == "block_ic" else {}
        out[f"precond:{name}"] = median_ms(lambda: make_preconditioner(name, A, **opts), backend,
                                           args.repeats)
    subdomains = tuple(args.subdomains)
    for kind in DEFLATIONS:
        out[f"deflation:{kind}"] = median_ms(
            lambda: make_deflation(kind, A, phi=phi, subdomains=subdomains, stripes=args.stripes),
            backend, args.repeats)
    D = make_deflation("levelset_subdomains", A, phi=phi, subdomains=subdomains)
    out["  (levelset k)"] = D.k
    coarse = type(D.coarse)                       # whichever coarse solver the deflation uses
    out["  of which coarse factorisation"] = median_ms(     # as the deflation space calls it
        lambda: coarse(D.E, D.coarse.singular, backend, groups=D.coarse_groups,
                       E_backend=D.E_backend, symmetric=True), backend, args.repeats)
    out["solver setup"] = median_ms(lambda: PressureSolver(A, phi=phi, subdomains=subdomains),
                                    backend, args.repeats)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--contrast", type=float, default=1e3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--block-lines", type=int, default=2)
    ap.add_argument("--subdomains", type=int, nargs=2, default=[16, 16], metavar=("PX", "PY"))
    ap.add_argument("--stripes", type=int, default=16)
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    import scipy

    versions = f"numpy {np.__version__}, scipy {scipy.__version__}"
    if backend.name == "cupy":
        versions += f", cupy {backend.xp.__version__}"
    print(f"# device: {backend.device_name} ({backend.name}); {versions}, python "
          f"{platform.python_version()}")
    print(f"# bubbly column, contrast {args.contrast:g}, float64; subdomains "
          f"{args.subdomains[0]} x {args.subdomains[1]}, {args.stripes} stripes, block_ic m = "
          f"{args.block_lines}; median of {args.repeats} (ms)")
    results = {}
    for n in args.sizes:
        results[n] = bench(n, args, backend)
    rows = list(results[args.sizes[0]])
    width = max(len(r) for r in rows)
    print(f"{'piece':<{width}} " + " ".join(f"{f'{n}^2':>10}" for n in args.sizes))
    for r in rows:
        cells = []
        for n in args.sizes:
            v = results[n][r]
            cells.append(f"{v:>10d}" if isinstance(v, int) else f"{v:>10.2f}")
        print(f"{r:<{width}} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
