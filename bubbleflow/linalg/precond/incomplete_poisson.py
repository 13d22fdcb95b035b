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

Both are also two passes over the faces between scalings: each cell takes
its upper neighbours' values, then its lower neighbours' results, a face of
coupling ``c`` between cells ``lo`` and ``hi`` entering as ``c s_lo s_hi``
(scaled, ``s = D^-1/2`` before and after) or as ``c / d_lo`` (plain).  That
form runs on a rank's slab of a distributed operator
(:class:`DistributedScaledIncompletePoisson`,
:class:`DistributedIncompletePoisson`): on the slab widened by its halo
planes, the face coefficients of the widened slab (the halo cells' ``s`` or
``d`` swapped once with the neighbours at set-up), and one swap an
application, of the input: the upper pass then gives the lower halo plane's
result too (from that plane and the slab's first), which is all the lower
pass needs of the halo.  The same preconditioner as one process's, summed
in another order.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from ...compute.twins import twin
from ...mesh.grid import face_sides
from .base import Preconditioner, lower_neighbours, require_grid_operator, upper_neighbours

__all__ = ["IncompletePoisson", "ScaledIncompletePoisson", "DistributedScaledIncompletePoisson",
           "DistributedIncompletePoisson", "incomplete_poisson_passes", "face_sides_per_axis",
           "scaled_coefficients", "ips_coefficients"]


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


class DistributedScaledIncompletePoisson(Preconditioner):
    """Scaled incomplete Poisson for the slab of ``A_rank`` (a DistributedOperator)."""

    name = "incomplete_poisson_scaled"

    def __init__(self, A_rank):
        self.A = A_rank
        xp = A_rank.backend.xp
        slab = A_rank.slab
        _, _, self.below, _ = slab.extended()
        self.nloc = slab.hi - slab.lo
        self._sides = face_sides_per_axis(len(slab.local_shape))
        diagonal = A_rank.diagonal().reshape(slab.local_shape)
        self.s, self.faces = self._coefficients(diagonal, xp)

    def _coefficients(self, diagonal, xp):
        """``(s, faces)``: the scaling (None: none) and the widened slab's
        face coefficients."""
        s = 1.0 / xp.sqrt(diagonal)
        s_ext = self._widened(s)
        return s, tuple(c * s_ext[lo] * s_ext[hi]
                        for c, (lo, hi) in zip(self.A.couplings(), self._sides))

    def _widened(self, v):
        """``v`` on the slab widened by the neighbours' planes of it."""
        xp = self.A.backend.xp
        shape = (self.nloc + self.below + (1 if self.A.slab.upper is not None else 0),) + \
            tuple(v.shape[1:])
        ext = xp.empty(shape, dtype=v.dtype)
        ext[self.below:self.below + self.nloc] = v
        self.A.comm.exchange(self.A.slab.lower, self.A.slab.upper, v[0], v[-1], ext[0], ext[-1])
        return ext

    def apply(self, r):
        shape = r.shape
        r = r.reshape(self.A.slab.local_shape)
        z = self._widened(r if self.s is None else self.s * r)
        # (The upper halo plane's result lacks its own upper neighbour, but
        # it feeds only cells beyond the slab in the lower pass.)
        u = incomplete_poisson_passes(self.faces, z)[self.below:self.below + self.nloc]
        return (u if self.s is None else self.s * u).reshape(shape)


class DistributedIncompletePoisson(DistributedScaledIncompletePoisson):
    """The plain incomplete Poisson (Ament et al. 2010) for the slab of ``A_rank``."""

    name = "incomplete_poisson"

    def _coefficients(self, diagonal, xp):
        inv_ext = self._widened(1.0 / diagonal)
        return None, tuple(c * inv_ext[lo] for c, (lo, _) in zip(self.A.couplings(), self._sides))
