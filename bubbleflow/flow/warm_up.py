"""A flow's kernels compiled before the run needs them: its first step,
its pressure set-up and its gas regions, on a small copy of the case, in
background threads.

On a GPU a kernel compiles (NVRTC) where it is first called: the
package's sources, and CuPy's own element-wise and reduction kernels that
the array code calls, each compiled once per machine and then found in
CuPy's cache on disk.  :func:`.compute.cuda.prefetch` builds the package's
sources in background threads while the case is built; which of CuPy's
kernels and which variants of the pressure solver's kernels a run calls
only running them tells.  :func:`start` runs them while the run's own
thread builds its case: one thread labels the gas regions of a small copy
of the case, another takes one step of it, a third sets up its pressure
solver and solves once (the step's first phases skipped, so the set-up's
kernels and the fused engine's modules are reached soonest).  Their state
is built on the host (the level set, and a fraction clipped from it), not
by the case build, whose kernels the run's thread is compiling meanwhile;
so they reach the step's kernels first, and the run then finds them
compiled (CuPy's caches and :mod:`.compute.cuda`'s are the process's).

Their results are discarded; a failure in them stops them and is kept on
the returned object (the run's own step meets any real fault itself), and
the process waits for them at its exit.  They run on one process with a
device only, on the caller's device.
"""
from __future__ import annotations

import atexit
import dataclasses

import numpy as np

from ..compute.host_cores import spare_cores
from ..mesh.grid import Grid
from ..mesh.levelset import build_levelset, geometry_circles
from .state import FlowState

__all__ = ["WARM_UP_CELLS", "MAX_COPY_CELLS", "small_cells", "small_copy_cells", "small_case",
           "host_state", "WarmUp", "jobs", "start"]

#: Cells of the small copy at most: a grid of more is halved along every
#: axis (while each keeps :data:`_MIN_AXIS_CELLS`), one of fewer kept as it is.
WARM_UP_CELLS = 1 << 17
_MIN_AXIS_CELLS = 16
#: Seconds the process waits at its exit for the warm-up's threads at most.
WAIT_AT_EXIT = 60.0


def small_cells(cells, limit=WARM_UP_CELLS):
    """``cells`` (per axis) halved along every axis while there are more
    than ``limit`` in all and each axis keeps at least 16 cells and an
    even count (so that the subdomain and multigrid divisions of the
    grid's powers of two hold on the copy)."""
    cells = tuple(int(n) for n in cells)
    while (int(np.prod(cells)) > limit
           and all(n % 2 == 0 and n // 2 >= _MIN_AXIS_CELLS for n in cells)):
        cells = tuple(n // 2 for n in cells)
    return cells


#: Cells of a small copy at most, odd counts included: a copy as large as
#: the run would cost it memory and time.
MAX_COPY_CELLS = 4 * WARM_UP_CELLS


def small_copy_cells(cells):
    """:func:`small_cells` of ``cells``, or None where those are more than
    :data:`MAX_COPY_CELLS` (odd counts that do not halve)."""
    small = small_cells(cells)
    return None if int(np.prod(small)) > MAX_COPY_CELLS else small


def small_case(case):
    """The case on :func:`small_copy_cells` of its grid (the same domain),
    or None where there are none."""
    g = case.grid
    names = ("nx", "ny", "nz")[:len(g.cells)]
    cells = small_copy_cells(g.cells)
    if cells is None:
        return None
    if cells == tuple(g.cells):
        return case
    return dataclasses.replace(case, grid=dataclasses.replace(g, **dict(zip(names, cells))))


def host_state(case, xp):
    """A state at rest of ``case`` built on the host: the level set of its
    geometry and, with CLSVOF, the fraction ``clip(1/2 - phi / h, 0, 1)``
    (a kernel's input, not an accurate fraction)."""
    g = Grid.from_config(case.grid)
    phi = build_levelset(g, case.geometry.free_surface, geometry_circles(case.geometry, g))
    c = None
    if case.levelset.method == "clsvof":
        c = xp.asarray(np.clip(0.5 - phi / min(g.spacing), 0.0, 1.0))
    velocity = []
    for a in range(g.ndim):
        shape = list(g.shape)
        shape[g.ndim - 1 - a] += 1
        velocity.append(xp.zeros(tuple(shape), dtype=np.float64))
    return FlowState(phi=xp.asarray(phi, dtype=np.float64), velocity=tuple(velocity),
                     p=xp.zeros(g.shape, dtype=np.float64), c=c)


class WarmUp:
    """The warm-up's background jobs (:func:`start`, one a callable of
    :func:`jobs`, on the caller's device:
    :func:`.compute.cuda.build_in_background`); ``errors`` the exceptions
    that stopped any of them (kept, not raised)."""

    def __init__(self, jobs, wait=WAIT_AT_EXIT):
        from ..compute import cuda

        self.errors = []
        self.jobs = cuda.build_in_background(*jobs, errors=self.errors)
        # A process ends with no kernel of theirs in flight.
        atexit.register(self.join, wait)

    def join(self, timeout=None):
        """Wait for the jobs (each up to ``timeout`` seconds)."""
        for job in self.jobs:
            job.join(timeout)


def jobs(case, backend):
    """The warm-up's work for the flow ``case`` on ``backend``: a list of
    callables (the gas regions of :func:`small_case`'s :func:`host_state`,
    one step of it with its diagnostics, and its first pressure set-up and
    solve from densities made on the host), each independent of the
    others.  ``ValueError`` where there is no small copy."""
    from .gas_regions import state_regions
    from .navier_stokes import FlowSolver

    small = small_case(case)
    if small is None:
        raise ValueError(f"no small copy of the {'x'.join(map(str, case.grid.cells))} grid")
    spacing = Grid.from_config(small.grid).spacing

    def regions():
        return state_regions(host_state(small, backend.xp), spacing)

    def step():
        solver = FlowSolver(small, backend)
        with np.errstate(all="ignore"):         # (thread-local: as the run's own steps)
            state, report = solver.step(host_state(small, backend.xp))
            solver.diagnostics(state)
        return report

    def pressure():
        # The set-up's and the solve's kernels without the step's phases
        # before them: reached while the run's own thread builds its case.
        solver = FlowSolver(small, backend)
        phi = host_state(small, np).phi
        faces = tuple(backend.xp.asarray(f) for f in solver.properties(phi)[3])
        A = solver.partition.operator(faces, solver.dtype, small.operator.storage, solver.width)
        rhs = np.cos(np.linspace(0.0, 7.0, phi.size)).reshape(phi.shape)
        return solver.pressure_solver(A, backend.xp.asarray(phi)).solve(
            backend.xp.asarray(rhs - rhs.mean()))[1]

    return [regions, step, pressure]


def start(case, backend):
    """Start the warm-up of the flow ``case`` on ``backend`` (one process):
    a :class:`WarmUp`, or None on the host or with no core to spare."""
    if not getattr(backend, "on_device", False) or spare_cores() < 2:
        return None
    try:
        work = jobs(case, backend)
    except Exception:                   # noqa: BLE001 - a warm-up never stops a run
        return None
    return WarmUp(work)
