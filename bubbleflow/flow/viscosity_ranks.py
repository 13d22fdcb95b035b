"""The implicit viscous solves on the ranks' slabs.

Each velocity component's system (:class:`.viscosity_nd.ViscousSystemND`)
has its unknowns on the component's interior faces; a rank owns those of
its slab's planes along array axis 0 (for the vertical component the faces
above its cells, ``lo + 1 .. hi``, the top wall's excluded: a face between
two slabs is one rank's unknown).  :class:`SlabViscousSystem` holds the
rank's rows: the couplings of the slab widened by one plane of each
neighbour, cut from the system of the momentum phase's widened slab, and
its product swaps one plane of ``x`` with each neighbour, applies the
one-process stencil to the widened planes and keeps the owned ones (a halo
plane's own row, which would need the plane beyond, is dropped).
:func:`solve_slab_systems` is :func:`.viscosity.solve_viscous_systems` with
its norms and Gershgorin bounds reduced over the ranks: the same Jacobi
Chebyshev steps (the array code: the CUDA twins take the 2-D systems'
layout only, and decline these), then CG (its sums over the ranks) should
rounding leave one short.
"""
from __future__ import annotations

import numpy as np

from .viscosity import solve_viscous_systems
from .viscosity_nd import ViscousSystemND, flux_stress

__all__ = ["SlabViscousSystem", "solve_slab_systems"]


class SlabViscousSystem:
    """Component ``a``'s rows on the planes ``own = (start, stop)`` of the
    unknowns of a widened slab (``mu``, ``rho_f`` there; the other
    arguments :class:`.viscosity_nd.ViscousSystemND`'s), on the slab of
    ``padding`` (:class:`.slabs.SlabPadding`)."""

    nullspace = None

    def __init__(self, a, mu, rho_f, dt, spacing, signs, own, padding):
        whole = ViscousSystemND(a, mu, rho_f, dt, spacing, signs)
        self.backend, self.xp, self.padding = whole.backend, whole.xp, padding
        self.comm = padding.comm
        start, stop = own
        planes = rho_f.shape[0]
        self.ext = (max(start - 1, 0), min(stop + 1, planes))
        e0, e1 = self.ext
        self.keep = slice(start - e0, stop - e0)
        vertical = len(spacing) - 1          # grid axis along array axis 0
        self.couplings = tuple(c[e0:e1 + 1] if b == vertical else c[e0:e1]
                               for b, c in enumerate(whole.couplings))
        self.ghost_signs = whole.ghost_signs
        self.rho_ext = rho_f[e0:e1]
        self.rho_f = rho_f[start:stop]
        self.shape_nd = self.rho_f.shape
        self.diagonal = whole.diagonal[start:stop]
        self.inv_diagonal = (1.0 / self.diagonal).ravel()
        self.shape = (self.rho_f.size, self.rho_f.size)
        self.dtype = np.dtype(rho_f.dtype)

    def widened(self, x):
        """``x`` (the owned planes, any shape of their size) with the
        neighbours' planes beside them."""
        return self.padding.widened(x.reshape(self.shape_nd), 1)

    def matvec(self, x):
        """``S x`` on the owned unknowns (flat in, flat out; every rank at once)."""
        xe = self.widened(x)
        out = self.rho_ext * xe - flux_stress(self.couplings, self.ghost_signs, xe)
        return out[self.keep].ravel()

    def jacobi(self, r):
        return self.inv_diagonal * r


def solve_slab_systems(systems, rhss, x0s, rtol):
    """Each rank's part of every component's ``S x = rhs`` to ``||rhs - S x||
    <= rtol ||rhs||`` over the ranks: :func:`.viscosity.solve_viscous_systems`
    with the norms and Gershgorin bounds reduced over the ranks; a list of
    ``(x, record)`` (the owned unknowns, flat; the record the same on every
    rank)."""
    comm = systems[0].comm

    def reduce(host):
        # [||rhs||, ||r||, min rho_f / D, max D, min D] per system.
        out = np.array(host, dtype=np.float64)
        out[:, :2] = np.sqrt(comm.allreduce_sum(out[:, :2] ** 2))
        for row in out:
            row[2] = -comm.allreduce_max(-row[2])
            row[3] = comm.allreduce_max(row[3])
            row[4] = -comm.allreduce_max(-row[4])
        return out

    return solve_viscous_systems(systems, rhss, x0s, rtol, reduce=reduce)
