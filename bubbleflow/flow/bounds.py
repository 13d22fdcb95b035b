"""The physical bounds of a flow state, checked after every step.

A step too long for the scheme (a fixed ``time.dt`` stable at rest but not
once the flow speeds up) does not always end in non-finite values: the
volume fraction overshoots, the interface is carried out of the box and the
velocities grow by orders of magnitude a step while every number stays
finite.  What the physics implies, and a step outside it shows:

* the gas volume fraction ``c`` of CLSVOF lies in ``[0, 1]``
  (:data:`FRACTION_TOLERANCE`);
* the step's advective CFL number ``max_a max|u_a| dt / h_a`` of the
  velocity it starts from is at most :data:`CFL_LIMIT`;
* no gas appears farther from the previous interface than a step carries
  it (:data:`FAR_GAS_CELLS`);
* the gas centroid lies inside the box;
* the gas volume stays within :data:`VOLUME_CHANGE_LIMIT` of the initial one
  (:data:`CLSVOF_VOLUME_CHANGE_LIMIT` where the volume fraction conserves it);
* every field and figure is finite.

:meth:`FlowBounds.measure` takes the field figures of a step on the device
(:func:`field_figures`: array code, and on a GPU one kernel; one small array
to the host; on several ranks the
slabs' figures reduced over the ranks, so every rank sees the same) and the
flow solvers put them in their :class:`.navier_stokes.StepReport`;
:meth:`FlowBounds.broken` reads them with the step's diagnostics (host
floats already) and says which bounds are broken, in one line.
"""
from __future__ import annotations

import math

import numpy as np

from ..compute.backend import backend_of
from ..compute.truth import all_finite
from ..compute.twins import twin

__all__ = ["FlowBounds", "field_figures", "FIGURES", "FRACTION_TOLERANCE", "CFL_LIMIT",
           "FAR_GAS_CELLS", "VOLUME_CHANGE_LIMIT", "CLSVOF_VOLUME_CHANGE_LIMIT"]

#: How far the volume fraction may lie outside ``[0, 1]``.  The advection
#: clips rounding below 1e-12 (:data:`.vof_limits.CLIP_TOLERANCE`) and is
#: bounded for ``|u| dt <= h / 2`` along each axis; what is left past that is
#: a step too long for the scheme.  Well above rounding and well below the
#: overshoot of such a step (1e-3 to 1 in a first step from rest of the
#: 2-D and 3-D columns with CLSVOF as long as the capillary or gravity time
#: allows, which the stepper shortens).
FRACTION_TOLERANCE = 1e-6
#: The largest advective CFL number ``|u| dt / h`` (along one axis, of the
#: velocity a step starts from) a step can take: the volume fraction's flux
#: through a face is the gas of its upwind cell within ``|u| dt``, which is
#: that cell's only while ``|u| dt <= h``, and the level set's upwind
#: stencils assume the same reach.  Adaptive steps take ``time.cfl <= 1``.
#: (The velocity a step ends with is the stepper's to bound: an adaptive
#: step it would carry more than half a cell is done again, shorter,
#: :data:`.navier_stokes.TRANSPORT_CFL`; with a fixed ``time.dt`` the
#: volume fraction's bound sees what such a step does.)
CFL_LIMIT = 1.0
#: How far from the previous interface, in cells, new gas may appear (the
#: previous level set's value there).  A step moves the interface at most
#: :data:`CFL_LIMIT` cells; CLSVOF's level set is a distance near its
#: interface cells (its new gas lies within 2 cells in the shipped cases),
#: the level set alone only within the reach of its reinitialisation, and
#: the long first step from rest leaves it rough (new gas up to 3.75
#: cells out in the shipped 3-D column at its default resolution).
FAR_GAS_CELLS = 8.0
#: The largest relative change of the gas volume from the initial one that a
#: level-set run should show.  The level set does not conserve it: run to
#: their end at their default resolution the shipped cases lose 0.3 %
#: (two_phase), 2.5 % (hysing_case2), 11 % (bubbly_column_flow), 0.6 %
#: (rising_bubble_3d) and 4 % (bubbly_column_3d_flow); the 2-D column on
#: 16 x 32 cells, where its bubbles' radii are 1.5 cells and they vanish, 30 %
#: (the air above its free surface stays).  Half the gas lost or gained is
#: no longer the flow that was set up.
VOLUME_CHANGE_LIMIT = 0.5
#: The same for CLSVOF, whose volume fraction conserves the gas volume to
#: round-off (the dilatation term of the advection cancels the velocity's
#: divergence, whatever the pressure solver's tolerance): the shipped cases
#: run with it drift by 2e-10 at most (rising_bubble_3d, to t = 3 s).
CLSVOF_VOLUME_CHANGE_LIMIT = 1e-6

