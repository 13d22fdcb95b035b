"""Level-set operations on a grid of any dimension: transport, redistancing,
curvature, filtering and the bubble diagnostics of the 3-D benchmark.

The same schemes as :mod:`.levelset_ops` (which is the 2-D code with its
CUDA twins), written once over the axes: Jiang-Shu WENO5 with TVD-RK3,
Sussman-Smereka-Osher redistancing with the Russo-Smereka subcell fix, the
mean curvature by central differences, the ``[1, 2, 1] / 4`` filter.  In
2-D every function here equals its :mod:`.levelset_ops` counterpart to
rounding (tests/flow/test_flow_nd.py compares them), which is how this code
is checked; in 3-D it is the reference array code, on NumPy or CuPy.

Conventions: arrays have the grid's shape (``(nz, ny, nx)`` in 3-D, x
fastest); ``velocity`` is the tuple of MAC face components in grid-axis
order (``u, v[, w]``), component ``a`` having one more entry along its own
axis (the wall faces included); ``spacing`` is the grid's ``(hx, hy[,
hz])``.  ``phi > 0`` in the liquid.
"""
from __future__ import annotations

import math

from ..compute.backend import array_module, backend_of
from ..mesh.grid import array_axis
from ..mesh.levelset import heaviside
# The scheme's pointwise parts are the 2-D code's own (one definition).
from .levelset_ops import rk3, weno5, weno_floor

__all__ = ["WallPadding", "WALLS", "advect", "reinitialize", "curvature", "smooth", "cell_velocity",
           "bubble_diagnostics", "along"]

# Ghost layers the WENO5 stencils reach beyond the first/last cell.
_NG = 3


def along(ndim, axis, s):
    """The index selecting ``s`` (a slice) along array axis ``axis`` of an
    ``ndim``-D array, everything along the others."""
    index = [slice(None)] * ndim
    index[axis] = s
    return tuple(index)


def _ramp(k, ng, ndim, axis, dtype, xp):
    shape = [1] * ndim
    shape[axis] = ng
    return (xp.arange(1, ng + 1, dtype=dtype) if k > 0
            else xp.arange(ng, 0, -1, dtype=dtype)).reshape(shape)


def pad_linear(phi, ng, axis, xp):
    """``ng`` ghost layers at both ends of array axis ``axis``, extrapolated
    linearly (a signed distance stays one, so the one-sided stencils see no
    kink at a wall)."""
    nd = phi.ndim
    if phi.shape[axis] < 2:
        return xp.repeat(phi, 2 * ng + 1, axis=axis)
    first, second = phi[along(nd, axis, slice(0, 1))], phi[along(nd, axis, slice(1, 2))]
    last, before = phi[along(nd, axis, slice(-1, None))], phi[along(nd, axis, slice(-2, -1))]
    low = first - (second - first) * _ramp(-1, ng, nd, axis, phi.dtype, xp)
    high = last + (last - before) * _ramp(1, ng, nd, axis, phi.dtype, xp)
    return xp.concatenate([low, phi, high], axis=axis)


def _pad_quadratic(phi, axis, xp):
    """One ghost layer at both ends of ``axis`` by quadratic extrapolation
    (the central differences at a wall cell become the second-order
    one-sided ones the curvature needs)."""
    nd = phi.ndim
    if phi.shape[axis] < 3:
        return pad_linear(phi, 1, axis, xp)
    s = lambda a, b: phi[along(nd, axis, slice(a, b))]      # noqa: E731
    lo = 3.0 * s(0, 1) - 3.0 * s(1, 2) + s(2, 3)
    hi = 3.0 * s(-1, None) - 3.0 * s(-2, -1) + s(-3, -2)
    return xp.concatenate([lo, phi, hi], axis=axis)


class WallPadding:
    """The ghost layers of a field where the grid ends at walls: the level
    set extrapolated linearly (``linear``) or quadratically (``quadratic``,
    one layer), or each wall cell repeated (``edge``, one layer on every
    axis).  The functions below take one (``padding``); a rank's slab has
    its own (:class:`bubbleflow.flow.slabs.SlabPadding`), whose layers along
    array axis 0 are the neighbours' planes where the slab ends at another
    rank, so that the same functions run on the slabs.  ``offset`` is the
    field's first plane of array axis 0 in the grid, and ``total`` sums a
    vector of partial sums over the fields' parts (both trivial here)."""

    offset = 0

    def total(self, sums):
        return sums

    def linear(self, phi, ng, axis):
        return pad_linear(phi, ng, axis, array_module(phi))

    def quadratic(self, phi, axis):
        return _pad_quadratic(phi, axis, array_module(phi))

    def edge(self, phi):
        return array_module(phi).pad(phi, 1, mode="edge")


