"""Level-set operations for the time-dependent flow: transport, redistancing,
curvature and the interface diagnostics of the rising-bubble benchmark.

Conventions (shared with :mod:`bubbleflow.mesh.levelset`):

* grid arrays have shape ``(ny, nx)``; cell ``(j, i)`` has its centre at
  ``x_i = (i + 0.5) hx``, ``y_j = (j + 0.5) hy``;
* ``phi > 0`` in the liquid, ``phi < 0`` in the gas, ``|phi|`` ~ distance;
* MAC face velocities: ``u`` of shape ``(ny, nx + 1)`` on the vertical faces
  (``u[:, 0]`` and ``u[:, nx]`` on the left and right walls), ``v`` of shape
  ``(ny + 1, nx)`` on the horizontal faces (``v[0]``, ``v[ny]`` bottom and
  top walls).

Everything is written against the array module of the input
(:func:`bubbleflow.compute.backend.backend_of`), so the same code runs on NumPy and
CuPy.  Scalar diagnostics are returned as Python floats.  :func:`advect`,
:func:`reinitialize`, :func:`curvature`, :func:`smooth` and :func:`bubble_diagnostics` are
twins (:mod:`bubbleflow.compute.twins`): this array code is the reference; on
CuPy their CUDA variants (:mod:`bubbleflow.flow.levelset_cuda`) run.
"""
from __future__ import annotations

import math

from . import levelset_cuda
from ..compute.backend import array_module, backend_of
from ..compute.twins import twin
from ..mesh.levelset import heaviside

__all__ = [
    "advect", "reinitialize", "curvature", "smooth", "interface_length",
    "interface_segments", "gas_area", "bubble_diagnostics",
]

# Ghost layers the WENO5 stencils reach beyond the first/last cell.
_NG = 3


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------

def _pad_linear(phi, ng, axis, xp):
    """Add ``ng`` ghost layers on both ends of ``axis`` by linear extrapolation.

    ``phi`` is (close to) a signed distance, which is linear along any line
    that does not cross the interface or a ridge; extrapolating linearly keeps
    it one, so the one-sided WENO stencils see no artificial kink at a wall.
    """
    n = phi.shape[axis]
    if n < 2:
        # One cell: nothing to extrapolate from; a constant continuation is all
        # that can be done.
        reps = [1, 1]
        reps[axis] = 2 * ng + 1
        return xp.tile(phi, reps)
    k = xp.arange(1, ng + 1, dtype=phi.dtype)
    if axis == 1:
        first, second = phi[:, 0:1], phi[:, 1:2]
        last, before = phi[:, -1:], phi[:, -2:-1]
        left = first - (second - first) * k[::-1][None, :]
        right = last + (last - before) * k[None, :]
        return xp.concatenate([left, phi, right], axis=1)
    first, second = phi[0:1, :], phi[1:2, :]
    last, before = phi[-1:, :], phi[-2:-1, :]
    low = first - (second - first) * k[::-1][:, None]
    high = last + (last - before) * k[:, None]
    return xp.concatenate([low, phi, high], axis=0)


def _pad_quadratic(phi, axis, xp):
    """One ghost layer on both ends of ``axis`` by quadratic extrapolation.

    With this ghost the central first difference at the wall cell equals the
    second-order one-sided difference ``(-3 f0 + 4 f1 - f2) / 2h`` and the
    central second difference equals the one-sided ``f0 - 2 f1 + f2``, which is
    what the curvature needs at walls (a linear ghost would force
    ``phi_xx = 0`` there).
    """
    if phi.shape[axis] < 3:
        return _pad_linear(phi, 1, axis, xp)
    if axis == 1:
        lo = 3.0 * phi[:, 0:1] - 3.0 * phi[:, 1:2] + phi[:, 2:3]
        hi = 3.0 * phi[:, -1:] - 3.0 * phi[:, -2:-1] + phi[:, -3:-2]
        return xp.concatenate([lo, phi, hi], axis=1)
    lo = 3.0 * phi[0:1, :] - 3.0 * phi[1:2, :] + phi[2:3, :]
    hi = 3.0 * phi[-1:, :] - 3.0 * phi[-2:-1, :] + phi[-3:-2, :]
    return xp.concatenate([lo, phi, hi], axis=0)


