"""PLIC geometry: a line (2-D) or plane (3-D) cutting a box.

The interface of a volume-of-fluid cell is a PLIC line or plane
(piecewise-linear interface calculation): the gas is the part of the box
``[0, l_0] x [0, l_1] [x [0, l_2]]`` where ``m . x <= alpha``, ``x``
measured from the box's lowest corner and ``m`` the normal pointing out of
the gas.  Two problems are solved here, in closed form, for whole arrays of
boxes at once: the forward one, the fraction of the box under the plane
(:func:`cut_fraction`), and the inverse one, the constant ``alpha`` for a
given fraction (:func:`plane_constant`).  The formulas are those of
Scardovelli and Zaleski (J. Comput. Phys. 164, 2000): section 2 for lines,
section 3 for planes.  Each problem maps the box to the unit square or cube
with non-negative normal components summing to one (a negative component
moves the origin to the opposite side, which leaves the volume alone).

Everything is written against the array module of the input, with no loops
over cells, so that it runs on NumPy and CuPy and the CUDA kernels
(``plic.cuh``) can follow its order of operations.
"""
from __future__ import annotations

import math

from ..compute.backend import array_module

__all__ = ["cut_fraction", "plane_constant"]


def cut_fraction(normal, alpha, lengths):
    """Fraction of the box ``lengths`` where ``m . x <= alpha``.

    Parameters
    ----------
    normal : tuple of arrays
        The normal's components in grid-axis order, two or three (any
        length, not necessarily unit).
    alpha : array
        Plane constant, from the box's lowest corner.
    lengths : tuple of floats or arrays
        The box's sides in grid-axis order (zero allowed: any answer in
        ``[0, 1]`` times an empty volume).

    Returns
    -------
    array
        The fraction in ``[0, 1]``.  A degenerate normal (zero, or parallel
        to an empty box) gives ``1`` where ``alpha >= 0`` and ``0`` elsewhere.
    """
    if len(normal) == 2:
        return _line_fraction(normal[0], normal[1], alpha, lengths[0], lengths[1])
    xp = array_module(*normal, alpha)
    m1, m2, m3, a, s = _unit_cube_plane(normal, alpha, lengths, xp)
    v, _ = _cube_volume(m1, m2, m3, a, xp)
    degenerate = xp.where(alpha >= 0.0, 1.0, 0.0)
    return xp.where(s > 0.0, xp.clip(v, 0.0, 1.0), degenerate)


def plane_constant(normal, c, lengths):
    """``alpha`` such that ``m . x <= alpha`` covers the fraction ``c`` of the
    box: the inverse PLIC problem.

    Parameters
    ----------
    normal : tuple of arrays
        The normal's components in grid-axis order, two or three; it must
        not vanish (:func:`.plic_reconstruction.interface_normal` ensures it).
    c : array
        Fraction to cover; clipped to ``[0, 1]``.
    lengths : tuple of floats or arrays
        The box's sides in grid-axis order.

    Returns
    -------
    array
        ``alpha``, from the box's lowest corner, in the units of ``m . x``;
        ``cut_fraction(normal, alpha, lengths)`` gives ``c`` back to
        rounding.  ``c = 0`` and ``c = 1`` give the plane through the first
        and the last corner the normal reaches.
    """
    if len(normal) == 2:
        return _line_constant(normal[0], normal[1], c, lengths[0], lengths[1])
    xp = array_module(*normal, c)
    zero = xp.zeros_like(c)
    m1, m2, m3, _, s = _unit_cube_plane(normal, zero, lengths, xp)
    a = _cube_constant(m1, m2, m3, xp.clip(c, 0.0, 1.0), xp)
    out = a * s
    for m, length in zip(normal, lengths):
        out = out + xp.minimum(m, 0.0) * length
    return out


# ----------------------------------------------------------------------------
# lines in the unit square (Scardovelli and Zaleski 2000, section 2)
# ----------------------------------------------------------------------------

