"""The discontinuous-coefficient 5-point pressure operator.

The pressure equation of the projection method, -div((1/rho) grad p) = f on a
uniform cell-centred grid with homogeneous Neumann walls, gives a symmetric
positive semi-definite matrix whose null space is the constants.  We keep it
singular: nothing is overwritten to pin the pressure (the right-hand side is
made compatible and the answer gauged instead, see ``bubbleflow.linalg.krylov``).

Face couplings are ``c = beta_f / h^2`` with ``beta_f = 1 / rho_f``.  Two
storages give the same matrix:

``diagonals``
    The diagonal storage of Gupta (2010, section 6.1), equal lengths for
    coalesced reads: five arrays (south, west, centre, east, north) of
    matrix entries, offsets ``-nx, -1, 0, +1, +nx``, zero where a neighbour
    is a wall.
``matrix_free``
    Only the face couplings; the apply is the flux form
    ``sum_faces c (x_p - x_q)``, whose rows sum to zero exactly.
"""
from __future__ import annotations

import functools

import numpy as np

from . import poisson_cuda
from ..compute.backend import array_module, backend_of, get_backend
from ..compute.transfer import on_backend
from ..compute.twins import twin
from ..mesh.grid import Grid, face_sides

__all__ = ["PoissonOperator", "assemble_pressure_operator", "gravity_rhs", "STORAGES",
           "diagonals_from_faces", "face_couplings", "apply_diagonals", "apply_faces",
           "residual_from_product"]

STORAGES = ("diagonals", "matrix_free")