def weno_floor(dtype, xp):
    # The smoothness indicators are squared in the weights; the floor must
    # survive that squaring in the working precision (1e-99 underflows in
    # float32), or a flat region gives 0/0.
    return 10.0 * math.sqrt(float(xp.finfo(dtype).tiny))


def weno5(v1, v2, v3, v4, v5, floor):
    """Jiang-Shu WENO5 combination of the five one-sided differences.

    ``v1 .. v5`` are the divided differences ordered along the upwind
    direction (Jiang and Peng 2000, Osher and Fedkiw 2003, sec. 3.4).
    """
    s1 = (13.0 / 12.0) * (v1 - 2.0 * v2 + v3) ** 2 + 0.25 * (v1 - 4.0 * v2 + 3.0 * v3) ** 2
    s2 = (13.0 / 12.0) * (v2 - 2.0 * v3 + v4) ** 2 + 0.25 * (v2 - v4) ** 2
    s3 = (13.0 / 12.0) * (v3 - 2.0 * v4 + v5) ** 2 + 0.25 * (3.0 * v3 - 4.0 * v4 + v5) ** 2
    # Scale-aware epsilon (Jiang-Peng): relative to the local differences, so
    # the weights do not depend on the units of phi.
    eps = 1e-6 * _max5sq(v1, v2, v3, v4, v5) + floor
    a1 = 0.1 / (s1 + eps) ** 2
    a2 = 0.6 / (s2 + eps) ** 2
    a3 = 0.3 / (s3 + eps) ** 2
    p1 = v1 / 3.0 - (7.0 / 6.0) * v2 + (11.0 / 6.0) * v3
    p2 = -v2 / 6.0 + (5.0 / 6.0) * v3 + v4 / 3.0
    p3 = v3 / 3.0 + (5.0 / 6.0) * v4 - v5 / 6.0
    return (a1 * p1 + a2 * p2 + a3 * p3) / (a1 + a2 + a3)


def _max5sq(v1, v2, v3, v4, v5):
    xp = array_module(v1)
    m = xp.maximum(v1 * v1, v2 * v2)
    m = xp.maximum(m, v3 * v3)
    m = xp.maximum(m, v4 * v4)
    return xp.maximum(m, v5 * v5)


def _stencils(phi, h, axis, xp):
    """The ten divided differences of the WENO5 minus and plus derivatives.

    Returns ``(minus, plus)``, each a list ``[v1, ..., v5]`` of arrays shaped
    like ``phi``: ``minus`` approximates the left-biased (backward)
    derivative, ``plus`` the right-biased one.
    """
    n = phi.shape[axis]
    p = _pad_linear(phi, _NG, axis, xp)
    if axis == 1:
        d = (p[:, 1:] - p[:, :-1]) / h          # d[:, k] = (p[k+1] - p[k]) / h

        def D(k):
            return d[:, k:k + n]
    else:
        d = (p[1:, :] - p[:-1, :]) / h

        def D(k):
            return d[k:k + n, :]
    # Backward difference at cell i, (phi_i - phi_{i-1}) / h, is d[i + 2].
    minus = [D(0), D(1), D(2), D(3), D(4)]
    plus = [D(5), D(4), D(3), D(2), D(1)]
    return minus, plus


def _weno_derivatives(phi, h, axis, xp, floor):
    """WENO5 backward and forward derivatives ``(D^- phi, D^+ phi)`` along ``axis``."""
    minus, plus = _stencils(phi, h, axis, xp)
    return weno5(*minus, floor), weno5(*plus, floor)


def _weno_upwind(phi, h, axis, upwind_minus, xp, floor):
    """WENO5 derivative upwinded per cell: backward where ``upwind_minus``.

    The stencil is chosen before the (expensive) nonlinear weights are
    formed, so only one WENO evaluation is needed per direction.
    """
    minus, plus = _stencils(phi, h, axis, xp)
    v = [xp.where(upwind_minus, m, q) for m, q in zip(minus, plus)]
    return weno5(*v, floor)


def _cell_velocity(u, v):
    """Cell-centre velocity: mean of the two MAC faces of each cell."""
    return 0.5 * (u[:, :-1] + u[:, 1:]), 0.5 * (v[:-1, :] + v[1:, :])


