"""The explicit parts of a flow step on a MAC grid of any dimension.

The schemes of :mod:`.momentum` (the 2-D code with its CUDA twins), written
once over the axes so that 3-D is the same code: fluid properties from the
smoothed Heaviside, the hybrid (central / upwind) advection of each face
velocity, the variable-viscosity stress ``div(2 mu D)`` in divergence form
(normal stresses at the cells, shear stresses on the cell edges), the
balanced-force surface tension ``-sigma kappa_f grad H`` on the faces,
gravity along the last axis, the implicit viscous step's right-hand sides
and forces (the solves are :mod:`.viscosity_nd`'s), and the projection's
divergence and correction.  In 2-D every function equals its :mod:`.momentum`
counterpart to rounding (tests/flow/test_flow_nd.py).

Layout: ``velocity`` is the tuple of face components in grid-axis order
(``u, v[, w]``); component ``a`` has the grid's array shape with one more
entry along its array axis (wall faces included, where it is zero).
Anything "on the interior faces of ``a``" has one entry fewer than the
cells along that axis.  ``signs[a] = (low, high)`` are the ghost signs of
the tangential velocity at the two walls normal to grid axis ``a``: -1
no-slip, +1 free-slip.
"""
from __future__ import annotations

from ..compute.backend import array_module
from ..mesh.grid import array_axis
from ..mesh.levelset import heaviside
from .levelset_nd import along

__all__ = ["fluid_properties", "advection_terms", "viscous_forces", "provisional_velocity",
           "interface_coefficients", "density_mismatch", "edge_viscosity", "cross_viscous_forces",
           "implicit_rhs", "implicit_velocity", "divergence", "correct_velocity", "face_mean"]


def _lo(nd, k):
    return along(nd, k, slice(None, -1))


def _hi(nd, k):
    return along(nd, k, slice(1, None))


def face_mean(cells, a):
    """The mean of the two cells of every interior face normal to grid axis ``a``."""
    nd = cells.ndim
    k = array_axis(nd, a)
    return 0.5 * (cells[_hi(nd, k)] + cells[_lo(nd, k)])


def fluid_properties(phi, eps, rho_l, rho_g, mu_l, mu_g, rule):
    """``(H, rho, mu, rho_faces)``: the cell Heaviside, density and viscosity
    and the density on the interior faces of every axis, by ``rule``
    (``"levelset"``: of the Heaviside of the faces' mean ``phi``;
    ``"harmonic"``; else the arithmetic mean), as :func:`.momentum.fluid_properties`."""
    xp = array_module(phi)
    nd = phi.ndim
    H = heaviside(phi, eps, xp)
    rho = rho_g + (rho_l - rho_g) * H
    mu = mu_g + (mu_l - mu_g) * H
    faces = []
    for a in range(nd):
        k = array_axis(nd, a)
        hi, lo = _hi(nd, k), _lo(nd, k)
        if rule == "levelset":
            faces.append(rho_g + (rho_l - rho_g) * heaviside(0.5 * (phi[hi] + phi[lo]), eps, xp))
        elif rule == "harmonic":
            faces.append(2 * rho[hi] * rho[lo] / (rho[hi] + rho[lo]))
        else:
            faces.append(0.5 * (rho[hi] + rho[lo]))
    return H, rho, mu, tuple(faces)


def _ghosted(f, k, signs):
    """``f`` with one ghost layer at both ends of array axis ``k``: the
    mirror of the first/last layer times the wall's sign."""
    nd = f.ndim
    low, high = signs
    return array_module(f).concatenate([low * f[along(nd, k, slice(0, 1))], f,
                               high * f[along(nd, k, slice(-1, None))]], axis=k)


def _interior(f, k):
    return f[along(f.ndim, k, slice(1, -1))]


def _transverse(vb, ka, kb):
    """Component ``b`` (array axis ``kb``) at the interior faces of component
    ``a`` (array axis ``ka``): the mean of the four ``b`` faces around."""
    nd = vb.ndim
    lo_b, hi_b = vb[_lo(nd, kb)], vb[_hi(nd, kb)]
    return 0.25 * (lo_b[_lo(nd, ka)] + lo_b[_hi(nd, ka)] + hi_b[_lo(nd, ka)] + hi_b[_hi(nd, ka)])


def _hybrid(minus, centre, plus, speed, h, rho, mu):
    """d/dx of a face velocity: central, or upwind where ``rho |c| h / mu > 2``."""
    xp = array_module(minus, centre, plus)
    central = (plus - minus) / (2 * h)
    upwind = xp.where(speed > 0, centre - minus, plus - centre) / h
    return xp.where(rho * xp.abs(speed) * h <= 2.0 * mu, central, upwind)