class PoissonOperator:
    """Symmetric 5-point operator of -div(beta grad .) with Neumann walls.

    Parameters
    ----------
    beta_x : array (ny, nx-1)
        1/rho on the interior vertical faces (m^3/kg).
    beta_y : array (ny-1, nx)
        1/rho on the interior horizontal faces.
    hx, hy : float
        Cell sizes (m).
    backend : str or Backend
    dtype : numpy dtype, default float64
    storage : {"diagonals", "matrix_free"}
    grid : Grid, optional
        The grid the operator lives on (default: one built from the face
        arrays' shape and ``hx``, ``hy``).  Its partitions give the
        deflation subdomains and the engines' tiles.
    densities : bool, default False
        ``beta_x`` and ``beta_y`` are the face densities ``rho``; the
        operator takes their reciprocals (``1.0 / rho``, rounded as that
        expression is).

    Notes
    -----
    Vectors may be flat ``(nx*ny,)`` or grid-shaped ``(ny, nx)``; the result
    has the shape of the input.  ``A @ x``, ``A.matvec(x)`` and
    ``A.dot(x)`` are the same.
    """

    nullspace = "constant"

    def __init__(self, beta_x, beta_y, hx, hy, backend="numpy", dtype=np.float64, storage="diagonals",
                 densities=False, grid=None):
        if storage not in STORAGES:
            raise ValueError(f"unknown storage {storage!r}; expected one of {STORAGES}")
        self.backend = get_backend(backend)
        # On the backend, in float64 (one transfer when given host arrays for CuPy).
        beta_x = _on_backend(beta_x, self.backend)
        beta_y = _on_backend(beta_y, self.backend)
        if beta_x.ndim != 2 or beta_y.ndim != 2:
            raise ValueError(f"beta_x and beta_y must be 2D; got shapes {beta_x.shape}, {beta_y.shape}")
        self.ny, nxm1 = beta_x.shape
        self.nx = nxm1 + 1
        if beta_y.shape != (self.ny - 1, self.nx):
            raise ValueError(f"beta_y has shape {beta_y.shape}; expected {(self.ny - 1, self.nx)}")
        self.hx, self.hy = float(hx), float(hy)
        if grid is None:
            grid = Grid.regular((self.nx, self.ny), (self.nx * self.hx, self.ny * self.hy))
        elif grid.shape != (self.ny, self.nx):
            raise ValueError(f"face arrays for {self.ny} x {self.nx} cells on a grid of shape {grid.shape}")
        self.grid = grid
        self.dtype = np.dtype(dtype)
        self.storage = storage
        self.shape = (self.nx * self.ny, self.nx * self.ny)
        self._norm_inf = None
        if storage == "diagonals":
            self.diagonals = diagonals_from_faces(beta_x, beta_y, self.hx, self.hy,
                                                  reciprocal=densities, dtype=self.dtype)
            return
        cx, cy = _face_couplings(beta_x, beta_y, self.hx, self.hy, densities)
        self.cx = cx.astype(self.dtype, copy=False)
        self.cy = cy.astype(self.dtype, copy=False)

    @classmethod
    def from_faces(cls, betas, grid, backend="numpy", dtype=np.float64, densities=False,
                   storage="matrix_free", out=None):
        """The operator of any dimension from the face coefficients per axis.

        ``betas[k]`` holds ``1/rho`` (``rho`` with ``densities``) on the
        interior faces normal to grid axis ``k`` (x, y[, z]): the grid's
        array shape with one cell fewer along that axis.  In 2-D this is the
        constructor; in 3-D the 7-point operator, matrix free (the flux form
        over the face couplings ``beta / h_k^2``) or, with ``storage=
        "diagonals"``, in the diagonal storage of Gupta (2010): seven
        diagonals ``(B, S, W, C, E, N, T)`` of the grid's shape (z-, y-,
        x-lower neighbour, centre, x-, y-, z-upper; zero across the walls).

        ``out``: in 3-D, matrix free and in float64, one array per axis of
        that axis's faces' shape on the backend, which the couplings are
        written into and the operator then holds: a solver's own
        (:meth:`~bubbleflow.linalg.solver.PressureSolver.operator_arrays`),
        whose launches read them, so that its update copies nothing.  An
        operator built in them earlier is overwritten.

        >>> import numpy as np
        >>> g = Grid.regular((4, 3, 2), (1.0, 1.0, 1.0))
        >>> betas = [np.ones(s) for s in ((2, 3, 3), (2, 2, 4), (1, 3, 4))]
        >>> A = PoissonOperator.from_faces(betas, g)
        >>> A.grid_shape, A.shape, float(abs(A @ np.ones(24)).max())
        ((2, 3, 4), (24, 24), 0.0)
        """
        if out is not None and (grid.ndim != 3 or storage != "matrix_free"
                                or np.dtype(dtype) != np.float64):
            raise ValueError("from_faces: out= is for a 3-D matrix-free float64 operator; got "
                             f"{grid.ndim}-D, storage {storage!r}, dtype {np.dtype(dtype)}")
        if grid.ndim == 2:
            return cls(betas[0], betas[1], *grid.spacing, backend=backend, dtype=dtype,
                       storage=storage, densities=densities, grid=grid)
        if storage not in STORAGES:
            raise ValueError(f"unknown storage {storage!r}; expected one of {STORAGES}")
        self = cls.__new__(cls)
        self.backend = get_backend(backend)
        self.grid, self.dtype, self.storage = grid, np.dtype(dtype), storage
        self._norm_inf = None
        self.shape = (grid.size, grid.size)
        faces = []
        for axis, (beta, h) in enumerate(zip(betas, grid.spacing)):
            beta = _on_backend(beta, self.backend)
            expected = grid.faces_shape(axis)
            if tuple(beta.shape) != tuple(expected):
                raise ValueError(f"faces normal to axis {'xyz'[axis]} have shape "
                                 f"{tuple(beta.shape)}; expected {tuple(expected)}")
            faces.append(face_couplings(beta, h, densities,
                                        out=None if out is None else _out_of(out, axis, beta)))
        if storage == "diagonals":
            # Formed in float64 and rounded, as the 2-D diagonals are.
            self.diagonals = tuple(d.astype(self.dtype, copy=False)
                                   for d in diagonals_from_couplings(faces, self.backend.xp))
        else:
            self._faces = tuple(c.astype(self.dtype, copy=False) for c in faces)
        return self

    @property
    def ndim(self):
        return self.grid.ndim

    # ------------------------------------------------------------------ entries
    @property
    def grid_shape(self):
        return tuple(self.grid.shape)

    def entries(self):
        """The diagonals, each of the grid's shape, on the backend: (S, W, C, E,
        N) in 2-D, (B, S, W, C, E, N, T) in 3-D (:func:`diagonals_from_couplings`).

        With ``diagonals`` storage these are the operator's own arrays (do not
        modify them); with ``matrix_free`` they are computed on the backend
        from the face couplings at every call.
        """
        if self.storage == "diagonals":
            return self.diagonals
        xp = self.backend.xp
        couplings = tuple(_f64(c, xp) for c in self.couplings())
        return tuple(d.astype(self.dtype, copy=False)
                     for d in diagonals_from_couplings(couplings, xp))

    def couplings(self):
        """Face couplings ``(cx, cy)`` on the backend: ``cx`` (ny, nx-1) on the
        vertical faces, ``cy`` (ny-1, nx) on the horizontal ones (positive).

        The stored arrays for ``matrix_free`` storage (do not modify them); new
        arrays (``-E[:, :-1]``, ``-N[:-1, :]``) for ``diagonals`` storage.
        """
        arrays, couplings_of = self.coupling_parts()
        return couplings_of(arrays)

    def coupling_parts(self):
        """``(arrays, couplings_of)``: the operator's arrays the face
        couplings come from, and the function that gives them from those
        arrays alone by launches (``couplings_of(arrays) ==
        couplings()``), for a caller that replays it from a CUDA graph."""
        if self.storage == "matrix_free":
            return (self._faces if self.ndim != 2 else (self.cx, self.cy)), tuple
        return self.diagonals[self.ndim + 1:], couplings_from_upper     # E, N[, T]

    def norm_inf(self):
        """Largest absolute row sum (twice the largest diagonal entry).

        One host synchronisation the first time; the value is kept.
        """
        if self._norm_inf is None:
            C = self.diagonals[self.ndim] if self.storage == "diagonals" else self._centre()
            self._norm_inf = 2.0 * float(C.max()) if C.size else 0.0
        return self._norm_inf

    def diagonal(self):
        """Main diagonal as a flat backend array (a new array)."""
        if self.storage == "diagonals":
            return self.diagonals[self.ndim].ravel().copy()
        return self._centre().ravel()

    def _centre(self):
        xp = self.backend.xp
        return centre_from_couplings(tuple(_f64(c, xp) for c in self.couplings()),
                                      xp).astype(self.dtype, copy=False)

    # ------------------------------------------------------------ host copies
    @functools.cached_property
    def diagonals_host(self):
        """The five diagonals ``(S, W, C, E, N)`` as NumPy arrays of the operator's dtype.

        For host-only exports (:meth:`to_scipy`, checks): copied from the
        backend once, on first use, and kept.  Nothing in the solve or the
        set-up of a time step uses it.
        """
        return tuple(np.asarray(self.backend.to_host(d)) for d in self.entries())

    @functools.cached_property
    def couplings_host(self):
        """The face couplings ``(cx, cy)`` as NumPy arrays (lazy host copy, kept)."""
        return tuple(np.array(self.backend.to_host(c)) for c in self.couplings())

    # Old private names, kept for code written against them: lazy host copies.
    _diagonals_host = property(lambda self: self.diagonals_host)
    _cx_host = property(lambda self: self.couplings_host[0])
    _cy_host = property(lambda self: self.couplings_host[1])

    # -------------------------------------------------------------------- apply
    def matvec(self, x, out=None):
        """Return ``A x`` (``out`` is filled and returned when given)."""
        return self._apply(x, out, None)

    def residual(self, b, x, out=None):
        """Return ``b - A x``, in one pass over the grid (``b`` and ``x`` of
        one shape, flat or the grid's; ``out`` filled and returned when
        given): the bits of ``b - A.matvec(x)``."""
        return self._apply(x, out, b)

    def _apply(self, x, out, b):
        xp = self.backend.xp
        shape = x.shape
        x2 = x.reshape(self.grid_shape)
        y = xp.empty_like(x2) if out is None else out.reshape(self.grid_shape)
        b2 = None if b is None else b.reshape(self.grid_shape)
        if self.storage == "diagonals":
            apply_diagonals(self.diagonals, x2, y, b2)
        else:
            apply_faces(self.couplings(), x2, y, b2)
        return y.reshape(shape)

    dot = matvec

    def __matmul__(self, x):
        return self.matvec(x)

    # ----------------------------------------------------------------- exports
    def to_scipy(self):
        """The matrix as a SciPy CSR matrix (on the host), for checks."""
        import scipy.sparse as sp

        if self.ndim != 2:
            return faces_to_scipy(self.couplings_host, self.grid_shape).astype(self.dtype)

        nx, ny = self.nx, self.ny
        idx = np.arange(nx * ny).reshape(ny, nx)
        S, W, C, E, N = self.diagonals_host
        rows = [idx.ravel()]
        cols = [idx.ravel()]
        vals = [C.ravel()]
        for d, sl_row, sl_col in (
            (W, (slice(None), slice(1, None)), (slice(None), slice(None, -1))),
            (E, (slice(None), slice(None, -1)), (slice(None), slice(1, None))),
            (S, (slice(1, None), slice(None)), (slice(None, -1), slice(None))),
            (N, (slice(None, -1), slice(None)), (slice(1, None), slice(None))),
        ):
            rows.append(idx[sl_row].ravel())
            cols.append(idx[sl_col].ravel())
            vals.append(d[sl_row].ravel())
        A = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=self.shape).tocsr()
        A.sum_duplicates()
        return A.astype(self.dtype)

    def to_backend_sparse(self):
        """The matrix as a CSR matrix of the backend (SciPy, or cuSPARSE), built
        there from :meth:`entries` (any dimension, either storage).

        Rows hold their entries in column order (the lower neighbours from the
        slowest axis to the fastest, the centre, the upper neighbours from the
        fastest to the slowest: S, W, C, E, N in 2-D), walls left out: the
        pattern and values of :meth:`to_scipy`.  int32 indices (cuSPARSE's); a
        matrix of 2^31 entries or more is refused.
        """
        xp = self.backend.xp
        shape = self.grid_shape
        ndim, n = len(shape), self.shape[0]
        width = 2 * ndim + 1
        index = [xp.arange(m, dtype=np.int32).reshape([-1 if k == a else 1 for k in range(ndim)])
                 for a, m in enumerate(shape)]
        values = xp.empty((n, width), dtype=self.dtype)
        present = xp.empty((n, width), dtype=bool)
        offsets = []
        for k, d in enumerate(self.entries()):
            values[:, k] = d.ravel()
            # Slot k < ndim: the lower neighbour along array axis k; k > ndim:
            # the upper one along array axis 2 ndim - k (the order of entries()).
            a = k if k < ndim else 2 * ndim - k
            stride = int(np.prod(shape[a + 1:]))
            if k < ndim:
                inside, offset = index[a] > 0, -stride
            elif k > ndim:
                inside, offset = index[a] < shape[a] - 1, stride
            else:
                inside, offset = xp.asarray(True), 0
            present[:, k] = xp.broadcast_to(inside, shape).ravel()
            offsets.append(offset)
        del d                                # matrix free: the diagonals, before the compression
        counts = present.sum(axis=1, dtype=np.int32)
        nnz = int(counts.sum(dtype=np.int64))
        if nnz >= 2 ** 31:
            raise ValueError(f"a CSR matrix of {nnz} entries: int32 indices hold fewer than 2^31")
        indptr = xp.zeros(n + 1, dtype=np.int32)
        xp.cumsum(counts, dtype=np.int32, out=indptr[1:])
        keep = present.ravel()
        data = values.ravel()[keep]
        del values
        offsets = xp.asarray(offsets, dtype=np.int32)
        columns = (xp.arange(n, dtype=np.int32)[:, None] + offsets[None, :]).ravel()[keep]
        return self.backend.sparse.csr_matrix((data, columns, indptr), shape=self.shape)

    def __repr__(self):
        cells = "x".join(str(n) for n in self.grid_shape)
        return f"<PoissonOperator {cells} {self.storage} {self.dtype} on {self.backend.name}>"