def rk3(phi, dt, rhs):
    """One TVD Runge-Kutta 3 step (Shu and Osher 1988) of ``phi_t = rhs(phi)``."""
    p1 = phi + dt * rhs(phi)
    p2 = 0.75 * phi + 0.25 * (p1 + dt * rhs(p1))
    return (1.0 / 3.0) * phi + (2.0 / 3.0) * (p2 + dt * rhs(p2))


# ----------------------------------------------------------------------------
# transport
# ----------------------------------------------------------------------------

@twin
def advect(phi, u, v, dt, hx, hy):
    """Advance the level set one step of ``phi_t + u . grad(phi) = 0``.

    Spatial derivatives are Jiang-Shu WENO5, upwinded by the sign of the
    cell-centre velocity (the mean of the two MAC faces of each cell); time
    integration is TVD-RK3 (Shu-Osher) with the velocity frozen over the step.
    Walls are handled with three ghost layers of linearly extrapolated phi.

    Parameters
    ----------
    phi : array (ny, nx)
        Level set at time ``t``.
    u : array (ny, nx + 1)
        x velocity on the vertical faces.
    v : array (ny + 1, nx)
        y velocity on the horizontal faces.
    dt : float
        Time step.  Stability needs ``dt * (max|u|/hx + max|v|/hy) <~ 1``;
        choosing it is the caller's job (no sub-stepping is done here).
    hx, hy : float
        Cell sizes.

    Returns
    -------
    array (ny, nx)
        Level set at ``t + dt`` (a new array; ``phi`` is not modified).
    """
    xp = array_module(phi, u, v)
    ny, nx = phi.shape
    if u.shape != (ny, nx + 1) or v.shape != (ny + 1, nx):
        raise ValueError(f"face velocities of shapes {u.shape}, {v.shape} do not match "
                         f"phi of shape {phi.shape}: expected {(ny, nx + 1)} and {(ny + 1, nx)}")
    uc, vc = _cell_velocity(u, v)
    uc = uc.astype(phi.dtype, copy=False)
    vc = vc.astype(phi.dtype, copy=False)
    floor = weno_floor(phi.dtype, xp)
    # Information comes from the left where u > 0: use the backward derivative.
    up_x = uc > 0
    up_y = vc > 0

    def rhs(p):
        px = _weno_upwind(p, hx, 1, up_x, xp, floor)
        py = _weno_upwind(p, hy, 0, up_y, xp, floor)
        return -(uc * px + vc * py)

    return rk3(phi, dt, rhs)


# ----------------------------------------------------------------------------
# redistancing
# ----------------------------------------------------------------------------

def _interface_cells(phi0, xp):
    """Cells with a face neighbour on the other side of the zero level.

    Only interior faces count: a wall has no cell behind it.
    """
    near = phi0 == 0
    cx = (phi0[:, 1:] * phi0[:, :-1]) <= 0
    cy = (phi0[1:, :] * phi0[:-1, :]) <= 0
    near = near.copy()
    near[:, 1:] |= cx
    near[:, :-1] |= cx
    near[1:, :] |= cy
    near[:-1, :] |= cy
    return near


def _subcell_distance(phi0, hx, hy, xp):
    """Russo-Smereka distance estimate ``D = phi0 / |grad phi0|``.

    ``|grad phi0|`` is the largest of the central-difference gradient and the
    four one-sided differences (Russo and Smereka 2000, eq. 17): taking the
    largest keeps the estimate robust where phi0 is steep on one side only.
    At walls the linear ghost turns the central difference into a one-sided
    one.
    """
    px = _pad_linear(phi0, 1, 1, xp)
    py = _pad_linear(phi0, 1, 0, xp)
    e = px[:, 2:]
    w = px[:, :-2]
    n = py[2:, :]
    s = py[:-2, :]
    central = xp.sqrt(((e - w) / (2.0 * hx)) ** 2 + ((n - s) / (2.0 * hy)) ** 2)
    g = xp.maximum(central, xp.abs(e - phi0) / hx)
    g = xp.maximum(g, xp.abs(phi0 - w) / hx)
    g = xp.maximum(g, xp.abs(n - phi0) / hy)
    g = xp.maximum(g, xp.abs(phi0 - s) / hy)
    # Interface cells have a sign change next to them, so g > 0 there unless
    # phi0 is identically zero locally, where D = 0 is the right answer.
    tiny = float(xp.finfo(phi0.dtype).tiny)
    return phi0 / xp.maximum(g, tiny)


