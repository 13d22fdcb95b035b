"""Two array operations that the modules of the deflation set-up share.

The set-up runs on the operator's backend and keeps host synchronisations
few (each one waits for the device): :func:`scatter_add` accumulates
repeated indices without the host checks of ``cupy.bincount``, and
:func:`host_array` reads a small array (a range, a count, the blocks of the
vectors) back to the host where the set-up needs its values.
"""
from __future__ import annotations

import numpy as np

__all__ = ["scatter_add", "host_array"]


def scatter_add(idx, vals, size, xp):
    """``out[idx] += vals`` with repeated indices accumulated, float64, ``(size,)``.

    ``xp.add.at``: no host synchronisation on CuPy (``cupy.bincount`` checks
    the signs and the maximum of its input on the host).
    """
    out = xp.zeros(size, dtype=np.float64)
    if idx.size:
        xp.add.at(out, idx, vals)
    return out


def host_array(a):
    """``a`` as a NumPy array: copied from the device when it lives there."""
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)
