"""The CLSVOF rebuild of one flow step, each of its kernels timed by CUDA events.

    python3 scripts/rebuild_kernel_events.py [--case rising3d] [--size 256x256x512] [--warm 2]

Builds a named case of ``bubbleflow bench --flow`` at the given cells on
CuPy, steps it ``--warm`` times, then calls the level set's rebuild
(``vof_redistance.redistance`` with the flow's band and reach) on the
state three times, the kernel getter of ``flow.vof_redistance_cuda``
wrapped so that every launch is timed between two CUDA events.  Prints the
last call's whole time and each launch's; the whole also holds what the
kernels do not (the host read, the band's list).
"""
import argparse
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))     # flow_kernel_events


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="rising3d")
    ap.add_argument("--size", default="256x256x512", help="cells per axis, x first")
    ap.add_argument("--warm", type=int, default=2, help="steps before the rebuilds")
    args = ap.parse_args(argv)

    import cupy as cp

    from bubbleflow.apps.bench.flow_cases import named_case
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow import vof_redistance_cuda
    from bubbleflow.flow.navier_stokes import CLSVOF_BAND, FlowSolver
    from flow_kernel_events import timed_getter

    cells = [int(n) for n in args.size.lower().split("x")]
    case = named_case(args.case, cells, f"scripts/rebuild_kernel_events.py ({args.case})",
                      ["output.bubbles_every=0"])
    flow = FlowSolver(case, get_backend("cupy"))
    state = flow.initial_state()
    for _ in range(args.warm):
        state, _ = flow.step(state)
    if state.c is None:
        sys.exit("error: the case's levelset.method is not clsvof: no rebuild")
    events = []
    getter = "_kernel3" if len(cells) == 3 else "_kernel"
    get = getattr(vof_redistance_cuda, getter)
    setattr(vof_redistance_cuda, getter, timed_getter(get, events))
    try:
        for _ in range(3):
            events.clear()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            vof_redistance_cuda.redistance(state.phi, state.c, flow.spacing, CLSVOF_BAND,
                                           CLSVOF_BAND + 1)
            end.record()
            end.synchronize()
    finally:
        setattr(vof_redistance_cuda, getter, get)
    print(f"# {args.case} {' x '.join(map(str, cells))}: the rebuild after {args.warm} steps, "
          f"the third call")
    print(f"{'whole call':24s} {cp.cuda.get_elapsed_time(start, end):9.3f} ms")
    for name, a, b in events:
        print(f"  {name:22s} {cp.cuda.get_elapsed_time(a, b):9.3f} ms")


if __name__ == "__main__":
    main()
