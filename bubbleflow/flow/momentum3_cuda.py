"""CUDA twins of the momentum step's array code on a 3-D grid (CuPy, float64).

Called through the variants of :mod:`.momentum_cuda` (the ``*_nd`` ones and
``step_scalars``, registered on the references of :mod:`.momentum`); the
kernels are ``momentum3.cu`` beside this file (a 2-D run compiles none of
them), with what the 2-D twins share from :mod:`.momentum_launch`:

* :func:`fluid_properties_3d` (the arithmetic viscosity mean),
  :func:`interface_coefficients_3d` (after the curvature's own twin when
  ``sigma > 0``), :func:`divergence_3d` (the divergence and the pressure's
  right-hand side): one launch each;
* :func:`provisional_velocity_3d`: one launch for the three components, a
  cell's thread making the faces on its low side;
* :func:`advection_terms_3d`, :func:`implicit_rhs_3d`,
  :func:`implicit_velocity_3d`: one launch a component;
* :func:`correct_velocity_3d`: one launch for the three components, then
  (with ``div_star``) the divergence's kernel and ``momentum_launch.norms``;
* :func:`step_scalars_3d`: per-block maxima then one block.

Compiled without FMA contraction, in the array code's order of operations:
the same bits (the norms are sums in another order).  Calls these do not
cover -- another dtype than float64, fewer than ``MIN_CELLS`` cells along an
axis, mismatched shapes -- return ``NotImplemented`` and the array code
runs.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda
from . import levelset
from .momentum_launch import (BLOCK, MIN_CELLS, OPTIONS, REDUCE_THREADS, RULES, final_norms,
                              launch_step_scalars, norms, reduced_scalars, vertical_heights)

__all__ = ["fluid_properties_3d", "step_scalars_3d", "interface_coefficients_3d",
           "provisional_velocity_3d", "divergence_3d", "correct_velocity_3d",
           "advection_terms_3d", "implicit_rhs_3d", "implicit_velocity_3d"]

_kernel3 = cuda.float64_kernels(__name__, "momentum3.cu", OPTIONS, ndims=(3,))


def _faces_3d(cells, a, inner=False):
    """The shape of grid axis ``a``'s faces (its interior ones with
    ``inner``) on a grid of ``cells`` (array order)."""
    shape = list(cells)
    shape[2 - a] += -1 if inner else 1
    return tuple(shape)


def _space_arrays(cells, **arrays):
    """``arrays`` as contiguous float64 3-d CuPy arrays, each of the shape its
    key names (``c`` the cells, ``f0``..``f2`` an axis's faces, ``i0``..``i2``
    its interior faces; the part after ``_`` free), at least
    :data:`.momentum_launch.MIN_CELLS` cells along each axis; else None."""
    out = cuda.float64_3d(*arrays.values())
    if out is None or min(cells) < MIN_CELLS:
        return None
    for key, a in zip(arrays, out):
        kind = key.split("_")[0]
        expected = cells if kind == "c" else _faces_3d(cells, int(kind[1]), kind[0] == "i")
        if a.shape != expected:
            return None
    return out


def _space_grid(shape):
    """Launch shape of a BF_CELLS3 kernel over an array of ``shape``."""
    nz, ny, nx = shape
    return cuda.grid_2d(nx, ny * nz, BLOCK)


def _runs_grid(shape):
    """Launch shape of a BF_CELLS3_RUNS kernel over an array of ``shape``."""
    nz, ny, nx = shape
    return cuda.grid_3d(nx, ny, nz, BLOCK)


def fluid_properties_3d(phi, eps, rho_l, rho_g, mu_l, mu_g, rule):
    """``momentum.fluid_properties`` on a 3-D grid (arithmetic viscosity):
    one launch of ``bf_mom3_properties``."""
    import cupy as cp

    arrays = _space_arrays(getattr(phi, "shape", ()), c=phi)
    if arrays is None:
        return NotImplemented
    (phi,) = arrays
    H, rho, mu = cp.empty_like(phi), cp.empty_like(phi), cp.empty_like(phi)
    faces = tuple(cp.empty(_faces_3d(phi.shape, a, True), dtype=phi.dtype) for a in range(3))
    nz, ny, nx = phi.shape
    _kernel3("bf_mom3_properties")(*_space_grid(phi.shape), (
        phi, H, rho, mu, *faces, np.int32(nx), np.int32(ny), np.int32(nz), np.float64(eps),
        np.float64(rho_g), np.float64(rho_l - rho_g), np.float64(mu_g), np.float64(mu_l - mu_g),
        np.int32(RULES.get(rule, 2))))
    return H, rho, mu, faces


def step_scalars_3d(velocity, phi, rho, mu, maxima, viscous):
    """``momentum.step_scalars`` on a 3-D grid: per-block maxima
    (``bf_mom_scalars_partial``) and one block."""
    arrays = _space_arrays(phi.shape, f0=velocity[0], f1=velocity[1], f2=velocity[2], c=phi,
                           c_rho=rho, c_mu=mu)
    if arrays is None:
        return NotImplemented
    u, v, w, phi, rho, mu = arrays
    return launch_step_scalars(_kernel3, (u, v, w), phi, rho, mu, maxima, viscous)


def provisional_velocity_3d(velocity, H, mu, rho_faces, coefficients, dt, spacing, signs,
                            gravity, reduced=None):
    """``momentum.provisional_velocity`` on a 3-D grid: one launch of
    ``bf_mom3_explicit`` for the three components."""
    import cupy as cp

    cells = getattr(H, "shape", ())
    forces = coefficients is not None
    coef = coefficients if forces else rho_faces           # (not read without forces)
    arrays = _space_arrays(cells, c_H=H, c_mu=mu, f0=velocity[0], f1=velocity[1],
                           f2=velocity[2], i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2],
                           i0_c=coef[0], i1_c=coef[1], i2_c=coef[2])
    if arrays is None:
        return NotImplemented
    H, mu, u, v, w, *rest = arrays
    rho_f, coef = rest[:3], rest[3:]
    nz, ny, nx = cells
    wall_signs = tuple(np.float64(s) for pair in signs for s in pair)
    red, rho_g, rho_l = reduced_scalars(reduced)
    out = tuple(cp.empty_like(f) for f in (u, v, w))
    _kernel3("bf_mom3_explicit")(*_runs_grid(cells), (
        u, v, w, mu, H, *rho_f, *coef, *out, np.int32(nx), np.int32(ny), np.int32(nz),
        np.float64(dt), *(np.float64(h) for h in spacing),
        *(np.float64(1.0 / h) for h in spacing), *wall_signs, np.float64(gravity),
        np.int32(forces), np.float64(red), np.float64(rho_g), np.float64(rho_l)))
    return out


def divergence_3d(velocity, spacing, dt=None):
    """``div u`` on a 3-D grid, and ``-div u / dt`` with ``dt``: one launch
    of ``bf_mom3_divergence``; ``(div, rhs or None)``."""
    import cupy as cp

    cells = _faces_3d(getattr(velocity[0], "shape", (0, 0, 1)), 0, True)
    arrays = _space_arrays(cells, f0=velocity[0], f1=velocity[1], f2=velocity[2])
    if arrays is None:
        return NotImplemented
    u, v, w = arrays
    nz, ny, nx = cells
    div = cp.empty(cells, dtype=u.dtype)
    rhs = cp.empty_like(div) if dt is not None else div
    _kernel3("bf_mom3_divergence")(*_space_grid(cells), (
        u, v, w, div, rhs, np.int32(nx), np.int32(ny), np.int32(nz),
        *(np.float64(h) for h in spacing), np.float64(1.0 if dt is None else dt),
        np.int32(dt is not None)))
    return div, (rhs if dt is not None else None)


def correct_velocity_3d(velocity, p, rho_faces, div_star, dt, spacing):
    """``momentum.correct_velocity`` on a 3-D grid: one launch of
    ``bf_mom3_correct`` for the three components, then (with ``div_star``)
    :func:`_divergence_norms`."""
    import cupy as cp

    cells = getattr(p, "shape", ())
    arrays = _space_arrays(cells, c=p, f0=velocity[0], f1=velocity[1], f2=velocity[2],
                           i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2])
    if arrays is None:
        return NotImplemented
    p, *rest = arrays
    vel, rho_f = rest[:3], rest[3:]
    nz, ny, nx = cells
    out = tuple(cp.empty_like(f) for f in vel)
    _kernel3("bf_mom3_correct")(*_space_grid(cells), (
        *vel, p, *rho_f, *out, np.int32(nx), np.int32(ny), np.int32(nz), np.float64(dt),
        *(np.float64(h) for h in spacing)))
    if div_star is None:
        return out, None
    return out, _divergence_norms(div_star, out, spacing)


def _divergence_norms(div_star, velocity, spacing):
    """``[||div_star||, ||div velocity||]``: one launch of
    ``bf_mom3_divergence_squares`` (the divergence not stored), then
    :func:`.momentum_launch.final_norms`; the bits of
    :func:`.momentum_launch.norms` of ``div_star`` and :func:`divergence_3d`'s."""
    import cupy as cp

    u, v, w = velocity
    div_star = cp.ascontiguousarray(div_star)
    if div_star.dtype != cp.float64 or div_star.shape != _faces_3d(u.shape, 0, True):
        return norms(div_star, divergence_3d(velocity, spacing)[0])
    nz, ny, nx = div_star.shape
    blocks = cuda.reduce_blocks(div_star.size, REDUCE_THREADS)
    partial = cp.empty(2 * blocks, dtype=cp.float64)
    _kernel3("bf_mom3_divergence_squares")((blocks,), (REDUCE_THREADS,), (
        u, v, w, div_star, partial, np.int32(nx), np.int32(ny), np.int32(nz),
        *(np.float64(h) for h in spacing)))
    return final_norms(partial, blocks)


