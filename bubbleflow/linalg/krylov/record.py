"""What one solve did: :class:`SolveRecord`, and how a solve closes it."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolveRecord", "REASONS", "close_record"]

REASONS = ("converged", "maxiter", "stagnation", "breakdown", "non-finite")


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

    @property
    def info(self) -> int:
        """SciPy's convention: 0 converged, >0 iterations without convergence, <0 breakdown."""
        if self.converged:
            return 0
        if self.reason in ("maxiter", "stagnation"):
            return max(self.iterations, 1)
        return -1

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
