"""The implicit viscous solves on a MAC grid of any dimension, on the whole
grid or on a rank's slab.

Component ``a`` of the velocity, on its interior faces, solves (backward
Euler)

    (rho_a - dt L_a) u_a* = rho_a (u_a - dt adv_a) + dt cross_a

where ``L_a`` is the component's own part of the stress ``div(2 mu D)``
(:func:`.momentum.viscous_forces`): ``d/dx_a(2 mu du_a/dx_a)`` with the
normal stress at the cells, ``d/dx_b(mu_e du_a/dx_b)`` for every other axis
``b`` with the shear on the (a, b) edges (:func:`edge_viscosity`); the cross
terms ``cross_a = sum_b d/dx_b(mu_e du_b/dx_a)`` are taken from the old
velocity (:func:`.momentum.implicit_rhs`).  The components decouple into
symmetric positive definite systems (:class:`ViscousSystem`), solved side by
side by Jacobi-preconditioned Chebyshev iteration
(:func:`.viscosity_chebyshev.solve_chebyshev`).  Without the viscous limit
the step is set by the convective and capillary ones (Hysing case 2:
viscosity ratio 100, where the explicit limit ``dt <= 0.2 h^2 / nu``
dominated).

The operator in flux form: along each axis ``b`` the couplings ``c`` of
every unknown with its neighbours before and after (``dt mu_b / h_b^2``)
and ``L x = sum_b c_after (x_after - x) - c_before (x - x_before)``.  Walls:
along ``a`` the wall face (zero normal velocity) is the neighbour of the
first and last unknowns; across the other walls the ghost is ``s x`` with
the wall's sign (-1 no-slip, +1 free-slip), folded into the diagonal, so
the operator stays symmetric.

Partition: one process solves every plane (``padding`` the walls', the
one-slab partition); a rank owns its slab's planes along array axis 0 of
each component's unknowns (for the vertical component the faces above its
cells: a face between two slabs is one rank's unknown).  Its system's
couplings are cut from those of the momentum phase's widened slab, its
product swaps one plane of ``x`` with each neighbour, applies the stencil
to the widened planes and keeps the owned ones; the Chebyshev iteration's
norms and bounds, and CG's sums, are reduced over the ranks.

On CuPy the one-process systems run CUDA kernels registered on the twins
(:mod:`.viscosity_cuda` in 2-D, :mod:`.viscosity3_cuda` in 3-D, each in
this code's order of operations for its dimension); slabs run this array
code.
"""
from __future__ import annotations

import numpy as np

from ..compute.backend import backend_of
from ..compute.twins import twin
from ..mesh.grid import array_axis
from . import viscosity_cuda
from .padding import WALLS, WallPadding, along
from .viscosity_chebyshev import chebyshev_solves, solve_chebyshev

__all__ = ["edge_viscosity", "planar_order", "viscous_coefficients", "viscous_stress",
           "ViscousSystem", "solve_implicit", "solve_implicit_ahead"]


def edge_viscosity(mu, ka, kb, xp):
    """``mu`` on the cell edges of the plane of array axes ``ka`` and ``kb``:
    the mean of the four cells around each, a wall cell copied into the
    missing ones, summed with ``kb`` varying first; in 2-D with array axis 0
    varying first whatever the order of the two axes, as the CUDA kernels
    sum the corners (the order fixes the bits)."""
    nd = mu.ndim
    if nd == 2:
        ka, kb = 1, 0
    width = [(0, 0)] * nd
    width[ka] = width[kb] = (1, 1)
    m = xp.pad(mu, width, mode="edge")
    lo_b = m[along(nd, kb, slice(None, -1))]
    hi_b = m[along(nd, kb, slice(1, None))]
    lo_a, hi_a = along(nd, ka, slice(None, -1)), along(nd, ka, slice(1, None))
    return 0.25 * (lo_b[lo_a] + hi_b[lo_a] + lo_b[hi_a] + hi_b[hi_a])


