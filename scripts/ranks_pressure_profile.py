"""Where a pressure solve on the ranks spends its time: one halo swap, one
all-reduce, one product, one preconditioner apply and one solve, each timed
on its own (the device synchronised, the slowest rank's view), then a
cProfile of rank 0's solve.

    python3 scripts/ranks_pressure_profile.py NX NY [CASE.yaml] [KEY=VALUE ...]
    mpiexec -n 2 python3 scripts/ranks_pressure_profile.py 2048 4096

The case (default ``cases/bubbly_column.yaml``) is built as ``mpiexec ...
bubbleflow run`` builds it (each rank its widened slab) and solved with its
solver section; one process runs the same slab code on one rank.
``BUBBLEFLOW_BACKEND`` picks the backend (default cupy).
"""
import cProfile
import io
import os
import pstats
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.ranks import slab_problem  # noqa: E402
from bubbleflow.case.loading import load_case  # noqa: E402
from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.compute.comm import communicator  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402


def main(argv):
    nx, ny = int(argv[0]), int(argv[1])
    case_file = argv[2] if len(argv) > 2 else "cases/bubbly_column.yaml"
    backend = get_backend(os.environ.get("BUBBLEFLOW_BACKEND", "cupy"))
    comm = communicator("auto", backend)
    comm.use_device(backend)
    case = load_case(case_file, [f"grid.nx={nx}", f"grid.ny={ny}"] + list(argv[3:]), warn=False)
    s = case.solver
    prob, A, own = slab_problem(case, backend, comm)
    slab = A.slab
    b = prob.rhs[own].ravel()
    xp = backend.xp

    def sync():
        if hasattr(xp, "cuda"):
            xp.cuda.get_current_stream().synchronize()
        comm.allreduce_max(0.0)

    def timed(name, f, n):
        f()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        sync()
        if comm.rank == 0:
            print(f"{name:28s} {(time.perf_counter() - t0) / n * 1e3:9.3f} ms", flush=True)

    t0 = time.perf_counter()
    solver = PressureSolver.from_config(A, s, phi=prob.phi, grid=prob.grid)
    sync()
    if comm.rank == 0:
        print(f"# {nx} x {ny} on {comm.size} ranks ({comm.name}), {s.method} "
              f"{s.preconditioner.type} {s.deflation.type}; set-up "
              f"{time.perf_counter() - t0:.3f} s", flush=True)
    plane, below, above = (xp.zeros(tuple(slab.shape[1:])) for _ in range(3))
    if comm.size > 1:
        timed("swap (one plane)", lambda: comm.wait(comm.start_exchange(
            slab.lower, slab.upper, plane, plane, below, above)), 200)
    sums, out = xp.ones(4), xp.empty(4)
    timed("allreduce_into (4)", lambda: comm.allreduce_into(sums, out), 200)
    timed("allreduce_sum + host read", lambda: float(comm.allreduce_sum(sums)[0]), 200)
    timed("matvec", lambda: A.matvec(b), 100)
    solver.M.prepare(b)
    timed("preconditioner apply", lambda: solver.M.apply(b), 20)
    timed("solve", lambda: solver.solve(b), 3)
    _, rec = solver.solve(b)
    profile = cProfile.Profile()
    profile.enable()
    solver.solve(b)
    sync()
    profile.disable()
    if comm.rank == 0:
        print(f"solve: {rec.iterations} iterations, residual {rec.residual:.2e}, {rec.reason}")
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(22)
        print("\n".join(text.getvalue().splitlines()[:45]))


if __name__ == "__main__":
    main(sys.argv[1:])
