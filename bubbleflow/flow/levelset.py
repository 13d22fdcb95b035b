"""Level-set operations on a grid of any dimension: transport, redistancing,
curvature and filtering.

Jiang-Shu WENO5 with TVD-RK3 (:mod:`.weno`), Sussman-Smereka-Osher
redistancing with the Russo-Smereka subcell fix, the mean curvature by
central differences and the ``[1, 2, 1] / 4`` filter, written once over the
axes.  Every function takes a ``padding`` (:mod:`.padding`): the walls'
ghost layers on one process (:data:`.padding.WALLS`), the neighbours'
planes on a rank's slab (:class:`.slabs.SlabPadding`), so one code gives
one process's bits on the slabs too.  :func:`advect`, :func:`reinitialize`,
:func:`curvature` and :func:`smooth` are twins (:mod:`bubbleflow.compute.twins`):
this array code is the reference; on CuPy on one process the CUDA kernels
of :mod:`.levelset_cuda` run (a few launches a call instead of the array
code's hundreds): all four in 2-D, all but :func:`reinitialize` in 3-D.

Conventions: arrays have the grid's shape (``(nz, ny, nx)`` in 3-D, x
fastest); ``velocity`` is the tuple of MAC face components in grid-axis
order (``u, v[, w]``), component ``a`` having one more entry along its own
axis (the wall faces included); ``spacing`` is the grid's ``(hx, hy[,
hz])``.  ``phi > 0`` in the liquid, ``phi < 0`` in the gas, ``|phi|`` about
the distance to the interface.

The level set's public names are here: the operations above, the bubble
diagnostics (:mod:`.bubble_measures`: :func:`bubble_sums`,
:func:`bubble_quantities`, :func:`bubble_diagnostics`), the walls' padding
(:mod:`.padding`) and the face velocity's helpers (:mod:`.face_velocity`);
the 2-D contour's functions are :mod:`.contour`'s.
"""
from __future__ import annotations

from . import levelset_cuda
from ..compute.backend import array_module
from ..compute.twins import twin
from ..mesh.grid import array_axis
from .face_velocity import cell_velocity, check_velocity
from .padding import WALLS, along
from .weno import rk3, stencils, weno5, weno_floor

__all__ = ["advect", "reinitialize", "curvature", "smooth"]


# ----------------------------------------------------------------------------
# transport
# ----------------------------------------------------------------------------

@twin
def advect(phi, velocity, dt, spacing, padding=WALLS):
    """Advance the level set one step of ``phi_t + u . grad(phi) = 0``.

    Spatial derivatives are Jiang-Shu WENO5, upwinded by the sign of the
    cell-centre velocity (the mean of the two MAC faces of each cell); time
    integration is TVD-RK3 (Shu-Osher) with the velocity frozen over the
    step.  Walls are handled with three ghost layers of linearly
    extrapolated phi (``padding``'s).

    Parameters
    ----------
    phi : array
        Level set at time ``t``.
    velocity : tuple of arrays
        The MAC face components, x first.
    dt : float
        Time step.  Stability needs ``dt sum(max|u_a| / h_a) <~ 1``;
        choosing it is the caller's job (no sub-stepping is done here).
    spacing : tuple of float
        Cell sizes, x first.
    padding : WallPadding or SlabPadding, optional

    Returns
    -------
    array
        Level set at ``t + dt`` (a new array; ``phi`` is not modified).
    """
    xp = array_module(phi, *velocity)
    check_velocity(phi, velocity)
    nd = phi.ndim
    centred = [c.astype(phi.dtype, copy=False) for c in cell_velocity(velocity)]
    upwind = [c > 0 for c in centred]           # information from below: backward differences
    floor = weno_floor(phi.dtype, xp)

    def rhs(p):
        total = None
        for a, (c, up, h) in enumerate(zip(centred, upwind, spacing)):
            # The stencil is chosen before the (expensive) nonlinear weights
            # are formed: one WENO evaluation per axis.
            minus, plus = stencils(p, h, array_axis(nd, a), padding)
            term = c * weno5(*[xp.where(up, m, q) for m, q in zip(minus, plus)], floor)
            total = term if total is None else total + term
        return -total

    return rk3(phi, dt, rhs)


# ----------------------------------------------------------------------------
# redistancing
# ----------------------------------------------------------------------------

def _interface_cells(phi0, padding=WALLS):
    """Cells with a face neighbour across the zero level (interior faces
    only: a wall's ghost repeats its cell, which crosses only where that
    cell is on the level already)."""
    nd = phi0.ndim
    q = padding.edge(phi0)
    near = (phi0 == 0).copy()
    inner = [slice(1, -1)] * nd
    for k in range(nd - 1, -1, -1):
        for shift in (-1, 1):
            index = list(inner)
            index[k] = slice(1 + shift, q.shape[k] - 1 + shift)
            near |= (q[tuple(index)] * phi0) <= 0
    return near


