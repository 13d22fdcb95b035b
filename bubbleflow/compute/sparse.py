"""Sparse products on the CuPy backend, reproducible bit for bit.

``csr_matvec.cu`` beside this file; the twin of :func:`csr_matvec` is
``A @ x`` (SciPy or CuPy).
"""
from __future__ import annotations

import numpy as np

from . import cuda

__all__ = ["csr_matvec", "fixed_order_dot", "CSR_BLOCK_ROW_NNZ"]


@cuda.kernel_cache
def _kernel(name, dtype):
    code = f"typedef {cuda.CTYPE[dtype]} T;\n" + cuda.source(__name__, "csr_matvec.cu")
    return cuda.raw_kernel(code, name)


#: Rows with at least this many entries on average get a block each.
CSR_BLOCK_ROW_NNZ = 32


def csr_matvec(A, x):
    """``A @ x`` for a CuPy CSR matrix, bit for bit the same in every run.

    CuPy's own product adds in an order that varies from run to run (seen
    with ``(A Z)^T``: docs/performance_records.md), which made restarted solves
    irreproducible.  One thread per row,
    or one block per row where rows average :data:`CSR_BLOCK_ROW_NNZ`
    entries or more.  Its twin is ``A @ x`` (SciPy or CuPy).
    """
    import cupy

    nrows = int(A.shape[0])
    dtype = np.result_type(A.dtype, x.dtype)
    if str(dtype) not in cuda.CTYPE or A.nnz >= 2 ** 31:
        return A @ x
    indptr = A.indptr if A.indptr.dtype == np.int32 else A.indptr.astype(np.int32)
    indices = A.indices if A.indices.dtype == np.int32 else A.indices.astype(np.int32)
    data = A.data.astype(dtype, copy=False)
    xv = cupy.ascontiguousarray(x.astype(dtype, copy=False)).ravel()
    y = cupy.empty(nrows, dtype=dtype)
    if nrows == 0:
        return y
    args = (indptr, indices, data, xv, y, np.int64(nrows))
    if A.nnz >= CSR_BLOCK_ROW_NNZ * nrows:
        k = _kernel("bubbleflow_csr_matvec_block", str(dtype))
        k((min(nrows, 65535 * 8),), (128,), args)
    else:
        k = _kernel("bubbleflow_csr_matvec_thread", str(dtype))
        cuda.launch_1d(k, nrows, args)
    return y


def fixed_order_dot(M, v):
    """``M @ v``; for a CuPy CSR matrix in a fixed order of summation
    (:func:`csr_matvec`: CuPy's product varies from run to run in the last
    bits)."""
    if type(M).__module__.startswith("cupyx") and getattr(M, "format", None) == "csr":
        return csr_matvec(M, v)
    return M @ v
