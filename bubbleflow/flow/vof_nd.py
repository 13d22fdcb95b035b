"""Volume of fluid on a grid of any dimension: the VOF half of CLSVOF in 3-D.

The schemes of :mod:`.vof` (which is the 2-D code with its CUDA twins),
written once over the axes: PLIC reconstruction with the normals of the
level set, the volume fraction from a level set, the direction-split
conservative advection of Weymouth and Yue (J. Comput. Phys. 229, 2010),
the level set rebuilt from the PLIC interface and the gas diagnostics.  On
2-D arrays every function here gives :mod:`.vof`'s numbers to rounding
(tests/flow/test_vof_nd.py compares them), which is how this code is
checked; in 3-D it is the reference array code, on NumPy or CuPy.

Conventions (those of :mod:`.levelset_nd`): arrays have the grid's shape
(``(nz, ny, nx)`` in 3-D, x fastest); ``spacing`` is ``(hx, hy[, hz])``;
``velocity`` the MAC face components in grid-axis order; a normal is a
tuple of arrays in grid-axis order.  ``c = 1`` all gas, ``phi < 0`` in the
gas.  The PLIC plane of a cell: the gas is where ``m . x <= alpha``, ``x``
from the cell's lowest corner and ``m`` the unit normal out of the gas.

The 3-D forward and inverse PLIC problems are the analytic relations of
Scardovelli and Zaleski (J. Comput. Phys. 164, 2000), section 3; in 2-D the
2-D ones of :mod:`.vof`.
"""
from __future__ import annotations

import itertools
import math

from . import vof
from .levelset_nd import along, check_velocity
from .vof_limits import CLIP_TOLERANCE
from ..compute.backend import array_module, backend_of
from ..mesh.grid import array_axis

__all__ = ["cut_fraction", "plane_constant", "volume_fraction", "interface_normal",
           "reconstruct", "advect", "redistance", "search_window", "gas_volume",
           "gas_diagnostics"]

#: Entries (offset x band cell) the redistancing search handles per batch:
#: larger batches mean fewer array operations and more memory per batch.
SEARCH_BATCH = 1 << 22


# ----------------------------------------------------------------------------
# PLIC geometry in the unit cube (Scardovelli and Zaleski 2000, section 3)
# ----------------------------------------------------------------------------

def _unit_cube_plane(normal, alpha, lengths, xp):
    """The plane ``m . x = alpha`` in the box ``lengths`` mapped to the unit
    cube with non-negative normal components summing to one, sorted.

    Returns ``(m1, m2, m3, a, s)``: ``m1 <= m2 <= m3``, the scaled constant
    and the scale ``s`` (zero for a degenerate normal or an empty box).  A
    negative component moves the origin to the opposite face (the
    reflection of Scardovelli and Zaleski), which leaves the volume alone.
    """
    a = alpha
    scaled = []
    for m, length in zip(normal, lengths):
        a = a - xp.minimum(m, 0.0) * length
        scaled.append(xp.abs(m) * length)
    p, q, r = scaled
    s = p + q + r
    inv = 1.0 / xp.where(s > 0.0, s, 1.0)
    p, q, r = p * inv, q * inv, r * inv
    lo, hi = xp.minimum(p, q), xp.maximum(p, q)
    m1 = xp.minimum(lo, r)
    m3 = xp.maximum(hi, r)
    m2 = xp.maximum(lo, xp.minimum(hi, r))
    return m1, m2, m3, a * inv, s


def _safe(x, xp):
    return xp.where(x > 0.0, x, 1.0)


def _half_volume(m1, m2, m3, a, xp):
    """Volume under the plane ``m . x = a`` in the unit cube for ``0 <= a <=
    1/2`` (``m1 <= m2 <= m3``, sum one), and its derivative in ``a``.

    The closed form of Scardovelli and Zaleski: ``a^3 / (6 m1 m2 m3)`` below
    ``m1``, ``(3 a^2 - 3 a m1 + m1^2) / (6 m2 m3)`` up to ``m2``, that minus
    ``((a - m2)^3 + (a - m3)_+^3) / (6 m1 m2 m3)`` up to ``m1 + m2`` and
    ``(2 a - m1 - m2) / (2 m3)`` above.  Written as increments on the
    previous branch (rather than the paper's expanded polynomials) so that a
    nearly axis-aligned normal, tiny ``m1``, loses no digits: each
    increment's cube is below ``m1^3``.
    """
    m12 = m1 + m2
    six = 6.0 * m1 * m2 * m3
    inv_six = 1.0 / _safe(six, xp)
    inv_23 = 1.0 / _safe(m2 * m3, xp)
    d2 = xp.maximum(a - m2, 0.0)
    d3 = xp.maximum(a - m3, 0.0)
    v1 = a * a * a * inv_six
    v2 = (3.0 * a * a - 3.0 * a * m1 + m1 * m1) * inv_23 / 6.0
    v3 = v2 - (d2 * d2 * d2 + d3 * d3 * d3) * inv_six
    v4 = (2.0 * a - m12) / (2.0 * m3)
    g1 = 3.0 * a * a * inv_six
    g2 = (2.0 * a - m1) * inv_23 / 2.0
    g3 = g2 - 3.0 * (d2 * d2 + d3 * d3) * inv_six
    g4 = 1.0 / m3
    first, second, third = a < m1, a < m2, a < m12
    v = xp.where(first, v1, xp.where(second, v2, xp.where(third, v3, v4)))
    g = xp.where(first, g1, xp.where(second, g2, xp.where(third, g3, g4)))
    return v, g


