"""NCCL work held in CUDA graphs, then a plain exit: ``mpiexec -n N python3
nccl_exit.py`` (tests/parallel/test_nccl_exit.py).  Every rank solves the
bubbly column on its slab over NCCL with the multigrid (its cycle captured
with the iteration in the fused engine's graphs) and with unpreconditioned
CG, keeps the engines alive in module globals as a run's solver keeps them,
prints ``solved`` and returns:
the process must then end at once (NCCL's destroy waits for every graph
holding its calls, so the communicator releases them first)."""
import sys

from bubbleflow.case.problem import bubbly_column
from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.comm import communicator
from bubbleflow.linalg.fused.ranks import engine_for
from bubbleflow.linalg.krylov import solve
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

    def select(system):
        engine = engine_for(system.A, system.prec_obj, system.prec_name, system.deflation,
                            system.variant, system.b)
        engine.direct_first = 0           # (graphs from the first iteration on: the subject)
        KEPT.append(engine)
        return engine

    for prec in (M, None):
        x, info = solve(Ad, Ad.scatter_local(b), rtol=1e-8, M=prec, maxiter=20000,
                        select=select)
        if not info.converged:
            sys.exit(f"rank {comm.rank}: the solve did not converge ({info.iterations} "
                     "iterations)")
        KEPT.append(x)
    KEPT.extend([Ad, M])
    graphs = len([ref for ref in comm._graphs if ref() is not None])
    print(f"solved rank {comm.rank} graphs {graphs} engine {info.engine}", flush=True)


if __name__ == "__main__":
    main()
