"""Coarsening and smoother of the multigrid preconditioner, chosen by measurement (CPU).

    python3 scripts/multigrid_choices.py [--sizes 128 256 512] [--contrasts 1 1e3 1e6]
        [--variants 'agg1.8/*' 'bilinear/cheb2' ...] [--rtol 1e-8] [--maxiter 200]
        [--no-product]

One generic symmetric V-cycle, written once here on ``scipy.sparse``
matrices, preconditions a short PCG on the standard problem
(:func:`bubbleflow.case.problem.bubbly_column`, ``A.to_scipy()``: symmetric
positive semi-definite, rows summing to zero) with a zero-mean random
right-hand side (``default_rng(0)``), to ``||r|| <= rtol ||b||`` (recursive
residual, as the product; the preconditioned residual is projected to
zero mean, see :func:`pcg`).  A variant is ``transfer/smoother``
(``--variants`` takes shell patterns); the product's choice is
``agg1.8/cheb2``, the reference of the decisive figure.

The cycle (every variant).  Levels coarsen 2 x 2 cells (a last odd cell
alone) while a level has more than 512 cells; ``A_c = P^T A P`` (Galerkin,
``R = P^T``); the coarsest level is solved by the symmetrised dense inverse
of ``A_c + mean(diag) / n 1 1^T`` (as the product, which is run with
``min_side=1`` to coarsen the same way: its default keeps levels at least
16 cells wide).  Down: ``x = S(b)`` from
zero, ``b_c = R (b - A x)``; up: ``x += scale P x_c``, then ``S^T`` from
``x``, so the cycle is symmetric.

Transfers (``P``; ``scale`` 1 unless named):

* ``agg1.0``, ``agg1.8``: piecewise-constant 2 x 2 aggregates (the product's;
  coarse operators stay 5-point), coarse correction scaled by 1.0 or 1.8.
* ``bilinear``: cell-centred bilinear, the tensor product of 1-D weights
  3/4 (own coarse cell) and 1/4 (the next coarse cell on the fine cell's
  side); at a wall the own coarse cell gets 1 along that axis, so constants
  are reproduced exactly.  (Odd sizes: a lone last cell gets 1; a cell whose
  neighbouring aggregate is a lone cell gets 2/3, 1/3, its distances.)
* ``sa``: smoothed aggregation, ``P = (I - omega D^-1 A) P0``, ``P0`` the
  2 x 2 aggregates, ``omega = 4/3 / lambda``, ``lambda`` the Rayleigh
  quotient of 10 power iterations of ``D^-1 A`` on each level.
* ``opdep``: operator-dependent cell-centred prolongation (implemented).
  Each 1-D weight comes from flux continuity through three resistances in
  series: from the centre of the fine cell's own coarse cell (the face
  between its two fine cells) to the fine cell, half a cell,
  ``r1 = 1 / (2 c_own)``; from the fine cell across the face between the
  aggregates, ``r2 = 1 / c_between``; on to the centre of the neighbouring
  coarse cell, ``r3 = 1 / (2 c_next)`` (0 for a lone cell).  The neighbour
  gets ``r1 / (r1 + r2 + r3)``, the own coarse cell the rest (1 at a wall);
  ``P`` is the tensor product of the x-weights from the fine cell's row and
  the y-weights from its column.  Equal couplings give exactly ``bilinear``
  (3/4, 1/4).  ``c`` are the face couplings on the finest level; on the
  Galerkin coarse levels (wider stencils) ``c`` of a face is the cut
  conductance ``sum -a_pq |dx_pq|`` over the couplings crossing it, half
  booked to the row (column) of each end, which is the face coupling for a
  5-point operator.  Same aim as the matrix-dependent prolongations of
  Dendy's BoxMG (J. Comput. Phys. 48, 1982) and de Zeeuw (J. Comput. Appl.
  Math. 33, 1990), which are vertex-centred and use the lumped stencil row;
  this cell-centred series-resistance form is this script's own and is
  not taken from either.

Smoothers (matrix products per side ``m``: ``jac1``/``jac2``,
``gs1``/``gs2``, ``cheb1``..``cheb3``):

* ``jac``: damped Jacobi, ``omega = 4/3 / lmax`` (``2/3`` for ``lmax = 2``).
* ``gs``: multicolour Gauss-Seidel, ``m`` sweeps; colours ``(i + s j) mod k``
  with the smallest ``k <= 16`` (then ``s``) such that no coupling of the
  level's stencil joins two cells of a colour: red-black ``(i + j) % 2`` on
  every 5-point level (all of ``agg``, the finest of all), 8 or 9 colours on
  the wider Galerkin levels of ``bilinear``/``opdep``; greedy colouring in
  cell order where no such ``k`` exists (the ever wider levels of ``sa``).
  Colours in order down, reversed up (``S^T``).
* ``cheb``: Chebyshev of degree ``m`` in ``D^-1 A`` over ``[lmax / 4, lmax]``
  (the product's three-term form and coefficients).

``lmax`` (top of the smoothers' interval, :func:`level_lmax`): 2, the
product's Gershgorin bound, on levels whose Gershgorin bound is 2 (rows
summing to zero, no positive off-diagonal: all ``agg`` levels); else
``1.1 x`` a 20-step power estimate (the Galerkin operators of ``bilinear``,
``sa`` and ``opdep`` get positive off-diagonals, and their Gershgorin
bounds, up to about 100, would put the interval far above the spectrum).

Cost model, bytes moved per cycle divided by the fine cells: 8 bytes a
word; per level of ``n`` cells, ``a`` operator nonzeros per row, ``p``
transfer nonzeros (each read at each use, the fixed weights of ``agg`` and
``bilinear`` included), ``n_c`` coarse cells, each stage a pass reading its
inputs and writing its output once, in words:

* Jacobi or Chebyshev step from zero: ``3n`` (reads ``b``, ``D^-1``;
  writes ``x``); a step from ``x``: ``(a + 4) n`` (``A``, ``x``, ``b``,
  ``D^-1``; ``x``); a Chebyshev step that also needs the previous nonzero
  iterate (``x_{k+1} = x_k + alpha D^-1 (b - A x_k) + beta (x_k -
  x_{k-1})``, the two-vector form): ``(a + 5) n``, i.e. from the third step
  down and from the second up.
* Gauss-Seidel sweep, ``k`` colour passes: ``(a + k + 3) n`` (``A``, ``b``,
  ``D^-1`` once; all of ``x`` read by each pass; ``x`` written once); the
  first sweep from zero: ``(k - 1) / k`` of ``a + 3`` plus ``(k - 1) n``
  reads of ``x`` plus ``3 n / k``.
* Residual and restriction: ``(a + 2) n + p + n_c``; prolongation and add:
  ``2 n + p + n_c``; the coarsest level: ``n_c^2 + 2 n_c``.

CG's own vectors and product are left out: the same for every variant.
The decisive figure is ``iterations x cost per cycle`` relative to
``agg1.8/cheb2`` at the same size and contrast.  Timings are SciPy's on
this CPU, not the product's.
"""
import argparse
import fnmatch
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.case.problem import bubbly_column  # noqa: E402
from bubbleflow.linalg.precond.chebyshev import chebyshev_coefficients  # noqa: E402
from bubbleflow.linalg.precond.multigrid import Multigrid  # noqa: E402
from bubbleflow.linalg.solver import PressureSolver  # noqa: E402

