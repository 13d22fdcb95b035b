"""Multigrid for the pressure operator: a symmetric V-cycle used as a CG preconditioner.

The hierarchy is built from the face couplings of the grid operator, for any
number of dimensions:

* **Coarsening.** Cells are aggregated 2 per axis (a last odd cell is an
  aggregate of its own along that axis).  The prolongation ``P`` is piecewise
  constant and the restriction is ``P^T``.
* **Coarse operators.** Galerkin, ``A_c = P^T A P``.  For the 5-point (7-point)
  operator this is again a 5-point (7-point) operator: a coarse face's
  coupling is the sum of the fine couplings across it.  A density jump of
  any size therefore stays where it is on every level, and the rows still
  sum to zero, so the constants stay the null space.
* **Smoother.** A Chebyshev polynomial in ``D^-1 A`` over
  ``[lmax / ratio, lmax]``.  ``lmax = 2`` is Gershgorin's bound for a
  matrix whose rows sum to zero, so nothing has to be estimated, whatever
  the contrast.  It needs only matrix products and is the same before and
  after the coarse correction, so the cycle is symmetric.
* **Coarsest level.** Solved directly: the dense inverse of
  ``A_c + mean(diag) / n * 1 1^T``, which is nonsingular.  For a compatible
  right-hand side (zero sum, which every level's residual keeps) it gives
  the solution with zero mean.
* **Coarse correction.** Piecewise-constant Galerkin coarse spaces are too
  weak for the smooth error by a factor of about 2 per level (Braess 1995;
  Notay's aggregation AMG).  The correction is therefore scaled by ``scale``
  (over-correction), which keeps the cycle symmetric.

The set-up runs on the operator's backend (NumPy or CuPy) and makes no
host round trip but to size the levels; :meth:`Multigrid.refresh` redoes
it for a new operator on the same grid in place.  A level's set-up is two
twins, :func:`coarsen_couplings` and :func:`level_arrays`, and where a
coarser level follows, :func:`level_and_coarser` does both (on CuPy one
kernel a level, :mod:`.multigrid_setup_cuda`).  A cycle is two
twins per level, :func:`smooth_restrict` (down) and :func:`prolong_smooth`
(up), and a dense product on the coarsest level: no host synchronisation.
On CuPy in 2-D each twin is one kernel that smooths tiles held in
registers (:mod:`.multigrid_cuda`), and the whole cycle (:func:`cycle_runner`) is
those kernels on buffers allocated once, replayed from one CUDA graph or
captured with the Krylov iteration (:meth:`Multigrid.device_launches`).
"""
from __future__ import annotations

import math

import numpy as np

from . import multigrid_cuda, multigrid_setup_cuda
from .chebyshev import chebyshev_coefficients
from .coarsest_solve import HostCoarseSolve, coarse_solve, coarse_solve_bytes
from ...compute.backend import backend_of
from ...compute.held_capture import keyed_replays
from ...compute.twins import twin
from ...mesh.grid import array_axis
from ...operators.poisson import apply_faces, centre_from_couplings
from ..deflation.dense_inverses import raise_failed_inverses
from .base import Preconditioner, require_grid_operator

#: The precisions a cycle can run in (``cycle_precision``).
CYCLE_PRECISIONS = ("float64", "float32")
#: :attr:`Multigrid.min_side` applies to levels of at most this many cells.
MIN_SIDE_CELLS = 1024
#: ``w_levels="auto"``: a level visits its coarse level twice where that
#: coarse level has at least this many cells...
W_AUTO_CELLS = 2 ** 18
#: ... on at most this many top levels: a fourth W level visits the levels
#: below it sixteen times a cycle for no fewer iterations
#: (docs/performance_records.md).
W_AUTO_MAX = 3
#: ``coarse_refresh="auto"``: the coarsest level's inverse is recomputed
#: once the interface may have moved this fraction of a coarsest cell since
#: it was (below it a stale inverse costs an iteration or none:
#: docs/performance_records.md)...
COARSE_MOVE_FRACTION = 0.125
#: ... but not before it may have moved this many finest cells (a shallow
#: hierarchy's coarsest cells are few finest ones across)...
COARSE_MOVE_CELLS = 0.5
#: ... and at the latest after this many refreshes.
COARSE_REFRESH_AUTO_MAX = 16

