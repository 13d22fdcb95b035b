"""CUDA twins of the multigrid cycle (CuPy, float64 or float32; 2-D and 3-D).

Registered on the array code of :mod:`bubbleflow.linalg.precond.multigrid`
(the tests compare the two on the GPU); the kernels are ``multigrid.cu``
(2-D) and ``multigrid3d.cu`` (3-D) beside this file.  A level of the cycle
is two kernels, each smoothing on chip (the Chebyshev steps' vectors never
reach DRAM): in 2-D tiles of cells held in registers, a column of the tile
a lane, in 3-D xy tiles in shared memory that stream up the planes (a
pipeline of the steps, :file:`multigrid3d.cu`):

* :func:`smooth_restrict` (``bf_mg_down``, ``bf_mg3_down``): the
  pre-smoothing from zero and the restricted residual, reading the
  couplings and ``b``;
* :func:`prolong_smooth` (``bf_mg_up``, ``bf_mg3_up``): the prolongation,
  the add and the post-smoothing, reading the couplings, ``b``, ``x`` and
  the coarse ``x``;
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
they do not cover (another dtype, mixed dtypes, a degree whose tile would
not fit the registers or the shared memory: above 3 in float64 and 6 in
float32 in 2-D, above 2 in float64 and 3 in float32 in 3-D) return
``NotImplemented`` and the array code runs.  CuPy is imported inside the functions only.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...compute import cuda
from .chebyshev import chebyshev_coefficients

__all__ = ["smooth_restrict", "prolong_smooth", "cycle_runner", "GraphCycle", "level_kernel",
           "chebyshev_coef", "covered", "down_launch", "up_launch", "residual_launch",
           "run_launch"]

_OPTIONS = ("--fmad=false",)
#: A 2-D block: _WARPS warps, each holding _ROWS rows of a region 32 cells
#: wide (MG_WARPS, MG_R in multigrid.cu); its tile is the region less the
#: degree on every side (_tile_2d).
_WARPS, _ROWS = 8, 5
_THREADS = 32 * _WARPS
#: The largest degree a 2-D tile kernel takes, per value type: a cell's nine
#: values live in registers (a float64's in two each).
_MAX_DEGREE_2D = {"float64": 3, "float32": 6}
#: A 2-D level's kernels index with 32-bit offsets: its cells stay below this.
_MAX_CELLS_2D = 2 ** 31 - 1
#: The columns of a 3-D xy tile (MG3_TX, MG3_TY in multigrid3d.cu).
_TILE_3D = (32, 8)
#: A 3-D level's kernels index with 32-bit offsets: a level's cells plus the
#: planes its pipeline reads ahead past its top (degree + 1) stay within this.
_MAX_CELLS_3D = 2 ** 31 - 1
#: Shared memory a tile kernel may take without an opt-in: it bounds the
#: smoother's degree (the halo).
_SHARED_LIMIT = 48 * 1024
#: A 3-D level's z chunks: as many as make about this many blocks (its
#: pipeline restarts 2 * degree planes below each chunk; chosen, not tuned),
#: none shorter than _MIN_CHUNK planes (4 measured against 16:
#: docs/performance_records.md).
_BLOCKS_3D = 1024
_MIN_CHUNK = 4


@cuda.kernel_cache
def level_kernel(dtype, io_dtype, degree, kernel_name, tile=None):
    head = (f"typedef {cuda.CTYPE[dtype]} T;\ntypedef {cuda.CTYPE[io_dtype]} TI;\n"
            f"#define MG_H {int(degree)}\n")
    source = "multigrid.cu"
    if kernel_name.startswith("bf_mg3_"):
        source = "multigrid3d.cu"
        head += f"#define MG3_TX {tile[0]}\n#define MG3_TY {tile[1]}\n"
    return cuda.function(head + cuda.source(__name__, source), kernel_name, options=_OPTIONS)


def _shared_bytes_3d(dtype, degree):
    """Shared memory of a 3-D tile kernel (Mg3Shared): the ring of coupling
    planes (two arrays of a power of two of at least degree + 1 planes), two
    planes per stage but the last and two residual planes over the widened
    xy tile.  (A 2-D kernel's, the rows its warps share, is a few KiB at
    any degree: its registers bound the degree, :data:`_MAX_DEGREE_2D`.)"""
    item = np.dtype(dtype).itemsize
    tx, ty = _TILE_3D
    slots = 2 if degree < 2 else (4 if degree < 4 else 8)      # MG3_SLOTS
    planes = 2 * slots + 2 * degree + 2
    return planes * (tx + 2 * degree) * (ty + 2 * degree) * item


def _tile_2d(degree):
    """Cells of a 2-D tile (MG_TX, MG_TY in multigrid.cu)."""
    return 32 - 2 * int(degree), _WARPS * _ROWS - 2 * int(degree)


def _tiles(shape, degree):
    ny, nx = shape
    tx, ty = _tile_2d(degree)
    return (-(-nx // tx), -(-ny // ty)), (_THREADS,)


def _tiles_3d(shape, degree):
    """``(grid, block, chunk)`` of a 3-D level: xy tiles times z chunks of
    ``chunk`` planes (even: a chunk holds whole aggregates)."""
    nz, ny, nx = shape
    tx, ty = _TILE_3D
    tiles = (-(-nx // tx), -(-ny // ty))
    chunks = max(1, min(-(-_BLOCKS_3D // (tiles[0] * tiles[1])), nz // _MIN_CHUNK))
    chunk = -(-nz // chunks)
    chunk += chunk % 2
    threads = (tx + 2 * degree) * (ty + 2 * degree)
    return (*tiles, -(-nz // chunk)), (threads,), chunk


def chebyshev_coef(degree, ratio):
    """The kernels' ``coef``: ``[1 / theta, a_1, c_1, a_2, c_2, ...]``."""
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    return [inv_theta] + [v for step in steps for v in step]


