"""Jacobi (diagonal) preconditioning, ``M^-1 = D^-1``."""
from __future__ import annotations

import numpy as np

from ...compute.backend import backend_of
from ...compute.truth import any_true
from .base import Preconditioner


class Jacobi(Preconditioner):
    """``M^-1 = D^-1``; works for the grid operator and any sparse matrix.

    Attributes
    ----------
    inv_diagonal : array (n,), backend
        ``1 / diag(A)``: the whole preconditioner (the fused GPU engine
        applies it from this array in its update kernel).
    """

    name = "jacobi"

    def __init__(self, A, check=True):
        if hasattr(A, "diagonal"):
            d = A.diagonal()
        else:
            raise TypeError(f"jacobi needs a matrix with .diagonal(); got {type(A).__name__}")
        xp = backend_of(d).xp
        d = xp.asarray(d).ravel()
        # check=False: the test of the diagonal (a host synchronisation on the
        # GPU) waits for :meth:`check`, so that the set-up can queue more work.
        self._nonpositive = any_true(d <= 0)
        if check:
            self.check()
        with np.errstate(divide="ignore"):     # a zero is reported by check
            self.inv_diagonal = 1.0 / d

    def check(self, values=None):
        """Raise ValueError if the diagonal has a non-positive entry
        (``values``: the host value of :meth:`check_flags`, else read now)."""
        if self._nonpositive is not None:
            flag, self._nonpositive = self._nonpositive, None
            bad = bool(np.asarray(values[0]).ravel()[0]) if values is not None else bool(flag)
            if bad:
                raise ValueError("jacobi: the matrix has a non-positive diagonal entry")

    def check_flags(self):
        """The pending test of the diagonal (a 0-d array), if any."""
        return [] if self._nonpositive is None else [self._nonpositive]

    def apply(self, r):
        return self.inv_diagonal * r
