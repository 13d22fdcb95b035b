"""The momentum phase of a flow step on a MAC grid of any dimension (twins).

Everything of a step but the pressure solve, the implicit viscous solves
and the interface's motion: the fluid properties from the smoothed
Heaviside, the finite check and the time step's maxima, the hybrid
(central / upwind) advection of each face velocity, the variable-viscosity
stress ``div(2 mu D)`` in divergence form (normal stresses at the cells,
shear stresses on the cell edges), the balanced-force interface
coefficients (surface tension, reduced gravity), the provisional velocity
(explicit viscosity) or the implicit path's right-hand sides and last
touch, and the projection's divergence and correction with the two
divergence norms.  Arguments are arrays and Python scalars only.

Layout: ``velocity`` is the tuple of face components in grid-axis order
(``u, v[, w]``); component ``a`` has the grid's array shape with one more
entry along its array axis (wall faces included, where it is zero).
Anything "on the interior faces of ``a``" has one entry fewer than the
cells along that axis.  ``signs[a] = (low, high)`` are the ghost signs of
the tangential velocity at the two walls normal to grid axis ``a``: -1
no-slip, +1 free-slip.  Vertical is the last grid axis: gravity acts along
it.  On a rank's slab the functions take the slab widened by the
neighbours' planes (what a stencil near the slab's end reads).

The public functions that a flow step calls are twins
(:mod:`bubbleflow.compute.twins`): this array code is the reference, its
order of operations fixing the bits of a NumPy run (2-D, 3-D and on
slabs); on CuPy the CUDA kernels of :mod:`.momentum_cuda` (2-D) and
:mod:`.momentum3_cuda` (3-D) run where they apply, one or two a call (or
one a component).
"""
from __future__ import annotations

from typing import NamedTuple

from ..compute.backend import array_module
from ..compute.truth import all_finite
from ..compute.twins import twin
from ..mesh.grid import array_axis
from ..mesh.levelset import heaviside
from . import momentum_cuda
from .levelset import curvature
from .padding import along
from .viscosity import edge_viscosity

__all__ = ["fluid_properties", "step_scalars", "advection_terms", "interface_coefficients",
           "provisional_velocity", "implicit_rhs", "implicit_velocity", "divergence",
           "pressure_rhs", "norms", "correct_velocity", "viscous_forces",
           "cross_viscous_forces", "density_mismatch", "ReducedGravity", "reduced_origin",
           "face_mean"]


def _lo(nd, k):
    return along(nd, k, slice(None, -1))


def _hi(nd, k):
    return along(nd, k, slice(1, None))


def _interior(f, k):
    return f[along(f.ndim, k, slice(1, -1))]


def face_mean(cells, a):
    """The mean of the two cells of every interior face normal to grid axis ``a``."""
    nd = cells.ndim
    k = array_axis(nd, a)
    return 0.5 * (cells[_hi(nd, k)] + cells[_lo(nd, k)])


def _mean_of_four(f, inner, outer):
    """The mean of ``f`` over the four neighbours in the plane of array axes
    ``inner`` and ``outer``: ``0.25 (f[- -] + f[+ -] + f[- +] + f[+ +])``,
    ``inner`` the first sign, summed left to right."""
    nd = f.ndim
    lo, hi = f[_lo(nd, outer)], f[_hi(nd, outer)]
    return 0.25 * (lo[_lo(nd, inner)] + lo[_hi(nd, inner)] + hi[_lo(nd, inner)]
                   + hi[_hi(nd, inner)])


# ------------------------------------------------------------------ properties

@twin
def fluid_properties(phi, eps, rho_l, rho_g, mu_l, mu_g, rule, viscosity_mean="arithmetic"):
    """Cell Heaviside, density and viscosity, and the interior face densities.

    ``H = H_eps(phi)`` (:func:`bubbleflow.mesh.levelset.heaviside`), ``rho``
    linear in ``H``, ``mu`` too (``viscosity_mean="arithmetic"``) or its
    inverse (``"harmonic"``); on the faces by ``rule``: ``"levelset"`` the
    density of the Heaviside of the faces' mean ``phi``, ``"harmonic"`` the
    harmonic mean of the two cells, anything else the arithmetic mean.

    Returns
    -------
    tuple
        ``(H, rho, mu, rho_faces)``, ``rho_faces[a]`` on the interior faces
        of grid axis ``a``.
    """
    xp = array_module(phi)
    nd = phi.ndim
    H = heaviside(phi, eps, xp)
    rho = rho_g + (rho_l - rho_g) * H
    mu = (mu_g + (mu_l - mu_g) * H if viscosity_mean == "arithmetic"
          else 1.0 / ((1.0 - H) / mu_g + H / mu_l))
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