#: The coarsest level has at most this many cells (the product's default).
COARSEST = 512
#: The smoother targets ``[lmax / RATIO, lmax]`` (the product's default).
RATIO = 4.0
#: name -> (prolongation kind, coarse-correction scale)
TRANSFERS = {"agg1.0": ("aggregation", 1.0), "agg1.8": ("aggregation", 1.8),
             "bilinear": ("bilinear", 1.0), "sa": ("smoothed_aggregation", 1.0),
             "opdep": ("operator_dependent", 1.0)}
#: name -> (smoother kind, matrix products per side)
SMOOTHERS = {"jac1": ("jacobi", 1), "jac2": ("jacobi", 2), "gs1": ("gauss_seidel", 1),
             "gs2": ("gauss_seidel", 2), "cheb1": ("chebyshev", 1), "cheb2": ("chebyshev", 2),
             "cheb3": ("chebyshev", 3)}
VARIANTS = [f"{t}/{s}" for t in TRANSFERS for s in SMOOTHERS]
PRODUCT = "agg1.8/cheb2"


# ------------------------------------------------------------------ problem
def problem(n, contrast):
    """``(A, A_scipy, b)``: the grid operator, its CSR matrix (checked PSD
    by sign: positive diagonal, rows summing to zero) and a zero-mean random
    right-hand side."""
    A, _, _ = bubbly_column(n, contrast, backend="numpy")
    As = sp.csr_matrix(A.to_scipy(), dtype=np.float64)
    diag = As.diagonal()
    assert diag.min() > 0, "expected the positive semi-definite sign convention"
    assert abs(As @ np.ones(n * n)).max() <= 1e-12 * diag.max()
    r = np.random.default_rng(0).standard_normal(n * n)
    return A, As, r - r.mean()


