"""Flow steps on the ranks' slabs, run by ``mpiexec -n N python3
mpi_flow.py OUT [cupy]`` (tests/parallel/test_mpi.py): each rank steps its
slab of a small flow case (the stepper on a slab); rank 0 gathers the states,
steps the same case in one process (the same stepper) and writes one JSON line
per case: the largest difference of each field relative to its largest
value, the pressure iterations of every step on the ranks and in one
process, the steps' diagnostics' largest relative difference, and the
viscous Chebyshev sweeps rank 0 ran with the kernels on its slab."""
import json
import math
import os
import sys

import numpy as np

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.comm import communicator
from bubbleflow.flow import boxes, flow_solver
from bubbleflow.flow.partition import whole_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL_2D = ["grid.nx=16", "grid.ny=40", "solver.rtol=1e-12", "momentum.viscosity=explicit",
            "levelset.method=levelset"]
SMALL_3D = ["grid.nx=8", "grid.ny=8", "grid.nz=48", "solver.rtol=1e-12", "levelset.method=levelset"]
#: DPCG with scaled incomplete Poisson and level-set subdomains (the Hysing
#: cases take multigrid); the subdomain counts are given per case.
DPCG = ["solver.method=dpcg", "solver.variant=adef2",
        "solver.preconditioner.type=incomplete_poisson_scaled",
        "solver.deflation.type=levelset_subdomains"]
SMALL_CLSVOF_3D = ["grid.nx=12", "grid.ny=12", "grid.nz=64", "solver.rtol=1e-12",
                   "levelset.method=clsvof", "solver.preconditioner.coarsest=16",
                   "solver.preconditioner.min_side=2"]
#: (name, case file, overrides, steps): DPCG with scaled IP and
#: level-set subdomains (reinitialised at step 5), multigrid, 3-D with
#: reduced gravity and multigrid; slabs of at least 10 planes (the level
#: set's transport) on 4 ranks.
CASES = [
    ("2-D dpcg", "cases/two_phase.yaml",
     SMALL_2D + DPCG + ["solver.deflation.subdomains=[2,5]"], 6),
    ("2-D multigrid", "cases/bubbly_column_flow.yaml",
     SMALL_2D + ["grid.ny=48", "solver.preconditioner.coarsest=16",
                 "solver.preconditioner.min_side=2"], 3),
    ("3-D multigrid", "cases/rising_bubble_3d.yaml",
     SMALL_3D + ["solver.preconditioner.coarsest=16", "solver.preconditioner.min_side=2"], 3),
    # Hysing's case 2: the implicit viscous solves (auto), DPCG.
    ("2-D implicit viscosity", "cases/hysing_case2.yaml",
     ["grid.nx=16", "grid.ny=40", "solver.rtol=1e-12", *DPCG, "solver.deflation.subdomains=[2,5]",
      "momentum.viscous_rtol=1e-12", "momentum.viscosity=implicit", "levelset.method=levelset"],
     3),
    ("3-D implicit viscosity", "cases/rising_bubble_3d.yaml",
     SMALL_3D + ["momentum.viscosity=implicit", "momentum.viscous_rtol=1e-12"], 2),
    # CLSVOF: slabs of at least 13 planes on 4 ranks.
    ("2-D clsvof", "cases/two_phase.yaml",
     SMALL_2D[:1] + ["grid.ny=56", "solver.rtol=1e-12", "momentum.viscosity=explicit",
                     "levelset.method=clsvof", *DPCG, "solver.deflation.subdomains=[2,7]"], 3),
    ("3-D clsvof", "cases/rising_bubble_3d.yaml", SMALL_CLSVOF_3D, 2),
    # The same with the work on the gas's and the interface's boxes (each
    # rank's on its widened slab), taken at any size here.
    ("3-D clsvof on boxes", "cases/rising_bubble_3d.yaml", SMALL_CLSVOF_3D, 2),
]
#: The cases run with the boxes taken wherever they leave a cell out.
ON_BOXES = {"3-D clsvof on boxes"}


def diagnostic_difference(got, one):
    """Relative difference of two diagnostics: 0 for two NaNs (no gas),
    infinite for one."""
    if math.isnan(got) or math.isnan(one):
        return 0.0 if math.isnan(got) and math.isnan(one) else math.inf
    return abs(got - one) / max(abs(one), 1e-300)


def relative(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def counted_slab_sweeps():
    """A list that counts the ranks' viscous Chebyshev sweeps the kernels
    ran (:func:`bubbleflow.flow.viscosity_cuda.slab_chebyshev_sweep`)."""
    from bubbleflow.flow import viscosity_cuda

    ran, sweep = [], viscosity_cuda.slab_chebyshev_sweep

    def counting(*args):
        out = sweep(*args)
        if out is not NotImplemented:
            ran.append(1)
        return out

    viscosity_cuda.slab_chebyshev_sweep = counting
    return ran


def main(path, backend_name="numpy"):
    backend = get_backend(backend_name)
    comm = communicator("auto", backend)
    comm.use_device(backend)
    kernel_sweeps = counted_slab_sweeps()
    lines = []
    module = backend.xp.__name__
    defaults = boxes.MIN_CELLS[module], boxes.MAX_SHARE
    for name, file, overrides, steps in CASES:
        boxes.MIN_CELLS[module], boxes.MAX_SHARE = (1, 0.99) if name in ON_BOXES else defaults
        case = load_case(os.path.join(ROOT, file), overrides)
        kernel_sweeps.clear()
        ranked = flow_solver(case, backend, comm)
        state, its, diags, engines, queued = ranked.initial_state(), [], [], [], 0
        for _ in range(steps):
            state, rep = ranked.step(state)
            its.append(rep.record.iterations)
            diags.append(rep.diagnostics)
            engines.append(rep.record.engine)
            queued += ranked._pressure.accepted_behind is not None
        sweeps = len(kernel_sweeps)
        whole = whole_state(state, comm)
        if comm.rank != 0:
            continue
        one = flow_solver(case, backend)
        ref, its_one, diags_one = one.initial_state(), [], []
        for _ in range(steps):
            ref, rep = one.step(ref)
            its_one.append(rep.record.iterations)
            diags_one.append(rep.diagnostics)
        h = backend.to_host
        diff = {"phi": relative(whole.phi, h(ref.phi)), "p": relative(whole.p, h(ref.p))}
        if ref.c is not None:
            diff["c"] = relative(whole.c, h(ref.c))
        for a, (v, w) in enumerate(zip(whole.velocity, ref.velocity)):
            diff["uvw"[a]] = relative(v, h(w))
        worst = max(diagnostic_difference(d[k], e[k]) for d, e in zip(diags, diags_one) for k in e)
        lines.append(dict(case=name, ranks=comm.size, comm=comm.name, diff=diff, its=its,
                          its_one=its_one,
                          kernel_sweeps=sweeps, engines=engines, queued_behind=queued,
                          queue_behind=ranked.queue_behind_solve, redone=ranked.ends_redone,
                          diagnostics=worst, time=state.time, time_one=ref.time))
    if comm.rank == 0:
        with open(path, "w") as fh:
            fh.write("\n".join(json.dumps(line) for line in lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
