"""Everything a solve needs before it iterates, checked in one place (SciPy's
``make_system``): the operator's product, the preconditioner, the deflation
space, the null-space gauge and a compatible copy of the right-hand side."""
from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ...compute.backend import backend_of
from ...compute.mean_removal import minus_mean
from ...compute.transfer import on_device
from .. import registry
from ..deflation.vectors import deflation_from_input
from .record import SolveRecord

__all__ = ["KrylovSystem", "make_system", "residual_of", "check_variant", "check_tolerances", "report_projection", "ConstantNullspace", "NoNullspace", "norm_inf"]


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
    matrix entry is altered.  ``comm``: the ranks' communicator of a
    distributed operator (the mean over every rank's cells, ``size`` of
    them), or None."""

    name = "constant"

    def __init__(self, comm=None, size=None):
        self.comm, self.size = comm, size

    def _mean(self, v):
        if self.comm is None:
            return v.mean()
        return self.comm.allreduce_sum(v.sum()) / self.size

    def remove(self, b):
        """``(b - mean(b), mean(b))``.  Float64: the mean a 0-d array of
        ``b``'s backend, no host synchronisation (the caller reads it later);
        other dtypes: a Python float (subtracted as :meth:`compatible` does)."""
        if self.comm is None and b.dtype == np.float64:
            return minus_mean(b)           # (the copy, in the same pass)
        mean_b = self._mean(b)
        if b.dtype != np.float64:
            mean_b = float(mean_b)
        return b - mean_b, mean_b          # the copy, in the same pass

    def compatible(self, b, record):
        mean_b = float(self._mean(b))
        record.rhs_mean_removed = mean_b
        return b - mean_b                  # the copy, in the same pass

    def gauge(self, x):
        if self.comm is None:
            return minus_mean(x)[0]
        return x - self._mean(x)


NULLSPACES = {None: NoNullspace(), "constant": ConstantNullspace()}


def nullspace_of(A, nullspace, comm=None, size=None):
    """The gauge hook for ``nullspace`` (``"auto"``: ``A.nullspace``);
    ``comm``: a distributed operator's communicator, ``size`` its cells on
    every rank."""
    if nullspace == "auto":
        nullspace = getattr(A, "nullspace", None)
    elif nullspace not in (None, "constant"):
        raise ValueError(f"nullspace={nullspace!r}; expected 'auto', 'constant' or None")
    if nullspace == "constant" and comm is not None:
        return ConstantNullspace(comm, size)
    return NULLSPACES[nullspace]


# ------------------------------------------------------------------- operators
def matvec_of(A):
    """``x -> A x`` for an operator, a matrix or a callable."""
    if hasattr(A, "matvec"):
        return A.matvec
    if callable(A) and not hasattr(A, "shape"):
        return A
    return lambda x: A @ x


def residual_of(A, matvec):
    """``(b, x) -> b - A x``: the operator's own (one pass over the grid,
    :meth:`.PoissonOperator.residual`) where it has one, else from ``matvec``."""
    own = getattr(A, "residual", None)
    return own if own is not None else (lambda b, x: b - matvec(x))


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


def report_projection(record, n, bnorm, tol_rel, stacklevel=4):
    """The part of ``b`` outside the operator's range that the null space
    removed (its mean, for the constant null space), as a fraction of
    ``||b||``, into the record; a warning when it exceeds the relative
    tolerance: the answer then solves the projected system, and
    ``b - A x`` cannot be small.  ``stacklevel``: the warning names the
    user's line (4: called by the loop that the public function calls)."""
    removed = abs(record.rhs_mean_removed) * math.sqrt(n)
    if removed == 0.0:
        return
    record.rhs_removed_fraction = removed / math.hypot(bnorm, removed)
    if record.rhs_removed_fraction > tol_rel:
        warnings.warn(f"{record.method}: b is not compatible with the constant null space: its "
                      f"mean {record.rhs_mean_removed:.3e} ({record.rhs_removed_fraction:.2e} of "
                      "||b||) was removed and the projected system solved (the residual is "
                      "relative to the projected b)", RuntimeWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------- system
def check_variant(variant):
    if variant not in registry.VARIANTS:
        raise ValueError(f"variant={variant!r}; expected "
                         + " or ".join(repr(v) for v in registry.VARIANTS))


def check_tolerances(rtol, atol, maxiter, name="cg"):
    """``(rtol, atol, maxiter)`` as Python numbers, or ValueError (SciPy's
    error type) naming the argument, its value and what was expected."""
    values = []
    for key, value in (("rtol", rtol), ("atol", atol)):
        number = real_scalar(value)
        if number is None or not number >= 0:
            raise ValueError(f"{name}: {key}={value!r}: expected a real, non-negative number")
        values.append(number)
    if maxiter is not None:
        if isinstance(maxiter, (bool, np.bool_)) or not isinstance(maxiter, (int, np.integer)) \
                or maxiter < 0:
            raise ValueError(f"{name}: maxiter={maxiter!r}: expected None or an integer >= 0")
        maxiter = int(maxiter)
    return values[0], values[1], maxiter


def real_scalar(value):
    """``value`` as a float if it is a real number (Python, NumPy or a 0-d
    array), else None."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if getattr(value, "shape", None) == () and getattr(value, "dtype", None) is not None \
            and np.dtype(value.dtype).kind in "iuf":
        return float(value)
    return None


def _refuse_complex(name, what, dtype):
    if dtype is not None and np.dtype(dtype).kind == "c":
        raise ValueError(f"{name}: {what} is {np.dtype(dtype)}: the solvers are real "
                         "(complex systems are refused: solve the real and imaginary parts "
                         "as two real systems when A is real)")


def _square_size(A, name):
    """``n`` for an ``n x n`` operator, None when ``A`` has no shape (a
    callable); ValueError for any other shape."""
    shape = getattr(A, "shape", None)
    if shape is None:
        if callable(A) or hasattr(A, "matvec"):
            return None
        raise ValueError(f"{name}: A is a {type(A).__name__}: expected a matrix, a sparse "
                         "matrix, a LinearOperator, a PoissonOperator or a callable")
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name}: A has shape {shape}: expected a square matrix (n, n)")
    return int(shape[0])


def _vector(v, n, xp, what, name, grid_shape=None):
    """``v`` as a flat array of ``xp`` (shape ``(n,)`` or ``(n, 1)`` accepted,
    or the grid's shape for a grid operator)."""
    try:
        v = xp.asarray(v)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {what} is not an array of numbers ({exc})") from None
    _refuse_complex(name, what, v.dtype)
    if v.dtype.kind not in "iuf" and v.dtype.kind != "b":
        raise ValueError(f"{name}: {what} has dtype {v.dtype}: expected real numbers")
    size = v.size if n is None else n
    if v.shape not in ((size,), (size, 1)) and v.shape != grid_shape:
        expected = "(n,) or (n, 1)" if n is None else f"({n},) or ({n}, 1)"
        raise ValueError(f"{name}: {what} has shape {tuple(v.shape)}: expected {expected}")
    return v.ravel()


@dataclass
class KrylovSystem:
    """A checked system: ``b`` compatible (a copy), the pieces as callables."""

    A: object
    b: object
    matvec: object
    residual: object                # (b, x) -> b - A x
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
    x0: object = None               # the starting guess (a copy, b's dtype), or None
    comm: object = None             # a distributed operator's communicator, or None
    size: int = 0                   # the unknowns over every rank


def _unknowns(A, n, comm):
    """The unknowns over every rank of a rank's operator with ``n`` rows:
    the cells of a slab's grid (the ranks' slabs partition it: no
    collective, so a solve's set-up does not wait for the other ranks),
    else the ranks' sum."""
    slab = getattr(A, "slab", None)
    shape = getattr(slab, "shape", None)
    return int(np.prod(shape)) if shape is not None else comm.sum_int(n)


def make_system(A, b, M, deflation, variant, nullspace, maxiter, check_every, callback,
                record_fields, x0=None):
    """``(KrylovSystem, SolveRecord)``: the set-up of a solve, timed into the record
    (host time: nothing here waits for the device).

    Every input is checked before any work (SciPy's error types): ``A``
    square (or a callable), ``b`` and ``x0`` of shape ``(n,)`` or ``(n, 1)``
    and real, ``M`` of ``A``'s shape when it has one, no complex value
    anywhere (refused, never cast).  ``x0`` may be ``"Mb"`` (``M^-1 b``, as
    SciPy).  ``record_fields`` are the record's ``method`` and ``rtol``.
    The mean removed from ``b`` stays on the device (``system.rhs_mean``):
    the solve reads it with its first host check and puts it into the record.
    """
    t_setup = time.perf_counter()
    name = record_fields.get("method", "cg")
    n = _square_size(A, name)
    _refuse_complex(name, "A", getattr(A, "dtype", None))
    backend = backend_of(b)
    xp = backend.xp
    grid_shape = tuple(A.grid_shape) if hasattr(A, "grid_shape") else None
    b = _vector(b, n, xp, "b", name, grid_shape)   # the caller's b is never changed: copied below
    if b.dtype.kind != "f":
        b = b.astype(np.float64)
    n = b.size
    m_shape = getattr(M, "shape", None) if not isinstance(M, str) else None
    if m_shape is not None and tuple(m_shape) != (n, n):
        raise ValueError(f"{name}: M has shape {tuple(m_shape)}: expected ({n}, {n}), A's shape")
    _refuse_complex(name, "M", getattr(M, "dtype", None) if not isinstance(M, str) else None)
    if isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"{name}: x0={x0!r}: expected None, an array or 'Mb'")
    if x0 is not None and not isinstance(x0, str):
        x0 = _vector(x0, n, xp, "x0", name, grid_shape).astype(b.dtype, copy=True)
        if not on_device(backend) and not x0.any():
            x0 = None                        # as SciPy: no product for a zero guess
    matvec = matvec_of(A)
    prec, prec_name, prec_obj = preconditioner_of(M, A)
    comm = getattr(A, "comm", None)           # a distributed operator's ranks
    if comm is not None and deflation is not None and getattr(deflation, "comm", None) is not comm:
        raise ValueError(f"{name}: on several ranks the deflation is a DistributedDeflation "
                         "of the same operator (bubbleflow.linalg.deflation.distributed)")
    defl = deflation_from_input(deflation, A)
    size = n if comm is None else _unknowns(A, n, comm)
    gauge = nullspace_of(A, nullspace, comm, size)
    if maxiter is None:
        maxiter = 10 * size
    check_every = max(1, int(check_every))
    if callback is not None:
        check_every = 1          # the callback sees every iteration: none may be a frozen one
    record = SolveRecord(preconditioner=prec_name,
                         deflation=getattr(defl, "kind", "none") if defl is not None else "none",
                         deflation_vectors=defl.n_vectors if defl is not None else 0,
                         variant=variant if defl is not None else "", **record_fields)
    b, rhs_mean = gauge.remove(b)
    if isinstance(x0, str):                  # "Mb"
        x0 = xp.asarray(prec(b), dtype=b.dtype).ravel().copy()
    record.setup_seconds = time.perf_counter() - t_setup
    system = KrylovSystem(A=A, b=b, matvec=matvec, residual=residual_of(A, matvec), prec=prec,
                          prec_name=prec_name, prec_obj=prec_obj,
                          deflation=defl, nullspace=gauge, backend=backend, maxiter=maxiter,
                          check_every=check_every, variant=variant, rhs_mean=rhs_mean, x0=x0,
                          comm=comm, size=size)
    return system, record
