"""CUDA twins of the 5-point pressure operator (CuPy): its assembly from the
face densities and its apply.  Registered on the array-code references in
:mod:`bubbleflow.operators.poisson` (the tests compare the two on the GPU);
the kernels are ``assembly.cu``, ``stencil5.cu`` and (3-D) ``stencil7.cu``
beside this file.
"""
from __future__ import annotations

import numpy as np

from ..compute import cuda

__all__ = ["op_diagonals", "face_couplings", "stencil5_diagonals", "stencil5_faces",
           "stencil7_faces", "stencil7_diagonals"]

_THREADS = 256
#: Threads of a block of the stencil kernels (x, then rows).
_BLOCK = (32, 8)


@cuda.kernel_cache
def _stencil_kernel(name, dtype):
    code = f"typedef {cuda.CTYPE[dtype]} T;\n" + cuda.source(__name__, "stencil5.cu")
    return cuda.raw_kernel(code, name)



@cuda.kernel_cache
def _assembly_kernel():
    return cuda.function(cuda.source(__name__, "assembly.cu"), "bf_op_diagonals",
                         options=("-std=c++14",))


def _cells_2d(nx, ny):
    """Launch shape of a ``BF_CELLS`` kernel over ``nx`` by ``ny`` cells."""
    return cuda.grid_2d(nx, ny, _BLOCK)


def _cells_3d(nx, ny, nz):
    """Launch shape of a ``BF_CELLS3`` kernel over ``nx`` by ``ny`` by ``nz`` cells."""
    return cuda.grid_2d(nx, ny * nz, _BLOCK)


def _right_hand_side(b, x):
    """``b`` as the residual kernels read it (C-contiguous, ``x``'s dtype), or
    the NULL pointer that makes them give the product alone."""
    import cupy

    if b is None:
        return np.uint64(0)
    return cupy.ascontiguousarray(b, dtype=x.dtype).reshape(x.shape)


def stencil5_diagonals(diagonals, x, y, b=None):
    """``y = A x``, or with ``b`` the residual ``y = b - A x`` in the same
    pass, for ``A`` stored as five diagonals ``(S, W, C, E, N)`` (CuPy, ``x``
    and ``y`` (ny, nx)); twin: ``poisson.apply_diagonals``."""
    import cupy

    x = cupy.ascontiguousarray(x)
    ny, nx = x.shape
    k = _stencil_kernel("bubbleflow_stencil5_diagonals", str(x.dtype))
    S, W, C, E, N = diagonals
    k(*_cells_2d(nx, ny), (S, W, C, E, N, x, _right_hand_side(b, x), y, np.int32(nx),
                           np.int32(ny)))
    return y


def stencil5_faces(cx, cy, x, y, b=None):
    """``y = A x`` (with ``b``: ``b - A x``) applied matrix-free from the
    face couplings (CuPy, ``x`` and ``y`` (ny, nx)); twin:
    ``poisson.apply_faces``."""
    import cupy

    x = cupy.ascontiguousarray(x)
    ny, nx = x.shape
    k = _stencil_kernel("bubbleflow_stencil5_faces", str(x.dtype))
    k(*_cells_2d(nx, ny), (cx, cy, x, _right_hand_side(b, x), y, np.int32(nx), np.int32(ny)))
    return y


@cuda.kernel_cache
def _stencil7_kernel(dtype):
    code = f"typedef {cuda.CTYPE[dtype]} T;\n" + cuda.source(__name__, "stencil7.cu")
    return cuda.raw_kernel(code, "bubbleflow_stencil7_faces")


def stencil7_faces(cx, cy, cz, x, y, b=None):
    """``y = A x`` (with ``b``: ``b - A x`` in the same pass) for the 3-D
    operator, matrix free from the face couplings (CuPy, ``x`` and ``y``
    (nz, ny, nx), C-contiguous couplings); twin: ``poisson.apply_faces``."""
    import cupy

    x = cupy.ascontiguousarray(x)
    nz, ny, nx = x.shape
    k = _stencil7_kernel(str(x.dtype))
    args = [cupy.ascontiguousarray(c, dtype=x.dtype) for c in (cx, cy, cz)]
    k(*_cells_3d(nx, ny, nz), (*args, x, _right_hand_side(b, x), y, np.int32(nx),
                               np.int32(ny), np.int32(nz)))
    return y


@cuda.kernel_cache
def _stencil7_diagonals_kernel(dtype):
    code = f"typedef {cuda.CTYPE[dtype]} T;\n" + cuda.source(__name__, "stencil7.cu")
    return cuda.raw_kernel(code, "bubbleflow_stencil7_diagonals")


def stencil7_diagonals(diagonals, x, y, b=None):
    """``y = A x`` (with ``b``: ``b - A x``) for the 3-D operator stored as
    seven diagonals ``(B, S, W, C, E, N, T)`` (CuPy, all (nz, ny, nx));
    twin: ``poisson.apply_diagonals``."""
    import cupy

    x = cupy.ascontiguousarray(x)
    nz, ny, nx = x.shape
    k = _stencil7_diagonals_kernel(str(x.dtype))
    args = [cupy.ascontiguousarray(d, dtype=x.dtype) for d in diagonals]
    k(*_cells_3d(nx, ny, nz), (*args, x, _right_hand_side(b, x), y, np.int32(nx),
                               np.int32(ny), np.int32(nz)))
    return y


def op_diagonals(beta_x, beta_y, hx, hy, reciprocal=False):
    """The five diagonals ``(S, W, C, E, N)`` (CuPy, float64) from the face
    ``beta = 1/rho`` (or from ``rho`` with ``reciprocal``): one pass (twin:
    ``poisson.diagonals_from_faces``, equal bit for bit)."""
    import cupy as cp

    beta_x = cp.ascontiguousarray(beta_x, dtype=cp.float64)
    beta_y = cp.ascontiguousarray(beta_y, dtype=cp.float64)
    ny, nx = beta_x.shape[0], beta_x.shape[1] + 1
    out = [cp.empty((ny, nx), dtype=cp.float64) for _ in range(5)]
    kernel = _assembly_kernel()
    kernel(cuda.rows_grid(nx, ny, _THREADS), (_THREADS,),
           (beta_x, beta_y, np.float64(float(hx) ** 2), np.float64(float(hy) ** 2),
            *out, np.int32(nx), np.int32(ny), np.int32(bool(reciprocal))))
    return tuple(out)


@cuda.kernel_cache
def _couplings_kernel(reciprocal):
    # Two divisions as the array code writes them (no contraction to fuse).
    operation = "y = (1.0 / b) / hh" if reciprocal else "y = b / hh"
    return cuda.elementwise("float64 b, float64 hh", "float64 y", operation,
                            f"bf_face_couplings_{int(reciprocal)}")


def face_couplings(beta, h, reciprocal=False, out=None):
    """The face couplings ``beta / h^2`` (``1 / beta`` first with
    ``reciprocal``) of float64 CuPy ``beta``, in one pass, into ``out``
    where given (a float64 array of ``beta``'s shape), else a new array
    (twin: ``poisson.face_couplings``, equal bit for bit)."""
    import cupy as cp

    if out is None:
        out = cp.empty(beta.shape, dtype=cp.float64)
    _couplings_kernel(bool(reciprocal))(beta, np.float64(float(h) ** 2), out)
    return out
