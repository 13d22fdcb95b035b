"""A flow run on the ranks in which one rank alone fails (``mpiexec -n 2
python3 mpi_rank_error.py CASE OUTDIR``): rank 1 raises a ValueError at
step 2, which no other rank sees; the run must end every rank (not wait
forever in the next collective) and say which rank failed
(tests/parallel/test_mpi.py)."""
import sys

from bubbleflow.apps.cli import main
from bubbleflow.flow.navier_stokes import FlowSolver

step = FlowSolver.step


def failing_step(self, state):
    if self.partition.comm.rank == 1 and state.step == 1:
        raise ValueError("a failure on rank 1 alone")
    return step(self, state)


FlowSolver.step = failing_step
if __name__ == "__main__":
    case, outdir = sys.argv[1:3]
    sys.exit(main(["run", case, "-o", outdir, "--no-progress", "--set", "grid.nx=16",
                   "--set", "grid.ny=40", "--set", "time.end=0.1"]))
