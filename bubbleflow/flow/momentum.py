"""The explicit parts of a flow step, as pure functions on arrays (twins).

:class:`~bubbleflow.flow.navier_stokes.FlowSolver` calls these for
everything of a step but the pressure solve, the implicit viscous solves and
the level set: the fluid properties, the finite check and the time step's
maxima, the advection terms, the interface coefficients, the provisional
velocity (explicit viscosity) or the implicit path's right-hand sides and
its last touch, the divergence, the projection's correction with the two
divergence norms, and the diagnostics' transfer.  Arguments are arrays and
Python scalars only.

Grid layout (as in :mod:`bubbleflow.flow.navier_stokes`): ``phi, p, H, rho,
mu`` at cell centres ``(ny, nx)``; ``u`` on the vertical faces ``(ny,
nx+1)``, ``v`` on the horizontal faces ``(ny+1, nx)``; ``rho_x`` and
anything on the interior u faces ``(ny, nx-1)``, ``rho_y`` and anything on
the interior v faces ``(ny-1, nx)``.  Tangential wall conditions enter
through one ghost layer mirrored with the sign ``s`` (-1 no-slip, +1
free-slip).

Every function here is a twin (:mod:`bubbleflow.compute.twins`): this array
code is the reference, its formulas and their order of operations fixing
the bits of a NumPy run (so a refactor can be checked bit for bit); on
CuPy the CUDA variants of :mod:`bubbleflow.flow.momentum_cuda` run, one or
two kernels per call.
"""
from __future__ import annotations

from . import levelset_ops, momentum_cuda
from ..compute.backend import array_module, backend_of
from ..compute.twins import twin
from ..mesh.levelset import heaviside
from .viscosity import corner_viscosity

__all__ = ["fluid_properties", "step_scalars", "advection_terms", "interface_coefficients",
           "explicit_velocity_u", "explicit_velocity_v", "implicit_rhs_u", "implicit_rhs_v",
           "implicit_velocity_u", "implicit_velocity_v", "divergence", "pressure_rhs", "norms", "correct_velocity",
           "diagnostics_and_norms", "FACE_RULES"]

#: The face-density rules of ``operator.face_density`` (the kernels take the index).
FACE_RULES = ("levelset", "harmonic", "arithmetic")


# ------------------------------------------------------------------ properties

@twin
def fluid_properties(phi, eps, rho_l, rho_g, mu_l, mu_g, rule):
    """Cell Heaviside, density and viscosity, and the interior face densities.

    ``H = H_eps(phi)`` (:func:`bubbleflow.mesh.levelset.heaviside`), ``rho``
    and ``mu`` linear in ``H``; on the faces by ``rule``: ``"levelset"`` the
    density of the Heaviside of the mean ``phi``, ``"harmonic"`` the
    harmonic mean of the two cells, anything else the arithmetic mean.
    Returns ``(H, rho, mu, rho_x, rho_y)``.
    """
    xp = array_module(phi)
    H = heaviside(phi, eps, xp)
    rho = rho_g + (rho_l - rho_g) * H
    mu = mu_g + (mu_l - mu_g) * H
    if rule == "levelset":
        Hx = heaviside(0.5 * (phi[:, 1:] + phi[:, :-1]), eps, xp)
        Hy = heaviside(0.5 * (phi[1:, :] + phi[:-1, :]), eps, xp)
        rho_x = rho_g + (rho_l - rho_g) * Hx
        rho_y = rho_g + (rho_l - rho_g) * Hy
    elif rule == "harmonic":
        rho_x = 2 * rho[:, 1:] * rho[:, :-1] / (rho[:, 1:] + rho[:, :-1])
        rho_y = 2 * rho[1:, :] * rho[:-1, :] / (rho[1:, :] + rho[:-1, :])
    else:
        rho_x = 0.5 * (rho[:, 1:] + rho[:, :-1])
        rho_y = 0.5 * (rho[1:, :] + rho[:-1, :])
    return H, rho, mu, rho_x, rho_y


