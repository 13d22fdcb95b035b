"""Where a small flow step's time goes on the GPU: host time per phase and the kernels.

    python3 scripts/flow_kernel_trace.py CASE.yaml NX [STEPS] [--set KEY=VALUE ...]

Steps the case at ``NX x 2 NX`` cells on CuPy (30 warm-up steps first) and
prints, for ``STEPS`` steps (default 40):

- the wall time per step, plain;
- the host time per phase with no synchronisation added (each phase's Python,
  launches and the waits it has anyway), which is what a small, launch-bound
  step is made of (``bubbleflow bench --flow`` waits for the device after
  every phase instead, to charge each phase with its device work);
- the GPU kernel time per step and a table of the kernels (count per step,
  microseconds), from a trace by ``torch.profiler`` (CUPTI sees CuPy's
  kernels); where PyTorch is not installed the table is left out.
"""
import argparse
import os
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class HostClock:
    """A phase clock (FlowSolver.clock's interface) without synchronisations."""

    enabled = False

    def __init__(self):
        self.seconds, self.last = {}, None

    def start(self):
        self.last = time.perf_counter()

    def mark(self, phase):
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("nx", type=int)
    ap.add_argument("steps", type=int, nargs="?", default=40)
    ap.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE")
    ap.add_argument("--rows", type=int, default=40, help="kernel table rows (default 40)")
    a = ap.parse_args(argv)

    import cupy as cp

    from bubbleflow.case.config import load_case
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow.navier_stokes import FlowSolver

    case = load_case(a.case, overrides=[f"grid.nx={a.nx}", f"grid.ny={2 * a.nx}", "backend=cupy",
                                        *a.sets])
    flow = FlowSolver(case, get_backend("cupy"))
    state = flow.initial_state()

    def steps(n):
        nonlocal state
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            state, _ = flow.step(state)
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / n * 1e3

    steps(30)
    print(f"# {a.case} at {a.nx} x {2 * a.nx}: {steps(a.steps):.2f} ms per step")
    flow.clock = HostClock()
    per_step = steps(a.steps)
    print(f"# host clock: {per_step:.2f} ms per step; host ms per phase: " + ", ".join(
        f"{k} {v / a.steps * 1e3:.3f}" for k, v in flow.clock.seconds.items()))
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("# (no PyTorch: no kernel table)")
        return 0
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        traced = steps(a.steps)
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy = sum(e.device_time for e in events) / 1e3 / a.steps
    print(f"# traced: {traced:.2f} ms per step; GPU kernel time {busy:.3f} ms per step; "
          f"{len(events) / a.steps:.0f} GPU operations per step")
    totals = {}
    for e in events:
        entry = totals.setdefault(e.name[:70], [0, 0.0])
        entry[0] += 1
        entry[1] += e.device_time
    print(f"{'kernel':70s} {'per step':>9s} {'us/step':>9s} {'us each':>8s}")
    for name, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:a.rows]:
        print(f"{name:70s} {n / a.steps:9.1f} {t / a.steps:9.1f} {t / n:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