def couplings_from_upper(upper):
    """The face couplings per axis (x, y[, z]) from the upper diagonals
    ``(E, N[, T])`` of the grid's shape: ``-E`` on the faces with a cell
    beyond them, and so on."""
    ndim = len(upper)
    return tuple(-d[face_sides(ndim, axis)[0]] for axis, d in enumerate(upper))


def faces_to_scipy(couplings, shape):
    """The SciPy CSR matrix of the flux-form operator from host face
    couplings per axis (any dimension; arrays hold the axes reversed)."""
    import scipy.sparse as sp

    ndim = len(shape)
    n = int(np.prod(shape))
    index = np.arange(n).reshape(shape)
    rows, cols, vals = [], [], []
    centre = centre_from_couplings(tuple(np.asarray(c, dtype=np.float64) for c in couplings))
    for axis, c in enumerate(couplings):
        lower, upper = face_sides(ndim, axis)
        p, q = index[lower].ravel(), index[upper].ravel()
        rows += [p, q]
        cols += [q, p]
        vals += [-np.ravel(c), -np.ravel(c)]
    rows.append(np.arange(n))
    cols.append(np.arange(n))
    vals.append(centre.ravel())
    A = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, n)).tocsr()
    A.sum_duplicates()
    return A


def _on_backend(a, backend):
    """``a`` as a float64 array of ``backend`` (a transfer only across backends)."""
    return on_backend(a, backend, dtype=np.float64)


