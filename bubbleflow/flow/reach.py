"""How far a flow step reaches: the CLSVOF band and curvature filter, the
interface's most travel in a step, and the planes of each neighbour a
rank's slab is widened by for each phase (with the plane counts a number of
ranks can take).  The stepper (:mod:`.navier_stokes`) and the ranks' set-up
(:mod:`bubbleflow.apps.ranks`) read them."""
from __future__ import annotations

from ..mesh.grid import Grid
from .partition import planes_grid, slab_alignment, thinnest_slab

__all__ = ["CLSVOF_CURVATURE_PASSES", "CLSVOF_BAND", "TRANSPORT_CFL", "MAX_SHORTENED_STEPS",
           "WINDOW", "CLSVOF_WINDOW", "ADVECT_WINDOW", "momentum_window", "thickest_window",
           "rank_refusal"]

#: Passes of :func:`.levelset.smooth` over the level set of CLSVOF (the
#: distance to the PLIC interface) before its curvature is taken; the level
#: set alone is used as it is.
CLSVOF_CURVATURE_PASSES = 4
#: Half-width in cells of the band CLSVOF rebuilds every step (and its search
#: reach): every value the filtered curvature reads at a face the surface
#: tension acts on (2 cells from an interface cell, eps = 1.5 h), through the
#: curvature's stencil (1) and the filter (1 a pass), is a rebuilt distance.
#: Outside the band the level set is the band's width with the volume
#: fraction's sign; a narrower band let the values outside it bend the
#: curvature and slowed Hysing's case-1 bubble under refinement
#: (docs/interface_study.md).
CLSVOF_BAND = 3 + CLSVOF_CURVATURE_PASSES
#: The most cells the new velocity of a step may carry the interface along
#: an axis: the volume fraction's split advection stays within [0, 1] for
#: ``|u| dt <= h / 2`` (Weymouth and Yue 2010), and the level set's
#: upwind stencils reach as far.  A longer step is done again, shorter.
TRANSPORT_CFL = 0.5
#: How often one step may be done again, shorter (each time the velocity
#: it ends with is smaller: two suffice from rest in the shipped cases).
MAX_SHORTENED_STEPS = 4
#: Planes of each neighbour a rank's slab is widened by for the momentum
#: phase: the reach of its stencils (face density, advection, stress,
#: interface force) from a face at the slab's end; the smoothing passes
#: before the curvature add theirs (:func:`momentum_window`).
WINDOW = 4
#: Planes for CLSVOF's volume fraction: its advection (the level set's
#: normals, one sweep an axis) and its redistancing (the band, then the
#: search ``band + 1`` cells further, from patches a cell or two wide).
CLSVOF_WINDOW = CLSVOF_BAND + 5
#: Planes for the level set's transport: WENO5 reads 3 cells a side in each
#: of TVD-RK3's 3 stages.  On a slab widened by as many, the one-process
#: function (a kernel on a GPU) gives the slab's cells one process's values,
#: with one swap a field instead of one a stage.
ADVECT_WINDOW = 9

def momentum_window(case):
    """The momentum phase's widening of a rank's slab for ``case``."""
    return WINDOW + (CLSVOF_CURVATURE_PASSES if case.levelset.method == "clsvof" else 0)


def thickest_window(case):
    """The most planes of a neighbour any phase of ``case`` reads."""
    clsvof = case.levelset.method == "clsvof"
    return max(momentum_window(case), ADVECT_WINDOW, CLSVOF_WINDOW if clsvof else 0)


def rank_refusal(case, ranks):
    """``(key, value, expected)`` of the first thing of the flow ``case``
    that ``ranks`` ranks cannot run, or None: slabs thinner than the widest
    window the phases read from a neighbour."""
    grid = Grid.from_config(case.grid)
    planes = grid.shape[0]
    slow = "grid." + ("nz" if grid.ndim == 3 else "ny")
    need = thickest_window(case) + 1
    try:
        if thinnest_slab(case.solver, grid, planes, ranks) >= need:
            return None
    except ValueError:
        return None         # the solver's own refusal names why (apps.ranks)
    # Slab edges on the solver's alignment (multigrid's aggregates) can leave
    # one slab thinner than an even share: name a count that works.
    fits = next(p for p in range(max(planes, need * ranks), 64 * need * ranks)
                if thinnest_slab(case.solver, grid, p, ranks) >= need)
    align = slab_alignment(case.solver, planes_grid(grid, fits), ranks)
    return (slow, planes, f"a count whose slabs have {need} planes a rank for the neighbours' "
                          f"stencils, such as {fits}"
                          + (f" (slab edges on multiples of {align})" if align > 1 else ""))
