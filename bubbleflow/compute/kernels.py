"""Old import path of :func:`bubbleflow.compute.sparse.csr_matvec` (kept
while other modules switch to :mod:`bubbleflow.compute.sparse`)."""
from .sparse import CSR_BLOCK_ROW_NNZ, csr_matvec

__all__ = ["csr_matvec", "CSR_BLOCK_ROW_NNZ"]
