"""CUDA twins of the momentum step's array code (CuPy, float64).

Registered on the references in :mod:`bubbleflow.flow.momentum` (2-D
arguments one by one) and, through the ``*_nd`` variants at the end (which
unpack a 2-D call of the n-D functions: tuples over the axes), on those of
:mod:`bubbleflow.flow.momentum`; the tests compare them on the GPU.  The
kernels are ``momentum.cu`` beside this file (``momentum3.cu`` in 3-D).  Where the array code
launches tens of small kernels per call, these launch one or two:

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

In 3-D, :func:`fluid_properties_3d`, :func:`interface_coefficients_3d`,
:func:`provisional_velocity_3d`, :func:`advection_terms_3d`,
:func:`implicit_rhs_3d`, :func:`implicit_velocity_3d` (one launch a
component each), :func:`divergence_3d` (the divergence and the pressure's
right-hand side) and :func:`correct_velocity_3d` serve the ``*_nd``
variants, and :func:`step_scalars` takes both dimensions.

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
from . import levelset

__all__ = ["fluid_properties", "step_scalars", "advection_terms", "interface_coefficients",
           "explicit_velocity_u", "explicit_velocity_v", "implicit_rhs_u", "implicit_rhs_v",
           "implicit_velocity_u", "implicit_velocity_v", "divergence", "pressure_rhs", "norms", "correct_velocity",
           "fluid_properties_nd", "advection_terms_nd",
           "interface_coefficients_nd", "provisional_velocity_nd", "implicit_rhs_nd",
           "implicit_velocity_nd", "divergence_nd", "pressure_rhs_nd", "correct_velocity_nd",
           "fluid_properties_3d", "interface_coefficients_3d", "provisional_velocity_3d",
           "divergence_3d", "correct_velocity_3d", "advection_terms_3d", "implicit_rhs_3d",
           "implicit_velocity_3d"]

#: No FMA contraction: the kernels round as the array code does.
_OPTIONS = ("--fmad=false",)
#: Threads of the per-face kernels: 32 along x (one warp per row segment), 8 rows.
_BLOCK = (32, 8)
#: Threads a block of the reductions (their blocks: compute.cuda.reduce_blocks).
_REDUCE_THREADS = 256
#: Cells the kernels need along each axis (an interior face on each).
_MIN_CELLS = 2
#: ``operator.face_density`` -> the kernel's rule index (anything else: arithmetic).
_RULES = {"levelset": 0, "harmonic": 1}


_kernel = cuda.float64_kernels(__name__, "momentum.cu", _OPTIONS)
#: The 3-D kernels: a source of their own (a 2-D run compiles none of them).
_kernel3 = cuda.float64_kernels(__name__, "momentum3.cu", _OPTIONS, ndims=(3,))


_float64 = cuda.float64_2d


def _grid(nx, ny):
    """Launch shape of a kernel over ``nx`` by ``ny`` points."""
    return cuda.grid_2d(nx, ny, _BLOCK)


def _reduce_blocks(n):
    return cuda.reduce_blocks(n, _REDUCE_THREADS)


def _shapes(ny, nx, **arrays):
    """Whether every array has its expected shape: ``c`` cells, ``u``/``v``
    all faces, ``fu``/``fv`` interior faces (the key's prefix before ``_``)."""
    expected = {"c": (ny, nx), "u": (ny, nx + 1), "v": (ny + 1, nx), "fu": (ny, nx - 1),
                "fv": (ny - 1, nx)}
    return all(a.shape == expected[k.split("_")[0]] for k, a in arrays.items())


def _cells(phi):
    ny, nx = phi.shape
    return (nx, ny) if min(nx, ny) >= _MIN_CELLS else None


def _checked(shapes, arrays):
    """The twins' common check: ``(arrays, nx, ny)`` with the arrays
    contiguous float64 and each of the shape its key in ``shapes`` names
    (:func:`_shapes`; the first ``c`` array sets the grid, at least
    :data:`_MIN_CELLS` each way), or None (the twin returns
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
    _kernel(name)(grid, block, (*arrays, out, np.int32(nx), np.int32(ny), *scalars))
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
    _kernel("bf_mom_properties")(grid, block, (
        phi, H, rho, mu, rho_x, rho_y, np.int32(nx), np.int32(ny), np.float64(eps),
        np.float64(rho_g), np.float64(rho_l - rho_g), np.float64(mu_g), np.float64(mu_l - mu_g),
        np.int32(_RULES.get(rule, 2))))
    return H, rho, mu, rho_x, rho_y


def step_scalars(velocity, phi, rho, mu, maxima, viscous):
    """Twin of ``momentum.step_scalars`` in 2-D and 3-D: per-block maxima
    (``bf_mom_scalars_partial``) and one block."""
    import cupy as cp

    nd = getattr(phi, "ndim", 0)
    if nd not in (2, 3) or not isinstance(velocity, (tuple, list)) or len(velocity) != nd:
        return NotImplemented
    if nd == 2:
        checked = _checked(("u", "v", "c", "c_rho", "c_mu"), (*velocity, phi, rho, mu))
        arrays = None if checked is None else checked[0]
    else:
        arrays = _space_arrays(phi.shape, f0=velocity[0], f1=velocity[1], f2=velocity[2],
                               c=phi, c_rho=rho, c_mu=mu)
    if arrays is None:
        return NotImplemented
    *components, phi, rho, mu = arrays
    w = components[2] if nd == 3 else components[0]          # (unread in 2-D)
    sizes = [np.int64(c.size) for c in components[:2]] + [np.int64(w.size if nd == 3 else 0)]
    blocks = _reduce_blocks(max(max(c.size for c in components), phi.size))
    partial = cp.empty(5 * blocks, dtype=cp.float64)
    out = cp.empty(nd + 2, dtype=cp.float64)
    flags = (np.int32(bool(maxima)), np.int32(bool(viscous)))
    get = _kernel3 if nd == 3 else _kernel             # (a 3-D run compiles only its source)
    get("bf_mom_scalars_partial")((blocks,), (_REDUCE_THREADS,), (
        components[0], components[1], w, phi, rho, mu, partial, *sizes, np.int64(phi.size),
        *flags))
    get("bf_mom_scalars_final")((1,), (_REDUCE_THREADS,), (
        partial, np.int32(blocks), out, np.int32(nd), *flags))
    return out


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
    _kernel("bf_mom_advection")(grid, block, (
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
    _kernel("bf_mom_interface")(grid, block, (
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
    if min(nx, ny) < _MIN_CELLS or not _shapes(ny, nx, u=u, v=v):
        return NotImplemented
    div = cp.empty((ny, nx), dtype=cp.float64)
    rhs = cp.empty_like(div) if dt is not None else div          # (not written without dt)
    grid, block = _grid(nx, ny)
    _kernel("bf_mom_divergence")(grid, block, (
        u, v, div, rhs, np.int32(nx), np.int32(ny), np.float64(hx), np.float64(hy),
        np.float64(dt if dt is not None else 1.0), np.int32(dt is not None)))
    return div if dt is None else (div, rhs)


def divergence(u, v, hx, hy):
    """Twin of ``momentum.divergence``: one launch of ``bf_mom_divergence``."""
    return _divergence(u, v, hx, hy, None)


def pressure_rhs(u, v, hx, hy, dt):
    """Twin of ``momentum.pressure_rhs``: one launch of ``bf_mom_divergence``."""
    return _divergence(u, v, hx, hy, dt)


def _final_norms(partial, blocks):
    import cupy as cp

    out = cp.empty(2, dtype=cp.float64)
    _kernel("bf_mom_norms_final")((1,), (_REDUCE_THREADS,), (partial, np.int32(blocks), out))
    return out


def norms(a, b):
    """Twin of ``momentum.norms``: per-block sums of squares, then one block
    (fixed order)."""
    import cupy as cp

    if not all(getattr(x, "dtype", None) == np.float64 for x in (a, b)) or a.size == 0 \
            or b.size == 0:
        return NotImplemented
    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
    blocks = _reduce_blocks(max(a.size, b.size))
    partial = cp.empty(2 * blocks, dtype=cp.float64)
    _kernel("bf_mom_squares_partial")((blocks,), (_REDUCE_THREADS,), (
        a, b, partial, np.int64(a.size), np.int64(b.size)))
    return _final_norms(partial, blocks)


def correct_velocity(us, vs, p, rho_x, rho_y, div_star, dt, hx, hy):
    """Twin of ``momentum.correct_velocity``: the correction and the sums of
    squares in one launch of ``bf_mom_correct_partial``, then one block."""
    import cupy as cp

    checked = _checked(("u", "v", "c", "fu", "fv", "c_div"), (us, vs, p, rho_x, rho_y, div_star))
    if checked is None:
        return NotImplemented
    (us, vs, p, rho_x, rho_y, div_star), nx, ny = checked
    u, v = cp.empty_like(us), cp.empty_like(vs)
    blocks = _reduce_blocks(nx * ny)
    partial = cp.empty(2 * blocks, dtype=cp.float64)
    _kernel("bf_mom_correct_partial")((blocks,), (_REDUCE_THREADS,), (
        us, vs, p, rho_x, rho_y, div_star, u, v, partial, np.int32(nx), np.int32(ny),
        np.float64(dt), np.float64(hx), np.float64(hy)))
    return u, v, _final_norms(partial, blocks)


# ---------------------------------------------------------------- 3-D calls

def _space_call(*tuples):
    """Whether every one of ``tuples`` has three entries (a 3-D call)."""
    return all(isinstance(t, (tuple, list)) and len(t) == 3 for t in tuples)


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
    :data:`_MIN_CELLS` cells along each axis; else None."""
    out = cuda.float64_3d(*arrays.values())
    if out is None or min(cells) < _MIN_CELLS:
        return None
    for key, a in zip(arrays, out):
        kind = key.split("_")[0]
        expected = cells if kind == "c" else _faces_3d(cells, int(kind[1]), kind[0] == "i")
        if a.shape != expected:
            return None
    return out


def _space_grid(shape):
    """Launch shape of a 3-D kernel over an array of ``shape``."""
    nz, ny, nx = shape
    return cuda.grid_2d(nx, ny * nz, _BLOCK)


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
        np.int32(_RULES.get(rule, 2))))
    return H, rho, mu, faces


