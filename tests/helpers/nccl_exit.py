"""NCCL work held in CUDA graphs, then a plain exit: ``mpiexec -n N python3
nccl_exit.py`` (tests/parallel/test_nccl_exit.py).  Every rank solves the
bubbly column on its slab over NCCL with the multigrid (its cycle one graph)
and with unpreconditioned CG (the fused engine's graphs), keeps the solvers
alive in module globals as a run keeps them, prints ``solved`` and returns:
the process must then end at once (NCCL's destroy waits for every graph
holding its calls, so the communicator releases them first)."""
import sys

from bubbleflow import pcg
from bubbleflow.case.problem import bubbly_column
from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.comm import communicator
from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid
from bubbleflow.operators.distributed import DistributedOperator

KEPT = []


def main():
    backend = get_backend("cupy")
    comm = communicator("nccl", backend)
    A, b, _ = bubbly_column(64, 10.0, backend="cupy")
    b = backend.to_host(b).ravel()
    Ad = DistributedOperator.from_operator(A, comm, align=4)
    M = DistributedMultigrid(Ad, coarsest=64, min_side=2)
    for prec in (M, None):
        x, info = pcg(Ad, Ad.scatter_local(b), rtol=1e-8, M=prec, maxiter=20000)
        if info != 0:
            sys.exit(f"rank {comm.rank}: the solve did not converge ({info})")
        KEPT.append((x, info))
    KEPT.extend([Ad, M])
    graphs = len([ref for ref in comm._graphs if ref() is not None])
    print(f"solved rank {comm.rank} graphs {graphs} engine {info.engine}", flush=True)


if __name__ == "__main__":
    main()