@twin
def step_scalars(u, v, phi, rho, mu, maxima, viscous):
    """What the host needs before the momentum: one array of four, so that a
    single transfer brings it.

    ``[finite, max |u|, max |v|, max mu/rho]``: ``finite`` is 1.0 when ``u``,
    ``v`` and ``phi`` are all finite, else 0.0; the speeds only with
    ``maxima`` and the kinematic viscosity only with ``viscous`` (else 0.0).
    """
    xp = array_module(u, v, phi)
    finite = xp.isfinite(u).all() & xp.isfinite(v).all() & xp.isfinite(phi).all()
    zero = xp.zeros((), dtype=u.dtype)
    out = [finite.astype(u.dtype),
           xp.abs(u).max() if maxima else zero, xp.abs(v).max() if maxima else zero,
           (mu / rho).max() if viscous else zero]
    return xp.stack(out)


# ------------------------------------------------------------------- momentum

def _ghosts(u, v, s_left, s_right, s_bottom, s_top):
    """u with ghost rows (ny+2, nx+1), v with ghost columns (ny+1, nx+2)."""
    return _ghost_rows(u, s_bottom, s_top), _ghost_columns(v, s_left, s_right)


def _ghost_rows(u, s_bottom, s_top):
    return array_module(u).concatenate([s_bottom * u[:1], u, s_top * u[-1:]], axis=0)


def _ghost_columns(v, s_left, s_right):
    return array_module(v).concatenate([s_left * v[:, :1], v, s_right * v[:, -1:]], axis=1)


def _hybrid(minus, centre, plus, velocity, h, rho, mu):
    """d/dx of a face velocity: central, or upwind where rho |c| h / mu > 2."""
    xp = array_module(minus, centre, plus)
    central = (plus - minus) / (2 * h)
    upwind = xp.where(velocity > 0, centre - minus, plus - centre) / h
    return xp.where(rho * xp.abs(velocity) * h <= 2.0 * mu, central, upwind)


@twin
def advection_terms(u, v, rho_x, rho_y, mu, hx, hy, s_left, s_right, s_bottom, s_top):
    """``(u.grad) u`` on the interior u and v faces: ``(adv_u, adv_v)``.

    Hybrid scheme (Spalding): central differences where the cell Reynolds
    number ``rho |u| h / mu`` is at most 2 (second order, and stable there:
    the viscous benchmark flows are central everywhere), first-order upwind
    where it is larger (water and air at the grid scale), which keeps the
    explicit step stable.
    """
    ug, vg = _ghosts(u, v, s_left, s_right, s_bottom, s_top)
    ui = u[:, 1:-1]
    v_at_u = 0.25 * (v[:-1, :-1] + v[:-1, 1:] + v[1:, :-1] + v[1:, 1:])
    mu_x = 0.5 * (mu[:, 1:] + mu[:, :-1])
    dudx = _hybrid(u[:, :-2], ui, u[:, 2:], ui, hx, rho_x, mu_x)
    dudy = _hybrid(ug[:-2, 1:-1], ui, ug[2:, 1:-1], v_at_u, hy, rho_x, mu_x)
    adv_u = ui * dudx + v_at_u * dudy
    vi = v[1:-1, :]
    u_at_v = 0.25 * (u[:-1, :-1] + u[:-1, 1:] + u[1:, :-1] + u[1:, 1:])
    mu_y = 0.5 * (mu[1:, :] + mu[:-1, :])
    dvdy = _hybrid(v[:-2, :], vi, v[2:, :], vi, hy, rho_y, mu_y)
    dvdx = _hybrid(vg[1:-1, :-2], vi, vg[1:-1, 2:], u_at_v, hx, rho_y, mu_y)
    adv_v = u_at_v * dvdx + vi * dvdy
    return adv_u, adv_v