def _face_couplings(beta_x, beta_y, hx, hy, reciprocal):
    """The face couplings ``beta / h^2`` of both axes (:func:`face_couplings`)."""
    return face_couplings(beta_x, hx, reciprocal), face_couplings(beta_y, hy, reciprocal)


@twin
def face_couplings(beta, h, reciprocal=False, out=None):
    """The couplings ``beta / h^2`` of the faces normal to an axis of cell
    size ``h`` (``1 / beta`` first with ``reciprocal``: ``beta`` then holds
    densities), float64 on ``beta``'s backend: written into ``out`` where
    given (a float64 array of ``beta``'s shape on its backend), else a new
    array.  On CuPy one pass instead of two
    (:func:`bubbleflow.operators.poisson_cuda.face_couplings`, equal bit for
    bit): a 3-D flow forms them for every step's operator."""
    couplings = (1.0 / beta if reciprocal else beta) / h ** 2
    if out is None:
        return couplings
    out[...] = couplings
    return out


@face_couplings.register("cupy")
def _face_couplings_cuda(beta, h, reciprocal=False, out=None):
    if beta.dtype != np.float64:
        return NotImplemented
    return poisson_cuda.face_couplings(beta, h, reciprocal, out)


def _out_of(out, axis, beta):
    """``out[axis]``, checked: a float64 array of ``beta``'s shape and backend."""
    a = out[axis]
    if type(a) is not type(beta) or a.dtype != np.float64 or a.shape != beta.shape:
        raise ValueError(f"from_faces: out[{axis}] is a {type(a).__name__} of {a.dtype} "
                         f"{tuple(a.shape)}; expected {type(beta).__name__} of float64 "
                         f"{tuple(beta.shape)}")
    return a