def covered(couplings, arrays, degree):
    """The dtype name if the kernels take these couplings and arrays (one
    dtype, 2-D or 3-D, the grid of the couplings, a degree whose tile fits),
    else None."""
    dtype = str(getattr(arrays[0], "dtype", ""))
    ndim = getattr(arrays[0], "ndim", 0)
    ok = (dtype in cuda.CTYPE and ndim in (2, 3) and len(couplings) == ndim
          and int(degree) >= 1
          and (_shared_bytes_3d(dtype, int(degree)) <= _SHARED_LIMIT if ndim == 3
               else int(degree) <= _MAX_DEGREE_2D.get(dtype, 0))
          and all(str(getattr(a, "dtype", "")) == dtype and getattr(a, "ndim", 0) == ndim
                  for a in (*couplings, *arrays)))
    if not ok:
        return None
    shape = arrays[0].shape
    if any(a.shape != shape for a in arrays):
        return None
    for axis, c in enumerate(couplings):            # x, y[, z]: array axes reversed
        expected = list(shape)
        expected[ndim - 1 - axis] -= 1
        if c.shape != tuple(expected):
            return None
    if ndim == 2 and int(np.prod(shape, dtype=np.int64)) > _MAX_CELLS_2D:
        return None
    if ndim == 3 and (int(np.prod(shape, dtype=np.int64))
                      + (int(degree) + 1) * shape[1] * shape[2]) > _MAX_CELLS_3D:
        return None
    tiles_y = -(-shape[-2] // (_tile_2d(degree)[1] if ndim == 2 else _TILE_3D[1]))
    return dtype if tiles_y <= 65535 else None


def _contiguous(*arrays):
    import cupy

    return [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays]


def down_launch(dtype, io_dtype, faces, b, io_scale, coef, x, bc, degree, stop):
    """The launch tuple of ``bf_mg_down`` (``bf_mg3_down``) on one level
    (static shared memory: none dynamic)."""
    if b.ndim == 3:
        nz, ny, nx = b.shape
        grid, block, chunk = _tiles_3d(b.shape, degree)
        return (level_kernel(dtype, io_dtype, degree, "bf_mg3_down", _TILE_3D), grid, block,
                (*faces, b, io_scale, coef, x, bc, np.int32(nx), np.int32(ny), np.int32(nz),
                 np.int32(bc.shape[2]), np.int32(bc.shape[1]), np.int32(chunk), stop), 0)
    ny, nx = b.shape
    ncy, ncx = bc.shape
    grid, block = _tiles(b.shape, degree)
    return (level_kernel(dtype, io_dtype, degree, "bf_mg_down"), grid, block,
            (*faces, b, io_scale, coef, x, bc, np.int32(nx), np.int32(ny), np.int32(ncx),
             np.int32(ncy), stop), 0)


def up_launch(dtype, io_dtype, faces, b, io_scale, x, xc, coef, out, scale, degree, stop,
              first=None):
    """The launch tuple of ``bf_mg_up`` (``bf_mg3_up``) on one level; with
    ``first`` (a W level's coarse level visited the second time: the first
    visit's result) ``bf_mg_up_sum`` (``bf_mg3_up_sum``), whose ``out`` is
    the sum of both results, so no launch adds them."""
    value = np.dtype(dtype).type(scale)
    summed = () if first is None else (first,)
    suffix = "" if first is None else "_sum"
    if b.ndim == 3:
        nz, ny, nx = b.shape
        grid, block, chunk = _tiles_3d(b.shape, degree)
        return (level_kernel(dtype, io_dtype, degree, "bf_mg3_up" + suffix, _TILE_3D), grid,
                block, (*faces, b, io_scale, x, xc, coef, out, *summed, np.int32(nx),
                        np.int32(ny), np.int32(nz), np.int32(xc.shape[2]),
                        np.int32(xc.shape[1]), np.int32(chunk), value, stop), 0)
    ny, nx = b.shape
    grid, block = _tiles(b.shape, degree)
    return (level_kernel(dtype, io_dtype, degree, "bf_mg_up" + suffix), grid, block,
            (*faces, b, io_scale, x, xc, coef, out, *summed, np.int32(nx), np.int32(ny),
             np.int32(xc.shape[1]), value, stop), 0)


def residual_launch(dtype, degree, couplings, x, b):
    """The launch tuple of ``b -= A x`` on one level (a W level's second visit)."""
    if b.ndim == 3:
        nz, ny, nx = b.shape
        grid, block = cuda.grid_2d(nx, ny * nz, (32, 8))
        return (level_kernel(dtype, dtype, degree, "bf_mg3_residual_inplace", _TILE_3D),
                grid, block, (*couplings, x, b, np.int32(nx), np.int32(ny), np.int32(nz)), 0)
    ny, nx = b.shape
    grid, block = cuda.grid_2d(nx, ny, (32, 8))
    return (level_kernel(dtype, dtype, degree, "bf_mg_residual_inplace"), grid, block,
            (*couplings, x, b, np.int32(nx), np.int32(ny)), 0)


def run_launch(launch):
    kernel, grid, block, args, shared = launch
    kernel(grid, block, args, shared_mem=shared)


def _coarse_shape(shape):
    return tuple((n + 1) // 2 for n in shape)


def smooth_restrict(couplings, inv_diagonal, b, degree, ratio):
    """``(x, P^T (b - A x))`` with ``x`` the smoothing from zero (twin:
    ``multigrid.smooth_restrict``): one launch.  ``D^-1`` is formed from
    the couplings (``inv_diagonal`` is the array code's)."""
    import cupy as cp

    dtype = covered(couplings, (b,), degree)
    if dtype is None:
        return NotImplemented
    faces = _contiguous(*couplings)
    (b,) = _contiguous(b)
    x = cp.empty_like(b)
    bc = cp.empty(_coarse_shape(b.shape), dtype=b.dtype)
    coef = cp.asarray(chebyshev_coef(degree, ratio), dtype=dtype)
    run_launch(down_launch(dtype, dtype, faces, b, cp.ones(2), coef, x, bc, degree, cp.zeros(1)))
    return x, bc


def prolong_smooth(couplings, inv_diagonal, b, x, xc, scale, degree, ratio):
    """The smoothing from ``x + scale P xc`` (twin: ``multigrid.prolong_smooth``):
    one launch."""
    import cupy as cp

    dtype = covered(couplings, (b, x), degree)
    if dtype is None or str(xc.dtype) != dtype or xc.shape != _coarse_shape(b.shape):
        return NotImplemented
    faces = _contiguous(*couplings)
    b, x, xc = _contiguous(b, x, xc)
    out = cp.empty_like(b)
    coef = cp.asarray(chebyshev_coef(degree, ratio), dtype=dtype)
    run_launch(up_launch(dtype, dtype, faces, b, cp.ones(2), x, xc, coef, out, scale, degree,
             cp.zeros(1)))
    return out


def cycle_runner(levels, coarse_inverse, degree, ratio, scale, w_levels=0, io_scale=None):
    """A :class:`GraphCycle` for the hierarchy (twin: ``multigrid.cycle_runner``),
    or NotImplemented where the kernels do not cover it."""
    first = levels[0]
    dtype = str(first.inv_diagonal.dtype)
    if len(levels) > 1 and covered(first.couplings, (first.inv_diagonal,), degree) is None:
        return NotImplemented
    if dtype not in cuda.CTYPE or len(first.shape) not in (2, 3):
        return NotImplemented
    return GraphCycle(levels, coarse_inverse, degree, ratio, scale, w_levels, io_scale)


class GraphCycle:
    """The cycle of a hierarchy on the GPU: the buffers of every level
    allocated once, its launches built once and captured into a CUDA graph
    on the first :meth:`apply` (launched directly where capture fails).

    The launches follow ``Multigrid._cycle``: per level ``bf_mg_down``, the
    coarse level's cycle (twice on a W level: a residual between, the second
    visit's last ``bf_mg_up`` adding the first result as it writes the
    sum), ``bf_mg_up``; the coarsest level's dense product as a
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
        # The cycle's two sources (the levels', the coarsest product's) are
        # fetched one after the other by its first launches: compile them
        # side by side.
        first = ("bf_mg3_down", _TILE_3D) if len(self.shape) == 3 else ("bf_mg_down", None)
        cuda.build_in_background(
            partial(level_kernel, dtype, dtype, self.degree, *first),
            partial(level_kernel, dtype, dtype, self.degree, "bf_mg_dense_matvec"))
        self.coef = cp.asarray(chebyshev_coef(degree, ratio), dtype=dtype)
        self.w_levels = min(int(w_levels), len(levels) - 2)
        # Each level's right-hand side and result; the finest level's are the
        # caller's (cycle_launches), but for a one-level hierarchy of another
        # type than the caller's (its cast buffers).
        self.b, self.x = ([cp.zeros(lv.shape, dtype=dtype) if k or len(levels) == 1 else None
                           for k, lv in enumerate(levels)] for _ in range(2))
        self.xs = [cp.zeros(lv.shape, dtype=dtype) for lv in levels[:-1]]   # pre-smoothed
        # The sum of the two coarse results of a level visited twice (W levels).
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

        def visit(k, b, x, first=None):
            io = io0 if k == 0 else dtype
            kernel = lambda name, of=dtype: level_kernel(dtype, of, self.degree, name)   # noqa: E731
            if k == last:               # (never a second visit: w_levels < len(levels) - 1)
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
            launches.append(down_launch(dtype, io, faces, b, io_scale, self.coef, self.xs[k],
                                  self.b[k + 1], self.degree, stop))
            visit(k + 1, self.b[k + 1], self.x[k + 1])
            coarse = self.x[k + 1]
            if k + 1 in self.acc:
                launches.append(residual_launch(dtype, self.degree, levels[k + 1].couplings,
                                          self.x[k + 1], self.b[k + 1]))
                coarse = self.acc[k + 1]
                visit(k + 1, self.b[k + 1], coarse, first=self.x[k + 1])
            launches.append(up_launch(dtype, io, faces, b, io_scale, self.xs[k], coarse,
                                self.coef, x, self.scale, self.degree, stop, first=first))

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
                        run_launch(launch)
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
                run_launch(launch)
        return self._dst.astype(r.dtype, copy=True).reshape(r.shape)
