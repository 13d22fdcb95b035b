"""The state of a flow run: what a time step advances and a restart needs."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FlowState"]


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
