"""The implicit viscous solves on a MAC grid of any dimension.

The systems of :mod:`.viscosity` written once over the axes: component
``a`` of the velocity, on its interior faces, solves (backward Euler)

    (rho_a - dt L_a) u_a* = rho_a (u_a - dt adv_a) + dt cross_a

where ``L_a`` is the component's own part of :func:`.momentum_nd.viscous_forces`
(the very stencil: ``d/dx_a(2 mu du_a/dx_a)`` with the normal stress at the
cells, ``d/dx_b(mu_e du_a/dx_b)`` for every other axis ``b`` with the shear
on the (a, b) edges) and ``cross_a = sum_b d/dx_b(mu_e du_b/dx_a)`` is taken
from the old velocity (:func:`.momentum_nd.cross_viscous_forces`), as the 2-D
step does: the components decouple into symmetric positive definite
systems, solved side by side by :func:`.viscosity.solve_viscous_systems`
(Jacobi-preconditioned Chebyshev, CG should rounding leave one short).

Written in flux form: along each axis ``b`` a coupling ``c_b`` on the
positions between the unknowns (cells along ``a``, edges along the others)
and ``L x = sum_b diff_b(c_b diff_b(x_ghosted))``.  Walls: the ghost beyond
the first and last unknown along ``b`` is ``s x`` with the wall's sign
(-1 no-slip, +1 free-slip) for a tangential wall, and 0 along ``a`` itself
(the wall face, zero normal velocity); the ghost folds into the diagonal,
so the operator stays symmetric.  In 2-D the systems are
:class:`.viscosity.ViscousSystem`'s to rounding; the array code runs on
NumPy and CuPy alike (the CUDA kernels of :mod:`.viscosity_cuda` take the
2-D layout only).
"""
from __future__ import annotations

import numpy as np

from ..compute.backend import backend_of
from ..mesh.grid import array_axis
from .levelset_nd import along
from .momentum_nd import edge_viscosity
from .viscosity import solve_viscous_systems

__all__ = ["ViscousSystemND", "viscous_couplings", "viscous_systems", "solve_implicit",
           "flux_stress"]


def _ghosted(x, k, low, high):
    """``x`` with one ghost layer at both ends of array axis ``k``: the first
    and last layers times ``low`` and ``high``."""
    nd = x.ndim
    return backend_of(x).xp.concatenate([low * x[along(nd, k, slice(0, 1))], x,
                                         high * x[along(nd, k, slice(-1, None))]], axis=k)


def _diff(f, k):
    nd = f.ndim
    return f[along(nd, k, slice(1, None))] - f[along(nd, k, slice(None, -1))]


def viscous_couplings(a, mu, rho_f, dt, spacing, signs):
    """``(couplings, ghost_signs, diagonal, inv_diagonal)`` of component
    ``a``'s system: per grid axis ``b`` the coupling ``dt mu_b / h_b^2``
    between neighbouring unknowns (``mu_b = 2 mu`` at the cells along ``a``,
    the edge viscosity of the (a, b) plane along ``b != a``) and the ghost
    signs ``(low, high)`` at the axis's walls (0 along ``a``); the diagonal
    of ``S`` on the interior faces, and its inverse (flat)."""
    xp = backend_of(mu).xp
    nd = mu.ndim
    ka = array_axis(nd, a)
    couplings, ghost_signs = [], []
    diag = rho_f.copy()
    for b, h in enumerate(spacing):
        kb = array_axis(nd, b)
        if b == a:
            c = dt * 2.0 * mu / h ** 2
            low, high = 0.0, 0.0
        else:
            c = dt * edge_viscosity(mu, ka, kb, xp)[along(nd, ka, slice(1, -1))] / h ** 2
            low, high = (float(s) for s in signs[b])
        lo_c, hi_c = c[along(nd, kb, slice(None, -1))], c[along(nd, kb, slice(1, None))]
        diag += lo_c + hi_c
        # The ghost s x beside the first and last unknowns: -c (s x - x)
        # = c (1 - s) x, one c of which is already in.
        diag[along(nd, kb, slice(0, 1))] -= low * lo_c[along(nd, kb, slice(0, 1))]
        diag[along(nd, kb, slice(-1, None))] -= high * hi_c[along(nd, kb, slice(-1, None))]
        couplings.append(c)
        ghost_signs.append((low, high))
    return tuple(couplings), tuple(ghost_signs), diag, (1.0 / diag).ravel()