# ---------------------------------------------------------------- transfers
def _weights_1d(cond, n):
    """1-D cell-centred weights along an axis of ``n`` fine cells, for each
    line of conductances ``cond`` (lines x n-1 faces): ``(J, w)`` per fine
    cell, the neighbouring coarse cell and its weight (the own coarse cell
    ``f // 2`` gets ``1 - w``).  Series resistances (module docstring)."""
    lines = cond.shape[0]
    nc = (n + 1) // 2
    f = np.arange(n)
    own, odd = f // 2, f % 2 == 1
    J = np.where(odd, own + 1, own - 1)
    paired = ~((f == n - 1) & ~odd)                   # not a lone last cell
    valid = (J >= 0) & (J < nc) & paired
    c = np.concatenate([np.ones((lines, 1)), cond, np.ones((lines, 2))], axis=1)
    c = np.maximum(c, 1e-30 * max(c.max(), 1e-300))   # no face taken as cut
    face = lambda k: c[:, np.clip(k, -1, n) + 1]      # face k: between cells k, k+1
    r1 = 0.5 / face(np.where(odd, f - 1, f))
    r2 = 1.0 / face(np.where(odd, f, f - 1))
    lone_next = odd & (f + 2 == n)
    r3 = np.where(lone_next, 0.0, 0.5 / face(np.where(odd, f + 1, f - 2)))
    w = np.where(valid, r1 / (r1 + r2 + r3), 0.0)
    return np.where(valid, J, own), w


def _tensor_prolongation(wx, Jx, wy, Jy, shape):
    """``P`` from per-cell 1-D weights (arrays of the fine grid's shape)."""
    ny, nx = shape
    ncx = (nx + 1) // 2
    jj, ii = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    Ix, Iy = ii // 2, jj // 2
    rows, cols, vals = [], [], []
    for cy, vy in ((Iy, 1 - wy), (Jy, wy)):
        for cx, vx in ((Ix, 1 - wx), (Jx, wx)):
            rows.append((jj * nx + ii).ravel())
            cols.append((cy * ncx + cx).ravel())
            vals.append((vy * vx).ravel())
    nc = ((ny + 1) // 2) * ncx
    P = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(ny * nx, nc)).tocsr()
    P.sum_duplicates()
    P.eliminate_zeros()
    return P


