"""The state of a flow run (what a time step advances and a restart needs)
and the report of one step."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FlowState", "StepReport"]


@dataclass
class FlowState:
    """Everything a restart needs: level set, face velocities (grid-axis
    order), pressure, the clock, and with CLSVOF the gas volume fraction;
    ``u``, ``v``, ``w`` name the velocity's components.  On a rank, the
    fields of its slab."""

    phi: object
    velocity: tuple
    p: object
    time: float = 0.0
    step: int = 0
    c: object = None

    u = property(lambda self: self.velocity[0])
    v = property(lambda self: self.velocity[1])
    w = property(lambda self: self.velocity[2])


@dataclass
class StepReport:
    """What one time step did (host scalars, the whole grid's)."""

    step: int
    time: float
    dt: float
    record: object          # SolveRecord of the pressure solve
    setup_seconds: float    # operator + preconditioner + deflation for this interface
    #                         (also in ``record.setup_seconds``, with the solve's own)
    divergence: float       # ||div u|| / ||div u*||
    diagnostics: dict
    phases: dict = None     # seconds per phase, when the solver's phase clock is on
    bounds: dict = None     # the state's figures against its physical bounds (.bounds)
    shortened: int = 0      # times the step was done again, shorter (TRANSPORT_CFL)
