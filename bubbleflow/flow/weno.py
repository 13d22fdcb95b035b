"""The level set's transport schemes: Jiang-Shu WENO5 one-sided derivatives
and the TVD Runge-Kutta 3 step.

:mod:`.levelset` advects and redistances with them (on any grid and
slab: the stencils read their ghost layers from a padding,
:mod:`.padding`); the CUDA kernels (``levelset.cu``) compute the same
expressions in the same order, so these are what the kernels are checked
against.
"""
from __future__ import annotations

import math

from ..compute.backend import array_module
from .padding import WALLS, along

__all__ = ["NG", "weno_floor", "weno5", "stencils", "rk3"]

#: Ghost layers the WENO5 stencils reach beyond the first/last cell.
NG = 3


def weno_floor(dtype, xp):
    """The floor added to the WENO5 smoothness indicators' epsilon.

    The indicators are squared in the weights; the floor must survive that
    squaring in the working precision (1e-99 underflows in float32), or a
    flat region gives 0/0.
    """
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


def stencils(phi, h, axis, padding=WALLS):
    """The WENO5 divided differences along array axis ``axis``.

    Returns
    -------
    (minus, plus)
        Each a list ``[v1, ..., v5]`` of arrays shaped like ``phi``:
        ``minus`` for the backward (left-biased) derivative, ``plus`` for
        the forward one, over :data:`NG` linear ghost layers of ``padding``.
    """
    n, nd = phi.shape[axis], phi.ndim
    p = padding.linear(phi, NG, axis)
    # d[k] = (p[k + 1] - p[k]) / h: the backward difference at cell i is d[i + 2].
    d = (p[along(nd, axis, slice(1, None))] - p[along(nd, axis, slice(None, -1))]) / h

    def D(k):
        return d[along(nd, axis, slice(k, k + n))]
    return [D(0), D(1), D(2), D(3), D(4)], [D(5), D(4), D(3), D(2), D(1)]


def rk3(phi, dt, rhs):
    """One TVD Runge-Kutta 3 step (Shu and Osher 1988) of ``phi_t = rhs(phi)``."""
    p1 = phi + dt * rhs(phi)
    p2 = 0.75 * phi + 0.25 * (p1 + dt * rhs(p1))
    return (1.0 / 3.0) * phi + (2.0 / 3.0) * (p2 + dt * rhs(p2))
