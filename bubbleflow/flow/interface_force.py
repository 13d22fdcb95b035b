"""The interface force's coefficients of a flow step.

The surface tension takes the curvature of the level set filtered by a few
passes (:func:`.levelset.smooth`: a level set rebuilt from PLIC patches
carries a noise in its second differences), and reduced gravity adds its
potential (:func:`.momentum.interface_coefficients`).  The force is
``-c_a dH/dx_a`` on each face, so the coefficients matter only on the faces
where the Heaviside changes: next to a cell with ``phi < eps`` (the gas and
the interface's band).  Where those cells fill a small part of a large grid,
the filter, the curvature and the coefficients run on their box widened by
the cells they read (:data:`REACH` and the filter's passes), and the
coefficients elsewhere are zero: the force has the whole grid's values.
A flow keeps its face arrays from step to step (:class:`KeptFaces`): a step
zeroes what the last one wrote outside its own region, not the whole grid.
"""
from __future__ import annotations

from ..compute.backend import array_module
from ..mesh.grid import array_axis
from . import boxes, levelset, momentum

__all__ = ["coefficients", "coefficients_in_box", "box_bounds", "KeptFaces", "REACH"]

#: Cells past the box of ``phi < eps + h`` that the force's values read:
#: the curvature of a face's other cell (1), the filtered level set the
#: curvature's stencil reads (1), and one to spare; the filter's passes
#: widen it by one each.
REACH = 3


class KeptFaces:
    """The interior-face arrays of the box's coefficients
    (:func:`coefficients_in_box`), kept from one call to the next: zero but
    on the region the last call wrote.  The arrays a call returns are the
    next call's: a flow's step is done with them before the next starts."""

    def __init__(self):
        self.faces, self.written = None, None

    def zeroed_outside(self, phi, cut):
        """The kept arrays for ``phi``'s grid, zero outside the region
        ``cut`` (new zero arrays for a grid of another shape or dtype)."""
        xp = array_module(phi)
        faces = self.faces
        if (faces is None or faces[0].dtype != phi.dtype
                or any(f.shape != z for f, z in zip(faces, _face_shapes(phi)))
                or array_module(faces[0]) is not xp):
            faces = _zero_faces(phi)
        else:
            for a, f in enumerate(faces):
                for slab in boxes.uncovered(boxes.interior_face_region(self.written, a),
                                            boxes.interior_face_region(cut, a)):
                    f[slab] = 0
        self.faces, self.written = faces, cut
        return faces


def _takes_a_box(phi, sigma):
    """Whether :func:`coefficients` looks for the interface's box on ``phi``."""
    return sigma > 0 and boxes.worth_a_box(phi)


def box_bounds(phi, sigma, spacing, eps):
    """:func:`.boxes.interface_box_bounds` of the box :func:`coefficients`
    looks for on ``phi`` (not read: the caller reads it with other figures
    and passes :func:`.boxes.box_of_bounds` of it), or None where it looks
    for none."""
    return boxes.interface_box_bounds(phi, eps + max(spacing)) if _takes_a_box(phi, sigma) \
        else None


def coefficients(phi, passes, spacing, sigma, heights, buoyancy, y0, eps, kept=None,
                 box=boxes.UNKNOWN):
    """:func:`.momentum.interface_coefficients` of ``levelset.smooth(phi,
    passes)``, or :func:`coefficients_in_box` (the same force) with surface
    tension on grids large enough (:func:`.boxes.worth_a_box`) where the
    widened box holds at most :data:`.boxes.MAX_SHARE` of them.  ``eps``:
    the Heaviside's half width; ``kept``: the :class:`KeptFaces` the box's
    coefficients are written into (None: new arrays); ``box``: the
    interface's box on ``phi`` where the caller has it (:func:`box_bounds`),
    else looked for here."""
    if _takes_a_box(phi, sigma):
        if box is boxes.UNKNOWN:
            box = boxes.interface_box(phi, eps + max(spacing))
        if box is None:
            # No interface within the Heaviside's reach (a rank's slab far
            # from the bubbles): no face has a force.
            return _zero_faces(phi)
        if boxes.spares(box, passes + REACH, phi.shape):
            return coefficients_in_box(phi, passes, spacing, sigma, heights, buoyancy, y0, box,
                                       kept)
    return momentum.interface_coefficients(levelset.smooth(phi, passes), spacing, sigma,
                                           heights, buoyancy, y0)


def _face_shapes(phi):
    """The shapes of the interior faces of each grid axis of ``phi``'s grid."""
    out = []
    for a in range(phi.ndim):
        shape = list(phi.shape)
        shape[array_axis(phi.ndim, a)] -= 1
        out.append(tuple(shape))
    return out


def _zero_faces(phi):
    """Zero coefficients on the interior faces of each grid axis."""
    xp = array_module(phi)
    return tuple(xp.zeros(shape, dtype=phi.dtype) for shape in _face_shapes(phi))


def _rows(h, rows, cells):
    """``heights`` entry ``h`` (broadcastable along the vertical, array
    axis 0) on the region's ``rows``: sliced where it holds a value a row
    (``cells`` rows for the cells', one fewer for the interior faces')."""
    if h is None or h.ndim == 0 or h.shape[0] == 1:
        return h
    return h[rows] if h.shape[0] == cells else h[rows.start:rows.stop - 1]


def coefficients_in_box(phi, passes, spacing, sigma, heights, buoyancy, y0, box, kept=None):
    """The coefficients of :func:`coefficients` computed on ``box``
    (:func:`.boxes.interface_box` of ``phi < eps + h``) widened by
    ``passes + REACH`` cells, its faces taken as walls, zero on the other
    faces: on every face where ``dH`` is not zero, the whole grid's values.
    ``kept``: a :class:`KeptFaces` whose arrays take them (None: new ones)."""
    xp = array_module(phi)
    cut = boxes.region(box, passes + REACH, phi.shape)
    inside = levelset.smooth(xp.ascontiguousarray(phi[cut]), passes)
    rows = None if heights is None else tuple(_rows(h, cut[0], phi.shape[0]) for h in heights)
    faces = momentum.interface_coefficients(inside, spacing, sigma, rows, buoyancy, y0)
    out = _zero_faces(phi) if kept is None else kept.zeroed_outside(phi, cut)
    for a, f in enumerate(faces):
        out[a][boxes.interior_face_region(cut, a)] = f
    return out