def _f64(a, xp):
    return a.astype(np.float64, copy=False)


def centre_from_couplings(couplings, xp=np):
    """Main diagonal, the sum of a cell's face couplings, from the positive
    couplings per axis (x, y[, z]; any backend).

    Summed in the order of the stencil's lower faces from the last axis down,
    then its upper faces from the first axis up (2-D: S, W, E, N), so that
    it equals the ``C`` of the diagonal storage's ``-(S + W + E + N)`` bit for bit.
    In-place adds on a view given as its own output (CuPy copies an input
    that overlaps a different output).
    """
    ndim = len(couplings)
    c0 = couplings[0]
    shape = list(c0.shape)
    shape[ndim - 1] += 1
    C = xp.zeros(tuple(shape), dtype=c0.dtype)
    order = [(axis, 1) for axis in reversed(range(ndim))] + [(axis, 0) for axis in range(ndim)]
    for k, (axis, side) in enumerate(order):
        view = C[face_sides(ndim, axis)[side]]
        if k == 0:
            view[...] = couplings[axis]              # 0 + c, exactly
        else:
            xp.add(view, couplings[axis], out=view)
    return C


@twin
def diagonals_from_faces(beta_x, beta_y, hx, hy, reciprocal=False, dtype=np.float64):
    """The five diagonals ``(S, W, C, E, N)`` of ``dtype`` from the face
    ``beta = 1/rho`` (``beta_x`` (ny, nx-1), ``beta_y`` (ny-1, nx), float64 on
    their backend), or from ``rho`` with ``reciprocal`` (array code; on CuPy
    in float64 one kernel, :func:`bubbleflow.operators.poisson_cuda.op_diagonals`,
    equal bit for bit)."""
    xp = backend_of(beta_x).xp
    cx, cy = _face_couplings(beta_x, beta_y, hx, hy, reciprocal)
    return tuple(d.astype(dtype, copy=False) for d in diagonals_from_couplings((cx, cy), xp))


@diagonals_from_faces.register("cupy")
def _diagonals_from_faces_cuda(beta_x, beta_y, hx, hy, reciprocal=False, dtype=np.float64):
    if np.dtype(dtype) != np.float64:
        return NotImplemented
    return poisson_cuda.op_diagonals(beta_x, beta_y, hx, hy, reciprocal=reciprocal)