#: The figures :meth:`FlowBounds.measure` returns, in order (each the
#: largest over the ranks: ``fraction_low`` is ``-min(c)``).
FIGURES = ("not_finite", "fraction_low", "fraction_high", "cfl", "far_gas")


@twin
def field_figures(old_phi, old_velocity, phi, velocity, c, steps, gas_fraction):
    """The field figures of :data:`FIGURES` on the arrays' device, one array of 5.

    Parameters
    ----------
    old_phi, phi : array
        The level set (m) before and after the step.
    old_velocity, velocity : tuple of array
        The face velocities (m/s) before and after the step, x first.
    c : array or None
        The gas volume fraction after the step.
    steps : tuple of float
        ``dt / h`` of each axis (s/m).
    gas_fraction : float
        A cell with a volume fraction above it holds gas.

    Returns
    -------
    array
        1.0 if ``phi``, ``velocity`` or ``c`` holds a non-finite value (else
        0.0); ``-min c``, ``max c`` (0 and 1 without ``c``); ``max_a
        max|old_velocity_a| steps_a``; the largest ``old_phi`` at a cell
        holding gas (``c`` above ``gas_fraction``, else ``phi < 0``;
        ``-inf`` without one).  Where the fields are finite, the CUDA
        variant (:mod:`.bounds_cuda`, one kernel) gives these bits.
    """
    xp = backend_of(phi).xp
    finite = all_finite(phi)
    cfl = xp.zeros((), dtype=phi.dtype)
    for u, u_old, step in zip(velocity, old_velocity, steps):
        finite = finite & all_finite(u)
        cfl = xp.maximum(cfl, xp.abs(u_old).max() * step)
    if c is None:
        low, high = xp.zeros((), dtype=phi.dtype), xp.ones((), dtype=phi.dtype)
        gas = phi < 0.0
    else:
        finite = finite & all_finite(c)
        low, high = -c.min(), c.max()
        gas = c > gas_fraction
    far = xp.where(gas, old_phi, -xp.inf).max()
    return xp.stack([1.0 - finite.astype(phi.dtype), low, high, cfl, far])


