"""Time-dependent two-phase flow: MAC grid, level set, projection."""

__all__ = ["flow_solver"]


def flow_solver(case, backend):
    """The time stepper of a ``mode: flow`` case for its grid's dimension: the
    2-D solver with its CUDA kernels (:class:`.navier_stokes.FlowSolver`), or
    the any-dimension array code in 3-D (:class:`.navier_stokes_nd.FlowSolverND`)."""
    from .navier_stokes import FlowSolver
    from .navier_stokes_nd import FlowSolverND

    solvers = {2: FlowSolver, 3: FlowSolverND}
    return solvers[case.grid.ndim](case, backend)