#: The one-process grid's padding.
WALLS = WallPadding()


def _stencils(phi, h, axis, xp, padding=WALLS):
    """The WENO5 divided differences ``(minus, plus)`` along array axis ``axis``."""
    n, nd = phi.shape[axis], phi.ndim
    p = padding.linear(phi, _NG, axis)
    d = (p[along(nd, axis, slice(1, None))] - p[along(nd, axis, slice(None, -1))]) / h

    def D(k):
        return d[along(nd, axis, slice(k, k + n))]
    return [D(0), D(1), D(2), D(3), D(4)], [D(5), D(4), D(3), D(2), D(1)]


def cell_velocity(velocity):
    """Cell-centre velocity per grid axis: the mean of each cell's two faces."""
    nd = velocity[0].ndim
    out = []
    for a, f in enumerate(velocity):
        k = array_axis(nd, a)
        out.append(0.5 * (f[along(nd, k, slice(None, -1))] + f[along(nd, k, slice(1, None))]))
    return tuple(out)


def check_velocity(field, velocity, name="phi", what="level set"):
    """ValueError unless ``velocity`` holds one face component per axis of
    the cell field ``field`` (called ``name``, a ``what``)."""
    nd = field.ndim
    if len(velocity) != nd:
        raise ValueError(f"{len(velocity)} velocity components for a {nd}-D {what}")
    for a, f in enumerate(velocity):
        expected = list(field.shape)
        expected[array_axis(nd, a)] += 1
        if tuple(f.shape) != tuple(expected):
            raise ValueError(f"velocity component {'xyz'[a]} has shape {tuple(f.shape)}; "
                             f"expected {tuple(expected)} for {name} of shape {field.shape}")


def advect(phi, velocity, dt, spacing, padding=WALLS):
    """Advance ``phi_t + u . grad(phi) = 0`` one step: WENO5 derivatives
    upwinded by the cell-centre velocity, TVD-RK3 with the velocity frozen,
    three linearly extrapolated ghost layers at the walls (``padding``'s).
    Stability needs ``dt sum(max|u_a| / h_a) <~ 1`` (the caller's choice).
    Returns a new array."""
    xp = array_module(phi, *velocity)
    check_velocity(phi, velocity)
    nd = phi.ndim
    centred = [c.astype(phi.dtype, copy=False) for c in cell_velocity(velocity)]
    upwind = [c > 0 for c in centred]           # information from below: backward differences
    floor = weno_floor(phi.dtype, xp)

    def rhs(p):
        total = None
        for a, (c, up, h) in enumerate(zip(centred, upwind, spacing)):
            minus, plus = _stencils(p, h, array_axis(nd, a), xp, padding)
            term = c * weno5(*[xp.where(up, m, q) for m, q in zip(minus, plus)], floor)
            total = term if total is None else total + term
        return -total

    return rk3(phi, dt, rhs)


def _interface_cells(phi0, xp, padding=WALLS):
    """Cells with a face neighbour across the zero level (interior faces
    only: a wall's ghost repeats its cell, which crosses only where that
    cell is on the level already)."""
    nd = phi0.ndim
    q = padding.edge(phi0)
    near = (phi0 == 0).copy()
    inner = [slice(1, -1)] * nd
    for k in range(nd - 1, -1, -1):
        for shift in (-1, 1):
            index = list(inner)
            index[k] = slice(1 + shift, q.shape[k] - 1 + shift)
            near |= (q[tuple(index)] * phi0) <= 0
    return near


def _subcell_distance(phi0, spacing, xp, padding=WALLS):
    """Russo-Smereka ``D = phi0 / |grad phi0|``, ``|grad phi0|`` the largest
    of the central gradient and the one-sided differences (eq. 17)."""
    nd = phi0.ndim
    sides, central = [], None
    for a, h in enumerate(spacing):
        p = padding.linear(phi0, 1, array_axis(nd, a))
        k = array_axis(nd, a)
        up, down = p[along(nd, k, slice(2, None))], p[along(nd, k, slice(None, -2))]
        sq = ((up - down) / (2.0 * h)) ** 2
        central = sq if central is None else central + sq
        sides.append((up, down, h))
    g = xp.sqrt(central)
    for up, down, h in sides:
        g = xp.maximum(g, xp.abs(up - phi0) / h)
        g = xp.maximum(g, xp.abs(phi0 - down) / h)
    return phi0 / xp.maximum(g, float(xp.finfo(phi0.dtype).tiny))