@twin
def step_scalars(velocity, phi, rho, mu, maxima, viscous):
    """What the host needs before the momentum, in one array (one transfer).

    ``[finite, max |u_0|, ..., max |u_{nd-1}|, max mu/rho]``: ``finite`` is
    1.0 when every component and ``phi`` are finite, else 0.0; the speeds
    only with ``maxima`` and the kinematic viscosity only with ``viscous``
    (else 0.0).
    """
    xp = array_module(phi, *velocity)
    dtype = velocity[0].dtype
    finite = all_finite(velocity[0])
    for f in velocity[1:]:
        finite = finite & all_finite(f)
    finite = finite & all_finite(phi)
    zero = xp.zeros((), dtype=dtype)
    speeds = [xp.abs(f).max() if maxima else zero for f in velocity]
    return xp.stack([finite.astype(dtype), *speeds, (mu / rho).max() if viscous else zero])


# ------------------------------------------------------------------ advection

def _ghosted(f, k, signs):
    """``f`` with one ghost layer at both ends of array axis ``k``: the
    mirror of the first/last layer times the wall's sign."""
    nd = f.ndim
    low, high = signs
    return array_module(f).concatenate([low * f[along(nd, k, slice(0, 1))], f,
                                        high * f[along(nd, k, slice(-1, None))]], axis=k)


def _transverse(vb, ka, kb):
    """Component ``b`` (array axis ``kb``) at the interior faces of component
    ``a`` (array axis ``ka``): the mean of the four ``b`` faces around."""
    # The order of the four terms fixes the bits: in 2-D row by row (the
    # 2-D CUDA kernels' order, so both backends give the 2-D runs' bits),
    # in 3-D along a's axis first (the 3-D runs' bits).
    inner, outer = (1, 0) if vb.ndim == 2 else (ka, kb)
    return _mean_of_four(vb, inner, outer)


def _hybrid(minus, centre, plus, speed, h, rho, mu):
    """d/dx of a face velocity: central, or upwind where ``rho |c| h / mu > 2``.
    Multiplied by ``1 / h`` (and ``0.5 / h``, exactly ``1 / (2 h)``) rather
    than divided, here and in the viscous and interface forces: the kernels
    then give these bits without a float64 division a face."""
    xp = array_module(minus, centre, plus)
    inv_h = 1.0 / h
    central = (plus - minus) * (0.5 * inv_h)
    upwind = xp.where(speed > 0, centre - minus, plus - centre) * inv_h
    return xp.where(rho * xp.abs(speed) * h <= 2.0 * mu, central, upwind)


@twin
def advection_terms(velocity, rho_faces, mu, spacing, signs):
    """``(u . grad) u_a`` on the interior faces of every component ``a``.

    Hybrid scheme (Spalding): central differences where the cell Reynolds
    number ``rho |u| h / mu`` is at most 2 (second order, and stable there:
    the viscous benchmark flows are central everywhere), first-order upwind
    where it is larger (water and air at the grid scale), which keeps the
    explicit step stable.

    Returns
    -------
    tuple
        One array a component, on its interior faces.
    """
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


# ------------------------------------------------------------ viscous stresses