@twin
def interface_coefficients(phi, yc, yf, hx, hy, sigma, buoyancy, y0):
    """The coefficients ``(cx, cy)`` of ``grad H`` in the interface force on
    the interior u and v faces: the force is ``-c grad H`` with the discrete
    gradient of ``H`` the pressure correction uses (balanced force).

    ``c = sigma kappa_f`` (``kappa`` from :func:`levelset_ops.curvature`,
    the mean of the two cells) when ``sigma > 0``, less ``buoyancy (y - y0)``
    (reduced gravity: ``buoyancy = (rho_l - rho_g) G``, the potential per
    unit density jump; ``yc`` the cell rows' heights ``(ny, 1)``, ``yf`` the
    interior horizontal faces' ``(ny-1, 1)``) when ``buoyancy != 0``.
    Without either, zeros.
    """
    xp = array_module(phi)
    ny, nx = phi.shape
    cx = cy = None
    if sigma > 0:
        kappa = levelset_ops.curvature(phi, hx, hy)
        cx = sigma * (0.5 * (kappa[:, 1:] + kappa[:, :-1]))
        cy = sigma * (0.5 * (kappa[1:, :] + kappa[:-1, :]))
    if buoyancy != 0:
        gx = buoyancy * (yc - y0)
        gy = buoyancy * (yf - y0)
        cx = xp.broadcast_to(-gx, (ny, nx - 1)) if cx is None else cx - gx
        cy = xp.broadcast_to(-gy, (ny - 1, nx)) if cy is None else cy - gy
    if cx is None:
        return xp.zeros((ny, nx - 1), dtype=phi.dtype), xp.zeros((ny - 1, nx), dtype=phi.dtype)
    return cx, cy


def _shear(mu, ug, vg, hx, hy):
    """The shear stress ``mu_n (du/dy + dv/dx)`` at the cell corners."""
    mu_n = corner_viscosity(mu, array_module(mu))
    return mu_n * ((ug[1:, :] - ug[:-1, :]) / hy + (vg[:, 1:] - vg[:, :-1]) / hx)


@twin
def explicit_velocity_u(u, v, mu, H, rho_x, adv_u, cx, dt, hx, hy, s_bottom, s_top, forces):
    """``u*`` (explicit viscosity), the whole ``(ny, nx+1)`` field (the wall
    faces keep ``u``'s): ``u + dt (-adv_u + f_u / rho_x)`` with ``f_u`` the
    divergence of the viscous stress (normal stress at cell centres, shear at
    the corners) and, with ``forces``, the interface force ``-cx dH/dx``."""
    ug = _ghost_rows(u, s_bottom, s_top)
    vg = _ghost_columns(v, 1.0, 1.0)                  # (interior corners only: no ghost read)
    txx = 2 * mu * (u[:, 1:] - u[:, :-1]) / hx
    txy = _shear(mu, ug, vg, hx, hy)
    force = (txx[:, 1:] - txx[:, :-1]) / hx + (txy[1:, 1:-1] - txy[:-1, 1:-1]) / hy
    if forces:
        force = force - cx * (H[:, 1:] - H[:, :-1]) / hx
    us = u.copy()
    us[:, 1:-1] = u[:, 1:-1] + dt * (-adv_u + force / rho_x)
    return us


def _density_mismatch(H, rho_y, rho_g, rho_l):
    """``rho_hat - rho_y`` on the interior v faces, ``rho_hat`` the mean of
    the two cells' densities (formed as :func:`fluid_properties` forms them).

    Reduced gravity adds ``G (rho_hat - rho_y)`` to the v faces' force: with
    it, ``-grad p_d + (rho_l - rho_g) G (y_f - y0) grad H + G (rho_hat -
    rho_y)`` is, face by face, exactly ``-grad p - rho_y G`` for ``p = p_d -
    rho G (y - y0)`` (cell density, cell height): the reduced form is the
    volumetric one rewritten, whatever the face-density rule.  Without it a
    ``levelset`` or ``harmonic`` face density leaves a body force ``G (rho_hat
    - rho_y)`` in the interface band, which at a gas face (``rho_y`` ~
    ``rho_g``) accelerates the gas by ``G (rho_l - rho_g) / rho_g``: at
    contrast 1e5 the flow ran away."""
    rho = rho_g + (rho_l - rho_g) * H
    return 0.5 * (rho[1:, :] + rho[:-1, :]) - rho_y