def advection_terms(velocity, rho_faces, mu, spacing, signs):
    """``(u . grad) u_a`` on the interior faces of every component ``a``:
    the hybrid scheme of :func:`.momentum.advection_terms` (central where
    the cell Reynolds number is at most 2, first-order upwind beyond)."""
    nd = mu.ndim
    out = []
    for a, ua in enumerate(velocity):
        ka = array_axis(nd, a)
        centre = _interior(ua, ka)
        mu_f = face_mean(mu, a)
        total = None
        for b, (vb, h) in enumerate(zip(velocity, spacing)):
            kb = array_axis(nd, b)
            if b == a:
                speed = centre
                minus, plus = ua[along(nd, ka, slice(None, -2))], ua[along(nd, ka, slice(2, None))]
            else:
                speed = _transverse(vb, ka, kb)
                g = _interior(_ghosted(ua, kb, signs[b]), ka)
                minus, plus = g[along(nd, kb, slice(None, -2))], g[along(nd, kb, slice(2, None))]
            term = speed * _hybrid(minus, centre, plus, speed, h, rho_faces[a], mu_f)
            total = term if total is None else total + term
        out.append(total)
    return tuple(out)


def edge_viscosity(mu, ka, kb, xp):
    """``mu`` on the cell edges of the (a, b) plane: the mean of the four
    cells around each, a wall cell copied into the missing ones."""
    nd = mu.ndim
    width = [(0, 0)] * nd
    width[ka] = width[kb] = (1, 1)
    m = xp.pad(mu, width, mode="edge")
    lo_b, hi_b = m[_lo(nd, kb)], m[_hi(nd, kb)]
    return 0.25 * (lo_b[_lo(nd, ka)] + hi_b[_lo(nd, ka)] + lo_b[_hi(nd, ka)] + hi_b[_hi(nd, ka)])


def viscous_forces(velocity, mu, spacing, signs):
    """``div(2 mu D)_a`` on the interior faces of every component: the
    normal stress ``2 mu du_a/dx_a`` at the cells, the shear stresses
    ``mu_e (du_a/dx_b + du_b/dx_a)`` on the edges (walls through the ghost
    signs), differenced back to the faces."""
    xp = array_module(mu)
    nd = mu.ndim
    forces = []
    for a, (ua, ha) in enumerate(zip(velocity, spacing)):
        ka = array_axis(nd, a)
        normal = 2 * mu * (ua[_hi(nd, ka)] - ua[_lo(nd, ka)]) / ha
        force = (normal[_hi(nd, ka)] - normal[_lo(nd, ka)]) / ha
        for b, (vb, hb) in enumerate(zip(velocity, spacing)):
            if b == a:
                continue
            kb = array_axis(nd, b)
            ug, vg = _ghosted(ua, kb, signs[b]), _ghosted(vb, ka, signs[a])
            shear = edge_viscosity(mu, ka, kb, xp) * (
                (ug[_hi(nd, kb)] - ug[_lo(nd, kb)]) / hb + (vg[_hi(nd, ka)] - vg[_lo(nd, ka)]) / ha)
            shear = _interior(shear, ka)
            force = force + (shear[_hi(nd, kb)] - shear[_lo(nd, kb)]) / hb
        forces.append(force)
    return tuple(forces)


def interface_coefficients(kappa, sigma, heights, buoyancy, y0):
    """The coefficients ``c_a`` of ``grad H`` in the interface force ``-c_a
    dH/dx_a`` on the interior faces of every axis (balanced force: the very
    face gradient of ``H`` the pressure correction uses).

    ``c = sigma kappa_f`` (the mean of the two cells' curvature) with
    surface tension, less ``buoyancy (y_f - y0)`` with reduced gravity
    (``buoyancy = (rho_l - rho_g) G``, ``heights[a]`` the faces' heights,
    broadcastable). None when there is neither, as in
    :func:`.momentum.interface_coefficients`."""
    if sigma <= 0 and buoyancy == 0:
        return None
    out = []
    for a, height in enumerate(heights):
        c = sigma * face_mean(kappa, a) if sigma > 0 else None
        if buoyancy != 0:
            g = buoyancy * (height - y0)
            c = -g if c is None else c - g
        out.append(c)
    return tuple(out)


def provisional_velocity(velocity, H, mu, rho_faces, coefficients, dt, spacing, signs, gravity,
                         vertical_extra=None):
    """``u*`` (explicit in time) on the interior faces, the wall faces kept:
    ``u_a + dt (-adv_a + (div(2 mu D)_a - c_a dH/dx_a) / rho_a)``, less ``dt
    gravity`` on the last (vertical) axis, plus ``dt vertical_extra /
    rho_a`` there (reduced gravity's :func:`density_mismatch` term).
    ``coefficients`` from :func:`interface_coefficients` (None: no
    interface force)."""
    nd = H.ndim
    adv = advection_terms(velocity, rho_faces, mu, spacing, signs)
    visc = viscous_forces(velocity, mu, spacing, signs)
    out = []
    for a, (ua, h) in enumerate(zip(velocity, spacing)):
        k = array_axis(nd, a)
        force = visc[a]
        if coefficients is not None:
            force = force - coefficients[a] * (H[_hi(nd, k)] - H[_lo(nd, k)]) / h
        vertical = a == nd - 1
        if vertical and vertical_extra is not None:
            force = force + vertical_extra
        new = ua.copy()
        inner = new[along(nd, k, slice(1, -1))]
        if vertical and gravity:
            inner[...] = inner + dt * (-adv[a] + force / rho_faces[a] - gravity)
        else:
            inner[...] = inner + dt * (-adv[a] + force / rho_faces[a])
        out.append(new)
    return tuple(out)


