"""The Chebyshev smoother's scalars, shared by the multigrid cycle's array code
(:mod:`.multigrid`) and its CUDA twin (:mod:`.multigrid_cuda`); a module of its
own because :mod:`.multigrid` imports the twin to register it."""
from __future__ import annotations

__all__ = ["LMAX", "chebyshev_coefficients"]

#: Gershgorin's bound on the spectrum of ``D^-1 A`` (rows summing to zero).
LMAX = 2.0


def chebyshev_coefficients(degree, ratio, upper=None):
    """The Chebyshev smoother's scalars on ``[upper / ratio, upper]``
    (``upper``: :data:`LMAX`): ``1 / theta`` of the first step and
    ``(a, c)`` of each later one, ``d <- a d + c D^-1 r``."""
    upper = LMAX if upper is None else upper
    lower = upper / ratio
    theta, delta = 0.5 * (upper + lower), 0.5 * (upper - lower)
    sigma = theta / delta
    rho = 1.0 / sigma
    steps = []
    for _ in range(int(degree) - 1):
        rho_next = 1.0 / (2.0 * sigma - rho)
        steps.append((rho_next * rho, 2.0 * rho_next / delta))
        rho = rho_next
    return 1.0 / theta, steps