@twin
def explicit_velocity_v(u, v, mu, H, rho_y, adv_v, cy, dt, hx, hy, s_left, s_right, gravity,
                        forces, reduced=0.0, rho_g=0.0, rho_l=0.0):
    """``v*`` (explicit viscosity), the whole ``(ny+1, nx)`` field:
    ``v + dt (-adv_v + f_v / rho_y - gravity)`` (``gravity`` 0 for reduced
    gravity), ``f_v`` as for :func:`explicit_velocity_u` with ``-cy dH/dy``,
    and with reduced gravity (``reduced = G``) ``+ G (rho_hat - rho_y)``
    (:func:`_density_mismatch`)."""
    ug = _ghost_rows(u, 1.0, 1.0)                     # (interior corners only: no ghost read)
    vg = _ghost_columns(v, s_left, s_right)
    tyy = 2 * mu * (v[1:, :] - v[:-1, :]) / hy
    txy = _shear(mu, ug, vg, hx, hy)
    force = (txy[1:-1, 1:] - txy[1:-1, :-1]) / hx + (tyy[1:, :] - tyy[:-1, :]) / hy
    if forces:
        force = force - cy * (H[1:, :] - H[:-1, :]) / hy
    if reduced:
        force = force + reduced * _density_mismatch(H, rho_y, rho_g, rho_l)
    vs = v.copy()
    if gravity:
        vs[1:-1, :] = v[1:-1, :] + dt * (-adv_v + force / rho_y - gravity)
    else:
        vs[1:-1, :] = v[1:-1, :] + dt * (-adv_v + force / rho_y)
    return vs


@twin
def implicit_rhs_u(u, v, mu, rho_x, adv_u, dt, hx, hy):
    """Right-hand side of the implicit viscous solve for ``u`` on the interior
    u faces: ``rho_x (u - dt adv_u) + dt d/dy(mu dv/dx)``, the
    cross-derivative shear term from the old ``v``.  The interface forces
    and gravity join after the solve (:func:`implicit_velocity_u`)."""
    mu_n = corner_viscosity(mu, array_module(mu))
    sx = mu_n[:, 1:-1] * (v[:, 1:] - v[:, :-1]) / hx     # mu dv/dx at the interior corner columns
    cross = (sx[1:, :] - sx[:-1, :]) / hy
    return rho_x * (u[:, 1:-1] - dt * adv_u) + dt * cross


@twin
def implicit_rhs_v(u, v, mu, rho_y, adv_v, dt, hx, hy):
    """Right-hand side of the implicit viscous solve for ``v`` on the interior
    v faces: ``rho_y (v - dt adv_v) + dt d/dx(mu du/dy)``, the cross term
    from the old ``u``."""
    mu_n = corner_viscosity(mu, array_module(mu))
    sy = mu_n[1:-1, :] * (u[1:, :] - u[:-1, :]) / hy     # mu du/dy at the interior corner rows
    cross = (sy[:, 1:] - sy[:, :-1]) / hx
    return rho_y * (v[1:-1, :] - dt * adv_v) + dt * cross


@twin
def implicit_velocity_u(x, w, H, cx, rho_x, dt, hx, forces):
    """The implicit path's ``u*`` from the viscous solve's solution ``x`` (the
    interior faces, any shape of their size): ``x + dt f_u / rho_x`` with the
    interface force ``f_u = -cx dH/dx`` when ``forces``; the wall faces keep
    ``w``'s.  The forces join after the viscous solve, not in it: so they
    reach the projection as the very discrete gradients of ``H`` the
    pressure balances (balanced force); smoothed by the solve they would
    not, and at high density contrast the gas would run away."""
    out = w.copy()
    inner = out[:, 1:-1]
    inner[...] = x.reshape(inner.shape)
    if forces:
        force = -cx * (H[:, 1:] - H[:, :-1]) / hx
        inner += dt * (force / rho_x)
    return out