def reinitialize(phi, spacing, iterations=20, cfl=0.3, padding=WALLS):
    """Restore the signed-distance property without moving the zero level:
    ``phi_tau + S(phi0)(|grad phi| - 1) = 0`` with the Godunov Hamiltonian
    of WENO5 one-sided derivatives, TVD-RK3 in pseudo-time, the smoothed
    sign with ``h = max(spacing)``, and the Russo-Smereka subcell fix in the
    cells next to the interface (:func:`.levelset_ops.reinitialize` says
    more).  Returns a new array."""
    xp = array_module(phi)
    nd = phi.ndim
    phi0 = phi
    h, hmin = max(spacing), min(spacing)
    floor = weno_floor(phi.dtype, xp)
    S = phi0 / xp.sqrt(phi0 * phi0 + h * h)
    positive = S > 0
    near = _interface_cells(phi0, xp, padding)
    D = _subcell_distance(phi0, spacing, xp, padding)
    sgn0 = xp.sign(phi0)

    def rhs(p):
        gpos = gneg = None
        for a, hk in enumerate(spacing):
            minus, plus = _stencils(p, hk, array_axis(nd, a), xp, padding)
            back, fwd = weno5(*minus, floor), weno5(*plus, floor)
            # Characteristics leave the interface (Osher and Fedkiw 2003, 7.5 ff.).
            pos = xp.maximum(xp.maximum(back, 0.0) ** 2, xp.minimum(fwd, 0.0) ** 2)
            neg = xp.maximum(xp.minimum(back, 0.0) ** 2, xp.maximum(fwd, 0.0) ** 2)
            gpos = pos if gpos is None else gpos + pos
            gneg = neg if gneg is None else gneg + neg
        grad = xp.sqrt(xp.where(positive, gpos, gneg))
        fix = -(sgn0 * xp.abs(p) - D) / hmin
        return xp.where(near, fix, -S * (grad - 1.0))

    out = phi0
    for _ in range(int(iterations)):
        out = rk3(out, cfl * hmin, rhs)
    return phi0.copy() if out is phi0 else out


def curvature(phi, spacing, padding=WALLS):
    """Mean curvature ``kappa = div(grad phi / |grad phi|)`` at the cells:
    ``(sum_a phi_aa |g|^2 - sum_ab phi_a phi_b phi_ab) / |g|^3`` by central
    differences over one quadratic ghost layer per axis, ``|g|`` floored at
    1e-8 and ``|kappa| <= 1 / min(h)`` (nothing finer than the grid is
    resolved).  A sphere of radius R with ``phi > 0`` outside has ``kappa =
    (ndim - 1) / R``."""
    xp = array_module(phi)
    nd = phi.ndim
    p = phi
    for k in range(nd - 1, -1, -1):
        p = padding.quadratic(p, k)

    def shifted(offsets):
        index = [slice(1 + o, p.shape[k] - 1 + o) for k, o in enumerate(offsets)]
        return p[tuple(index)]

    def offset(pairs):
        o = [0] * nd
        for k, s in pairs:
            o[k] += s
        return o

    c = shifted([0] * nd)
    first, second = [], []
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        up, down = shifted(offset([(k, 1)])), shifted(offset([(k, -1)]))
        first.append((up - down) / (2.0 * h))
        second.append((up - 2.0 * c + down) / (h * h))
    g2 = None
    for d in first:
        g2 = d * d if g2 is None else g2 + d * d
    numerator = None
    for a in range(nd):
        rest = None
        for b in range(nd):
            if b != a:
                rest = first[b] * first[b] if rest is None else rest + first[b] * first[b]
        term = second[a] * rest
        numerator = term if numerator is None else numerator + term
    for a in range(nd):
        for b in range(a + 1, nd):
            ka, kb = array_axis(nd, a), array_axis(nd, b)
            cross = (shifted(offset([(ka, 1), (kb, 1)])) - shifted(offset([(ka, -1), (kb, 1)]))
                     - shifted(offset([(ka, 1), (kb, -1)]))
                     + shifted(offset([(ka, -1), (kb, -1)]))) / (4.0 * spacing[a] * spacing[b])
            numerator = numerator - 2.0 * first[a] * first[b] * cross
    g = xp.maximum(xp.sqrt(g2), 1e-8)
    kmax = 1.0 / min(spacing)
    return xp.clip(numerator / (g * g * g), -kmax, kmax)


