"""The ranks' benchmark with one rank failing (``mpiexec -n 2 python3
mpi_bench_error.py ROWS``): rank 1 raises a MemoryError while it builds
its problem, which no other rank sees; every rank must end, the failing
one named, rather than the others waiting in the next collective
(tests/parallel/test_mpi.py)."""
import sys

from bubbleflow.apps.bench import ranks_model
from bubbleflow.apps.cli import main

loop = ranks_model._loop_seconds


def failing_loop(comm, backend, dim, n, *args, **kwargs):
    if comm.rank == 1 and n == 32:
        raise MemoryError("a failure on rank 1 alone")
    return loop(comm, backend, dim, n, *args, **kwargs)


ranks_model._loop_seconds = failing_loop
if __name__ == "__main__":
    sys.exit(main(["bench", "--sizes", "32", "--rows", sys.argv[1]]))