def _cube_volume(m1, m2, m3, a, xp):
    """Volume and derivative for any ``a``: ``V(a) = 1 - V(1 - a)`` above 1/2."""
    a = xp.clip(a, 0.0, 1.0)
    upper = a > 0.5
    v, g = _half_volume(m1, m2, m3, xp.where(upper, 1.0 - a, a), xp)
    return xp.where(upper, 1.0 - v, v), g


def _cubic_root(b, c1, c0, xp):
    """The root of ``a^3 + b a^2 + c1 a + c0`` that the PLIC branches need
    (three real roots; Scardovelli and Zaleski's trigonometric form)."""
    p = c1 / 3.0 - b * b / 9.0
    q = (c1 * b - 3.0 * c0) / 6.0 - b * b * b / 27.0
    minus_p = xp.maximum(-p, 0.0)
    root = xp.sqrt(minus_p)
    cos3 = q / _safe(minus_p * root, xp)
    theta = xp.arccos(xp.clip(cos3, -1.0, 1.0)) / 3.0
    return root * (math.sqrt(3.0) * xp.sin(theta) - xp.cos(theta)) - b / 3.0


def _half_constant(m1, m2, m3, v, xp):
    """``a`` in ``[0, 1/2]`` with volume ``v`` in ``[0, 1/2]`` under the plane
    (the inverse of :func:`_half_volume`), analytic per branch."""
    m12 = m1 + m2
    six = 6.0 * m1 * m2 * m3
    v1 = m1 * m1 / (6.0 * _safe(m2 * m3, xp))
    v2 = v1 + (m2 - m1) / (2.0 * m3)
    plane_kink = m3 < m12                   # the plane meets the cube's far corner region
    v3 = xp.where(plane_kink, _half_volume(m1, m2, m3, xp.minimum(m3, m12), xp)[0],
                  m12 / (2.0 * m3))
    a1 = xp.cbrt(six * v)
    a2 = 0.5 * (m1 + xp.sqrt(xp.maximum(m1 * m1 + 8.0 * m2 * m3 * (v - v1), 0.0)))
    s2 = m1 * m1 + m2 * m2
    s3 = m1 * m1 * m1 + m2 * m2 * m2
    a3 = _cubic_root(-3.0 * m12, 3.0 * s2, six * v - s3, xp)
    a4 = xp.where(plane_kink,
                  _cubic_root(-1.5, 1.5 * (s2 + m3 * m3),
                              0.5 * (six * v - s3 - m3 * m3 * m3), xp),
                  m3 * v + 0.5 * m12)
    return xp.where(v < v1, a1, xp.where(v < v2, a2, xp.where(v < v3, a3, a4)))


def _cube_constant(m1, m2, m3, c, xp):
    """``a`` in ``[0, 1]`` with volume ``c`` under the plane: the analytic
    inverse, then two Newton steps on :func:`_cube_volume`, which the cubic
    branches need where ``m1`` is small (their trigonometric roots lose
    digits there); elsewhere the steps change ``a`` by rounding."""
    upper = c > 0.5
    a = _half_constant(m1, m2, m3, xp.where(upper, 1.0 - c, c), xp)
    a = xp.where(upper, 1.0 - a, a)
    inner = (c > 0.0) & (c < 1.0)
    for _ in range(2):
        v, g = _cube_volume(m1, m2, m3, a, xp)
        step = (v - c) / _safe(g, xp)
        a = xp.where(inner & (g > 0.0), xp.clip(a - step, 0.0, 1.0), a)
    return a