def smooth(phi, passes=1, padding=WALLS):
    """``passes`` passes of the separable ``[1, 2, 1] / 4`` filter along
    every axis (x first), a wall cell standing in for its missing neighbour
    (:func:`.levelset_ops.smooth` says why CLSVOF needs it)."""
    nd = phi.ndim
    for _ in range(passes):
        q = padding.edge(phi)
        for k in range(nd - 1, -1, -1):
            q = 0.25 * (q[along(nd, k, slice(None, -2))] + 2.0 * q[along(nd, k, slice(1, -1))]
                        + q[along(nd, k, slice(2, None))])
        phi = q
    return phi


def bubble_diagnostics(phi, velocity, spacing, eps, sharp=True, padding=WALLS):
    """Benchmark quantities of the gas (``phi < 0``), host floats.

    ``volume``, the centroid ``centroid_x, centroid_y[, centroid_z]`` and
    ``rise_velocity`` (the mean vertical, last-axis, cell velocity) are the
    moments of the gas region.  With ``sharp`` (the default) they are the
    moments of the sharp region ``phi < 0``, extrapolated (Richardson) from
    the smoothed weights ``1 - H_eps(phi)`` and ``1 - H_2eps(phi)``: the
    smoothing biases each moment by ``c eps^2`` (a sphere's volume by ``0.39
    (eps/R)^2``; the rise velocity, which mixes in the liquid's velocity
    across the band, by 2.4 % at ``eps/R = 0.19`` in the 3-D benchmark).
    Without, the moments of ``1 - H_eps`` (what the 2-D diagnostics use).
    ``surface`` = ``integral delta_eps(phi) |grad phi|`` (the co-area
    formula with the Heaviside's own delta; the length in 2-D);
    ``sphericity`` = ``pi^(1/3) (6 V)^(2/3) / A`` in 3-D (the area of the
    sphere of equal volume over the surface: 1 for a sphere, the measure of
    Adelsberger et al. 2014), the circularity ``2 sqrt(pi A) / L`` in 2-D.

    A signed-distance sphere of radius 8, 12 and 16 cells (``eps = 1.5 h``)
    comes out with the volume within 1e-5, the surface 1.3e-3, 5.7e-4 and
    5.9e-4 and the sphericity 1 - 1.3e-3, 1 - 5.8e-4, 1 - 6e-4
    (tests/flow/test_flow_nd.py).  Without gas the quotients are NaN.
    On a rank's slab (``padding``) the sums are the slab's, then the ranks'.
    """
    backend = backend_of(phi, *velocity)
    xp = backend.xp
    nd = phi.ndim
    cell = math.prod(spacing)
    w = 1.0 - heaviside(phi, eps, xp)
    if sharp:
        w = (4.0 * w - (1.0 - heaviside(phi, 2.0 * eps, xp))) / 3.0
    grad2 = None
    for a, h in enumerate(spacing):
        k = array_axis(nd, a)
        p = padding.linear(phi, 1, k)
        d = (p[along(nd, k, slice(2, None))] - p[along(nd, k, slice(None, -2))]) / (2.0 * h)
        grad2 = d * d if grad2 is None else grad2 + d * d
    t = phi / eps
    delta = xp.where(xp.abs(t) < 1.0, 0.5 / eps * (1.0 + xp.cos(math.pi * t)), 0.0)
    # Every sum first, then one transfer (one host synchronisation a step).
    sums = [xp.sum(w), xp.sum(delta * xp.sqrt(grad2))]
    for a, h in enumerate(spacing):
        shape = [1] * nd
        k = array_axis(nd, a)
        shape[k] = phi.shape[k]
        first = padding.offset if k == 0 else 0
        x = ((xp.arange(first, first + phi.shape[k], dtype=phi.dtype) + 0.5) * h).reshape(shape)
        sums.append(xp.sum(w * x))
    sums.append(xp.sum(w * cell_velocity(velocity)[-1]))
    sums = [float(v) for v in backend.to_host(padding.total(xp.stack(sums)))]
    mass = sums[0]
    volume = mass * cell
    surface = sums[1] * cell
    out = {"volume": volume, "surface": surface}
    names = ["centroid_" + "xyz"[a] for a in range(nd)]
    nan = float("nan")
    if mass <= 0.0:
        out.update({n: nan for n in names}, rise_velocity=nan, sphericity=nan)
        return out
    out.update({name: value / mass for name, value in zip(names, sums[2:2 + nd])})
    out["rise_velocity"] = sums[2 + nd] / mass
    if surface <= 0.0:
        out["sphericity"] = nan
    elif nd == 3:
        out["sphericity"] = math.pi ** (1.0 / 3.0) * (6.0 * volume) ** (2.0 / 3.0) / surface
    else:
        out["sphericity"] = 2.0 * math.sqrt(math.pi * volume) / surface
    return out
