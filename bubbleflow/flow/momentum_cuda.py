"""CUDA twins of the momentum step's array code on a 2-D grid, and the
variants registered on :mod:`bubbleflow.flow.momentum` (CuPy, float64).

The ``*_nd`` variants at the end, :func:`step_scalars` and :func:`norms` are
the ones registered on the n-D references of :mod:`.momentum`: a 2-D call
they unpack (tuples over the axes) for the 2-D twins here, which take their
arguments one by one; a 3-D call they hand to the twins of
:mod:`.momentum3_cuda` (kernels ``momentum3.cu``).  The 2-D kernels are
``momentum.cu`` beside this file, fetched through :mod:`.momentum_launch`,
which holds what both dimensions share (the launch constants, :func:`norms`
and the reductions' last block, the gravity's and buoyancy's arguments).
The tests compare them on the GPU.  Where the array code launches tens of
small kernels per call, these launch one or two:

* :func:`fluid_properties`, :func:`advection_terms`,
  :func:`explicit_velocity_u` / :func:`explicit_velocity_v`,
  :func:`implicit_rhs_u` / :func:`implicit_rhs_v`, :func:`implicit_velocity_u` / `_v`,
  :func:`divergence`, :func:`pressure_rhs`: one kernel each;
* :func:`interface_coefficients`: the curvature's kernel (when ``sigma > 0``)
  and one;
* :func:`step_scalars`: per-block maxima then one block (two launches; 2-D
  and 3-D);
* :func:`norms`, :func:`correct_velocity`: per-block sums then one block, in
  a fixed order (the same input gives the same bits);

The kernels are compiled without FMA contraction and follow the array code's
order of operations, so the fields have the twin's bits (on the GPU; NumPy's
``sin`` may differ from CUDA's in the last bit, which reaches ``H`` and what
depends on it); the norms are sums in another order.  Calls these kernels do
not cover -- another dtype than float64, fewer than 2 cells along an axis,
mismatched shapes -- return ``NotImplemented`` and the array code runs.
CuPy is imported inside the functions only.
"""
from __future__ import annotations


import numpy as np

from ..compute import cuda
from . import levelset, momentum_launch
from .momentum3_cuda import (advection_terms_3d, correct_velocity_3d, divergence_3d,
                             fluid_properties_3d, implicit_rhs_3d, implicit_velocity_3d,
                             interface_coefficients_3d, provisional_velocity_3d, step_scalars_3d)
from .momentum_launch import (BLOCK, MIN_CELLS, REDUCE_THREADS, RULES, final_norms,
                              launch_step_scalars, norms, reduce_blocks, reduced_scalars,
                              vertical_heights)

__all__ = ["fluid_properties", "step_scalars", "advection_terms", "interface_coefficients",
           "explicit_velocity_u", "explicit_velocity_v", "implicit_rhs_u", "implicit_rhs_v",
           "implicit_velocity_u", "implicit_velocity_v", "divergence", "pressure_rhs", "norms",
           "correct_velocity",
           "fluid_properties_nd", "advection_terms_nd",
           "interface_coefficients_nd", "provisional_velocity_nd", "implicit_rhs_nd",
           "implicit_velocity_nd", "divergence_nd", "pressure_rhs_nd", "correct_velocity_nd"]


_float64 = cuda.float64_2d


def _grid(nx, ny):
    """Launch shape of a kernel over ``nx`` by ``ny`` points."""
    return cuda.grid_2d(nx, ny, BLOCK)


def _shapes(ny, nx, **arrays):
    """Whether every array has its expected shape: ``c`` cells, ``u``/``v``
    all faces, ``fu``/``fv`` interior faces (the key's prefix before ``_``)."""
    expected = {"c": (ny, nx), "u": (ny, nx + 1), "v": (ny + 1, nx), "fu": (ny, nx - 1),
                "fv": (ny - 1, nx)}
    return all(a.shape == expected[k.split("_")[0]] for k, a in arrays.items())


def _cells(phi):
    ny, nx = phi.shape
    return (nx, ny) if min(nx, ny) >= MIN_CELLS else None