def _unit_square_line(mx, my, alpha, lx, ly, xp):
    """Map the line ``mx x + my y = alpha`` in ``[0, lx] x [0, ly]`` to the
    unit square with non-negative normal components summing to one.

    Returns ``(lo, hi, a, s)``: the smaller and larger scaled normal
    component, the scaled line constant and the scale ``s`` (zero for a
    degenerate normal or an empty rectangle).
    """
    a = alpha - xp.minimum(mx, 0.0) * lx - xp.minimum(my, 0.0) * ly
    m1 = xp.abs(mx) * lx
    m2 = xp.abs(my) * ly
    s = m1 + m2
    inv = 1.0 / xp.where(s > 0.0, s, 1.0)
    m1 = m1 * inv
    m2 = m2 * inv
    return xp.minimum(m1, m2), xp.maximum(m1, m2), a * inv, s


def _line_fraction(mx, my, alpha, lx, ly):
    """:func:`cut_fraction` of a line: with the scaled normal ``m1 <= m2``,
    ``m1 + m2 = 1``, the fraction is ``a^2 / (2 m1 m2)`` for ``a < m1``,
    ``(a - m1/2) / m2`` for ``m1 <= a <= m2`` and ``1 - (1 - a)^2 / (2 m1
    m2)`` above; ``0`` and ``1`` outside ``[0, 1]``.  An axis-aligned normal
    (``m1 = 0``) takes the middle branch only."""
    xp = array_module(mx, my, alpha)
    lo, hi, a, s = _unit_square_line(mx, my, alpha, lx, ly, xp)
    a = xp.clip(a, 0.0, 1.0)
    two_lo_hi = 2.0 * lo * hi
    corner = 1.0 / xp.where(two_lo_hi > 0.0, two_lo_hi, 1.0)
    middle = (a - 0.5 * lo) / xp.where(hi > 0.0, hi, 1.0)
    f = xp.where(a < lo, a * a * corner,
                 xp.where(a <= hi, middle, 1.0 - (1.0 - a) * (1.0 - a) * corner))
    degenerate = xp.where(alpha >= 0.0, 1.0, 0.0)
    return xp.where(s > 0.0, xp.clip(f, 0.0, 1.0), degenerate)


def _line_constant(mx, my, c, lx, ly):
    """:func:`plane_constant` of a line: with the scaled normal ``m1 <= m2``,
    ``m1 + m2 = 1`` and ``c1 = m1 / (2 m2)``, ``a = sqrt(2 m1 m2 c)`` for
    ``c < c1``, ``a = m2 c + m1 / 2`` for ``c1 <= c <= 1 - c1`` and ``a = 1 -
    sqrt(2 m1 m2 (1 - c))`` above; an axis-aligned normal takes the middle
    branch."""
    xp = array_module(mx, my, c)
    zero = xp.zeros_like(c)
    lo, hi, _, s = _unit_square_line(mx, my, zero, lx, ly, xp)
    v = xp.clip(c, 0.0, 1.0)
    hi_safe = xp.where(hi > 0.0, hi, 1.0)
    c1 = lo / (2.0 * hi_safe)
    two_lo_hi = 2.0 * lo * hi
    a = xp.where(v < c1, xp.sqrt(two_lo_hi * v),
                 xp.where(v <= 1.0 - c1, hi * v + 0.5 * lo,
                          1.0 - xp.sqrt(two_lo_hi * (1.0 - v))))
    return a * s + xp.minimum(mx, 0.0) * lx + xp.minimum(my, 0.0) * ly


# ----------------------------------------------------------------------------
# planes in the unit cube (Scardovelli and Zaleski 2000, section 3)
# ----------------------------------------------------------------------------

def _unit_cube_plane(normal, alpha, lengths, xp):
    """The plane ``m . x = alpha`` in the box ``lengths`` mapped to the unit
    cube with non-negative normal components summing to one, sorted.

    Returns ``(m1, m2, m3, a, s)``: ``m1 <= m2 <= m3``, the scaled constant
    and the scale ``s`` (zero for a degenerate normal or an empty box).
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
    """``x`` where positive, else 1: a divisor for the branches not taken."""
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