def flux_stress(couplings, ghost_signs, x):
    """``sum_b diff_b(c_b diff_b(x ghosted))``: a system's ``dt L x`` from its
    couplings and the ghost signs at the ends of every axis."""
    nd = x.ndim
    out = None
    for b, (c, (low, high)) in enumerate(zip(couplings, ghost_signs)):
        kb = array_axis(nd, b)
        term = _diff(c * _diff(_ghosted(x, kb, low, high), kb), kb)
        out = term if out is None else out + term
    return out


class ViscousSystemND:
    """``S x = rho_f x - dt L_a x`` for velocity component ``a`` (grid axis)
    on its interior faces, any dimension.

    Parameters
    ----------
    a : int
        The component's grid axis (0 x, 1 y, 2 z).
    mu : array
        Cell viscosity (the grid's array shape).
    rho_f : array
        Face density on the component's interior faces.
    dt : float
    spacing : tuple of float
        Cell sizes in grid-axis order.
    signs : tuple of (float, float)
        Ghost signs of the tangential velocity at the walls normal to every
        grid axis, low side first (``signs[a]`` is not read).

    The attributes :func:`.viscosity.solve_viscous_systems` reads are those
    of :class:`.viscosity.ViscousSystem`: ``matvec`` (flat in, flat out),
    ``rho_f``, ``diagonal``, ``inv_diagonal``, ``jacobi``.
    """

    nullspace = None            # rho_f > 0: definite

    def __init__(self, a, mu, rho_f, dt, spacing, signs):
        self.backend = backend_of(mu)
        self.xp = self.backend.xp
        self.component, self.shape_nd = a, rho_f.shape
        self.shape = (rho_f.size, rho_f.size)
        self.dtype = np.dtype(rho_f.dtype)
        self.dt = float(dt)
        self.rho_f = rho_f
        (self.couplings, self.ghost_signs, self.diagonal,
         self.inv_diagonal) = viscous_couplings(a, mu, rho_f, self.dt, spacing, signs)

    def stress(self, x):
        """``dt L x`` on the interior faces (``x`` of their shape)."""
        return flux_stress(self.couplings, self.ghost_signs, x)

    def matvec(self, x):
        """``S x`` (flat in, flat out)."""
        x = x.reshape(self.shape_nd)
        return (self.rho_f * x - self.stress(x)).ravel()

    def jacobi(self, r):
        """``D^-1 r``: the preconditioner."""
        return self.inv_diagonal * r


def viscous_systems(mu, rho_faces, dt, spacing, signs):
    """The systems of every component (:class:`ViscousSystemND`)."""
    return [ViscousSystemND(a, mu, rho_f, dt, spacing, signs) for a, rho_f in enumerate(rho_faces)]


def solve_implicit(velocity, mu, rho_faces, rhss, dt, spacing, signs, rtol):
    """The viscous solves of every component side by side, from the old
    velocity's interior faces: a list of ``(x, record)`` per component
    (:func:`.viscosity.solve_viscous_systems`; ``x`` flat, ``record`` a
    :class:`~bubbleflow.linalg.krylov.record.SolveRecord` whose
    ``converged`` the caller checks).  ``rhss`` from
    :func:`.momentum_nd.implicit_rhs`."""
    nd = mu.ndim
    systems = viscous_systems(mu, rho_faces, dt, spacing, signs)
    starts = [ua[along(nd, array_axis(nd, a), slice(1, -1))] for a, ua in enumerate(velocity)]
    return solve_viscous_systems(systems, [r.ravel() for r in rhss], starts, rtol)
