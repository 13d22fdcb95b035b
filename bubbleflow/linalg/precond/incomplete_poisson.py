"""Incomplete Poisson preconditioning (Ament et al. 2010), plain and scaled.

Plain (the form of Gupta 2010, section 3.2.2)::

    M^-1 = (I - L D^-1) (I - D^-1 L^T)

with ``L`` the strict lower part and ``D`` the diagonal of ``A``.  It is two
fully parallel stencil passes, but at a density jump ``L D^-1`` mixes
couplings of very different size and the preconditioner degrades (hundreds
of iterations at contrast 1e3).

Scaled (our default): the same construction on ``A~ = D^-1/2 A D^-1/2``,
whose diagonal is one, so every coupling is measured against its own rows::

    M^-1 = D^-1/2 (I - L~) (I - L~^T) D^-1/2

Both are ``K K^T`` with ``K`` unit triangular: symmetric positive definite.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.twins import twin
from ...mesh.grid import face_sides
from .base import Preconditioner, lower_neighbours, require_grid_operator, upper_neighbours


class IncompletePoisson(Preconditioner):
    """The plain incomplete Poisson preconditioner (Ament et al. 2010; unscaled).

    In 2-D from the five diagonals; in any other dimension from the face
    couplings: a face of coupling ``c`` between a cell ``lo`` and its upper
    neighbour ``hi`` enters both passes as ``c / d_lo`` (``t_lo += c r_hi /
    d_lo``, then ``y_hi += c t_lo / d_lo``).
    """

    name = "incomplete_poisson"

    def __init__(self, A):
        A = require_grid_operator(A, self.name)
        self.grid_shape = A.grid_shape
        self.faces = None
        if len(self.grid_shape) != 2:
            inv = 1.0 / A.diagonal().reshape(self.grid_shape)
            self.inv_diagonal = inv
            self.faces = tuple(c * inv[lo] for c, (lo, _) in
                               zip(A.couplings(), face_sides_per_axis(len(self.grid_shape))))
            return
        S, W, C, E, N = A.entries()
        self.S, self.W, self.E, self.N = S, W, E, N
        self.inv_diagonal = 1.0 / C

    def apply(self, r):
        shape = r.shape
        r = r.reshape(self.grid_shape)
        if self.faces is not None:
            return incomplete_poisson_passes(self.faces, r).reshape(shape)
        t = r - self.inv_diagonal * upper_neighbours(r, self.E, self.N)   # (I - D^-1 L^T) r
        y = t - lower_neighbours(self.inv_diagonal * t, self.W, self.S)   # (I - L D^-1) t
        return y.reshape(shape)


def incomplete_poisson_passes(faces, z):
    """``(I + L') (I + U') z`` for the per-axis face coefficients ``faces``:
    the upper pass (each cell takes its upper neighbours' ``z``), then the
    lower pass (each cell its lower neighbours' result); a grid-shaped
    array of ``z``'s shape.  Both incomplete Poisson forms are this, between
    their scalings."""
    t = z.copy()
    sides = face_sides_per_axis(z.ndim)
    for c, (lo, hi) in zip(faces, sides):
        t[lo] += c * z[hi]                            # the upper neighbours
    u = t.copy()
    for c, (lo, hi) in zip(faces, sides):
        u[hi] += c * t[lo]                            # the lower neighbours
    return u


class ScaledIncompletePoisson(Preconditioner):
    """Incomplete Poisson on the symmetrically scaled matrix (default).

    Attributes
    ----------
    inv_sqrt_diagonal : array (ny, nx), backend
        ``s = D^-1/2``.
    S, W, E, N : arrays (ny, nx), backend
        The scaled couplings ``a_pq s_p s_q`` (zero across the walls).  With
        ``inv_sqrt_diagonal`` they are the whole preconditioner: the fused
        GPU engine applies it from them in its update kernel.
    """

    name = "incomplete_poisson_scaled"

    def __init__(self, A):
        A = require_grid_operator(A, self.name)
        self.grid_shape = A.grid_shape
        xp = A.backend.xp
        self.faces = None
        if len(self.grid_shape) != 2:
            # Any other dimension: from the face couplings, ``c_pq s_p s_q``
            # per axis (the stencil's scaled entries with their sign flipped).
            couplings = A.couplings()
            s = 1.0 / xp.sqrt(A.diagonal().reshape(self.grid_shape))
            self.inv_sqrt_diagonal = s
            self.faces = tuple(c * s[lo] * s[hi] for c, (lo, hi) in
                               zip(couplings, face_sides_per_axis(len(self.grid_shape))))
            return
        S, W, C, E, N = A.entries()
        coefficients = scaled_coefficients(S, W, C, E, N, xp)
        self.inv_sqrt_diagonal, self.S, self.W, self.E, self.N = coefficients

    def apply(self, r):
        if self.faces is not None:
            return self._apply_faces(r)
        shape = r.shape
        z = self.inv_sqrt_diagonal * r.reshape(self.grid_shape)
        t = z - upper_neighbours(z, self.E, self.N)   # (I - L~^T) z
        u = t - lower_neighbours(t, self.W, self.S)   # (I - L~) t
        return (self.inv_sqrt_diagonal * u).reshape(shape)


    def _apply_faces(self, r):
        """``D^-1/2 (I - L~) (I - L~^T) D^-1/2 r`` from the scaled face couplings."""
        shape = r.shape
        z = self.inv_sqrt_diagonal * r.reshape(self.grid_shape)
        return (self.inv_sqrt_diagonal * incomplete_poisson_passes(self.faces, z)).reshape(shape)


def face_sides_per_axis(ndim):
    """Per grid axis (x, y[, z]), the index of the cells below and above its
    interior faces (:func:`bubbleflow.mesh.grid.face_sides`)."""
    return [face_sides(ndim, axis) for axis in range(ndim)]


@twin
def scaled_coefficients(S, W, C, E, N, xp):
    """``(s, S~, W~, E~, N~)``: ``s = D^-1/2`` and the couplings
    ``a_pq s_p s_q`` (zero entries at the walls stay zero), array code on
    ``xp``; on CuPy in float64 one pass (:func:`ips_coefficients`, equal bit
    for bit)."""
    s = 1.0 / xp.sqrt(C)
    Wt = W * s
    Wt[:, 1:] *= s[:, :-1]
    Et = E * s
    Et[:, :-1] *= s[:, 1:]
    St = S * s
    St[1:, :] *= s[:-1, :]
    Nt = N * s
    Nt[:-1, :] *= s[1:, :]
    return s, St, Wt, Et, Nt


_THREADS = 256


@cuda.kernel_cache
def _ips_kernel():
    return cuda.function(cuda.source(__name__, "incomplete_poisson.cu"), "bf_ips_coefficients",
                         options=("-std=c++14",))


@scaled_coefficients.register("cupy")
def ips_coefficients(S, W, C, E, N, xp=None):
    """``(s, S~, W~, E~, N~)`` of the scaled incomplete Poisson preconditioner
    (CuPy, float64) in one pass (``incomplete_poisson.cu``; twin: the array
    code of :func:`scaled_coefficients`, equal bit for bit).  Other dtypes:
    ``NotImplemented`` (the array code runs)."""
    import cupy as cp

    if not all(d.dtype == cp.float64 for d in (S, W, C, E, N)):
        return NotImplemented
    ny, nx = C.shape
    arrays = [cp.ascontiguousarray(a, dtype=cp.float64) for a in (S, W, C, E, N)]
    out = [cp.empty((ny, nx), dtype=cp.float64) for _ in range(5)]
    kernel = _ips_kernel()
    kernel(cuda.rows_grid(nx, ny, _THREADS), (_THREADS,),
           (*arrays, *out, np.int32(nx), np.int32(ny)))
    return tuple(out)
