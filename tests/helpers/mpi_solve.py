"""One distributed solve per case, run by ``mpiexec -n N python3 mpi_solve.py OUT
[BACKEND [COMMUNICATOR]]`` (tests/parallel/test_mpi.py; BACKEND numpy or
cupy, COMMUNICATOR auto, mpi or nccl): every rank builds the whole problem,
keeps its slab (DistributedOperator.from_operator) and solves with the
Krylov loop; rank 0 gathers the answer, solves the same system in one
process and writes one JSON line per case to OUT: iterations of both, the
relative difference of the answers, the true relative residual of the
distributed answer, the communicator's name.  The ``solver:`` cases run
the one PressureSolver on the slab (its preconditioner and deflation space
by their registry entries' slab builders) and on the whole grid."""
import json
import sys

import numpy as np

from bubbleflow import PressureSolver, dpcg, pcg
from bubbleflow.linalg.deflation.distributed import DistributedDeflation
from bubbleflow.linalg.deflation.labels import levelset_subdomain_labels
from bubbleflow.linalg.deflation.space import Deflation
from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid
from bubbleflow.linalg.precond.block_ic import BlockIC, block_ic_on_slab
from bubbleflow.linalg.precond.incomplete_poisson import (DistributedIncompletePoisson,
                                                          DistributedScaledIncompletePoisson,
                                                          IncompletePoisson, ScaledIncompletePoisson)
from bubbleflow.linalg.precond.multigrid import Multigrid
from bubbleflow.case.problem import bubbly_column, bubbly_column_3d
from bubbleflow.compute.backend import backend_of, get_backend
from bubbleflow.compute.comm import communicator
from bubbleflow.compute.transfer import to_host
from bubbleflow.operators.distributed import DistributedOperator

CASES = [("2d", 48, None), ("2d", 48, "jacobi"), ("3d", 16, None), ("3d", 16, "jacobi"),
         ("2d", 48, "jacobi+lsd"), ("3d", 16, "jacobi+lsd"), ("3d", 16, "jacobi+lsd/def1"),
         ("2d", 64, "multigrid"), ("3d", 32, "multigrid"), ("2d", 64, "multigrid32w"),
         ("3d", 32, "multigrid32w"), ("2d", 64, "multigrid_slabs"), ("3d", 32, "multigrid_slabs"),
         ("2d", 48, "ips"), ("3d", 16, "ips"), ("2d", 48, "ips+lsd"),
         ("3d", 16, "ips+lsd"), ("2d", 48, "ip"), ("3d", 16, "ip"), ("2d", 48, "bic"),
         ("3d", 16, "bic"), ("2d", 48, "bic+lsd"), ("2d", 48, "solver:ips+lsd"),
         ("3d", 32, "solver:multigrid+stripes"), ("2d", 48, "solver:bic")]
CONTRAST, RTOL = 10.0, 1e-11
#: The PressureSolver's arguments of the ``solver:`` cases.
SOLVER_CASES = {
    "solver:ips+lsd": dict(method="dpcg", preconditioner="incomplete_poisson_scaled",
                           deflation="levelset_subdomains", cells_per_subdomain=8),
    "solver:multigrid+stripes": dict(method="dpcg", preconditioner="multigrid",
                                     deflation="stripes", stripes=4,
                                     preconditioner_options=dict(coarsest=64, min_side=2)),
    "solver:bic": dict(method="pcg", preconditioner="block_ic", block_lines=2),
}


def solver_case(A, Ad, b, phi, backend, comm, options):
    """A ``solver:`` case's fields of its line (rank 0; None elsewhere)."""
    xp = backend.xp
    options = dict(options, rtol=RTOL, maxiter=20000)
    lo, hi, _, _ = Ad.slab.extended()
    solver = PressureSolver(Ad, phi=phi[lo:hi], grid=A.grid, **options)
    xd, info = solver.solve(Ad.scatter_local(b))
    x = Ad.gather(xd)
    if comm.rank != 0:
        return None
    x1, info1 = PressureSolver(A, phi=phi, **options).solve(xp.asarray(b))
    x1 = to_host(x1, backend_of(x1))
    r = (b - b.mean()) - to_host(A @ xp.asarray(x), backend)
    return dict(ranks=comm.size, comm=comm.name, engine=info.engine, its=int(info.iterations),
                its_one=int(info1.iterations), converged=bool(info.converged),
                diff=float(np.abs(x - x1).max() / np.abs(x1).max()),
                residual=float(np.linalg.norm(r) / np.linalg.norm(b - b.mean())))


