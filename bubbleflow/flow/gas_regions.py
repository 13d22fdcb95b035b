"""Every connected gas region of a flow state, labelled and measured on the
state's backend: the regions a bubble tracker (:mod:`.bubble_tracking`)
follows, in 2-D and 3-D.

Labelling.  The gas's *cores* are the cells more than half gas: ``c > 0.5``
with a volume fraction (CLSVOF), ``phi < 0`` with the level set alone.  Their
face-connected sets (:func:`bubbleflow.compute.regions.label_regions`, SciPy's or CuPy's
labelling, which connects by faces in any dimension) are the regions,
numbered ``1 .. count`` in the order of their centroids (the vertical
coordinate first, then the others from the last grid axis down, each to a
millionth of a cell), so that the numbers do not depend on the backend's
labelling nor on rounding.  The sums over a region come out the same on
every run (:func:`bubbleflow.compute.regions.region_sums`).  Cores rather than
every cell holding gas: two bubbles a cell apart share cells of small
``c`` (their interface cells touch) and would otherwise be one region.

Measures.  Every cell belongs to the region of its nearest core cell
(:func:`nearest_labels`, the exact Euclidean feature transform; a core cell
is its own nearest), so the interface cells around a core, and any wisp of
gas too thin to hold a core, count with the nearest region: the regions'
volumes ``sum(c) * cell volume`` then add up to the total gas volume
(:func:`.vof_diagnostics.gas_volume`) to rounding whenever there is a region
at all.  Per region: its volume (area in 2-D), its centroid and mean
velocity (moments of ``c``, the velocity the cell-centre average of the
faces, :func:`.face_velocity.cell_velocity`), the interface's measure
(:func:`interface_measure`: the PLIC segments' length in 2-D, the PLIC
polygons' area in 3-D), the diameter of the ball of the same volume and the
shape factor (:func:`ball_surface` over the interface's measure: the
circularity in 2-D, the sphericity in 3-D, 1 for a circle or a sphere).
Without a volume fraction (the level set alone) ``c`` is the level set's
cut fraction (:func:`.vof_fraction.volume_fraction`), so both methods go
through one code path.

Layers.  A region whose cores reach the domain's top plane of cells (the
last grid axis' upper wall) is a *layer*: the gas above a free surface, or
a bubble that has reached the lid and spread under it.  Layers are measured
like any region and flagged; the tracker gives them no identity.

Ranks.  The functions take whole-grid arrays: on ranks the stepper gathers
the state on rank 0 at each sample (:meth:`.navier_stokes.FlowSolver.regions`,
through :meth:`.partition.WholeGrid.labelled_state`).  Labelling on the slabs would
go: each rank labels its slab's cores; an exclusive scan of the counts makes
the numbers global; each rank sends its first core plane's labels to the
rank below, which pairs them with its last plane's (a pair per face-adjacent
core cell on both sides); the pairs, few, are gathered on every rank and
joined by union-find into one relabelling map.  The nearest-core assignment
needs the neighbours' cores within the interface's width (one or two planes
of ghosts), the per-region sums are :func:`.region_sums` on the slab totalled over
the ranks, and the tracker's overlap counts likewise.  Until that is worth
its collectives, gathering is the path (a snapshot's cost, once per sample).

Conventions (those of :mod:`.levelset`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``velocity`` the MAC face components in grid-axis order, the last one
vertical; lengths in metres.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..compute.backend import array_module, backend_of
from ..compute.regions import label_regions, region_sums
from ..compute.truth import any_true
from ..compute.twins import twin
from ..mesh.grid import array_axis
from . import interface_measure_cuda, vof_cuda
from .face_velocity import cell_velocity, check_velocity
from .plic import cut_fraction
from .plic_reconstruction import interface_mask, reconstruct
from .plic_segments import interface_segments
from .vof_fraction import volume_fraction
from .vof_limits import area_step, times_cell_volume

__all__ = ["GasRegions", "gas_regions", "state_regions", "nearest_labels", "layer_labels",
           "interface_measure", "ball_surface", "ball_diameter"]


def ball_surface(volume, ndim):
    """The surface (perimeter in 2-D) of the ball of ``volume`` (area in
    2-D): ``2 sqrt(pi A)`` in 2-D, ``pi^(1/3) (6 V)^(2/3)`` in 3-D.  Over a
    region's interface measure it is the circularity or the sphericity.

    Parameters
    ----------
    volume : float or numpy.ndarray
    ndim : int
        2 or 3.

    Returns
    -------
    float or numpy.ndarray
    """
    volume = np.asarray(volume, dtype=np.float64)
    if ndim == 2:
        return 2.0 * np.sqrt(math.pi * volume)
    return math.pi ** (1.0 / 3.0) * np.cbrt(6.0 * volume) ** 2


def ball_diameter(volume, ndim):
    """The diameter of the ball of ``volume``: the equivalent diameter
    ``2 sqrt(A / pi)`` in 2-D, ``(6 V / pi)^(1/3)`` in 3-D."""
    volume = np.asarray(volume, dtype=np.float64)
    if ndim == 2:
        return 2.0 * np.sqrt(volume / math.pi)
    return np.cbrt(6.0 * volume / math.pi)


def layer_labels(labels):
    """The labels (ascending, 0 left out) of the regions of the host label
    array ``labels`` that reach the top plane of cells: the layers (see the
    module), by the rule :func:`gas_regions` applies to its cores on the
    device."""
    top = np.unique(np.asarray(labels)[-1])
    return top[top != 0]


@twin
def nearest_labels(labels, spacing):
    """Every cell's nearest labelled cell's label.

    Parameters
    ----------
    labels : array of int
        0 outside the regions; at least one cell labelled.
    spacing : tuple of floats
        Cell sizes in grid-axis order (the distance is Euclidean in length
        units; ties go as the feature transform breaks them).

    Returns
    -------
    array of int
        ``labels``' shape and backend; a labelled cell keeps its label.
    """
    from scipy import ndimage

    sampling = tuple(reversed([float(h) for h in spacing]))
    index = ndimage.distance_transform_edt(labels == 0, sampling=sampling,
                                           return_distances=False, return_indices=True)
    return labels[tuple(index)]


@nearest_labels.register("cupy")
def _nearest_labels_cupy(labels, spacing):
    from cupyx.scipy import ndimage

    sampling = tuple(reversed([float(h) for h in spacing]))
    index = ndimage.distance_transform_edt(labels == 0, sampling=sampling,
                                           return_distances=False, return_indices=True)
    return labels[tuple(index)]


@twin
def interface_measure(c, spacing, normal_from=None):
    """The PLIC interface's measure in every cell: the segment's length in
    2-D (:func:`.plic_segments.interface_segments`: summed over a region,
    its perimeter), the polygon's area in
    3-D; zero outside the interface cells.

    The polygon's area is the derivative of the cell's gas volume with
    respect to the plane constant (the unit normal's plane swept by ``d
    alpha`` sweeps ``area d alpha``), a central difference of
    :func:`.plic.cut_fraction` over ``sqrt(machine epsilon)`` cell sizes:
    exact to about 1e-8 relative.

    Parameters
    ----------
    c : array
        Gas volume fraction.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    normal_from : array, optional
        Level set for the normals; by default Youngs' normals from ``c``.

    Returns
    -------
    array
        ``c``'s shape, in m (2-D) or m^2 (3-D).
    """
    xp = array_module(c)
    if c.ndim == 2:
        mask, x0, y0, x1, y1 = interface_segments(c, spacing, normal_from)
        return xp.where(mask, xp.sqrt((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)), 0.0)
    normal, alpha = reconstruct(c, spacing, normal_from)
    step = area_step(spacing, c.dtype)
    rate = (cut_fraction(normal, alpha + step, spacing)
            - cut_fraction(normal, alpha - step, spacing)) / (2.0 * step)
    return xp.where(interface_mask(c), rate * math.prod(spacing), 0.0)


@dataclass
class GasRegions:
    """The gas regions of one state, numbered ``1 .. count`` by centroid.

    Attributes
    ----------
    labels : array of int32
        The cores' labels on the state's backend (0 outside the cores);
        region ``k`` is ``labels == k + 1``.
    spacing : tuple of floats
        Cell sizes in grid-axis order (m).
    volume : numpy.ndarray (count,)
        Gas volume per region, area in 2-D (m^3, m^2).
    centroid : numpy.ndarray (count, ndim)
        Centroid in grid-axis order (m).
    velocity : numpy.ndarray (count, ndim)
        Mean velocity in grid-axis order, weighted by ``c`` (m/s).
    interface : numpy.ndarray (count,)
        The interface's measure: perimeter in 2-D (m), surface in 3-D
        (m^2); a region cut by a wall counts only its interface inside.
    layer : numpy.ndarray of bool (count,)
        The region reaches the domain's top plane of cells.
    """

    labels: object
    spacing: tuple
    volume: np.ndarray
    centroid: np.ndarray
    velocity: np.ndarray
    interface: np.ndarray
    layer: np.ndarray

    @property
    def count(self):
        """The number of regions."""
        return int(self.volume.size)

    @property
    def ndim(self):
        """The grid's dimension."""
        return len(self.spacing)

    @property
    def lengths(self):
        """The domain's sides in grid-axis order (m)."""
        nd = self.ndim
        return tuple(self.labels.shape[array_axis(nd, a)] * h for a, h in enumerate(self.spacing))

    @property
    def diameter(self):
        """Equivalent diameter per region (:func:`ball_diameter`, m)."""
        return ball_diameter(self.volume, self.ndim)

    @property
    def shape_factor(self):
        """Circularity (2-D) or sphericity (3-D) per region:
        :func:`ball_surface` of the volume over the interface's measure
        (1 for a circle or a sphere, below 1 otherwise; NaN without an
        interface)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.interface > 0,
                            ball_surface(self.volume, self.ndim) / self.interface, np.nan)


def _empty(labels, spacing):
    nd = len(spacing)
    return GasRegions(labels=labels, spacing=tuple(spacing), volume=np.zeros(0),
                      centroid=np.zeros((0, nd)), velocity=np.zeros((0, nd)),
                      interface=np.zeros(0), layer=np.zeros(0, dtype=bool))


@twin
def region_moments(owner, labels, c, velocity, spacing, interface, count):
    """The sums a region's measures are made of, per region ``1 .. count``
    (:func:`~bubbleflow.compute.regions.region_sums` over ``owner``; None:
    every cell is region 1): ``c``; ``c`` times each cell-centre coordinate
    and each cell-centre velocity (:func:`.face_velocity.cell_velocity`), in
    grid-axis order; the ``interface`` measure; the core cells (``labels >
    0``) of the top plane of cells.  A list of host arrays of ``count`` sums,
    in that order."""
    xp = backend_of(c, *velocity).xp
    nd = c.ndim
    if owner is None:
        owner = xp.ones_like(labels)
    weights = [c]
    for a, h in enumerate(spacing):
        shape = [1] * nd
        k = array_axis(nd, a)
        shape[k] = c.shape[k]
        weights.append(c * ((xp.arange(c.shape[k], dtype=c.dtype) + 0.5) * h).reshape(shape))
    weights += [c * u for u in cell_velocity(velocity)]
    weights.append(interface)
    top = xp.zeros(c.shape, dtype=c.dtype)
    top[-1] = labels[-1] > 0
    weights.append(top)
    return region_sums(owner, weights, count)


def gas_regions(c, velocity, spacing, core=None, normal_from=None):
    """Label and measure the connected gas regions of a volume fraction.

    Parameters
    ----------
    c : array
        Gas volume fraction (whole grid), ``c = 1`` all gas.
    velocity : tuple of arrays
        MAC face velocities in grid-axis order.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    core : array of bool, optional
        The cells the regions are made of; by default ``c > 0.5``.
    normal_from : array, optional
        Level set for the PLIC normals (CLSVOF: its ``phi``).

    Returns
    -------
    GasRegions
        The module docstring says what is measured and how the cells are
        shared between the regions.
    """
    check_velocity(c, velocity, name="c", what="volume fraction")
    if len(spacing) != c.ndim:
        raise ValueError(f"spacing {tuple(spacing)} has {len(spacing)} entries; "
                         f"expected {c.ndim} for c of shape {c.shape}")
    backend = backend_of(c, *velocity)
    xp = backend.xp
    nd = c.ndim
    labels, count = label_regions(c > 0.5 if core is None else core)
    if count == 0:
        return _empty(labels, spacing)
    if count == 1:
        # Every cell's nearest core cell is the one region's: no distance
        # transform (the sample of a single bubble's run).
        owner = None
    else:
        owner = nearest_labels(labels, spacing) if bool(any_true(labels == 0)) else labels
    sums = region_moments(owner, labels, c, velocity, spacing,
                          interface_measure(c, spacing, normal_from), count)
    # A region holding a core cell of the top plane (a core cell is its own
    # owner) is a layer.
    layer = sums[-1] > 0.0
    mass = sums[0]
    centroid = np.stack([w / mass for w in sums[1:1 + nd]], axis=1)
    mean_velocity = np.stack([w / mass for w in sums[1 + nd:1 + 2 * nd]], axis=1)
    # Number the regions by centroid, the vertical first (np.lexsort's last
    # key), on a grid of a millionth of a cell: centroids the same to
    # rounding go by the next coordinate, not by their last bits.
    grain = [1e-6 * h for h in spacing]
    order = np.lexsort(tuple(np.rint(centroid[:, a] / grain[a]) for a in range(nd)))
    number = np.zeros(count + 1, dtype=np.int32)
    number[order + 1] = np.arange(1, count + 1, dtype=np.int32)
    return GasRegions(labels=xp.asarray(number)[labels], spacing=tuple(spacing),
                      volume=times_cell_volume(mass, spacing)[order],
                      centroid=centroid[order], velocity=mean_velocity[order],
                      interface=sums[-2][order], layer=layer[order])


def state_regions(state, spacing):
    """The gas regions of a whole-grid :class:`.state.FlowState`: of its
    volume fraction ``state.c`` (cores ``c > 0.5``) with CLSVOF, else of
    the level set's cut fraction (cores ``phi < 0``); normals from
    ``state.phi``.

    Parameters
    ----------
    state : FlowState
        The whole grid's state (on ranks, the gathered one).
    spacing : tuple of floats
        Cell sizes in grid-axis order.

    Returns
    -------
    GasRegions
    """
    if state.c is not None:
        return gas_regions(state.c, state.velocity, spacing, normal_from=state.phi)
    c = volume_fraction(state.phi, spacing)
    return gas_regions(c, state.velocity, spacing, core=state.phi < 0.0, normal_from=state.phi)


# At most four regions on a GPU: one pass over the cells (vof_cuda.py).
region_moments.register("cupy")(vof_cuda.region_moments)
# With the level set's normals, on a GPU: in 2-D the segments kernel of the
# level set's rebuild, the lengths taken from it (vof_redistance_cuda.py); in
# 3-D the planes' areas in one launch (interface_measure_cuda.py).
interface_measure.register("cupy")(interface_measure_cuda.interface_measure)
