"""What one solve did: :class:`SolveRecord`, and how a solve closes it."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolveRecord", "SolveInfo", "REASONS", "BREAKDOWN_INFO", "close_record"]

REASONS = ("converged", "maxiter", "stagnation", "breakdown", "non-finite")
#: SciPy's ``info`` for a breakdown (its BiCGSTAB's value; its CG has none).
BREAKDOWN_INFO = -10


@dataclass
class SolveRecord:
    """What happened in one solve.

    Attributes
    ----------
    iterations : int
        Krylov iterations done.
    residual : float
        Final TRUE relative residual ``||b - A x|| / ||b||`` of the returned x.
    converged : bool
    reason : str
        One of ``converged``, ``maxiter``, ``stagnation``, ``breakdown``,
        ``non-finite``.
    residual_history : ndarray
        Relative recursive residual after each iteration (entry 0: start).
    true_residual_checks : list of (iteration, relative true residual)
    setup_seconds, solve_seconds : float
    engine : str
        ``generic`` (the backend loop) or ``fused`` (:mod:`bubbleflow.linalg.fused.engine`).
    bytes_per_iteration : int
        Device traffic of one fused iteration (our count; 0 for generic).
    precision : str
        ``float64``, or ``float32`` for the mixed-precision refinement of
        :class:`bubbleflow.PressureSolver` (float32 inner solves, float64
        residuals): ``iterations`` then counts all inner iterations,
        ``residual_history`` is theirs end to end, in units of ``||b||``,
        and ``true_residual_checks`` holds the float64 checks.
    refinements : int
        Float32 corrections made (0 in float64).
    inner_iterations : list of int
        Iterations of each float32 correction.
    rhs_mean_removed : float
        With the constant null space: the mean removed from ``b`` to make it
        compatible.
    rhs_norm : float
        ``||b||`` of the system solved (the compatible ``b``): the unit of
        the relative figures.
    rhs_removed_fraction : float
        That removed part's norm as a fraction of ``||b||`` (0: ``b`` was
        compatible).  Above ``rtol`` the solve warns: ``residual`` is then
        relative to the projected ``b``.
    """

    iterations: int = 0
    residual: float = math.nan
    converged: bool = False
    reason: str = "maxiter"
    residual_history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    true_residual_checks: list = field(default_factory=list)
    setup_seconds: float = 0.0
    solve_seconds: float = 0.0
    method: str = "cg"
    preconditioner: str = "none"
    deflation: str = "none"
    deflation_vectors: int = 0
    variant: str = ""
    rtol: float = 0.0
    rhs_mean_removed: float = 0.0
    engine: str = "generic"
    bytes_per_iteration: int = 0
    precision: str = "float64"
    refinements: int = 0
    inner_iterations: list = field(default_factory=list)
    rhs_removed_fraction: float = 0.0
    rhs_norm: float = 0.0

    @property
    def info(self) -> int:
        """SciPy's ``info``: 0 converged; > 0 not converged (``maxiter`` or
        ``stagnation``), the iterations done, at least 1 (SciPy gives 0
        for ``maxiter=0``, which reads as success); :data:`BREAKDOWN_INFO`
        for a breakdown or a non-finite value."""
        if self.converged:
            return 0
        if self.reason in ("maxiter", "stagnation"):
            return max(self.iterations, 1)
        return BREAKDOWN_INFO

    def relative_to(self, norm_solved, norm_reported, rtol):
        """Re-express the relative figures (residual, history, checks) against
        another norm: a solve of ``A d = r`` for an increment ``d`` measured
        as one of ``A x = b`` (``norm_solved = ||r||``, ``norm_reported =
        ||b||``, ``rtol`` the tolerance on ``||b||``)."""
        scale = float(norm_solved) / float(norm_reported)
        self.residual = self.residual * scale
        self.residual_history = np.asarray(self.residual_history) * scale
        self.true_residual_checks = [(it, res * scale) for it, res in self.true_residual_checks]
        self.rhs_mean_removed = self.rhs_mean_removed * scale
        self.rtol = float(rtol)
        return self

    def summary(self) -> str:
        status = "converged" if self.converged else f"FAILED ({self.reason})"
        if self.reason == "stagnation" and self.rtol > 0:
            status += (f" at the attainable accuracy (about {self.residual:.1e}, above rtol "
                       f"{self.rtol:.1e})")
        return (f"{status}: {self.iterations} iterations, true relative residual "
                f"{self.residual:.3e}, setup {self.setup_seconds:.3f} s, solve {self.solve_seconds:.3f} s")


def close_record(record, backend, t_solve, iterations, residual, reason, history):
    """The outcome of a solve into ``record``, timed after the device is done."""
    backend.synchronize()
    record.solve_seconds = time.perf_counter() - t_solve
    record.iterations = iterations
    record.residual = residual
    record.converged = reason == "converged"
    record.reason = reason
    record.residual_history = history


class SolveInfo(int):
    """SciPy's ``info`` integer that also carries the solve's :class:`SolveRecord`.

    ``x, info = bubbleflow.cg(A, b)`` works as with SciPy: ``info == 0`` and
    ``not info`` mean converged, ``info > 0`` gives the iterations of an
    unconverged solve, ``info < 0`` a breakdown.  Every field of the record
    is an attribute (``info.converged``, ``info.residual``,
    ``info.residual_history``, ...), and ``info.record`` is the record itself.

    >>> info = SolveInfo(SolveRecord(iterations=7, converged=True, reason="converged"))
    >>> info == 0, bool(info), info.iterations, str(info)
    (True, False, 7, '0')
    """

    def __new__(cls, record, value=None):
        obj = super().__new__(cls, record.info if value is None else value)
        obj.record = record
        return obj

    def __getattr__(self, name):
        # Called only for names the int lacks: the record's fields.
        record = self.__dict__.get("record")
        if record is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(record, name)

    def __reduce__(self):
        return (SolveInfo, (self.record, int(self)))

    def __repr__(self):
        return f"SolveInfo({int(self)}, {self.record.summary()})"

    __str__ = int.__repr__

    def summary(self) -> str:
        return self.record.summary()