def cross_viscous_forces(velocity, mu, spacing):
    """The cross-derivative part of :func:`viscous_forces` on the interior
    faces of every component ``a``: ``sum_b d/dx_b (mu_e du_b/dx_a)`` over
    ``b != a``, what the implicit step keeps explicit (the rest,
    :class:`.viscosity_nd.ViscousSystemND`'s operator, is the component's
    own).  Only interior edges of the (a, b) plane are read: no ghosts."""
    xp = array_module(mu)
    nd = mu.ndim
    out = []
    for a, ha in enumerate(spacing):
        ka = array_axis(nd, a)
        total = None
        for b, (vb, hb) in enumerate(zip(velocity, spacing)):
            if b == a:
                continue
            kb = array_axis(nd, b)
            shear = _interior(edge_viscosity(mu, ka, kb, xp), ka) * (
                vb[_hi(nd, ka)] - vb[_lo(nd, ka)]) / ha
            term = (shear[_hi(nd, kb)] - shear[_lo(nd, kb)]) / hb
            total = term if total is None else total + term
        out.append(total)
    return tuple(out)


def implicit_rhs(velocity, mu, rho_faces, adv, dt, spacing):
    """Right-hand sides of the implicit viscous solves on the interior faces
    of every component: ``rho_a (u_a - dt adv_a) + dt cross_a``
    (:func:`cross_viscous_forces` of the old velocity; the 2-D
    :func:`.momentum.implicit_rhs_u`).  The interface forces and gravity
    join after the solve (:func:`implicit_velocity`)."""
    nd = mu.ndim
    cross = cross_viscous_forces(velocity, mu, spacing)
    return tuple(rho_faces[a] * (_interior(ua, array_axis(nd, a)) - dt * adv[a]) + dt * cross[a]
                 for a, ua in enumerate(velocity))


def implicit_velocity(solutions, velocity, H, rho_faces, coefficients, dt, spacing, gravity,
                      vertical_extra=None):
    """The implicit path's ``u*`` from the viscous solves' ``solutions`` (the
    interior faces of every component, any shape of their size): ``x_a + dt
    f_a / rho_a``, ``f_a`` the forces of :func:`provisional_velocity` less the
    viscous stress, less ``dt gravity`` on the vertical axis; the wall faces
    kept.  The forces join after the solve so that the projection sees the
    very face gradients of ``H`` it balances (:func:`.momentum.implicit_velocity_u`)."""
    nd = H.ndim
    out = []
    for a, (x, ua, h) in enumerate(zip(solutions, velocity, spacing)):
        k = array_axis(nd, a)
        new = ua.copy()
        inner = new[along(nd, k, slice(1, -1))]
        inner[...] = x.reshape(inner.shape)
        vertical = a == nd - 1
        force = None
        if coefficients is not None:
            force = -coefficients[a] * (H[_hi(nd, k)] - H[_lo(nd, k)]) / h
        if vertical and vertical_extra is not None:
            force = vertical_extra if force is None else force + vertical_extra
        if force is not None:
            inner += dt * (force / rho_faces[a])
        if vertical and gravity:
            inner -= dt * gravity
        out.append(new)
    return tuple(out)


def density_mismatch(rho, rho_vertical, gravity):
    """``G (rho_hat - rho_f)`` on the interior vertical faces, ``rho_hat``
    the mean of the two cells' densities: with it the reduced-gravity force
    is, face by face, the volumetric one rewritten, whatever the face-density
    rule (:func:`.momentum._density_mismatch` says why it matters)."""
    return gravity * (face_mean(rho, rho.ndim - 1) - rho_vertical)


def divergence(velocity, spacing):
    """``div u`` at the cells."""
    nd = velocity[0].ndim
    total = None
    for a, (f, h) in enumerate(zip(velocity, spacing)):
        k = array_axis(nd, a)
        d = (f[_hi(nd, k)] - f[_lo(nd, k)]) / h
        total = d if total is None else total + d
    return total


def correct_velocity(velocity, p, rho_faces, dt, spacing):
    """The projection ``u_a - dt / rho_a dp/dx_a`` on the interior faces
    (new arrays; the wall faces kept)."""
    nd = p.ndim
    out = []
    for a, (f, h) in enumerate(zip(velocity, spacing)):
        k = array_axis(nd, a)
        new = f.copy()
        new[along(nd, k, slice(1, -1))] -= dt / rho_faces[a] * (p[_hi(nd, k)] - p[_lo(nd, k)]) / h
        out.append(new)
    return tuple(out)