def viscous_forces(velocity, mu, spacing, signs):
    """``div(2 mu D)_a`` on the interior faces of every component: the
    normal stress ``2 mu du_a/dx_a`` at the cells, the shear stresses
    ``mu_e (du_a/dx_b + du_b/dx_a)`` on the edges (walls through the ghost
    signs), differenced back to the faces."""
    xp = array_module(mu)
    nd = mu.ndim
    forces = []
    inverse = [1.0 / h for h in spacing]          # (multiplied: see _hybrid)
    for a, ua in enumerate(velocity):
        ka, inv_a = array_axis(nd, a), inverse[a]
        normal = 2 * mu * (ua[_hi(nd, ka)] - ua[_lo(nd, ka)]) * inv_a
        force = (normal[_hi(nd, ka)] - normal[_lo(nd, ka)]) * inv_a
        for b, vb in enumerate(velocity):
            if b == a:
                continue
            kb, inv_b = array_axis(nd, b), inverse[b]
            ug, vg = _ghosted(ua, kb, signs[b]), _ghosted(vb, ka, signs[a])
            shear = edge_viscosity(mu, ka, kb, xp) * (
                (ug[_hi(nd, kb)] - ug[_lo(nd, kb)]) * inv_b
                + (vg[_hi(nd, ka)] - vg[_lo(nd, ka)]) * inv_a)
            shear = _interior(shear, ka)
            force = force + (shear[_hi(nd, kb)] - shear[_lo(nd, kb)]) * inv_b
        forces.append(force)
    return tuple(forces)


