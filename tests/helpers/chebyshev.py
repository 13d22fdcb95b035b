"""What the tests of the viscous Chebyshev solves share: sweeps' schedules
from lists of ``(keep, gain)``, and stiff systems of every component."""
import numpy as np

from bubbleflow.flow.viscosity import ViscousSystem

#: Ghost signs of the walls normal to x, y and z: no-slip and free-slip mixed.
MIXED_WALLS = ((-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0))


def schedule_arrays(xp, schedules):
    """``(schedule, steps)`` as ``chebyshev_sweep`` takes them: the lists of
    ``(keep, gain)`` pairs ``schedules`` (one a system, of any lengths) in an
    array of ``xp`` (systems x width x 2, zeros past a list's end), and
    each list's length."""
    steps = [len(s) for s in schedules]
    table = np.zeros((len(schedules), max(max(steps, default=0), 1), 2))
    for i, s in enumerate(schedules):
        if s:
            table[i, :len(s)] = s
    return xp.asarray(table), steps


def stiff_systems(xp, rng, cells=(14, 21)):
    """The systems of every component of one grid (``cells`` x, y[, z]),
    random viscosity (10 or 0.1 a cell) and face densities (1 to 1000),
    dt 0.01: dt nu / h^2 up to about 50."""
    nd = len(cells)
    mu = xp.asarray(np.where(rng.random(cells[::-1]) < 0.5, 10.0, 0.1))
    systems = []
    for a in range(nd):
        shape = list(cells[::-1])
        shape[nd - 1 - a] -= 1
        systems.append(ViscousSystem(a, mu, xp.asarray(rng.uniform(1.0, 1000.0, shape)), 0.01,
                                     tuple(1 / n for n in cells), MIXED_WALLS[:nd]))
    return systems
