"""Do a flow's pressure solves reach their rtol?  Per size: the worst true residual.

    python3 scripts/flow_rtol_study.py CASE.yaml --sizes 512,1024,2048 [--steps N]
                                       [--set key=value ...] [--backend B]

Runs N steps of the case at each size (nx, ny = 2 nx: the bubbly-column flow's
aspect) and prints, per size, the pressure solves' iterations (mean, max),
the worst and the median final relative residual, how many solves stopped
short of rtol and why.  With volumetric gravity the pressure carries its
hydrostatic part, whose float64 rounding (``eps |p|`` times the gas cells'
coefficients) floors the attainable residual as the grid and the contrast
grow; reduced gravity with the solve as an increment is meant to remove
that floor.  Run it with an older package on PYTHONPATH to compare.
"""
import argparse
import statistics
import time

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow.navier_stokes import FlowSolver


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    print(f"{args.label or 'package'}: {args.case} {' '.join(args.set)}; backend {backend.name}")
    print(f"{'size':>11} {'its mean':>9} {'its max':>8} {'worst res':>10} {'median res':>11} "
          f"{'short':>6} {'reasons':<20} {'s/step':>7}")
    for nx in (int(s) for s in args.sizes.split(",")):
        case = load_case(args.case, [f"grid.nx={nx}", f"grid.ny={2 * nx}", *args.set])
        flow = FlowSolver(case, backend)
        state = flow.initial_state()
        its, res, reasons = [], [], {}
        t0 = time.perf_counter()
        for _ in range(args.steps):
            state, rep = flow.step(state)
            rec = rep.record
            its.append(rec.iterations)
            res.append(rec.residual)
            if not rec.converged:
                reasons[rec.reason] = reasons.get(rec.reason, 0) + 1
        wall = (time.perf_counter() - t0) / args.steps
        short = sum(reasons.values())
        print(f"{nx:>5}x{2 * nx:<5} {statistics.mean(its):>9.1f} {max(its):>8d} {max(res):>10.2e} "
              f"{statistics.median(res):>11.2e} {short:>6d} "
              f"{','.join(f'{k}:{v}' for k, v in reasons.items()) or '-':<20} {wall:>7.3f}",
              flush=True)
        del flow, state


if __name__ == "__main__":
    main()