def cut_conductances(A, shape):
    """``(cx, cy)``: conductance of each interior face, per row ``cx``
    (ny, nx-1) and per column ``cy`` (nx, ny-1): ``sum -a_pq |d_pq|`` over
    the couplings crossing the face's cut, half booked to the line of each
    end (the face coupling for a 5-point operator)."""
    ny, nx = shape
    C = A.tocoo()
    p, q, a = C.row, C.col, -C.data
    jp, ip, jq, iq = p // nx, p % nx, q // nx, q % nx
    out = []
    for lo, hi, line_p, line_q, n, m in ((ip, iq, jp, jq, nx, ny), (jp, jq, ip, iq, ny, nx)):
        cond = np.zeros((m, max(n - 1, 0)))
        cross = hi > lo
        lo_, d, a_ = lo[cross], hi[cross] - lo[cross], a[cross]
        for k in range(int(d.max()) if d.size else 0):
            sel = d > k
            for line in (line_p[cross][sel], line_q[cross][sel]):
                np.add.at(cond, (line, lo_[sel] + k), 0.5 * a_[sel] * d[sel])
        out.append(cond)
    return tuple(out)


def prolongation(kind, A, shape):
    """The prolongation of ``kind`` from the level ``A`` on grid ``shape``."""
    ny, nx = shape
    if kind in ("aggregation", "smoothed_aggregation"):
        P1 = [sp.csr_matrix((np.ones(m), (np.arange(m), np.arange(m) // 2)),
                            shape=(m, (m + 1) // 2)) for m in (ny, nx)]
        P = sp.kron(P1[0], P1[1], format="csr")
        if kind == "aggregation":
            return P
        dinv = 1.0 / A.diagonal()
        lam = power_lambda(A, dinv)
        return sp.csr_matrix(P - (4.0 / 3.0 / lam) * (sp.diags(dinv) @ (A @ P)))
    if kind == "bilinear":
        cx, cy = np.ones((ny, nx - 1)), np.ones((nx, ny - 1))
    elif kind == "operator_dependent":
        cx, cy = cut_conductances(A, shape)
    else:
        raise ValueError(kind)
    Jx, wx = _weights_1d(cx, nx)                      # (ny, nx): along each row
    Jy, wy = _weights_1d(cy, ny)                      # (nx, ny): along each column
    return _tensor_prolongation(wx, np.broadcast_to(Jx, (ny, nx)), wy.T,
                                np.broadcast_to(Jy, (nx, ny)).T, shape)


def power_lambda(A, dinv, iterations=10):
    """The largest eigenvalue of ``D^-1 A`` by power iteration (Rayleigh
    quotient in the ``D`` inner product, a lower estimate)."""
    x = np.random.default_rng(1).standard_normal(A.shape[0])
    for _ in range(iterations):
        x = dinv * (A @ x)
        x /= np.linalg.norm(x)
    return float(x @ (A @ x)) / float(x @ (x / dinv))


# ---------------------------------------------------------------- hierarchy
def colouring(A, shape):
    """Colour of each cell: ``(i + s j) mod k`` with the smallest ``k <= 16``
    (then ``s``) such that no off-diagonal coupling joins two cells of a
    colour (red-black on a 5-point level); else greedy in cell order."""
    ny, nx = shape
    C = A.tocoo()
    off = C.row != C.col
    dj = C.col[off] // nx - C.row[off] // nx
    di = C.col[off] % nx - C.row[off] % nx
    offsets = set(zip(di.tolist(), dj.tolist()))
    jj, ii = np.divmod(np.arange(ny * nx), nx)
    for k in range(2, 17):
        for s in range(k):
            if all((a + s * b) % k for a, b in offsets):
                return (ii + s * jj) % k
    colour = np.full(ny * nx, -1)
    indptr, indices = A.indptr, A.indices
    for row in range(ny * nx):
        taken = set(colour[indices[indptr[row]:indptr[row + 1]]].tolist())
        colour[row] = next(c for c in range(len(taken) + 1) if c not in taken)
    return colour


def level_lmax(A, dinv):
    """The top of the smoothers' interval for ``D^-1 A``: Gershgorin's bound
    where it is at most 2 (an M-matrix whose rows sum to zero: 2, the
    product's rule), else 1.1 x a 20-step power estimate (Galerkin operators
    with positive off-diagonals, where Gershgorin's bound is far off)."""
    gershgorin = float((abs(A) @ np.ones(A.shape[0]) * dinv).max())
    if gershgorin <= 2.0 * (1 + 1e-12):
        return 2.0
    return min(1.1 * power_lambda(A, dinv, 20), gershgorin)


class Level:
    """One level: operator, inverse diagonal, ``lmax``, transfers, colours."""

    def __init__(self, A, shape, smoother):
        self.A, self.shape = A, tuple(shape)
        self.n = A.shape[0]
        diag = A.diagonal()
        self.dinv = 1.0 / diag
        self.lmax = level_lmax(A, self.dinv)
        self.P = self.R = None
        self.colours = []
        if smoother == "gauss_seidel":
            colour = colouring(A, shape)
            for c in range(int(colour.max()) + 1):
                rows = np.flatnonzero(colour == c)
                if rows.size:
                    self.colours.append((rows, A[rows], self.dinv[rows]))


def build_hierarchy(A, shape, transfer, smoother):
    """``(levels, coarse_inverse)`` of ``transfer`` (a :data:`TRANSFERS`
    name) for the CSR matrix ``A`` on grid ``shape``."""
    kind, _ = TRANSFERS[transfer]
    levels = [Level(A, shape, smoother)]
    while levels[-1].n > COARSEST and max(levels[-1].shape) > 1:
        lv = levels[-1]
        lv.P = prolongation(kind, lv.A, lv.shape)
        lv.R = sp.csr_matrix(lv.P.T)
        Ac = sp.csr_matrix(lv.R @ lv.A @ lv.P)
        Ac.sum_duplicates()
        Ac = sp.csr_matrix(0.5 * (Ac + Ac.T))          # symmetric to rounding
        levels.append(Level(Ac, tuple((m + 1) // 2 for m in lv.shape), smoother))
    Ad = levels[-1].A.toarray()
    n = Ad.shape[0]
    mean = Ad.diagonal().mean()
    inv = np.linalg.inv(Ad + (mean if mean > 0 else 1.0) / n)
    return levels, 0.5 * (inv + inv.T)


# ---------------------------------------------------------------- smoothers
def smooth(level, smoother, m, b, x, reverse):
    """``m`` matrix products of ``smoother`` on ``A x = b`` from ``x`` (None:
    zero); ``reverse`` (up the cycle) runs Gauss-Seidel's colours backwards,
    the adjoint.  Returns a new array."""
    A, dinv = level.A, level.dinv
    if smoother == "jacobi":
        omega = 4.0 / 3.0 / level.lmax
        x = omega * (dinv * b) if x is None else x + omega * (dinv * (b - A @ x))
        for _ in range(m - 1):
            x = x + omega * (dinv * (b - A @ x))
        return x
    if smoother == "chebyshev":
        # The product's form (multigrid.smooth), over [lmax / RATIO, lmax].
        inv_theta, steps = chebyshev_coefficients(m, RATIO, upper=level.lmax)
        r = b if x is None else b - A @ x
        d = (dinv * r) * inv_theta
        x = d if x is None else x + d
        for a, c in steps:
            r = r - A @ d
            d = a * d + c * (dinv * r)
            x = x + d
        return x
    x = np.zeros_like(b) if x is None else x.copy()
    order = level.colours[::-1] if reverse else level.colours
    for _ in range(m):
        for rows, Ar, dr in order:
            x[rows] += dr * (b[rows] - Ar @ x)
    return x


class VCycle:
    """The symmetric V-cycle of a variant: ``M r`` by :meth:`__call__`."""

    def __init__(self, A, shape, variant):
        transfer, smoother = variant.split("/")
        self.scale = TRANSFERS[transfer][1]
        self.smoother, self.m = SMOOTHERS[smoother]
        self.levels, self.coarse_inverse = build_hierarchy(A, shape, transfer, self.smoother)

    def _cycle(self, k, b):
        if k == len(self.levels) - 1:
            return self.coarse_inverse @ b
        lv = self.levels[k]
        x = smooth(lv, self.smoother, self.m, b, None, reverse=False)
        xc = self._cycle(k + 1, lv.R @ (b - lv.A @ x))
        x = x + self.scale * (lv.P @ xc)
        return smooth(lv, self.smoother, self.m, b, x, reverse=True)

    def __call__(self, r):
        return self._cycle(0, r)

    def nnz_per_row(self):
        """Operator nonzeros per row on each level, finest to coarsest."""
        return [lv.A.nnz / lv.n for lv in self.levels]

    def bytes_per_cell(self):
        """Bytes one cycle moves per fine cell by the module's cost model."""
        words = 0.0
        for k, lv in enumerate(self.levels[:-1]):
            n, a, p = lv.n, lv.A.nnz / lv.n, lv.P.nnz
            nc = self.levels[k + 1].n
            words += _smoother_words(self.smoother, self.m, n, a, len(lv.colours))
            words += (a + 2) * n + p + nc                 # residual, restriction
            words += 2 * n + p + nc                       # prolongation, add
        nc = self.levels[-1].n
        words += nc * nc + 2 * nc
        return 8.0 * words / self.levels[0].n


def _smoother_words(smoother, m, n, a, k):
    """Words of the smoothing down (from zero) and up (from ``x``) on a
    level of ``n`` cells, ``a`` nonzeros per row, ``k`` colours."""
    if smoother == "jacobi":
        return 3 * n + (m - 1) * (a + 4) * n + m * (a + 4) * n
    if smoother == "chebyshev":
        down = 3 * n + (min(m, 2) - 1) * (a + 4) * n + max(m - 2, 0) * (a + 5) * n
        up = (a + 4) * n + (m - 1) * (a + 5) * n
        return down + up
    sweep = (a + k + 3) * n
    first = (k - 1) / k * (a + 3) * n + (k - 1) * n + 3 * n / k
    return first + (m - 1) * sweep + m * sweep


# ----------------------------------------------------------------- solvers
def pcg(A, b, M, rtol=1e-8, maxiter=200):
    """Textbook PCG from zero on the singular system, preconditioned by
    ``Pi M Pi`` (``Pi``: removes the mean); stops at ``||r|| <= rtol ||b||``
    (recursive residual).  Returns ``(x, iterations, converged)``."""
    # The rows sum to zero only to rounding (large at high contrast), so r
    # gains a constant part; unprojected, M amplifies it near the tolerance
    # and p drifts into the null space, where p^T A p is rounding.
    precondition = lambda r: (lambda z: z - z.mean())(M(r - r.mean()))
    x = np.zeros_like(b)
    r = b.copy()
    tol = rtol * np.linalg.norm(b)
    z = precondition(r)
    p = z.copy()
    rz = r @ z
    for it in range(1, maxiter + 1):
        q = A @ p
        alpha = rz / (p @ q)
        x += alpha * p
        r -= alpha * q
        if np.linalg.norm(r) <= tol:
            return x, it, True
        z = precondition(r)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return x, maxiter, False


def product_iterations(A, b, rtol=1e-8, maxiter=200):
    """Iterations of the product's own PCG + multigrid (float64 V-cycle)."""
    s = PressureSolver(A, method="pcg", preconditioner="multigrid", deflation="none",
                       rtol=rtol, maxiter=maxiter,
                       preconditioner_options={"cycle_precision": "float64", "w_levels": 0,
                                               "min_side": 1})
    _, rec = s.solve(b)
    fused = Multigrid(A, cycle_precision="float64", w_levels=0).bytes_per_apply(8) / b.size
    return rec.iterations, fused


def run_variant(As, b, n, variant, rtol, maxiter):
    """One variant on one problem: a dict of iterations, convergence,
    set-up and solve seconds, cost per cycle and nnz per row per level."""
    t0 = time.perf_counter()
    M = VCycle(As, (n, n), variant)
    t1 = time.perf_counter()
    _, its, ok = pcg(As, b, M, rtol, maxiter)
    t2 = time.perf_counter()
    return {"its": its, "ok": ok, "setup": t1 - t0, "solve": t2 - t1,
            "bytes": M.bytes_per_cell(), "nnz": M.nnz_per_row(),
            "lmax": max(lv.lmax for lv in M.levels),
            "colours": [len(lv.colours) for lv in M.levels]}


# ------------------------------------------------------------------ report
def _table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def report(results, product, variants, sizes, contrasts):
    """The markdown tables, the decisive one last."""
    cols = [(n, c) for n in sizes for c in contrasts]
    heads = [f"{n}^2, {c:g}" for n, c in cols]
    big = sizes[-1]
    if product:
        print("### Validation: the product's PCG + multigrid (float64 V-cycle) "
              "vs this harness\n")
        _table(["agg1.8/cheb2"] + heads, [
            ["iterations: product / harness"]
            + [f"{product[n, c][0]} / {results[PRODUCT][n, c]['its']}" for n, c in cols],
            ["B/cell/cycle: product's fused model / this model"]
            + [f"{product[n, c][1]:.0f} / {results[PRODUCT][n, c]['bytes']:.0f}" for n, c in cols]])
    print(f"### Operator nonzeros per row per level (finest to coarsest), {big}^2, "
          f"contrast {contrasts[0]:g}\n")
    seen = {}
    for v in variants:
        seen.setdefault(v.split("/")[0], results[v][big, contrasts[0]])
    _table(["transfer", "nnz / row per level", "max lmax"],
           [[t, " / ".join(f"{x:.1f}" for x in r["nnz"]), f"{r['lmax']:.2f}"]
            for t, r in seen.items()])
    print("### CG iterations (rtol 1e-8; '>' not converged within maxiter)\n")
    _table(["variant"] + heads, [[v] + [("" if results[v][k]["ok"] else ">")
                                         + str(results[v][k]["its"]) for k in cols]
                                  for v in variants])
    print(f"### SciPy wall seconds at {big}^2 (this CPU, scipy.sparse harness; "
          "not the product's timings)\n")
    _table(["variant", "set-up s (mean)"] + [f"solve s, {c:g}" for c in contrasts],
           [[v, f"{np.mean([results[v][big, c]['setup'] for c in contrasts]):.2f}"]
            + [f"{results[v][big, c]['solve']:.2f}" for c in contrasts] for v in variants])
    print("### Decisive: iterations x modelled bytes per cycle, relative to agg1.8/cheb2 "
          "(< 1: cheaper)\n")
    rows = []
    for v in variants:
        rel = [results[v][k]["its"] * results[v][k]["bytes"]
               / (results[PRODUCT][k]["its"] * results[PRODUCT][k]["bytes"]) for k in cols]
        rows.append([v, f"{results[v][big, contrasts[0]]['bytes']:.0f}"]
                    + [f"{x:.2f}" for x in rel] + [f"{np.exp(np.mean(np.log(rel))):.2f}"])
    _table(["variant", f"B/cell/cycle {big}^2"] + heads + ["geo. mean"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--contrasts", type=float, nargs="+", default=[1.0, 1e3, 1e6])
    ap.add_argument("--variants", nargs="+", default=["*"],
                    help=f"names or shell patterns of {', '.join(VARIANTS)}")
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--maxiter", type=int, default=200)
    ap.add_argument("--no-product", action="store_true",
                    help="skip the product's solver (the validation row)")
    args = ap.parse_args(argv)
    variants = [v for v in VARIANTS if any(fnmatch.fnmatchcase(v, p) for p in args.variants)]
    if PRODUCT not in variants:
        variants.insert(0, PRODUCT)                   # the reference of the relative figure
    results = {v: {} for v in variants}
    product = {}
    for n in args.sizes:
        for c in args.contrasts:
            A, As, b = problem(n, c)
            if not args.no_product:
                product[n, c] = product_iterations(A, b, args.rtol, args.maxiter)
            for v in variants:
                results[v][n, c] = run_variant(As, b, n, v, args.rtol, args.maxiter)
            print(f"(done {n}^2, contrast {c:g})", file=sys.stderr, flush=True)
    report(results, product, variants, args.sizes, args.contrasts)


if __name__ == "__main__":
    main()
