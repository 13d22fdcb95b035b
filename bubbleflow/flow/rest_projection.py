"""The first projection of a fluid at rest: a pressure case's system.

A pressure case solves the pressure of its fluid at rest as a flow's first
step would: the provisional velocity of ``u = 0`` after one step ``dt`` is
the forces' alone, and the right-hand side is ``f = -div(u*) / dt`` (here
``dt = 1``: ``f`` does not depend on it).  Gravity enters in either of the
flows' forms (``momentum.gravity``):

``volumetric``  ``u* = -G`` on the interior vertical faces: ``f`` is
                ``+G/h`` in the bottom row and ``-G/h`` in the top one
                (:func:`bubbleflow.operators.poisson.gravity_rhs`), and the
                answer is the whole pressure, hydrostatic included;
``reduced``     the interface force of :func:`.momentum.add_interface_force`
                (``(rho_l - rho_g) G (y_f - y0) dH/dy`` and, on the vertical
                faces, ``G (rho_hat - rho_f)``) over ``rho_f``: the answer
                is the dynamic part ``p_d``, and ``p = p_d - rho G (y - y0)``
                (cell density, cell height) is the same pressure face by face.

Why a pressure case takes the reduced form by default: the whole pressure
carries the hydrostatic part, whose rounding (``eps |p|`` times the gas
cells' large coefficients) floors CG's attainable residual above a 1e-8
tolerance on fine grids and at high contrast; the dynamic part reaches it
(docs/pressure_floor.md measures both).
"""
from __future__ import annotations

import numpy as np

from ..compute.backend import array_module
from ..mesh.grid import array_axis, interior_face_heights, vertical_heights
from ..operators.poisson import gravity_rhs
from . import momentum

__all__ = ["rest_rhs", "hydrostatic_part"]


def _reduced(form, gravity, rho_liquid, rho_gas):
    """Is the system reduced gravity's (a force to put at an interface)?"""
    return form == "reduced" and gravity != 0 and rho_liquid != rho_gas


def rest_rhs(grid, phases, gravity, form, rho_liquid, rho_gas, free_surface, planes=None):
    """``f`` of a fluid at rest (the module docstring) on the planes
    ``planes = (lo, hi)`` of the vertical axis (None: the whole grid), whose
    ``phases`` these are, on their backend, float64.

    With ``form="reduced"`` a plane that borders a plane not given (a rank's
    ghost plane) has its outer face's flux left out: only the inner planes
    are the whole problem's.
    """
    lo, hi = planes if planes is not None else (0, grid.shape[0])
    xp = array_module(phases.rho)
    if not _reduced(form, gravity, rho_liquid, rho_gas):
        return xp.asarray(gravity_rhs(grid, gravity)[lo:hi], dtype=np.float64)
    nd = grid.ndim
    rho = phases.rho
    H = (rho - rho_gas) / (rho_liquid - rho_gas)
    heights = interior_face_heights(grid, xp, (lo, hi))
    buoyancy = gravity * (rho_liquid - rho_gas)
    y0 = momentum.reduced_origin(free_surface)
    coefficients = momentum.interface_coefficients(H, grid.spacing, 0.0, heights, buoyancy, y0)
    reduced = momentum.ReducedGravity(gravity, rho_gas, rho_liquid)
    rho_faces = phases.faces
    velocity = []
    for a, h in enumerate(grid.spacing):
        k = array_axis(nd, a)
        shape = list(rho.shape)
        shape[k] += 1
        full = xp.zeros(tuple(shape))
        force = momentum.add_interface_force(None, H, coefficients, a, h, rho_faces, reduced)
        if force is not None:
            inner = [slice(None)] * nd
            inner[k] = slice(1, -1)
            full[tuple(inner)] = force / rho_faces[a]
        velocity.append(full)
    return momentum.pressure_rhs(tuple(velocity), grid.spacing, 1.0)[1]


def hydrostatic_part(grid, rho, gravity, form, rho_liquid, rho_gas, free_surface, planes=None):
    """What the solved pressure lacks of the whole one on the planes
    ``planes`` (``rho`` theirs): ``-rho G (y - y0)`` where :func:`rest_rhs`
    is the reduced form's, None where it is the volumetric one's (its
    answer is the whole pressure)."""
    if not _reduced(form, gravity, rho_liquid, rho_gas):
        return None
    lo, hi = planes if planes is not None else (0, grid.shape[0])
    xp = array_module(rho)
    cells, _ = vertical_heights(grid, xp, (lo, hi))
    return -gravity * rho * (cells - momentum.reduced_origin(free_surface))