def planar_order(ndim):
    """Whether the systems of a grid of ``ndim`` axes sum in the order of
    the 2-D kernels (:mod:`.viscosity_cuda`): in 2-D (one process and
    slabs alike, so that both give the same bits).  The order fixes the
    bits: there the component's own axis comes first and its couplings are
    summed one by one (``rho + k_after + k_before + t_after + t_before``,
    the walls' ghosts last; the product ``((k_after (..) - k_before (..)) +
    t_after (..)) - t_before (..)``), the corners' viscosity with array axis
    0 varying first and the wall faces read as zeros; in 3-D (and in the 3-D
    kernels, :mod:`.viscosity3_cuda`) axis by axis in grid-axis order, each
    axis's pair summed first, its walls' ghosts after it."""
    return ndim == 2


def _diagonal(rho_f, couplings, ghost_signs, a, planar):
    """The diagonal of ``S``: ``rho_f`` plus every coupling, less ``s c``
    for the ghost ``s x`` beside the first and last unknowns along each axis
    (``-c (s x - x) = c (1 - s) x``, one ``c`` of which is in already).
    Summed in :func:`planar_order`'s order."""
    nd = rho_f.ndim

    def ghosts(diag, b):
        kb = array_axis(nd, b)
        (low, high), (before, after) = ghost_signs[b], couplings[b]
        first, last = along(nd, kb, slice(0, 1)), along(nd, kb, slice(-1, None))
        diag[first] -= low * before[first]
        diag[last] -= high * after[last]

    if planar:
        diag = rho_f
        for b in (a, 1 - a):
            before, after = couplings[b]
            diag = diag + after + before
        ghosts(diag, 1 - a)
        return diag
    diag = rho_f.copy()
    for b, (before, after) in enumerate(couplings):
        diag += before + after
        ghosts(diag, b)
    return diag


@twin
def viscous_coefficients(a, mu, rho_f, dt, spacing, signs, padding=WALLS):
    """``(couplings, ghost_signs, diagonal, inv_diagonal)`` of component
    ``a``'s system on its interior faces (all of ``mu``'s: a widened slab's
    on a slab): per grid axis ``b`` the couplings ``(before, after)`` of
    every unknown with its neighbours along ``b`` (arrays of ``rho_f``'s
    shape): ``dt mu_b / h_b^2``, ``mu_b = 2 mu`` at the cells along ``a``,
    the edge viscosity of the (a, b) plane along ``b != a``; the ghost signs
    ``(low, high)`` at the axis's walls (0 along ``a``: the wall face);
    ``S``'s diagonal and its inverse (flat), summed in :func:`planar_order`'s
    order.  ``signs[a]`` is not read; ``padding`` is the partition's (the
    kernels take one process's systems alone)."""
    xp = backend_of(mu).xp
    nd = mu.ndim
    ka = array_axis(nd, a)
    planar = planar_order(nd)
    couplings, ghost_signs = [], []
    for b, h in enumerate(spacing):
        kb = array_axis(nd, b)
        if b == a:
            c = dt * 2.0 * mu / h ** 2
            low, high = 0.0, 0.0
        else:
            edges = edge_viscosity(mu, ka, kb, xp)
            c = dt * edges[along(nd, ka, slice(1, -1))] / h ** 2
            low, high = (float(s) for s in signs[b])
        couplings.append((c[along(nd, kb, slice(None, -1))], c[along(nd, kb, slice(1, None))]))
        ghost_signs.append((low, high))
    diag = _diagonal(rho_f, couplings, ghost_signs, a, planar)
    return tuple(couplings), tuple(ghost_signs), diag, (1.0 / diag).ravel()


def _neighbours(x, k, low, high, xp):
    """``(before, after)``: ``x``'s neighbours along array axis ``k``, the
    ghost beyond the first and last layers ``low`` and ``high`` times them
    (None: zero, a wall face)."""
    nd = x.ndim
    first, last = x[along(nd, k, slice(0, 1))], x[along(nd, k, slice(-1, None))]
    g_low = xp.zeros_like(first) if low is None else low * first
    g_high = xp.zeros_like(last) if high is None else high * last
    return (xp.concatenate([g_low, x[along(nd, k, slice(None, -1))]], axis=k),
            xp.concatenate([x[along(nd, k, slice(1, None))], g_high], axis=k))


