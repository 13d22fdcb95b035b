"""Sparse products in a fixed order of summation (reproducible bit for bit).

:func:`fixed_order_dot` is a twin (:mod:`bubbleflow.compute.twins`): the
reference is ``M @ v``; on CuPy a CSR matrix goes through
:func:`bubbleflow.compute.sparse.csr_matvec` (CuPy's own product varies from
run to run in the last bits).
"""
from __future__ import annotations

from .twins import twin

__all__ = ["fixed_order_dot"]


@twin
def fixed_order_dot(M, v):
    """``M @ v``, the same bits in every run.

    >>> import numpy as np, scipy.sparse as sp
    >>> fixed_order_dot(sp.identity(3, format="csr"), np.arange(3.0))
    array([0., 1., 2.])
    """
    return M @ v


@fixed_order_dot.register("cupy")
def _fixed_order_dot_cuda(M, v):
    if getattr(M, "format", None) != "csr" or not type(M).__module__.startswith("cupyx"):
        return NotImplemented
    from .sparse import csr_matvec

    return csr_matvec(M, v)
