"""The ranks' multigrid PCG by the size of the level its cycle gathers on every rank.

    mpiexec -n R python3 scripts/ranks_gather_threshold.py NX NY [CELLS ...]

For each threshold (``linalg.precond.slab_cycle_cuda.GATHER_CELLS``, default
2^12 .. 2^22; expressions such as ``2**20`` are taken), the bubbly column's
pressure (``cases/bubbly_column.yaml`` at ``NX x NY``, its solver: multigrid
PCG) on the ranks' slabs, CuPy and the rank's GPU: the level gathered, the
first set-up, a refresh of the hierarchy (a time step's), one cycle and a
solve (medians, the device waited for, the slowest rank's).  Rank 0 prints
one line a threshold.  On one process the slab code runs on one rank.
"""
import ast
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.ranks import slab_problem  # noqa: E402
from bubbleflow.case.loading import load_case  # noqa: E402
from bubbleflow.compute.backend import get_backend  # noqa: E402
from bubbleflow.compute.comm import communicator  # noqa: E402
from bubbleflow.linalg.precond import slab_cycle_cuda  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402

CASE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cases",
                    "bubbly_column.yaml")


def _cells(text):
    """``"2**20"`` or ``"1048576"`` -> 1048576 (integers and powers only)."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return int(ast.literal_eval(node.left)) ** int(ast.literal_eval(node.right))
    return int(ast.literal_eval(node))


def main(argv):
    nx, ny = int(argv[0]), int(argv[1])
    thresholds = argv[2:] or [f"2**{k}" for k in (12, 14, 16, 18, 20, 22)]
    backend = get_backend("cupy")
    xp = backend.xp
    comm = communicator("auto", backend)
    comm.use_device(backend)
    case = load_case(CASE, [f"grid.nx={nx}", f"grid.ny={ny}"], warn=False)
    prob, A, own = slab_problem(case, backend, comm)
    b = prob.rhs[own].ravel()

    def median_ms(run, n):
        seconds = []
        for _ in range(n):
            xp.cuda.get_current_stream().synchronize()
            comm.allreduce_max(0.0)
            t = time.perf_counter()
            run()
            xp.cuda.get_current_stream().synchronize()
            seconds.append(comm.allreduce_max(time.perf_counter() - t))
        return 1e3 * float(np.median(seconds))

    for text in thresholds:
        slab_cycle_cuda.GATHER_CELLS = _cells(text)
        t = time.perf_counter()
        solver = PressureSolver.from_config(A, case.solver, phi=prob.phi, grid=prob.grid)
        xp.cuda.get_current_stream().synchronize()
        setup = comm.allreduce_max(time.perf_counter() - t)
        M = solver.M
        level = getattr(getattr(M, "runner", None), "gathered", None)
        solver.solve(b)
        refresh = median_ms(lambda: M.refresh(A), 5)
        cycle = median_ms(lambda: M.apply(b), 10)
        _, record = solver.solve(b)
        solve = median_ms(lambda: solver.solve(b), 5)
        if comm.rank == 0:
            print(f"{nx} x {ny} on {comm.size} ranks, gathered from {text} cells (level "
                  f"{level}): first set-up {1e3 * setup:.1f} ms, refresh {refresh:.2f} ms, "
                  f"cycle {cycle:.3f} ms, solve {solve:.2f} ms ({record.iterations} its, "
                  f"{record.residual:.1e})", flush=True)
        solver = M = None


if __name__ == "__main__":
    main(sys.argv[1:])