@twin
def reinitialize(phi, hx, hy, iterations=20, cfl=0.3):
    """Restore the signed-distance property of ``phi`` without moving its zero level.

    Solves ``phi_tau + S(phi0) (|grad phi| - 1) = 0`` in pseudo-time
    (Sussman, Smereka and Osher 1994) with the Godunov Hamiltonian built from
    WENO5 one-sided derivatives and TVD-RK3 in pseudo-time.  The sign is
    smoothed, ``S = phi0 / sqrt(phi0^2 + h^2)`` with ``h = max(hx, hy)``.

    Cells next to the interface (a face neighbour of the other sign) use the
    subcell fix of Russo and Smereka (2000): there the update is
    ``phi_tau = -(sign(phi0) |phi| - D) / h`` with ``D = phi0 / |grad phi0|``
    the distance estimated from the initial field, which pins the zero contour
    instead of letting the upwind scheme drift it.

    Parameters
    ----------
    phi : array (ny, nx)
        Level set (any Lipschitz function with the right zero contour).
    hx, hy : float
        Cell sizes.
    iterations : int, optional
        Pseudo-time steps.  Distance information travels one unit of length
        per unit of pseudo-time, i.e. ``cfl`` cells per iteration, so the
        default 20 at ``cfl = 0.3`` corrects a band of about 6 cells around
        the interface (what the smoothed Heaviside, ``eps = 1.5 h``, and the
        curvature stencils need).  Farther away phi keeps its sign and is
        only partly corrected.
    cfl : float, optional
        Pseudo-time step over ``min(hx, hy)``.

    Returns
    -------
    array (ny, nx)
        The redistanced level set (a new array).
    """
    xp = array_module(phi)
    phi0 = phi
    h = max(hx, hy)
    hmin = min(hx, hy)
    dtau = cfl * hmin
    floor = weno_floor(phi.dtype, xp)

    S = phi0 / xp.sqrt(phi0 * phi0 + h * h)
    positive = S > 0
    near = _interface_cells(phi0, xp)
    D = _subcell_distance(phi0, hx, hy, xp)
    sgn0 = xp.sign(phi0)

    def rhs(p):
        a, b = _weno_derivatives(p, hx, 1, xp, floor)   # D^-x, D^+x
        c, d = _weno_derivatives(p, hy, 0, xp, floor)   # D^-y, D^+y
        zero = 0.0
        # Godunov Hamiltonian: characteristics leave the interface, so where
        # phi0 > 0 the admissible derivatives point away from smaller phi
        # (Osher and Fedkiw 2003, eq. 7.5 ff.).
        ap, am = xp.maximum(a, zero), xp.minimum(a, zero)
        bp, bm = xp.maximum(b, zero), xp.minimum(b, zero)
        cp, cm = xp.maximum(c, zero), xp.minimum(c, zero)
        dp, dm = xp.maximum(d, zero), xp.minimum(d, zero)
        gpos = xp.maximum(ap * ap, bm * bm) + xp.maximum(cp * cp, dm * dm)
        gneg = xp.maximum(am * am, bp * bp) + xp.maximum(cm * cm, dp * dp)
        grad = xp.sqrt(xp.where(positive, gpos, gneg))
        r = -S * (grad - 1.0)
        fix = -(sgn0 * xp.abs(p) - D) / hmin
        return xp.where(near, fix, r)

    out = phi0
    for _ in range(int(iterations)):
        out = rk3(out, dtau, rhs)
    if out is phi0:
        out = phi0.copy()
    return out


# ----------------------------------------------------------------------------
# curvature
# ----------------------------------------------------------------------------

