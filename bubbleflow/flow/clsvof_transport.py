"""The transport of a CLSVOF step: the volume fraction and the level set
carried by the step's velocity, confined to the gas's box on large grids.

After the transport the level set is rebuilt from the volume fraction
(:func:`.vof_redistance.redistance`): in its band from the new PLIC
interface, whose planes take the normals of the carried level set in the
interface cells, and outside the band from the volume fraction's side
alone.  So of the carried level set only the interface cells' normals
matter, and of the volume fraction only the cells with gas change
(:func:`.vof_advection.advect_in_box`).  Where each sweep carries the gas
at most one cell, both are carried on the gas's box widened by the cells
they read (:data:`.vof_advection.BOX_MARGIN`, :data:`LEVEL_SET_MARGIN`),
and the rebuilt level set and the volume fraction are the whole grid's,
bit for bit.
"""
from __future__ import annotations

from ..compute.backend import array_module
from . import boxes, levelset, vof_advection

__all__ = ["transport", "KeptLevelSet", "LEVEL_SET_MARGIN"]

#: Cells past the gas's box where the carried level set is read: the new
#: interface cells lie within a cell of the old gas (one cell a sweep, each
#: axis once), their normals read their neighbours (1), TVD-RK3's three
#: stages of WENO5 read 9 cells, and one to spare.
LEVEL_SET_MARGIN = 12


def transport(phi, c, velocity, dt, spacing, first_axis, bounded, gas=boxes.UNKNOWN,
              carried=None):
    """``(phi, c)`` carried one step: the volume fraction by
    :func:`.vof_advection.advect` with the normals of ``phi`` (its sweeps
    from array axis ``first_axis``), the level set by
    :func:`.levelset.advect`.  ``bounded``: each sweep carries the gas at
    most one cell; then, on grids large enough (:func:`.boxes.worth_a_box`),
    each is carried on the gas's box where its widened box holds at most
    :data:`.boxes.MAX_SHARE` of the grid (the level set elsewhere left as
    it was, which the rebuild does not read), and neither is carried where
    there is no gas.  ``gas``: :func:`.boxes.gas_box` of ``c`` where the
    caller has it.  ``carried``: an array of ``phi``'s shape and dtype that
    takes the level set carried on the box (no copy of the rest of
    ``phi``), its other cells left as they were, which the rebuild does not
    read; the returned level set is then ``carried``."""
    box = None
    if bounded and boxes.worth_a_box(c):
        box = boxes.gas_box(c) if gas is boxes.UNKNOWN else gas
        if box is None:
            # No gas (a rank's slab far from the bubbles): the sweeps leave
            # every cell as it is, and the rebuild reads no carried level set.
            return phi.copy(), c.copy()
    if boxes.spares(box, vof_advection.BOX_MARGIN, c.shape):
        c_new = vof_advection.advect_in_box(c, velocity, dt, spacing, box, first_axis, phi)
    else:
        c_new = vof_advection.advect(c, velocity, dt, spacing, first_axis, phi)
    if not boxes.spares(box, LEVEL_SET_MARGIN, phi.shape):
        return levelset.advect(phi, velocity, dt, spacing), c_new
    cut = boxes.region(box, LEVEL_SET_MARGIN, phi.shape)
    return boxes.in_region(levelset.advect, phi, velocity, cut, dt, spacing, out=carried), c_new


class KeptLevelSet:
    """The array a flow's transport carries its level set into on the gas's
    box (:func:`transport`'s ``carried``), kept from step to step."""

    def __init__(self):
        self.array = None

    def for_level_set(self, phi):
        """The kept array for ``phi``'s grid (zeros at first, or for another
        shape or dtype), or None where the grid takes no box."""
        if not boxes.worth_a_box(phi):
            return None
        kept = self.array
        if kept is None or kept.shape != phi.shape or kept.dtype != phi.dtype \
                or type(kept) is not type(phi):
            kept = self.array = array_module(phi).zeros_like(phi)
        return kept
