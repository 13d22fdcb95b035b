"""A flow's first state: the fluid at rest and the interface from the
case's geometry, built on the backend where the run steps.

On ranks each rank builds its slab and a plane of each neighbour (the
level set's distances reach across the slab's edges), then keeps its own
planes (:class:`.partition.RankSlabs`); one process builds the whole grid.
With CLSVOF the gas fraction is the level set's: in 2-D one cut per cell;
in 3-D, where one cut per cell makes a sphere too large by ``0.26
(h/R)^2``, 4^3 sub-cells cut along the cell's quadratic model of phi
(:func:`.vof_fraction.volume_fraction`).
"""
from __future__ import annotations

from ..mesh.levelset import build_levelset, geometry_circles
from . import vof_fraction
from .state import FlowState

__all__ = ["initial_state", "initial_fraction"]


def initial_fraction(phi, spacing):
    """The gas fraction of the initial level set ``phi`` (see the module)."""
    if phi.ndim == 2:
        return vof_fraction.volume_fraction(phi, spacing)
    return vof_fraction.volume_fraction(phi, spacing, samples=4, fit="quadratic")


def initial_state(case, grid, backend, partition, dtype, clsvof):
    """The :class:`.state.FlowState` at t = 0 of ``case`` on ``grid``, on
    ``backend`` (the partition's slab on ranks), its fields of ``dtype``;
    ``clsvof``: with the gas fraction."""
    xp = backend.xp
    first, stop = partition.initial_planes()
    phi = xp.asarray(build_levelset(grid, case.geometry.free_surface,
                                    geometry_circles(case.geometry, grid),
                                    backend=backend, planes=(first, stop)), dtype=dtype)
    c = initial_fraction(phi, grid.spacing) if clsvof else None
    velocity = []
    for a in range(grid.ndim):
        shape = list(partition.local_shape)
        shape[grid.ndim - 1 - a] += 1
        velocity.append(xp.zeros(tuple(shape), dtype=dtype))
    return FlowState(phi=partition.own(phi, first), velocity=tuple(velocity),
                     p=xp.zeros(partition.local_shape, dtype=dtype),
                     c=None if c is None else partition.own(c, first))
