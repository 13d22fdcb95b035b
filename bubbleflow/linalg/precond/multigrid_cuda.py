"""CUDA twins of the multigrid cycle (CuPy, float64 or float32; 2-D tiles, 3-D cells).

Registered on the array code of :mod:`bubbleflow.linalg.precond.multigrid`
(the tests compare the two on the GPU); the kernels are ``multigrid.cu``
beside this file.  A level of the cycle is two kernels, each smoothing
tiles of cells in shared memory (the Chebyshev steps' vectors never reach
DRAM):

* :func:`smooth_restrict` (``bf_mg_down``): the pre-smoothing from zero and
  the restricted residual, reading the couplings and ``b``;
* :func:`prolong_smooth` (``bf_mg_up``): the prolongation, the add and the
  post-smoothing, reading the couplings, ``b``, ``x`` and the coarse ``x``;
* :func:`cycle_runner`: the whole cycle as a :class:`GraphCycle`, its
  buffers allocated once and its launches (the kernels above and a dense
  product on the coarsest level) replayed from one CUDA graph, or handed to
  the fused Krylov engine to capture with the iteration
  (:meth:`GraphCycle.device_launches`).

The kernels form ``D^-1`` from the couplings, and sum the stencil in
another order than the array code's flux form, so results agree to
rounding, not bit for bit.  They are compiled once per value type and
input type (``typedef double T; typedef double TI;``, or ``float`` for a
float32 cycle, whose finest level reads and writes ``TI = double``) and
degree (``#define MG_H``: the tile's halo).  Calls
they do not cover (another dtype, mixed dtypes, another dimension, a degree
whose tile would not fit the shared memory: above 3 in float64, 6 in
float32) return ``NotImplemented`` and the array code runs.
CuPy is imported inside the functions only.
"""
from __future__ import annotations

import numpy as np

from ...compute import cuda
from .chebyshev import chebyshev_coefficients

__all__ = ["smooth_restrict", "prolong_smooth", "cycle_runner", "GraphCycle"]

_OPTIONS = ("--fmad=false",)
#: Cells per tile (MG_TX, MG_TY in multigrid.cu) and threads per block.
_TILE = (32, 16)
_THREADS = 256
#: Dynamic shared memory a tile kernel may take without an opt-in: it
#: bounds the smoother's degree (the halo), 3 in float64 and 6 in float32.
_SHARED_LIMIT = 48 * 1024



@cuda.kernel_cache
def _kernel(dtype, io_dtype, degree, kernel_name):
    head = (f"typedef {cuda.CTYPE[dtype]} T;\ntypedef {cuda.CTYPE[io_dtype]} TI;\n"
            f"#define MG_H {int(degree)}\n")
    return cuda.function(head + cuda.source(__name__, "multigrid.cu"), kernel_name,
                         options=_OPTIONS)


def _shared_bytes(dtype, degree):
    """Dynamic shared memory of a tile kernel: seven arrays over the region."""
    tx, ty = _TILE
    return 7 * (tx + 2 * degree) * (ty + 2 * degree) * np.dtype(dtype).itemsize