def cut_fraction(normal, alpha, lengths):
    """Fraction of the box ``[0, l_0] x ... `` where ``m . x <= alpha``.

    Parameters
    ----------
    normal : tuple of arrays
        The normal's components in grid-axis order (any length).
    alpha : array
        Plane constant, from the box's lowest corner.
    lengths : tuple of floats or arrays
        The box's sides (zero allowed).

    Returns
    -------
    array
        The fraction in ``[0, 1]``: in 2-D :func:`.vof.cut_fraction`, in 3-D
        Scardovelli and Zaleski's volume.  A degenerate normal gives ``1``
        where ``alpha >= 0`` and ``0`` elsewhere.
    """
    if len(normal) == 2:
        return vof.cut_fraction(normal[0], normal[1], alpha, lengths[0], lengths[1])
    xp = array_module(*normal, alpha)
    m1, m2, m3, a, s = _unit_cube_plane(normal, alpha, lengths, xp)
    v, _ = _cube_volume(m1, m2, m3, a, xp)
    degenerate = xp.where(alpha >= 0.0, 1.0, 0.0)
    return xp.where(s > 0.0, xp.clip(v, 0.0, 1.0), degenerate)


def plane_constant(normal, c, lengths):
    """``alpha`` such that ``m . x <= alpha`` covers the fraction ``c`` of the
    box: the inverse PLIC problem (:func:`.vof.line_constant` in 2-D).

    ``c`` is clipped to ``[0, 1]``; ``alpha`` is measured from the box's
    lowest corner, and ``cut_fraction(normal, alpha, lengths)`` gives ``c``
    back to rounding.  The normal must not vanish.
    """
    if len(normal) == 2:
        return vof.line_constant(normal[0], normal[1], c, lengths[0], lengths[1])
    xp = array_module(*normal, c)
    zero = xp.zeros_like(c)
    m1, m2, m3, _, s = _unit_cube_plane(normal, zero, lengths, xp)
    a = _cube_constant(m1, m2, m3, xp.clip(c, 0.0, 1.0), xp)
    out = a * s
    for m, length in zip(normal, lengths):
        out = out + xp.minimum(m, 0.0) * length
    return out


# ----------------------------------------------------------------------------
# fractions and reconstruction
# ----------------------------------------------------------------------------

def _gradient(phi, spacing, xp):
    """Central differences of ``phi`` per grid axis, one-sided at walls
    (zero along an axis of one cell)."""
    nd = phi.ndim
    out = []
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        g = xp.empty_like(phi)
        if phi.shape[k] > 1:
            s = lambda lo, hi: phi[along(nd, k, slice(lo, hi))]      # noqa: E731
            g[along(nd, k, slice(1, -1))] = (s(2, None) - s(None, -2)) / (2.0 * h)
            g[along(nd, k, slice(0, 1))] = (s(1, 2) - s(0, 1)) / h
            g[along(nd, k, slice(-1, None))] = (s(-1, None) - s(-2, -1)) / h
        else:
            g[...] = 0.0
        out.append(g)
    return tuple(out)


def _unit(normal, xp):
    """Normalise; a zero vector becomes ``-e_vertical`` (gas above, where a
    bubble's gas sits), so every cell has a usable plane."""
    norm2 = None
    for m in normal:
        norm2 = m * m if norm2 is None else norm2 + m * m
    norm = xp.sqrt(norm2)
    zero = norm == 0.0
    inv = 1.0 / xp.where(zero, 1.0, norm)
    last = len(normal) - 1
    return tuple(xp.where(zero, -1.0 if a == last else 0.0, m * inv)
                 for a, m in enumerate(normal))


def _pad_linear(phi, xp):
    """One linearly extrapolated ghost layer along every axis (corners too)."""
    nd = phi.ndim
    p = phi
    for ax in range(nd):
        lo = 2.0 * p[along(nd, ax, slice(0, 1))] - p[along(nd, ax, slice(1, 2))]
        hi = 2.0 * p[along(nd, ax, slice(-1, None))] - p[along(nd, ax, slice(-2, -1))]
        p = xp.concatenate([lo, p, hi], axis=ax)
    return p


def _subcell_fractions(phi, spacing, k, xp):
    """:func:`volume_fraction` with ``k`` sub-cells per axis: each cut by the
    tangent plane of the multilinear interpolant of phi at its centre (one
    linearly extrapolated ghost layer per axis)."""
    nd = phi.ndim
    p = _pad_linear(phi, xp)
    sub = tuple(h / k for h in spacing)
    c = xp.zeros_like(phi)
    for r in itertools.product(range(k), repeat=nd):      # sub-cell offsets, not cells
        t = [(q + 0.5) / k - 0.5 for q in r]               # per array axis, in cells
        base = [1 if x >= 0.0 else 0 for x in t]
        w = [x if x >= 0.0 else x + 1.0 for x in t]
        val = 0.0
        grad = [0.0] * nd                                  # per array axis
        for bits in itertools.product((0, 1), repeat=nd):
            f = p[tuple(slice(b + e, b + e + n) for b, e, n in zip(base, bits, phi.shape))]
            weights = [wk if e else 1.0 - wk for wk, e in zip(w, bits)]
            val = val + math.prod(weights) * f
            for ax in range(nd):
                rest = math.prod(weights[:ax] + weights[ax + 1:])
                grad[ax] = grad[ax] + (rest if bits[ax] else -rest) * f
        normal = tuple(grad[array_axis(nd, a)] / spacing[a] for a in range(nd))
        alpha = 0.5 * sum(g * s for g, s in zip(normal, sub)) - val
        c = c + cut_fraction(normal, alpha, sub)
    return c / k ** nd


