"""CUDA twins of the multigrid cycle (CuPy, float64 or float32, 2-D).

Registered on the array code of :mod:`bubbleflow.linalg.precond.multigrid`
(the tests compare the two on the GPU); the kernels are ``multigrid.cu``
beside this file:

* :func:`smooth`: one kernel per Chebyshev step (the first computes the
  residual, the later ones update it with the stencil of the step);
* :func:`residual_restrict`: one kernel, a thread per coarse cell;
* :func:`prolong_add`: one kernel;
* :func:`cycle_runner`: the whole V-cycle as a :class:`GraphCycle`, its
  buffers allocated once and its launches (the kernels above and a dense
  product on the coarsest level) replayed from one CUDA graph.

The stencil is summed in another order than the array code's flux form, so
results agree to rounding, not bit for bit.  The kernels are compiled once
per value type (``typedef double T;`` or ``float``).  Calls these kernels do
not cover (another dtype, mixed dtypes, another dimension, mismatched shapes)
return
``NotImplemented`` and the array code runs.  CuPy is imported inside the
functions only.
"""
from __future__ import annotations

import functools

import numpy as np

from ...compute import cuda
from .chebyshev import chebyshev_coefficients

__all__ = ["smooth", "residual_restrict", "prolong_add", "cycle_runner", "GraphCycle"]

_OPTIONS = ("--fmad=false",)
_BLOCK = (32, 8)

#: The value types the kernels are compiled for: C type and scalar type.
_TYPES = {"float64": ("double", np.float64), "float32": ("float", np.float32)}


@cuda.kernel_cache
def _kernel(dtype, kernel_name):
    ctype = _TYPES[dtype][0]
    return cuda.function(f"typedef {ctype} T;\n" + cuda.source(__name__, "multigrid.cu"),
                         kernel_name, options=_OPTIONS)


def _arrays(*arrays):
    """The arrays as C-contiguous 2-d CuPy arrays of one dtype the kernels
    take, and that dtype's name; None where they are not."""
    import cupy

    dtype = str(getattr(arrays[0], "dtype", ""))
    if dtype not in _TYPES or not all(str(getattr(a, "dtype", "")) == dtype
                                      and getattr(a, "ndim", 0) == 2 for a in arrays):
        return None
    return [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays], dtype


def _faces(couplings, shape, dtype):
    """``(cx, cy)`` as contiguous CuPy arrays of the grid ``shape``, or None."""
    if len(couplings) != 2 or len(shape) != 2:
        return None
    got = _arrays(*couplings)
    if got is None or got[1] != dtype:
        return None
    ny, nx = shape
    cx, cy = got[0]
    if cx.shape != (ny, nx - 1) or cy.shape != (ny - 1, nx):
        return None
    return cx, cy


def smooth(couplings, inv_diagonal, b, x, degree, ratio):
    """Chebyshev smoothing (twin: ``multigrid.smooth``): ``degree`` launches."""
    import cupy as cp

    got = _arrays(inv_diagonal, b, *(() if x is None else (x,)))
    faces = None if got is None else _faces(couplings, b.shape, got[1])
    if faces is None or any(f.shape != b.shape for f in got[0]):
        return NotImplemented
    (inv_d, b, *rest), dtype = got
    cx, cy = faces
    x = rest[0] if rest else None
    real = _TYPES[dtype][1]
    ny, nx = b.shape
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    x_out, r, d, d_next = (cp.empty_like(b) for _ in range(4))
    _kernel(dtype, "bf_mg_cheb_start")(grid, block, (
        cx, cy, inv_d, b, b if x is None else x, x_out, r, d, np.int32(nx), np.int32(ny),
        np.int32(x is not None), real(inv_theta)))
    for a, c in steps:
        _kernel(dtype, "bf_mg_cheb_step")(grid, block, (
            cx, cy, inv_d, d, d_next, r, x_out, np.int32(nx), np.int32(ny), real(a), real(c)))
        d, d_next = d_next, d
    return x_out