def provisional_velocity_3d(velocity, H, mu, rho_faces, coefficients, dt, spacing, signs,
                            gravity, reduced=None):
    """``momentum.provisional_velocity`` on a 3-D grid: one launch of
    ``bf_mom3_explicit`` a component."""
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
    red, rho_g, rho_l = _reduced_scalars(reduced)
    kernel = _kernel3("bf_mom3_explicit")
    out = []
    for a, f in enumerate((u, v, w)):
        new = cp.empty_like(f)
        kernel(*_space_grid(f.shape), (
            u, v, w, mu, H, rho_f[a], coef[a], new, np.int32(nx), np.int32(ny), np.int32(nz),
            np.int32(a), np.float64(dt), *(np.float64(h) for h in spacing),
            *(np.float64(1.0 / h) for h in spacing), *wall_signs, np.float64(gravity),
            np.int32(forces), np.float64(red), np.float64(rho_g), np.float64(rho_l)))
        out.append(new)
    return tuple(out)


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
    ``bf_mom3_correct`` a component, then (with ``div_star``) the divergence's
    kernel and :func:`norms`."""
    import cupy as cp

    cells = getattr(p, "shape", ())
    arrays = _space_arrays(cells, c=p, f0=velocity[0], f1=velocity[1], f2=velocity[2],
                           i0=rho_faces[0], i1=rho_faces[1], i2=rho_faces[2])
    if arrays is None:
        return NotImplemented
    p, *rest = arrays
    vel, rho_f = rest[:3], rest[3:]
    nz, ny, nx = cells
    kernel = _kernel3("bf_mom3_correct")
    out = []
    for a, f in enumerate(vel):
        new = cp.empty_like(f)
        kernel(*_space_grid(f.shape), (f, p, rho_f[a], new, np.int32(nx), np.int32(ny),
                                       np.int32(nz), np.int32(a), np.float64(dt),
                                       np.float64(spacing[a])))
        out.append(new)
    out = tuple(out)
    if div_star is None:
        return out, None
    div, _ = divergence_3d(out, spacing)
    return out, norms(div_star, div)


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
        kernel(*_space_grid(new.shape), (*shared, *(p[a] for p in per_component), new,
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
               np.float64(gravity), *(np.float64(q) for q in _reduced_scalars(reduced)))
    return _per_component("bf_mom3_implicit_velocity", (H,), (xs, vel, coef, rho_f), vel,
                          H.shape, scalars)


# -------------------------------------------------- variants of momentum

# The n-D functions of :mod:`.momentum` take the velocity, the face
# densities, the spacing and the walls' signs as tuples over the grid axes
# (x first); the kernels above take them one by one.  These variants unpack
# a 2-D call for them (NotImplemented for any other dimension) and pack the
# results as the n-D functions return them: the same launches as the calls
# above, nothing added.

def _plane_call(*tuples):
    """Whether every one of ``tuples`` has two entries (a 2-D call)."""
    return all(isinstance(t, (tuple, list)) and len(t) == 2 for t in tuples)


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
    vertical = _vertical_heights(heights, phi, buoyancy)
    if vertical is None:
        return NotImplemented
    kappa = levelset.curvature(phi, spacing) if sigma > 0 else phi
    return _interface_kernel(kappa, *vertical, sigma, buoyancy, y0)


def _vertical_heights(heights, phi, buoyancy):
    """The cells' and the interior vertical faces' heights (``heights``'
    first and last entries) as contiguous float64 arrays of ``phi``'s
    dimension, as many as ``phi`` has planes and one fewer; ``(phi, phi)``
    without buoyancy (not read); None where they are not so."""
    if buoyancy == 0:
        return phi, phi
    if not isinstance(heights, (tuple, list)) or len(heights) != phi.ndim:
        return None
    arrays = cuda.float64_nd(phi.ndim, heights[0], heights[-1])
    n = phi.shape[0]
    if arrays is None or arrays[0].size != n or arrays[1].size != n - 1:
        return None
    return arrays


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
    vertical = _vertical_heights(heights, phi, buoyancy)
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


def _reduced_scalars(reduced):
    """The kernels' ``(reduced, rho_g, rho_l)`` of a ``momentum.ReducedGravity``
    (zeros without one: no term)."""
    return (0.0, 0.0, 0.0) if reduced is None else tuple(reduced)


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
                             forces, *_reduced_scalars(reduced))
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
                             *_reduced_scalars(reduced))
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
