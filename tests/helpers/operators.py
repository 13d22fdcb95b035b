"""Operators the tests share."""
import numpy as np

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
