"""What checking a flow's physical bounds costs beside its step.

``python3 scripts/bounds_cost.py [numpy|cupy] [small]``: for the 2-D rising
bubble, the 2-D column and the 3-D rising bubble (CLSVOF and the level
set), the median time of a whole step and of
:meth:`bubbleflow.flow.bounds.FlowBounds.measure` alone on the state it
reached, measured in one process, and their ratio.  ``small`` runs coarse
grids (a check on a CPU).
"""
import statistics
import sys
import time

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.flow import flow_solver

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "cupy"
SMALL = "small" in sys.argv[2:]
CASES = [
    ("cases/two_phase.yaml", ["grid.nx=40", "grid.ny=80"] if SMALL else
     ["grid.nx=160", "grid.ny=320"]),
    ("cases/bubbly_column_flow.yaml", ["grid.nx=32", "grid.ny=64"] if SMALL else
     ["grid.nx=2048", "grid.ny=4096"]),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=16", "grid.ny=16", "grid.nz=32"] if SMALL else
     ["grid.nx=128", "grid.ny=128", "grid.nz=256"]),
]


def median_seconds(fn, backend, repeat):
    times = []
    for _ in range(repeat):
        backend.synchronize()
        t = time.perf_counter()
        fn()
        backend.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    backend = get_backend(BACKEND)
    rows = []
    for path, sets in CASES:
        for method in ("clsvof", "levelset"):
            case = load_case(path, sets + [f"levelset.method={method}", "time.end=100"])
            solver = flow_solver(case, backend)
            box = {"state": solver.initial_state()}
            for _ in range(3):                       # compiled, and the flow under way
                box["state"], report = solver.step(box["state"])

            def step():
                box["state"], box["report"] = solver.step(box["state"])

            step_s = median_seconds(step, backend, 5)
            s = box["state"]
            velocity = getattr(s, "velocity", None) or (s.u, s.v)
            measure_s = median_seconds(
                lambda: solver.bounds.measure(s.phi, velocity, s.phi, velocity, s.c,
                                              box["report"].dt), backend, 20)
            cells = " x ".join(map(str, solver.grid.cells))
            rows.append((path.split("/")[-1], cells, method, step_s, measure_s))
    print(f"\nbackend {backend.name} on {backend.device_name}")
    print("| case | cells | interface | step (ms) | bounds (ms) | bounds / step |")
    print("|---|---|---|---|---|---|")
    for name, cells, method, step_s, measure_s in rows:
        print(f"| {name} | {cells} | {method} | {step_s * 1e3:.3f} | {measure_s * 1e3:.3f} | "
              f"{measure_s / step_s:.1%} |")


if __name__ == "__main__":
    main()