def cross_viscous_forces(velocity, mu, spacing):
    """The cross-derivative part of :func:`viscous_forces` on the interior
    faces of every component ``a``: ``sum_b d/dx_b (mu_e du_b/dx_a)`` over
    ``b != a``, what the implicit step keeps explicit (the rest,
    :class:`.viscosity.ViscousSystem`'s operator, is the component's
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


# ------------------------------------------------------------------- forces

@twin
def interface_coefficients(phi_kappa, spacing, sigma, heights, buoyancy, y0):
    """The coefficients ``c_a`` of ``grad H`` in the interface force ``-c_a
    dH/dx_a`` on the interior faces of every axis: the very face gradient
    of ``H`` the pressure correction uses (balanced force).

    ``c = sigma kappa_f`` with surface tension (``sigma > 0``; ``kappa`` the
    curvature of ``phi_kappa``, :func:`.levelset.curvature`, ``kappa_f``
    the mean of the two cells'), less ``buoyancy (y_f - y0)`` with reduced
    gravity (``buoyancy = (rho_l - rho_g) G`` the potential per unit
    density jump, ``heights[a]`` the height of the faces of axis ``a``,
    broadcastable to them).

    Parameters
    ----------
    phi_kappa : array
        The level set whose curvature the surface tension takes (filtered
        first where it was rebuilt from PLIC planes).
    spacing : tuple of float
    sigma, buoyancy, y0 : float
    heights : tuple of arrays
        Not read without reduced gravity.

    Returns
    -------
    tuple or None
        One array a grid axis, shaped as its interior faces; None when
        neither force acts.
    """
    if sigma <= 0 and buoyancy == 0:
        return None
    xp = array_module(phi_kappa)
    nd = phi_kappa.ndim
    kappa = curvature(phi_kappa, spacing) if sigma > 0 else None
    out = []
    for a in range(nd):
        c = sigma * face_mean(kappa, a) if sigma > 0 else None
        if buoyancy != 0:
            g = buoyancy * (heights[a] - y0)
            shape = list(phi_kappa.shape)
            shape[array_axis(nd, a)] -= 1
            c = xp.broadcast_to(-g, tuple(shape)) if c is None else c - g
        out.append(c)
    return tuple(out)


def reduced_origin(free_surface):
    """Reduced gravity's reference height ``y0`` (``p_d = p - rho g.(x -
    x0)``): on the free surface when there is one (a flat surface at rest
    then carries no force and ``p_d ~ 0`` in the liquid), else the bottom."""
    return float(free_surface) if free_surface is not None else 0.0


class ReducedGravity(NamedTuple):
    """What reduced gravity's consistency term (:func:`density_mismatch`)
    needs: the gravity ``G`` and the two densities, as
    :func:`fluid_properties` had them.  The term is formed where it is
    added (from ``H``), so that the CUDA kernels, which take these scalars,
    and the array code form it alike."""

    gravity: float
    rho_g: float
    rho_l: float


def density_mismatch(H, rho_vertical, reduced):
    """``G (rho_hat - rho_f)`` on the interior vertical faces, ``rho_hat`` the
    mean of the two cells' densities (formed from ``H`` as
    :func:`fluid_properties` forms them, so the very cell densities),
    ``reduced`` a :class:`ReducedGravity`.

    Reduced gravity adds it to the vertical faces' force: with it, ``-grad
    p_d + (rho_l - rho_g) G (y_f - y0) grad H + G (rho_hat - rho_f)`` is,
    face by face, exactly ``-grad p - rho_f G`` for ``p = p_d - rho G (y -
    y0)`` (cell density, cell height): the reduced form is the volumetric
    one rewritten, whatever the face-density rule.  Without it a
    ``levelset`` or ``harmonic`` face density leaves a body force ``G
    (rho_hat - rho_f)`` in the interface band, which at a gas face
    (``rho_f`` ~ ``rho_g``) accelerates the gas by ``G (rho_l - rho_g) /
    rho_g``: at contrast 1e5 the flow ran away."""
    gravity, rho_g, rho_l = reduced
    rho = rho_g + (rho_l - rho_g) * H
    return gravity * (face_mean(rho, H.ndim - 1) - rho_vertical)


def add_interface_force(force, H, coefficients, a, h, rho_faces, reduced):
    """``force`` on the interior faces of axis ``a`` (None: nothing yet)
    plus ``-c_a dH/dx_a`` (with ``coefficients``), then plus
    :func:`density_mismatch` on the vertical axis (with ``reduced``); None
    when nothing was there nor added.  One term after the other: the order
    fixes the bits."""
    nd = H.ndim
    k = array_axis(nd, a)
    if coefficients is not None:
        term = -coefficients[a] * (H[_hi(nd, k)] - H[_lo(nd, k)]) * (1.0 / h)
        force = term if force is None else force + term
    if a == nd - 1 and reduced is not None:
        term = density_mismatch(H, rho_faces[a], reduced)
        force = term if force is None else force + term
    return force


@twin
def provisional_velocity(velocity, H, mu, rho_faces, coefficients, dt, spacing, signs, gravity,
                         reduced=None):
    """``u*`` with the viscous stress explicit, every component whole (the
    wall faces kept): ``u_a + dt (-adv_a + f_a / rho_a)`` on the interior
    faces, less ``dt gravity`` on the vertical axis (0 for reduced gravity).

    ``adv_a`` from :func:`advection_terms`; ``f_a`` the viscous stress
    (:func:`viscous_forces`), the interface force ``-c_a dH/dx_a`` with
    ``coefficients`` (:func:`interface_coefficients`; None: no interface
    force) and, with ``reduced`` (a :class:`ReducedGravity`; None without
    reduced gravity), its :func:`density_mismatch` on the vertical faces.

    Returns
    -------
    tuple
        The components of ``u*``, new arrays.
    """
    nd = H.ndim
    adv = advection_terms.reference(velocity, rho_faces, mu, spacing, signs)
    visc = viscous_forces(velocity, mu, spacing, signs)
    out = []
    for a, (ua, h) in enumerate(zip(velocity, spacing)):
        force = add_interface_force(visc[a], H, coefficients, a, h, rho_faces, reduced)
        new = ua.copy()
        inner = _interior(new, array_axis(nd, a))
        if a == nd - 1 and gravity:
            inner[...] = inner + dt * (-adv[a] + force / rho_faces[a] - gravity)
        else:
            inner[...] = inner + dt * (-adv[a] + force / rho_faces[a])
        out.append(new)
    return tuple(out)


# ------------------------------------------------------------- implicit path

@twin
def implicit_rhs(velocity, mu, rho_faces, adv, dt, spacing):
    """Right-hand sides of the implicit viscous solves on the interior faces
    of every component: ``rho_a (u_a - dt adv_a) + dt cross_a``
    (:func:`cross_viscous_forces` of the old velocity).  The interface
    forces and gravity join after the solve (:func:`implicit_velocity`)."""
    nd = mu.ndim
    cross = cross_viscous_forces(velocity, mu, spacing)
    return tuple(rho_faces[a] * (_interior(ua, array_axis(nd, a)) - dt * adv[a]) + dt * cross[a]
                 for a, ua in enumerate(velocity))


@twin
def implicit_velocity(solutions, velocity, H, rho_faces, coefficients, dt, spacing, gravity,
                      reduced=None):
    """The implicit path's ``u*`` from the viscous solves' ``solutions`` (the
    interior faces of every component, any shape of their size): ``x_a + dt
    f_a / rho_a``, ``f_a`` the forces of :func:`provisional_velocity` less
    the viscous stress, less ``dt gravity`` on the vertical axis; the wall
    faces kept (``velocity``'s).

    The forces join after the solve, not in it: so they reach the
    projection as the very discrete gradients of ``H`` the pressure
    balances (balanced force); smoothed by the solve they would not, and at
    high density contrast the gas would run away."""
    nd = H.ndim
    out = []
    for a, (x, ua, h) in enumerate(zip(solutions, velocity, spacing)):
        new = ua.copy()
        inner = _interior(new, array_axis(nd, a))
        inner[...] = x.reshape(inner.shape)
        force = add_interface_force(None, H, coefficients, a, h, rho_faces, reduced)
        if force is not None:
            inner += dt * (force / rho_faces[a])
        if a == nd - 1 and gravity:
            inner -= dt * gravity
        out.append(new)
    return tuple(out)


# ------------------------------------------------------------------ projection

@twin
def divergence(velocity, spacing):
    """``div u`` at the cells."""
    nd = velocity[0].ndim
    total = None
    for a, (f, h) in enumerate(zip(velocity, spacing)):
        k = array_axis(nd, a)
        d = (f[_hi(nd, k)] - f[_lo(nd, k)]) / h
        total = d if total is None else total + d
    return total


@twin
def pressure_rhs(velocity, spacing, dt):
    """``(div u*, -div u* / dt)``: the divergence and the pressure equation's
    right-hand side."""
    div = divergence.reference(velocity, spacing)
    return div, -div / dt


@twin
def norms(a, b):
    """``[||a||, ||b||]`` (2-norms, one array: one transfer for both)."""
    xp = array_module(a, b)
    # (sum of squares, not linalg.norm: a threaded BLAS call per step is slow on a busy CPU)
    return xp.sqrt(xp.stack([(a * a).sum(), (b * b).sum()]))


@twin
def correct_velocity(velocity, p, rho_faces, div_star, dt, spacing):
    """The projection ``u_a - dt / rho_a dp/dx_a`` on the interior faces (new
    arrays, the wall faces kept) and ``[||div u*||, ||div u||]``.

    Parameters
    ----------
    velocity : tuple of arrays
        ``u*``.
    p : array
    rho_faces : tuple of arrays
    div_star : array or None
        ``div u*``; None (a rank's slab, whose norms are over the ranks):
        no norms.
    dt : float
    spacing : tuple of float

    Returns
    -------
    tuple
        ``(velocity, norms)``: the norms one array (:func:`norms`, left on
        the device), or None without ``div_star``.
    """
    nd = p.ndim
    out = []
    for a, (f, h) in enumerate(zip(velocity, spacing)):
        k = array_axis(nd, a)
        new = f.copy()
        new[along(nd, k, slice(1, -1))] -= dt / rho_faces[a] * (p[_hi(nd, k)] - p[_lo(nd, k)]) / h
        out.append(new)
    out = tuple(out)
    if div_star is None:
        return out, None
    return out, norms.reference(div_star, divergence.reference(out, spacing))


# The CUDA variants (momentum_cuda.py, kernels in momentum.cu; on a 3-D grid
# they call momentum3_cuda.py, kernels in momentum3.cu): one or two launches
# a call, or one a component; NotImplemented (the array code runs) for what
# they do not cover.
fluid_properties.register("cupy")(momentum_cuda.fluid_properties_nd)
step_scalars.register("cupy")(momentum_cuda.step_scalars)
advection_terms.register("cupy")(momentum_cuda.advection_terms_nd)
interface_coefficients.register("cupy")(momentum_cuda.interface_coefficients_nd)
provisional_velocity.register("cupy")(momentum_cuda.provisional_velocity_nd)
implicit_rhs.register("cupy")(momentum_cuda.implicit_rhs_nd)
implicit_velocity.register("cupy")(momentum_cuda.implicit_velocity_nd)
divergence.register("cupy")(momentum_cuda.divergence_nd)
pressure_rhs.register("cupy")(momentum_cuda.pressure_rhs_nd)
norms.register("cupy")(momentum_cuda.norms)
correct_velocity.register("cupy")(momentum_cuda.correct_velocity_nd)
