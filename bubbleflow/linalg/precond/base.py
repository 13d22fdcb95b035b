"""Common pieces of the preconditioners: the interface and stencil helpers."""
from __future__ import annotations


class Preconditioner:
    """Applies an approximation of ``A^-1`` (symmetric positive definite).

    Subclasses set ``name`` and implement :meth:`apply` for flat vectors.
    ``M.matvec(r)``, ``M @ r`` and ``M(r)`` are all :meth:`apply`, so an
    instance can be passed wherever SciPy expects ``M``.
    """

    name = "abstract"

    def apply(self, r):
        raise NotImplementedError

    def refresh(self, A):
        """Take a new operator on the same grid in place, as a new instance
        for ``A`` would be, and return True; False (nothing done) where this
        preconditioner does not (the caller then builds a new one)."""
        return False

    def renew(self):
        """The next :meth:`refresh` is exactly a new instance's (a restart
        begins there); nothing for preconditioners that keep no part of an
        older operator (multigrid may keep its coarsest inverse)."""

    def interface_moved(self, cells):
        """Told before a :meth:`refresh` how many grid cells at most the
        interface has moved since the previous one (None: not known);
        nothing for most preconditioners (multigrid keeps its coarsest
        inverse while it is little)."""

    def solved(self, iterations):
        """Told after each solve how many ``iterations`` it took; nothing
        for most preconditioners (multigrid renews its coarsest inverse
        where they rise)."""

    def prepare(self, b):
        """Called by the Krylov loop before it solves ``A x = b`` (the
        solve's right-hand side, on the device); nothing for most
        preconditioners (multigrid scales its float32 cycle's input)."""

    def check(self, values=None):
        """Raise the error a constructor given ``check=False`` deferred
        (a host synchronisation); nothing for most preconditioners.
        ``values``: the host values of :meth:`check_flags`, read by the
        caller with others in one transfer (None: read here)."""

    def check_flags(self):
        """Device arrays :meth:`check` would read (a caller reads them with
        others in one transfer and passes their values); none here."""
        return []

    def matvec(self, r):
        return self.apply(r)

    def __matmul__(self, r):
        return self.apply(r)

    def __call__(self, r):
        return self.apply(r)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class Identity(Preconditioner):
    """No preconditioning (``M = I``)."""

    name = "none"

    def __init__(self, A=None):
        pass

    def apply(self, r):
        return r.copy()


def require_grid_operator(A, name):
    """The 5-point grid operator behind ``A``, or a clear error."""
    if not hasattr(A, "entries") or not hasattr(A, "grid_shape"):
        raise TypeError(
            f"preconditioner {name!r} needs the 5-point grid operator "
            f"(bubbleflow.PoissonOperator); got {type(A).__name__}. "
            "For a general sparse matrix use 'jacobi' or pass your own M.")
    return A


def lower_neighbours(x, W, S):
    """``W * x[west] + S * x[south]`` on a (ny, nx) grid, zero across walls."""
    out = W * 0
    out[:, 1:] += W[:, 1:] * x[:, :-1]
    out[1:, :] += S[1:, :] * x[:-1, :]
    return out


def upper_neighbours(x, E, N):
    """``E * x[east] + N * x[north]`` on a (ny, nx) grid, zero across walls."""
    out = E * 0
    out[:, :-1] += E[:, :-1] * x[:, 1:]
    out[:-1, :] += N[:-1, :] * x[1:, :]
    return out