def _per_component(name, shared, per_component, like, cells, scalars):
    """One launch of the 3-D kernel ``name`` a grid axis ``a``, with the
    arguments ``(*shared, *(p[a] for p in per_component), out, nx, ny, nz,
    a, *scalars)``, ``out`` new and shaped as ``like[a]``; the three outputs."""
    import cupy as cp

    nz, ny, nx = cells
    kernel = _kernel3(name)
    out = []
    for a in range(3):
        new = cp.empty_like(like[a])
        kernel(*_runs_grid(new.shape), (*shared, *(p[a] for p in per_component), new,
                                         np.int32(nx), np.int32(ny), np.int32(nz), np.int32(a),
                                         *scalars))
        out.append(new)
    return tuple(out)


def advection_terms_3d(velocity, rho_faces, mu, spacing, signs):
    """``momentum.advection_terms`` on a 3-D grid: one launch of
    ``bf_mom3_advection`` a component."""
    arrays = _space_arrays(getattr(mu, "shape", ()), c_mu=mu, f0=velocity[0], f1=velocity[1],
                           f2=velocity[2], i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2])
    if arrays is None:
        return NotImplemented
    mu, u, v, w, *rho_f = arrays
    scalars = (*(np.float64(h) for h in spacing), *(np.float64(1.0 / h) for h in spacing),
               *(np.float64(s) for pair in signs for s in pair))
    return _per_component("bf_mom3_advection", (u, v, w, mu), (rho_f,), rho_f, mu.shape, scalars)


