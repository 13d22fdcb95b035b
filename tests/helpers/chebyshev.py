"""Chebyshev sweeps' schedules for the tests, from lists of ``(keep, gain)``."""
import numpy as np


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