def _checked(shapes, arrays):
    """The twins' common check: ``(arrays, nx, ny)`` with the arrays
    contiguous float64 and each of the shape its key in ``shapes`` names
    (:func:`_shapes`; the first ``c`` array sets the grid, at least
    :data:`.momentum_launch.MIN_CELLS` each way), or None (the twin returns
    ``NotImplemented``)."""
    arrays = _float64(*arrays)
    if arrays is None:
        return None
    cells = arrays[[k.split("_")[0] for k in shapes].index("c")]
    if _cells(cells) is None:
        return None
    ny, nx = cells.shape
    if not _shapes(ny, nx, **dict(zip(shapes, arrays))):
        return None
    return arrays, nx, ny


def _face_kernel(name, shapes, arrays, like, extent, scalars):
    """The pattern of the per-face twins: ``arrays`` (keyed by ``shapes``,
    see :func:`_shapes`; the first ``c`` one sets the grid) made contiguous
    float64 and checked, one output shaped like ``arrays[like]``, one launch
    of ``name`` over ``extent(nx, ny)`` points with the arguments ``(*arrays,
    out, nx, ny, *scalars)``.  ``NotImplemented`` where the arrays do not
    fit (the array code runs)."""
    import cupy as cp

    checked = _checked(shapes, arrays)
    if checked is None:
        return NotImplemented
    arrays, nx, ny = checked
    out = cp.empty_like(arrays[like])
    grid, block = _grid(*extent(nx, ny))
    momentum_launch.kernel(name)(grid, block, (*arrays, out, np.int32(nx), np.int32(ny), *scalars))
    return out


# ------------------------------------------------------------------ properties

def fluid_properties(phi, eps, rho_l, rho_g, mu_l, mu_g, rule):
    """Twin of ``momentum.fluid_properties``: one launch of ``bf_mom_properties``."""
    import cupy as cp

    arrays = _float64(phi)
    if arrays is None or _cells(arrays[0]) is None:
        return NotImplemented
    (phi,) = arrays
    ny, nx = phi.shape
    H, rho, mu = cp.empty_like(phi), cp.empty_like(phi), cp.empty_like(phi)
    rho_x = cp.empty((ny, nx - 1), dtype=phi.dtype)
    rho_y = cp.empty((ny - 1, nx), dtype=phi.dtype)
    grid, block = _grid(nx, ny)
    momentum_launch.kernel("bf_mom_properties")(grid, block, (
        phi, H, rho, mu, rho_x, rho_y, np.int32(nx), np.int32(ny), np.float64(eps),
        np.float64(rho_g), np.float64(rho_l - rho_g), np.float64(mu_g), np.float64(mu_l - mu_g),
        np.int32(RULES.get(rule, 2))))
    return H, rho, mu, rho_x, rho_y


def step_scalars(velocity, phi, rho, mu, maxima, viscous):
    """Twin of ``momentum.step_scalars`` in 2-D and 3-D
    (:func:`step_scalars_3d`): per-block maxima
    (``bf_mom_scalars_partial``) and one block."""
    nd = getattr(phi, "ndim", 0)
    if nd not in (2, 3) or not isinstance(velocity, (tuple, list)) or len(velocity) != nd:
        return NotImplemented
    if nd == 3:
        return step_scalars_3d(velocity, phi, rho, mu, maxima, viscous)
    checked = _checked(("u", "v", "c", "c_rho", "c_mu"), (*velocity, phi, rho, mu))
    if checked is None:
        return NotImplemented
    u, v, phi, rho, mu = checked[0]
    return launch_step_scalars(momentum_launch.kernel, (u, v), phi, rho, mu, maxima, viscous)


# ------------------------------------------------------------------- momentum

def advection_terms(u, v, rho_x, rho_y, mu, hx, hy, s_left, s_right, s_bottom, s_top):
    """Twin of ``momentum.advection_terms``: one launch of ``bf_mom_advection``."""
    import cupy as cp

    checked = _checked(("u", "v", "fu", "fv", "c"), (u, v, rho_x, rho_y, mu))
    if checked is None:
        return NotImplemented
    (u, v, rho_x, rho_y, mu), nx, ny = checked
    adv_u, adv_v = cp.empty_like(rho_x), cp.empty_like(rho_y)
    grid, block = _grid(nx, ny)
    momentum_launch.kernel("bf_mom_advection")(grid, block, (
        u, v, rho_x, rho_y, mu, adv_u, adv_v, np.int32(nx), np.int32(ny), np.float64(hx),
        np.float64(hy), np.float64(s_left), np.float64(s_right), np.float64(s_bottom),
        np.float64(s_top)))
    return adv_u, adv_v