def implicit_rhs_3d(velocity, mu, rho_faces, adv, dt, spacing):
    """``momentum.implicit_rhs`` on a 3-D grid: one launch of
    ``bf_mom3_implicit_rhs`` a component."""
    arrays = _space_arrays(getattr(mu, "shape", ()), c_mu=mu, f0=velocity[0], f1=velocity[1],
                           f2=velocity[2], i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2],
                           i0_adv=adv[0], i1_adv=adv[1], i2_adv=adv[2])
    if arrays is None:
        return NotImplemented
    mu, u, v, w, *rest = arrays
    return _per_component("bf_mom3_implicit_rhs", (u, v, w, mu), (rest[:3], rest[3:]), rest[:3],
                          mu.shape, (np.float64(dt), *(np.float64(h) for h in spacing)))


def implicit_velocity_3d(solutions, velocity, H, rho_faces, coefficients, dt, spacing, gravity,
                         reduced=None):
    """``momentum.implicit_velocity`` on a 3-D grid: one launch of
    ``bf_mom3_implicit_velocity`` a component."""
    forces = coefficients is not None
    coef = coefficients if forces else rho_faces           # (not read without forces)
    if any(getattr(x, "size", None) != getattr(r, "size", None)
           for x, r in zip(solutions, rho_faces)):
        return NotImplemented
    xs = {f"i{a}_x": x.reshape(r.shape) for a, (x, r) in enumerate(zip(solutions, rho_faces))}
    arrays = _space_arrays(getattr(H, "shape", ()), c_H=H, f0=velocity[0], f1=velocity[1],
                           f2=velocity[2], i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2],
                           i0_c=coef[0], i1_c=coef[1], i2_c=coef[2], **xs)
    if arrays is None:
        return NotImplemented
    H, *rest = arrays
    vel, rho_f, coef, xs = rest[:3], rest[3:6], rest[6:9], rest[9:]
    scalars = (np.float64(dt), *(np.float64(1.0 / h) for h in spacing), np.int32(forces),
               np.float64(gravity), *(np.float64(q) for q in reduced_scalars(reduced)))
    return _per_component("bf_mom3_implicit_velocity", (H,), (xs, vel, coef, rho_f), vel,
                          H.shape, scalars)


def interface_coefficients_3d(phi_kappa, spacing, sigma, heights, buoyancy, y0):
    """``momentum.interface_coefficients`` on a 3-D grid: the curvature's
    twin when ``sigma > 0``, then one launch of ``bf_mom3_interface``.
    ``heights``: per grid axis, broadcastable along the vertical (the
    cells' ``(nz, 1, 1)`` for x and y, the interior z faces' for z)."""
    import cupy as cp

    arrays = _space_arrays(getattr(phi_kappa, "shape", ()), c=phi_kappa)
    if arrays is None:
        return NotImplemented
    (phi,) = arrays
    nz, ny, nx = phi.shape
    vertical = vertical_heights(heights, phi, buoyancy)
    if vertical is None:
        return NotImplemented
    zc, zf = vertical
    kappa = levelset.curvature(phi, spacing) if sigma > 0 else phi
    kappa = cp.ascontiguousarray(kappa, dtype=cp.float64)
    faces = tuple(cp.empty(_faces_3d(phi.shape, a, inner=True), dtype=cp.float64)
                  for a in range(3))
    _kernel3("bf_mom3_interface")(*_space_grid(phi.shape), (
        kappa, zc, zf, *faces, np.int32(nx), np.int32(ny), np.int32(nz), np.float64(sigma),
        np.float64(buoyancy), np.float64(y0), np.int32(sigma > 0), np.int32(buoyancy != 0)))
    return faces