def viscous_stress(couplings, ghost_signs, a, planar, x):
    """``dt L x`` of component ``a``'s system from its couplings and ghost
    signs (:func:`viscous_coefficients`; ``x`` of the couplings' shape),
    summed in :func:`planar_order`'s order (``planar``)."""
    xp = backend_of(x).xp
    nd = x.ndim
    terms = []
    for b in ((a, 1 - a) if planar else range(nd)):
        low, high = (None, None) if planar and b == a else ghost_signs[b]
        before, after = _neighbours(x, array_axis(nd, b), low, high, xp)
        c_before, c_after = couplings[b]
        terms.append((c_after * (after - x), c_before * (x - before)))
    if planar:
        (own_after, own_before), (after, before) = terms
        return ((own_after - own_before) + after) - before
    out = None
    for after, before in terms:
        term = after - before
        out = term if out is None else out + term
    return out


class ViscousSystem:
    """``S x = rho_f x - dt L_a x`` for velocity component ``a`` (grid axis)
    on its interior faces, any dimension, on the whole grid or the planes a
    rank owns.

    Parameters
    ----------
    a : int
        The component's grid axis (0 x, 1 y, 2 z).
    mu : array
        Cell viscosity (the grid's array shape; on a slab the widened
        slab's).
    rho_f : array
        Face density on the component's interior faces (of ``mu``'s cells).
    dt : float
    spacing : tuple of float
        Cell sizes in grid-axis order.
    signs : tuple of (float, float)
        Ghost signs of the tangential velocity at the walls normal to every
        grid axis, low side first (``signs[a]`` is not read).
    padding : WallPadding or SlabPadding
        The partition's: :data:`.padding.WALLS` for one process.
    owned : (int, int), optional
        The planes ``(start, stop)`` along array axis 0 of ``rho_f`` whose
        rows this rank solves for (None: all, one process).

    ``matvec`` takes and returns the owned rows, flat (every rank at once
    on a slab); ``inv_diagonal`` (flat) is the Jacobi preconditioner;
    ``comm`` the ranks' communicator (None for one process); ``rho_ext``,
    ``couplings`` and ``diagonal_ext`` are on the planes ``ext``, the owned
    planes and a neighbour's plane beside them (``keep`` the owned ones).
    """

    nullspace = None            # rho_f > 0: definite

    def __init__(self, a, mu, rho_f, dt, spacing, signs, padding=WALLS, owned=None):
        if owned is None and not isinstance(padding, WallPadding):
            raise ValueError("a slab's system needs the planes it owns")
        self.backend = backend_of(mu)
        self.xp = self.backend.xp
        self.padding, self.comm = padding, getattr(padding, "comm", None)
        self.component, self.ndim = a, mu.ndim
        self.dt = float(dt)
        self.planar = planar_order(mu.ndim)
        couplings, self.ghost_signs, diagonal, inv_diagonal = viscous_coefficients(
            a, mu, rho_f, self.dt, tuple(float(h) for h in spacing), signs, padding)
        planes = rho_f.shape[0]
        start, stop = self.owned = (0, planes) if owned is None else tuple(owned)
        # The owned planes and one of each neighbour's beside them: what the
        # product reads (a halo plane's own row, which would need the plane
        # beyond, is dropped).
        self.ext = e0, e1 = max(start - 1, 0), min(stop + 1, planes)
        self.keep = slice(start - e0, stop - e0)
        self.couplings = tuple((before[e0:e1], after[e0:e1]) for before, after in couplings)
        self.rho_ext = rho_f[e0:e1]
        self.rho_f = rho_f[start:stop]
        self.diagonal_ext = diagonal[e0:e1]
        if owned is None:
            self.diagonal, self.inv_diagonal = diagonal, inv_diagonal
        else:
            self.diagonal = diagonal[start:stop]
            self.inv_diagonal = (1.0 / self.diagonal).ravel()
        self.shape_nd = self.rho_f.shape
        self.shape = (self.rho_f.size, self.rho_f.size)
        self.dtype = np.dtype(rho_f.dtype)

    def widened(self, x):
        """``x`` (the owned rows, any shape of their size) with the
        neighbours' planes beside them: the planes ``ext``."""
        return self.padding.widened(x.reshape(self.shape_nd), 1)

    def stress(self, x):
        """``dt L x`` on the planes ``ext`` (``x`` there)."""
        return viscous_stress(self.couplings, self.ghost_signs, self.component, self.planar, x)

    def matvec(self, x):
        """``S x`` on the owned rows (flat in, flat out)."""
        xe = self.widened(x)
        return (self.rho_ext * xe - self.stress(xe))[self.keep].ravel()

    def jacobi(self, r):
        """``D^-1 r``: the preconditioner."""
        return self.inv_diagonal * r

    def placed(self, x, like):
        """The owned rows ``x`` on the planes of ``like`` (the component's
        interior faces): with the neighbours' planes beside them, zeros
        elsewhere (every rank at once); on one process ``x`` in ``like``'s
        shape."""
        if self.owned == (0, like.shape[0]):            # no neighbours: no swap
            return x.reshape(like.shape)
        out = self.xp.zeros_like(like)
        out[self.ext[0]:self.ext[1]] = self.widened(x)
        return out


