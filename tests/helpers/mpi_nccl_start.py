"""NCCL's start failing on one rank alone (``mpiexec -n 2 python3
mpi_nccl_start.py``): rank 1's part of the start raises, rank 0's succeeds;
both ranks must say which rank failed and end, rather than rank 0 waiting
in NCCL's start for a rank that never comes (tests/parallel/test_mpi.py).
Needs no GPU: the start's own part is replaced."""
import sys

from bubbleflow.compute.comm import NCCLDevice


def prepare(self, local):
    if self.rank == 1:
        raise ValueError("no GPU for rank 1")
    return None


NCCLDevice._prepare = prepare
if __name__ == "__main__":
    try:
        NCCLDevice()
    except RuntimeError as exc:
        print(f"rank said: {exc}", flush=True)
        sys.exit(3)
    sys.exit(0)