def _subcell_distance(phi0, spacing, xp, padding=WALLS):
    """Russo-Smereka distance estimate ``D = phi0 / |grad phi0|``.

    ``|grad phi0|`` is the largest of the central-difference gradient and
    the one-sided differences (Russo and Smereka 2000, eq. 17): taking the
    largest keeps the estimate robust where phi0 is steep on one side only.
    At walls the linear ghost turns the central difference into a one-sided
    one.
    """
    nd = phi0.ndim
    sides, central = [], None
    for a, h in enumerate(spacing):
        p = padding.linear(phi0, 1, array_axis(nd, a))
        k = array_axis(nd, a)
        up, down = p[along(nd, k, slice(2, None))], p[along(nd, k, slice(None, -2))]
        sq = ((up - down) / (2.0 * h)) ** 2
        central = sq if central is None else central + sq
        sides.append((up, down, h))
    g = xp.sqrt(central)
    for up, down, h in sides:
        g = xp.maximum(g, xp.abs(up - phi0) / h)
        g = xp.maximum(g, xp.abs(phi0 - down) / h)
    # Interface cells have a sign change next to them, so g > 0 there unless
    # phi0 is identically zero locally, where D = 0 is the right answer.
    return phi0 / xp.maximum(g, float(xp.finfo(phi0.dtype).tiny))


@twin
def reinitialize(phi, spacing, iterations=20, cfl=0.3, padding=WALLS):
    """Restore the signed-distance property of ``phi`` without moving its zero level.

    Solves ``phi_tau + S(phi0) (|grad phi| - 1) = 0`` in pseudo-time
    (Sussman, Smereka and Osher 1994) with the Godunov Hamiltonian built
    from WENO5 one-sided derivatives and TVD-RK3 in pseudo-time.  The sign
    is smoothed, ``S = phi0 / sqrt(phi0^2 + h^2)`` with ``h = max(spacing)``.

    Cells next to the interface (a face neighbour of the other sign) use
    the subcell fix of Russo and Smereka (2000): there the update is
    ``phi_tau = -(sign(phi0) |phi| - D) / h`` with ``D = phi0 / |grad
    phi0|`` the distance estimated from the initial field, which pins the
    zero contour instead of letting the upwind scheme drift it.

    Parameters
    ----------
    phi : array
        Level set (any Lipschitz function with the right zero contour).
    spacing : tuple of float
        Cell sizes, x first.
    iterations : int, optional
        Pseudo-time steps.  Distance information travels one unit of length
        per unit of pseudo-time, i.e. ``cfl`` cells per iteration, so the
        default 20 at ``cfl = 0.3`` corrects a band of about 6 cells around
        the interface (what the smoothed Heaviside, ``eps = 1.5 h``, and the
        curvature stencils need).  Farther away phi keeps its sign and is
        only partly corrected.
    cfl : float, optional
        Pseudo-time step over ``min(spacing)``.
    padding : WallPadding or SlabPadding, optional

    Returns
    -------
    array
        The redistanced level set (a new array).
    """
    xp = array_module(phi)
    nd = phi.ndim
    phi0 = phi
    h, hmin = max(spacing), min(spacing)
    floor = weno_floor(phi.dtype, xp)
    S = phi0 / xp.sqrt(phi0 * phi0 + h * h)
    positive = S > 0
    near = _interface_cells(phi0, padding)
    D = _subcell_distance(phi0, spacing, xp, padding)
    sgn0 = xp.sign(phi0)

    def rhs(p):
        gpos = gneg = None
        for a, hk in enumerate(spacing):
            minus, plus = stencils(p, hk, array_axis(nd, a), padding)
            back, fwd = weno5(*minus, floor), weno5(*plus, floor)
            # Godunov Hamiltonian: characteristics leave the interface, so
            # where phi0 > 0 the admissible derivatives point away from
            # smaller phi (Osher and Fedkiw 2003, eq. 7.5 ff.).
            pos = xp.maximum(xp.maximum(back, 0.0) ** 2, xp.minimum(fwd, 0.0) ** 2)
            neg = xp.maximum(xp.minimum(back, 0.0) ** 2, xp.maximum(fwd, 0.0) ** 2)
            gpos = pos if gpos is None else gpos + pos
            gneg = neg if gneg is None else gneg + neg
        grad = xp.sqrt(xp.where(positive, gpos, gneg))
        fix = -(sgn0 * xp.abs(p) - D) / hmin
        return xp.where(near, fix, -S * (grad - 1.0))

    out = phi0
    for _ in range(int(iterations)):
        out = rk3(out, cfl * hmin, rhs)
    return phi0.copy() if out is phi0 else out


# ----------------------------------------------------------------------------
# curvature and filtering
# ----------------------------------------------------------------------------

def _numerator_plane(first, second, crosses):
    """``phi_xx phi_y^2 - 2 phi_x phi_y phi_xy + phi_yy phi_x^2``, summed in
    the order of the 2-D CUDA kernel (``bf_ls_curvature``): the order fixes
    the bits, so the kernel and this code agree to the last bit in 2-D."""
    (px, py), (pxx, pyy), (pxy,) = first, second, crosses
    return pxx * py * py - 2.0 * px * py * pxy + pyy * px * px


