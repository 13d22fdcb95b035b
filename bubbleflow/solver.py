"""The pressure solver: preconditioner and deflation set up once per operator.

:class:`PressureSolver` is what a time step uses: build it for an operator
(and interface), then call :meth:`PressureSolver.solve` for each right-hand
side.  The set-up time (preconditioner factorisation, deflation space,
coarse factorisation) is measured and reported in every solve record.
"""
from __future__ import annotations

import time

from .deflation import make_deflation
from .krylov import _solve
from .precond import make_preconditioner

__all__ = ["PressureSolver", "METHODS", "VARIANTS"]

METHODS = ("cg", "pcg", "dpcg")
VARIANTS = ("adef2", "def1")


class PressureSolver:
    """CG, PCG or DPCG for one pressure operator.

    Parameters
    ----------
    A : PoissonOperator
    method : {"cg", "pcg", "dpcg"}
    preconditioner : str
        A name from :data:`bubbleflow.precond.PRECONDITIONERS`.
    deflation : str
        ``none``, ``subdomains``, ``stripes`` or ``levelset_subdomains``.
    phi : array, optional
        Level set (grid-shaped), needed by ``levelset_subdomains``.
    block_lines : int
        Grid lines per block for ``block_ic``.
    subdomains : (px, py)
    stripes : int
    variant : {"adef2", "def1"}
    rtol, atol, maxiter, check_every
        Passed to the Krylov solver.
    """

    def __init__(self, A, method="dpcg", preconditioner="incomplete_poisson_scaled",
                 deflation="levelset_subdomains", phi=None, block_lines=2, subdomains=(16, 16),
                 stripes=16, variant="adef2", rtol=1e-8, atol=0.0, maxiter=10000, check_every=10):
        if method not in METHODS:
            raise ValueError(f"method {method!r}; expected one of {METHODS}")
        if method == "cg" and preconditioner != "none":
            raise ValueError("method 'cg' takes no preconditioner; use 'pcg'")
        if method != "dpcg" and deflation != "none":
            raise ValueError(f"method {method!r} takes no deflation; use 'dpcg'")
        if method == "dpcg" and deflation == "none":
            raise ValueError("method 'dpcg' needs a deflation space")
        self.A = A
        self.method = method
        self.variant = variant
        self.rtol, self.atol, self.maxiter, self.check_every = rtol, atol, maxiter, check_every
        backend = A.backend
        t0 = time.perf_counter()
        options = {"block_lines": block_lines} if preconditioner == "block_ic" else {}
        if preconditioner == "jacobi":
            options = {"check": False}          # checked after the one synchronisation
        # The deflation space, then the preconditioner, whose device work runs
        # while the host prepares the coarse factorisation; one synchronisation.
        self.deflation = make_deflation(deflation, A, phi=phi, subdomains=subdomains,
                                        stripes=stripes, factorise=False)
        self.M = make_preconditioner(preconditioner, A, **options)
        self.preconditioner_name = preconditioner
        if self.deflation is not None:
            self.deflation.factorise()
        backend.synchronize()
        self.M.check()
        self.setup_seconds = time.perf_counter() - t0

    @classmethod
    def from_config(cls, A, solver_cfg, phi=None):
        """Build from the ``solver`` section of a case."""
        return cls(A, method=solver_cfg.method, preconditioner=solver_cfg.preconditioner.type,
                   deflation=solver_cfg.deflation.type, phi=phi,
                   block_lines=solver_cfg.preconditioner.block_lines,
                   subdomains=tuple(solver_cfg.deflation.subdomains),
                   stripes=solver_cfg.deflation.stripes, variant=solver_cfg.variant,
                   rtol=solver_cfg.rtol, atol=solver_cfg.atol, maxiter=solver_cfg.maxiter,
                   check_every=solver_cfg.check_every)

    def solve(self, b, x0=None, callback=None):
        """Solve ``A x = b``; returns ``(x, SolveRecord)``.

        ``b`` may be flat or grid-shaped; ``x`` has the shape of ``b``.
        """
        shape = b.shape
        M = None if self.preconditioner_name == "none" else self.M
        x, record = _solve(self.A, b, x0, self.rtol, self.atol, self.maxiter, M, callback,
                           self.deflation, self.variant, self.check_every, "auto", self.method)
        record.setup_seconds += self.setup_seconds
        if self.preconditioner_name == "none":
            record.preconditioner = "none"
        return x.reshape(shape), record

    def __repr__(self):
        d = self.deflation
        return (f"<PressureSolver {self.method} M={self.preconditioner_name} "
                f"deflation={getattr(d, 'kind', 'none')}({getattr(d, 'k', 0)})>")
