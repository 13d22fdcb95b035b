"""Where the host's time goes in the flow's pressure set-up and solve.

    python3 scripts/pressure_host_profile.py [ROOT] [--case cases/two_phase.yaml]
        [--nx 160] [--warmup 30] [--steps 100] [--top 30]

Steps a flow case with :class:`FlowSolver` (``ny = 2 nx``) from the package
in ``ROOT`` (default: this checkout), ``--warmup`` steps first (compilation,
graphs), then ``--steps`` steps with cProfile switched on only inside
:meth:`PressureSolver.update` and :meth:`PressureSolver.solve` (the rest of
the step is not profiled).  Prints the host milliseconds per step of the two
calls (wall time, profiled) and the functions with the most own time and the
most cumulative time inside them, per step.  On a GPU at small grids the
step is bound by the host (launches, synchronisations, Python), so these
are what the pressure costs; a synchronisation shows as the time of the
call that waits (``get``, a cuSOLVER call).
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=os.getcwd())
    ap.add_argument("--case", default="cases/two_phase.yaml")
    ap.add_argument("--nx", type=int, default=160)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--backend", default="cupy")
    args = ap.parse_args(argv)

    root = os.path.abspath(args.root)
    sys.path.insert(0, root)
    import numpy as np

    from bubbleflow.case.config import load_case
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow.navier_stokes import FlowSolver
    from bubbleflow.linalg.solver import PressureSolver

    cfg = load_case(os.path.join(root, args.case), [f"grid.nx={args.nx}", f"grid.ny={2 * args.nx}"])
    backend = get_backend(args.backend)
    flow = FlowSolver(cfg, backend)
    state = flow.initial_state()
    with np.errstate(all="ignore"):
        for _ in range(args.warmup):
            state, _report = flow.step(state)
    backend.synchronize()

    prof = cProfile.Profile()
    wall = {"update": 0.0, "solve": 0.0}
    calls = {"update": 0, "solve": 0}

    def profiled(name, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            prof.enable()
            try:
                return fn(*a, **kw)
            finally:
                prof.disable()
                wall[name] += time.perf_counter() - t0
                calls[name] += 1
        return wrapper

    original = {name: getattr(PressureSolver, name) for name in wall}
    for name in wall:
        setattr(PressureSolver, name, profiled(name, original[name]))
    steps = 0
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            for _ in range(args.steps):
                if state.time >= cfg.time.end:
                    break
                state, _report = flow.step(state)
                steps += 1
        backend.synchronize()
    finally:
        for name in wall:
            setattr(PressureSolver, name, original[name])
    total = time.perf_counter() - t0
    steps = max(steps, 1)
    print(f"# {args.case} {args.nx} x {2 * args.nx}, {root}: {steps} steps, "
          f"{1e3 * total / steps:.2f} ms/step (profiled)")
    for name in wall:
        print(f"# PressureSolver.{name}: {1e3 * wall[name] / steps:.3f} ms/step host, "
              f"{calls[name] / steps:.2f} calls/step")
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats(key).print_stats(args.top)
        print(f"\n## {title} (totals over {steps} steps)")
        text = out.getvalue()
        start = text.find("   ncalls")
        print(text[start:] if start >= 0 else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