@twin
def curvature(phi, hx, hy):
    """Mean curvature ``kappa = div(grad phi / |grad phi|)`` at cell centres.

    Second-order central differences of the standard formula::

        kappa = (phi_xx phi_y^2 - 2 phi_x phi_y phi_xy + phi_yy phi_x^2) / |grad phi|^3

    with one ghost layer of quadratic extrapolation at the walls (so the
    differences there are the one-sided second-order / first-order ones).
    ``|grad phi|`` is floored at ``1e-8`` (phi is a distance, so its gradient
    is O(1) away from ridges) and ``kappa`` is clipped to
    ``|kappa| <= 1 / min(hx, hy)``: no curvature finer than the grid can be
    resolved, and the clip keeps ridges and bubble centres from producing
    huge surface-tension forces.

    With ``phi > 0`` outside a gas bubble of radius R, ``kappa = +1/R``.

    Parameters
    ----------
    phi : array (ny, nx)
    hx, hy : float

    Returns
    -------
    array (ny, nx)
    """
    xp = array_module(phi)
    p = _pad_quadratic(_pad_quadratic(phi, 1, xp), 0, xp)
    c = p[1:-1, 1:-1]
    e, w = p[1:-1, 2:], p[1:-1, :-2]
    n, s = p[2:, 1:-1], p[:-2, 1:-1]
    px = (e - w) / (2.0 * hx)
    py = (n - s) / (2.0 * hy)
    pxx = (e - 2.0 * c + w) / (hx * hx)
    pyy = (n - 2.0 * c + s) / (hy * hy)
    pxy = (p[2:, 2:] - p[2:, :-2] - p[:-2, 2:] + p[:-2, :-2]) / (4.0 * hx * hy)
    g = xp.maximum(xp.sqrt(px * px + py * py), 1e-8)
    kappa = (pxx * py * py - 2.0 * px * py * pxy + pyy * px * px) / (g * g * g)
    kmax = 1.0 / min(hx, hy)
    return xp.clip(kappa, -kmax, kmax)


@twin
def smooth(phi, passes=1):
    """``phi`` filtered by ``passes`` passes of the separable ``[1, 2, 1] / 4``
    filter (along x, then along y), a wall cell standing in for its missing
    neighbour.

    A level set rebuilt as the distance to PLIC segments (:func:`.vof.redistance`)
    is only continuous across the segments' corners: its second differences,
    and so its curvature, carry an O(1) noise that refinement does not remove.
    A few passes take it out while they keep the curvature of a smooth
    interface (a linear ``phi`` is unchanged away from the walls; a circle's
    distance changes by ``h^2 / (4 r)`` per pass, which moves its level lines
    but not their curvature).

    Parameters
    ----------
    phi : array (ny, nx)
    passes : int
        0 returns ``phi`` itself.

    Returns
    -------
    array (ny, nx)
    """
    xp = array_module(phi)
    for _ in range(passes):
        p = xp.pad(phi, 1, mode="edge")
        q = 0.25 * (p[:, :-2] + 2.0 * p[:, 1:-1] + p[:, 2:])
        phi = 0.25 * (q[:-2] + 2.0 * q[1:-1] + q[2:])
    return phi


# ----------------------------------------------------------------------------
# contour and area diagnostics
# ----------------------------------------------------------------------------

