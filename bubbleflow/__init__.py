"""bubbleflow: two-phase bubbly-flow pressure solves on NumPy or CuPy.

The solver pieces can be used from your own code::

    from bubbleflow import cg, dpcg, PoissonOperator, make_deflation, make_preconditioner

``cg`` and ``dpcg`` take SciPy's arguments (``x0, rtol, atol, maxiter, M,
callback``) and also accept SciPy or CuPy sparse matrices.

A result file opens as labelled arrays (with the ``xarray`` extra)::

    from bubbleflow import open_result
    ds = open_result("outputs/bubbly_column.h5")     # an xarray.Dataset
"""
import time as _time

__version__ = "0.1.0"
#: ``time.perf_counter()`` when the package was first imported: where
#: ``bubbleflow run --profile`` starts the start-up's clock.
IMPORTED = _time.perf_counter()

from .compute.backend import Backend, BackendUnavailable, get_backend
from .linalg.deflation.space import Deflation, make_deflation
from .mesh.grid import Grid
from .linalg.functions import cg, dpcg, pcg
from .linalg.baselines import bicgstab, gauss_seidel, jacobi
from .linalg.krylov import SolveRecord
from .linalg.krylov.record import SolveInfo
from .operators.poisson import PoissonOperator, assemble_pressure_operator, gravity_rhs
from .linalg.precond import make_preconditioner
from .case.problem import bubbly_column
from .linalg.solver import PressureSolver
from .io.xarray_view import open_result

__all__ = [
    "__version__", "Backend", "BackendUnavailable", "get_backend", "Grid", "PoissonOperator",
    "assemble_pressure_operator", "gravity_rhs", "make_preconditioner", "Deflation",
    "make_deflation", "cg", "pcg", "dpcg", "bicgstab", "jacobi", "gauss_seidel", "SolveRecord",
    "SolveInfo", "PressureSolver", "bubbly_column", "open_result",
]