def _tiles(shape):
    ny, nx = shape
    return (-(-nx // _TILE[0]), -(-ny // _TILE[1])), (_THREADS,)


def _coefficients(degree, ratio):
    """The kernels' ``coef``: ``[1 / theta, a_1, c_1, a_2, c_2, ...]``."""
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    return [inv_theta] + [v for step in steps for v in step]


def _covered(couplings, arrays, degree):
    """The dtype name if the kernels take these 2-d couplings and arrays
    (one dtype, the grid of the couplings, a degree they take), else None."""
    dtype = str(getattr(arrays[0], "dtype", ""))
    ok = (dtype in cuda.CTYPE and len(couplings) == 2 and int(degree) >= 1
          and _shared_bytes(dtype, degree) <= _SHARED_LIMIT
          and all(str(getattr(a, "dtype", "")) == dtype and getattr(a, "ndim", 0) == 2
                  for a in (*couplings, *arrays)))
    if not ok:
        return None
    ny, nx = arrays[0].shape
    cx, cy = couplings
    if cx.shape != (ny, nx - 1) or cy.shape != (ny - 1, nx) or -(-ny // _TILE[1]) > 65535:
        return None
    return dtype


def _contiguous(*arrays):
    import cupy

    return [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays]


def _down(dtype, io_dtype, faces, b, io_scale, coef, x, bc, degree, stop):
    """The launch tuple of ``bf_mg_down`` on one level."""
    ny, nx = b.shape
    ncy, ncx = bc.shape
    grid, block = _tiles(b.shape)
    return (_kernel(dtype, io_dtype, degree, "bf_mg_down"), grid, block,
            (*faces, b, io_scale, coef, x, bc, np.int32(nx), np.int32(ny), np.int32(ncx),
             np.int32(ncy), stop),
            _shared_bytes(dtype, degree))


def _up(dtype, io_dtype, faces, b, io_scale, x, xc, coef, out, scale, degree, stop):
    """The launch tuple of ``bf_mg_up`` on one level."""
    ny, nx = b.shape
    grid, block = _tiles(b.shape)
    return (_kernel(dtype, io_dtype, degree, "bf_mg_up"), grid, block,
            (*faces, b, io_scale, x, xc, coef, out, np.int32(nx), np.int32(ny),
             np.int32(xc.shape[1]),
             np.dtype(dtype).type(scale), stop), _shared_bytes(dtype, degree))


def _run(launch):
    kernel, grid, block, args, shared = launch
    kernel(grid, block, args, shared_mem=shared)


def smooth_restrict(couplings, inv_diagonal, b, degree, ratio):
    """``(x, P^T (b - A x))`` with ``x`` the smoothing from zero (twin:
    ``multigrid.smooth_restrict``): one launch.  ``D^-1`` is formed from
    the couplings (``inv_diagonal`` is the array code's)."""
    import cupy as cp

    if len(couplings) == 3:
        return _smooth_restrict_3d(couplings, inv_diagonal, b, degree, ratio)
    dtype = _covered(couplings, (b,), degree)
    if dtype is None:
        return NotImplemented
    faces = _contiguous(*couplings)
    (b,) = _contiguous(b)
    ny, nx = b.shape
    x = cp.empty_like(b)
    bc = cp.empty(((ny + 1) // 2, (nx + 1) // 2), dtype=b.dtype)
    coef = cp.asarray(_coefficients(degree, ratio), dtype=dtype)
    _run(_down(dtype, dtype, faces, b, cp.ones(2), coef, x, bc, degree, cp.zeros(1)))
    return x, bc


def prolong_smooth(couplings, inv_diagonal, b, x, xc, scale, degree, ratio):
    """The smoothing from ``x + scale P xc`` (twin: ``multigrid.prolong_smooth``):
    one launch."""
    import cupy as cp

    if len(couplings) == 3:
        return _prolong_smooth_3d(couplings, inv_diagonal, b, x, xc, scale, degree, ratio)
    dtype = _covered(couplings, (b, x), degree)
    if dtype is None or str(xc.dtype) != dtype or xc.shape != ((b.shape[0] + 1) // 2,
                                                               (b.shape[1] + 1) // 2):
        return NotImplemented
    faces = _contiguous(*couplings)
    b, x, xc = _contiguous(b, x, xc)
    out = cp.empty_like(b)
    coef = cp.asarray(_coefficients(degree, ratio), dtype=dtype)
    _run(_up(dtype, dtype, faces, b, cp.ones(2), x, xc, coef, out, scale, degree,
             cp.zeros(1)))
    return out


# ------------------------------------------------------------------- 3-D
# One kernel per Chebyshev step (multigrid3d.cu), cells in parallel: the
# steps' vectors go through DRAM (no tiles in shared memory yet), but a
# level's visit is 3 launches down and 2 up instead of the array code's
# dozens.

@cuda.kernel_cache
def _kernel_3d(dtype, name):
    code = f"typedef {cuda.CTYPE[dtype]} T;\n" + cuda.source(__name__, "multigrid3d.cu")
    return cuda.raw_kernel(code, name, options=_OPTIONS)


def _covered_3d(couplings, arrays):
    """The dtype name if the 3-D kernels take these couplings and arrays
    (one float dtype, C-contiguous, the grid of the couplings), else None."""
    dtype = str(getattr(arrays[0], "dtype", ""))
    if dtype not in cuda.CTYPE or any(str(getattr(a, "dtype", "")) != dtype
                                      or getattr(a, "ndim", 0) != 3
                                      for a in (*couplings, *arrays)):
        return None
    nz, ny, nx = arrays[0].shape
    expected = ((nz, ny, nx - 1), (nz, ny - 1, nx), (nz - 1, ny, nx))
    if any(c.shape != e for c, e in zip(couplings, expected)) or any(
            a.shape != (nz, ny, nx) for a in arrays):
        return None
    return dtype


def _smooth_3d(dtype, faces, inv_diagonal, b, x, xc, scale, degree, ratio):
    """``degree`` Chebyshev steps on ``A x = b`` from ``x + scale P xc`` (or
    from zero); returns the new ``x``."""
    import cupy as cp

    nz, ny, nx = b.shape
    ncx, ncy = (xc.shape[2], xc.shape[1]) if xc is not None else (0, 0)
    has_x = x is not None
    x = x if has_x else b                  # (not read without has_x)
    xc = xc if xc is not None else b       # (not read with ncx = 0)
    t = np.dtype(dtype).type
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    r, d, d_next, out = (cp.empty_like(b) for _ in range(4))
    n = nx * ny * nz
    dims = (np.int32(nx), np.int32(ny), np.int32(nz))
    cuda.launch_1d(_kernel_3d(dtype, "bf_mg3_start"), n,
                   (*faces, inv_diagonal, b, x, xc, t(scale), t(inv_theta), r, d, out, *dims,
                    np.int32(ncx), np.int32(ncy), np.int32(has_x)))
    step = _kernel_3d(dtype, "bf_mg3_step")
    for a, c in steps:
        cuda.launch_1d(step, n, (*faces, inv_diagonal, d, r, out, d_next, t(a), t(c), *dims))
        d, d_next = d_next, d
    return out


def _smooth_restrict_3d(couplings, inv_diagonal, b, degree, ratio):
    import cupy as cp

    dtype = _covered_3d(couplings, (b, inv_diagonal))
    if dtype is None:
        return NotImplemented
    faces = _contiguous(*couplings)
    b, inv_diagonal = _contiguous(b, inv_diagonal)
    x = _smooth_3d(dtype, faces, inv_diagonal, b, None, None, 0.0, degree, ratio)
    nz, ny, nx = b.shape
    coarse = ((nz + 1) // 2, (ny + 1) // 2, (nx + 1) // 2)
    bc = cp.empty(coarse, dtype=b.dtype)
    cuda.launch_1d(_kernel_3d(dtype, "bf_mg3_residual_restrict"), bc.size,
                   (*faces, b, x, bc, np.int32(nx), np.int32(ny), np.int32(nz),
                    np.int32(coarse[2]), np.int32(coarse[1]), np.int32(coarse[0])))
    return x, bc


def _prolong_smooth_3d(couplings, inv_diagonal, b, x, xc, scale, degree, ratio):
    dtype = _covered_3d(couplings, (b, inv_diagonal, x))
    nz, ny, nx = b.shape
    if dtype is None or str(xc.dtype) != dtype or xc.shape != ((nz + 1) // 2, (ny + 1) // 2,
                                                               (nx + 1) // 2):
        return NotImplemented
    faces = _contiguous(*couplings)
    b, inv_diagonal, x, xc = _contiguous(b, inv_diagonal, x, xc)
    return _smooth_3d(dtype, faces, inv_diagonal, b, x, xc, scale, degree, ratio)


def cycle_runner(levels, coarse_inverse, degree, ratio, scale, w_levels=0, io_scale=None):
    """A :class:`GraphCycle` for the hierarchy (twin: ``multigrid.cycle_runner``),
    or NotImplemented where the kernels do not cover it."""
    first = levels[0]
    dtype = str(first.inv_diagonal.dtype)
    if len(levels) > 1 and _covered(first.couplings, (first.inv_diagonal,), degree) is None:
        return NotImplemented
    if dtype not in cuda.CTYPE or len(first.shape) != 2:
        return NotImplemented
    return GraphCycle(levels, coarse_inverse, degree, ratio, scale, w_levels, io_scale)


class GraphCycle:
    """The cycle of a hierarchy on the GPU: the buffers of every level
    allocated once, its launches built once and captured into a CUDA graph
    on the first :meth:`apply` (launched directly where capture fails).

    The launches follow ``Multigrid._cycle``: per level ``bf_mg_down``, the
    coarse level's cycle (twice on a W level, with a residual, a copy and an
    add between), ``bf_mg_up``; the coarsest level's dense product as a
    kernel (``bf_mg_dense_matvec``).  The arrays of the hierarchy are read
    where they are, so :meth:`Multigrid.refresh` rewriting them in place
    keeps the launches (and the graphs holding them) valid.
    """

    def __init__(self, levels, coarse_inverse, degree, ratio, scale, w_levels=0, io_scale=None):
        import cupy as cp

        self.cp = cp
        self.levels, self.degree, self.scale = levels, int(degree), float(scale)
        self.dtype = dtype = str(levels[0].inv_diagonal.dtype)
        self.shape = tuple(levels[0].shape)
        self.coef = cp.asarray(_coefficients(degree, ratio), dtype=dtype)
        self.w_levels = min(int(w_levels), len(levels) - 2)
        # Each level's right-hand side and result; the finest level's are the
        # caller's (cycle_launches), but for a one-level hierarchy of another
        # type than the caller's (its cast buffers).
        self.b, self.x = ([cp.zeros(lv.shape, dtype=dtype) if k or len(levels) == 1 else None
                           for k, lv in enumerate(levels)] for _ in range(2))
        self.xs = [cp.zeros(lv.shape, dtype=dtype) for lv in levels[:-1]]   # pre-smoothed
        # The first coarse result of a level visited twice (W levels).
        self.acc = {k + 1: cp.zeros(levels[k + 1].shape, dtype=dtype)
                    for k in range(max(self.w_levels, 0))}
        self.coarse_inverse = coarse_inverse
        # The finest level's input and output scales (Multigrid.prepare
        # writes them), and the coarse levels' ones.
        self.io_scale = cp.ones(2) if io_scale is None else io_scale
        self.unit_scale = cp.ones(2)
        self.never = cp.zeros(1)               # a stop flag that is never set
        for lv in levels:
            if not all(c.flags.c_contiguous for c in lv.couplings):
                lv.couplings = tuple(cp.ascontiguousarray(c) for c in lv.couplings)
        self.launches = None                   # apply's own: built at its first call
        self._by_buffers = {}
        self.graph = None
        self.capture_error = None
        self._captured = False

    def cycle_launches(self, b0, x0, stop=None):
        """The launch tuples ``(kernel, grid, block, args, shared_mem)`` of
        one cycle reading the finest level's right-hand side from ``b0`` and
        writing its result into ``x0`` (grid-shaped CuPy arrays of the
        cycle's dtype, or float64 ones for a float32 cycle).  ``stop``: a
        float64 device flag; where its first value is not zero the level
        kernels return at once (a Krylov engine's done flag)."""
        stop = self.never if stop is None else stop
        dtype, levels, last = self.dtype, self.levels, len(self.levels) - 1
        io0 = str(b0.dtype)
        launches = []

        def flat(k):
            n = int(np.prod(levels[k].shape))
            return (max(1, min(-(-n // 256), 65535)),), (256,), np.int64(n)

        def visit(k, b, x):
            io = io0 if k == 0 else dtype
            kernel = lambda name, of=dtype: _kernel(dtype, of, self.degree, name)   # noqa: E731
            if k == last:
                grid, block, cells = flat(k)
                if io != dtype:         # a one-level hierarchy of another type
                    launches.append((kernel("bf_mg_to_level", io), grid, block,
                                     (b, self.b[k], cells), 0))
                    b = self.b[k]
                out = x if io == dtype else self.x[k]
                launches.append((kernel("bf_mg_dense_matvec"),
                                 (max(1, -(-int(cells) // 8)),), (256,),
                                 (self.coarse_inverse, b, out, np.int32(cells)), 0))
                if io != dtype:
                    launches.append((kernel("bf_mg_from_level", io), grid, block,
                                     (out, x, cells), 0))
                return
            faces = levels[k].couplings
            io_scale = self.io_scale if k == 0 else self.unit_scale
            launches.append(_down(dtype, io, faces, b, io_scale, self.coef, self.xs[k],
                                  self.b[k + 1], self.degree, stop))
            visit(k + 1, self.b[k + 1], self.x[k + 1])
            if k + 1 in self.acc:
                grid, block, n = flat(k + 1)
                ny, nx = levels[k + 1].shape
                cgrid, cblock = cuda.grid_2d(nx, ny, (32, 8))
                launches.append((kernel("bf_mg_copy"), grid, block,
                                 (self.x[k + 1], self.acc[k + 1], n), 0))
                launches.append((kernel("bf_mg_residual_inplace"), cgrid, cblock, (
                    *levels[k + 1].couplings, self.x[k + 1], self.b[k + 1], np.int32(nx),
                    np.int32(ny)), 0))
                visit(k + 1, self.b[k + 1], self.x[k + 1])
                launches.append((kernel("bf_mg_add"), grid, block,
                                 (self.x[k + 1], self.acc[k + 1], self.x[k + 1], n), 0))
            launches.append(_up(dtype, io, faces, b, io_scale, self.xs[k], self.x[k + 1],
                                self.coef, x, self.scale, self.degree, stop))

        visit(0, b0, x0)
        return launches

    def device_launches(self, src, dst, stop=None):
        """The launches of ``dst = M^-1 src`` for flat float64 CuPy buffers
        of a Krylov engine, skipped once its flag ``stop`` is set (kept from
        call to call: built once per set of buffers)."""
        key = (int(src.data.ptr), int(dst.data.ptr), 0 if stop is None else int(stop.data.ptr))
        if key not in self._by_buffers:
            self._by_buffers[key] = self.cycle_launches(src.reshape(self.shape),
                                                        dst.reshape(self.shape), stop)
        return self._by_buffers[key]

    def _capture(self):
        cp = self.cp
        self._captured = True
        stream = cp.cuda.Stream(non_blocking=True)
        try:
            with stream:
                stream.begin_capture()
                try:
                    for launch in self.launches:
                        _run(launch)
                finally:
                    graph = stream.end_capture()
            self.graph = graph
        except Exception as exc:             # capture unsupported: launch directly
            self.graph = None
            self.capture_error = repr(exc)

    def apply(self, r, shape):
        """``M^-1 r`` for ``r`` of any float dtype (the result has ``r``'s):
        ``r`` staged into a float64 buffer, the cycle replayed from its graph
        (the launches of :meth:`device_launches` on these buffers)."""
        cp = self.cp
        if self.launches is None:
            self._src, self._dst = (cp.empty(self.shape) for _ in range(2))
            self.launches = self.cycle_launches(self._src, self._dst)
        cp.copyto(self._src, r.reshape(shape), casting="unsafe")
        if not self._captured:
            self._capture()
        if self.graph is not None:
            self.graph.launch()
        else:
            for launch in self.launches:
                _run(launch)
        return self._dst.astype(r.dtype, copy=True).reshape(r.shape)
