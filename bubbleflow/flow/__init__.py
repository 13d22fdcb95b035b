"""Time-dependent two-phase flow: MAC grid, level set, projection."""

__all__ = ["flow_solver"]


def flow_solver(case, backend, comm=None):
    """The time stepper of a ``mode: flow`` case (:class:`.navier_stokes.FlowSolver`):
    one class for every dimension, on one process or on the ranks of ``comm``."""
    from .navier_stokes import FlowSolver

    return FlowSolver(case, backend, comm)