def _marching_squares(phi, hx, hy, xp, first_row=0):
    """Segments of the zero contour on the cell-centre lattice.

    Each lattice square has corners ``a = (j, i)``, ``b = (j, i+1)``,
    ``c = (j+1, i+1)``, ``d = (j+1, i)``; its edges are numbered 0 bottom
    (a-b), 1 right (b-c), 2 top (d-c), 3 left (a-d).  ``phi >= 0`` counts as
    liquid.  Returns a list of ``(mask, x0, y0, x1, y1)``: where ``mask`` is
    true the square holds the segment from ``(x0, y0)`` to ``(x1, y1)``.
    ``first_row``: the grid row of ``phi``'s first (a rank's slab).
    """
    a = phi[:-1, :-1]
    b = phi[:-1, 1:]
    c = phi[1:, 1:]
    d = phi[1:, :-1]
    ny, nx = phi.shape
    xs = ((xp.arange(nx - 1, dtype=phi.dtype) + 0.5) * hx)[None, :]
    ys = ((xp.arange(first_row, first_row + ny - 1, dtype=phi.dtype) + 0.5) * hy)[:, None]
    pa, pb, pc, pd = a >= 0, b >= 0, c >= 0, d >= 0

    def frac(f, g, crossed):
        # Linear interpolation of the zero between two corners of opposite
        # sign; guarded so non-crossed edges never divide by zero.
        return xp.where(crossed, f / xp.where(crossed, f - g, 1.0), 0.0)

    cr = [pa != pb, pb != pc, pd != pc, pa != pd]
    t0 = frac(a, b, cr[0])
    t1 = frac(b, c, cr[1])
    t2 = frac(d, c, cr[2])
    t3 = frac(a, d, cr[3])
    zero = xp.zeros_like(a)
    pts = [
        (xs + t0 * hx, ys + zero),          # bottom
        (xs + hx + zero, ys + t1 * hy),     # right
        (xs + t2 * hx, ys + hy + zero),     # top
        (xs + zero, ys + t3 * hy),          # left
    ]
    count = cr[0].astype(xp.int8) + cr[1] + cr[2] + cr[3]
    two = count == 2
    four = count == 4
    # Saddle (all four edges crossed): decide the connectivity with the value
    # at the square's centre, the bilinear interpolant's mean.  If the centre
    # has the sign of corner a (hence of c), the a-c diagonal is connected and
    # the contour cuts off corners b and d; otherwise it cuts off a and c.
    # Deciding by the centre value is symmetric, so neighbouring squares
    # never disagree on a shared edge.
    centre_like_a = ((a + b + c + d) >= 0) == pa
    cut_bd = four & centre_like_a
    cut_ac = four & ~centre_like_a
    pairs = [
        (0, 1, (two & cr[0] & cr[1]) | cut_bd),   # around b
        (2, 3, (two & cr[2] & cr[3]) | cut_bd),   # around d
        (0, 3, (two & cr[0] & cr[3]) | cut_ac),   # around a
        (1, 2, (two & cr[1] & cr[2]) | cut_ac),   # around c
        (0, 2, two & cr[0] & cr[2]),
        (1, 3, two & cr[1] & cr[3]),
    ]
    return [(m, pts[p][0], pts[p][1], pts[q][0], pts[q][1]) for p, q, m in pairs]


def _interface_length(phi, hx, hy, xp, first_row=0):
    total = 0.0
    for m, x0, y0, x1, y1 in _marching_squares(phi, hx, hy, xp, first_row):
        seg = xp.sqrt((x1 - x0) ** 2 + (y1 - y0) ** 2)
        total = total + xp.sum(xp.where(m, seg, 0.0))
    return total


def interface_length(phi, hx, hy):
    """Length of the ``phi = 0`` contour by marching squares.

    The contour is traced on the lattice of cell centres, with the crossing
    on each lattice edge placed by linear interpolation (second-order
    accurate); the ambiguous saddle squares are resolved by the sign of the
    mean of the four corners.  The half cell between the outermost centres
    and the walls is not covered, so a contour reaching a wall (a free
    surface) is short by at most about a cell width.

    Parameters
    ----------
    phi : array (ny, nx)
    hx, hy : float

    Returns
    -------
    float
    """
    xp = array_module(phi)
    if phi.shape[0] < 2 or phi.shape[1] < 2:
        return 0.0
    return float(_interface_length(phi, hx, hy, xp))


def interface_segments(phi, hx, hy):
    """The marching-squares segments of the zero contour, as host arrays.

    Returns
    -------
    numpy.ndarray, shape (m, 4)
        One row ``(x0, y0, x1, y1)`` per segment (in length units), the same
        segments :func:`interface_length` sums.  Handy for plots and for
        measuring how far a contour is from an exact shape.
    """
    import numpy as np

    backend = backend_of(phi)
    xp = backend.xp
    if phi.shape[0] < 2 or phi.shape[1] < 2:
        return np.zeros((0, 4))
    rows = []
    for m, x0, y0, x1, y1 in _marching_squares(phi, hx, hy, xp):
        rows.append(xp.stack([x0[m], y0[m], x1[m], y1[m]], axis=1))
    return backend.to_host(xp.concatenate(rows, axis=0))


def gas_area(phi, hx, hy, eps):
    """Gas area ``integral of (1 - H_eps(phi)) dA`` (midpoint rule over cells).

    ``H_eps`` is :func:`bubbleflow.mesh.levelset.heaviside`; use
    ``eps = 1.5 * max(hx, hy)`` as everywhere else.  For a signed distance the
    smoothing biases the area of a circle of radius R by about
    ``+0.13 (eps/R)^2`` relative.
    """
    xp = array_module(phi)
    return float(xp.sum(1.0 - heaviside(phi, eps, xp))) * hx * hy


