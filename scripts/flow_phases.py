"""Where a flow step's time goes: ms per step of each phase, for a case.

    python3 scripts/flow_phases.py CASE.yaml [--set key=value ...] [--backend B]
                                   [--steps N] [--skip K]

Runs N steps of the case (no output written) with the flow's phase clock on
(each phase ends with a device synchronisation, so its device work is
charged to it) and prints, per phase, the median and mean ms per step over
the steps after the first K (those include compilation and first use), the
share of the step, the pressure iterations, and simulated time per wall
second.  The first step of issue 16: profile before changing anything.
"""
import argparse
import time

import numpy as np

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow.navier_stokes import FlowSolver


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=5)
    args = ap.parse_args(argv)
    case = load_case(args.case, args.set)
    backend = get_backend(args.backend)
    flow = FlowSolver(case, backend)
    flow.clock.enabled = True
    state = flow.initial_state()
    phases, iterations, solve_seconds, dts = [], [], [], []
    t0 = time.perf_counter()
    for k in range(args.steps):
        state, report = flow.step(state)
        if k >= args.skip:
            phases.append(report.phases)
            iterations.append(report.record.iterations)
            solve_seconds.append(report.phases["pressure solve"])
            dts.append(report.dt)
        if state.time >= case.time.end:
            break
    wall = time.perf_counter() - t0
    if not phases:
        raise SystemExit(f"no step after the first {args.skip}: raise --steps or time.end")
    names = list(phases[0])
    table = {n: 1e3 * np.array([p.get(n, 0.0) for p in phases]) for n in names}
    total = sum(table.values())
    print(f"# {case.name}: {case.grid.nx} x {case.grid.ny} cells, backend {backend.name} "
          f"({backend.device_name}); {len(phases)} steps after {args.skip}")
    print(f"{'phase':18s} {'median ms':>10s} {'mean ms':>10s} {'share':>7s}")
    for n in names:
        print(f"{n:18s} {np.median(table[n]):10.3f} {table[n].mean():10.3f} "
              f"{table[n].mean() / total.mean():7.1%}")
    print(f"{'step':18s} {np.median(total):10.3f} {total.mean():10.3f} {1:7.1%}")
    its = np.array(iterations)
    print(f"# pressure: {its.mean():.1f} iterations per solve, "
          f"{1e3 * np.sum(solve_seconds) / max(its.sum(), 1):.4f} ms per iteration; "
          f"simulated {np.sum(dts) / (total.sum() / 1e3):.4g} s per wall second "
          f"(whole loop {wall:.1f} s)")


if __name__ == "__main__":
    main()