def _taylor_fractions(phi, spacing, k, xp):
    """:func:`volume_fraction` with ``k`` sub-cells per axis, each cut by the
    tangent plane at its centre of the cell's quadratic Taylor model of phi
    (gradient and Hessian by central differences over one linear ghost
    layer): the interface's curvature inside the cell is followed, so the
    cut's error shrinks as ``(h / k)^2`` until the model's own error shows."""
    nd = phi.ndim
    p = _pad_linear(phi, xp)

    def shifted(offsets):                     # offsets per array axis
        return p[tuple(slice(1 + o, 1 + o + n) for o, n in zip(offsets, phi.shape))]

    def unit(pairs):
        o = [0] * nd
        for ax, s in pairs:
            o[ax] += s
        return o

    g, hess = [], {}
    for i in range(nd):
        up, down = shifted(unit([(i, 1)])), shifted(unit([(i, -1)]))
        g.append((up - down) / (2.0 * spacing[array_axis(nd, i)]))
        hess[i, i] = (up - 2.0 * phi + down) / spacing[array_axis(nd, i)] ** 2
        for j in range(i):
            hess[i, j] = hess[j, i] = (
                shifted(unit([(i, 1), (j, 1)])) - shifted(unit([(i, 1), (j, -1)]))
                - shifted(unit([(i, -1), (j, 1)])) + shifted(unit([(i, -1), (j, -1)]))
            ) / (4.0 * spacing[array_axis(nd, i)] * spacing[array_axis(nd, j)])
    sub = tuple(h / k for h in spacing)
    c = xp.zeros_like(phi)
    for r in itertools.product(range(k), repeat=nd):      # sub-cell offsets, not cells
        x = [((q + 0.5) / k - 0.5) * spacing[array_axis(nd, i)] for i, q in enumerate(r)]
        grad = [g[i] + sum(hess[i, j] * x[j] for j in range(nd)) for i in range(nd)]
        val = phi + sum((g[i] + 0.5 * sum(hess[i, j] * x[j] for j in range(nd))) * x[i]
                        for i in range(nd))
        normal = tuple(grad[array_axis(nd, a)] for a in range(nd))
        alpha = 0.5 * sum(m * s for m, s in zip(normal, sub)) - val
        c = c + cut_fraction(normal, alpha, sub)
    return c / k ** nd


def volume_fraction(phi, spacing, samples=None, fit="multilinear"):
    """Gas volume fraction of each cell from a level set
    (:func:`.vof.volume_fraction` over the axes).

    By default the PLIC cut of the cell by the zero of phi's local linear fit
    (central-difference gradient, one-sided at walls): exact for a linear
    phi, second order for a smooth interface; a sphere's volume comes out
    too large by about ``0.26 (h / R)^2`` relative (tests/flow/test_vof_nd.py).
    ``samples = k`` cuts ``k^nd`` sub-cells each by a tangent plane at its
    centre: of the multilinear interpolant of phi (``fit="multilinear"``, as
    :func:`.vof.volume_fraction`; about twice the single cut's error, of the
    opposite sign), or of the cell's quadratic Taylor model
    (``fit="quadratic"``), which follows the curvature inside the cell: the
    single cut's error over about ``k^2``.

    Parameters
    ----------
    phi : array
        Level set, ``phi < 0`` in the gas.
    spacing : tuple of floats
        Cell sizes in grid-axis order.
    samples : int, optional
        Sub-cells per axis; ``None`` cuts whole cells.
    fit : {"multilinear", "quadratic"}
        The sub-cells' model of phi.

    Returns
    -------
    array
        ``c`` in ``[0, 1]``, the shape of ``phi``.
    """
    xp = array_module(phi)
    if samples is not None:
        k = int(samples)
        if k < 1:
            raise ValueError(f"samples={samples!r}: expected None or an integer >= 1")
        if fit not in ("multilinear", "quadratic"):
            raise ValueError(f"fit={fit!r}: expected 'multilinear' or 'quadratic'")
        cut = _subcell_fractions if fit == "multilinear" else _taylor_fractions
        return cut(phi, spacing, k, xp)
    g = _gradient(phi, spacing, xp)
    # Zero of the fit: gas where g . (x - corner) <= g . (x_c - corner) - phi_c.
    alpha = 0.5 * sum(ga * h for ga, h in zip(g, spacing)) - phi
    return cut_fraction(g, alpha, spacing)