def solve_implicit(velocity, mu, rho_faces, rhss, dt, spacing, signs, rtol, padding=WALLS,
                   owned=None):
    """The viscous solves of every component side by side, from the old
    velocity's interior faces; a list of ``(x, record)`` per component.

    Parameters
    ----------
    velocity : tuple of arrays
        The face velocities (the widened slab's on a slab).
    mu : array
        Cell viscosity.
    rho_faces, rhss : sequences of arrays
        Per component the face density and the right-hand side
        (:func:`.momentum.implicit_rhs`) on its interior faces.
    dt : float
    spacing : tuple of float
    signs : tuple of (float, float)
        The walls' ghost signs per grid axis.
    rtol : float
        ``||rhs - S x|| <= rtol ||rhs||`` (over the ranks).
    padding : WallPadding or SlabPadding
    owned : list of (int, int), optional
        Per component the planes of its unknowns along array axis 0 this
        rank owns (None: all, one process).

    Returns
    -------
    list of (x, record)
        ``x`` of ``rhs``'s shape: the solution on the owned planes and the
        neighbours' planes beside them, zeros elsewhere (all of it on one
        process); ``record`` a
        :class:`~bubbleflow.linalg.krylov.record.SolveRecord` reduced over
        the ranks, whose ``converged`` the caller checks.
    """
    systems, rows, starts = _systems(velocity, mu, rho_faces, rhss, dt, spacing, signs, padding,
                                     owned)
    solved = solve_chebyshev(systems, rows, starts, rtol)
    return [(S.placed(x, rhs), record) for S, rhs, (x, record) in zip(systems, rhss, solved)]


def solve_implicit_ahead(velocity, mu, rho_faces, rhss, dt, spacing, signs, rtol, steps,
                         padding=WALLS, owned=None):
    """:func:`solve_implicit` with ``steps`` Chebyshev steps for every
    component, planned ahead (:func:`.viscosity_chebyshev.chebyshev_solves`):
    launches alone, nothing read on the host.  Returns ``(xs, report)``,
    ``xs`` placed as :func:`solve_implicit`'s, ``report`` the device array
    whose rows (read on the host) give the records
    (:func:`.viscosity_chebyshev.chebyshev_records`); a component the
    steps leave above ``rtol`` is for the caller to solve again."""
    systems, rows, starts = _systems(velocity, mu, rho_faces, rhss, dt, spacing, signs, padding,
                                     owned)
    xs, report, _ = chebyshev_solves(systems, rows, starts, rtol, steps)
    return [S.placed(x, rhs) for S, rhs, x in zip(systems, rhss, xs)], report


def _systems(velocity, mu, rho_faces, rhss, dt, spacing, signs, padding, owned):
    """The components' systems, their right-hand sides' and starting
    velocities' owned rows."""
    nd = mu.ndim
    systems, rows, starts = [], [], []
    for a, (ua, rho_f, rhs) in enumerate(zip(velocity, rho_faces, rhss)):
        S = ViscousSystem(a, mu, rho_f, dt, spacing, signs, padding,
                          None if owned is None else owned[a])
        start, stop = S.owned
        systems.append(S)
        rows.append(rhs[start:stop].ravel())
        starts.append(ua[along(nd, array_axis(nd, a), slice(1, -1))][start:stop])
    return systems, rows, starts


# The CUDA couplings of the one-process 2-D and 3-D systems (viscosity_cuda.py
# and viscosity3_cuda.py, kernels in viscosity.cu and viscosity3.cu): one
# launch, the edges' viscosity formed in the kernel.
viscous_coefficients.register("cupy")(viscosity_cuda.viscous_coefficients_nd)
