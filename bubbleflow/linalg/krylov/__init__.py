"""Conjugate-gradient solvers: CG, PCG and deflated PCG (DEF1 and A-DEF2).

All solvers follow SciPy's conventions::

    x, record = cg(A, b, x0=None, *, rtol=1e-5, atol=0., maxiter=None, M=None, callback=None)
    x, record = dpcg(A, b, x0=None, *, deflation=..., variant="adef2", ...)

``A`` is a :class:`bubbleflow.PoissonOperator`, a SciPy or CuPy sparse
matrix, or anything with ``matvec``; ``M`` a preconditioner name, object,
matrix or callable.  The arrays stay on the backend of ``b`` (NumPy or CuPy).
Instead of SciPy's ``info`` integer they return a :class:`SolveRecord`
(``record.info`` gives SciPy's integer).

The modules, in the order a solve uses them:

``system``    make_system: the checked system, the null-space gauge hook
``engine``    the array engine (the reference) and the deflation variants
``device``    the protocol of engines that run whole iterations on the device
``stopping``  the stopping policy (true-residual confirmation, restarts, ...)
``cg``        the loop, written once (:func:`solve`); the SciPy-style
              functions cg / pcg / dpcg that choose its engine are in
              :mod:`bubbleflow.linalg.functions`
``record``    SolveRecord

Singular systems: with ``nullspace="constant"`` (automatic for the Neumann
pressure operator) the right-hand side is made compatible by removing its
mean, and the answer is gauged to zero mean.  No matrix entry is altered.
"""
from .cg import solve
from .record import REASONS, SolveRecord

__all__ = ["SolveRecord", "solve", "REASONS"]