def interface_coefficients(phi, yc, yf, hx, hy, sigma, buoyancy, y0):
    """Twin of ``momentum.interface_coefficients``: the curvature
    (``levelset.curvature``, its own twin: one kernel) when ``sigma > 0``,
    then one launch of ``bf_mom_interface``."""
    arrays = _float64(phi, yc, yf)
    if arrays is None or _cells(arrays[0]) is None:
        return NotImplemented
    phi, yc, yf = arrays
    ny, nx = phi.shape
    if yc.size != ny or yf.size != ny - 1:
        return NotImplemented
    kappa = levelset.curvature(phi, (hx, hy)) if sigma > 0 else phi
    return _interface_kernel(kappa, yc, yf, sigma, buoyancy, y0)


def _interface_kernel(kappa, yc, yf, sigma, buoyancy, y0):
    """``(cx, cy)`` from the curvature ``kappa`` (not read without ``sigma >
    0``) and the heights ``yc``, ``yf`` (not read without ``buoyancy``):
    one launch of ``bf_mom_interface``."""
    import cupy as cp

    ny, nx = kappa.shape
    with_sigma = sigma > 0
    kappa = cp.ascontiguousarray(kappa, dtype=cp.float64)
    cx = cp.empty((ny, nx - 1), dtype=kappa.dtype)
    cy = cp.empty((ny - 1, nx), dtype=kappa.dtype)
    grid, block = _grid(nx, ny)
    momentum_launch.kernel("bf_mom_interface")(grid, block, (
        kappa, yc, yf, cx, cy, np.int32(nx), np.int32(ny), np.float64(sigma),
        np.float64(buoyancy), np.float64(y0), np.int32(with_sigma), np.int32(buoyancy != 0)))
    return cx, cy


def explicit_velocity_u(u, v, mu, H, rho_x, adv_u, cx, dt, hx, hy, s_bottom, s_top, forces):
    """Twin of ``momentum.explicit_velocity_u``: one launch of ``bf_mom_explicit_u``."""
    return _face_kernel("bf_mom_explicit_u", ("u", "v", "c", "c_H", "fu", "fu_adv", "fu_cx"),
                        (u, v, mu, H, rho_x, adv_u, cx), 0, lambda nx, ny: (nx + 1, ny),
                        (np.float64(dt), np.float64(hx), np.float64(hy), np.float64(s_bottom),
                         np.float64(s_top), np.int32(bool(forces))))


def explicit_velocity_v(u, v, mu, H, rho_y, adv_v, cy, dt, hx, hy, s_left, s_right, gravity,
                        forces, reduced=0.0, rho_g=0.0, rho_l=0.0):
    """Twin of ``momentum.explicit_velocity_v``: one launch of ``bf_mom_explicit_v``."""
    return _face_kernel("bf_mom_explicit_v", ("u", "v", "c", "c_H", "fv", "fv_adv", "fv_cy"),
                        (u, v, mu, H, rho_y, adv_v, cy), 1, lambda nx, ny: (nx, ny + 1),
                        (np.float64(dt), np.float64(hx), np.float64(hy), np.float64(s_left),
                         np.float64(s_right), np.float64(gravity), np.int32(bool(forces)),
                         np.float64(reduced), np.float64(rho_g), np.float64(rho_l)))


def implicit_rhs_u(u, v, mu, rho_x, adv_u, dt, hx, hy):
    """Twin of ``momentum.implicit_rhs_u``: one launch of ``bf_mom_implicit_rhs_u``."""
    return _face_kernel("bf_mom_implicit_rhs_u", ("u", "v", "c", "fu", "fu_adv"),
                        (u, v, mu, rho_x, adv_u), 3, lambda nx, ny: (nx - 1, ny),
                        (np.float64(dt), np.float64(hx), np.float64(hy)))


def implicit_rhs_v(u, v, mu, rho_y, adv_v, dt, hx, hy):
    """Twin of ``momentum.implicit_rhs_v``: one launch of ``bf_mom_implicit_rhs_v``."""
    return _face_kernel("bf_mom_implicit_rhs_v", ("u", "v", "c", "fv", "fv_adv"),
                        (u, v, mu, rho_y, adv_v), 3, lambda nx, ny: (nx, ny - 1),
                        (np.float64(dt), np.float64(hx), np.float64(hy)))


