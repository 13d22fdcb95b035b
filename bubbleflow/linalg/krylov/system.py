"""Everything a solve needs before it iterates, checked in one place (SciPy's
``make_system``): the operator's product, the preconditioner, the deflation
space, the null-space gauge and a compatible copy of the right-hand side."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...compute.backend import backend_of
from .. import registry
from .record import SolveRecord

__all__ = ["KrylovSystem", "make_system", "check_variant", "ConstantNullspace", "NoNullspace", "norm_inf"]


# ----------------------------------------------------------------- null space
class NoNullspace:
    """A nonsingular system: ``b`` as it is (a copy), the answer as it is."""

    name = None

    def remove(self, b):
        """``(b, None)``: a copy of ``b``, nothing removed."""
        return b.copy(), None

    def compatible(self, b, record):
        return b.copy()

    def gauge(self, x):
        return x


class ConstantNullspace:
    """Constants in the null space (the pure-Neumann pressure operator): the
    right-hand side loses its mean, the answer is gauged to zero mean.  No
    matrix entry is altered."""

    name = "constant"

    def remove(self, b):
        """``(b - mean(b), mean(b))``.  Float64: the mean a 0-d array of
        ``b``'s backend, no host synchronisation (the caller reads it later);
        other dtypes: a Python float (subtracted as :meth:`compatible` does)."""
        mean_b = b.mean()
        if b.dtype != np.float64:
            mean_b = float(mean_b)
        return b - mean_b, mean_b          # the copy, in the same pass

    def compatible(self, b, record):
        mean_b = float(b.mean())
        record.rhs_mean_removed = mean_b
        return b - mean_b                  # the copy, in the same pass

    def gauge(self, x):
        return x - x.mean()


NULLSPACES = {None: NoNullspace(), "constant": ConstantNullspace()}


def nullspace_of(A, nullspace):
    """The gauge hook for ``nullspace`` (``"auto"``: ``A.nullspace``)."""
    if nullspace == "auto":
        nullspace = getattr(A, "nullspace", None)
    elif nullspace not in (None, "constant"):
        raise ValueError(f"nullspace={nullspace!r}; expected 'auto', 'constant' or None")
    return NULLSPACES[nullspace]


# ------------------------------------------------------------------- operators
def matvec_of(A):
    """``x -> A x`` for an operator, a matrix or a callable."""
    if hasattr(A, "matvec"):
        return A.matvec
    if callable(A) and not hasattr(A, "shape"):
        return A
    return lambda x: A @ x


def preconditioner_of(M, A):
    """A function r -> M^-1 r, a name for the record, and the object (or None)."""
    if M is None:
        return (lambda r: r), "none", None
    if isinstance(M, str):
        from ..precond import make_preconditioner

        P = make_preconditioner(M, A)
        return P.apply, M, P
    if hasattr(M, "apply"):
        return M.apply, getattr(M, "name", type(M).__name__), M
    if hasattr(M, "matvec"):
        return M.matvec, getattr(M, "name", type(M).__name__), None
    if callable(M) and not hasattr(M, "shape"):
        return M, getattr(M, "__name__", "callable"), None
    return (lambda r: M @ r), type(M).__name__, None


def deflation_of(deflation, A):
    """A :class:`~bubbleflow.linalg.deflation.space.Deflation` (or None) from a
    space or one label per unknown."""
    from ..deflation.space import Deflation

    if deflation is None or isinstance(deflation, Deflation):
        return deflation
    return Deflation(A, deflation, kind="labels")


def norm_inf(A):
    """Largest absolute row sum of ``A`` when it is cheap to get, else None."""
    if hasattr(A, "norm_inf"):
        return float(A.norm_inf())
    try:
        if hasattr(A, "tocsr") or type(A).__module__.startswith(("scipy.sparse", "cupyx")):
            return float(abs(A).sum(axis=1).max())
        if hasattr(A, "ndim") and A.ndim == 2:
            return float(abs(A).sum(axis=1).max())
    except Exception:
        return None
    return None


# ---------------------------------------------------------------------- system
def check_variant(variant):
    if variant not in registry.VARIANTS:
        raise ValueError(f"variant={variant!r}; expected "
                         + " or ".join(repr(v) for v in registry.VARIANTS))


@dataclass
class KrylovSystem:
    """A checked system: ``b`` compatible (a copy), the pieces as callables."""

    A: object
    b: object
    matvec: object
    prec: object
    prec_name: str
    prec_obj: object
    deflation: object
    nullspace: object
    backend: object
    maxiter: int
    check_every: int
    variant: str
    rhs_mean: object = None         # the mean removed from b (0-d, backend), or None


def make_system(A, b, M, deflation, variant, nullspace, maxiter, check_every, callback,
                record_fields):
    """``(KrylovSystem, SolveRecord)``: the set-up of a solve, timed into the record
    (host time: nothing here waits for the device).

    ``record_fields`` are the record's ``method`` and ``rtol``.  The mean
    removed from ``b`` stays on the device (``system.rhs_mean``): the solve
    reads it with its first host check and puts it into the record.
    """
    t_setup = time.perf_counter()
    backend = backend_of(b)
    xp = backend.xp
    matvec = matvec_of(A)
    prec, prec_name, prec_obj = preconditioner_of(M, A)
    defl = deflation_of(deflation, A)
    gauge = nullspace_of(A, nullspace)
    # The caller's b is never changed: copied below (with the mean removed).
    b = xp.asarray(b).ravel()
    if not np.issubdtype(b.dtype, np.floating):
        b = b.astype(np.float64)
    if maxiter is None:
        maxiter = 10 * b.size
    check_every = max(1, int(check_every))
    if callback is not None:
        check_every = 1          # the callback sees every iteration: none may be a frozen one
    record = SolveRecord(preconditioner=prec_name,
                         deflation=getattr(defl, "kind", "none") if defl is not None else "none",
                         deflation_vectors=defl.n_vectors if defl is not None else 0,
                         variant=variant if defl is not None else "", **record_fields)
    b, rhs_mean = gauge.remove(b)
    record.setup_seconds = time.perf_counter() - t_setup
    system = KrylovSystem(A=A, b=b, matvec=matvec, prec=prec, prec_name=prec_name,
                          prec_obj=prec_obj,
                          deflation=defl, nullspace=gauge, backend=backend, maxiter=maxiter,
                          check_every=check_every, variant=variant, rhs_mean=rhs_mean)
    return system, record