def _contour_area(phi, hx, hy, xp):
    return float(_contour_area_sum(phi, xp)) * hx * hy


def _contour_area_sum(phi, xp):
    """Area of the gas polygon bounded by the marching-squares contour.

    The region ``phi < 0`` is cut into lattice squares (cell centres at the
    corners) exactly as :func:`_marching_squares` traces it: in each square
    the gas part is the polygon of its gas corners and the crossings on its
    edges (linear interpolation), taken counter-clockwise round the square;
    its area is the shoelace sum.  In a saddle square whose centre is liquid
    the gas is two separate corner triangles, whose area is the square's
    less the liquid polygon.  The half cell between the outermost centres and
    the walls is not covered (as for :func:`interface_length`).

    This is the area enclosed by the very contour whose length
    :func:`interface_length` measures, so the two give a consistent
    isoperimetric ratio (at most 1, by the isoperimetric inequality for
    polygons).
    """
    a = phi[:-1, :-1]
    b = phi[:-1, 1:]
    c = phi[1:, 1:]
    d = phi[1:, :-1]
    la, lb, lc, ld = a >= 0, b >= 0, c >= 0, d >= 0

    def frac(f, g, crossed):
        return xp.where(crossed, f / xp.where(crossed, f - g, 1.0), 0.0)

    cr = [la != lb, lb != lc, ld != lc, la != ld]
    t0, t1, t2, t3 = frac(a, b, cr[0]), frac(b, c, cr[1]), frac(d, c, cr[2]), frac(a, d, cr[3])
    zero = xp.zeros_like(a)
    one = zero + 1.0
    # The square's eight candidate vertices, counter-clockwise from corner a,
    # in units of (hx, hy) relative to corner a.
    px = [zero, t0, one, one, one, t2, zero, zero]
    py = [zero, zero, zero, t1, one, one, one, t3]
    crossings = [cr[0], cr[1], cr[2], cr[3]]

    def polygon_area(corner_in):
        inc = [corner_in[0], crossings[0], corner_in[1], crossings[1],
               corner_in[2], crossings[2], corner_in[3], crossings[3]]
        # Left out vertices take the place of the previous vertex that is in
        # (a repeated vertex adds nothing to the shoelace sum); two rounds so
        # that the first vertices see the last ones.
        lx, ly = zero, zero
        for k in range(8):
            lx = xp.where(inc[k], px[k], lx)
            ly = xp.where(inc[k], py[k], ly)
        qx, qy = [], []
        for k in range(8):
            lx = xp.where(inc[k], px[k], lx)
            ly = xp.where(inc[k], py[k], ly)
            qx.append(lx)
            qy.append(ly)
        twice = zero
        for k in range(8):
            m = (k + 1) % 8
            twice = twice + qx[k] * qy[m] - qx[m] * qy[k]
        return 0.5 * twice

    gas = polygon_area([~la, ~lb, ~lc, ~ld])
    saddle = cr[0] & cr[1] & cr[2] & cr[3]
    liquid_centre = (a + b + c + d) >= 0
    split = saddle & liquid_centre
    if bool(xp.any(split)):
        gas = xp.where(split, 1.0 - polygon_area([la, lb, lc, ld]), gas)
    return xp.sum(gas)