def implicit_velocity_u(x, w, H, cx, rho_x, dt, hx, forces):
    """Twin of ``momentum.implicit_velocity_u``: one launch of ``bf_mom_implicit_velocity_u``."""
    if getattr(x, "size", None) != getattr(rho_x, "size", None):
        return NotImplemented
    return _face_kernel("bf_mom_implicit_velocity_u", ("fu_x", "u", "c", "fu_cx", "fu"),
                        (x.reshape(rho_x.shape), w, H, cx, rho_x), 1,
                        lambda nx, ny: (nx + 1, ny),
                        (np.float64(dt), np.float64(hx), np.int32(bool(forces))))


def implicit_velocity_v(x, w, H, cy, rho_y, dt, hy, forces, gravity, reduced=0.0, rho_g=0.0,
                        rho_l=0.0):
    """Twin of ``momentum.implicit_velocity_v``: one launch of ``bf_mom_implicit_velocity_v``."""
    if getattr(x, "size", None) != getattr(rho_y, "size", None):
        return NotImplemented
    return _face_kernel("bf_mom_implicit_velocity_v", ("fv_x", "v", "c", "fv_cy", "fv"),
                        (x.reshape(rho_y.shape), w, H, cy, rho_y), 1,
                        lambda nx, ny: (nx, ny + 1),
                        (np.float64(dt), np.float64(hy), np.int32(bool(forces)),
                         np.float64(gravity), np.float64(reduced), np.float64(rho_g),
                         np.float64(rho_l)))


# ------------------------------------------------------------------ projection

def _divergence(u, v, hx, hy, dt):
    """``div u`` and, with ``dt``, ``-div u / dt``: one launch."""
    import cupy as cp

    arrays = _float64(u, v)
    if arrays is None:
        return NotImplemented
    u, v = arrays
    ny, nx = u.shape[0], v.shape[1]
    if min(nx, ny) < MIN_CELLS or not _shapes(ny, nx, u=u, v=v):
        return NotImplemented
    div = cp.empty((ny, nx), dtype=cp.float64)
    rhs = cp.empty_like(div) if dt is not None else div          # (not written without dt)
    grid, block = _grid(nx, ny)
    momentum_launch.kernel("bf_mom_divergence")(grid, block, (
        u, v, div, rhs, np.int32(nx), np.int32(ny), np.float64(hx), np.float64(hy),
        np.float64(dt if dt is not None else 1.0), np.int32(dt is not None)))
    return div if dt is None else (div, rhs)


def divergence(u, v, hx, hy):
    """Twin of ``momentum.divergence``: one launch of ``bf_mom_divergence``."""
    return _divergence(u, v, hx, hy, None)


def pressure_rhs(u, v, hx, hy, dt):
    """Twin of ``momentum.pressure_rhs``: one launch of ``bf_mom_divergence``."""
    return _divergence(u, v, hx, hy, dt)


def correct_velocity(us, vs, p, rho_x, rho_y, div_star, dt, hx, hy):
    """Twin of ``momentum.correct_velocity``: the correction and the sums of
    squares in one launch of ``bf_mom_correct_partial``, then one block."""
    import cupy as cp

    checked = _checked(("u", "v", "c", "fu", "fv", "c_div"), (us, vs, p, rho_x, rho_y, div_star))
    if checked is None:
        return NotImplemented
    (us, vs, p, rho_x, rho_y, div_star), nx, ny = checked
    u, v = cp.empty_like(us), cp.empty_like(vs)
    blocks = reduce_blocks(nx * ny)
    partial = cp.empty(2 * blocks, dtype=cp.float64)
    momentum_launch.kernel("bf_mom_correct_partial")((blocks,), (REDUCE_THREADS,), (
        us, vs, p, rho_x, rho_y, div_star, u, v, partial, np.int32(nx), np.int32(ny),
        np.float64(dt), np.float64(hx), np.float64(hy)))
    return u, v, final_norms(partial, blocks)


# -------------------------------------------------- variants of momentum

# The n-D functions of :mod:`.momentum` take the velocity, the face
# densities, the spacing and the walls' signs as tuples over the grid axes
# (x first); the kernels above take them one by one.  These variants unpack
# a 2-D call for them and pack the results as the n-D functions return them
# (the same launches as the calls above, nothing added), hand a 3-D call to
# the twins of :mod:`.momentum3_cuda`, and return NotImplemented for any
# other dimension.

