"""Deflation subdomain size: set-up, iterations and solve time by cells per subdomain.

    python3 scripts/subdomain_size_study.py [--backend B] [--sizes 128,256,...]
                                            [--cells 8,16,32,64] [--case CASE.yaml]
                                            [--flow-steps N]

For each grid size n (n x n for the pressure case, n x 2n for a flow case)
and each subdomain width c (in cells), builds the case's pressure system with
``solver.deflation.cells_per_subdomain = c`` and measures, on one solver
object: the set-up of a new interface (``PressureSolver.update``, what a flow
pays every step; median of 3, after a first build that compiles), the
iterations and the time of one solve (median of 2), and their sum.  With
``--flow-steps N`` the case is a flow case and the figures are the per-step
means of its pressure set-up and solve over N steps (after 3 warm-up
steps).  The last table gives, per size, the best width and each width's
total over the best: the figures behind ``DEFAULT_CELLS_PER_SUBDOMAIN``.
"""
import argparse
import statistics
import time

from bubbleflow.case.config import load_case
from bubbleflow.case.problem import build_pressure_problem
from bubbleflow.compute.backend import get_backend
from bubbleflow.linalg.solver import PressureSolver


def _pressure_point(case_path, n, c, backend):
    case = load_case(case_path, [f"grid.nx={n}", f"grid.ny={n}",
                                 "solver.deflation.subdomains=null", f"solver.deflation.cells_per_subdomain={c}"])
    prob = build_pressure_problem(case, backend)
    solver = PressureSolver.from_config(prob.A, case.solver, phi=prob.phi)
    solver.solve(prob.rhs)                          # compile, first use
    setups, solves, its = [], [], None
    for _ in range(3):
        t0 = time.perf_counter()
        solver.update(prob.A, prob.phi)
        backend.synchronize()
        setups.append(time.perf_counter() - t0)
    for _ in range(2):
        t0 = time.perf_counter()
        _, rec = solver.solve(prob.rhs)
        backend.synchronize()
        solves.append(time.perf_counter() - t0)
        its = rec.iterations
    return case.solver.deflation.subdomain_counts(n, n), its, statistics.median(setups), statistics.median(solves)


def _flow_point(case_path, n, c, backend, steps):
    from bubbleflow.flow.navier_stokes import FlowSolver

    case = load_case(case_path, [f"grid.nx={n}", f"grid.ny={2 * n}",
                                 "solver.deflation.subdomains=null", f"solver.deflation.cells_per_subdomain={c}"])
    flow = FlowSolver(case, backend)
    flow.clock.enabled = True
    state = flow.initial_state()
    setups, solves, its = [], [], []
    for k in range(steps + 3):
        state, rep = flow.step(state)
        if k >= 3:
            setups.append(rep.phases["pressure set-up"])
            solves.append(rep.phases["pressure solve"])
            its.append(rep.record.iterations)
    return (case.solver.deflation.subdomain_counts(n, 2 * n), statistics.mean(its), statistics.mean(setups),
            statistics.mean(solves))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--sizes", default="128,256,512,1024")
    ap.add_argument("--cells", default="8,16,32,64")
    ap.add_argument("--case", default="cases/bubbly_column.yaml")
    ap.add_argument("--flow-steps", type=int, default=0)
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    sizes = [int(s) for s in args.sizes.split(",")]
    widths = [int(c) for c in args.cells.split(",")]
    print(f"backend {backend.name}; case {args.case}"
          + (f"; flow, {args.flow_steps} steps" if args.flow_steps else "; pressure system"))
    print(f"{'n':>6} {'cells':>5} {'blocks':>9} {'its':>7} {'setup ms':>9} {'solve ms':>9} "
          f"{'total ms':>9}")
    results = {}
    for n in sizes:
        for c in widths:
            if args.flow_steps:
                blocks, its, su, so = _flow_point(args.case, n, c, backend, args.flow_steps)
            else:
                blocks, its, su, so = _pressure_point(args.case, n, c, backend)
            results[n, c] = su + so
            print(f"{n:>6} {c:>5} {blocks[0]:>4}x{blocks[1]:<4} {its:>7.1f} {1e3 * su:>9.2f} "
                  f"{1e3 * so:>9.2f} {1e3 * (su + so):>9.2f}", flush=True)
    print("\nper size: total / best total, by cells per subdomain")
    print(f"{'n':>6} {'best':>5} " + " ".join(f"{c:>7}" for c in widths))
    for n in sizes:
        best = min(widths, key=lambda c: results[n, c])
        print(f"{n:>6} {best:>5} " + " ".join(f"{results[n, c] / results[n, best]:>7.2f}"
                                              for c in widths))


if __name__ == "__main__":
    main()
