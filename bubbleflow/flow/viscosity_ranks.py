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
Chebyshev steps, then CG (its sums over the ranks) should rounding leave
one short.
"""
from __future__ import annotations

import time

import numpy as np

from ..linalg.krylov import SolveRecord
from .viscosity import (MAX_CHEBYSHEV_STEPS, chebyshev_interval, chebyshev_iterations,
                        chebyshev_schedule, chebyshev_sweep)
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


def _scalars(S, rhs, x, comm):
    """``(r, [||rhs||, ||r||, min rho_f / D, max D, min D])`` over the ranks."""
    xp = S.xp
    r = rhs - S.matvec(x)
    d = S.diagonal.ravel()
    local = S.backend.to_host(xp.stack([(rhs * rhs).sum(), (r * r).sum()]))
    sums = comm.allreduce_sum(np.asarray(local, dtype=np.float64))
    extremes = S.backend.to_host(xp.stack([-(S.rho_f.ravel() / d).min(), d.max(), -d.min()]))
    lo, dmax, dmin = (comm.allreduce_max(float(v)) for v in extremes)
    return r, np.array([np.sqrt(sums[0]), np.sqrt(sums[1]), -lo, dmax, -dmin])


def solve_slab_systems(systems, rhss, x0s, rtol):
    """Each rank's part of every component's ``S x = rhs`` to ``||rhs - S x||
    <= rtol ||rhs||`` over the ranks; a list of ``(x, record)`` (the owned
    unknowns, flat; the record the same on every rank)."""
    from ..linalg.functions import cg

    t0 = time.perf_counter()
    comm = systems[0].comm
    xp = systems[0].xp
    xs = [xp.array(x0, dtype=np.float64).reshape(-1) for x0 in x0s]
    starts = [_scalars(S, rhs, x, comm) for S, rhs, x in zip(systems, rhss, xs)]
    rs, steps, schedules, ds, tols, fnorms, rnorms = [], [], [], [], [], [], []
    for S, (r, (fnorm, rnorm, lo, dmax, dmin)) in zip(systems, starts):
        tol, k, schedule, d = rtol * fnorm, 0, [], None
        if rnorm > tol:
            a, b, spread = chebyshev_interval(lo, dmax, dmin)
            k = min(chebyshev_iterations(a, b, tol / (rnorm * spread)), MAX_CHEBYSHEV_STEPS)
            first, schedule = chebyshev_schedule(a, b, k)
            d = first * (S.inv_diagonal * r)
        rs.append(r)
        steps.append(k)
        schedules.append(schedule)
        ds.append(d)
        tols.append(tol)
        fnorms.append(fnorm)
        rnorms.append(rnorm)
    moved = [i for i, k in enumerate(steps) if k]
    if moved:
        chebyshev_sweep([systems[i] for i in moved], [xs[i] for i in moved],
                        [rs[i] for i in moved], [ds[i] for i in moved],
                        [schedules[i] for i in moved])
        for i in moved:
            rnorms[i] = _scalars(systems[i], rhss[i], xs[i], comm)[1][1]
    seconds = (time.perf_counter() - t0) / len(systems)
    out = []
    for S, rhs, x, fnorm, rnorm, tol, k in zip(systems, rhss, xs, fnorms, rnorms, tols, steps):
        record = SolveRecord(method="chebyshev", preconditioner="jacobi", rtol=float(rtol),
                             engine="chebyshev")
        record.iterations = k
        record.residual = float(rnorm / fnorm) if fnorm > 0 else 0.0
        record.converged = bool(rnorm <= tol or fnorm == 0.0)
        record.reason = "converged" if record.converged else "maxiter"
        record.solve_seconds = seconds
        if not record.converged:
            x, record = cg(S, rhs, x0=x, rtol=rtol, M=S.jacobi, nullspace=None, engine="generic")
            record.iterations += k
            record.engine = "chebyshev+cg"
        out.append((x, record))
    return out