def _plane_call(*tuples):
    """Whether every one of ``tuples`` has two entries (a 2-D call)."""
    return all(isinstance(t, (tuple, list)) and len(t) == 2 for t in tuples)


def _space_call(*tuples):
    """Whether every one of ``tuples`` has three entries (a 3-D call)."""
    return all(isinstance(t, (tuple, list)) and len(t) == 3 for t in tuples)


def fluid_properties_nd(phi, eps, rho_l, rho_g, mu_l, mu_g, rule, viscosity_mean="arithmetic"):
    """Variant of ``momentum.fluid_properties``: :func:`fluid_properties`
    (the kernel's viscosity is the arithmetic mean: the harmonic one runs
    as array code)."""
    if viscosity_mean != "arithmetic":
        return NotImplemented
    if getattr(phi, "ndim", None) == 3:
        return fluid_properties_3d(phi, eps, rho_l, rho_g, mu_l, mu_g, rule)
    if getattr(phi, "ndim", None) != 2:
        return NotImplemented
    out = fluid_properties(phi, eps, rho_l, rho_g, mu_l, mu_g, rule)
    if out is NotImplemented:
        return out
    H, rho, mu, rho_x, rho_y = out
    return H, rho, mu, (rho_x, rho_y)


def advection_terms_nd(velocity, rho_faces, mu, spacing, signs):
    """Variant of ``momentum.advection_terms``: :func:`advection_terms`; in
    3-D :func:`advection_terms_3d`."""
    if _space_call(velocity, rho_faces, spacing, signs):
        return advection_terms_3d(velocity, rho_faces, mu, spacing, signs)
    if not _plane_call(velocity, rho_faces, spacing, signs):
        return NotImplemented
    (s_left, s_right), (s_bottom, s_top) = signs
    return advection_terms(*velocity, *rho_faces, mu, *spacing, s_left, s_right, s_bottom, s_top)


def interface_coefficients_nd(phi_kappa, spacing, sigma, heights, buoyancy, y0):
    """Variant of ``momentum.interface_coefficients``: the curvature
    (``levelset.curvature``, its own CUDA variant: one kernel) when
    ``sigma > 0``, then one launch of ``bf_mom_interface``
    (:func:`interface_coefficients_3d` in 3-D).  ``heights``: the cells'
    ``(ny, 1)`` and the interior horizontal faces' ``(ny-1, 1)``."""
    if sigma <= 0 and buoyancy == 0:
        return NotImplemented           # (nothing acts: the array code's None, no work)
    if len(spacing) == 3:
        return interface_coefficients_3d(phi_kappa, spacing, sigma, heights, buoyancy, y0)
    if not _plane_call(spacing):
        return NotImplemented
    arrays = _float64(phi_kappa)
    if arrays is None or _cells(arrays[0]) is None:
        return NotImplemented
    (phi,) = arrays
    vertical = vertical_heights(heights, phi, buoyancy)
    if vertical is None:
        return NotImplemented
    kappa = levelset.curvature(phi, spacing) if sigma > 0 else phi
    return _interface_kernel(kappa, *vertical, sigma, buoyancy, y0)


def provisional_velocity_nd(velocity, H, mu, rho_faces, coefficients, dt, spacing, signs,
                            gravity, reduced=None):
    """Variant of ``momentum.provisional_velocity``: :func:`advection_terms`,
    then :func:`explicit_velocity_u` and :func:`explicit_velocity_v` (three
    launches); in 3-D :func:`provisional_velocity_3d`."""
    if _space_call(velocity, rho_faces, spacing, signs):
        return provisional_velocity_3d(velocity, H, mu, rho_faces, coefficients, dt, spacing,
                                       signs, gravity, reduced)
    if not _plane_call(velocity, rho_faces, spacing, signs):
        return NotImplemented
    u, v = velocity
    rho_x, rho_y = rho_faces
    hx, hy = spacing
    (s_left, s_right), (s_bottom, s_top) = signs
    adv = advection_terms(u, v, rho_x, rho_y, mu, hx, hy, s_left, s_right, s_bottom, s_top)
    if adv is NotImplemented:
        return NotImplemented
    forces = coefficients is not None
    cx, cy = coefficients if forces else (rho_x, rho_y)       # (not read without forces)
    us = explicit_velocity_u(u, v, mu, H, rho_x, adv[0], cx, dt, hx, hy, s_bottom, s_top, forces)
    vs = explicit_velocity_v(u, v, mu, H, rho_y, adv[1], cy, dt, hx, hy, s_left, s_right, gravity,
                             forces, *reduced_scalars(reduced))
    if us is NotImplemented or vs is NotImplemented:
        return NotImplemented
    return us, vs


