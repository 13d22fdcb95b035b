"""Where a flow step's time goes: ms per step of each phase, for a case.

    python3 scripts/flow_phases.py CASE.yaml [--set key=value ...] [--backend B]
                                   [--steps N] [--skip K]

Runs N steps of the case (no output written) with the flow's phase clock on
(each phase ends with a device synchronisation, so its device work is
charged to it) and prints, per phase, the median and mean ms per step over
the steps after the first K (those include compilation and first use), the
share of the step, the pressure iterations, and simulated time per wall
second.  The first step of issue 16: profile before changing anything.

Each phase is set beside its bandwidth floor: the bytes it must move (each
of its input fields read once and each output field written once, a face
field counted as a cell field; the pressure solve: its iterations times the
solver's bytes per iteration) over the copy bandwidth measured in the same
run.  The pressure set-up's count leaves out the preconditioner's and the
deflation's own arrays (a lower bound).
"""
import argparse
import time

import numpy as np

from bubbleflow.apps.bench.measure import copy_bandwidth
from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.linalg import registry

#: Fields each phase must read and write, once each (see the docstring).
PHASE_FIELDS = {
    "finite check": 3,        # u, v, phi read
    "properties": 6,          # phi -> H, rho, mu, rho_x, rho_y
    "time step": 4,           # u, v, rho, mu
    "momentum": 11,           # u, v, phi, H, rho, mu, rho_x, rho_y -> u*, v*, div u*
    "correction": 8,          # u*, v*, p, rho_x, rho_y, div u* -> u, v
    "advection": 4,           # phi, u, v -> phi
    "reinitialisation": 2,    # phi -> phi
    "diagnostics": 3,         # phi, u, v
}
#: The set-up: face densities and phi in, the operator (by storage) and one label field out.
SETUP_FIELDS = {"diagonals": 3 + 5 + 1, "matrix_free": 3 + 2 + 1}


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
    phases, iterations, solve_seconds, dts, solve_bytes_per_step = [], [], [], [], []
    t0 = time.perf_counter()
    for k in range(args.steps):
        state, report = flow.step(state)
        if k >= args.skip:
            phases.append(report.phases)
            iterations.append(report.record.iterations)
            solve_seconds.append(report.phases["pressure solve"])
            dts.append(report.dt)
            rec = report.record
            per_it = rec.bytes_per_iteration or registry.model_bytes_per_iteration(
                case.grid.nx * case.grid.ny, case.solver.preconditioner.type,
                case.solver.deflation.type, case.operator.storage)
            solve_bytes_per_step.append(per_it * rec.iterations)
        if state.time >= case.time.end:
            break
    wall = time.perf_counter() - t0
    if not phases:
        raise SystemExit(f"no step after the first {args.skip}: raise --steps or time.end")
    names = list(phases[0])
    table = {n: 1e3 * np.array([p.get(n, 0.0) for p in phases]) for n in names}
    total = sum(table.values())
    field = 8 * case.grid.nx * case.grid.ny
    bandwidth, _ = copy_bandwidth(backend, max(64 * 2 ** 20, 4 * field))
    solve_bytes = float(np.mean(solve_bytes_per_step))
    fields = dict(PHASE_FIELDS, **{"pressure set-up": SETUP_FIELDS[case.operator.storage]})
    print(f"# {case.name}: {case.grid.nx} x {case.grid.ny} cells, backend {backend.name} "
          f"({backend.device_name}); {len(phases)} steps after {args.skip}; copy bandwidth "
          f"{bandwidth / 1e9:.0f} GB/s")
    print(f"{'phase':18s} {'median ms':>10s} {'mean ms':>10s} {'share':>7s} {'floor ms':>9s} "
          f"{'x floor':>8s}")
    floors = 0.0
    for n in names:
        moved = solve_bytes if n == "pressure solve" else fields.get(n, 0) * field
        if n == "reinitialisation":
            moved /= max(case.levelset.reinit_every or 1, 1)     # every k-th step
        floor = 1e3 * moved / bandwidth
        floors += floor
        ratio = f"{table[n].mean() / floor:8.0f}" if floor > 0 else f"{'-':>8s}"
        print(f"{n:18s} {np.median(table[n]):10.3f} {table[n].mean():10.3f} "
              f"{table[n].mean() / total.mean():7.1%} {floor:9.4f} {ratio}")
    print(f"{'step':18s} {np.median(total):10.3f} {total.mean():10.3f} {1:7.1%} {floors:9.4f} "
          f"{total.mean() / floors:8.0f}")
    its = np.array(iterations)
    print(f"# pressure: {its.mean():.1f} iterations per solve, "
          f"{1e3 * np.sum(solve_seconds) / max(its.sum(), 1):.4f} ms per iteration; "
          f"simulated {np.sum(dts) / (total.sum() / 1e3):.4g} s per wall second "
          f"(whole loop {wall:.1f} s)")


if __name__ == "__main__":
    main()
