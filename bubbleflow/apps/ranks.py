"""``mpiexec -n N bubbleflow run CASE``: a pressure or flow case on N
ranks (MPI between processes; on the GPU, NCCL where each rank has a GPU of
its own, else MPI through the host: :func:`bubbleflow.compute.comm.communicator`).

A pressure case: every rank reads the case and builds the problem; each
keeps its slab of the operator (:class:`~bubbleflow.operators.distributed.DistributedOperator`)
and runs the Krylov loop on it.  A flow case: each rank steps its slab
(:class:`~bubbleflow.flow.navier_stokes.FlowSolver` on a slab of each rank) in the
one-process run loop (:func:`.run.run_flow`), its snapshots gathered on
rank 0 (:class:`.rank_writer.RankWriter`); ``--restart`` reads the checkpoint on every
rank.  Rank 0 alone owns the output (its checks and lock before any work,
the layout of a one-process run) and speaks.  What the ranks do not have
yet is refused in one line before any work.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from ..io.compression import Compression
from ..linalg.registry import DEFLATIONS, PRECONDITIONERS, on_slabs

__all__ = ["run_case_ranks", "ABORT_GRACE"]

#: Seconds a failing rank waits between writing its report and ending every
#: rank: MPI's abort also ends the launcher's forwarding of what the ranks
#: wrote, and a report still on its way would be lost.
ABORT_GRACE = 0.5


def _refusal(case, backend, restart, ranks):
    """``(key, value, expected)`` of the first thing the ranks cannot run, or None."""
    from ..flow.reach import rank_refusal

    s = case.solver
    slow = ("grid", "nz") if case.grid.nz is not None else ("grid", "ny")
    planes = getattr(case.grid, slow[1])
    if planes < ranks:
        return ".".join(slow), planes, f"at least {ranks} (a slab of planes per rank)"
    if case.mode == "flow":
        refused = rank_refusal(case, ranks)
        if refused is not None:
            return refused
    elif restart is not None:
        return "mode", case.mode, "mode 'flow' (only time-dependent runs have checkpoints)"
    if s.method not in ("cg", "pcg", "dpcg"):
        return "solver.method", s.method, "cg, pcg or dpcg on several ranks"
    if case.precision != "float64":
        # A slab's solver works in float64 only: the file must not say otherwise.
        return "precision", case.precision, "float64 on several ranks"
    if s.deflation.type not in on_slabs(DEFLATIONS):
        return ("solver.deflation.type", s.deflation.type,
                " or ".join(on_slabs(DEFLATIONS)) + " on several ranks")
    m = s.preconditioner.block_lines
    if s.preconditioner.type == "block_ic" and case.grid.nz is None and planes // m < ranks:
        # 2-D blocks of m rows never straddle two slabs: each rank needs one.
        return ("solver.preconditioner.block_lines", m,
                f"at most ny / ranks = {planes // ranks} (a slab of whole blocks per rank)")
    if s.preconditioner.type not in on_slabs(PRECONDITIONERS):
        return ("solver.preconditioner.type", s.preconditioner.type,
                " or ".join(on_slabs(PRECONDITIONERS)) + " on several ranks")
    return None


def run_case_ranks(case, backend, comm, quiet=False, outdir=None, restart=None,
                   overwrite=False, progress=True, command=None):
    """Run ``case`` on the ranks of ``comm``; every rank returns the exit code."""
    from ..case.config import CaseError
    from ..io.outdir import RunOutput

    refused = _refusal(case, backend, restart, comm.size)
    if refused is not None:
        if comm.rank != 0:
            return 2                        # rank 0 says why, once
        key, value, expected = refused
        raise CaseError(case.source, key, f"got {value!r} with {comm.size} ranks", expected,
                        value=value)
    comm.use_device(backend)
    refused = _memory_refusal(case, backend, comm)
    if refused is not None:
        if comm.rank != 0:
            return 2
        raise CaseError.from_runtime(case, "grid", *refused, value=list(case.grid.cells))
    out = None
    flow = case.mode == "flow"
    if comm.rank == 0:
        try:
            out = RunOutput(case, outdir or case.output.directory, overwrite=overwrite,
                            restart=restart, flow=flow).__enter__()
            if restart is not None:
                _check_restart(case, backend, restart)
        except BaseException as exc:
            comm.broadcast(False)
            if out is not None:
                out.__exit__(type(exc), exc, exc.__traceback__)
            raise
        comm.broadcast(True)
    elif not comm.broadcast(None):
        return 2
    try:
        if flow:
            from .run import run_flow

            code = run_flow(case, backend, quiet=quiet or comm.rank != 0, out=out,
                            outdir=outdir, restart=restart, progress=progress and comm.rank == 0,
                            comm=comm, command=command)
        else:
            code = _solve(case, backend, comm, quiet, out)
    except BaseException as exc:
        if out is not None:
            out.__exit__(type(exc), exc, exc.__traceback__)
        if isinstance(exc, (Exception, KeyboardInterrupt)) and comm.size > 1:
            # The other ranks may be waiting in a collective for this one.
            import traceback

            from ..io.atomic import write_failure_line

            refused = write_failure_line(exc) if isinstance(exc, Exception) else None
            if isinstance(exc, KeyboardInterrupt):     # (a second Ctrl-C: no traceback)
                report = f"error: rank {comm.rank} of {comm.size} interrupted; ending every rank\n"
            elif refused is not None:                  # the storage's refusal: one line
                report = f"error: {case.name}: {refused}; ending every rank\n"
            else:
                report = (f"error: rank {comm.rank} of {comm.size} failed; ending every rank\n"
                          + traceback.format_exc())
            sys.stderr.write(report)
            sys.stderr.flush()
            time.sleep(ABORT_GRACE)
            comm.abort(1)
            if refused is not None:
                return 1        # said in its line (MPI's abort can return before the end)
        raise
    if out is not None:
        out.__exit__(None, None, None)
    return code


def _check_restart(case, backend, restart):
    """The checkpoint read and checked against ``case`` (rank 0, before any
    work: its one line then comes once)."""
    from ..flow import flow_solver
    from .restart import open_restart, restart_tracker

    open_restart(case, restart, backend, flow_solver(case, backend))
    restart_tracker(restart)            # (a bad tracker state: the same one line, once)


def slab_cells(case, rank, ranks):
    """The cells rank ``rank`` of ``ranks`` holds: its slab of planes
    widened by the planes its neighbours lend it (a pressure case's one
    plane a side, a flow's widest window), within the grid."""
    from ..flow.reach import thickest_window
    from ..linalg.solver import slab_align
    from ..mesh.grid import Grid
    from ..mesh.ranks import rank_slab

    grid = Grid.from_config(case.grid)
    slab = rank_slab(grid.shape, rank, ranks, slab_align(case.solver, grid, ranks))
    width = thickest_window(case) if case.mode == "flow" else 1
    planes = min(slab.hi + width, grid.shape[0]) - max(slab.lo - width, 0)
    return planes * math.prod(grid.shape[1:])


def _memory_refusal(case, backend, comm):
    """The ranks' memory check, agreed by every rank: each weighs the
    cells it holds (:func:`slab_cells`) against its device's free memory,
    shared with the ranks on that device.  ``(problem, expected)`` of the
    first rank refused, or None."""
    from ..case.resources import memory_refusal

    _, refusal = memory_refusal(case, backend, cells=slab_cells(case, comm.rank, comm.size),
                                sharing=comm.sharing(backend), ranks=comm.size)
    refused = [bool(flag[0]) for flag in comm.allgather(np.array([refusal is not None]))]
    if not any(refused):
        return None
    return comm.broadcast(refusal, root=refused.index(True))


def slab_problem(case, backend, comm):
    """This rank's part of a pressure case: ``(prob, A, own)``, the problem
    built on the rank's widened slab alone, on its own device (no host holds
    the whole problem: a grid too large for one GPU is shared), the slab's
    distributed operator, and the slab's planes among the widened ones."""
    from ..case.problem import build_pressure_problem
    from ..linalg.solver import slab_align
    from ..mesh.grid import Grid
    from ..mesh.ranks import rank_slab
    from ..operators.distributed import DistributedOperator

    grid = Grid.from_config(case.grid)
    slab = rank_slab(grid.shape, comm.rank, comm.size, slab_align(case.solver, grid, comm.size))
    lo, hi, _, _ = slab.extended()
    prob = build_pressure_problem(case, backend, planes=(lo, hi))
    A = DistributedOperator.from_couplings(prob.A.couplings(), slab, comm, backend, first=lo)
    return prob, A, slice(slab.lo - lo, slab.hi - lo)


def _solve(case, backend, comm, quiet, out):
    from .. import __version__
    from ..linalg.solver import PressureSolver
    from .run import write_pressure_files

    s = case.solver
    prob, A, own = slab_problem(case, backend, comm)
    quiet = quiet or comm.rank != 0
    cells = " x ".join(map(str, prob.grid.cells))
    _say(quiet, f"{case.name}: {cells} cells on {comm.size} ranks (slabs of "
                f"{A.slab.hi - A.slab.lo} planes on rank 0); solver {s.method}, preconditioner "
                f"{s.preconditioner.type}, rtol {s.rtol:g}")
    solver = PressureSolver.from_config(A, s, phi=prob.phi, grid=prob.grid)
    if s.preconditioner.type == "multigrid":
        M, o = solver.M, s.preconditioner
        _say(quiet, f"multigrid: {M.n_levels} levels, {M.gathered} on the slabs, "
                    f"{o.cycle_precision} cycle, {M.w_levels} W levels")
    if solver.deflation is not None:
        _say(quiet, f"deflation {s.deflation.type}: {solver.deflation.n_vectors} vectors, "
                    f"{s.variant}")
    x, record = solver.solve(prob.rhs[own].ravel())
    p = A.gather(prob.whole_pressure(x, own))
    phi, rho = A.gather(prob.phi[own]), A.gather(prob.phases.rho[own])
    if comm.rank != 0:
        return 0 if record.converged else 1
    p = prob.gauged(p)
    g = prob.grid
    # The other ranks have returned: a failed write is rank 0's one line and exit code.
    if not write_pressure_files(
            case.name, out.path, case_yaml=case.to_yaml(), version=__version__,
            backend=backend.name, device=f"{comm.size} ranks, {backend.device_name}",
            precision=case.precision, face_density=case.operator.face_density, grid=g,
            phi=phi.reshape(g.shape), rho=rho.reshape(g.shape), p=p.reshape(g.shape),
            record=record,
            compression=Compression.for_output(case.output, "pressure")):
        return 1
    if record.converged:
        _say(quiet, record.summary())
        _say(quiet, f"pressure range {float(p.min()):.6g} .. {float(p.max()):.6g} Pa; wrote "
                    f"{out.path}")
        return 0
    print(f"error: {case.name}: pressure solve failed: reason {record.reason} after "
          f"{record.iterations} iterations, true relative residual {record.residual:.3e} "
          f"(rtol {s.rtol:g}); wrote {out.path}", file=sys.stderr, flush=True)
    return 1


def _say(quiet, text):
    if not quiet:
        print(text, flush=True)
