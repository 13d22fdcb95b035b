"""Operators the tests share."""
import numpy as np
import scipy.sparse as sp

from bubbleflow.operators.poisson import PoissonOperator


def bubbly_operator(n, contrast, backend, seed=0, ny=None):
    """Twelve bubbles under a free surface, density 1 in the gas and
    ``contrast`` in the liquid, arithmetic face densities."""
    ny = ny or n
    h = 1.0 / n
    X, Y = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(ny) + 0.5) * h)
    rng = np.random.default_rng(seed)
    phi = 0.8 * ny * h - Y
    for _ in range(12):
        cx, cy, r = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.7) * ny * h, rng.uniform(0.03, 0.08)
        phi = np.minimum(phi, np.hypot(X - cx, Y - cy) - r)
    rho = np.where(phi < 0, 1.0, contrast)
    rx, ry = 0.5 * (rho[:, 1:] + rho[:, :-1]), 0.5 * (rho[1:, :] + rho[:-1, :])
    return PoissonOperator(1.0 / rx, 1.0 / ry, h, h, backend=backend)


def seven_point(beta_x, beta_y, beta_z, h):
    """The matrix row by row from the textbook stencil: for every cell and
    each of its six neighbours inside the box, ``-beta_face / h_axis^2``
    off the diagonal and the sum of those on it (Neumann walls)."""
    nz, ny, nx = beta_x.shape[0], beta_x.shape[1], beta_x.shape[2] + 1
    hx, hy, hz = h
    n = nx * ny * nz
    A = sp.lil_matrix((n, n))

    def k(i, j, l):
        return (l * ny + j) * nx + i
    for l in range(nz):
        for j in range(ny):
            for i in range(nx):
                row = k(i, j, l)
                for di, dj, dl, c in ((-1, 0, 0, beta_x[l, j, i - 1] / hx ** 2 if i > 0 else 0),
                                      (1, 0, 0, beta_x[l, j, i] / hx ** 2 if i < nx - 1 else 0),
                                      (0, -1, 0, beta_y[l, j - 1, i] / hy ** 2 if j > 0 else 0),
                                      (0, 1, 0, beta_y[l, j, i] / hy ** 2 if j < ny - 1 else 0),
                                      (0, 0, -1, beta_z[l - 1, j, i] / hz ** 2 if l > 0 else 0),
                                      (0, 0, 1, beta_z[l, j, i] / hz ** 2 if l < nz - 1 else 0)):
                    if c:
                        A[row, k(i + di, j + dj, l + dl)] = -c
                        A[row, row] += c
    return A.tocsr()
