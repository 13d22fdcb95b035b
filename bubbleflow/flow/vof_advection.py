"""Conservative advection of the gas volume fraction (Weymouth and Yue 2010).

``c_t + div(c u) = 0`` advanced one step, direction split: one sweep per
axis with geometric PLIC fluxes (the gas in the donor cell's upwind slab,
cut by its plane: :mod:`.plic_reconstruction`, :func:`.plic.cut_fraction`)
plus a dilatation term whose cell indicator is frozen over the step
(Weymouth and Yue, J. Comput. Phys. 229, 2010): with a discretely
divergence-free velocity the gas volume is conserved to rounding.

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``velocity`` the MAC face components in grid-axis order, zero on the walls.

The CUDA kernels (:mod:`.vof_cuda`, one launch a sweep) are
:func:`advect`'s ``"cupy"`` variant; they follow this code's order of
operations and give its bits.

A sweep leaves an empty cell among empty neighbours as it was, bit for bit
(no flux, an indicator of zero).  So where each sweep carries the gas at
most one cell, the step on the gas's box widened by :data:`BOX_MARGIN`
cells, the box's faces taken as walls, gives the whole grid's bits
(:func:`advect_in_box`); the flow takes that path where it spares most of
a large grid (:mod:`.clsvof_transport`).
"""
from __future__ import annotations

from ..compute.backend import array_module
from ..compute.twins import twin
from ..mesh.grid import array_axis
from . import boxes, vof_cuda
from .face_velocity import check_velocity
from .plic import cut_fraction
from .plic_reconstruction import interface_normal, plane_constants_where
from .vof_limits import CLIP_TOLERANCE, times_cell_volume

__all__ = ["advect", "advect_in_box", "BOX_MARGIN"]

#: Cells round the gas's box that :func:`advect_in_box` sweeps besides: the
#: gas reaches one cell further along each axis in a step (one cell a sweep,
#: each axis swept once), a donor's plane reads its neighbours and a flux
#: reads its donor (three cells), and one to spare; the box's faces then meet
#: empty cells only.
BOX_MARGIN = 4


def _sweep(c, indicator, vel, dt, spacing, normal, alpha, a, xp):
    """One conservative sweep along grid axis ``a``:
    ``c - (F_out - F_in) + indicator dt/h (vel_out - vel_in)``, ``F`` the gas
    in the donor's upwind slab of width ``|vel| dt`` (in units of the cell
    volume), ``normal`` and ``alpha`` the cells' PLIC planes."""
    nd = c.ndim
    k = array_axis(nd, a)
    last = lambda x: xp.moveaxis(x, k, -1)              # noqa: E731
    c, indicator, vel, alpha = last(c), last(indicator), last(vel), last(alpha)
    others = [b for b in range(nd) if b != a]
    comps = [last(normal[a])] + [last(normal[b]) for b in others]
    h = spacing[a]
    w = vel[..., 1:-1]
    width = xp.abs(w) * dt
    right = w > 0.0                                      # gas comes from the lower cell
    ms = [xp.where(right, m[..., :-1], m[..., 1:]) for m in comps]
    # The slab is the donor's last `width` above, or its first below: move
    # the plane's origin to the slab's lowest corner.
    shifted = xp.where(right, alpha[..., :-1] - comps[0][..., :-1] * (h - width), alpha[..., 1:])
    donor = xp.where(right, c[..., :-1], c[..., 1:])
    # Full and empty donors give exact fluxes, free of the plane's rounding;
    # the planes are cut for the others only.
    frac = xp.where(donor >= 1.0, 1.0, 0.0)
    cut = _mixed(donor)
    frac[cut] = cut_fraction(tuple(m[cut] for m in ms), shifted[cut],
                             (width[cut],) + tuple(spacing[b] for b in others))
    inner = w * (dt / h) * frac
    zero = xp.zeros_like(c[..., :1])
    flux = xp.concatenate([zero, inner, zero], axis=-1)  # no gas through walls
    dilatation = (vel[..., 1:] - vel[..., :-1]) * (dt / h)
    out = c - (flux[..., 1:] - flux[..., :-1]) + indicator * dilatation
    return xp.moveaxis(out, -1, k)


def _mixed(c):
    """Where ``c`` is neither empty (``<= 0``) nor full (``>= 1``): the cells
    whose plane the fluxes read (NaN included, which then spreads as in the
    whole-array arithmetic)."""
    return ~(c <= 0.0) & ~(c >= 1.0)


