"""Jacobi (diagonal) preconditioning, ``M^-1 = D^-1``."""
from __future__ import annotations

from ..backend import backend_of
from .base import Preconditioner


class Jacobi(Preconditioner):
    """``M^-1 = D^-1``; works for the grid operator and any sparse matrix."""

    name = "jacobi"

    def __init__(self, A):
        if hasattr(A, "diagonal"):
            d = A.diagonal()
        else:
            raise TypeError(f"jacobi needs a matrix with .diagonal(); got {type(A).__name__}")
        xp = backend_of(d).xp
        d = xp.asarray(d).ravel()
        if bool((d <= 0).any()):
            raise ValueError("jacobi: the matrix has a non-positive diagonal entry")
        self.inv_diagonal = 1.0 / d

    def apply(self, r):
        return self.inv_diagonal * r
