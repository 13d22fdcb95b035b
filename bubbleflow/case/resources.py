"""Will a case fit?  A cheap memory estimate, checked before any array exists.

``bubbleflow run`` calls :func:`check_memory` right after choosing the
backend: a grid that cannot fit is refused in one line (exit 2) instead of a
long ``_ArrayMemoryError`` traceback, or, for grids that do not fail at once,
instead of swapping the machine to a halt.  Under ``mpiexec`` each rank
weighs its own slab against its own device's free memory, shared with the
ranks on that device (:func:`memory_refusal`).  Nothing here allocates
arrays or imports the numerics.
"""
from __future__ import annotations

import math

from .config import CaseError

__all__ = ["estimate_memory", "available_memory", "check_memory", "memory_refusal",
           "allowance", "ARRAYS_PER_CELL", "SAFETY"]

#: Grid-sized arrays alive at the peak, in units of one array of the case's
#: precision per cell.  Calibrated on NumPy with tracemalloc (the peak of
#: ``bubbleflow.apps.cli.main(["run", ...])``, float64) as the slope of peak bytes
#: over cells between grid sizes, so that fixed costs cancel (operator
#: diagonals, preconditioner, Krylov vectors and their temporaries; in a flow
#: also the velocities, level set, properties and the momentum and WENO
#: temporaries).  The largest slope measured, rounded up (the slopes:
#: docs/performance_records.md, "Figures behind code choices"); on a GPU the
#: live peak of the CuPy pool, measured the same way, is below these.
ARRAYS_PER_CELL = {"pressure": 32, "flow": 60}
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


def estimate_memory(case, cells=None):
    """Bytes the solver needs on its device for ``case``, without allocating.

    Parameters
    ----------
    case : bubbleflow.case.config.Case
    cells : int, optional
        The cells one process holds (a rank's widened slab); None: the
        whole grid.

    Returns
    -------
    dict
        ``total`` (bytes), ``grid_arrays`` (bytes of the grid-sized arrays),
        ``coarse`` (bytes of the dense coarse matrix and its factor),
        ``cells``, ``arrays_per_cell`` and ``itemsize`` (bytes per value).
    """
    g = case.grid
    cells = math.prod(int(n) for n in g.cells) if cells is None else int(cells)
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
        Key ``grid``: ``needs about X GiB on <device>, more than the Z GiB
        a run may take (80 % of the Y GiB free)``.
    """
    est, refusal = memory_refusal(case, backend, available)
    if refusal is not None:
        problem, expected = refusal
        raise CaseError.from_runtime(case, "grid", problem, expected, value=list(case.grid.cells))
    return est


def memory_refusal(case, backend, available=None, cells=None, sharing=1, ranks=1):
    """``(estimate, refusal)``: the :func:`estimate_memory` result with
    ``available`` added, and None where it fits, else ``(problem,
    expected)`` for the key ``grid``.

    ``cells``: the cells this process holds (None: the whole grid); ``sharing``:
    the processes whose memory is the same free memory (the ranks on one GPU,
    or on one host with NumPy), each allowed its share; ``ranks``: the run's
    ranks, for the message.
    """
    est = estimate_memory(case, cells)
    if available is None:
        available, device = available_memory(backend)
    else:
        device = backend.memory_place
    est["available"] = available
    if available is None or est["total"] <= SAFETY * available / sharing:
        return est, None
    g = case.grid
    dims = " x ".join(map(str, g.cells))
    # The most cells that would fit here, for the message.
    fit = max(0, (SAFETY * available / sharing - FIXED_BYTES)
              / (est["total"] - FIXED_BYTES) * est["cells"])
    if ranks == 1:
        return est, (f"{dims} needs about {est['total'] / _GIB:.3g} GiB on {device}, more than "
                     f"{allowance(available)}",
                     f"a smaller grid (about {fit:.3g} cells or fewer here)")
    return est, (f"{dims} on {ranks} ranks needs about {est['total'] / _GIB:.3g} GiB a rank "
                 f"({est['cells']:.3g} cells of its slab) on {device}, more than "
                 f"{allowance(available, sharing, 'a rank')}",
                 f"a smaller grid or more ranks (about {fit:.3g} cells a rank or fewer here)")


def allowance(available, sharing=1, who="a run"):
    """In words, the part of ``available`` free bytes that ``who`` may take:
    :data:`SAFETY` of them, shared by ``sharing`` processes."""
    share = f", shared by {sharing} ranks" if sharing > 1 else ""
    return (f"the {SAFETY * available / sharing / _GIB:.3g} GiB {who} may take "
            f"({100 * SAFETY:.0f} % of the {available / _GIB:.3g} GiB free{share})")