def residual_restrict(couplings, b, x):
    """``P^T (b - A x)`` (twin: ``multigrid.residual_restrict``): one launch."""
    import cupy as cp

    got = _arrays(b, x)
    faces = None if got is None else _faces(couplings, b.shape, got[1])
    if faces is None or got[0][1].shape != b.shape:
        return NotImplemented
    (b, x), dtype = got
    cx, cy = faces
    ny, nx = b.shape
    ncy, ncx = (ny + 1) // 2, (nx + 1) // 2
    out = cp.empty((ncy, ncx), dtype=b.dtype)
    grid, block = cuda.grid_2d(ncx, ncy, _BLOCK)
    _kernel(dtype, "bf_mg_residual_restrict")(grid, block, (
        cx, cy, b, x, out, np.int32(nx), np.int32(ny), np.int32(ncx), np.int32(ncy)))
    return out


def prolong_add(x, xc, scale):
    """``x + scale P xc`` (twin: ``multigrid.prolong_add``): one launch."""
    import cupy as cp

    got = _arrays(x, xc)
    if got is None:
        return NotImplemented
    (x, xc), dtype = got
    ny, nx = x.shape
    if xc.shape != ((ny + 1) // 2, (nx + 1) // 2):
        return NotImplemented
    out = cp.empty_like(x)
    grid, block = cuda.grid_2d(nx, ny, _BLOCK)
    _kernel(dtype, "bf_mg_prolong_add")(grid, block, (
        x, xc, out, np.int32(nx), np.int32(ny), np.int32(xc.shape[1]),
        _TYPES[dtype][1](scale)))
    return out


def cycle_runner(levels, coarse_inverse, degree, ratio, scale, w_levels=0):
    """A :class:`GraphCycle` for the hierarchy (twin: ``multigrid.cycle_runner``),
    or NotImplemented where the kernels do not cover it (not 2-D, or a dtype
    they are not built for)."""
    first = levels[0]
    if len(first.shape) != 2 or str(first.inv_diagonal.dtype) not in _TYPES:
        return NotImplemented
    return GraphCycle(levels, coarse_inverse, degree, ratio, scale, w_levels)


class GraphCycle:
    """The V-cycle of a hierarchy on the GPU: the buffers of every level
    allocated once, the launch list built once and captured into a CUDA
    graph on the first :meth:`apply` (launched directly where capture fails).

    The launches are those of :func:`smooth`, :func:`residual_restrict` and
    :func:`prolong_add` in the order of ``Multigrid._cycle``, with the
    coarsest level's dense product as a kernel (``bf_mg_dense_matvec``), so
    a cycle costs one graph launch instead of some fifty launches and their
    host work.
    """

    def __init__(self, levels, coarse_inverse, degree, ratio, scale, w_levels=0):
        import cupy as cp

        self.cp = cp
        dtype = str(levels[0].inv_diagonal.dtype)
        real = _TYPES[dtype][1]
        kern = functools.partial(_kernel, dtype)
        inv_theta, steps = chebyshev_coefficients(degree, ratio)
        last = len(levels) - 1
        self.b = [cp.zeros(lv.shape, dtype=dtype) for lv in levels]
        self.x = [cp.zeros(lv.shape, dtype=dtype) for lv in levels]
        inner = levels[:-1]
        r, d, d2, xp_ = ([cp.zeros(lv.shape, dtype=dtype) for lv in inner] for _ in range(4))
        # The first coarse result of a level visited twice (W levels).
        acc = {k + 1: cp.zeros(levels[k + 1].shape, dtype=dtype)
               for k in range(min(int(w_levels), last - 1))}
        self.coarse_inverse = cp.ascontiguousarray(coarse_inverse)
        faces = [tuple(cp.ascontiguousarray(c) for c in lv.couplings) for lv in levels]
        self._keep = (r, d, d2, xp_, acc, faces)      # the graph holds their addresses
        launches = []

        def cells(k):
            ny, nx = levels[k].shape
            return cuda.grid_2d(nx, ny, _BLOCK), np.int32(nx), np.int32(ny)

        def flat(k):
            n = int(np.prod(levels[k].shape))
            return (max(1, min(-(-n // 256), 65535)),), (256,), np.int64(n)

        def smoothing(k, x_in):
            (grid, block), nx, ny = cells(k)
            cx, cy = faces[k]
            inv = levels[k].inv_diagonal
            launches.append((kern("bf_mg_cheb_start"), grid, block, (
                cx, cy, inv, self.b[k], self.b[k] if x_in is None else x_in, self.x[k], r[k],
                d[k], nx, ny, np.int32(x_in is not None), real(inv_theta))))
            da, db = d[k], d2[k]
            for a, c in steps:
                launches.append((kern("bf_mg_cheb_step"), grid, block, (
                    cx, cy, inv, da, db, r[k], self.x[k], nx, ny, real(a), real(c))))
                da, db = db, da

        def visit(k):
            """The launches of Multigrid._cycle(k, b[k]), its result in x[k]."""
            if k == last:
                n = int(self.coarse_inverse.shape[0])
                launches.append((kern("bf_mg_dense_matvec"), (max(1, -(-n // 8)),), (256,), (
                    self.coarse_inverse, self.b[k], self.x[k], np.int32(n))))
                return
            smoothing(k, None)
            (_, _), nx, ny = cells(k)
            ncy, ncx = levels[k + 1].shape
            grid, block = cuda.grid_2d(ncx, ncy, _BLOCK)
            launches.append((kern("bf_mg_residual_restrict"), grid, block, (
                *faces[k], self.b[k], self.x[k], self.b[k + 1], nx, ny, np.int32(ncx),
                np.int32(ncy))))
            visit(k + 1)
            if k + 1 in acc:
                fgrid, fblock, n = flat(k + 1)
                (cgrid, cblock), cnx, cny = cells(k + 1)
                launches.append((kern("bf_mg_copy"), fgrid, fblock, (self.x[k + 1], acc[k + 1], n)))
                launches.append((kern("bf_mg_residual_inplace"), cgrid, cblock, (
                    *faces[k + 1], self.x[k + 1], self.b[k + 1], cnx, cny)))
                visit(k + 1)
                launches.append((kern("bf_mg_add"), fgrid, fblock, (
                    self.x[k + 1], acc[k + 1], self.x[k + 1], n)))
            (grid, block), nx, ny = cells(k)
            launches.append((kern("bf_mg_prolong_add"), grid, block, (
                self.x[k], self.x[k + 1], xp_[k], nx, ny, np.int32(ncx), real(scale))))
            smoothing(k, xp_[k])

        visit(0)
        self.launches = launches
        self.graph = None
        self.capture_error = None
        self._captured = False

    def _launch(self):
        for kernel, grid, block, args in self.launches:
            kernel(grid, block, args)

    def _capture(self):
        cp = self.cp
        self._captured = True
        stream = cp.cuda.Stream(non_blocking=True)
        try:
            with stream:
                stream.begin_capture()
                try:
                    self._launch()
                finally:
                    graph = stream.end_capture()
            self.graph = graph
        except Exception as exc:             # capture unsupported: launch directly
            self.graph = None
            self.capture_error = repr(exc)

    def apply(self, r, shape):
        """``M^-1 r`` for ``r`` of any float dtype (the result has ``r``'s)."""
        cp = self.cp
        cp.copyto(self.b[0], r.reshape(shape), casting="unsafe")
        if not self._captured:
            self._capture()
        if self.graph is not None:
            self.graph.launch()
        else:
            self._launch()
        return self.x[0].astype(r.dtype, copy=True).reshape(r.shape)
