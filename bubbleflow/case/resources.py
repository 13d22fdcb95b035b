"""Will a case fit?  A cheap memory estimate, checked before any array exists.

``bubbleflow run`` calls :func:`check_memory` right after choosing the
backend: a grid that cannot fit is refused in one line (exit 2) instead of a
long ``_ArrayMemoryError`` traceback, or, for grids that do not fail at once,
instead of swapping the machine to a halt.  Nothing here allocates arrays or
imports the numerics.
"""
from __future__ import annotations

import math

from .config import CaseError

__all__ = ["estimate_memory", "available_memory", "check_memory",
           "ARRAYS_PER_CELL", "SAFETY"]

#: Grid-sized arrays alive at the peak, in units of one array of the case's
#: precision per cell.  Calibrated on NumPy with tracemalloc (the peak of
#: ``bubbleflow.apps.cli.main(["run", ...])``, float64) as the slope of peak bytes
#: over cells between grid sizes, so that fixed costs cancel (operator
#: diagonals, preconditioner, Krylov vectors and their temporaries; in a flow
#: also the velocities, level set, properties and the momentum and WENO
#: temporaries).  The largest slope measured, rounded up (the slopes:
#: docs/performance_records.md, "Figures behind code choices").
ARRAYS_PER_CELL = {"pressure": 30, "flow": 60}
#: Fixed cost: interpreter-side buffers, the deflation bookkeeping, HDF5
#: output chunks (above the measured intercept: docs/performance_records.md).
FIXED_BYTES = 8 * 2 ** 20
#: Refuse when the estimate exceeds this fraction of the free memory: the
#: estimate is approximate (its error against the measured peak:
#: docs/performance_records.md), and the rest of the machine needs some memory too.
SAFETY = 0.8

_GIB = 2 ** 30


def _coarse_vectors(case):
    """Deflation vectors (coarse matrix order) of a case, at most."""
    d = case.solver.deflation
    if d.type == "none":
        return 0
    if d.type == "stripes":
        return d.stripes
    k = math.prod(d.subdomain_counts(*case.grid.cells))
    # levelset_subdomains splits each subdomain by phase: at most one vector
    # per phase region and subdomain; two per subdomain bounds the usual case.
    return 2 * k if d.type == "levelset_subdomains" else k


def estimate_memory(case):
    """Bytes the solver needs on its device for ``case``, without allocating.

    Parameters
    ----------
    case : bubbleflow.case.config.Case

    Returns
    -------
    dict
        ``total`` (bytes), ``grid_arrays`` (bytes of the grid-sized arrays),
        ``coarse`` (bytes of the dense coarse matrix and its factor),
        ``cells``, ``arrays_per_cell`` and ``itemsize`` (bytes per value).
    """
    g = case.grid
    cells = math.prod(int(n) for n in g.cells)
    itemsize = 8                  # float64: the only precision a case can ask for
    per_cell = ARRAYS_PER_CELL.get(case.mode, ARRAYS_PER_CELL["flow"])
    grid_bytes = cells * per_cell * itemsize
    k = _coarse_vectors(case)
    # Dense k x k coarse matrix and its factor/inverse, in float64, plus the
    # n x k-sparse deflation basis (one value and index per cell).
    coarse = 2 * k * k * 8 + (cells * 12 if k else 0)
    total = int(grid_bytes + coarse + FIXED_BYTES)
    return {"total": total, "grid_arrays": int(grid_bytes), "coarse": int(coarse),
            "cells": cells, "arrays_per_cell": per_cell, "itemsize": itemsize}


def available_memory(backend):
    """``(free bytes or None, device description)`` for a backend.

    Parameters
    ----------
    backend : bubbleflow.compute.backend.Backend
        NumPy: the host's MemAvailable.  CuPy: the GPU's free memory
        (``cudaMemGetInfo``) plus what CuPy's pool holds but does not use.
        See :meth:`~bubbleflow.compute.backend.Backend.available_memory`.
    """
    return backend.available_memory()


def check_memory(case, backend, available=None):
    """Refuse a case whose estimated memory exceeds what is free.

    Cheap: reads ``/proc/meminfo`` or asks the GPU driver; allocates nothing.

    Parameters
    ----------
    case : bubbleflow.case.config.Case
    backend : bubbleflow.compute.backend.Backend
        As chosen for the run.
    available : int, optional
        Free bytes to check against instead of asking (for tests).

    Returns
    -------
    dict
        The :func:`estimate_memory` result, with ``available`` added (None
        when it could not be found; nothing is refused then).

    Raises
    ------
    CaseError
        Key ``grid``: ``needs about X GiB on <device> but only Y GiB is free``.
    """
    est = estimate_memory(case)
    if available is None:
        available, device = available_memory(backend)
    else:
        device = backend.memory_place
    est["available"] = available
    if available is not None and est["total"] > SAFETY * available:
        g = case.grid
        # Largest square-ish grid that would fit, for the message.
        fit = max(0, (SAFETY * available - FIXED_BYTES)
                  / (est["total"] - FIXED_BYTES) * est["cells"])
        raise CaseError.from_runtime(
            case, "grid",
            f"{' x '.join(map(str, g.cells))} needs about {est['total'] / _GIB:.3g} GiB on {device} "
            f"but only {available / _GIB:.3g} GiB is free",
            f"a smaller grid (about {fit:.3g} cells or fewer here)",
            value=list(g.cells))
    return est