def diagonals_from_couplings(couplings, xp=np):
    """The ``2 ndim + 1`` diagonals of matrix entries from the positive face
    couplings per axis (x, y[, z]), in Gupta (2010)'s order: the lower
    neighbours from the last axis down, the centre, the upper neighbours
    from the first axis up (2-D: S, W, C, E, N; 3-D: B, S, W, C, E, N, T);
    each of the grid's shape, zero across the walls."""
    ndim = len(couplings)
    shape = list(couplings[0].shape)
    shape[ndim - 1] += 1
    lower, upper = [], []
    for axis, c in enumerate(couplings):
        below, above = face_sides(ndim, axis)
        lo = xp.zeros(tuple(shape), dtype=c.dtype)
        hi = xp.zeros(tuple(shape), dtype=c.dtype)
        xp.negative(c, out=lo[above])          # the neighbour below a cell: its lower face
        xp.negative(c, out=hi[below])
        lower.append(lo)
        upper.append(hi)
    return tuple(lower[::-1]) + (centre_from_couplings(tuple(couplings), xp),) + tuple(upper)


@twin
def apply_diagonals(diagonals, x, y, b=None):
    """NumPy-style y = A x from the ``2 ndim + 1`` diagonals (2-D: S, W, C,
    E, N; the order of :func:`diagonals_from_couplings`; also runs on CuPy);
    with ``b`` (of ``x``'s shape) the residual ``y = b - A x`` instead."""
    ndim = x.ndim
    y[...] = diagonals[ndim] * x
    for axis in range(ndim):
        below, above = face_sides(ndim, axis)
        y[above] += diagonals[ndim - 1 - axis][above] * x[below]
        y[below] += diagonals[ndim + 1 + axis][below] * x[above]
    return y if b is None else residual_from_product(b, y)


def residual_from_product(b, y):
    """``b - y`` written over the product ``y``."""
    array_module(y).subtract(b.reshape(y.shape), y, out=y)
    return y


@apply_diagonals.register("cupy")
def _apply_diagonals_cuda(diagonals, x, y, b=None):
    if len(diagonals) == 7 and x.dtype == y.dtype and y.flags.c_contiguous:
        return poisson_cuda.stencil7_diagonals(diagonals, x, y, b)
    if len(diagonals) != 5:
        return NotImplemented
    return poisson_cuda.stencil5_diagonals(diagonals, x, y, b)


@twin
def apply_faces(couplings, x, y, b=None):
    """Matrix-free ``y = A x`` in flux form from the face couplings per axis
    (x, y[, z]), for any dimension (array code; also runs on CuPy); with
    ``b`` (of ``x``'s shape) the residual ``y = b - A x`` instead."""
    y[...] = 0
    for axis, c in enumerate(couplings):
        lower, upper = face_sides(x.ndim, axis)
        flux = c * (x[upper] - x[lower])
        y[lower] -= flux
        y[upper] += flux
    return y if b is None else residual_from_product(b, y)


@apply_faces.register("cupy")
def _apply_faces_cuda(couplings, x, y, b=None):
    if len(couplings) == 3 and x.dtype == y.dtype and y.flags.c_contiguous:
        return poisson_cuda.stencil7_faces(*couplings, x, y, b)
    if len(couplings) != 2:
        return NotImplemented
    return poisson_cuda.stencil5_faces(*couplings, x, y, b)


def assemble_pressure_operator(grid, phases, backend="numpy", dtype=np.float64, storage="diagonals"):
    """The pressure operator of a two-phase configuration.

    Parameters
    ----------
    grid : Grid
    phases : PhaseFields
        Face densities ``rho_x``, ``rho_y`` (and ``rho_z`` in 3-D; kg/m^3).
        In 3-D through :meth:`PoissonOperator.from_faces` (seven diagonals
        or matrix free).
    """
    if grid.ndim != 2:
        return PoissonOperator.from_faces(phases.faces, grid, backend=backend, dtype=dtype,
                                          densities=True, storage=storage)
    return PoissonOperator(phases.rho_x, phases.rho_y, grid.hx, grid.hy, backend=backend,
                           dtype=dtype, storage=storage, densities=True, grid=grid)


def gravity_rhs(grid, gravity):
    """Right-hand side of the first projection step of a fluid at rest.

    The provisional velocity is ``u* = -g dt`` on the interior horizontal
    faces and zero on the walls, and ``f = -div(u*) / dt``: ``+g/hy`` in the
    bottom row, ``-g/hy`` in the top row, zero elsewhere (units 1/s^2).  It
    sums to zero, so the singular Neumann system is compatible.  The exact
    answer is the hydrostatic pressure wherever the columns are uniform.
    """
    shape = list(grid.shape)
    shape[0] += 1                 # vertical face velocities / dt, the walls first and last
    v = np.zeros(shape)
    v[1:-1] = -float(gravity)
    div = (v[1:] - v[:-1]) / grid.spacing[-1]
    return -div