@twin
def advect(c, velocity, dt, spacing, first_axis=0, normal_from=None, info=None):
    """Advance the gas volume fraction one step of ``c_t + div(c u) = 0``.

    Direction split (Weymouth and Yue 2010): one sweep per axis, the array
    axes in the cyclic order ``first_axis, first_axis + 1, ...`` (pass
    ``step % ndim`` to rotate it from step to step, which keeps the
    splitting error symmetric), each ``c <- c - dt/h (F_out - F_in) + dt/h
    c_c (u_out - u_in)``: ``F`` the geometric PLIC flux (the gas in the
    donor cell's upwind slab of width ``|u| dt``, from the plane
    reconstructed at the start of the sweep) and ``c_c = [c > 1/2]`` at the
    start of the step, the same for every sweep.  The flux differences
    telescope and the ``c_c`` terms add to ``c_c dt div(u)``, so with a
    discretely divergence-free velocity the gas volume changes by rounding
    only.

    Afterwards excursions below :data:`.vof_limits.CLIP_TOLERANCE` outside
    ``[0, 1]`` are clipped: the only departure from exact conservation, of
    the size of the rounding, reported through ``info``.

    Parameters
    ----------
    c : array
        Gas volume fraction at time ``t``.
    velocity : tuple of arrays
        MAC face velocities in grid-axis order, zero on the walls.
    dt : float
        Time step.  Boundedness needs ``dt max|u_a| / h_a <= 1/2`` per axis;
        choosing it is the caller's job.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    first_axis : int
        Array axis swept first (in 2-D ``0`` is y, ``1`` is x).
    normal_from : array, optional
        Level set for the PLIC normals of every sweep (CLSVOF); by default
        Youngs' normals of the sweep's ``c``.
    info : dict, optional
        Filled with ``"clipped"`` (the gas volume the clip added, a float)
        and ``"excursion"`` (the largest distance of ``c`` outside ``[0, 1]``
        left after the clip; zero in a bounded run).

    Returns
    -------
    array
        ``c`` at ``t + dt`` (a new array; ``c`` is not modified).
    """
    xp = array_module(c, *velocity)
    nd = c.ndim
    check_velocity(c, velocity, "c", "volume fraction")
    if first_axis not in range(nd):
        raise ValueError(f"first_axis={first_axis!r}: expected an array axis below {nd}")
    indicator = xp.where(c > 0.5, 1.0, 0.0)
    # The level set's normals serve every sweep; Youngs' follow c.
    fixed = interface_normal(c, spacing, normal_from) if normal_from is not None else None
    new = c
    for i in range(nd):
        a = array_axis(nd, (first_axis + i) % nd)
        m = fixed if fixed is not None else interface_normal(new, spacing)
        # Full and empty donors' fluxes are exact: only mixed cells' planes are read.
        alpha = plane_constants_where(m, new, spacing, _mixed(new))
        new = _sweep(new, indicator, velocity[a], dt, spacing, m, alpha, a, xp)
    new = xp.ascontiguousarray(new)
    low = (new < 0.0) & (new > -CLIP_TOLERANCE)
    high = (new > 1.0) & (new < 1.0 + CLIP_TOLERANCE)
    clipped = xp.where(low, 0.0, xp.where(high, 1.0, new))
    if info is not None:
        info["clipped"] = times_cell_volume(float(xp.sum(clipped - new)), spacing)
        info["excursion"] = max(0.0, float(xp.max(xp.maximum(-clipped, clipped - 1.0))))
    return clipped


def advect_in_box(c, velocity, dt, spacing, box, first_axis=0, normal_from=None):
    """:func:`advect` on the cells of ``box`` (:func:`.boxes.gas_box`'s)
    widened by :data:`BOX_MARGIN`, its faces taken as walls; ``c`` elsewhere.
    The bits of :func:`advect` on the whole grid where each sweep carries the
    gas at most one cell (``|u_a| dt <= h_a``), as the flow's adaptive step
    ensures: outside the widened box every cell is empty and stays so."""
    xp = array_module(c, *velocity)
    check_velocity(c, velocity, "c", "volume fraction")
    cut = boxes.region(box, BOX_MARGIN, c.shape)
    inside = None if normal_from is None else xp.ascontiguousarray(normal_from[cut])
    return boxes.in_region(advect, c, velocity, cut, dt, spacing, first_axis, inside)


# The kernels: one launch per sweep; NotImplemented (the array code runs)
# for what they do not cover.
advect.register("cupy")(vof_cuda.advect)