def interface_normal(c, spacing, normal_from=None):
    """Unit interface normal per cell, out of the gas, in grid-axis order.

    Youngs' method over the axes: ``-grad c`` by central differences
    smoothed ``[1, 2, 1]`` along every other axis (the corner gradients of
    the ``3^nd`` neighbourhood averaged), wall ghosts copying the wall cell.
    With ``normal_from`` (a level set) its central-difference gradient is
    used instead.  ``-e_vertical`` where the gradient vanishes.
    """
    xp = array_module(c)
    if normal_from is not None:
        return _unit(_gradient(normal_from, spacing, xp), xp)
    nd = c.ndim
    p = xp.pad(c, 1, mode="edge")
    out = []
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        d = p[along(nd, k, slice(2, None))] - p[along(nd, k, slice(None, -2))]
        for j in range(nd):
            if j != k:
                d = (d[along(nd, j, slice(None, -2))] + 2.0 * d[along(nd, j, slice(1, -1))]
                     + d[along(nd, j, slice(2, None))])
        out.append(-d / (2.0 * 4.0 ** (nd - 1) * h))
    return _unit(tuple(out), xp)


def reconstruct(c, spacing, normal_from=None):
    """PLIC reconstruction: ``(normal, alpha)`` of every cell, the gas in it
    being ``m . x <= alpha`` (``x`` from its lowest corner), exactly ``c``."""
    m = interface_normal(c, spacing, normal_from)
    return m, plane_constant(m, c, spacing)


# ----------------------------------------------------------------------------
# advection (Weymouth and Yue 2010)
# ----------------------------------------------------------------------------

def _sweep(c, indicator, vel, dt, spacing, normal, alpha, a, xp):
    """One conservative sweep along grid axis ``a`` (:func:`.vof._sweep`
    over the axes): ``c - (F_out - F_in) + indicator dt/h (vel_out - vel_in)``,
    ``F`` the gas in the donor's upwind slab of width ``|vel| dt``."""
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
    frac = cut_fraction(tuple(ms), shifted, (width,) + tuple(spacing[b] for b in others))
    # Full and empty donors give exact fluxes, free of the plane's rounding.
    frac = xp.where(donor <= 0.0, 0.0, xp.where(donor >= 1.0, 1.0, frac))
    inner = w * (dt / h) * frac
    zero = xp.zeros_like(c[..., :1])
    flux = xp.concatenate([zero, inner, zero], axis=-1)  # no gas through walls
    dilatation = (vel[..., 1:] - vel[..., :-1]) * (dt / h)
    out = c - (flux[..., 1:] - flux[..., :-1]) + indicator * dilatation
    return xp.moveaxis(out, -1, k)