@twin
def implicit_velocity_v(x, w, H, cy, rho_y, dt, hy, forces, gravity, reduced=0.0, rho_g=0.0,
                        rho_l=0.0):
    """The implicit path's ``v*``: ``x + dt (f_v / rho_y - gravity)``, ``f_v``
    as in :func:`explicit_velocity_v` without the viscous stress (``-cy
    dH/dy`` when ``forces``; ``+ G (rho_hat - rho_y)`` with reduced gravity,
    ``reduced = G``); ``gravity`` 0 for reduced gravity."""
    out = w.copy()
    inner = out[1:-1, :]
    inner[...] = x.reshape(inner.shape)
    if forces or reduced:
        force = -cy * (H[1:, :] - H[:-1, :]) / hy if forces else 0.0
        if reduced:
            force = force + reduced * _density_mismatch(H, rho_y, rho_g, rho_l)
        inner += dt * (force / rho_y)
    if gravity:
        inner -= dt * gravity
    return out


# ------------------------------------------------------------------ projection

@twin
def divergence(u, v, hx, hy):
    """``div u`` at the cell centres."""
    return (u[:, 1:] - u[:, :-1]) / hx + (v[1:, :] - v[:-1, :]) / hy


@twin
def pressure_rhs(u, v, hx, hy, dt):
    """``(div u*, -div u* / dt)``: the divergence and the pressure equation's
    right-hand side."""
    div = divergence.reference(u, v, hx, hy)
    return div, -div / dt


@twin
def norms(a, b):
    """``[||a||, ||b||]`` (2-norms, one array: one transfer for both)."""
    xp = array_module(a, b)
    # (sum of squares, not linalg.norm: a threaded BLAS call per step is slow on a busy CPU)
    return xp.sqrt(xp.stack([(a * a).sum(), (b * b).sum()]))


@twin
def correct_velocity(us, vs, p, rho_x, rho_y, div_star, dt, hx, hy):
    """The projection's correction ``u = u* - dt/rho grad p`` on the interior
    faces, and ``[||div u*||, ||div u||]`` (one array, left on the device:
    :func:`diagnostics_and_norms` brings it with the diagnostics).
    Returns ``(u, v, norms)``."""
    u = us.copy()
    v = vs.copy()
    u[:, 1:-1] -= dt / rho_x * (p[:, 1:] - p[:, :-1]) / hx
    v[1:-1, :] -= dt / rho_y * (p[1:, :] - p[:-1, :]) / hy
    dv = divergence.reference(u, v, hx, hy)
    return u, v, norms.reference(div_star, dv)


@twin
def diagnostics_and_norms(phi, u, v, hx, hy, eps, norms):
    """The step's last transfer: the benchmark diagnostics
    (:func:`levelset_ops.bubble_diagnostics`, a dict of floats) and the
    device array ``norms`` as host floats.  Returns ``(dict, tuple)``."""
    d = levelset_ops.bubble_diagnostics(phi, u, v, hx, hy, eps)
    host = backend_of(norms).to_host(norms)
    return {k: float(val) for k, val in d.items()}, tuple(float(n) for n in host)


# The CUDA variants (momentum_cuda.py, kernels in momentum.cu): one or two
# launches per call on CuPy; NotImplemented (the array code runs) for what
# they do not cover.
fluid_properties.register("cupy")(momentum_cuda.fluid_properties)
step_scalars.register("cupy")(momentum_cuda.step_scalars)
advection_terms.register("cupy")(momentum_cuda.advection_terms)
interface_coefficients.register("cupy")(momentum_cuda.interface_coefficients)
explicit_velocity_u.register("cupy")(momentum_cuda.explicit_velocity_u)
explicit_velocity_v.register("cupy")(momentum_cuda.explicit_velocity_v)
implicit_rhs_u.register("cupy")(momentum_cuda.implicit_rhs_u)
implicit_rhs_v.register("cupy")(momentum_cuda.implicit_rhs_v)
implicit_velocity_u.register("cupy")(momentum_cuda.implicit_velocity_u)
implicit_velocity_v.register("cupy")(momentum_cuda.implicit_velocity_v)
divergence.register("cupy")(momentum_cuda.divergence)
pressure_rhs.register("cupy")(momentum_cuda.pressure_rhs)
norms.register("cupy")(momentum_cuda.norms)
correct_velocity.register("cupy")(momentum_cuda.correct_velocity)
diagnostics_and_norms.register("cupy")(momentum_cuda.diagnostics_and_norms)