@twin
def bubble_diagnostics(phi, u, v, hx, hy, eps):
    """Benchmark quantities of a rising bubble (Hysing et al. 2009).

    Parameters
    ----------
    phi : array (ny, nx)
    u : array (ny, nx + 1)
    v : array (ny + 1, nx)
    hx, hy, eps : float
        Cell sizes and the Heaviside width (``1.5 * max(hx, hy)``).

    Returns
    -------
    dict of float
        ``area``: gas area, as :func:`gas_area`;
        ``centroid_x``, ``centroid_y``: ``integral of x (1 - H) / area``, and
        of ``y``;
        ``rise_velocity``: ``integral of v_c (1 - H) / area`` with ``v_c``
        the cell-centre vertical velocity (mean of the two faces);
        ``interface_length``: from :func:`interface_length`;
        ``contour_area``: the area enclosed by that same contour (the
        marching-squares polygon, :func:`_contour_area`);
        ``circularity``: ``2 sqrt(pi contour_area) / interface_length``, the
        perimeter of the circle of equal area over the actual perimeter
        (1 for a circle, < 1 otherwise).
        Without gas (or without a contour) the quotients are NaN.

    The circularity takes the area from the contour, not the smoothed
    Heaviside ``area``: the latter is biased by about ``+0.13 (eps/R)^2``
    while the polygon's perimeter is short by about ``(h/R)^2 / 24``, which
    put a resolved circle at 1.002 on a 40 x 80 grid (R = 10 cells).  Area
    and length of one polygon keep the ratio at most 1; a circle of radius R
    sampled as a signed distance gives ``1 - O((h/R)^2)`` (2e-5 at R = 10 h).

    Notes
    -----
    These are the quantities of the benchmark for ONE bubble.  With several
    bubbles they describe all the gas together (total area, mean centroid,
    mean rise velocity), and the circularity compares the total area with the
    total contour length, which includes every bubble's perimeter and, with a
    free surface, the free-surface line as well; it is then no longer a shape
    measure of any single bubble.
    """
    backend = backend_of(phi, u, v)
    sums = _bubble_sums(phi, phi, u, v, hx, hy, eps, backend.xp)
    return bubble_quantities(backend.to_host(sums), hx, hy)


def bubble_sums_slab(phi, squares, u, v, hx, hy, eps, first_row):
    """The sums behind :func:`bubble_diagnostics` of a rank's slab of rows
    (``first_row`` on), a host array: the ranks' sums added give
    :func:`bubble_quantities` the whole grid's.  ``squares`` holds the
    rows of the slab's lattice squares (the slab's rows and the next rank's
    first: each square is one rank's)."""
    xp = array_module(phi, u, v)
    return backend_of(phi).to_host(_bubble_sums(phi, squares, u, v, hx, hy, eps, xp, first_row))


def _bubble_sums(phi, squares, u, v, hx, hy, eps, xp, first_row=0):
    """``[mass, x mass, y mass, v mass, contour length, contour area / (hx hy)]``."""
    ny, nx = phi.shape
    w = 1.0 - heaviside(phi, eps, xp)
    x = (xp.arange(nx, dtype=phi.dtype) + 0.5) * hx
    y = (xp.arange(first_row, first_row + ny, dtype=phi.dtype) + 0.5) * hy
    _, vc = _cell_velocity(u, v)
    contour = squares.shape[0] >= 2 and nx >= 2
    zero = xp.zeros((), dtype=phi.dtype)
    return xp.stack([xp.sum(w), xp.sum(w * x[None, :]), xp.sum(w * y[:, None]), xp.sum(w * vc),
                     _interface_length(squares, hx, hy, xp, first_row) if contour else zero,
                     _contour_area_sum(squares, xp) if contour else zero])


def bubble_quantities(sums, hx, hy):
    """:func:`bubble_diagnostics` from its sums (host, summed over the ranks)."""
    mass, wx, wy, wv, length, enclosed = (float(s) for s in sums)
    area = mass * hx * hy
    enclosed = enclosed * hx * hy
    nan = float("nan")
    if mass <= 0.0:
        return {"area": area, "centroid_x": nan, "centroid_y": nan,
                "rise_velocity": nan, "interface_length": length, "contour_area": enclosed,
                "circularity": nan}
    circ = 2.0 * math.sqrt(math.pi * enclosed) / length if length > 0 and enclosed > 0 else nan
    return {"area": area, "centroid_x": wx / mass, "centroid_y": wy / mass,
            "rise_velocity": wv / mass, "interface_length": length, "contour_area": enclosed,
            "circularity": circ}


# The CUDA variants (levelset_cuda.py, kernels in levelset.cu): a few launches
# per call on CuPy instead of the array code's hundreds; NotImplemented (the
# array code runs) for what they do not cover.
advect.register("cupy")(levelset_cuda.advect)
reinitialize.register("cupy")(levelset_cuda.reinitialize)
curvature.register("cupy")(levelset_cuda.curvature)
smooth.register("cupy")(levelset_cuda.smooth)
bubble_diagnostics.register("cupy")(levelset_cuda.bubble_diagnostics)