def implicit_rhs_nd(velocity, mu, rho_faces, adv, dt, spacing):
    """Variant of ``momentum.implicit_rhs``: :func:`implicit_rhs_u` and
    :func:`implicit_rhs_v` (two launches); in 3-D :func:`implicit_rhs_3d`."""
    if _space_call(velocity, rho_faces, adv, spacing):
        return implicit_rhs_3d(velocity, mu, rho_faces, adv, dt, spacing)
    if not _plane_call(velocity, rho_faces, adv, spacing):
        return NotImplemented
    u, v = velocity
    hx, hy = spacing
    rhs_u = implicit_rhs_u(u, v, mu, rho_faces[0], adv[0], dt, hx, hy)
    rhs_v = implicit_rhs_v(u, v, mu, rho_faces[1], adv[1], dt, hx, hy)
    if rhs_u is NotImplemented or rhs_v is NotImplemented:
        return NotImplemented
    return rhs_u, rhs_v


def implicit_velocity_nd(solutions, velocity, H, rho_faces, coefficients, dt, spacing, gravity,
                         reduced=None):
    """Variant of ``momentum.implicit_velocity``: :func:`implicit_velocity_u`
    and :func:`implicit_velocity_v` (two launches); in 3-D
    :func:`implicit_velocity_3d`."""
    if _space_call(solutions, velocity, rho_faces, spacing):
        return implicit_velocity_3d(solutions, velocity, H, rho_faces, coefficients, dt, spacing,
                                    gravity, reduced)
    if not _plane_call(solutions, velocity, rho_faces, spacing):
        return NotImplemented
    rho_x, rho_y = rho_faces
    hx, hy = spacing
    forces = coefficients is not None
    cx, cy = coefficients if forces else (rho_x, rho_y)       # (not read without forces)
    us = implicit_velocity_u(solutions[0], velocity[0], H, cx, rho_x, dt, hx, forces)
    vs = implicit_velocity_v(solutions[1], velocity[1], H, cy, rho_y, dt, hy, forces, gravity,
                             *reduced_scalars(reduced))
    if us is NotImplemented or vs is NotImplemented:
        return NotImplemented
    return us, vs


def divergence_nd(velocity, spacing):
    """Variant of ``momentum.divergence``: :func:`divergence`; in 3-D
    :func:`divergence_3d`."""
    if _space_call(velocity, spacing):
        out = divergence_3d(velocity, spacing)
        return out if out is NotImplemented else out[0]
    if not _plane_call(velocity, spacing):
        return NotImplemented
    return divergence(*velocity, *spacing)


def pressure_rhs_nd(velocity, spacing, dt):
    """Variant of ``momentum.pressure_rhs``: :func:`pressure_rhs`; in 3-D
    :func:`divergence_3d`."""
    if _space_call(velocity, spacing):
        return divergence_3d(velocity, spacing, dt)
    if not _plane_call(velocity, spacing):
        return NotImplemented
    return pressure_rhs(*velocity, *spacing, dt)


def correct_velocity_nd(velocity, p, rho_faces, div_star, dt, spacing):
    """Variant of ``momentum.correct_velocity``: :func:`correct_velocity`
    (without ``div_star`` the norms' sums read ``p`` in its place and are
    dropped); in 3-D :func:`correct_velocity_3d`."""
    if _space_call(velocity, rho_faces, spacing):
        return correct_velocity_3d(velocity, p, rho_faces, div_star, dt, spacing)
    if not _plane_call(velocity, rho_faces, spacing):
        return NotImplemented
    out = correct_velocity(*velocity, p, *rho_faces, p if div_star is None else div_star, dt,
                           *spacing)
    if out is NotImplemented:
        return out
    u, v, norms_ = out
    return (u, v), None if div_star is None else norms_