def _numerator_any(first, second, crosses):
    """``sum_a phi_aa sum_(b != a) phi_b^2 - 2 sum_(a < b) phi_a phi_b phi_ab``
    (``crosses`` in the order of the pairs ``a < b``)."""
    nd = len(first)
    numerator = None
    for a in range(nd):
        rest = None
        for b in range(nd):
            if b != a:
                rest = first[b] * first[b] if rest is None else rest + first[b] * first[b]
        term = second[a] * rest
        numerator = term if numerator is None else numerator + term
    pairs = [(a, b) for a in range(nd) for b in range(a + 1, nd)]
    for (a, b), cross in zip(pairs, crosses):
        numerator = numerator - 2.0 * first[a] * first[b] * cross
    return numerator


#: The curvature's numerator by dimension (any other: :func:`_numerator_any`).
_NUMERATORS = {2: _numerator_plane}


@twin
def curvature(phi, spacing, padding=WALLS):
    """Mean curvature ``kappa = div(grad phi / |grad phi|)`` at the cells.

    Second-order central differences of
    ``(sum_a phi_aa |g|^2 - sum_ab phi_a phi_b phi_ab) / |g|^3`` (in 2-D
    ``(phi_xx phi_y^2 - 2 phi_x phi_y phi_xy + phi_yy phi_x^2) / |g|^3``)
    over one ghost layer of quadratic extrapolation per axis (so the
    differences at a wall are the one-sided second-order / first-order
    ones).  ``|g|`` is floored at ``1e-8`` (phi is a distance, so its
    gradient is O(1) away from ridges) and ``kappa`` is clipped to
    ``|kappa| <= 1 / min(spacing)``: no curvature finer than the grid can
    be resolved, and the clip keeps ridges and bubble centres from
    producing huge surface-tension forces.

    A sphere (circle) of radius R with ``phi > 0`` outside has
    ``kappa = (ndim - 1) / R``.

    Parameters
    ----------
    phi : array
    spacing : tuple of float
    padding : WallPadding or SlabPadding, optional

    Returns
    -------
    array
    """
    xp = array_module(phi)
    nd = phi.ndim
    p = phi
    for k in range(nd - 1, -1, -1):
        p = padding.quadratic(p, k)

    def shifted(*pairs):
        # The padded field shifted by +-1 along the given array axes.
        o = [0] * nd
        for k, s in pairs:
            o[k] += s
        return p[tuple(slice(1 + s, p.shape[k] - 1 + s) for k, s in enumerate(o))]

    c = shifted()
    first, second = [], []
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        up, down = shifted((k, 1)), shifted((k, -1))
        first.append((up - down) / (2.0 * h))
        second.append((up - 2.0 * c + down) / (h * h))
    crosses = []
    for a in range(nd):
        for b in range(a + 1, nd):
            ka, kb = array_axis(nd, a), array_axis(nd, b)
            crosses.append((shifted((ka, 1), (kb, 1)) - shifted((ka, -1), (kb, 1))
                            - shifted((ka, 1), (kb, -1)) + shifted((ka, -1), (kb, -1)))
                           / (4.0 * spacing[a] * spacing[b]))
    g2 = None
    for d in first:
        g2 = d * d if g2 is None else g2 + d * d
    numerator = _NUMERATORS.get(nd, _numerator_any)(first, second, crosses)
    g = xp.maximum(xp.sqrt(g2), 1e-8)
    kmax = 1.0 / min(spacing)
    return xp.clip(numerator / (g * g * g), -kmax, kmax)


@twin
def smooth(phi, passes=1, padding=WALLS):
    """``phi`` filtered by ``passes`` passes of the separable ``[1, 2, 1] / 4``
    filter along every axis (x first), a wall cell standing in for its
    missing neighbour.

    A level set rebuilt as the distance to PLIC segments (the CLSVOF
    redistancing) is only continuous across the segments' corners: its
    second differences, and so its curvature, carry an O(1) noise that
    refinement does not remove.  A few passes take it out while they keep
    the curvature of a smooth interface (a linear ``phi`` is unchanged away
    from the walls; a circle's distance changes by ``h^2 / (4 r)`` per
    pass, which moves its level lines but not their curvature).

    Parameters
    ----------
    phi : array
    passes : int, optional
        0 returns ``phi`` itself.
    padding : WallPadding or SlabPadding, optional

    Returns
    -------
    array
    """
    nd = phi.ndim
    for _ in range(passes):
        q = padding.edge(phi)
        for k in range(nd - 1, -1, -1):
            q = 0.25 * (q[along(nd, k, slice(None, -2))] + 2.0 * q[along(nd, k, slice(1, -1))]
                        + q[along(nd, k, slice(2, None))])
        phi = q
    return phi


# The CUDA variants (levelset_cuda.py, kernels in levelset.cu): float64, one
# process; NotImplemented (the array code runs) for what they do not cover.
advect.register("cupy")(levelset_cuda.advect)
reinitialize.register("cupy")(levelset_cuda.reinitialize)
curvature.register("cupy")(levelset_cuda.curvature)
smooth.register("cupy")(levelset_cuda.smooth)