def advect(c, velocity, dt, spacing, first_axis=0, normal_from=None, info=None):
    """Advance ``c_t + div(c u) = 0`` one step (:func:`.vof.advect` over the axes).

    Direction split (Weymouth and Yue 2010): one sweep per axis, the array
    axes in the cyclic order ``first_axis, first_axis + 1, ...`` (pass
    ``step % ndim`` to rotate it from step to step), each with geometric
    PLIC fluxes from the plane reconstructed at the sweep's start and the
    dilatation term ``c_c dt/h (u_out - u_in)``, ``c_c = [c > 1/2]`` frozen
    over the step.  The fluxes telescope and the ``c_c`` terms add to
    ``c_c dt div(u)``: with a discretely divergence-free velocity and closed
    walls the gas volume changes by rounding only.  Boundedness needs
    ``dt max|u_a| / h_a <= 1/2`` per axis (the caller's choice); excursions
    below :data:`CLIP_TOLERANCE` are clipped and reported in ``info``
    (``"clipped"``: the volume the clip added, ``"excursion"``: what is left
    outside ``[0, 1]``).

    Parameters
    ----------
    c : array
        Gas volume fraction at ``t``.
    velocity : tuple of arrays
        MAC face velocities in grid-axis order, zero on the walls.
    dt : float
    spacing : tuple of floats
    first_axis : int
        Array axis swept first.
    normal_from : array, optional
        Level set for the normals of every sweep (CLSVOF); by default
        Youngs' normals of the sweep's ``c``.

    Returns
    -------
    array
        ``c`` at ``t + dt`` (a new array).
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
        alpha = plane_constant(m, new, spacing)
        new = _sweep(new, indicator, velocity[a], dt, spacing, m, alpha, a, xp)
    new = xp.ascontiguousarray(new)
    low = (new < 0.0) & (new > -CLIP_TOLERANCE)
    high = (new > 1.0) & (new < 1.0 + CLIP_TOLERANCE)
    clipped = xp.where(low, 0.0, xp.where(high, 1.0, new))
    if info is not None:
        info["clipped"] = float(xp.sum(clipped - new)) * math.prod(spacing)
        info["excursion"] = max(0.0, float(xp.max(xp.maximum(-clipped, clipped - 1.0))))
    return clipped


# ----------------------------------------------------------------------------
# coupling to the level set (CLSVOF, after Sussman and Puckett 2000)
# ----------------------------------------------------------------------------

def search_window(band, reach, spacing):
    """Offsets per *array* axis the redistancing search visits
    (:func:`.vof_limits.search_window` over the axes): ``reach`` cells, by
    default the smallest with which every band cell of a plane interface
    finds the foot of its perpendicular, at least ``band + 1`` (so every
    band cell finds a patch)."""
    if reach is None:
        far = math.hypot(*((band + 0.5) * h for h in spacing))
        r = [int(math.floor(far / h + 0.5)) for h in spacing]
    else:
        r = [int(reach)] * len(spacing)
    return tuple(max(x, band + 1) for x in reversed(r))


def _plane_layers(c, spacing, normal_from, xp):
    """The patches of 3-D: ``(mask, d, layers, faces)``.

    A layer is a list of per-cell fields ``[mask, m_x, m_y, m_z, d]``: the
    interface cells' PLIC planes ``m . X = d`` (``X`` from the cell centre),
    then, where the interface lies on a grid plane, the faces between a full
    and an empty cell (held by the lower cell; ``faces`` lists their array
    axes and masks).  Values off the mask are zero."""
    nd = c.ndim
    mask = vof.interface_mask(c)
    m, alpha = reconstruct(c, spacing, normal_from)
    d = alpha - 0.5 * sum(mi * h for mi, h in zip(m, spacing))
    zero = xp.zeros_like(c)
    layers = [[mask.astype(c.dtype)] + [xp.where(mask, mi, zero) for mi in m]
              + [xp.where(mask, d, zero)]]
    full = c >= 1.0 - CLIP_TOLERANCE
    empty = c <= CLIP_TOLERANCE
    faces = []
    for a in range(nd):
        k = array_axis(nd, a)
        lo, hi = along(nd, k, slice(None, -1)), along(nd, k, slice(1, None))
        # +1: gas below the face (normal along +axis), -1 the reverse.
        sense = zero.copy()
        sense[lo] = xp.where(full[lo] & empty[hi], 1.0, xp.where(empty[lo] & full[hi], -1.0, 0.0))
        held = sense != 0.0
        if not bool(xp.any(held)):
            continue
        layers.append([held.astype(c.dtype)] + [sense if b == a else zero for b in range(nd)]
                      + [sense * (0.5 * spacing[a])])
        faces.append((k, held))
    return mask, d, layers, faces


def _segment_layers(c, spacing, normal_from, xp):
    """The patches of 2-D, :mod:`.vof`'s own: its segments and grid-line
    faces, each layer the nine fields its search reads."""
    hx, hy = spacing
    seg = vof.cell_segments(c, hx, hy, normal_from, xp)
    faces = vof.face_segments(c, hx, hy, xp)
    layers = [vof.search_fields(s, xp) for s in [seg] + [f for _, f in faces]]
    return seg[0], seg[3], layers, [(k, f[0]) for k, f in faces]


def _box_distance2(o, spacing):
    """Squared distance from a cell centre to the box of the cell ``o``
    (array-axis offsets) away: no patch of that cell is nearer."""
    nd = len(o)
    return sum(max(abs(o[array_axis(nd, a)]) - 0.5, 0.0) ** 2 * h * h for a, h in enumerate(spacing))


def _patch_distance(f, p, box2, spacing, xp):
    """Squared distance from the points ``p`` (per grid axis, from the patch
    cell's centre; ``box2`` their squared distance to its box) to the
    patches of fields ``f``, and the side of the patch's plane they are on
    (+1 liquid, -1 gas, 0 on it).

    2-D: the exact distance to the segment (as :mod:`.vof`).  3-D: the
    distance to the plane's part in the cell is bounded below by
    ``sqrt(s^2 + e^2)``, ``s`` the distance to the plane and ``e`` that from
    the foot of the perpendicular to the box, and by the distance to the
    box; the larger bound is taken.  It is exact where the foot is in the
    cell (for a face patch, everywhere); elsewhere a neighbouring cell's
    patch usually holds the foot."""
    if len(p) == 2:
        px, py = p
        rx, ry = px - f[4], py - f[5]
        t = xp.clip((rx * f[6] + ry * f[7]) * f[8], 0.0, 1.0)
        qx, qy = rx - t * f[6], ry - t * f[7]
        dist2 = xp.where(f[0] > 0.0, qx * qx + qy * qy, float("inf"))
        return dist2, xp.sign(f[1] * px + f[2] * py - f[3])
    s = f[1] * p[0] + f[2] * p[1] + f[3] * p[2] - f[4]
    dist2 = s * s
    for a, h in enumerate(spacing):
        e = xp.maximum(xp.abs(p[a] - s * f[1 + a]) - 0.5 * h, 0.0)
        dist2 = dist2 + e * e
    return xp.where(f[0] > 0.0, xp.maximum(dist2, box2), float("inf")), xp.sign(s)


def _nearest_patch(layers, where, spacing, reach, xp):
    """Squared distance from the cells ``where`` (a tuple of index arrays)
    to the nearest patch within ``reach`` (per array axis), and that
    patch's side.

    Offsets nearest first, layers in order within an offset, ties to the
    first met (:func:`.vof._nearest_segment`'s order).  The (offset, layer)
    pairs go in batches gathered from one padded array, so the array
    operations go by batch, not by offset; after each batch the cells that
    no later offset can bring nearer (its box farther than their best) drop
    out, so the cells near the interface stop early.
    """
    shape = layers[0][0].shape
    nd = len(shape)
    padded = tuple(n + 2 * r for n, r in zip(shape, reach))
    size = math.prod(padded)
    strides = [math.prod(padded[k + 1:]) for k in range(nd)]
    dtype = layers[0][1].dtype
    stack = xp.zeros((len(layers[0]), len(layers)) + padded, dtype=dtype)
    inner = tuple(slice(r, r + n) for r, n in zip(reach, shape))
    for l, fields in enumerate(layers):
        stack[(slice(None), l) + inner] = xp.stack(fields)
    flat = stack.reshape(len(layers[0]), -1)
    pos = sum((i + r) * s for i, r, s in zip(where, reach, strides))
    h_arr = [spacing[array_axis(nd, k)] for k in range(nd)]
    offsets = sorted(itertools.product(*(range(-r, r + 1) for r in reach)),
                     key=lambda o: sum((o[k] * h_arr[k]) ** 2 for k in range(nd)))
    entries = [(o, l) for o in offsets for l in range(len(layers))]
    box2 = [_box_distance2(o, spacing) for o, _ in entries]
    later = box2 + [float("inf")]               # later[i]: the least box2 from entry i on
    for i in range(len(entries) - 1, -1, -1):
        later[i] = min(later[i], later[i + 1])
    best = xp.full(pos.shape, float("inf"), dtype=dtype)
    side = xp.zeros_like(best)
    active = xp.arange(pos.shape[0])
    start = 0
    while start < len(entries) and active.shape[0] > 0:
        chunk = entries[start:start + max(1, SEARCH_BATCH // int(active.shape[0]))]
        shift = xp.asarray([l * size + sum(o[k] * strides[k] for k in range(nd))
                            for o, l in chunk], dtype=pos.dtype)
        index = shift[:, None] + pos[active][None, :]
        # Only the pairs whose cell holds a patch are measured (a few in a hundred).
        pair = xp.nonzero(flat[0][index] > 0.0)
        entry = pair[0]
        f = flat[:, index[pair]]
        # The cell seen from the patch cell's centre, per grid axis.
        p = [xp.asarray([-o[array_axis(nd, a)] * spacing[a] for o, _ in chunk], dtype=dtype)[entry]
             for a in range(nd)]
        bounds = xp.asarray(box2[start:start + len(chunk)], dtype=dtype)[entry]
        measured, signs = _patch_distance(f, p, bounds, spacing, xp)
        dist2 = xp.full(index.shape, float("inf"), dtype=dtype)
        sd = xp.zeros(index.shape, dtype=dtype)
        dist2[pair] = measured
        sd[pair] = signs
        j = xp.argmin(dist2, axis=0)[None, :]
        bd = xp.take_along_axis(dist2, j, axis=0)[0]
        mine = best[active]
        nearer = bd < mine
        best[active] = xp.where(nearer, bd, mine)
        side[active] = xp.where(nearer, xp.take_along_axis(sd, j, axis=0)[0], side[active])
        start += len(chunk)
        active = active[best[active] > later[start]]
    return best, side


def _dilate(seed, band, xp):
    """The cells within ``band`` cells (Chebyshev) of a ``seed`` cell."""
    nd = seed.ndim
    out = seed
    for k in range(nd):
        grown = out.copy()
        for s in range(1, min(band, out.shape[k] - 1) + 1):
            grown[along(nd, k, slice(s, None))] |= out[along(nd, k, slice(None, -s))]
            grown[along(nd, k, slice(None, -s))] |= out[along(nd, k, slice(s, None))]
        out = grown
    return out


def redistance(phi, c, spacing, band=3, reach=None, info=None):
    """The level set rebuilt from the volume fraction (:func:`.vof.redistance`
    over the axes; in 2-D its numbers).

    The interface is the PLIC reconstruction of ``c`` with the normals of
    ``phi``; in the band (the cells within ``band`` cells, Chebyshev, of an
    interface cell or of a face between a full and an empty cell) ``|phi|``
    is the distance to the nearest patch among the cells up to ``reach``
    away: in 2-D the PLIC segment, in 3-D the PLIC plane's part in its cell,
    its distance approximated as :func:`_patch_distance` says (exact where
    the foot of the perpendicular lies in some cell's patch: everywhere for
    a plane interface).  Only the band cells are searched.  The sign is the
    cell's own (full: gas, empty: liquid, an interface cell the side of its
    own plane); band cells whose nearest patch says otherwise are counted in
    ``info["sign_conflicts"]``, the band's size in ``info["band_cells"]``.
    Outside the band ``phi`` keeps its magnitude floored at ``band *
    min(spacing)`` with the sign of ``c``.

    Parameters
    ----------
    phi, c : array
        Level set (normals, values outside the band) and gas fraction.
    spacing : tuple of floats
    band : int
        Half-width of the rebuilt band, in cells.
    reach : int, optional
        Search radius in cells (:func:`search_window`); ``band + 1`` is the
        cheapest that finds a patch for every band cell ((2 reach + 1)^nd
        offsets).

    Returns
    -------
    array
        The new level set (``phi`` and ``c`` are not modified).
    """
    xp = array_module(phi, c)
    band = int(band)
    if band < 1:
        raise ValueError(f"band={band!r}: expected an integer >= 1")
    layers_of = _segment_layers if c.ndim == 2 else _plane_layers
    mask, d, layers, faces = layers_of(c, spacing, phi, xp)
    seed = mask.copy()
    for k, held in faces:
        seed |= held
        seed[along(c.ndim, k, slice(1, None))] |= held[along(c.ndim, k, slice(None, -1))]
    in_band = _dilate(seed, band, xp)
    where = xp.nonzero(in_band)
    dist2, side = _nearest_patch(layers, where, spacing, search_window(band, reach, spacing), xp)
    own = vof.own_side(c, mask, d, xp)
    dist = xp.zeros_like(phi)
    dist[where] = xp.sqrt(dist2)
    floor = band * min(spacing)
    if info is not None:
        mine = own[where]
        info["band_cells"] = int(dist2.shape[0])
        info["sign_conflicts"] = int(xp.sum((side != mine) & (side != 0.0)))
    return xp.where(in_band, own * dist, own * xp.maximum(xp.abs(phi), floor))


# ----------------------------------------------------------------------------
# diagnostics
# ----------------------------------------------------------------------------

def gas_volume(c, spacing):
    """Gas volume ``sum(c) prod(spacing)`` (the area in 2-D), a host float."""
    return float(array_module(c).sum(c)) * math.prod(spacing)


def gas_diagnostics(c, velocity, spacing):
    """The gas's volume, centroid and rise velocity from the volume fraction
    (host floats, one read; :func:`.vof.gas_diagnostics` over the axes).

    ``volume`` (the area in 2-D, under :func:`.levelset_nd.bubble_diagnostics`'
    key) is ``sum(c) prod(spacing)``; ``centroid_x, centroid_y[, centroid_z]`` and
    ``rise_velocity`` (the vertical, last-axis, cell-centre velocity) are
    weighted by ``c``; NaN quotients without gas.
    """
    backend = backend_of(c, *velocity)
    xp = backend.xp
    nd = c.ndim
    top = velocity[-1]
    k = array_axis(nd, nd - 1)
    vc = 0.5 * (top[along(nd, k, slice(None, -1))] + top[along(nd, k, slice(1, None))])
    sums = [xp.sum(c)]
    for a, h in enumerate(spacing):
        shape = [1] * nd
        shape[array_axis(nd, a)] = c.shape[array_axis(nd, a)]
        x = ((xp.arange(c.shape[array_axis(nd, a)], dtype=c.dtype) + 0.5) * h).reshape(shape)
        sums.append(xp.sum(c * x))
    sums.append(xp.sum(c * vc))
    values = [float(s) for s in backend.to_host_many(sums)]
    mass = values[0]
    names = ["centroid_" + "xyz"[a] for a in range(nd)]
    if mass <= 0.0:
        nan = float("nan")
        return {"volume": 0.0, **{n: nan for n in names}, "rise_velocity": nan}
    out = {"volume": mass * math.prod(spacing)}
    out.update({n: w / mass for n, w in zip(names, values[1:1 + nd])})
    out["rise_velocity"] = values[1 + nd] / mass
    return out