def main(out, backend_name="numpy", comm_name="auto"):
    backend = get_backend(backend_name)
    comm = communicator(comm_name, backend)
    comm.use_device(backend)
    xp = backend.xp
    lines = []
    for dim, n, prec in CASES:
        prec = prec or "none"
        if dim == "2d":
            A, b, phi = bubbly_column(n, CONTRAST, backend=backend_name)
        else:
            A, b, phi = bubbly_column_3d(n, CONTRAST, backend=backend_name)
        b = np.asarray(to_host(b, backend_of(b)), dtype=np.float64).ravel()
        phi = to_host(phi, backend_of(phi))
        Ad = DistributedOperator.from_operator(A, comm, align=4)
        if prec in SOLVER_CASES:
            line = solver_case(A, Ad, b, phi, backend, comm, SOLVER_CASES[prec])
            if line is not None:
                lines.append(dict(case=f"{dim} n={n} {prec}", **line))
            continue
        M, _, deflated = prec.partition("+")
        M = None if M == "none" else M
        M_one = M
        if M == "ips":
            M = DistributedScaledIncompletePoisson(Ad)
            M_one = ScaledIncompletePoisson(A)
        if M == "ip":
            M = DistributedIncompletePoisson(Ad)
            M_one = IncompletePoisson(A)
        if M == "bic":                  # blocks of 2 lines (the slabs' edges on multiples of 4)
            M = block_ic_on_slab(Ad, 2)
            M_one = BlockIC(A, 2)
        if M is not None and isinstance(M, str) and M.startswith("multigrid"):
            # The slabs' cycle and the same cycle in one process: float64 and
            # a V-cycle, or float32 with one W level; on CuPy, _slabs keeps
            # every level it can on the slabs (gathering none early).
            opts = dict(coarsest=64, min_side=2, cycle_precision="float64", w_levels=0)
            if M in ("multigrid32w", "multigrid_slabs"):
                opts.update(cycle_precision="float32", w_levels=1)
            gather = dict(gather_cells=0) if M == "multigrid_slabs" else {}
            M = DistributedMultigrid(Ad, **opts, **gather)
            M_one = Multigrid(A, **opts)
        variant = deflated.partition("/")[2] or "adef2"
        if deflated:
            # Level-set subdomains: boxes of 8 cells split into liquid and gas.
            labels = levelset_subdomain_labels(np.asarray(phi), *([n // 8] * A.ndim))
            lo, hi, _, _ = Ad.slab.extended()
            xd, info = dpcg(Ad, Ad.scatter_local(b), rtol=RTOL, M=M, maxiter=20000,
                            deflation=DistributedDeflation(Ad, labels[lo:hi]), variant=variant)
        else:
            xd, info = pcg(Ad, Ad.scatter_local(b), rtol=RTOL, M=M, maxiter=20000)
        x = Ad.gather(xd)
        if comm.rank != 0:
            continue
        if deflated:
            x1, info1 = dpcg(A, xp.asarray(b), rtol=RTOL, M=M_one, maxiter=20000,
                             variant=variant,
                             deflation=Deflation(A, xp.asarray(labels).ravel(), kind="labels"))
        else:
            x1, info1 = pcg(A, xp.asarray(b), rtol=RTOL, M=M_one, maxiter=20000)
        x1 = to_host(x1, backend_of(x1))
        r = (b - b.mean()) - to_host(A @ xp.asarray(x), backend)
        lines.append(dict(case=f"{dim} n={n} {prec}", ranks=comm.size, comm=comm.name,
                          engine=info.engine, its=int(info.iterations),
                          its_one=int(info1.iterations), converged=bool(info == 0),
                          diff=float(np.abs(x - x1).max() / np.abs(x1).max()),
                          residual=float(np.linalg.norm(r) / np.linalg.norm(b - b.mean()))))
    if comm.rank == 0:
        with open(out, "w") as fh:
            fh.write("\n".join(json.dumps(line) for line in lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
