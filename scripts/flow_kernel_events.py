"""The CUDA kernels of one flow step, each timed by CUDA events.

    python3 scripts/flow_kernel_events.py [--case rising3d] [--size 256x256x512] [--warm 2]
                                          [--set KEY=VALUE ...]

Builds a named case of ``bubbleflow bench --flow`` (``rising3d``,
``column3d``, ``hysing``, ``column``) at the given cells on CuPy, steps it
``--warm`` times (compiles, first set-up), then wraps the kernel getters of
the flow's CUDA twins (``flow.*_cuda``: ``_kernel`` and ``_kernel3``;
``flow.momentum_launch``: ``kernel``, the one of ``momentum.cu``) so that
every launch of the next step is timed between two CUDA events.
Prints the step's phases (the bench's phase clock, which synchronises after
each phase) and a table of the kernels: launches and milliseconds, slowest
first.  What is not in the table is array code (CuPy operations), the
pressure solve's engine and the multigrid's own kernels.
"""
import argparse
import collections
import importlib
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TWINS = ["momentum_launch", "momentum3_cuda", "vof_cuda", "vof_redistance_cuda", "levelset_cuda",
         "viscosity_cuda", "viscosity3_cuda", "bounds_cuda", "boxes_cuda"]
#: The getters' names in those modules.
GETTERS = ("kernel", "_kernel", "_kernel3")


def timed_getter(get, events):
    """``get`` whose kernels record a pair of events around each launch."""
    import cupy as cp

    def getter(name):
        fn = get(name)

        def launch(grid, block, args, **kw):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn(grid, block, args, **kw)
            end.record()
            events.append((name, start, end))
        return launch
    return getter


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="rising3d")
    ap.add_argument("--size", default="256x256x512", help="cells per axis, x first")
    ap.add_argument("--warm", type=int, default=2, help="steps before the timed one")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a case setting, as bubbleflow bench --set (repeatable)")
    args = ap.parse_args(argv)

    import cupy as cp

    from bubbleflow.apps.bench.flow_cases import named_case
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow.navier_stokes import FlowSolver

    cells = [int(n) for n in args.size.lower().split("x")]
    case = named_case(args.case, cells, f"scripts/flow_kernel_events.py ({args.case})",
                      ["output.bubbles_every=0"] + args.set)
    flow = FlowSolver(case, get_backend("cupy"))
    flow.clock.enabled = True
    state = flow.initial_state()
    for _ in range(args.warm):
        state, _ = flow.step(state)
    events = []
    for name in TWINS:
        mod = importlib.import_module("bubbleflow.flow." + name)
        for attr in GETTERS:
            if hasattr(mod, attr):
                setattr(mod, attr, timed_getter(getattr(mod, attr), events))
    state, report = flow.step(state)
    cp.cuda.Device().synchronize()
    print(f"# {args.case} {' x '.join(map(str, cells))}: one step after {args.warm}")
    print("phase ms: " + ", ".join(f"{k} {1e3 * v:.2f}" for k, v in report.phases.items()))
    total = collections.defaultdict(lambda: [0, 0.0])
    for name, start, end in events:
        total[name][0] += 1
        total[name][1] += cp.cuda.get_elapsed_time(start, end)
    print(f"{'kernel':30s} {'launches':>8s} {'ms':>9s}")
    for name, (n, ms) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:30s} {n:8d} {ms:9.3f}")
    print(f"{'all kernels':30s} {len(events):8d} {sum(v[1] for v in total.values()):9.3f}")


if __name__ == "__main__":
    main()