__all__ = ["Multigrid", "CYCLE_PRECISIONS", "coarsen_couplings", "coarsen_axis", "level_shapes",
           "level_arrays", "level_and_coarser",
           "auto_w_levels", "W_AUTO_MAX", "check_coarse_refresh", "COARSE_MOVE_CELLS",
           "COARSE_MOVE_FRACTION",
           "COARSE_REFRESH_AUTO_MAX", "restrict", "prolong", "smooth",
           "residual_restrict", "prolong_add", "smooth_restrict", "prolong_smooth",
           "cycle_runner", "chebyshev_coefficients", "cycle_bytes"]

def _pair_sum(a, axis, xp):
    """Sums of consecutive pairs along array axis ``axis`` (zero-padded to even)."""
    n = a.shape[axis]
    if n % 2:
        pad = [(0, 0)] * a.ndim
        pad[axis] = (0, 1)
        a = xp.pad(a, pad)
        n += 1
    shape = a.shape[:axis] + (n // 2, 2) + a.shape[axis + 1:]
    return a.reshape(shape).sum(axis=axis + 1)


@twin
def coarsen_couplings(couplings, xp):
    """Face couplings of ``P^T A P`` (2 cells per axis aggregated) from the
    fine ones, per axis (x, y[, z]; array axes reversed)."""
    ndim = len(couplings)
    return [coarsen_axis(c, array_axis(ndim, axis), xp) for axis, c in enumerate(couplings)]


def coarsen_axis(c, a, xp, first=1):
    """The coarse couplings of the faces normal to array axis ``a`` from the
    fine ``c``: the faces between aggregates (every second from ``first``
    along ``a``: the odd ones of a whole grid) summed over the aggregates'
    pairs along the other axes."""
    index = [slice(None)] * c.ndim
    index[a] = slice(first, None, 2)
    c = c[tuple(index)]
    for other in range(c.ndim):
        if other != a:
            c = _pair_sum(c, other, xp)
    return c


def restrict(r, xp):
    """``P^T r``: the sum over each aggregate."""
    for axis in range(r.ndim):
        r = _pair_sum(r, axis, xp)
    return r


def prolong(x, shape, xp):
    """``P x``: each aggregate's value on its cells (``shape``: the fine grid)."""
    for axis, n in enumerate(shape):
        x = xp.repeat(x, 2, axis=axis)
        if x.shape[axis] != n:
            x = x[(slice(None),) * axis + (slice(0, n),)]
    return x


def smooth(couplings, inv_diagonal, b, x, degree, ratio):
    """``degree`` Chebyshev steps on ``A x = b`` from ``x`` (None: zero);
    returns the new ``x`` (a new array)."""
    xp = backend_of(b).xp
    return chebyshev_smooth(lambda v: apply_faces(couplings, v, xp.empty_like(v)),
                            inv_diagonal, b, x, degree, ratio)


def chebyshev_smooth(product, inv_diagonal, b, x, degree, ratio):
    """:func:`smooth` for any ``product(v) = A v`` (a rank's slab's too)."""
    inv_theta, steps = chebyshev_coefficients(degree, ratio)
    r = b if x is None else b - product(x)
    d = (inv_diagonal * r) * inv_theta
    x = d if x is None else x + d
    for a, c in steps:
        r = r - product(d)
        d = a * d + c * (inv_diagonal * r)
        x = x + d
    return x


def residual_restrict(couplings, b, x):
    """``P^T (b - A x)``: the residual summed over each aggregate."""
    xp = backend_of(b).xp
    return restrict(apply_faces(couplings, x, xp.empty_like(x), b), xp)


def prolong_add(x, xc, scale):
    """``x + scale P xc`` (a new array)."""
    return x + scale * prolong(xc, x.shape, backend_of(x).xp)


@twin
def smooth_restrict(couplings, inv_diagonal, b, degree, ratio):
    """Down the cycle: the smoothing of ``A x = b`` from zero, and the
    restricted residual; returns ``(x, P^T (b - A x))``."""
    x = smooth(couplings, inv_diagonal, b, None, degree, ratio)
    return x, residual_restrict(couplings, b, x)


@twin
def prolong_smooth(couplings, inv_diagonal, b, x, xc, scale, degree, ratio):
    """Up the cycle: the smoothing of ``A x = b`` from ``x + scale P xc``."""
    return smooth(couplings, inv_diagonal, b, prolong_add(x, xc, scale), degree, ratio)


@twin
def cycle_runner(levels, coarse_inverse, degree, ratio, scale, w_levels=0, io_scale=None):
    """What runs the whole cycle on this backend: None for the array code
    (``Multigrid._cycle``, the twins above level by level); on CuPy in 2-D a
    :class:`.multigrid_cuda.GraphCycle` (buffers once, one CUDA graph)."""
    return None


def cycle_bytes(cells, couplings, item, io_itemsize, w_levels, n_levels, bottom):
    """Bytes of one cycle by the model of
    :meth:`Multigrid.bytes_per_apply`, over levels ``0 .. len(cells) - 1``
    of a hierarchy of ``n_levels`` (``cells[k]`` cells, ``couplings[k]``
    bytes of face couplings), the last of them costing ``bottom(io)`` bytes
    (``io`` its input's and output's item size): the coarsest solve, or the
    rest of the cycle where it goes on elsewhere (the ranks' gathered
    levels).  ``item``: the cycle's item size; ``io_itemsize``: the finest
    level's ``b`` and result."""
    last = len(cells) - 1

    def visit(k, io):
        n = cells[k]
        if k == last:
            return bottom(io)
        nc = cells[k + 1]
        down = couplings[k] + n * io + n * item + nc * item
        up = couplings[k] + n * io + n * item + nc * item + n * io
        below = visit(k + 1, item)
        if k < w_levels and k + 1 < n_levels - 1:
            # copy (2), residual (couplings, x, b read, b written), add (3)
            below = 2 * below + (2 + 3 + 3) * nc * item + couplings[k + 1]
        return down + up + below

    return visit(0, io_itemsize)


def level_shapes(shape, coarsest, min_side):
    """The array shapes of a hierarchy's levels from the finest ``shape``:
    halved (rounded up) while the level has more than ``coarsest`` cells,
    but not below ``min_side`` cells a side once a level has at most
    :data:`MIN_SIDE_CELLS` (:class:`Multigrid`'s options)."""
    shapes = [tuple(shape)]
    while int(np.prod(shapes[-1])) > max(coarsest, 1) and max(shapes[-1]) > 1:
        coarse = tuple((n + 1) // 2 for n in shapes[-1])
        if min(coarse) < min_side and int(np.prod(shapes[-1])) <= MIN_SIDE_CELLS:
            break
        shapes.append(coarse)
    return shapes


#: The largest finest level (cells) whose refresh is replayed from a CUDA
#: graph: the graph keeps a copy of the finest couplings and every coarse
#: level's float64 couplings, which on larger grids would be memory held for
#: launches that cost little beside their kernels.
REPLAYED_REFRESH_CELLS = 1 << 24


def check_coarse_refresh(option):
    """``option`` if it is ``"auto"`` or an integer >= 1, else a clear error."""
    if option == "auto" or (isinstance(option, (int, np.integer)) and not isinstance(option, bool)
                            and option >= 1):
        return option
    raise ValueError(f"multigrid: coarse_refresh={option!r}: expected an integer >= 1 or 'auto'")


def auto_w_levels(shapes):
    """``w_levels="auto"`` for a hierarchy of level ``shapes``: W where the
    coarse level is large enough for its second visit to cost bandwidth
    rather than launches, on at most :data:`W_AUTO_MAX` top levels
    (docs/performance_records.md)."""
    return min(sum(1 for s in shapes[1:-1] if np.prod(s) >= W_AUTO_CELLS), W_AUTO_MAX)


@twin
def level_arrays(couplings, out_couplings, out_inv_diagonal):
    """A level's arrays in the cycle's precision from its float64 face
    ``couplings`` (x first), written into ``out_couplings`` and
    ``out_inv_diagonal`` (the precision theirs): the couplings rounded once,
    and the inverse of the diagonal (:func:`.poisson.centre_from_couplings`).
    A cell without couplings (possible only on a one-cell level) keeps its
    value: its inverse diagonal is taken as zero."""
    xp = backend_of(couplings[0]).xp
    centre = centre_from_couplings(tuple(couplings), xp)
    out_inv_diagonal[...] = xp.where(centre > 0, 1.0 / xp.where(centre > 0, centre, 1.0), 0.0)
    for dst, src in zip(out_couplings, couplings):
        dst[...] = src


@twin
def level_and_coarser(couplings, out_couplings, out_inv_diagonal):
    """:func:`level_arrays` of a level from its float64 face ``couplings``,
    and the next level's float64 couplings (:func:`coarsen_couplings`),
    returned; on CuPy one pass over the level's cells."""
    level_arrays(couplings, out_couplings, out_inv_diagonal)
    return coarsen_couplings(couplings, backend_of(couplings[0]).xp)


@twin
def abs_peak(b):
    """The largest ``|b|`` as a one-element float64 array of ``b``'s
    backend (NaN where ``b`` holds one, as ``max`` gives; 0 for no values)."""
    xp = backend_of(b).xp
    return xp.abs(b).max().reshape(1).astype(np.float64) if b.size else xp.zeros(1)


@twin
def write_io_scale(peak, io_scale):
    """The cycle's scales ``io_scale = [2^-e, 2^e]`` of ``e = ceil(log2
    peak)`` (``e = 0`` where the one-element ``peak`` is not positive),
    written on the device (:meth:`Multigrid.prepare`)."""
    xp = backend_of(peak).xp
    exponent = xp.ceil(xp.log2(xp.where(peak > 0, peak, 1.0)))
    io_scale[0:1] = xp.exp2(-exponent)
    io_scale[1:2] = xp.exp2(exponent)


def refresh_levels(couplings, levels):
    """Every level's arrays (:func:`level_arrays`) from the finest level's
    float64 face ``couplings``, each coarser level's couplings coarsened
    from the one above (:func:`coarsen_couplings`), written in place;
    returns the coarsest level's float64 couplings."""
    last = len(levels) - 1
    for k, level in enumerate(levels):
        if k < last:
            couplings = level_and_coarser(couplings, level.couplings, level.inv_diagonal)
        else:
            level_arrays(couplings, level.couplings, level.inv_diagonal)
    return couplings


class _Level:
    """One level: its couplings and inverse diagonal in the cycle's
    precision (arrays of its own, written in place by
    :meth:`Multigrid.refresh_couplings`), and its shape."""

    def __init__(self, shape, xp, dtype):
        self.shape = tuple(shape)
        nd = len(self.shape)
        self.couplings = tuple(xp.empty(_faces(self.shape, array_axis(nd, a)), dtype=dtype)
                               for a in range(nd))
        self.inv_diagonal = xp.empty(self.shape, dtype=dtype)


def _faces(shape, k):
    """The shape of the interior faces normal to array axis ``k``."""
    return tuple(n - 1 if i == k else n for i, n in enumerate(shape))


class Multigrid(Preconditioner):
    """Symmetric V-cycle on a Galerkin hierarchy of aggregated cells.

    Parameters
    ----------
    A : PoissonOperator
        The grid operator (any storage; its face couplings are used).
    degree : int
        Degree of the Chebyshev smoother (matrix products per smoothing).
    ratio : float
        The smoother targets the eigenvalues of ``D^-1 A`` in
        ``[2 / ratio, 2]``.
    scale : float
        The coarse correction's over-correction factor (1: none).
    coarsest : int
        The coarsest level has at most this many cells (solved directly)...
    min_side : int
        ... but coarsening stops before a level narrower than this many
        cells (below :data:`MIN_SIDE_CELLS` cells).  Bubbles of radius 0.08
        of the unit column are two cells wide on a 12 x 12 level, whose
        piecewise-constant correction then fails: at 192^2 and 240^2,
        contrast 1e6, 40-73 iterations, 11-13 with the 24^2 and 30^2 levels
        this keeps (docs/performance_records.md).
    w_levels : int or "auto"
        The top ``w_levels`` levels visit their coarse level twice (a
        W-cycle there, a V-cycle below): ``x_c + V_c (b_c - A_c x_c)`` with
        ``x_c = V_c b_c``, still symmetric.  0: a V-cycle.  ``"auto"``: the
        levels whose coarse level has at least :data:`W_AUTO_CELLS` cells,
        at most :data:`W_AUTO_MAX` (3 from 4096^2 up, none at 512^2 and
        below, where a second visit costs launches more than it saves
        iterations).
    cycle_precision : {"float32", "float64"}
        The cycle's arithmetic and storage.  ``float32`` (the default) moves
        about 60 % of the bytes; the hierarchy is formed in float64 and
        rounded once, and the input, the output and CG stay in the Krylov
        method's precision.
    coarse_refresh : int or "auto"
        When a :meth:`refresh` recomputes the coarsest level's inverse (a
        dense factorisation, the set-up's dearest part on small grids); the
        levels above it are refreshed at every call.  The cycle stays
        symmetric positive definite with an older coarsest operator, so CG
        still converges to its tolerance, in a few more iterations once
        the interface has moved a cell or more.  An integer: at every
        ``coarse_refresh``-th refresh (1: at every one, as a new
        hierarchy).  ``"auto"``: at every refresh where the coarsest level
        is the grid itself (its inverse is then the operator's), else once
        the interface may have moved :attr:`coarse_move_limit` finest cells
        since it was computed (a flow tells :meth:`interface_moved` before
        each refresh), at every refresh where nobody tells, and after at
        most :data:`COARSE_REFRESH_AUTO_MAX` refreshes.  Either way also after a
        solve that took clearly more iterations than the first one with it
        (:meth:`solved`), and at the first refresh after :meth:`renew`.
    """

    name = "multigrid"
    #: Levels of the whole hierarchy above this one's finest (:meth:`from_couplings`).
    levels_above = 0

    def __init__(self, A, degree=2, ratio=4.0, scale=1.8, coarsest=512,
                 cycle_precision="float32", w_levels="auto", min_side=16, coarse_refresh="auto"):
        A = require_grid_operator(A, self.name)
        self._configure(degree, ratio, scale, coarsest, cycle_precision, w_levels, min_side,
                        coarse_refresh)
        self._build(A.couplings(), tuple(A.grid_shape), w_levels)

    @classmethod
    def from_couplings(cls, couplings, shape, w_levels=0, levels_above=0, **options):
        """The hierarchy of the grid operator of face ``couplings`` (per
        axis, x first) on an array of ``shape``: a coarse part of another
        hierarchy (the ranks' gathered levels, ``levels_above`` levels below
        its finest), ``w_levels`` counted from this level; the other options
        :class:`Multigrid`'s."""
        self = cls.__new__(cls)
        self.levels_above = int(levels_above)
        options = dict(dict(degree=2, ratio=4.0, scale=1.8, coarsest=512,
                            cycle_precision="float32", min_side=16, coarse_refresh="auto"),
                       **options)
        self._configure(w_levels=w_levels, **options)
        self._build(couplings, tuple(shape), w_levels)
        return self

    def _configure(self, degree, ratio, scale, coarsest, cycle_precision, w_levels, min_side,
                   coarse_refresh):
        """The options, checked."""
        if cycle_precision not in CYCLE_PRECISIONS:
            raise ValueError(f"multigrid: cycle_precision={cycle_precision!r}: expected one of "
                             f"{', '.join(CYCLE_PRECISIONS)}")
        self.dtype = np.dtype(cycle_precision)
        if int(degree) < 1:
            raise ValueError(f"multigrid: degree={degree!r}: expected an integer >= 1")
        if not ratio > 1:
            raise ValueError(f"multigrid: ratio={ratio!r}: expected a number > 1")
        if not 0 < scale < 2:
            raise ValueError(f"multigrid: scale={scale!r}: expected a number in (0, 2)")
        if w_levels != "auto" and not (isinstance(w_levels, (int, np.integer))
                                       and not isinstance(w_levels, bool) and w_levels >= 0):
            raise ValueError(f"multigrid: w_levels={w_levels!r}: expected an integer >= 0 "
                             "or 'auto'")
        self.degree, self.ratio, self.scale = int(degree), float(ratio), float(scale)
        if int(coarsest) < 1 or int(min_side) < 1:
            raise ValueError(f"multigrid: coarsest={coarsest!r}, min_side={min_side!r}: "
                             "expected integers >= 1")
        self.coarsest, self.min_side = int(coarsest), int(min_side)
        self._coarse_refresh = check_coarse_refresh(coarse_refresh)

    def _build(self, couplings, shape, w_levels):
        self.xp = backend_of(couplings[0]).xp
        self.levels = [_Level(s, self.xp, self.dtype)
                       for s in level_shapes(shape, self.coarsest, self.min_side)]
        self._bytes_model = (None, 0)       # (bytes_per_apply's key, its figure)
        # A refresh's launches replayed from a CUDA graph (a few launches
        # instead of two dispatches a level) on grids up to REPLAYED_REFRESH_CELLS.
        self.replays = (keyed_replays(backend_of(couplings[0]))
                        if math.prod(shape) <= REPLAYED_REFRESH_CELLS else None)
        self.coarse_inverse = None
        self._coarse_age = 0                # refreshes since the inverse was computed
        self._coarse_moved = 0.0            # the interface's motion since, in cells
        self._motion_told = False           # (for the next refresh)
        self._coarse_iterations = None      # the first solve's iterations with it
        self._coarse_due = True
        self.refresh_couplings(couplings)
        # [s_in, s_out]: the cycle reads s_in r and returns s_out M (s_in r)
        # (powers of two, :meth:`prepare`; exact, so M is unchanged).
        self.io_scale = self.xp.ones(2)
        if w_levels == "auto":
            w_levels = auto_w_levels([lv.shape for lv in self.levels])
        self.w_levels = int(w_levels)
        self.runner = cycle_runner(self.levels, self.coarse_inverse, self.degree, self.ratio,
                                   self.scale, self.w_levels, self.io_scale)

    def refresh(self, A):
        """Take a new operator on the same grid and backend in place: the
        hierarchy's arrays are overwritten, so the cycle's launches and the
        CUDA graphs holding them stay valid.  Returns False (nothing done)
        where ``A`` does not fit (another grid or backend)."""
        A = require_grid_operator(A, self.name)
        fits = tuple(A.grid_shape) == self.levels[0].shape and A.backend.xp is self.xp
        if not fits:
            return False
        parts = getattr(A, "coupling_parts", None)
        if self.replays is None or parts is None:
            return self.refresh_couplings(A.couplings())
        # The couplings taken from the operator's arrays in the same graph.
        arrays, couplings_of = parts()

        def launches(*a):
            return refresh_levels(tuple(c.astype(np.float64, copy=False)
                                        for c in couplings_of(a)), self.levels)

        return self.refreshed(self.replays(("refresh", couplings_of, arrays[0].dtype.str),
                                           launches, tuple(arrays)))

    def refresh_couplings(self, couplings):
        """:meth:`refresh` from the face ``couplings`` of an operator on
        this hierarchy's grid and backend (a gathered coarse level's)."""
        couplings = tuple(c.astype(np.float64, copy=False) for c in couplings)
        if self.replays is None:
            return self.refreshed(refresh_levels(couplings, self.levels))
        return self.refreshed(self.replays(
            "refresh", lambda *c: refresh_levels(c, self.levels), couplings))

    def refreshed(self, couplings):
        """After the levels' arrays were written (:func:`refresh_levels`,
        here or in a caller's CUDA graph): the coarsest inverse, recomputed
        from the coarsest level's float64 ``couplings`` where it is due."""
        self._coarse_age += 1
        if self._coarse_is_due():
            self._coarse_due, self._coarse_age, self._coarse_iterations = False, 0, None
            self._coarse_moved = 0.0
            self._coarse_solve(couplings)
        self._motion_told = False
        return True

    def _coarse_is_due(self):
        if self._coarse_due:
            return True
        if self._coarse_refresh != "auto":
            return self._coarse_age >= self._coarse_refresh
        one_level = self.levels_above + len(self.levels) == 1
        return (one_level or not self._motion_told
                or self._coarse_moved >= self.coarse_move_limit
                or self._coarse_age >= COARSE_REFRESH_AUTO_MAX)

    @property
    def coarse_move_limit(self):
        """The interface's motion, in finest cells, after which
        ``coarse_refresh="auto"`` recomputes the coarsest inverse:
        :data:`COARSE_MOVE_FRACTION` of a coarsest cell (the finest grid's
        cells across one, along the axis coarsened least, the levels above
        this hierarchy halving each), at least :data:`COARSE_MOVE_CELLS`."""
        across = min(f / c for f, c in zip(self.levels[0].shape, self.levels[-1].shape))
        return max(COARSE_MOVE_CELLS, COARSE_MOVE_FRACTION * across * 2 ** self.levels_above)

    def interface_moved(self, cells):
        """Before a :meth:`refresh`: the interface has moved at most
        ``cells`` finest cells since the operator of the previous one (None:
        not known); ``coarse_refresh="auto"`` adds them up."""
        if cells is not None:
            self._coarse_moved += float(cells)
            self._motion_told = True

    def renew(self):
        """The next :meth:`refresh` is a new hierarchy's, its coarsest
        inverse recomputed (a restart begins there: see the class's
        ``coarse_refresh``)."""
        self._coarse_due = True

    def solved(self, iterations):
        """After a solve of ``iterations`` with this hierarchy: more than
        the first solve with the coarsest inverse took, by a quarter and at
        least two, and that inverse is recomputed at the next refresh."""
        first = self._coarse_iterations
        if first is None:
            self._coarse_iterations = int(iterations)
        elif iterations > first + max(2, first // 4):
            self._coarse_due = True

    def _coarse_solve(self, couplings):
        """The coarsest level's inverse from its float64 ``couplings``,
        written into the array the cycle's launches hold."""
        inverse, self._coarse_flags = coarse_solve(couplings, self.levels[-1].shape, self.dtype)
        if self.coarse_inverse is None or isinstance(inverse, HostCoarseSolve):
            self.coarse_inverse = inverse
        else:
            self.coarse_inverse[...] = inverse          # (the cycle's launches hold this array)

    def bytes_per_apply(self, io_itemsize=8):
        """Bytes one cycle moves by the model of its fused kernels: each
        array read once and written once, in the cycle's precision (the
        finest level's ``b`` and result in ``io_itemsize``); the tiles'
        halos, read again from L2, are not counted, nor (in 3-D) the planes
        a z chunk's pipeline reads again below it.  Per level: down reads
        the face couplings (one array per axis) and ``b``, writes ``x`` and
        the coarse ``b``; up reads the couplings, ``b``, ``x`` and the
        coarse ``x``, writes the result; a W level's second visit adds a
        copy, a residual and an add on the coarse level.  The coarsest
        level: its dense inverse (or the host's factor, a band or sparse
        factors) and its input and output."""
        # (Asked at every set-up: the levels stay, so the figure is kept by
        # what can change, the W levels and the coarsest solve's bytes.)
        coarse = coarse_solve_bytes(self.coarse_inverse)
        key = (io_itemsize, self.w_levels, coarse)
        if self._bytes_model[0] != key:
            item = self.dtype.itemsize
            cells = [int(np.prod(lv.shape)) for lv in self.levels]
            couplings = [sum(int(c.size) for c in lv.couplings) * item for lv in self.levels]
            self._bytes_model = (key, cycle_bytes(cells, couplings, item, io_itemsize,
                                                  self.w_levels, len(self.levels),
                                                  lambda io: coarse + 2 * cells[-1] * io))
        return self._bytes_model[1]

    def check_flags(self):
        """The device flags of the coarsest inverse's factorisation, pending
        until :meth:`check` (none on the host, which checked at once)."""
        return [flag for flag, _ in self._coarse_flags]

    def check(self, values=None):
        """Raise ``numpy.linalg.LinAlgError`` where the coarsest level's
        factorisation failed (``values``: the host values of
        :meth:`check_flags`, else read now); each failure once."""
        flags, self._coarse_flags = self._coarse_flags, []
        raise_failed_inverses(flags, values)

    def device_launches(self, src, dst, stop=None):
        """The raw kernel launches of ``dst = M^-1 src`` on a Krylov engine's
        flat float64 CuPy buffers, for it to capture with its iteration
        (:meth:`.multigrid_cuda.GraphCycle.device_launches`), skipped once
        the device flag ``stop`` is set (the engine's done flag); None where
        the cycle has no kernels (the engine then calls :meth:`apply`)."""
        launches = getattr(self.runner, "device_launches", None)
        return None if launches is None else launches(src, dst, stop)

    # ----------------------------------------------------------------- cycle
    def _cycle(self, k, b):
        if k == len(self.levels) - 1:
            return (self.coarse_inverse @ b.ravel()).reshape(b.shape)
        level = self.levels[k]
        x, bc = smooth_restrict(level.couplings, level.inv_diagonal, b, self.degree, self.ratio)
        xc = self._cycle(k + 1, bc)
        if k < self.w_levels and k + 1 < len(self.levels) - 1:
            coarse = self.levels[k + 1]
            rc = apply_faces(coarse.couplings, xc, self.xp.empty_like(xc), bc)
            xc = xc + self._cycle(k + 1, rc)
        return prolong_smooth(level.couplings, level.inv_diagonal, b, x, xc, self.scale,
                              self.degree, self.ratio)

    def prepare(self, b):
        """Before a solve of ``A x = b``: the cycle's input scale, the power
        of two nearest above ``max |b|``, inverted (and its output scale,
        that power), written on the device without a host round trip.  The
        residuals of the solve then reach a float32 cycle within its range
        (down to about 1e-30 relative), whatever the units of ``b``; being
        powers of two, the scales change no digit of the result."""
        write_io_scale(abs_peak(b), self.io_scale)

    def apply(self, r):
        if self.runner is not None:
            return self.runner.apply(r, self.levels[0].shape)
        s_in, s_out = self.io_scale[0], self.io_scale[1]
        b = (r * s_in).reshape(self.levels[0].shape).astype(self.dtype, copy=False)
        return (self._cycle(0, b).reshape(r.shape) * s_out).astype(r.dtype, copy=False)


# The CUDA variants (float64 and float32; 2-D tiles in multigrid.cu, 3-D in multigrid3d.cu):
# NotImplemented (the array code runs) for what they do not cover.
smooth_restrict.register("cupy")(multigrid_cuda.smooth_restrict)
prolong_smooth.register("cupy")(multigrid_cuda.prolong_smooth)
cycle_runner.register("cupy")(multigrid_cuda.cycle_runner)
coarsen_couplings.register("cupy")(multigrid_setup_cuda.coarsen_couplings)
level_arrays.register("cupy")(multigrid_setup_cuda.level_arrays)
level_and_coarser.register("cupy")(multigrid_setup_cuda.level_and_coarser)
abs_peak.register("cupy")(multigrid_setup_cuda.abs_peak)
write_io_scale.register("cupy")(multigrid_setup_cuda.write_io_scale)