class FlowBounds:
    """The bounds of the flow on ``grid`` and their check.

    Parameters
    ----------
    grid : Grid
        The whole grid (its lengths give the box).
    clsvof : bool
        Whether the state carries a volume fraction ``c``.
    comm : communicator, optional
        The ranks' (:mod:`bubbleflow.compute.comm`); the figures of
        :meth:`measure` are then the largest over the ranks.
    """

    def __init__(self, grid, clsvof, comm=None):
        self.lengths = tuple(float(v) for v in grid.lengths)
        self.spacing = tuple(float(h) for h in grid.spacing)
        self.clsvof = bool(clsvof)
        self.comm = comm
        self.volume_limit = CLSVOF_VOLUME_CHANGE_LIMIT if clsvof else VOLUME_CHANGE_LIMIT
        # A distance of the level set (m) past which new gas is out of reach.
        self.far = FAR_GAS_CELLS * max(self.spacing)

    def measure(self, old_phi, old_velocity, phi, velocity, c, dt):
        """The step's field figures (:data:`FIGURES`), host floats in a dict.

        Parameters
        ----------
        old_phi, phi : array
            The level set (m) before and after the step (one rank's slab on
            several ranks).
        old_velocity, velocity : sequence of array
            The face velocities (m/s) before and after the step, x first.
        c : array or None
            The gas volume fraction after the step (None: a level set alone).
        dt : float
            The step (s).

        Returns
        -------
        dict
            ``not_finite`` 1.0 if a field holds a non-finite value (else
            0.0); ``fraction_low``, ``fraction_high``: ``-min c`` and
            ``max c`` (0 and 1 without ``c``); ``cfl``: ``max_a max|u_a| dt
            / h_a`` of ``old_velocity``; ``far_gas``: the largest previous
            level set (m) at a cell holding gas now (``-inf`` without one).
        """
        figures = self.device_figures(old_phi, old_velocity, phi, velocity, c, dt)
        return self.figures(backend_of(phi).to_host(figures))

    def device_figures(self, old_phi, old_velocity, phi, velocity, c, dt):
        """:meth:`measure`'s figures on the fields' device, the largest over
        the ranks (there too: read them with other figures in one transfer,
        then :meth:`figures`).  Where a rank's field is not finite the
        flag says so; its other figures are then not defined."""
        steps = tuple(dt / h for h in self.spacing)
        local = field_figures(old_phi, tuple(old_velocity), phi, tuple(velocity), c, steps,
                              FRACTION_TOLERANCE)
        if self.comm is None or self.comm.size == 1:
            return local
        local = backend_of(phi).xp.ascontiguousarray(local, dtype=np.float64)
        largest = backend_of(phi).xp.empty_like(local)
        self.comm.allreduce_max_into(local, largest)
        return largest

    def figures(self, host):
        """:meth:`device_figures` read on the host: the dict of :meth:`measure`."""
        return dict(zip(FIGURES, (float(v) for v in np.asarray(host, dtype=np.float64))))

    def broken(self, report, gas_volume=None):
        """The bounds the step of ``report`` broke, as one line ("" if none).

        Parameters
        ----------
        report : StepReport
            The step's report: its ``bounds`` (the figures of
            :meth:`measure`, None for a report without them), ``dt``,
            ``divergence`` and ``diagnostics``.
        gas_volume : float, optional
            The initial gas volume (m^3; the area in 2-D, m^2).  None or 0: a
            flow without gas, whose bubble quantities are undefined (NaN)
            and go unchecked.

        Returns
        -------
        str
            The broken bounds, ``"; "``-separated, each with its figure and
            its limit.
        """
        gas = gas_volume is not None and gas_volume > 0
        d = report.diagnostics if gas else {}
        out = []
        figures = report.bounds or {}
        if figures.get("not_finite", 0.0) or not all(
                math.isfinite(v) for v in [report.divergence, *d.values()]):
            out.append("non-finite values in the fields or the diagnostics")
        out += self._field_bounds(figures, report.dt)
        if gas:
            out += self._gas_bounds(d, gas_volume)
        return "; ".join(out)

    def _field_bounds(self, figures, dt):
        """What :meth:`broken` says of the field figures."""
        out = []
        low, high = figures.get("fraction_low", 0.0), figures.get("fraction_high", 0.0)
        if self.clsvof and (low > FRACTION_TOLERANCE or high > 1.0 + FRACTION_TOLERANCE):
            worst = -low if low > high - 1.0 else high
            out.append(f"volume fraction {worst:.6g} outside [0, 1]")
        cfl = figures.get("cfl", 0.0)
        if cfl > CFL_LIMIT:
            out.append(f"advective CFL number max|u| dt / h = {cfl:.3g} (dt = {dt:.3g} s) "
                       f"above the {CFL_LIMIT:g} the scheme can take")
        far = figures.get("far_gas", -math.inf)
        if far > self.far:
            cells = far / max(self.spacing)
            out.append(f"gas created {cells:.3g} cells from the interface (a step carries it "
                       f"at most {FAR_GAS_CELLS:g})")
        return out

    def _gas_bounds(self, d, gas_volume):
        """What :meth:`broken` says of the gas's diagnostics."""
        out = []
        for a, length in enumerate(self.lengths):
            x = d.get("centroid_" + "xyz"[a])
            if x is not None and not 0.0 <= x <= length:
                out.append(f"gas centroid_{'xyz'[a]} {x:.3g} m outside the box [0, {length:g}] m")
        size = "area" if "area" in d else "volume"
        change = (d.get(size, gas_volume) - gas_volume) / gas_volume
        if abs(change) > self.volume_limit:
            out.append(f"gas {size} changed by {change:+.3g} of the initial {gas_volume:.3g} "
                       f"(at most {self.volume_limit:g})")
        return out


# The CUDA variant (bounds_cuda.py, kernel in bounds.cu): one pass, one launch.
from . import bounds_cuda  # noqa: E402

field_figures.register("cupy")(bounds_cuda.field_figures)
