"""The discontinuous-coefficient 5-point pressure operator.

The pressure equation of the projection method, -div((1/rho) grad p) = f on a
uniform cell-centred grid with homogeneous Neumann walls, gives a symmetric
positive semi-definite matrix whose null space is the constants.  We keep it
singular: nothing is overwritten to pin the pressure (the right-hand side is
made compatible and the answer gauged instead, see ``bubbleflow.krylov``).

Face couplings are ``c = beta_f / h^2`` with ``beta_f = 1 / rho_f``.  Two
storages give the same matrix:

``diagonals``
    The seed's layout: five arrays (south, west, centre, east, north) of
    matrix entries, offsets ``-nx, -1, 0, +1, +nx``, zero where a neighbour
    is a wall.
``matrix_free``
    Only the face couplings; the apply is the flux form
    ``sum_faces c (x_p - x_q)``, whose rows sum to zero exactly.
"""
from __future__ import annotations

import numpy as np

from .backend import get_backend

__all__ = ["PoissonOperator", "assemble_pressure_operator", "gravity_rhs", "STORAGES"]

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

    Notes
    -----
    Vectors may be flat ``(nx*ny,)`` or grid-shaped ``(ny, nx)``; the result
    has the shape of the input.  ``A @ x``, ``A.matvec(x)`` and
    ``A.dot(x)`` are the same.
    """

    nullspace = "constant"

    def __init__(self, beta_x, beta_y, hx, hy, backend="numpy", dtype=np.float64, storage="diagonals"):
        if storage not in STORAGES:
            raise ValueError(f"unknown storage {storage!r}; expected one of {STORAGES}")
        self.backend = get_backend(backend)
        xp = self.backend.xp
        beta_x = np.asarray(self.backend.to_host(beta_x), dtype=np.float64)
        beta_y = np.asarray(self.backend.to_host(beta_y), dtype=np.float64)
        self.ny, nxm1 = beta_x.shape
        self.nx = nxm1 + 1
        if beta_y.shape != (self.ny - 1, self.nx):
            raise ValueError(f"beta_y has shape {beta_y.shape}; expected {(self.ny - 1, self.nx)}")
        self.hx, self.hy = float(hx), float(hy)
        self.dtype = np.dtype(dtype)
        self.storage = storage
        self.shape = (self.nx * self.ny, self.nx * self.ny)
        cx = beta_x / self.hx ** 2
        cy = beta_y / self.hy ** 2
        self._cx_host, self._cy_host = cx, cy
        S, W, C, E, N = _diagonals_from_couplings(cx, cy)
        self._diagonals_host = (S, W, C, E, N)
        if storage == "diagonals":
            self.diagonals = tuple(xp.asarray(d, dtype=self.dtype) for d in (S, W, C, E, N))
        else:
            self.cx = xp.asarray(cx, dtype=self.dtype)
            self.cy = xp.asarray(cy, dtype=self.dtype)

    # ------------------------------------------------------------------ entries
    @property
    def grid_shape(self):
        return (self.ny, self.nx)

    def entries(self):
        """The five diagonals (S, W, C, E, N), each ``(ny, nx)``, on the backend."""
        if self.storage == "diagonals":
            return self.diagonals
        xp = self.backend.xp
        return tuple(xp.asarray(d, dtype=self.dtype) for d in self._diagonals_host)

    def norm_inf(self):
        """Largest absolute row sum (twice the largest diagonal entry)."""
        return 2.0 * float(self._diagonals_host[2].max())

    def diagonal(self):
        """Main diagonal as a flat backend array."""
        return self.backend.xp.asarray(self._diagonals_host[2].ravel(), dtype=self.dtype)

    # -------------------------------------------------------------------- apply
    def matvec(self, x, out=None):
        """Return ``A x`` (``out`` is filled and returned when given)."""
        xp = self.backend.xp
        shape = x.shape
        x2 = x.reshape(self.ny, self.nx)
        y = xp.empty_like(x2) if out is None else out.reshape(self.ny, self.nx)
        if self.backend.name == "cupy":
            from . import kernels

            x2 = xp.ascontiguousarray(x2)
            if self.storage == "diagonals":
                kernels.stencil5_diagonals(self.diagonals, x2, y, self.nx, self.ny)
            else:
                kernels.stencil5_faces(self.cx, self.cy, x2, y, self.nx, self.ny)
        elif self.storage == "diagonals":
            apply_diagonals(self.diagonals, x2, y)
        else:
            apply_faces(self.cx, self.cy, x2, y)
        return y.reshape(shape)

    dot = matvec

    def __matmul__(self, x):
        return self.matvec(x)

    # ----------------------------------------------------------------- exports
    def to_scipy(self):
        """The matrix as a SciPy CSR matrix (on the host), for checks."""
        import scipy.sparse as sp

        nx, ny = self.nx, self.ny
        idx = np.arange(nx * ny).reshape(ny, nx)
        S, W, C, E, N = self._diagonals_host
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
        """The matrix as a CSR matrix of the backend (SciPy or cuSPARSE)."""
        A = self.to_scipy()
        if self.backend.name == "cupy":
            return self.backend.sparse.csr_matrix(A)
        return A

    def __repr__(self):
        return (f"<PoissonOperator {self.ny}x{self.nx} {self.storage} {self.dtype} "
                f"on {self.backend.name}>")


def _diagonals_from_couplings(cx, cy):
    """Five diagonals of matrix entries from positive face couplings (NumPy)."""
    ny, nx = cx.shape[0], cx.shape[1] + 1
    S = np.zeros((ny, nx))
    W = np.zeros((ny, nx))
    E = np.zeros((ny, nx))
    N = np.zeros((ny, nx))
    W[:, 1:] = -cx
    E[:, :-1] = -cx
    S[1:, :] = -cy
    N[:-1, :] = -cy
    C = -(S + W + E + N)
    return S, W, C, E, N


def apply_diagonals(diagonals, x, y):
    """NumPy-style y = A x from the five diagonals (also runs on CuPy)."""
    S, W, C, E, N = diagonals
    y[...] = C * x
    y[:, 1:] += W[:, 1:] * x[:, :-1]
    y[:, :-1] += E[:, :-1] * x[:, 1:]
    y[1:, :] += S[1:, :] * x[:-1, :]
    y[:-1, :] += N[:-1, :] * x[1:, :]
    return y


def apply_faces(cx, cy, x, y):
    """NumPy-style matrix-free y = A x in flux form (also runs on CuPy)."""
    fx = cx * (x[:, 1:] - x[:, :-1])
    fy = cy * (x[1:, :] - x[:-1, :])
    y[...] = 0
    y[:, :-1] -= fx
    y[:, 1:] += fx
    y[:-1, :] -= fy
    y[1:, :] += fy
    return y


def assemble_pressure_operator(grid, phases, backend="numpy", dtype=np.float64, storage="diagonals"):
    """The pressure operator of a two-phase configuration.

    Parameters
    ----------
    grid : Grid
    phases : PhaseFields
        Face densities ``rho_x``, ``rho_y`` (kg/m^3).
    """
    return PoissonOperator(1.0 / phases.rho_x, 1.0 / phases.rho_y, grid.hx, grid.hy,
                           backend=backend, dtype=dtype, storage=storage)


def gravity_rhs(grid, gravity):
    """Right-hand side of the first projection step of a fluid at rest.

    The provisional velocity is ``u* = -g dt`` on the interior horizontal
    faces and zero on the walls, and ``f = -div(u*) / dt``: ``+g/hy`` in the
    bottom row, ``-g/hy`` in the top row, zero elsewhere (units 1/s^2).  It
    sums to zero, so the singular Neumann system is compatible.  The exact
    answer is the hydrostatic pressure wherever the columns are uniform.
    """
    v = np.zeros((grid.ny + 1, grid.nx))  # face velocities / dt, walls at rows 0 and ny
    v[1:-1, :] = -float(gravity)
    div = (v[1:, :] - v[:-1, :]) / grid.hy
    return -div
